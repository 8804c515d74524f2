// Greedy decoding and next-token log-probabilities from both engines, step by step, for the
// llama.cpp equivalence tests. llama.cpp (node-llama-cpp 3.21.1) runs on the CPU with its
// prebuilt binary, one thread, no flash attention and an F32 KV cache: the configuration in which
// a plain forward pass is expected to match ours to float rounding. Its logits are read as
// probabilities (temperature 1, no top-k/top-p/min-p: a plain softmax), so both sides are
// compared as log-softmax, which is what a logit means up to a constant.
import { asRequestId, DEFAULT_TENANT } from '../../src/core/index.js';
import type { Engine } from '../../src/engine/index.js';

export interface StepTrace {
  /** The argmax at each step (the greedy token, or what the engine would have picked). */
  readonly ids: number[];
  /** Log-softmax of the first step's logits, by token id. */
  readonly firstLogProbs: Float64Array;
  /** top-1 minus top-2 log-probability at each step: how far each greedy choice is from a tie. */
  readonly margins: number[];
}

type NodeLlamaCpp = typeof import('node-llama-cpp');
type Llama = Awaited<ReturnType<NodeLlamaCpp['getLlama']>>;

export class LlamaCpp {
  private constructor(readonly llama: Llama) {}

  static async start(): Promise<LlamaCpp> {
    const { getLlama, LlamaLogLevel } = await import('node-llama-cpp');
    return new LlamaCpp(await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error }));
  }

  /**
   * `steps` steps from `promptIds`: the prompt, then each step's argmax fed back — or, with
   * `teacher`, teacher[i] fed at step i + 1 whatever the argmax was.
   */
  async trace(
    modelPath: string,
    promptIds: readonly number[],
    steps: number,
    teacher?: readonly number[],
    lora?: { readonly filePath: string; readonly scale: number },
  ): Promise<StepTrace> {
    const model = await this.llama.loadModel({ modelPath });
    const context = await model.createContext({
      ...(lora === undefined ? {} : { lora: { adapters: [lora] } }),
      contextSize: 256,
      sequences: 1,
      threads: 1,
      flashAttention: false,
      experimentalKvCacheKeyType: 'F32',
      experimentalKvCacheValueType: 'F32',
    });
    try {
      const sequence = context.getSequence();
      const ids: number[] = [];
      const margins: number[] = [];
      let firstLogProbs: Float64Array = new Float64Array(0);
      let input = [...promptIds];
      for (let step = 0; step < steps; step++) {
        const last = input.length - 1;
        const items = input.map((t, i) =>
          i < last
            ? t
            : ([
                t,
                { generateNext: { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } } },
              ] as const),
        );
        const results = await sequence.controlledEvaluate(items as never);
        const probabilities = results.at(-1)!.next!.probabilities!;
        let vocab = 0;
        for (const id of probabilities.keys()) vocab = Math.max(vocab, id + 1);
        const lp = new Float64Array(vocab).fill(-Infinity);
        for (const [id, p] of probabilities) lp[id] = Math.log(p);
        if (step === 0) firstLogProbs = lp;
        const [top1, top2] = topTwo(lp);
        ids.push(top1);
        margins.push(lp[top1]! - lp[top2]!);
        input = [teacher === undefined ? top1 : teacher[step]!];
      }
      return { ids, firstLogProbs, margins };
    } finally {
      await context.dispose();
      await model.dispose();
    }
  }

  async dispose(): Promise<void> {
    await this.llama.dispose();
  }
}

/** The same trace from a Tessera engine, driving its runner one step at a time. */
export async function tesseraTrace(
  engine: Engine,
  promptIds: readonly number[],
  steps: number,
  teacher?: readonly number[],
  adapter?: string,
): Promise<StepTrace> {
  const { pool, runner } = engine;
  const owner = { rid: asRequestId('trace'), tenant: DEFAULT_TENANT };
  const allocated = pool.ledger.allocate(Math.ceil((promptIds.length + steps) / pool.pageSize), owner);
  if (allocated.kind !== 'allocated') throw new Error("the test engine's pool is too small");
  try {
    const ids: number[] = [];
    const margins: number[] = [];
    let firstLogProbs: Float64Array = new Float64Array(0);
    let input = [...promptIds];
    let pos = 0;
    for (let step = 0; step < steps; step++) {
      const [result] = await runner.step([
        {
          ...owner,
          tags: allocated.tags,
          tokens: input,
          startPos: pos,
          wantLogits: true,
          ...(adapter === undefined ? {} : { adapter }),
        },
      ]);
      if (result?.kind !== 'logits') throw new Error(`step ${step}: ${result?.kind}`);
      pos += input.length;
      const lp = logSoftmax(result.logits);
      if (step === 0) firstLogProbs = lp;
      const [top1, top2] = topTwo(lp);
      ids.push(top1);
      margins.push(lp[top1]! - lp[top2]!);
      input = [teacher === undefined ? top1 : teacher[step]!];
    }
    return { ids, firstLogProbs, margins };
  } finally {
    pool.ledger.free(allocated.tags, owner);
  }
}

export function logSoftmax(logits: Float32Array): Float64Array {
  let max = -Infinity;
  for (const v of logits) max = Math.max(max, v);
  let sum = 0;
  for (const v of logits) sum += Math.exp(v - max);
  const lse = max + Math.log(sum);
  return Float64Array.from(logits, (v) => v - lse);
}

/** Ids of the largest and second-largest values (lowest id first on ties). */
export function topTwo(values: Float64Array): [number, number] {
  let a = 0;
  let b = -1;
  for (let i = 1; i < values.length; i++) {
    if (values[i]! > values[a]!) {
      b = a;
      a = i;
    } else if (b < 0 || values[i]! > values[b]!) {
      b = i;
    }
  }
  return [a, b];
}

/**
 * max |ours - theirs| over tokens llama.cpp gives a probability above 1e-30 (below that its f32
 * probabilities lose precision before the logarithm), and how many tokens that is.
 */
export function maxLogProbDiff(ours: Float64Array, theirs: Float64Array): { maxDiff: number; numCompared: number } {
  let maxDiff = 0;
  let numCompared = 0;
  const floor = Math.log(1e-30);
  for (let i = 0; i < theirs.length; i++) {
    if (!(theirs[i]! > floor)) continue;
    numCompared++;
    maxDiff = Math.max(maxDiff, Math.abs(ours[i]! - theirs[i]!));
  }
  return { maxDiff, numCompared };
}

/** Pearson correlation of two vectors over the entries where both are finite. */
export function correlation(x: Float64Array, y: Float64Array): number {
  const pairs: [number, number][] = [];
  for (let i = 0; i < Math.min(x.length, y.length); i++)
    if (Number.isFinite(x[i]) && Number.isFinite(y[i])) pairs.push([x[i]!, y[i]!]);
  const mean = (k: 0 | 1) => pairs.reduce((s, p) => s + p[k], 0) / pairs.length;
  const [mx, my] = [mean(0), mean(1)];
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (const [a, b] of pairs) {
    sxy += (a - mx) * (b - my);
    sxx += (a - mx) ** 2;
    syy += (b - my) ** 2;
  }
  return sxy / Math.sqrt(sxx * syy);
}
