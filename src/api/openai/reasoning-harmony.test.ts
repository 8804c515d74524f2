// The gpt-oss (harmony) reasoning parser over answer text as gpt-oss's tokenizer spells its special
// tokens (<|start|>, <|channel|>, <|message|>, <|end|>, <|call|>, <|return|>, <|constrain|>): the
// analysis channel is reasoning, final is content, commentary to=functions.NAME a tool call (one
// the request offered: parsed by the request's ToolPlan), whole and streamed in any cut.
import { describe, expect, it } from 'vitest';
import { answerSplitter, reasoningParserFor, reasoningPlan, splitReasoning } from './reasoning.js';
import { HarmonySplitter } from './reasoning-harmony.js';
import { parseAnswer } from './tool-output.js';
import type { ToolPlan } from './tools.js';

const PLAN = reasoningPlan('gpt-oss', true);
const ANALYSIS = '<|channel|>analysis<|message|>The user asks for 6*7. That is 42.<|end|>';
const FINAL = '<|start|>assistant<|channel|>final<|message|>It is 42.<|return|>';
const CALL =
  '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>';
const TOOLS: ToolPlan = {
  tools: [{ name: 'get_weather', description: '', parameters: { type: 'object' } }],
  choice: { kind: 'auto' },
  parallel: true,
} as unknown as ToolPlan;

/** The answer streamed in `pieces` (cut at `cuts`), its pieces joined. */
function streamed(text: string, cuts: readonly number[], withTools = false) {
  const splitter = answerSplitter(PLAN, withTools);
  let reasoning = '';
  let content = '';
  const bounds = [0, ...cuts, text.length];
  for (let i = 0; i + 1 < bounds.length; i++) {
    const piece = splitter.push(text.slice(bounds[i], bounds[i + 1]));
    reasoning += piece.reasoning;
    content += piece.content;
  }
  const last = splitter.end();
  return { reasoning: reasoning + last.reasoning, content: content + last.content, saw: splitter.sawReasoning };
}

describe('the harmony parser (gpt-oss)', () => {
  it('analysis is reasoning, final is content; no special token leaks into either', () => {
    expect(splitReasoning(PLAN, ANALYSIS + FINAL)).toEqual({
      reasoning: 'The user asks for 6*7. That is 42.',
      content: 'It is 42.',
    });
  });

  it('the stop token (<|return|>, <|call|>) may be left out of the text: the answer ends the message', () => {
    expect(splitReasoning(PLAN, ANALYSIS + FINAL.replace('<|return|>', ''))).toEqual({
      reasoning: 'The user asks for 6*7. That is 42.',
      content: 'It is 42.',
    });
    const call = parseAnswer(
      TOOLS,
      splitReasoning(PLAN, ANALYSIS + CALL.replace('<|call|>', ''), true).content,
      'stop',
    );
    expect(call.calls.map((c) => [c.name, c.arguments])).toEqual([['get_weather', '{"city":"Oslo"}']]);
  });

  it('a commentary message to=functions.NAME is a tool call of an offered function, content null', () => {
    const split = splitReasoning(PLAN, ANALYSIS + CALL, true);
    expect(split.reasoning).toBe('The user asks for 6*7. That is 42.');
    const answer = parseAnswer(TOOLS, split.content, 'stop');
    expect(answer).toMatchObject({ content: null, finishReason: 'tool_calls' });
    expect(answer.calls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([['get_weather', { city: 'Oslo' }]]);
  });

  it('the recipient may stand before the channel, and the content type without <|constrain|>', () => {
    const text = `${ANALYSIS}<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"city":"Bergen"}<|call|>`;
    const answer = parseAnswer(TOOLS, splitReasoning(PLAN, text, true).content, 'stop');
    expect(answer.calls.map((c) => c.arguments)).toEqual(['{"city":"Bergen"}']);
  });

  it('a call addressed on the analysis channel is a call too, not reasoning', () => {
    const text = `${ANALYSIS}<|start|>assistant<|channel|>analysis to=functions.get_weather code<|message|>{"city":"Oslo"}<|call|>`;
    const split = splitReasoning(PLAN, text, true);
    expect(split.reasoning).toBe('The user asks for 6*7. That is 42.');
    expect(parseAnswer(TOOLS, split.content, 'stop').calls.map((c) => c.name)).toEqual(['get_weather']);
  });

  it('a call of a function the request did not offer, or with no tools at all, is never a call nor content', () => {
    const other = CALL.replace('get_weather', 'rm_rf');
    expect(parseAnswer(TOOLS, splitReasoning(PLAN, ANALYSIS + other, true).content, 'stop')).toMatchObject({
      calls: [],
    });
    expect(splitReasoning(PLAN, ANALYSIS + CALL + FINAL, false)).toEqual({
      reasoning: 'The user asks for 6*7. That is 42.',
      content: 'It is 42.',
    });
  });

  it('a commentary message without a recipient (a preamble) is content', () => {
    const text = `${ANALYSIS}<|start|>assistant<|channel|>commentary<|message|>Checking the weather.<|end|>${FINAL}`;
    expect(splitReasoning(PLAN, text).content).toBe('Checking the weather.It is 42.');
  });

  it('analysis cut by max_tokens stays reasoning, content empty; an answer without analysis has reasoning null', () => {
    expect(splitReasoning(PLAN, '<|channel|>analysis<|message|>Let me th')).toEqual({
      reasoning: 'Let me th',
      content: '',
    });
    expect(splitReasoning(PLAN, '<|channel|>final<|message|>Hi.<|return|>')).toEqual({
      reasoning: null,
      content: 'Hi.',
    });
  });

  it('streamed: every cut into two and three pieces gives the whole answer split', () => {
    const text = ANALYSIS + CALL.replace('<|call|>', '<|end|>') + FINAL;
    const whole = splitReasoning(PLAN, text, true);
    for (let a = 0; a <= text.length; a++) {
      expect(streamed(text, [a], true)).toEqual({ ...whole, saw: true });
      for (let b = a; b <= text.length; b += 7) expect(streamed(text, [a, b], true)).toEqual({ ...whole, saw: true });
    }
  });

  it('streamed one character at a time: each piece holds no part of a special token', () => {
    const text = ANALYSIS + FINAL;
    const splitter = new HarmonySplitter({ calls: false });
    const pieces = [...text].map((ch) => splitter.push(ch));
    pieces.push(splitter.end());
    for (const p of pieces) {
      expect(p.reasoning).not.toMatch(/<\||\|>/);
      expect(p.content).not.toMatch(/<\||\|>/);
    }
    expect(pieces.map((p) => p.reasoning).join('')).toBe('The user asks for 6*7. That is 42.');
    expect(pieces.map((p) => p.content).join('')).toBe('It is 42.');
  });
});

describe('selecting the gpt-oss parser', () => {
  it('by --reasoning-parser gpt-oss, or by the model arch gpt-oss under auto; none turns it off', () => {
    expect(reasoningParserFor('gpt-oss', '')).toBe('gpt-oss');
    expect(reasoningParserFor(undefined, '', 'gpt-oss')).toBe('gpt-oss');
    expect(reasoningParserFor('auto', '{{ "</think>" }}', 'gpt-oss')).toBe('gpt-oss');
    expect(reasoningParserFor('none', '', 'gpt-oss')).toBeNull();
    expect(reasoningParserFor(undefined, '', 'llama')).toBeNull();
  });
});
