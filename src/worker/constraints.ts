// Structured output in the step loop, shared by every role: a request's TokenConstraint from
// its spec, and the masks of a step's constrained requests prepared beside the forward pass.
// The grammar lives on a grammar thread (src/grammar): prepare() is one message there for the
// whole step (the engine batches every mask asked for in one turn), awaited beside the forward pass.
// Must never let one request's grammar failure reject the step: it shows as that request's
// failure when its mask is asked for (step-results.ts fails only that request).
import {
  InvalidRequestError,
  type BatchItem,
  type GenerateRequest,
  type RequestId,
  type TesseraError,
} from '../core/index.js';
import type { GrammarEngine, TokenConstraint } from '../grammar/index.js';

/** undefined: free text; an error: the request asks for a constraint this node cannot build. */
export function constraintFor(
  request: Pick<GenerateRequest, 'sampling' | 'tenant'>,
  grammar: GrammarEngine | undefined,
): TokenConstraint | TesseraError | undefined {
  const spec = request.sampling.constraint;
  if (spec === undefined) return undefined;
  if (grammar === undefined)
    return new InvalidRequestError('This server was started without structured-output support.', 'response_format');
  if (request.sampling.ignoreEos)
    return new InvalidRequestError(
      '`ignore_eos` cannot be combined with structured output (the grammar ends at EOS).',
      'ignore_eos',
    );
  return grammar.constraint(spec, request.tenant);
}

/** Prepares the mask of every constrained item; never rejects. */
export async function prepareConstraints(
  items: readonly BatchItem[],
  constraintOf: (rid: RequestId) => TokenConstraint | undefined,
): Promise<void> {
  const pending: Promise<void>[] = [];
  for (const item of items) {
    const constraint = constraintOf(item.rid);
    // A decode verifying drafts (fed [t, d1..dk]) needs the mask after each draft too.
    const drafts = item.verifiesDrafts === true ? item.tokens.slice(1) : [];
    if (constraint !== undefined) pending.push(constraint.prepare(drafts).catch(() => undefined));
  }
  if (pending.length > 0) await Promise.all(pending);
}
