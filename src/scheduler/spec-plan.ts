// Speculation's part of a step's plan: which decodes carry drafts, and the items that verify them.
// Owns: the drafts a step's decodes propose (spec-lookup.ts) within the tokens, output and
// context each may still use, and the BatchItem of a decode with drafts.
// Must never: take a page or a token of the budget that a plain decode or a prompt needed first
// (drafts are planned after every decode got its one token, and only from what fits without
// preempting anyone). A constrained request drafts too: its grammar gives a mask per draft row
// and rolls back (src/grammar, engine/spec-verify.ts).
//
// A decode with drafts d1..dk feeds its last sampled token t and the drafts at the positions
// after it, and wants the logits of all k + 1 positions:
//
//   positions:  numComputed  +1   +2  ...  +k
//   tokens:     t            d1   d2  ...  dk          logitCount k + 1
//   row j:      the distribution after t d1 .. dj: verifies d(j+1), or samples the bonus (j = k)
//
// Verification (engine/spec-verify.ts) accepts a prefix d1..dm and samples one token after it;
// the positions of d(m+1)..dk are rolled back (pool.rollbackStamps) before complete() counts
// numComputed + 1 + m as computed.
import { assert, type BatchItem } from '../core/index.js';
import { pagesFor } from '../pages/index.js';
import { numOutputTokens, type PageTable, type SchedRequest } from './request-state.js';
import type { SpecOptions } from './spec-lookup.js';

export interface DraftPlanning {
  readonly speculation: SpecOptions;
  /** The decodes planned so far (one token each), oldest first. */
  readonly decodes: readonly SchedRequest[];
  /**
   * Requests with prompt work left (running prefills, waiting ones): they count toward the batch
   * as decodes do. Drafts are planned before prompts' chunks and would take their budget; while
   * they wait, the step's weight pass is shared with their rows anyway.
   */
  readonly numPrompting: number;
  readonly contextLength: number;
  /** Tokens of the step's budget left. */
  readonly budget: number;
  readonly tableOf: (r: SchedRequest) => PageTable;
  /** Grows r's table to hold `want` tokens from numComputed as far as pages allow without preempting; the tokens it holds. */
  readonly growUpTo: (r: SchedRequest, want: number) => number;
}

/** Each drafting decode's draft tokens (a decode not in the map feeds its one token). */
export function planDrafts(p: DraftPlanning): Map<SchedRequest, readonly number[]> {
  const drafts = new Map<SchedRequest, readonly number[]>();
  if (p.decodes.length + p.numPrompting > p.speculation.maxBatch) return drafts;
  let budget = p.budget;
  for (const r of p.decodes) {
    if (r.draft === undefined || budget <= 0) continue;
    // The step gives up to k + 1 tokens: drafts past max_tokens or the context would be wasted.
    const limit = Math.min(budget, r.maxTokens - numOutputTokens(r) - 1, p.contextLength - r.tokens.length);
    if (limit <= 0) continue;
    const proposal = r.draft.propose(r.tokens, limit);
    if (proposal.length === 0) continue;
    const n = p.growUpTo(r, 1 + proposal.length);
    if (n <= 1) continue;
    drafts.set(r, proposal.slice(0, n - 1));
    budget -= n - 1;
  }
  return drafts;
}

/** The item of a decode with drafts: its last token and the drafts, every position's logits wanted. */
export function draftItemOf(r: SchedRequest, table: PageTable, draft: readonly number[], pageSize: number): BatchItem {
  const startPos = table.numComputed;
  const end = startPos + 1 + draft.length;
  assert(
    r.state.kind === 'decoding' && startPos === r.tokens.length - 1 && draft.length > 0,
    () => `${r.rid}: drafts for a request that is ${r.state.kind} at ${startPos} of ${r.tokens.length}`,
  );
  assert(
    table.tags.length >= pagesFor(end, pageSize),
    () => `${r.rid}: ${table.tags.length} pages for ${end} positions`,
  );
  return {
    rid: r.rid,
    tenant: r.tenant,
    tokens: [r.tokens[startPos] as number, ...draft],
    startPos,
    tags: [...table.tags],
    wantLogits: true,
    logitCount: 1 + draft.length,
    verifiesDrafts: true,
    ...(r.adapter === undefined ? {} : { adapter: r.adapter }),
  };
}
