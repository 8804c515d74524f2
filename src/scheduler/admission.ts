// Admission: could this node ever serve this request? Decided from numbers alone, before any
// page is allocated. The incident's first fault was a context window larger than the pool,
// with an engine expected to refuse what it could not hold; here the refusal is a rule with
// its own error, checked up front on every node with that node's own limits.
// Owns: the request-shape, context-length and pool-fit rules and their messages.
// Must never: allocate, look at the current load (a full queue is `overloaded`, decided by the
// scheduler), or read the fault set (the scheduler decides whether admission runs at all).
import { AdmissionError, assertNever, InvalidRequestError, type TesseraError } from '../core/index.js';
import { pagesFor } from '../pages/index.js';
import type { Role } from './types.js';

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
export function poolTokensNeeded(role: Role, numPromptTokens: number, maxTokens: number): number {
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

/** Why this node refuses the request whatever its load, or undefined when it could serve it. */
export function admissionError(limits: AdmissionLimits, role: Role, numPromptTokens: number, maxTokens: number): AdmissionError | undefined {
  const numTokens = numPromptTokens + maxTokens;
  if (numTokens > limits.contextLength) {
    return new AdmissionError(
      'context_length_exceeded',
      `This model's maximum context length is ${limits.contextLength} tokens. However, you requested ${numTokens} tokens ` +
        `(${numPromptTokens} in the prompt, ${maxTokens} for the completion). ` +
        'Please reduce the length of the prompt or of the completion (max_tokens).',
    );
  }
  const needTokens = poolTokensNeeded(role, numPromptTokens, maxTokens);
  const needPages = pagesFor(needTokens, limits.pageSize);
  if (needPages > limits.numPages) {
    const poolTokens = limits.numPages * limits.pageSize;
    const what = role === 'prefill' ? `its ${numPromptTokens} prompt tokens` : `${numPromptTokens} prompt tokens + ${maxTokens} completion tokens`;
    return new AdmissionError(
      'pool_too_small',
      `This ${role} node's KV pool holds ${poolTokens} tokens (${limits.numPages} pages of ${limits.pageSize}), ` +
        `but this request needs ${needTokens} tokens (${needPages} pages) for ${what}. ` +
        'Please reduce the length of the prompt or of the completion (max_tokens).',
    );
  }
  return undefined;
}
