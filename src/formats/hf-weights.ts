// The weights of a Hugging Face directory: `model.safetensors`, or the shards named by
// `model.safetensors.index.json` (weight_map: tensor -> shard file). Each shard is read whole;
// tensors come back as zero-copy views, checked against the config by checkTensors().
// It must never fall back to another format silently (pytorch_model.bin is an error).
import { join } from 'node:path';
import { ModelLoadError } from '../core/index.js';
import type { HostTensor } from '../kernels/index.js';
import type { ModelConfig } from './config.js';
import { exists, readJsonFile, readWholeFile } from './files.js';
import { isJsonObject } from './json-fields.js';
import { readSafetensors } from './safetensors.js';
import { checkTensors } from './tensor-names.js';

export const SAFETENSORS_FILE = 'model.safetensors';
export const SAFETENSORS_INDEX_FILE = 'model.safetensors.index.json';

export interface HfWeights {
  readonly tensors: Map<string, HostTensor>;
  readonly files: readonly string[];
}

export async function loadHfWeights(dir: string, config: ModelConfig): Promise<HfWeights> {
  const indexPath = join(dir, SAFETENSORS_INDEX_FILE);
  const singlePath = join(dir, SAFETENSORS_FILE);
  if (await exists(indexPath)) return loadSharded(dir, indexPath, config);
  if (await exists(singlePath)) {
    const st = readSafetensors(await readWholeFile(singlePath), singlePath);
    return { tensors: checkTensors(st.tensors, config, singlePath), files: [singlePath] };
  }
  const other = (await exists(join(dir, 'pytorch_model.bin')))
    ? ' (pytorch_model.bin is not supported: convert it to safetensors)'
    : '';
  throw new ModelLoadError(
    singlePath,
    `missing weight file: expected ${SAFETENSORS_FILE} or ${SAFETENSORS_INDEX_FILE}${other}`,
  );
}

async function loadSharded(dir: string, indexPath: string, config: ModelConfig): Promise<HfWeights> {
  const index = await readJsonFile(indexPath);
  const weightMap = index['weight_map'];
  if (!isJsonObject(weightMap)) throw new ModelLoadError(indexPath, 'weight_map is missing or not an object');
  const shards = new Map<string, string[]>();
  for (const [tensor, shard] of Object.entries(weightMap)) {
    if (typeof shard !== 'string' || shard.includes('/') || shard.includes('\\') || shard.startsWith('.')) {
      throw new ModelLoadError(
        indexPath,
        `weight_map entry for ${tensor} is not a plain file name: ${JSON.stringify(shard)}`,
      );
    }
    shards.set(shard, [...(shards.get(shard) ?? []), tensor]);
  }
  const all = new Map<string, HostTensor>();
  const fileOf = new Map<string, string>();
  const files: string[] = [];
  for (const [shard, names] of [...shards].sort(([a], [b]) => a.localeCompare(b))) {
    const path = join(dir, shard);
    if (!(await exists(path)))
      throw new ModelLoadError(path, `missing weight file (listed in ${SAFETENSORS_INDEX_FILE})`);
    const st = readSafetensors(await readWholeFile(path), path);
    for (const name of names) {
      if (!st.tensors.has(name))
        throw new ModelLoadError(
          path,
          `tensor ${name} is listed for this shard in ${SAFETENSORS_INDEX_FILE} but missing from it`,
        );
    }
    for (const [name, tensor] of st.tensors) {
      if (all.has(name)) throw new ModelLoadError(path, `tensor ${name} appears in more than one shard`);
      all.set(name, tensor);
      fileOf.set(name, path);
    }
    files.push(path);
  }
  return { tensors: checkTensors(all, config, indexPath, fileOf), files };
}
