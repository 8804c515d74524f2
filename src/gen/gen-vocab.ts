// The tokenizer gen-model writes beside its random weights, chosen by architecture: Llama 2's
// SentencePiece vocabulary with a Llama 2 chat template for llama presets, Qwen3's byte-level
// BPE with Qwen3's own chat template for qwen3 presets, Gemma 3's with its template for gemma3
// presets, o200k with harmony for gpt-oss presets (gptoss-vocab.ts); as tokenizer.json + tokenizer_config.json
// for a Hugging Face directory, or as GGUF tokenizer.* metadata. It must never write files.
import type { ModelConfig, GgufValue } from '../formats/index.js';
import { GEMMA3_SPECIALS, ggufGemma3Vocab, readGemma3Vocab } from './gemma3-vocab.js';
import { gguf, parseJsonObject } from '../formats/index.js';
import { ggufVocabFromTokenizerJson, readLlama2Vocab } from './llama2-vocab.js';
import { QWEN3_SPECIALS, ggufBpeVocab, readQwen3Vocab } from './qwen3-vocab.js';
import { gptossTokenizerFiles, gptossTokenizerMetadata } from './gptoss-vocab.js';

/** A Llama 2 chat-style template for gen-model's llama models (they ship none of their own). */
export const GEN_CHAT_TEMPLATE =
  '{{ bos_token }}{% for message in messages %}' +
  "{% if message['role'] == 'system' %}{{ '<<SYS>>\\n' + message['content'] + '\\n<</SYS>>\\n\\n' }}" +
  "{% elif message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}" +
  "{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + eos_token }}" +
  "{% else %}{{ raise_exception('unknown role: ' + message['role']) }}{% endif %}{% endfor %}";

/** qwen3 presets, and glm4moe's and glm4's (gen-model ships no GLM tokenizer: Qwen3's stands in, its ids within GLM's vocabulary size). */
const usesQwen3Vocab = (config: ModelConfig): boolean =>
  config.arch === 'qwen3' || config.arch === 'qwen3moe' || config.arch === 'glm4moe' || config.arch === 'glm4';

export async function hfTokenizerFiles(
  config: ModelConfig,
): Promise<{ tokenizerJson: string; tokenizerConfig: string }> {
  if (config.arch === 'gemma3') {
    const vocab = await readGemma3Vocab();
    return {
      tokenizerJson: vocab.tokenizerJsonText,
      tokenizerConfig: `${JSON.stringify(vocab.tokenizerConfig, null, 2)}\n`,
    };
  }
  if (config.arch === 'gpt-oss') return gptossTokenizerFiles();
  if (usesQwen3Vocab(config)) {
    const vocab = await readQwen3Vocab();
    return {
      tokenizerJson: vocab.tokenizerJsonText,
      tokenizerConfig: `${JSON.stringify(vocab.tokenizerConfig, null, 2)}\n`,
    };
  }
  const vocab = await readLlama2Vocab();
  return {
    tokenizerJson: vocab.tokenizerJsonText,
    tokenizerConfig: `${JSON.stringify({ ...vocab.tokenizerConfig, chat_template: GEN_CHAT_TEMPLATE }, null, 2)}\n`,
  };
}

export async function ggufTokenizerMetadata(config: ModelConfig): Promise<[string, GgufValue][]> {
  if (config.arch === 'gemma3') return gemma3TokenizerMetadata(config);
  if (config.arch === 'gpt-oss') return gptossTokenizerMetadata(config.vocabSize);
  if (usesQwen3Vocab(config)) {
    const vocab = await readQwen3Vocab();
    const v = ggufBpeVocab(
      parseJsonObject(vocab.tokenizerJsonText, 'tokenizer.json'),
      config.vocabSize,
      'tokenizer.json',
    );
    const template = vocab.tokenizerConfig['chat_template'];
    return [
      ['tokenizer.ggml.model', gguf.str('gpt2')],
      ['tokenizer.ggml.pre', gguf.str('qwen2')],
      ['tokenizer.ggml.tokens', gguf.strings(v.tokens)],
      ['tokenizer.ggml.token_type', gguf.i32s(v.tokenTypes)],
      ['tokenizer.ggml.merges', gguf.strings(v.merges)],
      ['tokenizer.ggml.bos_token_id', gguf.u32(QWEN3_SPECIALS.endOfText)],
      ['tokenizer.ggml.eos_token_id', gguf.u32(QWEN3_SPECIALS.imEnd)],
      ['tokenizer.ggml.padding_token_id', gguf.u32(QWEN3_SPECIALS.endOfText)],
      ['tokenizer.ggml.add_bos_token', gguf.bool(false)],
      ...(typeof template === 'string' ? [['tokenizer.chat_template', gguf.str(template)] as [string, GgufValue]] : []),
    ];
  }
  const vocab = await readLlama2Vocab();
  const v = ggufVocabFromTokenizerJson(parseJsonObject(vocab.tokenizerJsonText, 'tokenizer.json'), 'tokenizer.json');
  return [
    ['tokenizer.ggml.model', gguf.str('llama')],
    ['tokenizer.ggml.tokens', gguf.strings(v.tokens)],
    ['tokenizer.ggml.scores', gguf.f32s(v.scores)],
    ['tokenizer.ggml.token_type', gguf.i32s(v.tokenTypes)],
    ['tokenizer.ggml.bos_token_id', gguf.u32(v.bosTokenId)],
    ['tokenizer.ggml.eos_token_id', gguf.u32(v.eosTokenId)],
    ['tokenizer.ggml.unknown_token_id', gguf.u32(v.unknownTokenId)],
    ['tokenizer.ggml.add_bos_token', gguf.bool(true)],
    ['tokenizer.ggml.add_eos_token', gguf.bool(false)],
    ['tokenizer.chat_template', gguf.str(GEN_CHAT_TEMPLATE)],
  ];
}

async function gemma3TokenizerMetadata(config: ModelConfig): Promise<[string, GgufValue][]> {
  const vocab = await readGemma3Vocab();
  const v = ggufGemma3Vocab(
    parseJsonObject(vocab.tokenizerJsonText, 'tokenizer.json'),
    config.vocabSize,
    'tokenizer.json',
  );
  const template = vocab.tokenizerConfig['chat_template'];
  return [
    ['tokenizer.ggml.model', gguf.str('llama')],
    ['tokenizer.ggml.tokens', gguf.strings(v.tokens)],
    ['tokenizer.ggml.scores', gguf.f32s(v.scores)],
    ['tokenizer.ggml.token_type', gguf.i32s(v.tokenTypes)],
    ['tokenizer.ggml.bos_token_id', gguf.u32(GEMMA3_SPECIALS.bos)],
    ['tokenizer.ggml.eos_token_id', gguf.u32(GEMMA3_SPECIALS.eos)],
    ['tokenizer.ggml.eot_token_id', gguf.u32(GEMMA3_SPECIALS.endOfTurn)],
    ['tokenizer.ggml.unknown_token_id', gguf.u32(GEMMA3_SPECIALS.unk)],
    ['tokenizer.ggml.padding_token_id', gguf.u32(GEMMA3_SPECIALS.pad)],
    ['tokenizer.ggml.add_bos_token', gguf.bool(true)],
    ['tokenizer.ggml.add_eos_token', gguf.bool(false)],
    ['tokenizer.ggml.add_space_prefix', gguf.bool(false)],
    ...(typeof template === 'string' ? [['tokenizer.chat_template', gguf.str(template)] as [string, GgufValue]] : []),
  ];
}
