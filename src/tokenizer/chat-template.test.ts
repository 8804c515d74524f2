import { describe, expect, it } from 'vitest';
import { InvalidRequestError, ModelLoadError } from '../core/index.js';
import { DEFAULT_CHAT_TEMPLATE, createChatTemplate, pickChatTemplate } from './chat-template.js';
import { GEN_CHAT_TEMPLATE } from '../gen/index.js';

const FILE = '/m/tokenizer_config.json';
const specials = { bosToken: '<s>', eosToken: '</s>' };
const chat = [
  { role: 'system', content: 'Be brief.' },
  { role: 'user', content: 'Hi' },
  { role: 'assistant', content: 'Hello.' },
  { role: 'user', content: 'Bye' },
];

describe('chat templates', () => {
  it("renders gen-model's Llama 2 style template with bos and eos", () => {
    const t = createChatTemplate(GEN_CHAT_TEMPLATE, specials, FILE);
    expect(t.source).toBe('model');
    expect(t.render(chat)).toBe('<s><<SYS>>\nBe brief.\n<</SYS>>\n\n[INST] Hi [/INST] Hello.</s>[INST] Bye [/INST]');
  });

  it('falls back to ChatML when the model has none, with or without the generation prompt', () => {
    const t = createChatTemplate(null, specials, FILE);
    expect(t.source).toBe('default-chatml');
    expect(t.text).toBe(DEFAULT_CHAT_TEMPLATE);
    expect(t.render([{ role: 'user', content: 'Hi' }])).toBe('<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n');
    expect(t.render([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: false })).toBe(
      '<|im_start|>user\nHi<|im_end|>\n',
    );
  });

  it('reports a template that does not parse as a ModelLoadError naming the file', () => {
    expect(() => createChatTemplate('{% for %}', specials, FILE)).toThrow(ModelLoadError);
    expect(() => createChatTemplate('{% for %}', specials, FILE)).toThrow(
      /^\/m\/tokenizer_config.json: chat template does not parse: /,
    );
  });

  it("reports the template's own raise_exception as an InvalidRequestError on messages", () => {
    const t = createChatTemplate(GEN_CHAT_TEMPLATE, specials, FILE);
    let caught: unknown;
    try {
      t.render([{ role: 'narrator', content: 'x' }]);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(InvalidRequestError);
    expect((caught as InvalidRequestError).param).toBe('messages');
    expect((caught as Error).message).toBe(
      "the model's chat template failed on these messages: unknown role: narrator",
    );
  });

  it("gives an assistant turn's reasoning to the template as reasoning_content and as thinking, escaped", () => {
    const t = createChatTemplate(
      "{%- for m in messages -%}[{{ m['reasoning_content'] }}|{{ m['thinking'] }}|{{ m['content'] }}]{%- endfor -%}",
      specials,
      FILE,
    );
    const messages = [{ role: 'assistant', content: 'A', reasoning: 'R<' }];
    expect(t.render(messages, { addGenerationPrompt: false })).toBe('[R<|R<|A]');
    expect(t.render(messages, { addGenerationPrompt: false, escapeText: (s) => s.replace('<', '&') })).toBe(
      '[R&|R&|A]',
    );
  });

  it('picks the "default" template from a list of named templates', () => {
    expect(
      pickChatTemplate(
        [
          { name: 'tool_use', template: 'T' },
          { name: 'default', template: 'D' },
        ],
        FILE,
      ),
    ).toBe('D');
    expect(pickChatTemplate(undefined, FILE)).toBeNull();
    expect(() => pickChatTemplate(42, FILE)).toThrow(`${FILE}: chat_template must be a string`);
  });
});
