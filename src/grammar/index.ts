// Structured output (layer 2): JSON-schema and JSON-object constraints as token masks, via
// xgrammar on grammar threads (never the caller's). Imports only core. The sampler applies the
// masks; workers own one TokenConstraint per constrained request.
export { GrammarEngine, GRAMMAR_CACHE_SIZE, type GrammarEngineOptions } from './engine.js';
export { TokenConstraint } from './constraint.js';
export { GrammarError } from './grammar-error.js';
export { SCHEMA_LIMITS, schemaOverLimit, type SchemaLimits } from './schema-limits.js';
export { grammarVocab, type GrammarVocab, type VocabSource, type VocabType } from './vocab.js';
export { loadXgrammar, type XgrammarModule } from './xgrammar.js';
export { RULE_KEY, schemaRules, type SchemaPlan } from './schema-rules.js';
export { compileSchema } from './schema-compile.js';
