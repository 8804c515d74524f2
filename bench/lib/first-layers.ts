// A Hugging Face model's first n layers, written as a model of its own: a self-speculative draft
// (LayerSkip's early exit without its training) for a trained model that has no smaller sibling,
// such as the shipped builtin:austen. Same embeddings, final norm and head, same tokenizer files;
// config.json's num_hidden_layers set to n. For the draft-model benchmark and e2e tests only.
import { copyFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { readSafetensors } from '../../src/formats/index.js';
import { encodeSafetensors } from '../../src/formats/safetensors.js';

const COPIED = ['generation_config.json', 'tokenizer.json', 'tokenizer_config.json'];

/** Writes `src`'s first `numLayers` layers to the directory `out` (created); returns `out`. */
export async function writeFirstLayers(src: string, out: string, numLayers: number): Promise<string> {
  await mkdir(out, { recursive: true });
  const file = join(src, 'model.safetensors');
  const weights = readSafetensors(new Uint8Array(await readFile(file)), file);
  const kept = [...weights.tensors.values()].filter((t) => {
    const layer = /\.layers\.(\d+)\./.exec(t.name);
    return layer === null || Number(layer[1]) < numLayers;
  });
  await writeFile(join(out, 'model.safetensors'), encodeSafetensors(kept, weights.metadata));
  const config = JSON.parse(await readFile(join(src, 'config.json'), 'utf8')) as Record<string, unknown>;
  await writeFile(join(out, 'config.json'), JSON.stringify({ ...config, num_hidden_layers: numLayers }, null, 2));
  for (const name of COPIED) await copyFile(join(src, name), join(out, name));
  return out;
}
