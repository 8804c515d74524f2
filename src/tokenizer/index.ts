// Text <-> token ids: the Tokenizer, chat templates, tool prompts, the tenant-scoped word caches
// and the tokenizer threads. See README.md. Names used outside the module only.
export { createChatTemplate, pickChatTemplate, type ChatMessage, type ChatTemplate } from './chat-template.js';
export { ggufTokenizerJson } from './gguf-tokenizer.js';
export { promptRecipeOf, TOKENIZER_CRASH_MARKER, type TokenizeJob } from './tokenizer-messages.js';
export { startTokenizerPool, type TokenizerPool } from './tokenizer-pool.js';
export { createTokenizer, type Tokenizer } from './tokenizer.js';
export { type ToolSpec } from './tool-prompt.js';
