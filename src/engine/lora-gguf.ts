// LoRA adapters in llama.cpp's GGUF layout (convert_lora_to_gguf.py; llama-adapter.cpp reads it):
//   general.type = "adapter", adapter.type = "lora", adapter.lora.alpha (f32; 0 = scale 1),
//   general.architecture equal to the base model's;
//   "<base tensor name>.lora_a": ne = [in, rank]   (row-major [rank, in]: PEFT's lora_A.weight)
//   "<base tensor name>.lora_b": ne = [rank, out]  (row-major [out, rank]: PEFT's lora_B.weight)
//   scale = user scale · alpha / rank (llama.cpp's get_scale, rank = lora_b's ne[0]).
// Llama/Mistral Q and K outputs are row-permuted in GGUF (permute.ts), so lora_b of attn_q and
// attn_k is too: the reader un-permutes it, the writer permutes it, as for the base weights.
// Owns reading (checked against the base config: names, shapes, dtypes) and writing such files
// (gen-lora: random low-rank A and B). Must never accept a tensor it cannot place, or a shape
// that disagrees with the base model: a wrong adapter is a ModelLoadError, never a silent no-op.
import { ModelLoadError, Rng } from '../core/index.js';
import { quantize, type HostTensor, type WeightDType } from '../kernels/index.js';
import type { ModelConfig } from '../formats/index.js';
import {
  dtypeOfGgmlType,
  GGML_TYPE_OF_DTYPE,
  ggmlTypeName,
  type GgufValue,
  GgufMeta,
  ggufTensorBytes,
  readGguf,
  gguf,
  writeGgufFile,
  type GgufTensorSpec,
  tensorToF32,
  permuteRopeRows,
  ggufToHfName,
  hfToGgufName,
  layerName,
} from '../formats/index.js';
import {
  loraDigest,
  pairKey,
  targetDims,
  LORA_TARGETS,
  type LoraAdapter,
  type LoraPair,
  type LoraTarget,
} from './lora.js';

const HF_SUFFIX: Readonly<Record<LoraTarget, string>> = {
  q: 'self_attn.q_proj.weight',
  k: 'self_attn.k_proj.weight',
  v: 'self_attn.v_proj.weight',
  o: 'self_attn.o_proj.weight',
  gate: 'mlp.gate_proj.weight',
  up: 'mlp.up_proj.weight',
  down: 'mlp.down_proj.weight',
};

/** The GGUF architecture name of a config (mistral files say llama, as gen-model writes them). */
export const ggufArchOf = (config: Pick<ModelConfig, 'arch'>): string =>
  config.arch === 'mistral' ? 'llama' : config.arch;

const permuted = (config: ModelConfig): boolean => config.arch === 'llama' || config.arch === 'mistral';

function checkArch(config: ModelConfig, file: string): void {
  if (config.gemma3 !== null || config.arch === 'phi3')
    throw new ModelLoadError(file, `LoRA adapters are not supported for ${config.arch} models in Tessera yet`);
}

/** Reads a GGUF LoRA adapter for `config`; `scale` is the user's (llama.cpp's --lora-scaled). */
export function parseLoraGguf(
  bytes: Uint8Array,
  file: string,
  config: ModelConfig,
  name: string,
  scale = 1,
): LoraAdapter {
  checkArch(config, file);
  const g = readGguf(bytes, file);
  const meta = new GgufMeta(g);
  if (meta.optStr('general.type') !== 'adapter' || meta.optStr('adapter.type') !== 'lora')
    throw new ModelLoadError(file, 'not a LoRA adapter (general.type "adapter" and adapter.type "lora" expected)');
  const arch = meta.optStr('general.architecture');
  if (arch !== ggufArchOf(config))
    throw new ModelLoadError(
      file,
      `adapter architecture ${arch ?? '(none)'} does not match the model's ${ggufArchOf(config)}`,
    );
  const alpha = meta.optNum('adapter.lora.alpha') ?? 0;
  const halves = new Map<string, { a?: HostTensor; b?: HostTensor; target: LoraTarget; layer: number }>();
  for (const info of g.tensors) {
    const m = /^(.+)\.lora_(a|b)$/.exec(info.name);
    const hf = m === null ? null : ggufToHfName(m[1]!, config.arch);
    const place = hf === null ? null : /^model\.layers\.(\d+)\.(.+)$/.exec(hf);
    const target = place === null ? undefined : LORA_TARGETS.find((t) => HF_SUFFIX[t] === place[2]);
    if (m === null || place === null || target === undefined)
      throw new ModelLoadError(file, `unexpected tensor ${info.name}: not a LoRA half of a projection Tessera adapts`);
    const dtype = dtypeOfGgmlType(info.ggmlType);
    if (dtype === null) throw new ModelLoadError(file, `tensor ${info.name} has type ${ggmlTypeName(info.ggmlType)}`);
    const half = halves.get(m[1]!) ?? { target, layer: Number(place[1]) };
    half[m[2] === 'a' ? 'a' : 'b'] = { name: info.name, dtype, shape: info.shape, data: ggufTensorBytes(g, info) };
    halves.set(m[1]!, half);
  }
  const pairs = new Map<string, LoraPair>();
  for (const [base, { a, b, target, layer }] of halves) {
    if (a === undefined || b === undefined) throw new ModelLoadError(file, `${base}: lora_a and lora_b come in pairs`);
    const [inDim, outDim] = targetDims(config, target);
    const rank = b.shape[1]!;
    if (layer >= config.numLayers || a.shape.join() !== `${rank},${inDim}` || b.shape.join() !== `${outDim},${rank}`)
      throw new ModelLoadError(
        file,
        `${base}: lora_a [${a.shape.join(', ')}] and lora_b [${b.shape.join(', ')}] do not fit [${outDim}, ${inDim}]`,
      );
    const heads = target === 'q' ? config.numHeads : config.numKvHeads;
    const bHf = permuted(config) && (target === 'q' || target === 'k') ? permuteRopeRows(b, heads, 'gguf-to-hf') : b;
    const pairScale = alpha === 0 ? scale : (scale * alpha) / rank;
    pairs.set(pairKey(layer, target), {
      rank,
      inDim,
      outDim,
      a: tensorToF32(a),
      b: tensorToF32(bHf),
      scale: pairScale,
      halfActivations: a.dtype === 'f16' || a.dtype === 'bf16',
    });
  }
  if (pairs.size === 0) throw new ModelLoadError(file, 'the adapter holds no LoRA tensors');
  return { name, digest: loraDigest([bytes], scale), pairs };
}

export interface GenLoraOptions {
  readonly out: string;
  readonly rank?: number;
  /** adapter.lora.alpha (default rank: scale 1). */
  readonly alpha?: number;
  readonly seed?: number;
  readonly targets?: readonly LoraTarget[];
  /** f32 (default), f16 or q8_0 (rank a multiple of 32). */
  readonly dtype?: Extract<WeightDType, 'f32' | 'f16' | 'q8_0'>;
  /** B's values are uniform in ±strength/sqrt(rank) (default 1): large enough to change outputs visibly. */
  readonly strength?: number;
}

/** Writes a random LoRA adapter for `config` in llama.cpp's GGUF layout; returns its tensor count. */
export async function genLoraGguf(config: ModelConfig, o: GenLoraOptions): Promise<number> {
  checkArch(config, o.out);
  const rank = o.rank ?? 8;
  const dtype = o.dtype ?? 'f32';
  if (!Number.isInteger(rank) || rank < 1 || (dtype === 'q8_0' && rank % 32 !== 0))
    throw new ModelLoadError(o.out, `rank ${rank} (q8_0 needs a multiple of 32)`);
  const rng = new Rng(o.seed ?? 1);
  const uniform = (n: number, bound: number): Float32Array =>
    Float32Array.from({ length: n }, () => (2 * rng.nextFloat() - 1) * bound);
  const specs: (GgufTensorSpec & { data: Uint8Array })[] = [];
  const targets = o.targets ?? LORA_TARGETS;
  for (let layer = 0; layer < config.numLayers; layer++) {
    for (const target of targets) {
      const [inDim, outDim] = targetDims(config, target);
      const baseName = hfToGgufName(layerName(layer, HF_SUFFIX[target]), config.arch);
      const a = uniform(rank * inDim, 1 / Math.sqrt(inDim));
      const b: HostTensor = {
        name: `${baseName}.lora_b`,
        dtype,
        shape: [outDim, rank],
        data: quantize(dtype, uniform(outDim * rank, (o.strength ?? 1) / Math.sqrt(rank))),
      };
      const heads = target === 'q' ? config.numHeads : config.numKvHeads;
      const bGguf =
        permuted(config) && (target === 'q' || target === 'k') ? permuteRopeRows(b, heads, 'hf-to-gguf') : b;
      const ggmlType = GGML_TYPE_OF_DTYPE[dtype];
      specs.push({ name: `${baseName}.lora_a`, ggmlType, shape: [rank, inDim], data: quantize(dtype, a) });
      specs.push({ name: bGguf.name, ggmlType, shape: [outDim, rank], data: bGguf.data });
    }
  }
  const metadata: [string, GgufValue][] = [
    ['general.architecture', gguf.str(ggufArchOf(config))],
    ['general.type', gguf.str('adapter')],
    ['general.name', gguf.str('tessera-gen-lora')],
    ['general.alignment', gguf.u32(32)],
    ['adapter.type', gguf.str('lora')],
    ['adapter.lora.alpha', gguf.f32(o.alpha ?? rank)],
    ['tessera.seed', gguf.u32(o.seed ?? 1)],
  ];
  await writeGgufFile(o.out, metadata, specs, (i) => specs[i]!.data);
  return specs.length;
}
