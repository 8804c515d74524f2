// gpt-oss's tokenizer and chat format as gen-model ships them: harmony rendered from a conversation
// (system -> a developer "# Instructions" message, past assistant turns on the final channel, the
// reply opened with <|start|>assistant), and o200k reading harmony's markers as single special ids.
import { describe, expect, it } from 'vitest';
import { createChatTemplate, createTokenizer } from '../tokenizer/index.js';
import { parseJsonObject } from '../formats/index.js';
import { GPTOSS_SPECIALS, HARMONY_CHAT_TEMPLATE, readGptossVocab } from './gptoss-vocab.js';

const HEADER =
  '<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n' +
  'Knowledge cutoff: 2024-06\n\nReasoning: medium\n\n' +
  '# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>';

describe('harmony (gpt-oss chat format)', () => {
  const template = createChatTemplate(HARMONY_CHAT_TEMPLATE, { bosToken: null, eosToken: null }, 'harmony');
  const conversation = [
    { role: 'system', content: 'Answer in French.' },
    { role: 'user', content: 'Hi' },
    { role: 'assistant', content: 'Bonjour' },
    { role: 'user', content: 'Bye' },
  ];

  it('renders a conversation as gpt-oss reads it, the reply opened for the model to choose its channel', () => {
    expect(template.render(conversation)).toBe(
      HEADER +
        '<|start|>developer<|message|># Instructions\n\nAnswer in French.<|end|>' +
        '<|start|>user<|message|>Hi<|end|>' +
        '<|start|>assistant<|channel|>final<|message|>Bonjour<|end|>' +
        '<|start|>user<|message|>Bye<|end|>' +
        '<|start|>assistant',
    );
  });

  it('takes the reasoning effort from chat_template_kwargs', () => {
    const text = template.render([{ role: 'user', content: 'x' }], { templateKwargs: { reasoning_effort: 'high' } });
    expect(text).toContain('\n\nReasoning: high\n\n');
  });

  it('refuses a role harmony has no turn for', () => {
    expect(() => template.render([{ role: 'narrator', content: 'x' }])).toThrow(/unknown role: narrator/);
  });

  it("o200k reads harmony's markers as single special ids", async () => {
    const vocab = await readGptossVocab();
    const tokenizer = createTokenizer({
      tokenizerJson: parseJsonObject(vocab.tokenizerJsonText, 'tokenizer.json'),
      tokenizerConfig: vocab.tokenizerConfig,
      file: 'tokenizer.json',
    });
    const ids = tokenizer.encode('<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|return|>', {
      addSpecialTokens: false,
    });
    expect(ids.filter((id) => id >= 200000)).toEqual([200006, 200008, 200007, 200006, 200005, GPTOSS_SPECIALS.return]);
  });
});
