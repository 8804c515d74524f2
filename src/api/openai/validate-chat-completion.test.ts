// Field-level validation of both endpoints, beyond what the HTTP bad-input suite covers.
import { describe, expect, it } from 'vitest';
import { validateChat } from './validate-chat.js';
import { validateCompletion } from './validate-completion.js';

const ok = <T>(v: { kind: 'ok'; value: T } | { kind: 'bad' }): T => {
  if (v.kind !== 'ok') throw new Error(`expected ok, got ${JSON.stringify(v)}`);
  return v.value;
};

describe('validateCompletion', () => {
  it('applies OpenAI defaults and treats null as absent', () => {
    const call = ok(validateCompletion({ prompt: 'x', max_tokens: null, temperature: null, stop: null, seed: null }));
    expect(call.params).toEqual({
      model: null,
      maxTokens: null,
      temperature: 1,
      topP: 1,
      topK: 0,
      seed: null,
      stop: [],
      stopTokenIds: [],
      ignoreEos: false,
      presencePenalty: 0,
      frequencyPenalty: 0,
      n: 1,
      logprobs: null,
      stream: false,
      includeUsage: false,
      returnTokenIds: false,
    });
    expect(call.addSpecialTokens).toBe(true);
  });

  it('accepts the values of unsupported parameters that ask for nothing', () => {
    const neutral = {
      n: 1,
      best_of: 1,
      logit_bias: {},
      echo: false,
      suffix: '',
      presence_penalty: 0,
      frequency_penalty: 0,
      tools: [],
      response_format: { type: 'text' },
    };
    expect(validateCompletion({ prompt: 'x', ...neutral }).kind).toBe('ok');
  });

  it("maps vLLM's top_k = -1 to 0 and reduces seeds to 32 bits", () => {
    const { params } = ok(validateCompletion({ prompt: 'x', top_k: -1, seed: -1 }));
    expect(params.topK).toBe(0);
    expect(params.seed).toBe(0xffffffff);
    expect(ok(validateCompletion({ prompt: 'x', seed: 2 ** 32 + 5 })).params.seed).toBe(5);
  });

  it('reads presence_penalty and frequency_penalty in [-2, 2]', () => {
    const { params } = ok(validateCompletion({ prompt: 'x', presence_penalty: -2, frequency_penalty: 1.5 }));
    expect([params.presencePenalty, params.frequencyPenalty]).toEqual([-2, 1.5]);
  });

  it('reads vLLM extensions: stop_token_ids, ignore_eos, add_special_tokens', () => {
    const call = ok(
      validateCompletion({ prompt: 'x', stop_token_ids: [2, 3], ignore_eos: true, add_special_tokens: false }),
    );
    expect(call.params.stopTokenIds).toEqual([2, 3]);
    expect(call.params.ignoreEos).toBe(true);
    expect(call.addSpecialTokens).toBe(false);
  });

  it('refuses more than 16 stop strings', () => {
    const r = validateCompletion({ prompt: 'x', stop: Array.from({ length: 17 }, (_, i) => `s${i}`) });
    expect(r.kind === 'bad' && r.problem.param).toBe('stop');
  });
});

describe('validateChat', () => {
  it("reads an assistant turn's reasoning_content (a string; null is none) and refuses any other type", () => {
    const call = ok(
      validateChat({
        messages: [
          { role: 'user', content: 'q' },
          { role: 'assistant', content: 'a', reasoning_content: 'because' },
          { role: 'assistant', content: 'b', reasoning_content: null },
        ],
      }),
    );
    expect(call.messages).toEqual([
      { role: 'user', content: 'q' },
      { role: 'assistant', content: 'a', reasoning: 'because' },
      { role: 'assistant', content: 'b' },
    ]);
    const bad = validateChat({ messages: [{ role: 'assistant', content: 'a', reasoning_content: 3 }] });
    expect(bad.kind === 'bad' && bad.problem.param).toBe('messages[0].reasoning_content');
  });

  it('joins text parts with newlines, maps developer to system, allows an assistant turn without content', () => {
    const call = ok(
      validateChat({
        messages: [
          { role: 'developer', content: 'rules' },
          {
            role: 'user',
            content: [
              { type: 'text', text: 'a' },
              { type: 'text', text: 'b' },
            ],
            name: 'ann',
          },
          { role: 'assistant', content: null },
        ],
      }),
    );
    expect(call.messages).toEqual([
      { role: 'system', content: 'rules' },
      { role: 'user', content: 'a\nb' },
      { role: 'assistant', content: '' },
    ]);
    expect(call.addGenerationPrompt).toBe(true);
    expect(call.addSpecialTokens).toBe(false);
  });

  it('prefers max_completion_tokens over max_tokens', () => {
    expect(
      ok(validateChat({ messages: [{ role: 'user', content: 'x' }], max_tokens: 9, max_completion_tokens: 3 })).params
        .maxTokens,
    ).toBe(3);
    expect(ok(validateChat({ messages: [{ role: 'user', content: 'x' }], max_tokens: 9 })).params.maxTokens).toBe(9);
  });

  it('refuses a tool call without a function and a user turn without content', () => {
    const tool = validateChat({ messages: [{ role: 'assistant', content: 'x', tool_calls: [{ id: '1' }] }] });
    expect(tool.kind === 'bad' && tool.problem.param).toBe('messages[0].tool_calls[0].function');
    const empty = validateChat({ messages: [{ role: 'user' }] });
    expect(empty.kind === 'bad' && empty.problem.param).toBe('messages[0].content');
  });
});
