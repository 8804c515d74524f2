// The memory a node needs against the machine's: the weights (what the kernels repack into their
// own memory, plus what stays of the file: with --weights mmap the pages read in place, the
// embedding's, in the page cache; with --weights copy the whole file read into the process), the
// KV pool and the step's activations. `tessera plan` prints the rows and exits 2 when the sum
// does not fit; `serve` (every role, so `up`'s children too) refuses to start on the same numbers
// (skip-memory-check is the negative control). Reads a GGUF's header only (mapped), a Hugging
// Face directory's file sizes only; never a weight.
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { totalmem } from 'node:os';
import { ConfigError } from '../core/index.js';
import { activationBytes } from '../engine/index.js';
import {
  dtypeOfGgmlType,
  openModelFile,
  readGguf,
  type GgufFile,
  type ModelConfig,
  type WeightsMode,
} from '../formats/index.js';
import { expertKindInPlace } from '../kernels/index.js';
import { isBuiltinSpec, resolveBuiltinModel } from '../model/index.js';
import type { PoolPlan } from './config-pool.js';
import { formatBytes } from './config-values.js';

/** What the model's files say about its weights, without reading one. */
export interface WeightsOnDisk {
  /** Bytes of every tensor in the file(s). */
  readonly fileBytes: number;
  /** Of them, the token embedding's (read in place, a row per token); 0 when unknown (Hugging Face). */
  readonly embeddingBytes: number;
  /** The embedding doubles as the LM head (then it is repacked too). */
  readonly tiedEmbedding: boolean;
  /**
   * Of them, the routed experts the native kernels read in place (kernels/native/experts.c: a
   * GGUF's q4_0 / q8_0 / q4_K / q6_K 3-D stacks, never repacked); 0 when the kernels are not native.
   */
  readonly expertsInPlaceBytes: number;
  /** How the weights will reach memory: a Hugging Face model's are always read. */
  readonly how: WeightsMode;
}

export interface MemoryPlan {
  readonly weights: WeightsOnDisk;
  /** Repacked into the kernels' memory: every matrix but the experts read in place (the native layouts hold as many bytes as GGML's). */
  readonly repackedBytes: number;
  /** What stays of the file: the pages read in place, the embedding's and the experts' (mmap), or the whole file (copy). */
  readonly fileResidentBytes: number;
  readonly kvPoolBytes: number;
  readonly activationBytes: number;
  readonly totalBytes: number;
  readonly machineBytes: number;
}

/** `expertsInPlace`: the dense kernels will be the native ones (only they read experts in place). */
export async function readWeightsOnDisk(
  spec: string,
  home: string,
  mode: WeightsMode,
  expertsInPlace: boolean,
): Promise<WeightsOnDisk> {
  const path = isBuiltinSpec(spec) ? await resolveBuiltinModel(spec, { cacheDir: home }) : spec;
  if ((await stat(path)).isDirectory()) {
    const files = (await readdir(path)).filter((f) => f.endsWith('.safetensors'));
    const sizes = await Promise.all(files.map(async (f) => (await stat(join(path, f))).size));
    const fileBytes = sizes.reduce((a, b) => a + b, 0);
    return { fileBytes, embeddingBytes: 0, tiedEmbedding: false, expertsInPlaceBytes: 0, how: 'copy' };
  }
  const g = readGguf((await openModelFile(path, 'mmap')).bytes, path);
  const bytesOf = (name: string): number => g.tensors.find((t) => t.name === name)?.byteLength ?? 0;
  return {
    fileBytes: g.tensors.reduce((a, t) => a + (t.byteLength ?? 0), 0),
    embeddingBytes: bytesOf('token_embd.weight'),
    tiedEmbedding: !g.tensors.some((t) => t.name === 'output.weight'),
    expertsInPlaceBytes: expertsInPlace ? inPlaceExpertBytes(g) : 0,
    how: mode,
  };
}

/**
 * Bytes of the layers' routed-expert stacks experts.c reads in place, by weights-prepared.ts's rule
 * (experts-native.ts's expertStacks): gate and up of one kind, down of a kind, each read in place at
 * its row length; no expert biases (gpt-oss's experts are repacked).
 */
function inPlaceExpertBytes(g: GgufFile): number {
  const byName = new Map(g.tensors.map((t) => [t.name, t]));
  let bytes = 0;
  for (const gate of g.tensors) {
    const m = /^blk\.(\d+)\.ffn_gate_exps\.weight$/.exec(gate.name);
    if (m === null) continue;
    const up = byName.get(`blk.${m[1]}.ffn_up_exps.weight`);
    const down = byName.get(`blk.${m[1]}.ffn_down_exps.weight`);
    if (up === undefined || down === undefined || byName.has(`blk.${m[1]}.ffn_gate_exps.bias`)) continue;
    const fits = (t: typeof gate): boolean => {
      const dtype = dtypeOfGgmlType(t.ggmlType);
      return dtype !== null && expertKindInPlace(dtype, t.ne[0]!);
    };
    if (gate.ggmlType !== up.ggmlType || !fits(gate) || !fits(up) || !fits(down)) continue;
    bytes += (gate.byteLength ?? 0) + (up.byteLength ?? 0) + (down.byteLength ?? 0);
  }
  return bytes;
}

export function planMemory(
  config: ModelConfig,
  weights: WeightsOnDisk,
  pool: PoolPlan,
  step: { readonly maxStepTokens: number; readonly maxStepLogits: number },
  machineBytes: number = totalmem(),
): MemoryPlan {
  const inPlace = (weights.tiedEmbedding ? 0 : weights.embeddingBytes) + weights.expertsInPlaceBytes;
  const repackedBytes = weights.fileBytes - inPlace;
  const fileResidentBytes =
    weights.how === 'mmap' ? weights.embeddingBytes + weights.expertsInPlaceBytes : weights.fileBytes;
  const activations = activationBytes(config, step.maxStepTokens, step.maxStepLogits);
  const totalBytes = repackedBytes + fileResidentBytes + pool.poolBytes + activations;
  return {
    weights,
    repackedBytes,
    fileResidentBytes,
    kvPoolBytes: pool.poolBytes,
    activationBytes: activations,
    totalBytes,
    machineBytes,
  };
}

/** `tessera plan`'s memory rows. */
export function memoryLines(m: MemoryPlan): [string, string][] {
  const stays =
    m.weights.how === 'mmap'
      ? m.weights.expertsInPlaceBytes > 0
        ? `the embedding and ${formatBytes(m.weights.expertsInPlaceBytes)} of routed experts read in place from the map (page cache)`
        : 'the embedding read in place from the map (page cache)'
      : 'the whole file read into memory (--weights copy)';
  return [
    [
      'weights',
      `${formatBytes(m.repackedBytes + m.fileResidentBytes)} = ${formatBytes(m.repackedBytes)} repacked by the kernels + ` +
        `${formatBytes(m.fileResidentBytes)} of the file (${stays}); file ${formatBytes(m.weights.fileBytes)}`,
    ],
    ['activations', formatBytes(m.activationBytes)],
    [
      'memory',
      `${formatBytes(m.totalBytes)} (weights + KV pool ${formatBytes(m.kvPoolBytes)} + activations) of ` +
        `${formatBytes(m.machineBytes)}: ${m.totalBytes <= m.machineBytes ? 'fits' : 'NO, does not fit'}`,
    ],
  ];
}

/** undefined when the node fits the machine's memory, else the error it refuses to start with. */
export function memoryCheckError(m: MemoryPlan): ConfigError | undefined {
  if (m.totalBytes <= m.machineBytes) return undefined;
  const hint = m.weights.how === 'copy' && m.weights.fileBytes > 0 ? ', map the weights (--weights mmap)' : '';
  return new ConfigError(
    `this node needs ${formatBytes(m.totalBytes)} (${m.totalBytes} bytes: weights ${formatBytes(m.repackedBytes)} repacked + ` +
      `${formatBytes(m.fileResidentBytes)} of the file, KV pool ${formatBytes(m.kvPoolBytes)}, activations ${formatBytes(m.activationBytes)}) ` +
      `but this machine has ${formatBytes(m.machineBytes)} (${m.machineBytes} bytes). Lower --kv-memory or --kv-pages${hint}, or use a smaller model.`,
  );
}
