// The weights of a GGUF file as canonical (Hugging Face) tensors: names mapped from llama.cpp's,
// shapes from ne reversed (same bytes: GGUF's ne = [in, out] is HF's [out, in] row-major), and
// Llama/Mistral Q and K rows un-permuted back to rotate-half order (see permute.ts; Qwen2/3,
// Phi-3 and Gemma 3 files are not permuted; Gemma 3's norms already hold 1 + w); an MoE layer's
// 3-D expert tensors (ffn_*_exps, [E, rows, cols]) split into one view per expert (gpt-oss: and their
// 2-D biases, ffn_*_exps.bias [E, n], into one vector per expert). Zero-copy except for those Q/K
// tensors and MXFP4 ones (gpt-oss's experts), which no kernel runs: each is repacked once, exactly,
// into q8_0 (or bf16; mxfp4.ts), counted in the caller's RepackStats. It converts no other dtype.
import { ModelLoadError } from '../core/index.js';
import type { HostTensor, WeightDType } from '../kernels/index.js';
import type { ModelConfig } from './config.js';
import { dtypeOfGgmlType, ggmlTypeName } from './gguf-format.js';
import { ggufTensorBytes, type GgufFile, type GgufTensorInfo } from './gguf-reader.js';
import { permuteRopeRows } from './permute.js';
import { MXFP4_GGML_TYPE, emptyRepackStats, fitsQ8_0, repackMxfp4, type RepackStats } from './mxfp4.js';
import { FUSED_GATE_UP, hasFusedProjections } from './fused.js';
import { byteSize } from '../kernels/index.js';
import {
  checkTensors,
  expertBiasName,
  expertName,
  GGUF_EXPERT_PROJ,
  ggufToHfName,
  isNextnLayer,
  layerName,
  type ExpertProj,
} from './tensor-names.js';

/** Tensors that configure the model rather than weigh it (read by gguf-config.ts). */
const CONFIG_TENSORS = new Set(['rope_freqs.weight']);

export function loadGgufWeights(
  g: GgufFile,
  config: ModelConfig,
  stats: RepackStats = emptyRepackStats(),
): Map<string, HostTensor> {
  const raw = new Map<string, HostTensor>();
  for (const info of g.tensors) {
    if (CONFIG_TENSORS.has(info.name) || isNextnLayer(info.name, config)) continue;
    const experts = /^blk\.(\d+)\.(ffn_(?:gate|up|down)_exps\.weight)$/.exec(info.name);
    if (experts !== null) {
      const proj = GGUF_EXPERT_PROJ[experts[2]!]!;
      for (const t of splitExperts(g, info, Number(experts[1]), proj, stats)) raw.set(t.name, t);
      continue;
    }
    const expertBias = /^blk\.(\d+)\.ffn_(gate|up|down)_exps\.bias$/.exec(info.name);
    if (expertBias !== null) {
      const proj = `${expertBias[2]!}_proj` as ExpertProj;
      for (const t of splitExpertBias(g, info, Number(expertBias[1]), proj)) raw.set(t.name, t);
      continue;
    }
    if (info.ggmlType === MXFP4_GGML_TYPE) {
      const name = ggufToHfName(info.name, config.arch);
      if (name === null)
        throw new ModelLoadError(g.file, `unexpected tensor ${info.name}: not part of a ${config.arch} model`);
      raw.set(name, repackMxfp4(name, info.shape, ggufTensorBytes(g, info), stats, g.file));
      continue;
    }
    // Phi-3's ffn_up holds gate | up (fused.ts splits it).
    const phi3GateUp = hasFusedProjections(config) ? /^blk\.(\d+)\.ffn_up\.weight$/.exec(info.name) : null;
    const name =
      phi3GateUp !== null ? layerName(Number(phi3GateUp[1]), FUSED_GATE_UP) : ggufToHfName(info.name, config.arch);
    if (name === null)
      throw new ModelLoadError(g.file, `unexpected tensor ${info.name}: not part of a ${config.arch} model`);
    raw.set(name, { name, dtype: readableDtype(g, info), shape: info.shape, data: ggufTensorBytes(g, info) });
  }
  const tensors = checkTensors(raw, config, g.file);
  if (config.arch !== 'llama' && config.arch !== 'mistral') return tensors;
  // llama.cpp's converter permuted Q and K (and their biases, if any) for GGML's rope.
  for (const [name, t] of tensors) {
    if (/\.self_attn\.q_proj\.(weight|bias)$/.test(name))
      tensors.set(name, permuteRopeRows(t, config.numHeads, 'gguf-to-hf'));
    if (/\.self_attn\.k_proj\.(weight|bias)$/.test(name))
      tensors.set(name, permuteRopeRows(t, config.numKvHeads, 'gguf-to-hf'));
  }
  return tensors;
}

function readableDtype(g: GgufFile, info: GgufTensorInfo): WeightDType {
  const dtype = dtypeOfGgmlType(info.ggmlType);
  if (dtype === null) {
    throw new ModelLoadError(
      g.file,
      `tensor ${info.name} has type ${ggmlTypeName(info.ggmlType)}; Tessera loads F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K and MXFP4 (repacked)`,
    );
  }
  return dtype;
}

/**
 * A 3-D expert tensor [E, rows, cols] as E matrices [rows, cols]: views of its bytes, expert by expert
 * (of its q8_0 / bf16 repack when it is MXFP4).
 */
function splitExperts(
  g: GgufFile,
  info: GgufTensorInfo,
  layer: number,
  proj: ExpertProj,
  stats: RepackStats,
): HostTensor[] {
  if (info.shape.length !== 3)
    throw new ModelLoadError(g.file, `tensor ${info.name} has shape [${info.shape.join(', ')}]; experts are 3-D`);
  const [numExperts, rows, cols] = info.shape as [number, number, number];
  const repacked =
    info.ggmlType === MXFP4_GGML_TYPE
      ? repackMxfp4(info.name, info.shape, ggufTensorBytes(g, info), stats, g.file)
      : null;
  const dtype = repacked?.dtype ?? readableDtype(g, info);
  const bytes = repacked?.data ?? ggufTensorBytes(g, info);
  const each = byteSize(dtype, rows * cols);
  return Array.from({ length: numExperts }, (_, e) => ({
    name: expertName(layer, e, proj),
    dtype,
    shape: [rows, cols],
    data: bytes.subarray(e * each, (e + 1) * each),
  }));
}

/** gpt-oss's expert biases, ffn_*_exps.bias [E, n] (f32), as E vectors [n]: views of its bytes. */
function splitExpertBias(g: GgufFile, info: GgufTensorInfo, layer: number, proj: ExpertProj): HostTensor[] {
  if (info.shape.length !== 2)
    throw new ModelLoadError(g.file, `tensor ${info.name} has shape [${info.shape.join(', ')}]; expert biases are 2-D`);
  const [numExperts, n] = info.shape as [number, number];
  const dtype = readableDtype(g, info);
  const bytes = ggufTensorBytes(g, info);
  const each = byteSize(dtype, n);
  return Array.from({ length: numExperts }, (_, e) => ({
    name: expertBiasName(layer, e, proj),
    dtype,
    shape: [n],
    data: bytes.subarray(e * each, (e + 1) * each),
  }));
}

/**
 * What loading `g`'s weights repacks (its MXFP4 tensors), counted from the scale bytes alone, so a
 * caller that does not load the weights here (serve: the engine thread does) can say it: the same
 * numbers loadGgufWeights' stats reach.
 */
export function ggufRepackStats(g: GgufFile): RepackStats {
  const stats = emptyRepackStats();
  for (const info of g.tensors) {
    if (info.ggmlType !== MXFP4_GGML_TYPE) continue;
    const count = info.shape.reduce((a, b) => a * b, 1);
    const q8 = fitsQ8_0(ggufTensorBytes(g, info), count);
    stats.tensors++;
    stats.mxfp4Bytes += info.byteLength ?? 0;
    stats.repackedBytes += byteSize(q8 ? 'q8_0' : 'bf16', count);
    if (!q8) stats.bf16Tensors++;
  }
  return stats;
}
