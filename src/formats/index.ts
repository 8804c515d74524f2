// Model file formats: Hugging Face config.json and safetensors, GGUF (read and write), the
// normalized ModelConfig, canonical tensor names and the RoPE tables a config implies. Pure
// parsing and checking; see README.md. Names used outside the module only.
export {
  countParameters,
  hasQkNorm,
  isMoeLayer,
  ropeInterleaved,
  rotaryDims,
  validateConfig,
  type GptOssParams,
  type ModelConfig,
} from './config.js';
export { GPT_OSS_SWIGLU, slidingLayersFromPattern } from './gpt-oss-config.js';
export {
  dequantizeMxfp4,
  emptyRepackStats,
  MXFP4_GGML_TYPE,
  mxfp4Bytes,
  quantizeMxfp4,
  type RepackStats,
} from './mxfp4.js';
export {
  exists,
  isDirectory,
  readJsonFile,
  readOptionalJsonFile,
  readOptionalTextFile,
  readWholeFile,
  openModelFile,
  WEIGHTS_MODES,
  type FileBytes,
  type ModelFile,
  type WeightsMode,
} from './files.js';
export { FUSED_GATE_UP, FUSED_QKV, hasFusedProjections, hasFusedQkv } from './fused.js';
export { gemma3NormMultiplier, gemma3NormsFromHf, isGemma3Norm, localLayersFromPattern } from './gemma3-config.js';
export { configFromGguf } from './gguf-config.js';
export {
  dtypeOfGgmlType,
  FILE_TYPE_OF_DTYPE,
  GGML_TYPE_OF_DTYPE,
  ggmlTypeName,
  TOKEN_TYPE,
  type GgufValue,
} from './gguf-format.js';
export { GgufMeta } from './gguf-meta.js';
export { ggufTensorBytes, readGguf, type GgufFile } from './gguf-reader.js';
export { ggufRepackStats, loadGgufWeights } from './gguf-weights.js';
export { encodeGguf, gguf, writeGgufFile, type GgufTensorSpec } from './gguf-writer.js';
export { configFromHf } from './hf-config.js';
export { loadHfWeights } from './hf-weights.js';
export { tensorToF32 } from './host-tensor.js';
export { isJsonObject, JsonFields, parseJsonObject, type JsonObject } from './json-fields.js';
export { type MoeParams } from './moe-config.js';
export { partialRopeOrder, permuteHeadRows, permuteRopeRows } from './permute.js';
export { ropeDependsOnLength, ropeTable, yarnMscale, type RopeTable } from './rope.js';
export { encodeSafetensors, readSafetensors, writeSafetensorsFile } from './safetensors.js';
export {
  ATTENTION_SINKS,
  EMBED,
  expectedTensors,
  expertBiasName,
  expertName,
  FINAL_NORM,
  ggufToHfName,
  GLM4_POST_ATTN_NORM,
  GLM4_POST_MLP_NORM,
  hfToGgufName,
  layerName,
  LM_HEAD,
  O_PROJ_BIAS,
  ROUTER_BIAS,
  ROUTER_LOGIT_BIAS,
  sharedExpertName,
  type ExpertProj,
} from './tensor-names.js';
