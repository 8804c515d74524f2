// Structured output (layer 2): JSON-schema and JSON-object constraints as token masks, via
// xgrammar. Imports only core. The sampler applies the masks; workers own one TokenConstraint
// per constrained request.
export { GrammarEngine, GRAMMAR_CACHE_SIZE } from './engine.js';
export { GrammarError, TokenConstraint } from './constraint.js';
export { grammarVocab, type GrammarVocab, type VocabSource, type VocabType } from './vocab.js';
export { loadXgrammar, type XgrammarModule } from './xgrammar.js';
