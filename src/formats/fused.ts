// Phi-3's (and GLM-4's gate|up) fused projections split into the canonical per-projection tensors the rest of Tessera
// knows: self_attn.qkv_proj (rows q | k | v) and mlp.gate_up_proj (rows gate | up), in HF and
// GGUF files alike (GGUF: attn_qkv, and ffn_up holding gate | up). Rows are independent in every
// dtype (GGML blocks run along a row), so each part is a zero-copy view of the fused bytes.
// weights-prepared.ts stacks them again for the forward pass. Never converts a dtype.
import { ModelLoadError } from '../core/index.js';
import { byteSize, type HostTensor } from '../kernels/index.js';
import type { ModelConfig } from './config.js';

/** Hugging Face's layer tensor names (as tensor-names.ts's layerName, which imports this file). */
const layerName = (layer: number, suffix: string): string => `model.layers.${layer}.${suffix}`;

export function hasFusedProjections(config: Pick<ModelConfig, 'arch'>): boolean {
  return config.arch === 'phi3' || config.arch === 'glm4';
}

/** Phi-3 fuses q/k/v too; GLM-4 only gate|up. */
export const hasFusedQkv = (config: Pick<ModelConfig, 'arch'>): boolean => config.arch === 'phi3';

export const FUSED_QKV = 'self_attn.qkv_proj.weight';
export const FUSED_GATE_UP = 'mlp.gate_up_proj.weight';

/** `found` with each fused tensor replaced by its parts (unchanged for other archs). */
export function splitFused(
  found: ReadonlyMap<string, HostTensor>,
  config: ModelConfig,
  file: string,
): ReadonlyMap<string, HostTensor> {
  if (!hasFusedProjections(config)) return found;
  const out = new Map(found);
  const qDim = config.numHeads * config.headDim;
  const kvDim = config.numKvHeads * config.headDim;
  const ff = config.intermediateSize;
  for (let i = 0; i < config.numLayers; i++) {
    if (hasFusedQkv(config))
      split(out, layerName(i, FUSED_QKV), file, [
        [layerName(i, 'self_attn.q_proj.weight'), qDim],
        [layerName(i, 'self_attn.k_proj.weight'), kvDim],
        [layerName(i, 'self_attn.v_proj.weight'), kvDim],
      ]);
    split(out, layerName(i, FUSED_GATE_UP), file, [
      [layerName(i, 'mlp.gate_proj.weight'), ff],
      [layerName(i, 'mlp.up_proj.weight'), ff],
    ]);
  }
  return out;
}

function split(
  tensors: Map<string, HostTensor>,
  name: string,
  file: string,
  parts: readonly (readonly [string, number])[],
): void {
  const t = tensors.get(name);
  if (t === undefined) return; // checkTensors names the missing parts
  const rows = parts.reduce((a, [, r]) => a + r, 0);
  if (t.shape.length !== 2 || t.shape[0] !== rows) {
    throw new ModelLoadError(
      file,
      `tensor ${name} has shape [${t.shape.join(', ')}] but the config implies [${rows}, ${t.shape[1] ?? '?'}]`,
    );
  }
  const cols = t.shape[1]!;
  const rowBytes = byteSize(t.dtype, cols);
  tensors.delete(name);
  let row = 0;
  for (const [part, n] of parts) {
    tensors.set(part, {
      name: part,
      dtype: t.dtype,
      shape: [n, cols],
      data: t.data.subarray(row * rowBytes, (row + n) * rowBytes),
    });
    row += n;
  }
}
