// LoRA adapters in the forward pass: y = W x + scale · B (A x), per sequence of a mixed batch.
// Owns the adapter's in-memory form (per layer and projection, A [rank, in] and B [out, rank] as
// f32, whatever the file stored: f16 and block-quantized adapters are dequantized once at load)
// and LoraBank, the engine's loaded adapters by name, which the forward pass calls once per
// fused projection (qkv, o, gate|up, down) to add each adapted row's low-rank term.
// Rows of the base model and of different adapters share one step: the dense matmul runs once
// over every row, and only the rows of an adapted sequence get their own rank-r correction.
// Must never: change a row whose sequence names no adapter, or run a step naming an adapter the
// bank does not hold (the caller's registry refuses such requests; the bank throws).
import { createHash } from 'node:crypto';
import { InvariantError } from '../core/index.js';
import { f16ToF32, f32ToF16 } from '../kernels/index.js';
import type { ModelConfig } from '../formats/index.js';

/** The projections LoRA adapts, by llama.cpp's and PEFT's names. */
export const LORA_TARGETS = ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] as const;
export type LoraTarget = (typeof LORA_TARGETS)[number];

/** One adapted projection: A [rank, inDim], B [outDim, rank], row-major f32. */
export interface LoraPair {
  readonly rank: number;
  readonly inDim: number;
  readonly outDim: number;
  readonly a: Float32Array;
  readonly b: Float32Array;
  /** alpha / rank (alpha 0: 1), times the adapter's user scale. */
  readonly scale: number;
  /**
   * The file stored A and B as f16/bf16: x and A x are rounded to f16 before each product, as
   * llama.cpp's CPU backend rounds a half matmul's activations (agreement within 1e-3, not 4e-3).
   */
  readonly halfActivations: boolean;
}

/**
 * An adapter's digest, its identity in every KV namespace: sha256 over its files' contents (in a
 * fixed order) and the user's scale, 32 hex digits. One home: both readers and a router that only
 * names adapters (lora-control.ts's loraFileDigest) compute it here.
 */
export function loraDigest(contents: readonly (string | Uint8Array)[], scale: number): string {
  const hash = createHash('sha256');
  for (const part of contents) hash.update(part);
  return hash.update(`scale=${scale}`).digest('hex').slice(0, 32);
}

export interface LoraAdapter {
  readonly name: string;
  /** A digest of the adapter file and scale: the adapter's identity in every KV namespace. */
  readonly digest: string;
  /** Key `${layer}.${target}`. */
  readonly pairs: ReadonlyMap<string, LoraPair>;
}

export const pairKey = (layer: number, target: LoraTarget): string => `${layer}.${target}`;

/** The forward pass's fused projections, and which targets fill which columns of their output. */
export type LoraProjection = 'qkv' | 'o' | 'gateUp' | 'down';

/** The sequence's rows in the batch and the adapter it names, if any (ForwardSeq's fields). */
interface AdaptedSeq {
  readonly row: number;
  readonly numTokens: number;
  readonly adapter?: string;
}

export class LoraBank {
  readonly #adapters = new Map<string, LoraAdapter>();
  readonly #parts: Readonly<Record<LoraProjection, readonly (readonly [LoraTarget, number])[]>>;
  readonly #width: Readonly<Record<LoraProjection, number>>;
  readonly #config: ModelConfig;
  #tmp = new Float32Array(64);
  #xHalf = new Float32Array(0);

  constructor(config: ModelConfig) {
    this.#config = config;
    const qDim = config.numHeads * config.headDim;
    const kvDim = config.numKvHeads * config.headDim;
    const ff = config.intermediateSize;
    this.#parts = {
      qkv: [
        ['q', 0],
        ['k', qDim],
        ['v', qDim + kvDim],
      ],
      o: [['o', 0]],
      gateUp: [
        ['gate', 0],
        ['up', ff],
      ],
      down: [['down', 0]],
    };
    this.#width = { qkv: qDim + 2 * kvDim, o: config.hiddenSize, gateUp: 2 * ff, down: config.hiddenSize };
  }

  get size(): number {
    return this.#adapters.size;
  }

  has(name: string): boolean {
    return this.#adapters.has(name);
  }

  /** Adds (or replaces) an adapter; its pairs' shapes were checked against the config by the loader. */
  set(adapter: LoraAdapter): void {
    checkAdapterShapes(adapter, this.#config);
    this.#adapters.set(adapter.name, adapter);
  }

  delete(name: string): boolean {
    return this.#adapters.delete(name);
  }

  /**
   * y[row, off + i] += scale · Σ_j B[i, j] (A x[row])[j] for every row of every sequence naming an
   * adapter, and every target of `proj` that adapter has. x: [T, inDim], y: [T, width of proj].
   */
  add(seqs: readonly AdaptedSeq[], layer: number, proj: LoraProjection, x: Float32Array, y: Float32Array): void {
    const width = this.#width[proj];
    for (const s of seqs) {
      if (s.adapter === undefined) continue;
      const adapter = this.#adapters.get(s.adapter);
      if (adapter === undefined) throw new InvariantError(`LoRA adapter ${s.adapter} is not loaded on this engine`);
      for (const [target, offset] of this.#parts[proj]) {
        const pair = adapter.pairs.get(pairKey(layer, target));
        if (pair === undefined) continue;
        for (let t = s.row; t < s.row + s.numTokens; t++) this.#addRow(pair, x, t * pair.inDim, y, t * width + offset);
      }
    }
  }

  #addRow(p: LoraPair, x: Float32Array, xAt: number, y: Float32Array, yAt: number): void {
    const { rank, inDim, outDim, a, b, scale, halfActivations } = p;
    if (this.#tmp.length < rank) this.#tmp = new Float32Array(rank);
    if (this.#xHalf.length < inDim) this.#xHalf = new Float32Array(inDim);
    const tmp = this.#tmp;
    let xs = x;
    let at = xAt;
    if (halfActivations) {
      for (let k = 0; k < inDim; k++) this.#xHalf[k] = toHalf(x[xAt + k]!);
      xs = this.#xHalf;
      at = 0;
    }
    // Four rows of A per pass over x (each sum in the same order as one row at a time).
    let j = 0;
    for (; j + 4 <= rank; j += 4) {
      let s0 = 0;
      let s1 = 0;
      let s2 = 0;
      let s3 = 0;
      const r0 = j * inDim;
      const r1 = r0 + inDim;
      const r2 = r1 + inDim;
      const r3 = r2 + inDim;
      for (let k = 0; k < inDim; k++) {
        const xk = xs[at + k]!;
        s0 += a[r0 + k]! * xk;
        s1 += a[r1 + k]! * xk;
        s2 += a[r2 + k]! * xk;
        s3 += a[r3 + k]! * xk;
      }
      tmp[j] = s0;
      tmp[j + 1] = s1;
      tmp[j + 2] = s2;
      tmp[j + 3] = s3;
    }
    for (; j < rank; j++) {
      let sum = 0;
      const row = j * inDim;
      for (let k = 0; k < inDim; k++) sum += a[row + k]! * xs[at + k]!;
      tmp[j] = sum;
    }
    if (halfActivations) for (let r = 0; r < rank; r++) tmp[r] = toHalf(tmp[r]!);
    for (let i = 0; i < outDim; i++) {
      let sum = 0;
      const row = i * rank;
      for (let j = 0; j < rank; j++) sum += b[row + j]! * tmp[j]!;
      y[yAt + i] = y[yAt + i]! + scale * sum;
    }
  }
}

const toHalf = (v: number): number => f16ToF32(f32ToF16(v));

/** [in, out] of each target's projection in this config. */
export function targetDims(config: ModelConfig, target: LoraTarget): readonly [number, number] {
  const d = config.hiddenSize;
  const qDim = config.numHeads * config.headDim;
  const kvDim = config.numKvHeads * config.headDim;
  const ff = config.intermediateSize;
  switch (target) {
    case 'q':
      return [d, qDim];
    case 'k':
    case 'v':
      return [d, kvDim];
    case 'o':
      return [qDim, d];
    case 'gate':
    case 'up':
      return [d, ff];
    case 'down':
      return [ff, d];
  }
}

function checkAdapterShapes(adapter: LoraAdapter, config: ModelConfig): void {
  for (const [key, p] of adapter.pairs) {
    const [layer, target] = key.split('.') as [string, LoraTarget];
    const [inDim, outDim] = targetDims(config, target);
    const ok =
      Number(layer) < config.numLayers &&
      p.inDim === inDim &&
      p.outDim === outDim &&
      p.a.length === p.rank * inDim &&
      p.b.length === outDim * p.rank;
    if (!ok) throw new InvariantError(`LoRA ${adapter.name}: ${key} has shape [${p.outDim} x ${p.rank} x ${p.inDim}]`);
  }
}
