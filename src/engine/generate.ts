// generate(): a few requests from prompt ids to output ids on one engine, without a scheduler —
// for `tessera run`, tests and the decode benchmark. The server's path is src/scheduler +
// src/worker; this is the smallest loop that drives the same ModelRunner the same way.
//
// The life of a request here:
//   1. pages for prompt + maxTokens allocated from the ledger (its own epoch on every page)
//   2. prefill in chunks of at most maxStepTokens, one request per step; the last chunk wants
//      logits, and output token 0 is sampled from them
//   3. decode: every unfinished request is one item of each step; token i is sampled with
//      stepIndex i; a request ends at an end token (EOS unless ignoreEos, or stopTokenIds:
//      not part of `ids`) or at maxTokens
//   4. its pages are freed, whatever happened
// A failed page check ends the whole call with its PageCheckError. Stop strings are not
// applied here (they are a text matter for the API layer). One call at a time per runner.
import {
  assert,
  asRequestId,
  ConfigError,
  DEFAULT_TENANT,
  type BatchItem,
  type SamplingParams,
  type Tag,
} from '../core/index.js';
import { pagesFor } from '../pages/index.js';
import type { ModelRunner } from './runner.js';
import { Sampler } from './sampler.js';

export interface GenerateInput {
  readonly promptIds: readonly number[];
  readonly sampling: SamplingParams;
}

export interface GenerateOutput {
  /** Generated ids, the end token excluded. */
  readonly ids: number[];
  readonly finishReason: 'stop' | 'length';
}

export interface GenerateTiming {
  readonly prefillMs: number;
  /** Time in decode steps (every step after each request's first token). */
  readonly decodeMs: number;
  readonly numDecodeSteps: number;
  /** Tokens sampled in decode steps, over all requests. */
  readonly numDecodeTokens: number;
}

export interface GenerateOptions {
  /** Called with each new token as it is sampled. */
  readonly onToken?: (index: number, token: number) => void;
  readonly now?: () => number;
}

interface Live {
  readonly input: GenerateInput;
  readonly item: { rid: BatchItem['rid']; tenant: BatchItem['tenant']; tags: readonly Tag[] };
  readonly output: { ids: number[]; finishReason: 'stop' | 'length' | null };
  readonly stopIds: ReadonlySet<number>;
  /** Prompt tokens, then every sampled token that went back into the model. */
  numComputed: number;
  lastToken: number;
}

export async function generate(
  runner: ModelRunner,
  inputs: readonly GenerateInput[],
  options: GenerateOptions = {},
): Promise<{ outputs: GenerateOutput[]; timing: GenerateTiming }> {
  const now = options.now ?? (() => performance.now());
  const { pool, config } = runner;
  const sampler = new Sampler(config.vocabSize);
  const live: Live[] = [];
  try {
    // 1. Pages.
    for (const [i, input] of inputs.entries()) {
      const positions = input.promptIds.length + input.sampling.maxTokens;
      if (input.promptIds.length === 0) throw new ConfigError('a prompt needs at least one token');
      const outside = input.promptIds.find((id) => !(Number.isInteger(id) && id >= 0 && id < config.vocabSize));
      if (outside !== undefined)
        throw new ConfigError(`prompt token ${outside} is outside the vocabulary (0..${config.vocabSize - 1})`);
      if (positions > runner.maxPositions) {
        throw new ConfigError(
          `${input.promptIds.length} prompt tokens + ${input.sampling.maxTokens} new tokens exceed the model's ${runner.maxPositions} positions`,
        );
      }
      const owner = { rid: asRequestId(`generate-${i}`), tenant: DEFAULT_TENANT };
      const allocated = pool.ledger.allocate(pagesFor(positions, pool.pageSize), owner);
      if (allocated.kind === 'out-of-pages') {
        throw new ConfigError(
          `the KV pool has ${allocated.numFree} free pages; this request needs ${allocated.numRequested}`,
        );
      }
      const stopIds = new Set([
        ...input.sampling.stopTokenIds,
        ...(input.sampling.ignoreEos ? [] : config.eosTokenIds),
      ]);
      live.push({
        input,
        item: { ...owner, tags: allocated.tags },
        output: { ids: [], finishReason: null },
        stopIds,
        numComputed: 0,
        lastToken: -1,
      });
    }

    // 2. Prefill, chunk by chunk; output token 0 from the last chunk's logits.
    const prefillStart = now();
    for (const r of live) {
      const prompt = r.input.promptIds;
      while (r.numComputed < prompt.length) {
        const tokens = prompt.slice(r.numComputed, r.numComputed + runner.maxStepTokens);
        const wantLogits = r.numComputed + tokens.length === prompt.length;
        const [result] = await runner.step([{ ...r.item, tokens, startPos: r.numComputed, wantLogits }]);
        r.numComputed += tokens.length;
        if (result!.kind === 'failed') throw result!.error;
        if (result!.kind === 'logits') accept(r, sampler.sample(result!.logits, r.input.sampling, 0), options);
      }
    }
    const prefillMs = now() - prefillStart;

    // 3. Decode, all unfinished requests in each step.
    const decodeStart = now();
    let numDecodeSteps = 0;
    let numDecodeTokens = 0;
    for (;;) {
      const active = live.filter((r) => r.output.finishReason === null);
      if (active.length === 0) break;
      const items: BatchItem[] = active.map((r) => ({
        ...r.item,
        tokens: [r.lastToken],
        startPos: r.numComputed,
        wantLogits: true,
      }));
      const results = await runner.step(items);
      numDecodeSteps++;
      for (const [j, r] of active.entries()) {
        const result = results[j]!;
        if (result.kind === 'failed') throw result.error;
        assert(result.kind === 'logits', 'a decode step returned no logits');
        r.numComputed++;
        accept(r, sampler.sample(result.logits, r.input.sampling, r.output.ids.length, r.output.ids), options);
        numDecodeTokens++;
      }
    }
    const decodeMs = now() - decodeStart;
    const outputs = live.map((r) => ({ ids: r.output.ids, finishReason: r.output.finishReason ?? 'length' }));
    return { outputs, timing: { prefillMs, decodeMs, numDecodeSteps, numDecodeTokens } };
  } finally {
    // 4. Pages back, whatever happened.
    for (const r of live) pool.ledger.free(r.item.tags, r.item);
  }
}

/** Records a sampled token: an end token finishes the request, maxTokens does too. */
function accept(r: Live, token: number, options: GenerateOptions): void {
  if (r.stopIds.has(token)) {
    r.output.finishReason = 'stop';
    return;
  }
  r.output.ids.push(token);
  options.onToken?.(r.output.ids.length - 1, token);
  r.lastToken = token;
  if (r.output.ids.length >= r.input.sampling.maxTokens) r.output.finishReason = 'length';
}
