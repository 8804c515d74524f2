// `tessera run`: one-shot generation for people and for tests. Parses and checks the flags
// (ConfigError -> exit 2), loads the model (TESSERA_HOME, default ~/.cache/tessera, is where
// builtin models are generated), builds an engine with a pool just large enough for this one
// request, generates, and prints the text (streamed) or, with --json, one JSON object.
// It must never compute anything itself: src/model does the loading, the forward pass and
// the sampling.
import type { Command } from 'commander';
import { ConfigError, samplingParams, type SamplingParams } from '../../core/index.js';
import { pagesFor } from '../../pages/index.js';
import { createEngine, DEFAULT_PAGE_SIZE, generate, loadModel, type LoadedModel } from '../../model/index.js';
import { DEFAULT_MODEL } from '../config.js';
import { tesseraHome } from '../config-env.js';
import { progressDisplay } from './gen-model.js';

interface RunFlags {
  model: string;
  prompt?: string;
  promptIds?: string;
  maxTokens: string;
  temperature: string;
  topP: string;
  topK: string;
  seed: string;
  deterministic?: boolean;
  ignoreEos?: boolean;
  kernels: string;
  threads?: string;
  json?: boolean;
}

export function registerRun(program: Command): void {
  program
    .command('run')
    .description('generate a continuation of one prompt and print it')
    .option('--model <spec>', 'a Hugging Face directory, a .gguf file, or builtin:NAME', DEFAULT_MODEL)
    .option('--prompt <text>', 'prompt text, tokenized with the model\'s tokenizer (BOS as its config says)')
    .option('--prompt-ids <ids>', 'prompt token ids, comma-separated, used exactly as given (no BOS added)')
    .option('--max-tokens <n>', 'most tokens to generate', '64')
    .option('--temperature <t>', '0 for greedy (argmax)', '0')
    .option('--top-p <p>', 'nucleus sampling mass in (0, 1]', '1')
    .option('--top-k <k>', 'keep the k most likely tokens; 0 keeps all', '0')
    .option('--seed <n>', 'seed of the sampling draws', '0')
    .option('--ignore-eos', 'keep generating past the end-of-sequence token')
    .option('--deterministic', 'batch-invariant kernels (slower; bit-identical whatever runs beside)')
    .option('--kernels <name>', 'fast | ref (plain TypeScript, slow: for checking)', 'fast')
    .option('--threads <n>', 'threads per matrix multiplication (default: every core)')
    .option('--json', 'print one JSON object: ids, text, tokensPerSecond, prompt ids, timing')
    .action(async (flags: RunFlags) => runCommand(flags));
}

async function runCommand(flags: RunFlags): Promise<void> {
  const sampling = parseSampling(flags);
  const kernels = flags.kernels === 'fast' || flags.kernels === 'ref' ? flags.kernels : fail(`--kernels must be fast or ref, got "${flags.kernels}"`);
  const threads = flags.threads === undefined ? undefined : integer(flags.threads, '--threads', 1);
  if ((flags.prompt === undefined) === (flags.promptIds === undefined)) fail('give exactly one of --prompt TEXT or --prompt-ids 1,2,3');

  const loadStart = performance.now();
  const display = flags.json ? undefined : progressDisplay(process.stderr);
  const model = await loadModel(flags.model, { cacheDir: tesseraHome(process.env), ...(display ? { onProgress: display.update } : {}) });
  display?.done();
  const loadMs = performance.now() - loadStart;
  const promptIds = flags.promptIds !== undefined ? parseIds(flags.promptIds, model) : model.tokenizer.encode(flags.prompt!);
  if (promptIds.length === 0) fail('the prompt is empty');
  const positions = promptIds.length + sampling.maxTokens;
  if (positions > model.config.maxPositionEmbeddings) {
    fail(`${promptIds.length} prompt tokens + --max-tokens ${sampling.maxTokens} exceed the model's context of ${model.config.maxPositionEmbeddings} tokens`);
  }

  const engine = await createEngine(model, {
    kernels, deterministic: flags.deterministic === true, kvPages: pagesFor(positions, DEFAULT_PAGE_SIZE), ...(threads ? { threads } : {}),
  });
  try {
    const detokenizer = model.tokenizer.createDetokenizer({ contextIds: promptIds, skipSpecialTokens: true });
    const onToken = flags.json ? undefined : (_: number, token: number) => process.stdout.write(detokenizer.push(token));
    const { outputs, timing } = await generate(engine.runner, [{ promptIds, sampling }], onToken ? { onToken } : {});
    const { ids, finishReason } = outputs[0]!;
    const seconds = (ms: number) => ms / 1000;
    const tokensPerSecond = timing.numDecodeTokens > 0 ? timing.numDecodeTokens / seconds(timing.decodeMs) : ids.length / seconds(timing.prefillMs);
    if (flags.json) {
      const text = model.tokenizer.decode(ids, { skipSpecialTokens: true });
      const result = {
        model: model.source.spec, promptIds, ids, text, finishReason, tokensPerSecond,
        promptTokensPerSecond: promptIds.length / seconds(timing.prefillMs),
        timing: { loadMs: loadMs, prepareMs: engine.prepareMs, prefillMs: timing.prefillMs, decodeMs: timing.decodeMs },
        kernels: engine.kernels,
      };
      process.stdout.write(`${JSON.stringify(result)}\n`);
      return;
    }
    process.stdout.write(`${detokenizer.flush()}\n`);
    process.stderr.write(
      `\n${ids.length} tokens (${finishReason}) at ${tokensPerSecond.toFixed(1)} tokens/s; prompt ${promptIds.length} tokens in ${timing.prefillMs.toFixed(0)} ms; ` +
        `model loaded in ${loadMs.toFixed(0)} ms, prepared for ${engine.kernels.dense}+${engine.kernels.ops} kernels in ${engine.prepareMs.toFixed(0)} ms\n`,
    );
  } finally {
    await engine.dispose();
  }
}

function parseSampling(flags: RunFlags): SamplingParams {
  const temperature = decimal(flags.temperature, '--temperature');
  const topP = decimal(flags.topP, '--top-p');
  if (temperature < 0) fail(`--temperature must be >= 0, got ${flags.temperature}`);
  if (!(topP > 0 && topP <= 1)) fail(`--top-p must be in (0, 1], got ${flags.topP}`);
  return samplingParams({
    maxTokens: integer(flags.maxTokens, '--max-tokens', 1),
    temperature,
    topP,
    topK: integer(flags.topK, '--top-k', 0),
    seed: integer(flags.seed, '--seed', 0, 2 ** 32 - 1),
    ignoreEos: flags.ignoreEos === true,
  });
}

function parseIds(text: string, model: LoadedModel): number[] {
  const parts = text.split(',').map((s) => s.trim());
  return parts.map((part) => {
    if (!/^\d+$/.test(part)) fail(`--prompt-ids must be comma-separated token ids, got "${text}"`);
    const id = Number(part);
    if (id >= model.config.vocabSize) fail(`--prompt-ids: token ${id} is outside the vocabulary (0..${model.config.vocabSize - 1})`);
    return id;
  });
}

function integer(text: string, flag: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (!/^\d+$/.test(text.trim()) || Number(text) < min || Number(text) > max) {
    fail(`${flag} must be an integer${max < Number.MAX_SAFE_INTEGER ? ` in [${min}, ${max}]` : ` >= ${min}`}, got "${text}"`);
  }
  return Number(text);
}

function decimal(text: string, flag: string): number {
  const value = Number(text);
  if (text.trim() === '' || !Number.isFinite(value)) fail(`${flag} must be a number, got "${text}"`);
  return value;
}

function fail(message: string): never {
  throw new ConfigError(message);
}
