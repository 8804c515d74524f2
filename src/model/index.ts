// What the user named -> a loaded model (config, weights, tokenizer, template), the built-in
// models and the model's fingerprint. See README.md. Names used outside the module only.
export { isBuiltinSpec, resolveBuiltinModel } from './builtin.js';
export { vocabularyMismatch } from './draft-vocab.js';
export { modelFingerprint } from './fingerprint.js';
export { loadModel, loadModelInfo, type LoadedModel, type ModelInfo } from './load.js';
export { packageRoot } from './package-root.js';
