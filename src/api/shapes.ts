// OpenAI's response objects, exactly: text_completion, chat.completion, chat.completion.chunk,
// usage, and the model list. Plain functions from data to JSON-ready objects; must never do I/O.
import { assertNever, type FinishReason, type Usage } from '../core/index.js';

export type Endpoint = 'completion' | 'chat';

export interface ResponseMeta {
  readonly endpoint: Endpoint;
  /** `cmpl-...` or `chatcmpl-...`. */
  readonly id: string;
  /** Unix seconds. */
  readonly created: number;
  readonly model: string;
  /** With stream_options.include_usage every chunk carries `usage` (null until the last). */
  readonly includeUsage: boolean;
}

export function usageJson(usage: Usage): object {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedTokens },
  };
}

/** The non-streaming answer. */
export function fullResponse(meta: ResponseMeta, text: string, finishReason: FinishReason, usage: Usage): object {
  switch (meta.endpoint) {
    case 'completion':
      return {
        id: meta.id,
        object: 'text_completion',
        created: meta.created,
        model: meta.model,
        choices: [{ index: 0, text, logprobs: null, finish_reason: finishReason }],
        usage: usageJson(usage),
      };
    case 'chat':
      return {
        id: meta.id,
        object: 'chat.completion',
        created: meta.created,
        model: meta.model,
        choices: [{ index: 0, message: { role: 'assistant', content: text }, logprobs: null, finish_reason: finishReason }],
        usage: usageJson(usage),
      };
    default:
      return assertNever(meta.endpoint, 'endpoint');
  }
}

/** One streamed chunk with one choice. `delta`: chat's delta object; `text`: completion text. */
function chunk(meta: ResponseMeta, text: string, finishReason: FinishReason | null, delta: object): object {
  const choice =
    meta.endpoint === 'chat'
      ? { index: 0, delta, logprobs: null, finish_reason: finishReason }
      : { index: 0, text, logprobs: null, finish_reason: finishReason };
  return {
    id: meta.id,
    object: meta.endpoint === 'chat' ? 'chat.completion.chunk' : 'text_completion',
    created: meta.created,
    model: meta.model,
    choices: [choice],
    ...(meta.includeUsage ? { usage: null } : {}),
  };
}

/** Chat streams open with the role; completions have no opening chunk. */
export function openingChunk(meta: ResponseMeta): object | null {
  return meta.endpoint === 'chat' ? chunk(meta, '', null, { role: 'assistant', content: '' }) : null;
}

export function textChunk(meta: ResponseMeta, text: string): object {
  return chunk(meta, text, null, { content: text });
}

export function finishChunk(meta: ResponseMeta, finishReason: FinishReason): object {
  return chunk(meta, '', finishReason, {});
}

/** The last chunk with include_usage: no choices, only usage. */
export function usageChunk(meta: ResponseMeta, usage: Usage): object {
  return {
    id: meta.id,
    object: meta.endpoint === 'chat' ? 'chat.completion.chunk' : 'text_completion',
    created: meta.created,
    model: meta.model,
    choices: [],
    usage: usageJson(usage),
  };
}

export function modelList(model: { readonly id: string; readonly root: string; readonly maxModelLen: number; readonly created: number }): object {
  return {
    object: 'list',
    data: [
      {
        id: model.id,
        object: 'model',
        created: model.created,
        owned_by: 'tessera',
        root: model.root,
        parent: null,
        max_model_len: model.maxModelLen,
      },
    ],
  };
}
