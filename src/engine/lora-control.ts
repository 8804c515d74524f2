// LoraControl: how the main thread loads and drops an engine's LoRA adapters (the engine thread's
// ThreadForward, or LocalLora for an engine on this thread). Owns nothing else: which names exist,
// who may use them and whether one is in use is the back end's registry (src/worker/lora-registry.ts).
// Must never: replace an adapter a step may be reading (the registry refuses a name already loaded).
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { ModelConfig } from '../formats/index.js';
import { loraDigest, type LoraBank } from './lora.js';
import { parseLoraGguf } from './lora-gguf.js';
import { loadPeftLora } from './lora-peft.js';

export interface LoraControl {
  /** Loads the GGUF LoRA file at `path` as `name`; resolves to its digest (its KV identity). */
  loadLora(name: string, path: string, scale: number): Promise<string>;
  unloadLora(name: string): Promise<void>;
}

/**
 * Reads an adapter into `bank` (the engine thread's handler, and LocalLora's): a GGUF file in
 * llama.cpp's layout, or a PEFT directory (adapter_config.json + adapter_model.safetensors).
 */
export async function loadLoraInto(bank: LoraBank, config: ModelConfig, name: string, path: string, scale: number) {
  const adapter = (await stat(path)).isDirectory()
    ? await loadPeftLora(path, config, name, scale)
    : parseLoraGguf(await readFile(path), path, config, name, scale);
  bank.set(adapter);
  return adapter.digest;
}

/** LoraControl over a bank on this thread (createEngine's runner). */
export class LocalLora implements LoraControl {
  readonly #bank: LoraBank;
  readonly #config: ModelConfig;

  constructor(bank: LoraBank, config: ModelConfig) {
    this.#bank = bank;
    this.#config = config;
  }

  loadLora(name: string, path: string, scale: number): Promise<string> {
    return loadLoraInto(this.#bank, this.#config, name, path, scale);
  }

  unloadLora(name: string): Promise<void> {
    this.#bank.delete(name);
    return Promise.resolve();
  }
}

/**
 * The digest loadLoraInto answers for `path` and `scale`, without reading the tensors or knowing the
 * base model: what a router that only names adapters sends in Reserve and Prefill, for each worker
 * to compare with its own. A file it cannot read throws (the caller says which flag).
 */
export async function loraFileDigest(path: string, scale: number): Promise<string> {
  if (!(await stat(path)).isDirectory()) return loraDigest([await readFile(path)], scale);
  const configText = await readFile(join(path, 'adapter_config.json'), 'utf8');
  return loraDigest([configText, await readFile(join(path, 'adapter_model.safetensors'))], scale);
}
