// Admission, the rule: could a node with these limits ever serve this request? Decided from
// numbers alone, before any page is allocated or any byte moves. The incident's first fault was a
// context window larger than the pool, with an engine expected to refuse what it could not hold;
// here the refusal is one pure rule with one wording per error, and every node (the API front
// door, the router, the co-located, prefill and decode schedulers, the transfer hosts) calls it
// with its own limits. Re-checking everywhere is defence in depth; this file is the one home.
// Owns: the request-shape, context-length and pool-fit rules and their messages (vLLM's wording
// for the context length, which clients and tests match).
// Must never: allocate, look at the current load (a full queue is `overloaded`, decided by the
// scheduler), or read the fault set (each caller decides whether admission runs at all).
import { AdmissionError, assertNever, InvalidRequestError, type TesseraError } from '../core/index.js';
import { pagesFor } from './arithmetic.js';

/** What a node's pool keeps of a request: prefill only the prompt, co-located and decode prompt and output. */
export type PoolRole = 'colocated' | 'prefill' | 'decode';

export interface AdmissionLimits {
  readonly contextLength: number;
  readonly pageSize: number;
  /** Pages in this node's pool. */
  readonly numPages: number;
}

/**
 * Positions this node's pool must hold for the request at its largest. A prefill node keeps only
 * the prompt; a co-located or decode node keeps prompt and output. (The last output token's K/V
 * are never written, so this is one position generous: it errs towards refusing.)
 */
export function poolTokensNeeded(role: PoolRole, numPromptTokens: number, maxTokens: number): number {
  switch (role) {
    case 'prefill':
      return numPromptTokens;
    case 'colocated':
    case 'decode':
      return numPromptTokens + maxTokens;
    default:
      return assertNever(role, 'role');
  }
}

/** A malformed request (no prompt, max_tokens not a positive integer), or undefined. */
export function requestShapeError(numPromptTokens: number, maxTokens: number): TesseraError | undefined {
  if (numPromptTokens < 1) return new InvalidRequestError('the prompt must contain at least one token', 'prompt');
  if (!Number.isSafeInteger(maxTokens) || maxTokens < 1) {
    return new InvalidRequestError(`max_tokens must be a positive integer, got ${maxTokens}`, 'max_tokens');
  }
  return undefined;
}

/**
 * Why prompt + max_tokens exceed the context length, or undefined (vLLM's wording). `maxTokens`
 * null means the client gave none: then the prompt alone must leave room for one token, and the
 * error names the field that holds the prompt (`promptParam`); otherwise it names `max_tokens`.
 */
export function contextLengthError(
  contextLength: number,
  numPromptTokens: number,
  maxTokens: number | null,
  promptParam = 'prompt',
): AdmissionError | undefined {
  const head = `This model's maximum context length is ${contextLength} tokens. However, you requested`;
  if (maxTokens === null) {
    if (numPromptTokens < contextLength) return undefined;
    return new AdmissionError(
      'context_length_exceeded',
      `${head} ${numPromptTokens} tokens in the messages. Please reduce the length of the messages.`,
      promptParam,
    );
  }
  const numTokens = numPromptTokens + maxTokens;
  if (numTokens <= contextLength) return undefined;
  return new AdmissionError(
    'context_length_exceeded',
    `${head} ${numTokens} tokens (${numPromptTokens} in the messages, ${maxTokens} in the completion). ` +
      'Please reduce the length of the messages or completion.',
    'max_tokens',
  );
}

/** Why this node's pool can never hold the request, or undefined. */
export function poolFitError(
  limits: AdmissionLimits,
  role: PoolRole,
  numPromptTokens: number,
  maxTokens: number,
): AdmissionError | undefined {
  const needTokens = poolTokensNeeded(role, numPromptTokens, maxTokens);
  const needPages = pagesFor(needTokens, limits.pageSize);
  if (needPages <= limits.numPages) return undefined;
  const poolTokens = limits.numPages * limits.pageSize;
  const what =
    role === 'prefill'
      ? `its ${numPromptTokens} prompt tokens`
      : `${numPromptTokens} prompt tokens + ${maxTokens} completion tokens`;
  return new AdmissionError(
    'pool_too_small',
    `This ${role} node's KV pool holds ${poolTokens} tokens (${limits.numPages} pages of ${limits.pageSize}), ` +
      `but this request needs ${needTokens} tokens (${needPages} pages) for ${what}. ` +
      'Please reduce the length of the messages or completion.',
  );
}

/** Why a node with these limits refuses the request whatever its load, or undefined when it could serve it. */
export function admissionError(
  limits: AdmissionLimits,
  role: PoolRole,
  numPromptTokens: number,
  maxTokens: number,
): TesseraError | undefined {
  return (
    requestShapeError(numPromptTokens, maxTokens) ??
    contextLengthError(limits.contextLength, numPromptTokens, maxTokens) ??
    poolFitError(limits, role, numPromptTokens, maxTokens)
  );
}
