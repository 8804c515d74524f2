// The kernel matrix: every dense / attention path the engine can choose (--kernels, planned in
// src/kernels/choose.ts) x weight types x model shapes, each compared with llama.cpp
// (node-llama-cpp 3.21.1, CPU, one thread, F32 KV, no flash attention) step by step,
// teacher-forced on llama.cpp's own greedy continuation: at every step both sides' next-token
// log-softmax over the whole vocabulary.
//   native  the addon's dense kernels and attention (auto, where the CPU runs them)
//   wasm    wasm dense, wasm attention (auto on a CPU the addon does not run)
//   ref     plain TypeScript kernels (the oracle)
// Per step: max |log p_ours - log p_llama| over the tokens llama.cpp gives p > 1e-6 (the
// logits that matter; a logit difference up to the softmax's constant), and whether the argmax
// agrees. Test-only: it writes nothing but its files under `root`.
import { join } from 'node:path';
import { createEngine, type Engine } from '../../src/engine/index.js';
import { loadModel } from '../../src/model/index.js';
import { asRequestId, DEFAULT_TENANT } from '../../src/core/index.js';
import { logSoftmax, topTwo } from './drivers.js';
import { writeMatrixGguf, type MatrixDType, type MatrixShape } from './matrix-gguf.js';

export const PATHS = ['native', 'wasm', 'ref'] as const;
export type KernelPath = (typeof PATHS)[number];

export const SHAPES: Readonly<Record<string, MatrixShape>> = {
  /** The issue's file: small odd vocabulary, untied head, RoPE base 1e6, peaked weights, GQA 2. */
  issue: {
    name: 'issue',
    vocab: 1000,
    hidden: 256,
    heads: 4,
    kvHeads: 2,
    headDim: 64,
    ff: 768,
    layers: 4,
    ropeTheta: 1e6,
    tied: false,
    peaked: true,
  },
  /** Hidden 768 (not a power of two), GQA 3, vocabulary 3001 (odd), RoPE base 5e5. */
  wide: {
    name: 'wide',
    vocab: 3001,
    hidden: 768,
    heads: 12,
    kvHeads: 4,
    headDim: 64,
    ff: 1280,
    layers: 2,
    ropeTheta: 5e5,
    tied: false,
    peaked: false,
  },
  /** Tied head, GQA 4 with head dim 32, vocabulary 515, hidden 512, the classic RoPE base, peaked. */
  tied: {
    name: 'tied',
    vocab: 515,
    hidden: 512,
    heads: 8,
    kvHeads: 2,
    headDim: 32,
    ff: 1536,
    layers: 3,
    ropeTheta: 1e4,
    tied: true,
    peaked: true,
  },
  /** Small and flat (not peaked): tied head, GQA 4, head dim 32, vocabulary 515 (odd), hidden 512. */
  flat: {
    name: 'flat',
    vocab: 515,
    hidden: 512,
    heads: 8,
    kvHeads: 2,
    headDim: 32,
    ff: 768,
    layers: 2,
    ropeTheta: 1e4,
    tied: true,
    peaked: false,
  },
  /** Full multi-head attention, hidden 1280, vocabulary 2000 (a multiple of 16, not of 32). */
  mha: {
    name: 'mha',
    vocab: 2000,
    hidden: 1280,
    heads: 10,
    kvHeads: 10,
    headDim: 128,
    ff: 2560,
    layers: 2,
    ropeTheta: 1e6,
    tied: false,
    peaked: true,
  },
};

export const DTYPES: readonly MatrixDType[] = ['q4_0', 'q8_0', 'q4_k', 'q5_k', 'q6_k', 'f16', 'mix'];

/** One file's llama.cpp reference: its greedy continuation and each step's log-softmax. */
export interface Reference {
  readonly prompt: number[];
  readonly ids: number[];
  readonly logProbs: Float64Array[];
}

export interface CellResult {
  readonly path: KernelPath;
  readonly shape: string;
  readonly dtype: MatrixDType;
  readonly steps: number;
  readonly agree: number;
  /** max over steps of max |log p diff| (tokens llama.cpp gives p > 1e-6). */
  readonly maxDiff: number;
  /** Steps whose argmax differs: [step, llama.cpp's top-2 margin, our diff at that step]. */
  readonly disagreements: [number, number, number][];
}

type NodeLlamaCpp = typeof import('node-llama-cpp');
type Llama = Awaited<ReturnType<NodeLlamaCpp['getLlama']>>;

/** A prompt of `n` tokens of the file's vocabulary, BOS first, fixed by `seed`. */
export function matrixPrompt(vocab: number, n: number, seed: number): number[] {
  const out = [1];
  let x = seed >>> 0 || 1;
  for (let i = 1; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out.push(259 + (x % (vocab - 259))); // past the specials and byte pieces
  }
  return out;
}

/** llama.cpp's greedy continuation of `prompt` and the log-softmax at each of `steps` steps. */
export async function llamaReference(
  llama: Llama,
  modelPath: string,
  vocab: number,
  prompt: number[],
  steps: number,
): Promise<Reference> {
  const model = await llama.loadModel({ modelPath });
  const context = await model.createContext({
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
    const logProbs: Float64Array[] = [];
    let input = [...prompt];
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
      const lp = new Float64Array(vocab).fill(-Infinity);
      for (const [id, p] of probabilities) lp[id] = Math.log(p);
      const [top1] = topTwo(lp);
      ids.push(top1);
      logProbs.push(lp);
      input = [top1];
    }
    return { prompt, ids, logProbs };
  } finally {
    await context.dispose();
    await model.dispose();
  }
}

/** An engine on `path` whose kernels are `kernelPath`'s. */
export async function pathEngine(modelPath: string, kernelPath: KernelPath): Promise<Engine> {
  const model = await loadModel(modelPath);
  const engine = await createEngine(model, { kvPages: 8, threads: 1, kernels: kernelPath });
  if (engine.kernels.dense !== kernelPath) {
    await engine.dispose();
    throw new Error(`asked for the ${kernelPath} path, got dense kernels ${engine.kernels.dense}`);
  }
  return engine;
}

/** Our log-softmax at every step, fed llama.cpp's continuation. */
export async function compareCell(
  engine: Engine,
  ref: Reference,
  cell: { path: KernelPath; shape: string; dtype: MatrixDType },
): Promise<CellResult> {
  const steps = ref.ids.length;
  const ours: Float64Array[] = [];
  // As drivers.ts's tesseraTrace, keeping every step's log-probabilities.
  const { pool, runner } = engine;
  const owner = { rid: asRequestId('matrix'), tenant: DEFAULT_TENANT };
  const allocated = pool.ledger.allocate(Math.ceil((ref.prompt.length + steps) / pool.pageSize), owner);
  if (allocated.kind !== 'allocated') throw new Error("the matrix engine's pool is too small");
  try {
    let input = [...ref.prompt];
    let pos = 0;
    for (let step = 0; step < steps; step++) {
      const [result] = await runner.step([
        { ...owner, tags: allocated.tags, tokens: input, startPos: pos, wantLogits: true },
      ]);
      if (result?.kind !== 'logits') throw new Error(`step ${step}: ${result?.kind}`);
      pos += input.length;
      ours.push(logSoftmax(result.logits));
      input = [ref.ids[step]!];
    }
  } finally {
    pool.ledger.free(allocated.tags, owner);
  }
  let agree = 0;
  let maxDiff = 0;
  const disagreements: [number, number, number][] = [];
  const floor = Math.log(1e-6);
  for (let step = 0; step < steps; step++) {
    const theirs = ref.logProbs[step]!;
    const mine = ours[step]!;
    let diff = 0;
    for (let i = 0; i < theirs.length; i++)
      if (theirs[i]! > floor) diff = Math.max(diff, Math.abs(mine[i]! - theirs[i]!));
    maxDiff = Math.max(maxDiff, diff);
    const [t1, t2] = topTwo(theirs);
    const [o1] = topTwo(mine);
    if (o1 === t1) agree++;
    else disagreements.push([step, theirs[t1]! - theirs[t2]!, diff]);
  }
  return { ...cell, steps, agree, maxDiff, disagreements };
}

export function modelFile(root: string, shape: MatrixShape, dtype: MatrixDType): string {
  return join(root, `${shape.name}-${dtype}.gguf`);
}

export { writeMatrixGguf };

/** One table line per cell. */
export function formatCell(r: CellResult): string {
  const dis = r.disagreements.map(([s, m, d]) => `step ${s} margin ${m.toFixed(3)} diff ${d.toFixed(3)}`).join('; ');
  return `${r.path.padEnd(6)} ${r.shape.padEnd(6)} ${r.dtype.padEnd(5)} top-1 ${r.agree}/${r.steps} max|dlogp| ${r.maxDiff.toFixed(4)}${dis ? `  (${dis})` : ''}`;
}
