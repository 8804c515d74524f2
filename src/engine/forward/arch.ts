// Which forward pass runs a model: one function per architecture family, each in its own
// forward-*.ts file (forward/llama.ts: the Llama family's, and the contract every pass keeps). The one
// place that picks by architecture; it must never run a pass itself nor look at anything but the
// config.
import type { Activations } from '../activations.js';
import { forward, type ForwardBatch, type ForwardModel } from './llama.js';
import { forwardGemma3 } from './gemma3.js';

/** The forward pass a model runs: Gemma 3's, or the Llama family's. */
export function forwardFor(
  config: ForwardModel['config'],
): (m: ForwardModel, batch: ForwardBatch, a: Activations) => Promise<Float32Array> {
  return config.gemma3 !== null ? forwardGemma3 : forward;
}
