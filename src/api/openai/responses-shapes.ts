// The Responses API's objects and stream events (OpenAI's shapes, the subset vLLM serves):
// `response` with output items (`message` with `output_text` parts, `function_call`), usage in
// input/output tokens; and the event sequence of a stream:
//   response.created, response.in_progress,
//   per item: response.output_item.added,
//     reasoning:     response.reasoning_text.delta..., .done (a reasoning model's <think> text, reasoning.ts)
//     message:       response.content_part.added, response.output_text.delta..., .done,
//                    response.content_part.done
//     function_call: response.function_call_arguments.delta..., .done
//   response.output_item.done; finally response.completed (or response.incomplete at the length limit).
// ResponseEvents turns chat-style deltas (tool-output.ts's StreamingAnswer) into these events
// and keeps the items, so the final `response` holds exactly what was streamed.
// Plain data; must never do I/O.
import { randomBytes } from 'node:crypto';
import type { FinishReason, Usage } from '../../core/index.js';
import type { ChatAnswer } from './tool-output.js';

export interface ResponseHead {
  readonly id: string;
  readonly createdAt: number;
  readonly model: string;
  /** Echoed request fields (instructions, max_output_tokens, temperature, top_p, tools, tool_choice, text, ...). */
  readonly echo: Readonly<Record<string, unknown>>;
}

type Item = Record<string, unknown> & { type: 'message' | 'function_call' | 'reasoning'; id: string };

const itemId = (prefix: string): string => `${prefix}_${randomBytes(12).toString('hex')}`;

export function responsesUsage(usage: Usage): object {
  return {
    input_tokens: usage.promptTokens,
    input_tokens_details: { cached_tokens: usage.cachedTokens, cache_write_tokens: 0 },
    output_tokens: usage.completionTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.promptTokens + usage.completionTokens,
  };
}

export function responseObject(
  head: ResponseHead,
  status: 'in_progress' | 'completed' | 'incomplete',
  output: readonly object[],
  usage: Usage | null,
): object {
  return {
    id: head.id,
    object: 'response',
    created_at: head.createdAt,
    status,
    error: null,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    model: head.model,
    output,
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: null,
    truncation: 'disabled',
    metadata: {},
    instructions: null,
    max_output_tokens: null,
    temperature: null,
    top_p: null,
    tools: [],
    tool_choice: 'auto',
    text: { format: { type: 'text' } },
    ...head.echo,
    ...(usage === null ? {} : { usage: responsesUsage(usage) }),
  };
}

const messageItem = (id: string, text: string, status: string): Item => ({
  type: 'message',
  id,
  status,
  role: 'assistant',
  content:
    text === '' && status === 'in_progress' ? [] : [{ type: 'output_text', text, annotations: [], logprobs: [] }],
});
const reasoningItem = (id: string, text: string, status: string): Item => ({
  type: 'reasoning',
  id,
  summary: [],
  content: text === '' && status === 'in_progress' ? [] : [{ type: 'reasoning_text', text }],
  status,
});
const callItem = (id: string, callId: string, name: string, args: string, status: string): Item => ({
  type: 'function_call',
  id,
  call_id: callId,
  name,
  arguments: args,
  status,
});

/** A whole answer's output items (not streaming); an incomplete response's items are incomplete too. */
export function outputItems(answer: ChatAnswer, reasoning: string | null = null): object[] {
  const status = responseStatus(answer.finishReason);
  const items: object[] = [];
  if (reasoning !== null) items.push(reasoningItem(itemId('rs'), reasoning, status));
  if (answer.content !== null && (answer.content !== '' || (answer.calls.length === 0 && status === 'completed')))
    items.push(messageItem(itemId('msg'), answer.content, status));
  for (const call of answer.calls) items.push(callItem(itemId('fc'), call.id, call.name, call.arguments, status));
  return items;
}

export function responseStatus(finishReason: FinishReason | 'tool_calls'): 'completed' | 'incomplete' {
  return finishReason === 'length' ? 'incomplete' : 'completed';
}

interface Open {
  readonly index: number;
  readonly id: string;
  readonly kind: 'message' | 'function_call' | 'reasoning';
  text: string;
  readonly callId: string;
  readonly name: string;
}

/** Streaming: chat deltas in, Responses events out (with sequence numbers), items kept. */
export class ResponseEvents {
  readonly #items: Item[] = [];
  #open: Open | undefined;
  #seq = 0;
  readonly #calls = new Map<number, Open>();

  event(type: string, fields: object): object {
    return { type, sequence_number: this.#seq++, ...fields };
  }

  get items(): readonly object[] {
    return this.#items;
  }

  /** Events for one chat delta: {reasoning_content}, {content} or {tool_calls: [{index, id?, function: {name?, arguments}}]}. */
  delta(delta: {
    reasoning_content?: string;
    content?: string;
    tool_calls?: { index: number; id?: string; function: { name?: string; arguments: string } }[];
  }): object[] {
    const out: object[] = [];
    if (delta.reasoning_content !== undefined && delta.reasoning_content !== '') {
      const open = this.#openReasoning(out);
      open.text += delta.reasoning_content;
      out.push(
        this.event('response.reasoning_text.delta', {
          item_id: open.id,
          output_index: open.index,
          content_index: 0,
          delta: delta.reasoning_content,
        }),
      );
    }
    if (delta.content !== undefined && delta.content !== '') {
      const open = this.#openMessage(out);
      open.text += delta.content;
      out.push(
        this.event('response.output_text.delta', {
          item_id: open.id,
          output_index: open.index,
          content_index: 0,
          delta: delta.content,
          logprobs: [],
        }),
      );
    }
    for (const call of delta.tool_calls ?? []) {
      let open = this.#calls.get(call.index);
      if (open === undefined) {
        out.push(...this.#close());
        open = {
          index: this.#items.length,
          id: itemId('fc'),
          kind: 'function_call',
          text: '',
          callId: call.id ?? itemId('call'),
          name: call.function.name ?? '',
        };
        this.#calls.set(call.index, open);
        this.#open = open;
        this.#items.push(callItem(open.id, open.callId, open.name, '', 'in_progress'));
        out.push(this.event('response.output_item.added', { output_index: open.index, item: this.#items[open.index] }));
      }
      open.text += call.function.arguments;
      if (call.function.arguments !== '')
        out.push(
          this.event('response.function_call_arguments.delta', {
            item_id: open.id,
            output_index: open.index,
            delta: call.function.arguments,
          }),
        );
    }
    return out;
  }

  /**
   * Closes the open item with the response's status; a completed answer with no item at all gets
   * an empty message (an incomplete one, such as a forced call cut by the length limit, gets none).
   */
  finish(status: 'completed' | 'incomplete' = 'completed'): object[] {
    const out: object[] = [];
    if (this.#items.length === 0 && status === 'completed') this.#openMessage(out);
    out.push(...this.#close(status));
    return out;
  }

  #openReasoning(out: object[]): Open {
    if (this.#open?.kind === 'reasoning') return this.#open;
    out.push(...this.#close());
    const open: Open = {
      index: this.#items.length,
      id: itemId('rs'),
      kind: 'reasoning',
      text: '',
      callId: '',
      name: '',
    };
    this.#open = open;
    this.#items.push(reasoningItem(open.id, '', 'in_progress'));
    out.push(this.event('response.output_item.added', { output_index: open.index, item: this.#items[open.index] }));
    return open;
  }

  #openMessage(out: object[]): Open {
    if (this.#open?.kind === 'message') return this.#open;
    out.push(...this.#close());
    const open: Open = {
      index: this.#items.length,
      id: itemId('msg'),
      kind: 'message',
      text: '',
      callId: '',
      name: '',
    };
    this.#open = open;
    this.#items.push(messageItem(open.id, '', 'in_progress'));
    out.push(this.event('response.output_item.added', { output_index: open.index, item: this.#items[open.index] }));
    out.push(
      this.event('response.content_part.added', {
        item_id: open.id,
        output_index: open.index,
        content_index: 0,
        part: { type: 'output_text', text: '', annotations: [], logprobs: [] },
      }),
    );
    return open;
  }

  #close(status: 'completed' | 'incomplete' = 'completed'): object[] {
    const open = this.#open;
    if (open === undefined) return [];
    this.#open = undefined;
    const at = { item_id: open.id, output_index: open.index };
    if (open.kind === 'reasoning') {
      const item = reasoningItem(open.id, open.text, status);
      this.#items[open.index] = item;
      return [
        this.event('response.reasoning_text.done', { ...at, content_index: 0, text: open.text }),
        this.event('response.output_item.done', { output_index: open.index, item }),
      ];
    }
    if (open.kind === 'message') {
      const item = messageItem(open.id, open.text, status);
      this.#items[open.index] = item;
      const part = { type: 'output_text', text: open.text, annotations: [], logprobs: [] };
      return [
        this.event('response.output_text.done', { ...at, content_index: 0, text: open.text, logprobs: [] }),
        this.event('response.content_part.done', { ...at, content_index: 0, part }),
        this.event('response.output_item.done', { output_index: open.index, item }),
      ];
    }
    const item = callItem(open.id, open.callId, open.name, open.text, status);
    this.#items[open.index] = item;
    return [
      this.event('response.function_call_arguments.done', { ...at, name: open.name, arguments: open.text }),
      this.event('response.output_item.done', { output_index: open.index, item }),
    ];
  }
}
