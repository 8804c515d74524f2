// `tessera gen-model`: write a deterministic random-weight Llama model (presets.ts) as a Hugging
// Face directory (config.json, model.safetensors, tokenizer.json, tokenizer_config.json) or as
// one GGUF file with the tokenizer and chat template embedded and Q/K permuted as llama.cpp's
// converter does. Tensors are generated and written one at a time (m100 never sits in memory
// twice). It must never write anything outside `out`.
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { ConfigError } from '../core/index.js';
import { QK, byteSize, quantize, type WeightDType } from '../kernels/index.js';
import {
  countParameters,
  rotaryDims,
  hasFusedQkv,
  validateConfig,
  type ModelConfig,
  FILE_TYPE_OF_DTYPE,
  GGML_TYPE_OF_DTYPE,
  type GgufValue,
  gguf,
  writeGgufFile,
  FUSED_GATE_UP,
  FUSED_QKV,
  hasFusedProjections,
  gemma3NormMultiplier,
  isGemma3Norm,
  localLayersFromPattern,
  permuteRopeRows,
  writeSafetensorsFile,
  expectedTensors,
  hfToGgufName,
  MXFP4_GGML_TYPE,
  GPT_OSS_SWIGLU,
  mxfp4Bytes,
  yarnMscale,
  quantizeMxfp4,
} from '../formats/index.js';
import { FILE_TYPE_OF_MIX, isMix, tensorDtype, type GenDType, type GenTensorType } from './gen-mix.js';
import { ggufTokenizerMetadata, hfTokenizerFiles } from './gen-vocab.js';
import { ggufExpertName, moeGgufMetadata, moeHfFields, stackExperts } from './gen-moe.js';
import { GEN_PRESETS, PRESET_CONFIGS, generateTensor, type GenPreset } from './presets.js';

export type GenFormat = 'hf' | 'gguf';

export interface GenProgress {
  readonly doneBytes: number;
  readonly totalBytes: number;
  readonly tensor: string;
}

export interface GenModelOptions {
  readonly preset: GenPreset;
  readonly format: GenFormat;
  /** A directory for hf, a .gguf file for gguf. */
  readonly out: string;
  readonly seed?: number;
  readonly dtype?: GenDType;
  readonly onProgress?: (progress: GenProgress) => void;
  /** Shape changes on top of the preset: tests; the CLI sets numLayers only (--layers, a truncated draft model). */
  readonly overrides?: GenOverrides;
  /** GGUF only: this chat template instead of the preset's (tests: a model's own, e.g. gpt-oss's real harmony template). */
  readonly chatTemplate?: string;
}

/** The fields of a preset a test may change (arch, vocabulary and RoPE stay the preset's). */
export type GenOverrides = Partial<
  Pick<
    ModelConfig,
    | 'hiddenSize'
    | 'intermediateSize'
    | 'numLayers'
    | 'numHeads'
    | 'numKvHeads'
    | 'headDim'
    | 'maxPositionEmbeddings'
    | 'ropeTheta'
    | 'tieWordEmbeddings'
  >
>;

export interface GenModelResult {
  readonly path: string;
  readonly config: ModelConfig;
  readonly parameters: number;
  /** Every file written. */
  readonly files: readonly string[];
}

export { GEN_CHAT_TEMPLATE } from './gen-vocab.js';

const HF_CLASS: Readonly<Record<ModelConfig['arch'], string>> = {
  llama: 'LlamaForCausalLM',
  mistral: 'MistralForCausalLM',
  qwen2: 'Qwen2ForCausalLM',
  qwen3: 'Qwen3ForCausalLM',
  phi3: 'Phi3ForCausalLM',
  gemma3: 'Gemma3ForCausalLM',
  qwen3moe: 'Qwen3MoeForCausalLM',
  glm4moe: 'Glm4MoeForCausalLM',
  glm4: 'Glm4ForCausalLM',
  'gpt-oss': 'GptOssForCausalLM',
};
const HF_MODEL_TYPE: Readonly<Partial<Record<ModelConfig['arch'], string>>> = {
  gemma3: 'gemma3_text',
  qwen3moe: 'qwen3_moe',
  glm4moe: 'glm4_moe',
};
const HF_DTYPES: readonly GenDType[] = ['f32', 'f16', 'bf16'];
const TORCH_DTYPE: Readonly<Partial<Record<GenDType, string>>> = { f32: 'float32', f16: 'float16', bf16: 'bfloat16' };

export function checkGenOptions(options: GenModelOptions): void {
  if (!(GEN_PRESETS as readonly string[]).includes(options.preset)) {
    throw new ConfigError(`unknown preset "${options.preset}" (choose ${GEN_PRESETS.join(' or ')})`);
  }
  const dtype = options.dtype ?? 'f32';
  if (options.format === 'hf' && !HF_DTYPES.includes(dtype)) {
    throw new ConfigError(
      `--dtype ${dtype} is not supported with --format hf: safetensors holds f32, f16 or bf16 (use --format gguf for q8_0/q4_0)`,
    );
  }
  if (options.format === 'hf' && PRESET_CONFIGS[options.preset]?.arch === 'gpt-oss') {
    throw new ConfigError(`--preset ${options.preset} writes GGUF only (Tessera does not read gpt-oss's HF directory)`);
  }
  if (dtype === 'mxfp4' && PRESET_CONFIGS[options.preset]?.moe === null) {
    throw new ConfigError('--dtype mxfp4 quantizes routed experts: choose an MoE preset');
  }
  if (options.format === 'gguf' && !options.out.endsWith('.gguf')) {
    throw new ConfigError(`--out must name a .gguf file for --format gguf, got ${options.out}`);
  }
  if (
    options.seed !== undefined &&
    !(Number.isSafeInteger(options.seed) && options.seed >= 0 && options.seed < 2 ** 32)
  ) {
    throw new ConfigError(`--seed must be an integer in [0, 2^32), got ${options.seed}`);
  }
}

export function genConfig(options: Pick<GenModelOptions, 'preset' | 'overrides' | 'dtype'>): ModelConfig {
  let config: ModelConfig;
  try {
    config = validateConfig(withOverrides(PRESET_CONFIGS[options.preset], options.overrides), 'gen-model overrides');
  } catch (error) {
    throw new ConfigError(error instanceof Error ? error.message : String(error), error);
  }
  const dtype = options.dtype ?? 'f32';
  const cols = [config.hiddenSize, config.intermediateSize, config.numHeads * config.headDim];
  if (config.moe !== null) cols.push(config.moe.expertIntermediateSize);
  if ((dtype === 'q8_0' || dtype === 'q4_0' || isMix(dtype)) && cols.some((n) => n % QK !== 0)) {
    throw new ConfigError(`${dtype} needs hidden, intermediate and attention sizes that are multiples of ${QK}`);
  }
  return config;
}

/** The preset with `overrides`; Gemma 3's layer pattern and attention scale follow the new shape. */
function withOverrides(preset: ModelConfig, overrides: GenOverrides | undefined): ModelConfig {
  const config = { ...preset, ...overrides };
  if (config.gemma3 === null || overrides === undefined) return config;
  const period = config.gemma3.localLayers.indexOf(false) + 1;
  return {
    ...config,
    gemma3: {
      ...config.gemma3,
      localLayers: localLayersFromPattern(config.numLayers, period),
      queryPreAttnScalar: config.headDim,
    },
  };
}

export async function genModel(options: GenModelOptions): Promise<GenModelResult> {
  checkGenOptions(options);
  const config = genConfig(options);
  const files = options.format === 'hf' ? await writeHf(config, options) : await writeGguf(config, options);
  return { path: options.out, config, parameters: countParameters(config), files };
}

interface TensorSpec {
  readonly name: string;
  readonly shape: readonly number[];
  readonly dtype: GenTensorType;
  /** The canonical tensors generated into it, in row order (two or three for Phi-3's fused ones). */
  readonly parts: readonly (readonly [string, readonly number[]])[];
}

/** The tensors to write: canonical ones, with Phi-3's q/k/v and gate/up fused as its files hold them. */
function tensorSpecs(
  config: ModelConfig,
  dtypeOf: (name: string, shape: readonly number[]) => GenTensorType,
): TensorSpec[] {
  const expected = [...expectedTensors(config)];
  const single = (name: string, shape: readonly number[]): TensorSpec => ({
    name,
    shape,
    dtype: dtypeOf(name, shape),
    parts: [[name, shape]],
  });
  if (!hasFusedProjections(config)) return expected.map(([name, shape]) => single(name, shape));
  const shapes = new Map(expected);
  const out: TensorSpec[] = [];
  for (const [name, shape] of expected) {
    const m = /^(model\.layers\.\d+\.)(?:self_attn\.([qkv])_proj|mlp\.(gate|up)_proj)\.weight$/.exec(name);
    if (m === null || (m[2] !== undefined && !hasFusedQkv(config)))
      out.push(single(name, shape)); // GLM-4: gate|up only
    else if (m[2] === 'q' || m[3] === 'gate') {
      const suffixes =
        m[2] === 'q' ? ['self_attn.q_proj', 'self_attn.k_proj', 'self_attn.v_proj'] : ['mlp.gate_proj', 'mlp.up_proj'];
      const parts = suffixes.map((s) => [`${m[1]}${s}.weight`, shapes.get(`${m[1]}${s}.weight`)!] as const);
      const fused = `${m[1]}${m[2] === 'q' ? FUSED_QKV : FUSED_GATE_UP}`;
      const fusedShape = [parts.reduce((a, [, s]) => a + s[0]!, 0), shape[1]!];
      out.push({ name: fused, shape: fusedShape, dtype: dtypeOf(fused, fusedShape), parts });
    }
  }
  return out;
}

function generateSpec(config: ModelConfig, spec: TensorSpec, seed: number): Float32Array {
  if (spec.parts.length === 1) return generateTensor(config, spec.name, spec.shape, seed);
  const out = new Float32Array(spec.shape.reduce((a, b) => a * b, 1));
  let at = 0;
  for (const [name, shape] of spec.parts) {
    const part = generateTensor(config, name, shape, seed);
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/**
 * general.name. llama.cpp sets Phi-3 token attributes by the model's *name* (one containing
 * "phi3" or "phi-3" must have Phi-3's <|endoftext|>, which the Llama 2 vocabulary gen-model ships
 * lacks: loading fails), so phi3 presets are named without it.
 */
function ggufModelName(config: ModelConfig, preset: string): string {
  return config.arch === 'phi3' ? `tessera-${preset.replace('phi3', 'phi-three')}` : `tessera-${preset}`;
}

/** llama.cpp's name; Phi-3's gate | up is its ffn_up; stacked experts are ffn_*_exps. */
function ggufName(name: string, arch: ModelConfig['arch']): string {
  const m = /^model\.layers\.(\d+)\.mlp\.gate_up_proj\.weight$/.exec(name);
  return m !== null ? `blk.${m[1]}.ffn_up.weight` : (ggufExpertName(name) ?? hfToGgufName(name, arch));
}

/** Bytes of `count` weights written as `type`. */
function genByteSize(type: GenTensorType, count: number): number {
  return type === 'mxfp4' ? mxfp4Bytes(count) : byteSize(type, count);
}

/** `values` written as `type` (MXFP4: llama.cpp's quantize_row_mxfp4_ref). */
function genQuantize(type: GenTensorType, values: Float32Array): Uint8Array {
  return type === 'mxfp4' ? quantizeMxfp4(values) : quantize(type, values);
}

function progress(
  options: GenModelOptions,
  specs: readonly { name: string; shape: readonly number[]; dtype: GenTensorType }[],
) {
  const sizes = specs.map((s) =>
    genByteSize(
      s.dtype,
      s.shape.reduce((a, b) => a * b, 1),
    ),
  );
  const totalBytes = sizes.reduce((a, b) => a + b, 0);
  let doneBytes = 0;
  return (index: number): void => {
    doneBytes += sizes[index]!;
    options.onProgress?.({ doneBytes, totalBytes, tensor: specs[index]!.name });
  };
}

async function writeHf(config: ModelConfig, options: GenModelOptions): Promise<string[]> {
  const seed = options.seed ?? 0;
  const dtype = options.dtype ?? 'f32';
  const dir = options.out;
  await mkdir(dir, { recursive: true });
  const tokenizer = await hfTokenizerFiles(config);
  const files = ['config.json', 'tokenizer.json', 'tokenizer_config.json', 'model.safetensors'].map((f) =>
    join(dir, f),
  );
  await writeFile(files[0]!, `${JSON.stringify(hfConfigJson(config, dtype, seed, options.preset), null, 2)}\n`);
  await writeFile(files[1]!, tokenizer.tokenizerJson);
  await writeFile(files[2]!, tokenizer.tokenizerConfig);
  const hfDtype = dtype as WeightDType; // checkGenOptions: f32, f16 or bf16
  const specs = tensorSpecs(config, () => hfDtype).map((spec) => ({ ...spec, dtype: hfDtype }));
  const done = progress(options, specs);
  await writeSafetensorsFile(
    files[3]!,
    specs,
    (i) => {
      const spec = specs[i]!;
      const data = genQuantize(spec.dtype, generateSpec(config, spec, seed));
      done(i);
      return data;
    },
    { format: 'pt', generator: `tessera gen-model --preset ${options.preset} --seed ${seed}` },
  );
  return files;
}

function hfConfigJson(config: ModelConfig, dtype: GenDType, seed: number, preset: GenPreset): Record<string, unknown> {
  const g = config.gemma3;
  const gemma3 =
    g === null
      ? {}
      : {
          hidden_activation: 'gelu_pytorch_tanh',
          query_pre_attn_scalar: g.queryPreAttnScalar,
          sliding_window: g.slidingWindow,
          layer_types: g.localLayers.map((local) => (local ? 'sliding_attention' : 'full_attention')),
          rope_local_base_freq: g.ropeLocalTheta,
          final_logit_softcapping: g.finalLogitSoftcap,
          attn_logit_softcapping: null,
        };
  return {
    architectures: [HF_CLASS[config.arch]],
    model_type: HF_MODEL_TYPE[config.arch] ?? config.arch,
    vocab_size: config.vocabSize,
    hidden_size: config.hiddenSize,
    intermediate_size: config.intermediateSize,
    num_hidden_layers: config.numLayers,
    num_attention_heads: config.numHeads,
    num_key_value_heads: config.numKvHeads,
    head_dim: config.headDim,
    ...(g === null ? { hidden_act: 'silu' } : gemma3),
    ...moeHfFields(config),
    max_position_embeddings: config.maxPositionEmbeddings,
    rms_norm_eps: config.rmsNormEps,
    rope_theta: config.ropeTheta,
    rope_scaling: null,
    tie_word_embeddings: config.tieWordEmbeddings,
    attention_bias: (config.arch === 'glm4moe' || config.arch === 'glm4') && config.attentionBias,
    ...(config.arch === 'glm4' ? { partial_rotary_factor: rotaryDims(config) / config.headDim } : {}),
    mlp_bias: false,
    bos_token_id: config.bosTokenId,
    eos_token_id: config.eosTokenIds[0],
    torch_dtype: TORCH_DTYPE[dtype],
    tessera_preset: preset,
    tessera_seed: seed,
  };
}

async function writeGguf(config: ModelConfig, options: GenModelOptions): Promise<string[]> {
  const seed = options.seed ?? 0;
  const dtype = options.dtype ?? 'f32';
  await mkdir(dirname(options.out), { recursive: true });
  const a = config.arch === 'mistral' ? 'llama' : config.arch;
  const metadata: [string, GgufValue][] = [
    ['general.architecture', gguf.str(a)],
    ['general.name', gguf.str(ggufModelName(config, options.preset))],
    ['general.alignment', gguf.u32(32)],
    ['general.file_type', gguf.u32(isMix(dtype) ? FILE_TYPE_OF_MIX[dtype] : FILE_TYPE_OF_DTYPE[dtype])],
    ['tessera.preset', gguf.str(options.preset)],
    ['tessera.seed', gguf.u32(seed)],
    [`${a}.vocab_size`, gguf.u32(config.vocabSize)],
    [`${a}.context_length`, gguf.u32(config.maxPositionEmbeddings)],
    [`${a}.embedding_length`, gguf.u32(config.hiddenSize)],
    [`${a}.block_count`, gguf.u32(config.numLayers)],
    [`${a}.feed_forward_length`, gguf.u32(config.intermediateSize)],
    [`${a}.rope.dimension_count`, gguf.u32(rotaryDims(config))],
    [`${a}.attention.key_length`, gguf.u32(config.headDim)],
    [`${a}.attention.value_length`, gguf.u32(config.headDim)],
    [`${a}.attention.head_count`, gguf.u32(config.numHeads)],
    [`${a}.attention.head_count_kv`, gguf.u32(config.numKvHeads)],
    [`${a}.attention.layer_norm_rms_epsilon`, gguf.f32(config.rmsNormEps)],
    [`${a}.rope.freq_base`, gguf.f32(config.ropeTheta)],
    ...gemma3Metadata(config),
    ...ropeScalingMetadata(config, a),
    ...gptOssMetadata(config, a),
    ...moeGgufMetadata(config, a),
    ...(await ggufTokenizerMetadata(config)).map(([key, value]): [string, GgufValue] =>
      key === 'tokenizer.chat_template' && options.chatTemplate !== undefined
        ? [key, gguf.str(options.chatTemplate)]
        : [key, value],
    ),
  ];
  // llama.cpp keeps 1-D tensors (norms) in f32 whatever the file type; K-quant mixes: gen-mix.ts.
  const dtypeOf = (name: string, shape: readonly number[]): GenTensorType => tensorDtype(config, dtype, name, shape);
  const specs = stackExperts(config, tensorSpecs(config, dtypeOf), dtypeOf); // MoE: one 3-D tensor per projection
  const done = progress(options, specs);
  const ggufSpecs = specs.map((s) => ({
    name: ggufName(s.name, config.arch),
    shape: s.shape,
    ggmlType: s.dtype === 'mxfp4' ? MXFP4_GGML_TYPE : GGML_TYPE_OF_DTYPE[s.dtype],
  }));
  await writeGgufFile(options.out, metadata, ggufSpecs, (i) => {
    const spec = specs[i]!;
    const values = generateSpec(config, spec, seed);
    const permuted = config.arch === 'llama' || config.arch === 'mistral'; // llama.cpp's converter: not qwen2/3
    const heads = !permuted
      ? 0
      : spec.name.endsWith('q_proj.weight')
        ? config.numHeads
        : spec.name.endsWith('k_proj.weight')
          ? config.numKvHeads
          : 0;
    // llama.cpp's converter writes Gemma 3's norm weights w as the multiplier 1 + w.
    const stored = isGemma3Norm(config, spec.name) ? gemma3NormMultiplier(values) : values;
    const f32 = { name: spec.name, dtype: 'f32' as const, shape: spec.shape, data: new Uint8Array(stored.buffer) };
    const ordered = heads > 0 ? permuteRopeRows(f32, heads, 'hf-to-gguf').data : f32.data;
    const data = genQuantize(spec.dtype, new Float32Array(ordered.buffer, ordered.byteOffset, ordered.byteLength / 4));
    done(i);
    return data;
  });
  return [options.out];
}

/** Gemma 3's keys, named as llama.cpp reads them (gemma3-config.ts); its pattern of local layers must be periodic. */
function gemma3Metadata(config: ModelConfig): [string, GgufValue][] {
  const g = config.gemma3;
  if (g === null) return [];
  const firstGlobal = g.localLayers.indexOf(false);
  const period = firstGlobal < 0 ? config.numLayers + 1 : firstGlobal + 1; // every layer local: no global one
  const periodic = g.localLayers.every((local, i) => local === i % period < period - 1);
  if (!periodic) throw new ConfigError('gemma3: GGUF needs every Nth layer global (one sliding_window_pattern)');
  const impliedScalar = config.numLayers === 62 ? config.hiddenSize / config.numHeads : config.headDim;
  if (g.queryPreAttnScalar !== impliedScalar)
    throw new ConfigError(`gemma3: GGUF implies query_pre_attn_scalar ${impliedScalar}, not ${g.queryPreAttnScalar}`);
  return [
    ['gemma3.attention.sliding_window', gguf.u32(g.slidingWindow)],
    ['gemma3.attention.sliding_window_pattern', gguf.u32(period)],
    ['gemma3.rope.freq_base_swa', gguf.f32(g.ropeLocalTheta)],
    ...(g.finalLogitSoftcap === null
      ? []
      : [['gemma3.final_logit_softcapping', gguf.f32(g.finalLogitSoftcap)] as [string, GgufValue]]),
  ];
}

/** YaRN as llama.cpp's converter writes it (gpt-oss); the other presets are unscaled. */
function ropeScalingMetadata(config: ModelConfig, a: string): [string, GgufValue][] {
  const r = config.ropeScaling;
  switch (r.type) {
    case 'none':
      return [];
    case 'yarn':
      if (r.attentionFactor !== yarnMscale(r.factor) || !r.truncate)
        throw new ConfigError('YaRN in GGUF: llama.cpp derives the attention factor from the factor and truncates');
      return [
        [`${a}.rope.scaling.type`, gguf.str('yarn')],
        [`${a}.rope.scaling.factor`, gguf.f32(r.factor)],
        [`${a}.rope.scaling.original_context_length`, gguf.u32(r.originalMaxPositionEmbeddings)],
        [`${a}.rope.scaling.yarn_beta_fast`, gguf.f32(r.betaFast)],
        [`${a}.rope.scaling.yarn_beta_slow`, gguf.f32(r.betaSlow)],
      ];
    default:
      throw new ConfigError(`gen-model writes no ${r.type} RoPE scaling`);
  }
}

/** gpt-oss's sliding window (its layer pattern must be llama.cpp's default: every other layer from 0). */
function gptOssMetadata(config: ModelConfig, a: string): [string, GgufValue][] {
  const g = config.gptOss;
  if (g === undefined) return [];
  if (!g.slidingLayers.every((sliding, i) => sliding === (i % 2 === 0)))
    throw new ConfigError('gpt-oss: GGUF holds the default pattern only (even layers sliding)');
  if (!g.attentionSinks || g.swigluLimit !== GPT_OSS_SWIGLU.limit || g.swigluAlpha !== GPT_OSS_SWIGLU.alpha)
    throw new ConfigError("gpt-oss: llama.cpp fixes the sinks and the SwiGLU's constants; a GGUF cannot change them");
  return [[`${a}.attention.sliding_window`, gguf.u32(g.slidingWindow)]];
}
