// The context length from each server's words: error wordings, Ollama's parameters; and the
// grammar-timing feature test's reading of a one-answer schema's output.
import { describe, expect, it } from 'vitest';
import { contextFromError, ollamaNumCtx } from './context-length.js';
import { honoursOneAnswer } from './grammar-timing.js';

describe('contextFromError', () => {
  it.each([
    [
      'vLLM/OpenAI',
      "This model's maximum context length is 2048 tokens. However, you requested 100000005 tokens",
      2048,
    ],
    ['SGLang', "Requested token count exceeds the model's maximum context length of 4096 tokens.", 4096],
    ['SGLang', "The input (9000 tokens) is longer than the model's context length (8192 tokens).", 8192],
    ['llama-server', 'request (5000 tokens) exceeds the available context size (1024 tokens), try increasing it', 1024],
  ])('reads %s wording', (who, message, n) => {
    const got = contextFromError({ error: { message, type: 'invalid_request_error' } });
    expect(got?.tokens).toBe(n);
    expect(got?.source).toContain(who);
  });
  it("reads llama-server's n_ctx field, and nothing from an error that names no length", () => {
    expect(contextFromError({ error: { message: 'x', n_ctx: 512 } })?.tokens).toBe(512);
    expect(contextFromError({ error: { message: 'max_tokens must be at most 4096' } })).toBeUndefined();
    expect(contextFromError(null)).toBeUndefined();
  });
});

describe('ollamaNumCtx', () => {
  it('reads num_ctx from the parameters, and only there', () => {
    expect(ollamaNumCtx({ parameters: 'stop "<|im_end|>"\nnum_ctx 8192\ntemperature 0.7' })).toBe(8192);
    expect(ollamaNumCtx({ parameters: 'stop "x"', model_info: { 'llama.context_length': 131072 } })).toBeUndefined();
    expect(ollamaNumCtx({})).toBeUndefined();
  });
});

describe('honoursOneAnswer', () => {
  it('accepts the one answer or its prefix, with whitespace; refuses anything else', () => {
    expect(honoursOneAnswer('{"k": "ok"}')).toBe(true);
    expect(honoursOneAnswer('{ "k" :\n"o')).toBe(true);
    expect(honoursOneAnswer('zapoleki ka')).toBe(false);
    expect(honoursOneAnswer('{"k": "ok"} and more')).toBe(false);
    expect(honoursOneAnswer('')).toBe(false);
  });
});
