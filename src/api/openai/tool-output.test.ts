// Tool calls read back from answers: named (the arguments), required (the array), auto (Hermes
// blocks or Llama 3.1 JSON), never a function the request did not offer; and the same answers
// streamed as deltas that add up to the whole.
import { describe, expect, it } from 'vitest';
import { parseAnswer, StreamingAnswer } from './tool-output.js';
import type { ToolPlan } from './tools.js';

const tools = [
  { name: 'get_weather', parameters: { type: 'object' } },
  { name: 'add', parameters: { type: 'object' } },
];
const plan = (choice: ToolPlan['choice']): ToolPlan => ({ tools, choice, parallel: true });

describe('tool calls in answers', () => {
  it('named: the answer is the arguments', () => {
    const a = parseAnswer(plan({ kind: 'named', name: 'add' }), '{"a":1}', 'stop');
    expect(a).toMatchObject({
      content: null,
      finishReason: 'tool_calls',
      calls: [{ name: 'add', arguments: '{"a":1}' }],
    });
  });

  it('required: one call per item; auto: Hermes blocks with the text around them, or Llama JSON', () => {
    const r = parseAnswer(
      plan({ kind: 'required' }),
      '[{"name":"add","parameters":{"a":1}},{"name":"get_weather","parameters":{}}]',
      'stop',
    );
    expect(r.calls.map((c) => [c.name, c.arguments])).toEqual([
      ['add', '{"a":1}'],
      ['get_weather', '{}'],
    ]);
    const h = parseAnswer(
      plan({ kind: 'auto' }),
      'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Bath"}}\n</tool_call>',
      'stop',
    );
    expect(h).toMatchObject({
      content: 'Let me look.',
      finishReason: 'tool_calls',
      calls: [{ name: 'get_weather', arguments: '{"city":"Bath"}' }],
    });
    const l = parseAnswer(plan({ kind: 'auto' }), '{"name": "add", "parameters": {"a": 2}}', 'stop');
    expect(l.calls).toHaveLength(1);
  });

  it('required, cut by the length limit: finish "length", no content and no calls (never the half array)', () => {
    const cut = parseAnswer(plan({ kind: 'required' }), '[{"name":"', 'length');
    expect(cut).toEqual({ content: null, calls: [], finishReason: 'length' });
    const streamed = new StreamingAnswer(plan({ kind: 'required' }));
    expect(streamed.push('[{"name":"')).toEqual([]);
    expect(streamed.end('length')).toEqual({ deltas: [], finishReason: 'length' });
  });

  it('auto: plain text, and calls of unknown functions, stay text', () => {
    expect(parseAnswer(plan({ kind: 'auto' }), 'Good day.', 'stop')).toEqual({
      content: 'Good day.',
      calls: [],
      finishReason: 'stop',
    });
    const unknown = '<tool_call>{"name": "rm", "arguments": {}}</tool_call>';
    expect(parseAnswer(plan({ kind: 'auto' }), unknown, 'stop')).toEqual({
      content: unknown,
      calls: [],
      finishReason: 'stop',
    });
  });

  it('streams named arguments as they come, and holds auto text only while it may be a call', () => {
    const named = new StreamingAnswer(plan({ kind: 'named', name: 'add' }));
    const deltas = [...named.push('{"a"'), ...named.push(':1}')] as {
      tool_calls: { function: { arguments: string; name?: string } }[];
    }[];
    expect(deltas.map((d) => d.tool_calls[0]?.function.arguments).join('')).toBe('{"a":1}');
    expect(deltas[0]?.tool_calls[0]?.function.name).toBe('add');
    expect(named.end('stop').finishReason).toBe('tool_calls');
    const text = new StreamingAnswer(plan({ kind: 'auto' }));
    expect(text.push('Go')).toEqual([{ content: 'Go' }]);
    expect(text.push('od')).toEqual([{ content: 'od' }]);
    const call = new StreamingAnswer(plan({ kind: 'auto' }));
    expect([...call.push('<tool_'), ...call.push('call>{"name":"add","arguments":{}}</tool_call>')]).toEqual([]);
    const end = call.end('stop');
    expect(end.finishReason).toBe('tool_calls');
    expect(end.deltas).toMatchObject([
      { tool_calls: [{ index: 0, type: 'function', function: { name: 'add', arguments: '{}' } }] },
    ]);
  });
});
