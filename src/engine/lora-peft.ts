// LoRA adapters as PEFT saves them: a directory with adapter_config.json (r, lora_alpha,
// use_rslora, target_modules) and adapter_model.safetensors, tensors named
//   base_model.model.model.layers.N.<self_attn|mlp>.<proj>.lora_A.weight  [r, in]
//   base_model.model.model.layers.N.<self_attn|mlp>.<proj>.lora_B.weight  [out, r]
// in Hugging Face's row order (no Q/K permutation). scale = lora_alpha / r (rsLoRA: / sqrt(r)).
// Must never accept a tensor it cannot place or a shape that disagrees with the base model.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ModelLoadError } from '../core/index.js';
import type { HostTensor } from '../kernels/index.js';
import type { ModelConfig } from '../formats/index.js';
import { tensorToF32, parseJsonObject, readSafetensors } from '../formats/index.js';
import {
  loraDigest,
  pairKey,
  targetDims,
  LORA_TARGETS,
  type LoraAdapter,
  type LoraPair,
  type LoraTarget,
} from './lora.js';

const PROJ: Readonly<Record<string, LoraTarget>> = {
  q_proj: 'q',
  k_proj: 'k',
  v_proj: 'v',
  o_proj: 'o',
  gate_proj: 'gate',
  up_proj: 'up',
  down_proj: 'down',
};

/** Reads a PEFT LoRA directory for `config`; `scale` is the user's. */
export async function loadPeftLora(dir: string, config: ModelConfig, name: string, scale = 1): Promise<LoraAdapter> {
  if (config.gemma3 !== null || config.arch === 'phi3')
    throw new ModelLoadError(dir, `LoRA adapters are not supported for ${config.arch} models in Tessera yet`);
  const configText = await readFile(join(dir, 'adapter_config.json'), 'utf8');
  const cfg = parseJsonObject(configText, join(dir, 'adapter_config.json'));
  const r = cfg['r'];
  const alpha = cfg['lora_alpha'] ?? r;
  if (typeof r !== 'number' || !(r >= 1) || typeof alpha !== 'number')
    throw new ModelLoadError(dir, 'adapter_config.json needs a positive `r` and a numeric `lora_alpha`');
  const pairScale = (scale * alpha) / (cfg['use_rslora'] === true ? Math.sqrt(r) : r);
  const file = join(dir, 'adapter_model.safetensors');
  const bytes = await readFile(file);
  const st = readSafetensors(bytes, file);
  const halves = new Map<string, { a?: HostTensor; b?: HostTensor; layer: number; target: LoraTarget }>();
  for (const [tensorName, t] of st.tensors) {
    const m =
      /^(?:base_model\.model\.)?model\.layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])(?:\.default)?\.weight$/.exec(
        tensorName,
      );
    const target = m === null ? undefined : PROJ[m[2]!];
    if (m === null || target === undefined || !LORA_TARGETS.includes(target))
      throw new ModelLoadError(file, `unexpected tensor ${tensorName}: not a LoRA half of a projection Tessera adapts`);
    const key = pairKey(Number(m[1]), target);
    const half = halves.get(key) ?? { layer: Number(m[1]), target };
    half[m[3] === 'A' ? 'a' : 'b'] = t;
    halves.set(key, half);
  }
  const pairs = new Map<string, LoraPair>();
  for (const [key, { a, b, layer, target }] of halves) {
    const [inDim, outDim] = targetDims(config, target);
    if (a === undefined || b === undefined || layer >= config.numLayers)
      throw new ModelLoadError(file, `${key}: lora_A and lora_B come in pairs, within the model's layers`);
    if (a.shape.join() !== `${r},${inDim}` || b.shape.join() !== `${outDim},${r}`)
      throw new ModelLoadError(
        file,
        `${key}: lora_A [${a.shape.join(', ')}] and lora_B [${b.shape.join(', ')}] do not fit r=${r}, [${outDim}, ${inDim}]`,
      );
    pairs.set(key, {
      rank: r,
      inDim,
      outDim,
      a: tensorToF32(a),
      b: tensorToF32(b),
      scale: pairScale,
      halfActivations: false,
    });
  }
  if (pairs.size === 0) throw new ModelLoadError(file, 'the adapter holds no LoRA tensors');
  return { name, digest: loraDigest([configText, bytes], scale), pairs };
}
