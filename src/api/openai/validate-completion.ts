// Body of POST /v1/completions -> a validated CompletionCall, or the 400 that names the field.
// Must never tokenize or touch the back end: this is shape checking only.
import { InvalidRequestError, MAX_TOP_LOGPROBS, NO_FAULTS, type FaultSet } from '../../core/index.js';
import {
  describe,
  field,
  isObject,
  optionalBool,
  optionalInt,
  readCommon,
  tokenIdList,
  validating,
  type CommonParams,
  type Validated,
} from './params.js';

export type CompletionPrompt =
  { readonly kind: 'text'; readonly text: string } | { readonly kind: 'tokens'; readonly ids: readonly number[] };

export interface CompletionCall {
  readonly params: CommonParams;
  /** One or more prompts (OpenAI's batch form); each gets `n` choices. */
  readonly prompts: readonly CompletionPrompt[];
  /** Let the tokenizer add BOS to a text prompt (vLLM's `add_special_tokens`, default true). */
  readonly addSpecialTokens: boolean;
  /** `echo`: each choice starts with its prompt (and, with `logprobs`, the prompt tokens' log-probabilities). */
  readonly echo: boolean;
  /** vLLM's `prompt_logprobs`: N alternatives per prompt token; null: not asked. */
  readonly promptLogprobs: number | null;
  /**
   * `max_tokens: 0` with `echo` (lm-evaluation-harness's loglikelihood, vLLM): the prompt alone;
   * params.maxTokens is then 1 and that one token is left out of the answer.
   */
  readonly promptOnly: boolean;
}

/** `faults`: only `skip-request-limits` is looked at (params.ts). */
export function validateCompletion(body: unknown, faults: FaultSet = NO_FAULTS): Validated<CompletionCall> {
  return validating(() => {
    if (!isObject(body))
      throw new InvalidRequestError(`The request body must be a JSON object, got ${describe(body)}.`);
    const echo = optionalBool(body, 'echo') ?? false;
    const promptLogprobs = optionalInt(body, 'prompt_logprobs', { min: 0, max: MAX_TOP_LOGPROBS }) ?? null;
    const promptOnly = field(body, 'max_tokens') === 0;
    if (promptOnly && !echo && promptLogprobs === null)
      throw new InvalidRequestError(
        '`max_tokens` = 0 asks for nothing; it is taken only with `echo` or `prompt_logprobs` (the prompt alone).',
        'max_tokens',
      );
    // Completions take `echo` and `prompt_logprobs` (chat refuses them with the other unsupported fields).
    const { echo: _echo, prompt_logprobs: _promptLogprobs, ...rest } = body;
    const common = readCommon(promptOnly ? { ...rest, max_tokens: 1 } : rest, ['max_tokens'], 'completion', faults);
    return {
      params: common,
      prompts: readPrompts(body),
      addSpecialTokens: optionalBool(body, 'add_special_tokens') ?? true,
      echo,
      promptLogprobs,
      promptOnly,
    };
  });
}

/** The most prompts one request may hold. */
export const MAX_PROMPTS = 128;

/**
 * `prompt`: a string, an array of token ids, or an array of those (several prompts: OpenAI's
 * batch form, at most MAX_PROMPTS).
 */
function readPrompts(body: Readonly<Record<string, unknown>>): CompletionPrompt[] {
  const value = field(body, 'prompt');
  if (value === undefined) throw new InvalidRequestError('`prompt` is required.', 'prompt');
  if (typeof value === 'string') return [textPrompt(value)];
  if (!Array.isArray(value)) {
    throw new InvalidRequestError(
      `\`prompt\` must be a string, an array of token ids, or an array of those, got ${describe(value)}.`,
      'prompt',
    );
  }
  if (value.length > 0 && value.every((v) => typeof v === 'number')) return [tokenPrompt(value)];
  if (value.length === 0) throw new InvalidRequestError('`prompt` is empty.', 'prompt');
  if (value.length > MAX_PROMPTS)
    throw new InvalidRequestError(
      `\`prompt\` holds ${value.length} prompts; at most ${MAX_PROMPTS} are taken in one request.`,
      'prompt',
    );
  return value.map((one: unknown, i) => {
    if (typeof one === 'string') return textPrompt(one);
    if (Array.isArray(one)) return tokenPrompt(one);
    throw new InvalidRequestError(
      `\`prompt[${i}]\` must be a string or an array of token ids, got ${describe(one)}.`,
      'prompt',
    );
  });
}

function textPrompt(text: string): CompletionPrompt {
  if (text === '') throw new InvalidRequestError('`prompt` is empty.', 'prompt');
  return { kind: 'text', text };
}

function tokenPrompt(ids: unknown[]): CompletionPrompt {
  if (ids.length === 0) throw new InvalidRequestError('`prompt` is empty.', 'prompt');
  return { kind: 'tokens', ids: tokenIdList(ids, 'prompt') };
}
