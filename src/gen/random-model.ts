// A model held only in memory: gen-model's deterministic random weights for any config, as f32
// (or quantized) HostTensors, without files or a tokenizer. For tests and benchmarks that need
// odd shapes (biases, tied embeddings, tiny vocabularies) quickly. Never touches the disk.
import { quantize, type HostTensor, type WeightDType } from '../kernels/index.js';
import {
  validateConfig,
  type ModelConfig,
  gemma3NormMultiplier,
  isGemma3Norm,
  expectedTensors,
} from '../formats/index.js';
import { generateTensor } from './presets.js';

/** Every tensor `config` requires, drawn as gen-model draws them; matrices in `dtype` (default f32), vectors in f32. */
export function randomModel(
  config: ModelConfig,
  seed: number,
  dtype: WeightDType = 'f32',
): { config: ModelConfig; tensors: Map<string, HostTensor> } {
  validateConfig(config, 'randomModel');
  const tensors = new Map<string, HostTensor>();
  for (const [name, shape] of expectedTensors(config)) {
    const drawn = generateTensor(config, name, shape, seed);
    const values = isGemma3Norm(config, name) ? gemma3NormMultiplier(drawn) : drawn; // canonical: 1 + w
    const type = shape.length === 2 ? dtype : 'f32';
    tensors.set(name, { name, dtype: type, shape, data: quantize(type, values) });
  }
  return { config, tensors };
}
