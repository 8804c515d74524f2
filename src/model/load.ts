// loadModel(): the one entry point from "what the user named" to a runnable model description.
// One code path per format, no conversion step:
//   1. `builtin:NAME` -> a directory (generated on first use into the cache, see builtin.ts)
//   2. a directory   -> Hugging Face: config.json, safetensors (single or sharded),
//                       tokenizer.json + tokenizer_config.json (+ generation_config.json)
//   3. a file        -> GGUF: metadata, tensors and the embedded tokenizer, the file mapped
//                       read-only (--weights mmap, the default where the native addon loads:
//                       tensors are views of the page cache) or read whole (--weights copy)
//   4. every tensor checked against the config; tokenizer and chat template built (added tokens
//      past the embedding's rows dropped)
// Every failure is one ModelLoadError naming the file and the problem. It never runs a model.
import { join } from 'node:path';
import { ModelLoadError, NO_FAULTS, type FaultSet } from '../core/index.js';
import type { HostTensor } from '../kernels/index.js';
import { resolveBuiltinModel, type BuiltinOptions } from './builtin.js';
import {
  createChatTemplate,
  pickChatTemplate,
  type ChatTemplate,
  ggufTokenizerJson,
  createTokenizer,
  type Tokenizer,
} from '../tokenizer/index.js';
import type { ModelConfig } from '../formats/index.js';
import {
  exists,
  isDirectory,
  readJsonFile,
  readOptionalJsonFile,
  readOptionalTextFile,
  openModelFile,
  gemma3NormsFromHf,
  configFromGguf,
  GgufMeta,
  readGguf,
  loadGgufWeights,
  ggufRepackStats,
  type RepackStats,
  configFromHf,
  loadHfWeights,
  isJsonObject,
  JsonFields,
  type JsonObject,
  type WeightsMode,
} from '../formats/index.js';

export interface ModelSource {
  readonly format: 'hf' | 'gguf';
  /** What the caller named (a path, or builtin:NAME). */
  readonly spec: string;
  /** The directory or .gguf file actually read. */
  readonly path: string;
  /** Weight files read. */
  readonly files: readonly string[];
  /** How the weights reach memory: mapped read-only (GGUF), or read (Hugging Face files, --weights copy). */
  readonly weights: WeightsMode;
  /** Why --weights mmap was asked for and the file was read instead; null otherwise. */
  readonly weightsFellBack: string | null;
  /** A GGUF's MXFP4 tensors, repacked at load into q8_0 (bf16 where a scale has no f16 form); absent when none. */
  readonly repacked?: RepackStats;
}

export interface LoadedModel {
  readonly config: ModelConfig;
  /** Canonical (Hugging Face) name -> tensor, every one checked against the config. */
  readonly tensors: ReadonlyMap<string, HostTensor>;
  readonly tokenizer: Tokenizer;
  readonly chatTemplate: ChatTemplate;
  readonly source: ModelSource;
  /** A mapped GGUF's buffers (their resident pages may be released once repacked); none when read. */
  readonly mappedBuffers: readonly ArrayBuffer[];
}

export type LoadOptions = Partial<BuiltinOptions> & {
  /** A GGUF's weights mapped read-only (default) or read whole; Hugging Face weights are always read. */
  readonly weights?: WeightsMode;
  /** Test-only fault points (`writable-weights-map`). */
  readonly faults?: FaultSet;
};

/** A model without its weights: what a router needs to template, tokenize and check lengths. */
export type ModelInfo = Omit<LoadedModel, 'tensors' | 'mappedBuffers'>;

export async function loadModel(spec: string, options: LoadOptions = {}): Promise<LoadedModel> {
  return (await load(spec, options, true)) as LoadedModel;
}

/**
 * Config, tokenizer and chat template, without reading a Hugging Face model's weight files
 * (a GGUF file is mapped, so only the pages of its header are read; read whole where the
 * addon does not load: its tokenizer lives in the same file as its weights).
 */
export async function loadModelInfo(spec: string, options: LoadOptions = {}): Promise<ModelInfo> {
  return load(spec, options, false);
}

async function load(spec: string, options: LoadOptions, withWeights: boolean): Promise<ModelInfo | LoadedModel> {
  const path = spec.startsWith('builtin:') ? await resolveBuiltinModel(spec, options) : spec;
  if (!(await exists(path))) {
    throw new ModelLoadError(path, 'not found: expected a Hugging Face model directory or a .gguf file');
  }
  if (await isDirectory(path)) return loadHfDirectory(spec, path, withWeights);
  if (/(\.safetensors|\.json)$/.test(path)) {
    throw new ModelLoadError(path, 'is one file of a Hugging Face model: pass the directory that holds it');
  }
  return loadGgufFile(spec, path, withWeights, options);
}

async function loadHfDirectory(spec: string, dir: string, withWeights: boolean): Promise<ModelInfo | LoadedModel> {
  const configPath = join(dir, 'config.json');
  if (!(await exists(configPath)))
    throw new ModelLoadError(configPath, 'file not found: a Hugging Face model directory needs config.json');
  const parsed = configFromHf(await readJsonFile(configPath), configPath);
  const generationPath = join(dir, 'generation_config.json');
  const generation = await readOptionalJsonFile(generationPath);
  const generationEos = generation === null ? [] : new JsonFields(generation, generationPath).intList('eos_token_id');

  const tokenizerPath = join(dir, 'tokenizer.json');
  if (!(await exists(tokenizerPath))) {
    throw new ModelLoadError(
      tokenizerPath,
      'file not found: Tessera needs tokenizer.json (tokenizer.model alone is not supported)',
    );
  }
  const tokenizerConfigPath = join(dir, 'tokenizer_config.json');
  const tokenizerConfig = (await readOptionalJsonFile(tokenizerConfigPath)) ?? {};
  const tokenizer = createTokenizer({
    tokenizerJson: addedTokensWithinEmbedding(await readJsonFile(tokenizerPath), parsed.vocabSize),
    tokenizerConfig,
    file: tokenizerPath,
    extraEosTokenIds: [...parsed.eosTokenIds, ...generationEos],
    fallbackBosTokenId: parsed.bosTokenId,
  });
  const config = withTokenizer(parsed, tokenizer, tokenizerPath);
  const templateText =
    pickChatTemplate(tokenizerConfig['chat_template'], tokenizerConfigPath) ??
    (await readOptionalTextFile(join(dir, 'chat_template.jinja')));
  const chatTemplate = createChatTemplate(templateText, tokenizer, tokenizerConfigPath);
  const source = { format: 'hf', spec, path: dir, weights: 'copy', weightsFellBack: null } as const;
  if (!withWeights) return { config, tokenizer, chatTemplate, source: { ...source, files: [] } };
  const weights = await loadHfWeights(dir, config);
  return {
    config,
    tensors: gemma3NormsFromHf(config, weights.tensors),
    mappedBuffers: [],
    tokenizer,
    chatTemplate,
    source: { ...source, files: weights.files },
  };
}

async function loadGgufFile(
  spec: string,
  file: string,
  withWeights: boolean,
  options: LoadOptions,
): Promise<ModelInfo | LoadedModel> {
  // Without weights, mapped whatever --weights says: only the header's pages are touched.
  const opened = await openModelFile(
    file,
    withWeights ? (options.weights ?? 'mmap') : 'mmap',
    options.faults ?? NO_FAULTS,
  );
  const g = readGguf(opened.bytes, file);
  const parsed = configFromGguf(g);
  const tensors = withWeights ? loadGgufWeights(g, parsed) : null;
  const { tokenizerJson, tokenizerConfig } = ggufTokenizerJson(g);
  const tokenizer = createTokenizer({
    tokenizerJson,
    tokenizerConfig,
    file,
    extraEosTokenIds: parsed.eosTokenIds,
    fallbackBosTokenId: parsed.bosTokenId,
  });
  const config = withTokenizer(parsed, tokenizer, file);
  const chatTemplate = createChatTemplate(new GgufMeta(g).optStr('tokenizer.chat_template'), tokenizer, file);
  const repacked = ggufRepackStats(g);
  const source = {
    format: 'gguf',
    spec,
    path: file,
    files: [file],
    weights: opened.how,
    weightsFellBack: opened.fellBack,
    ...(repacked.tensors > 0 ? { repacked } : {}),
  } as const;
  return tensors === null
    ? { config, tokenizer, chatTemplate, source }
    : { config, tensors, tokenizer, chatTemplate, source, mappedBuffers: opened.mapped };
}

/**
 * tokenizer.json without the added tokens whose ids lie past the embedding's rows: Gemma 3 1B's
 * lists <image_soft_token> as 262144 over 262144 rows (a text-only model with the family's
 * tokenizer). No such id could be embedded; without the entry its text tokenizes as ordinary
 * pieces, as in llama.cpp's GGUF of the same model (its converter keeps the 262144 pieces).
 */
function addedTokensWithinEmbedding(tokenizerJson: JsonObject, vocabSize: number): JsonObject {
  const added = tokenizerJson['added_tokens'];
  if (!Array.isArray(added)) return tokenizerJson;
  const within = added.filter((t) => !(isJsonObject(t) && typeof t['id'] === 'number' && t['id'] >= vocabSize));
  return within.length === added.length ? tokenizerJson : { ...tokenizerJson, added_tokens: within };
}

/** The config's special ids, completed from the tokenizer; the tokenizer must fit the embedding. */
function withTokenizer(config: ModelConfig, tokenizer: Tokenizer, file: string): ModelConfig {
  if (tokenizer.vocabSize > config.vocabSize) {
    throw new ModelLoadError(
      file,
      `the tokenizer has ${tokenizer.vocabSize} tokens but the model embeds only ${config.vocabSize}`,
    );
  }
  return {
    ...config,
    bosTokenId: config.bosTokenId ?? tokenizer.bosTokenId,
    eosTokenIds: [...new Set([...config.eosTokenIds, ...tokenizer.eosTokenIds])],
  };
}
