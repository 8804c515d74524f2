// A model's config without its weights: what `tessera plan` and the start-up check need to size
// the KV pool before anything large is read. Must never load tensors (a GGUF is mapped, and only
// its header's pages are read; read whole where the native addon does not load).
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfigError, ModelLoadError } from '../core/index.js';
import { configFromGguf, configFromHf, openModelFile, readGguf, type ModelConfig } from '../formats/index.js';
import {
  isBuiltinSpec,
  loadModelInfo,
  resolveBuiltinModel,
  vocabularyMismatch,
  type ModelInfo,
} from '../model/index.js';

/** The config of the model `spec` names (a Hugging Face directory, a .gguf file or builtin:NAME). */
export async function readModelConfig(spec: string, cacheDir: string): Promise<ModelConfig> {
  const path = isBuiltinSpec(spec) ? await resolveBuiltinModel(spec, { cacheDir }) : spec;
  const info = await stat(path).catch(() => null);
  if (info === null)
    throw new ModelLoadError(path, 'not found: expected a Hugging Face model directory or a .gguf file');
  if (info.isDirectory()) {
    const file = join(path, 'config.json');
    const text = await readFile(file, 'utf8').catch((error: unknown) => {
      throw new ModelLoadError(file, 'file not found: a Hugging Face model directory needs config.json', error);
    });
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (error) {
      throw new ModelLoadError(
        file,
        `is not valid JSON (${error instanceof Error ? error.message : String(error)})`,
        error,
      );
    }
    if (typeof json !== 'object' || json === null || Array.isArray(json))
      throw new ModelLoadError(file, 'must hold a JSON object');
    return configFromHf(json as Record<string, unknown>, file);
  }
  return configFromGguf(readGguf((await openModelFile(path, 'mmap')).bytes, path));
}

/**
 * A draft model must share the target's vocabulary id for id (model/draft-vocab.ts): else a
 * ConfigError (exit 2), before any weights load. `tessera up` checks it before any child starts.
 */
export async function checkDraftVocabulary(
  modelSpec: string,
  draftSpec: string,
  target: ModelInfo,
  home: string,
): Promise<void> {
  const mismatch = vocabularyMismatch(target, await loadModelInfo(draftSpec, { cacheDir: home }));
  if (mismatch === undefined) return;
  throw new ConfigError(
    `--draft-model ${draftSpec} cannot draft for --model ${modelSpec}: their vocabularies differ (${mismatch}); ` +
      "a draft model must share the target's tokenizer id for id",
  );
}
