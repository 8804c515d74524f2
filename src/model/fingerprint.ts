// A model's fingerprint: 16 hex digits of xxh64 over everything that decides the KV a prompt
// produces and the tokens that follow it: the config fields the forward pass reads, and every
// tensor's name, type, shape and bytes (canonical names, in sorted order, so the Hugging Face
// and GGUF files of one model agree). A disaggregated cluster moves KV only between nodes whose
// fingerprints are equal: workers report theirs in /health (the router pairs only equal ones),
// and KvDone carries prefill's, which decode compares with its own before it decodes a token.
// Must never: depend on where or in which format the model was read from, or on anything a
// second load of the same weights could change. Cost: one pass over the weights (xxh64, some
// 10 GB/s here), once at start-up.
import { Xxh64 } from '@node-rs/xxhash';
import type { ModelConfig } from '../formats/index.js';
import type { LoadedModel } from './load.js';

/** The config fields the forward pass reads (not token ids, names or the context length). */
function computeConfig(c: ModelConfig): unknown {
  return [
    c.arch,
    c.vocabSize,
    c.hiddenSize,
    c.intermediateSize,
    c.numLayers,
    c.numHeads,
    c.numKvHeads,
    c.headDim,
    c.rmsNormEps,
    c.ropeTheta,
    c.ropeScaling,
    c.slidingWindow,
    c.tieWordEmbeddings,
    c.attentionBias,
    ...(c.gemma3 === null ? [] : [c.gemma3]), // absent for other archs: their fingerprints stay as they were
    // MoE routing: expert count, experts per token, their width, renormalisation; GLM-4.5's gating,
    // scaling, shared experts and leading dense layers (absent for dense models).
    ...(c.moe === null ? [] : [{ moe: c.moe }]),
    // GLM-4.5's partial RoPE and optional q/k norms (absent for every other arch).
    ...(c.ropeDims === undefined ? [] : [{ ropeDims: c.ropeDims }]),
    ...(c.qkNorm === undefined ? [] : [{ qkNorm: c.qkNorm }]),
    // gpt-oss's sinks switch, sliding window and its layers, SwiGLU clamp and alpha (its YaRN is ropeScaling's).
    ...(c.gptOss === undefined ? [] : [{ gptOss: c.gptOss }]),
  ];
}

export function modelFingerprint(model: Pick<LoadedModel, 'config' | 'tensors'>): string {
  const hash = new Xxh64(0n);
  hash.update(`tessera-model-v1|${JSON.stringify(computeConfig(model.config))}`);
  for (const name of [...model.tensors.keys()].sort()) {
    const t = model.tensors.get(name);
    if (t === undefined) continue;
    hash.update(`|${name}|${t.dtype}|${t.shape.join('x')}|${t.data.length}|`);
    hash.update(t.data);
  }
  return hash.digest().toString(16).padStart(16, '0');
}
