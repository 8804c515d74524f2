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
import type { ModelConfig } from '../formats/index.js';
import { addLoraRows, LoraScratch, type LoraPair, type NativeLoraRows } from './lora-rows.js';

/** The projections LoRA adapts, by llama.cpp's and PEFT's names. */
export const LORA_TARGETS = ['q', 'k', 'v', 'o', 'gate', 'up', 'down'] as const;
export type LoraTarget = (typeof LORA_TARGETS)[number];

export type { LoraPair, NativeLoraRows } from './lora-rows.js';

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
  readonly #scratch = new LoraScratch();
  readonly #native: NativeLoraRows | null;

  /** `native`: the addon's LoRA term (the engine's dense kernels are native), else the TypeScript one. */
  constructor(config: ModelConfig, native: NativeLoraRows | null = null) {
    this.#config = config;
    this.#native = native;
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
   * The rows of all sequences naming one adapter go through its pairs together (lora-rows.ts).
   */
  add(seqs: readonly AdaptedSeq[], layer: number, proj: LoraProjection, x: Float32Array, y: Float32Array): void {
    const width = this.#width[proj];
    const rowsOf = new Map<string, number[]>();
    for (const s of seqs) {
      if (s.adapter === undefined) continue;
      let rows = rowsOf.get(s.adapter);
      if (rows === undefined) rowsOf.set(s.adapter, (rows = []));
      for (let t = s.row; t < s.row + s.numTokens; t++) rows.push(t);
    }
    for (const [name, rows] of rowsOf) {
      const adapter = this.#adapters.get(name);
      if (adapter === undefined) throw new InvariantError(`LoRA adapter ${name} is not loaded on this engine`);
      for (const [target, offset] of this.#parts[proj]) {
        const pair = adapter.pairs.get(pairKey(layer, target));
        if (pair !== undefined) addLoraRows(pair, x, rows, y, width, offset, this.#scratch, this.#native);
      }
    }
  }
}

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
