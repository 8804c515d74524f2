// KV dtype benchmark (`npm run bench:kv-dtype`): what `--kv-dtype f16` and `--kv-dtype q8_0`
// cost against f32 KV on gen-model's models, measured side by side in one run.
//   1. accuracy: greedy decoding with f32 KV, then the same sequences teacher-forced through an
//      f16-KV (and a q8_0-KV) engine: per step, whether the argmax agrees, and the largest logit difference
//      (with the f32 top-1 margin where they disagree: a flip between near-ties, or not);
//      short prompts and one long (~2k-token) context;
//   2. speed: decode tokens/s at a ~2k-token context (prefilled once; each round decodes 32 more),
//      batch 1 and 4, f32 KV vs f16 KV vs q8_0 KV, rounds alternating between them (best of each: other
//      load only slows a run down), by the wall clock and by the process's CPU time.
// Prints a table and writes bench/results/kv-dtype-<time>.json. Asserts nothing.
//
//   node --import ./bench/lib/register-ts.mjs bench/kv-dtype.ts [--quick] [--presets austen,tiny,m100] [--context 2048]
//     [--batches 1,4] [--speed-only | --accuracy-only] [--dtypes f16,q8_0] (compared against f32)
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { availableParallelism, cpus, homedir } from 'node:os';
import { join } from 'node:path';
import { asRequestId, DEFAULT_TENANT, type KvDtype } from '../src/core/index.js';
import { argmax, createEngine, type Engine } from '../src/engine/index.js';
import { genModel, type GenPreset } from '../src/gen/index.js';
import { loadModel, type LoadedModel } from '../src/model/index.js';
import { pagesFor } from '../src/pages/index.js';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const quick = args.includes('--quick');
const PRESETS = (flag('--presets') ?? 'austen,tiny,m100').split(',') as (GenPreset | 'austen')[];
const CONTEXT = Number(flag('--context') ?? 2048);
const NEW_TOKENS = quick ? 16 : 48;
const NUM_PROMPTS = quick ? 2 : 8;
const SPEED_TOKENS = quick ? 16 : 32;
const ROUNDS = quick ? 2 : 5;
const THREADS = availableParallelism();
/** --accuracy-only: skip the speed part. */
const ACCURACY_ONLY = args.includes('--accuracy-only');
const BATCHES = ACCURACY_ONLY ? [] : (flag('--batches') ?? '1,4').split(',').map(Number);
/** --speed-only: skip the accuracy part (its numbers do not depend on the machine's load). */
const SPEED_ONLY = args.includes('--speed-only');
const PAGE_SIZE = 16;
/** --dtypes: the KV dtypes compared against f32 (default f16 and q8_0). */
const DTYPES = (flag('--dtypes') ?? 'f16,q8_0').split(',') as KvDtype[];

/** Opening lines in the manner of the novels builtin:austen was trained on: real text for a trained model. */
const TEXTS = [
  'It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.',
  'Emma Woodhouse, handsome, clever, and rich, with a comfortable home and happy disposition, seemed to unite some of the best blessings of existence.',
  'The family of Dashwood had long been settled in Sussex. Their estate was large, and their residence was at Norland Park.',
  'Sir Walter Elliot, of Kellynch Hall, in Somersetshire, was a man who, for his own amusement, never took up any book but the Baronetage.',
  'No one who had ever seen Catherine Morland in her infancy would have supposed her born to be an heroine.',
  'About thirty years ago Miss Maria Ward, of Huntingdon, with only seven thousand pounds, had the good luck to captivate Sir Thomas Bertram.',
  'Mr. Bennet was so odd a mixture of quick parts, sarcastic humour, reserve, and caprice, that the experience of three-and-twenty years had been insufficient.',
  "She was the youngest of the two daughters of a most affectionate, indulgent father; and had, in consequence of her sister's marriage, been mistress of his house.",
];

/** A model to compare on: gen-model's preset (random weights, f32) or builtin:austen (trained). */
async function benchModel(preset: GenPreset | 'austen'): Promise<string> {
  if (preset === 'austen') return 'builtin:austen';
  const dir = join(process.env['TESSERA_HOME'] ?? join(homedir(), '.cache', 'tessera'), 'bench');
  const path = join(dir, `${preset}-f32-seed0.gguf`);
  if (!existsSync(path)) {
    process.stderr.write(`generating ${path} ...\n`);
    await mkdir(dir, { recursive: true });
    await genModel({ preset, format: 'gguf', out: path, seed: 0, dtype: 'f32' });
  }
  return path;
}

/** Prompt i of `length` tokens: for a model with a real tokenizer (austen), its text; else seeded ids. */
let prompt = (i: number, length: number): number[] => [
  1,
  ...Array.from({ length: length - 1 }, (_, j) => 300 + ((i * 7919 + j * 104729) % 31000)),
];

function textPrompts(model: LoadedModel): (i: number, length: number) => number[] {
  const all = TEXTS.map((t) => model.tokenizer.encode(t));
  return (i, length) => {
    const ids: number[] = [];
    for (let k = i; ids.length < length; k++) ids.push(...all[k % all.length]!);
    return ids.slice(0, length);
  };
}

/** Per step of one sequence: the logits after the prompt and after each forced token (greedy when forced is empty). */
async function stepLogits(
  engine: Engine,
  promptIds: number[],
  numSteps: number,
  forced: number[],
): Promise<Float32Array[]> {
  const { runner, pool } = engine;
  const owner = { rid: asRequestId('kv-dtype'), tenant: DEFAULT_TENANT };
  const a = pool.ledger.allocate(pagesFor(promptIds.length + numSteps, pool.pageSize), owner);
  if (a.kind !== 'allocated') throw new Error('pool too small');
  const out: Float32Array[] = [];
  try {
    let pos = 0;
    let logits: Float32Array | undefined;
    while (pos < promptIds.length) {
      const tokens = promptIds.slice(pos, pos + runner.maxStepTokens);
      const [r] = await runner.step([
        { ...owner, tags: a.tags, tokens, startPos: pos, wantLogits: pos + tokens.length === promptIds.length },
      ]);
      if (r!.kind === 'failed') throw r!.error;
      if (r!.kind === 'logits') logits = r!.logits.slice();
      pos += tokens.length;
    }
    for (let s = 0; s < numSteps; s++) {
      out.push(logits!);
      const next = forced[s] ?? argmax(logits!);
      const [r] = await runner.step([{ ...owner, tags: a.tags, tokens: [next], startPos: pos, wantLogits: true }]);
      if (r!.kind !== 'logits') throw new Error(`step ${s}: ${r!.kind}`);
      logits = r!.logits.slice();
      pos++;
    }
  } finally {
    pool.ledger.free(a.tags, owner);
  }
  return out;
}

interface Agreement {
  readonly steps: number;
  readonly argmaxAgree: number;
  readonly maxAbsLogitDiff: number;
  /** Largest f32 top-1 margin (top-1 minus top-2 logit) at a step where the argmax flipped. */
  readonly maxFlipMargin: number;
  readonly logitStd: number;
}

function compare(f32: Float32Array[], f16: Float32Array[]): Agreement {
  let argmaxAgree = 0;
  let maxAbsLogitDiff = 0;
  let maxFlipMargin = 0;
  let sum = 0;
  let sumSquares = 0;
  let n = 0;
  for (let s = 0; s < f32.length; s++) {
    const [a, b] = [f32[s]!, f16[s]!];
    const top = argmax(a);
    if (top === argmax(b)) argmaxAgree++;
    else {
      let second = -Infinity;
      for (let i = 0; i < a.length; i++) if (i !== top) second = Math.max(second, a[i]!);
      maxFlipMargin = Math.max(maxFlipMargin, a[top]! - second);
    }
    for (let i = 0; i < a.length; i++) {
      maxAbsLogitDiff = Math.max(maxAbsLogitDiff, Math.abs(a[i]! - b[i]!));
      sum += a[i]!;
      sumSquares += a[i]! ** 2;
      n++;
    }
  }
  const logitStd = Math.sqrt(sumSquares / n - (sum / n) ** 2);
  return { steps: f32.length, argmaxAgree, maxAbsLogitDiff, maxFlipMargin, logitStd };
}

function merge(xs: Agreement[]): Agreement {
  return {
    steps: xs.reduce((n, x) => n + x.steps, 0),
    argmaxAgree: xs.reduce((n, x) => n + x.argmaxAgree, 0),
    maxAbsLogitDiff: Math.max(...xs.map((x) => x.maxAbsLogitDiff)),
    maxFlipMargin: Math.max(...xs.map((x) => x.maxFlipMargin)),
    logitStd: xs.reduce((n, x) => n + x.logitStd, 0) / xs.length,
  };
}

async function accuracy(
  engines: Partial<Record<KvDtype, Engine>>,
  dtype: KvDtype,
  label: string,
  promptLength: number,
  count: number,
) {
  const parts: Agreement[] = [];
  let identical = 0;
  for (let i = 0; i < count; i++) {
    const p = prompt(i, promptLength);
    const ref = await stepLogits(engines.f32!, p, NEW_TOKENS, []);
    const greedy = ref.map((l) => argmax(l));
    const forced = await stepLogits(engines[dtype]!, p, NEW_TOKENS, greedy);
    const free = (await stepLogits(engines[dtype]!, p, NEW_TOKENS, [])).map((l) => argmax(l));
    if (free.every((id, s) => id === greedy[s])) identical++;
    parts.push(compare(ref, forced));
  }
  const m = merge(parts);
  console.log(
    `  ${dtype} vs f32, ${label}: argmax agrees at ${m.argmaxAgree}/${m.steps} teacher-forced steps; free greedy runs identical ${identical}/${count}; ` +
      `max |logit diff| ${m.maxAbsLogitDiff.toExponential(2)} (logit std ${m.logitStd.toFixed(2)}); largest margin flipped ${m.maxFlipMargin.toExponential(2)}`,
  );
  return { dtype, label, promptLength, ...m, freeRunsIdentical: identical, sequences: count };
}

const cpuMs = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

/**
 * `batch` requests prefilled to CONTEXT tokens once; each call of `decode` runs SPEED_TOKENS
 * greedy decode steps further on (the context grows by SPEED_TOKENS per round) and returns
 * tokens/s by the wall clock and by this process's CPU time (less sensitive to other load).
 */
async function decodeSession(engine: Engine, batch: number, context: number) {
  const { runner, pool } = engine;
  const seqs = Array.from({ length: batch }, (_, i) => {
    const owner = { rid: asRequestId(`speed-${i}`), tenant: DEFAULT_TENANT };
    const a = pool.ledger.allocate(pagesFor(context + ROUNDS * SPEED_TOKENS + 1, pool.pageSize), owner);
    if (a.kind !== 'allocated') throw new Error('pool too small');
    return { owner, tags: a.tags, pos: 0, last: 0 };
  });
  for (const [i, s] of seqs.entries()) {
    const p = prompt(100 + i, context);
    while (s.pos < p.length) {
      const tokens = p.slice(s.pos, s.pos + runner.maxStepTokens);
      const [r] = await runner.step([
        { ...s.owner, tags: s.tags, tokens, startPos: s.pos, wantLogits: s.pos + tokens.length === p.length },
      ]);
      if (r!.kind === 'failed') throw r!.error;
      if (r!.kind === 'logits') s.last = argmax(r!.logits);
      s.pos += tokens.length;
    }
  }
  return {
    async decode(): Promise<{ wall: number; cpu: number }> {
      const [wall0, cpu0] = [performance.now(), cpuMs()];
      for (let step = 0; step < SPEED_TOKENS; step++) {
        const results = await runner.step(
          seqs.map((s) => ({ ...s.owner, tags: s.tags, tokens: [s.last], startPos: s.pos, wantLogits: true })),
        );
        for (const [j, s] of seqs.entries()) {
          const r = results[j]!;
          if (r.kind !== 'logits') throw new Error(`decode step: ${r.kind}`);
          s.last = argmax(r.logits);
          s.pos++;
        }
      }
      const tokens = batch * SPEED_TOKENS;
      return { wall: tokens / ((performance.now() - wall0) / 1000), cpu: tokens / ((cpuMs() - cpu0) / 1000) };
    },
    release(): void {
      for (const s of seqs) pool.ledger.free(s.tags, s.owner);
    },
  };
}

async function main(): Promise<void> {
  console.log(
    `KV dtype ${DTYPES.join(', ')} vs f32, ${cpus()[0]?.model ?? 'cpu'} x${cpus().length} (load average ${(await import('node:os')).loadavg()[0]?.toFixed(1)})`,
  );
  const results: unknown[] = [];
  for (const preset of PRESETS) {
    const model: LoadedModel = await loadModel(await benchModel(preset));
    if (preset === 'austen') prompt = textPrompts(model);
    const context = Math.min(CONTEXT, model.config.maxPositionEmbeddings - ROUNDS * SPEED_TOKENS - 1);
    const kvPages = 4 * pagesFor(CONTEXT + ROUNDS * SPEED_TOKENS + NEW_TOKENS + 1, PAGE_SIZE);
    const all: KvDtype[] = ['f32', ...DTYPES.filter((d) => d !== 'f32')];
    const engines: Partial<Record<KvDtype, Engine>> = {};
    for (const kvDtype of all)
      engines[kvDtype] = await createEngine(model, { kvPages, pageSize: PAGE_SIZE, kvDtype, threads: THREADS });
    console.log(`${preset === 'austen' ? 'builtin:austen (trained, f16 weights)' : `${preset} (random f32 weights)`}:`);
    const acc: unknown[] = [];
    for (const dtype of SPEED_ONLY ? [] : all.slice(1)) {
      acc.push(await accuracy(engines, dtype, `${NUM_PROMPTS} prompts of 32 tokens + ${NEW_TOKENS}`, 32, NUM_PROMPTS));
      acc.push(
        await accuracy(
          engines,
          dtype,
          `1 prompt of ${context - NEW_TOKENS} tokens + ${NEW_TOKENS}`,
          context - NEW_TOKENS,
          1,
        ),
      );
    }
    const speed: unknown[] = [];
    for (const batch of BATCHES) {
      const sessions = new Map<KvDtype, Awaited<ReturnType<typeof decodeSession>>>();
      for (const dtype of all) sessions.set(dtype, await decodeSession(engines[dtype]!, batch, context));
      const runs = new Map<KvDtype, { wall: number; cpu: number }[]>(all.map((d) => [d, []]));
      for (let r = 0; r < ROUNDS; r++) {
        // Alternating, so drifting load hits all alike; the round's ratio compares neighbours.
        for (const dtype of all) runs.get(dtype)!.push(await sessions.get(dtype)!.decode());
      }
      for (const session of sessions.values()) session.release();
      const best = (dtype: KvDtype, key: 'wall' | 'cpu') => Math.max(...runs.get(dtype)!.map((x) => x[key]));
      const cells: string[] = [];
      const perRoundWallRatio: Record<string, number[]> = {};
      for (const dtype of all.slice(1)) {
        const perRound = runs.get(dtype)!.map((x, r) => x.wall / runs.get('f32')![r]!.wall);
        perRoundWallRatio[dtype] = perRound;
        cells.push(
          `${dtype} KV ${best(dtype, 'wall').toFixed(1)} tok/s = ${(best(dtype, 'wall') / best('f32', 'wall')).toFixed(2)}x ` +
            `(per round ${perRound.map((x) => x.toFixed(2)).join(', ')}; by CPU time ${(best(dtype, 'cpu') / best('f32', 'cpu')).toFixed(2)}x)`,
        );
      }
      speed.push({ batch, runs: Object.fromEntries(runs), perRoundWallRatio });
      console.log(
        `  decode at ${context}-token context, batch ${batch} (best of ${ROUNDS}): f32 KV ${best('f32', 'wall').toFixed(1)} tok/s; ` +
          cells.join('; '),
      );
    }
    results.push({ preset, context, accuracy: acc, speed });
    for (const engine of Object.values(engines)) await engine.dispose();
  }
  await mkdir(new URL('./results/', import.meta.url), { recursive: true });
  const file = new URL(`./results/kv-dtype-${new Date().toISOString().replace(/[:.]/g, '-')}.json`, import.meta.url);
  await writeFile(file, JSON.stringify({ context: CONTEXT, threads: THREADS, results }, null, 2));
  console.log(`wrote ${file.pathname}`);
}

await main();
