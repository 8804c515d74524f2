// Tools in a chat prompt. A template that knows tools (Qwen3's, Hermes-style, Llama 3.1's) gets
// them as transformers passes them: `tools` = [{type: "function", function: {name,
// description, parameters}}], assistant turns with `tool_calls` = [{id, type: "function",
// function: {name, arguments}}] (arguments as an object) and `tool` turns with `tool_call_id`.
// A template that never mentions tools (e.g. builtin:austen's) would drop them silently, so
// Tessera rewrites the conversation into the Hermes format first: the tool signatures in a
// system turn, calls as <tool_call>{"name", "arguments"}</tool_call> text, results as a user turn
// of <tool_response>...</tool_response>. The parser in src/api reads both formats back.
// Must never change the messages of a request without tools or tool turns.

export interface ToolCallText {
  readonly id: string;
  readonly name: string;
  /** The arguments as JSON text (OpenAI's shape). */
  readonly arguments: string;
}

export interface ToolSpec {
  readonly name: string;
  readonly description?: string;
  readonly parameters: Readonly<Record<string, unknown>>;
}

export interface ToolAwareMessage {
  readonly role: string;
  readonly content: string;
  readonly toolCalls?: readonly ToolCallText[];
  readonly toolCallId?: string;
  readonly reasoning?: string;
}

/** The template's view of one message (transformers' conventions). */
export function templateMessage(m: ToolAwareMessage): Record<string, unknown> {
  return {
    role: m.role,
    content: m.content,
    ...(m.toolCalls === undefined || m.toolCalls.length === 0
      ? {}
      : {
          tool_calls: m.toolCalls.map((c) => ({
            id: c.id,
            type: 'function',
            function: { name: c.name, arguments: parseArguments(c.arguments) },
          })),
        }),
    ...(m.toolCallId === undefined ? {} : { tool_call_id: m.toolCallId }),
    // llama.cpp's names: `reasoning_content` (Qwen3's, DeepSeek's templates), `thinking` (gpt-oss's).
    ...(m.reasoning === undefined ? {} : { reasoning_content: m.reasoning, thinking: m.reasoning }),
  };
}

export function templateTools(tools: readonly ToolSpec[]): Record<string, unknown>[] {
  return tools.map((t) => ({
    type: 'function',
    function: {
      name: t.name,
      ...(t.description === undefined ? {} : { description: t.description }),
      parameters: t.parameters,
    },
  }));
}

/** Whether a template's text handles tools itself. */
export function templateKnowsTools(templateText: string): boolean {
  return /\btools\b/.test(templateText) && /tool_calls/.test(templateText);
}

/** The Hermes rewrite, for templates that do not know tools. */
export function hermesMessages(messages: readonly ToolAwareMessage[], tools: readonly ToolSpec[]): ToolAwareMessage[] {
  const out: ToolAwareMessage[] = [];
  if (tools.length > 0) {
    const signatures = templateTools(tools)
      .map((t) => JSON.stringify(t))
      .join('\n');
    const preamble =
      'You may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n' +
      `<tools>\n${signatures}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n` +
      '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>';
    const first = messages[0];
    if (first?.role === 'system') out.push({ role: 'system', content: `${first.content}\n\n${preamble}` });
    else out.push({ role: 'system', content: preamble });
  }
  for (const [i, m] of messages.entries()) {
    if (i === 0 && tools.length > 0 && m.role === 'system') continue;
    if (m.role === 'tool') {
      out.push({ role: 'user', content: `<tool_response>\n${m.content}\n</tool_response>` });
      continue;
    }
    if (m.toolCalls !== undefined && m.toolCalls.length > 0) {
      const calls = m.toolCalls
        .map(
          (c) =>
            `<tool_call>\n${JSON.stringify({ name: c.name, arguments: parseArguments(c.arguments) })}\n</tool_call>`,
        )
        .join('\n');
      out.push({ role: m.role, content: m.content === '' ? calls : `${m.content}\n${calls}` });
      continue;
    }
    out.push({ role: m.role, content: m.content });
  }
  return out;
}

function parseArguments(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text; // not JSON: the template shows it as given
  }
}
