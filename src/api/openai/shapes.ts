// OpenAI's response objects, exactly: text_completion, chat.completion, chat.completion.chunk,
// usage, and the model list. Plain functions from data to JSON-ready objects; must never do I/O.
import { assert, assertNever, type FinishReason, type TokenLogprob, type Usage } from '../../core/index.js';
import { offersCalls, splitReasoning, type ReasoningPlan } from './reasoning.js';
import { echoChoice, type CompletionLogprobs, type EchoPlan } from './echo.js';
import { callJson, parseAnswer } from './tool-output.js';
import type { ToolPlan } from './tools.js';

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
  /** With vLLM's `return_token_ids`: the prompt ids of each choice (answers then carry `token_ids` too). */
  readonly tokenIds: { promptOf(index: number): readonly number[] } | null;
  /** When the request asked for log-probabilities: a token's text (the codec's tokenText). */
  readonly tokenText: ((id: number) => string) | null;
  /** Chat with `tools`: how calls are found in the answers (tool-output.ts). */
  readonly tools?: ToolPlan;
  /** Completions with `echo` or `prompt_logprobs`: how each choice shows its prompt (echo.ts). */
  readonly echo?: EchoPlan;
  /** Chat with a reasoning parser: the answer's reasoning goes to `reasoning_content` (reasoning.ts). */
  readonly reasoning?: ReasoningPlan;
}

/** Output tokens with their log-probabilities; `textOffset`: where the first one's text starts in the completion. */
export interface LogprobsOf {
  readonly ids: readonly number[];
  readonly logprobs: readonly TokenLogprob[];
  readonly textOffset: number;
}

/** The length of the text of these tokens as logprobs report it (for the next chunk's text_offset). */
export function logprobsTextLength(meta: ResponseMeta, ids: readonly number[]): number {
  const text = meta.tokenText;
  return text === null ? 0 : ids.reduce((n, id) => n + text(id).length, 0);
}

const UTF8 = new TextEncoder();

/** A choice's `logprobs` field: null unless asked for; the completions API's or the chat API's shape. */
function logprobsField(meta: ResponseMeta, of: LogprobsOf | undefined): object | null {
  const text = meta.tokenText;
  if (text === null || of === undefined) return null;
  const { logprobs } = of;
  const ids = of.ids.slice(0, logprobs.length); // one each (a back end that sent fewer gets fewer entries)
  if (meta.endpoint === 'chat') {
    const entry = (id: number, logprob: number) => {
      const token = text(id);
      return { token, logprob, bytes: [...UTF8.encode(token)] };
    };
    return {
      content: ids.map((id, i) => {
        const lp = logprobs[i] as TokenLogprob;
        return { ...entry(id, lp.logprob), top_logprobs: lp.top.map((t) => entry(t.id, t.logprob)) };
      }),
      refusal: null,
    };
  }
  let offset = of.textOffset;
  const textOffset = ids.map((id) => {
    const at = offset;
    offset += text(id).length;
    return at;
  });
  return {
    tokens: ids.map(text),
    token_logprobs: ids.map((_, i) => (logprobs[i] as TokenLogprob).logprob),
    top_logprobs: ids.map((id, i) => {
      const lp = logprobs[i] as TokenLogprob;
      return Object.fromEntries([
        ...lp.top.map((t) => [text(t.id), t.logprob] as const),
        [text(id), lp.logprob] as const,
      ]);
    }),
    text_offset: textOffset,
  };
}

export function usageJson(usage: Usage): object {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedTokens },
    // Speculative decoding's drafts, in the fields OpenAI gives predicted outputs.
    ...(usage.draftTokens === undefined || usage.draftTokens === 0
      ? {}
      : {
          completion_tokens_details: {
            accepted_prediction_tokens: usage.acceptedDraftTokens ?? 0,
            rejected_prediction_tokens: usage.draftTokens - (usage.acceptedDraftTokens ?? 0),
          },
        }),
  };
}

/** The choice fields vLLM adds with `return_token_ids` (`index`: the choice's, for its prompt's ids). */
function idFields(meta: ResponseMeta, ids: readonly number[], withPromptOf: number | null): object {
  if (meta.tokenIds === null) return {};
  return withPromptOf !== null
    ? { prompt_token_ids: meta.tokenIds.promptOf(withPromptOf), token_ids: ids }
    : { token_ids: ids };
}

/** One finished choice of a non-streaming answer. `ids`: its token ids; `logprobs`: theirs, when asked for. */
export interface FinishedChoice {
  readonly text: string;
  readonly ids: readonly number[];
  readonly logprobs: readonly TokenLogprob[];
  readonly finishReason: FinishReason;
  /** With meta.echo: the prompt's log-probabilities the back end sent (one per prompt token, the first null). */
  readonly promptLogprobs?: readonly (TokenLogprob | null)[];
}

/** The non-streaming answer: the choices in index order (`n` of them), and the usage of all. */
export function fullResponse(meta: ResponseMeta, choices: readonly FinishedChoice[], usage: Usage): object {
  switch (meta.endpoint) {
    case 'completion':
      return {
        id: meta.id,
        object: 'text_completion',
        created: meta.created,
        model: meta.model,
        choices: choices.map((c, index) => {
          const logprobs = logprobsField(meta, { ids: c.ids, logprobs: c.logprobs, textOffset: 0 });
          const echo =
            meta.echo === undefined
              ? {}
              : echoChoice(meta.echo, index, c.text, logprobs as CompletionLogprobs | null, c.promptLogprobs);
          return {
            index,
            text: c.text,
            logprobs,
            ...echo,
            finish_reason: c.finishReason,
            ...idFields(meta, c.ids, index),
          };
        }),
        usage: usageJson(usage),
      };
    case 'chat':
      return {
        id: meta.id,
        object: 'chat.completion',
        created: meta.created,
        model: meta.model,
        ...(meta.tokenIds === null ? {} : { prompt_token_ids: meta.tokenIds.promptOf(0) }),
        choices: choices.map((c, index) => ({
          index,
          ...chatMessage(meta, c.text, c.finishReason),
          logprobs: logprobsField(meta, { ids: c.ids, logprobs: c.logprobs, textOffset: 0 }),
          ...idFields(meta, c.ids, null),
        })),
        usage: usageJson(usage),
      };
    default:
      return assertNever(meta.endpoint, 'endpoint');
  }
}

/** A chat choice's `message` (OpenAI's: `refusal` null, `tool_calls` when the answer holds calls) and `finish_reason`. */
function chatMessage(
  meta: ResponseMeta,
  text: string,
  finishReason: FinishReason,
): { message: object; finish_reason: string } {
  const split = meta.reasoning === undefined ? null : splitReasoning(meta.reasoning, text, offersCalls(meta.tools));
  const answer = parseAnswer(meta.tools, split === null ? text : split.content, finishReason);
  const calls = answer.calls.length === 0 ? {} : { tool_calls: answer.calls.map(callJson) };
  // As vLLM: the field is there with a parser (null when the answer had none); no content after a cut-off block is null.
  const reasoning = split === null ? {} : { reasoning_content: split.reasoning };
  const content = split?.reasoning != null && answer.content === '' ? null : answer.content;
  return {
    message: { role: 'assistant', content, ...reasoning, refusal: null, ...calls },
    finish_reason: answer.finishReason,
  };
}

/** A chat chunk with any delta and finish reason (tool-call deltas, `tool_calls` finishes). */
export function chatDeltaChunk(meta: ResponseMeta, delta: object, finishReason: string | null, index = 0): object {
  return chunk(meta, index, '', finishReason as FinishReason | null, delta);
}

/** One streamed chunk of choice `index`. `delta`: chat's delta object; `text`: completion text. */
function chunk(
  meta: ResponseMeta,
  index: number,
  text: string,
  finishReason: FinishReason | null,
  delta: object,
  ids: readonly number[] | null = null,
  logprobs?: LogprobsOf,
): object {
  const extra = ids === null ? {} : idFields(meta, ids, null);
  const lp = logprobsField(meta, logprobs);
  const choice =
    meta.endpoint === 'chat'
      ? { index, delta, logprobs: lp, finish_reason: finishReason, ...extra }
      : { index, text, logprobs: lp, finish_reason: finishReason, ...extra };
  return {
    id: meta.id,
    object: meta.endpoint === 'chat' ? 'chat.completion.chunk' : 'text_completion',
    created: meta.created,
    model: meta.model,
    choices: [choice],
    ...(meta.includeUsage ? { usage: null } : {}),
  };
}

/** Choice `index`'s first chunk: chat streams open with the role; completions have none, unless the prompt's ids are asked for. */
export function openingChunk(meta: ResponseMeta, index = 0): object | null {
  if (meta.endpoint === 'chat') {
    const opening = chunk(meta, index, '', null, { role: 'assistant', content: '' });
    return meta.tokenIds === null ? opening : { ...opening, prompt_token_ids: meta.tokenIds.promptOf(index) };
  }
  if (meta.tokenIds === null) return null;
  const opening = chunk(meta, index, '', null, {}) as { choices: object[] };
  return { ...opening, choices: [{ ...opening.choices[0], prompt_token_ids: meta.tokenIds.promptOf(index) }] };
}

/**
 * Streaming completions with `echo` or `prompt_logprobs`: choice `index`'s prompt part, a chunk
 * before its first output token (its text, the prompt tokens' `logprobs`, vLLM's `prompt_logprobs`).
 */
export function echoChunk(
  meta: ResponseMeta,
  index: number,
  prompt: readonly (TokenLogprob | null)[] | undefined,
): object {
  assert(meta.echo !== undefined, 'an echo chunk for a request without echo');
  const part = echoChoice(meta.echo, index, '', null, prompt);
  const base = chunk(meta, index, part.text, null, {}) as { choices: object[] };
  const { text: _text, ...fields } = part;
  return { ...base, choices: [{ ...base.choices[0], logprobs: null, ...fields }] };
}

/** `ids`: the token ids this chunk's text came from (sent with `return_token_ids`); `logprobs`: theirs, when asked for. */
export function textChunk(
  meta: ResponseMeta,
  text: string,
  ids: readonly number[],
  index = 0,
  logprobs?: LogprobsOf,
): object {
  return chunk(meta, index, text, null, { content: text }, meta.tokenIds === null ? null : ids, logprobs);
}

export function finishChunk(meta: ResponseMeta, finishReason: FinishReason, index = 0): object {
  return chunk(meta, index, '', finishReason, {});
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

export function modelList(model: {
  readonly id: string;
  readonly root: string;
  readonly maxModelLen: number;
  readonly created: number;
  /** LoRA adapters the caller may use, listed as vLLM lists its LoRA modules: id the adapter's name, parent the base. */
  readonly adapters?: readonly string[];
}): object {
  const entry = (id: string, parent: string | null) => ({
    id,
    object: 'model',
    created: model.created,
    owned_by: 'tessera',
    root: model.root,
    parent,
    max_model_len: model.maxModelLen,
  });
  return {
    object: 'list',
    data: [entry(model.id, null), ...(model.adapters ?? []).map((name) => entry(name, model.id))],
  };
}
