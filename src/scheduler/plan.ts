// One step's plan: which requests run, with how many tokens, on which pages.
// Owns: the order of service, the token budget, allocation on demand and preemption.
// Must never: plan a read of a position that is not computed (an item reads exactly
// [0, startPos), which complete() advanced only after the runner wrote and stamped it), plan a
// write into a cached page (a prefix hit ends on a page boundary, so new positions always land
// in pages the request allocated), or preempt a request whose pages a peer may be writing.
//
// A step, in order:
//   1. Decodes of running requests, oldest first: one token each. A decode crossing a page
//      boundary needs a page; the token budget always covers every decode (checked at start-up).
//   1b. With speculation (spec-plan.ts), draft tokens for those decodes from the budget and pages
//      left, never preempting: each such decode verifies its drafts in this step.
//   2. Prefill chunks of running requests and new requests from the waiting queues, as far as
//      the budget goes, in fair-share order: per tenant its oldest running prompt's chunk, else
//      its waiting head; among tenants the smallest virtual token counter (fair-share.ts), so a
//      tenant with 24 long prompts in flight cannot hold another's short one behind its chunks.
//      (Fault `no-tenant-fairness`, or no counters: running chunks oldest first, then the
//      queues' tenant turns, as before.) With decodes in the step, each chunk is also capped by
//      prefillLimit.maxChunk(the step so far, its start position) (the step's time budget,
//      which prices a late chunk of a long prompt higher). While several tenants share the node
//      (ctx.shared), every step is held to prefillLimit.maxSharedChunk, a shorter budget: a
//      tenant's request that arrives mid-step waits for the step in flight, planned before it
//      came, so that step must be short already (fault `loose-shared-budget`: the usual budget;
//      fault `unbounded-shared-steps`: no cap at all without decodes, a whole 256-token chunk).
//      A lone tenant's steps are never held so. A short prompt (prefillLimit.shortPromptTokens)
//      is not split by either cap: its rest goes whole while the step's prefill stays within
//      that many tokens, so its first token comes one step after it was planned (measured on
//      bench:fair: split, a 22-token chat took 3-4 steps beside another tenant's flood; fault
//      `split-short-prompts`: split like any other). A step that gives another tenant's short
//      prompt its first token holds long prompts' chunks within that many tokens of prefill too,
//      so that first token's step stays near its decodes' time (fault `crowded-first-token-step`:
//      they fill the budget). A tenant's waiting head that the budget leaves no time for is
//      passed over for this step, and the next tenant's head may still start (a short prompt
//      takes its rest whole): measured on bench:fair, A's long head, first by its counter and out
//      of time, held B's admitted 22-token chat back for up to 11 steps (fault
//      `budget-closes-admission`: it stops every start, as pages running out do). A new request
//      starts only while the running limit and the pages allow; it never preempts anything,
//      none starts in a step that preempted (the victims would just take their pages back), and
//      a chunk after a start takes what fits without preempting. Fairness changes only this order, never who may run.
// When a running request cannot get even one page (after evicting unreferenced cached pages),
// the most recently started running request is preempted: its pages go back (full stamped ones
// into the prefix cache, where they are evictable, the rest freed), it goes to the front of its
// tenant's queue and later recomputes prompt and output from position 0 (or from a cache hit).
// If the youngest is the request itself, it preempts itself. A chunk that does not fit whole
// shrinks to what fits instead. On a decode node (`failOnPreempt`) a preemption fails the victim
// instead (ctx.failPreempted): its prompt's ids never came there, so it could only be recomputed
// from placeholders; the failure is an event of this plan, and nothing of it is computed.
//
// Backstops, reachable only when admission was skipped (fault `skip-admission`): a request longer
// than the context, or one that is alone and still cannot grow, fails here instead of looping.
import {
  assert,
  assertNever,
  InvariantError,
  type BatchItem,
  type RequestId,
  type TenantId,
  type TesseraError,
} from '../core/index.js';
import { admissionError, pagesFor } from '../pages/index.js';
import type { FairCandidate, TenantCounters } from './fair-share.js';
import type { PageOps } from './page-ops.js';
import type { TenantQueues } from './queue.js';
import { pagesToGrow, type PageTable, type SchedRequest } from './request-state.js';
import { draftItemOf, planDrafts } from './spec-plan.js';
import type { SpecOptions } from './spec-lookup.js';
import { itemPairs, type PrefillLimit, type StepShape } from './step-budget.js';
import type { Role, SchedulerEvent, StepPlan } from './types.js';

export interface PlanContext {
  readonly pages: PageOps;
  /** Prefilling and decoding requests in the order they started: the youngest last. */
  readonly running: SchedRequest[];
  readonly waiting: TenantQueues<SchedRequest>;
  readonly role: Role;
  readonly pageSize: number;
  readonly contextLength: number;
  readonly maxRunningRequests: number;
  readonly chunkedPrefillSize: number;
  /** Logits rows this step may give prompt log-probabilities beyond one per item (SchedulerOptions.promptLogitRows). */
  readonly promptLogitRows: number;
  /** Running slots taken outside `running` (decode role: requests receiving their prompt). */
  readonly numReserved: number;
  /** Pages held outside the running set (held, receiving or quarantined): a lone request may still wait for them. */
  readonly othersHoldPages: boolean;
  /** The tenants' virtual token counters: charged for what is planned, and the order of chunks and starts; none: FCFS. */
  readonly counters?: TenantCounters;
  /** How much prefill may join a step with decodes (the step budget, step-budget.ts); none: the token budget only. */
  readonly prefillLimit?: PrefillLimit;
  /** Fault `split-short-prompts`: the budget caps short prompts too (prefillLimit.shortPromptTokens ignored). */
  readonly splitShortPrompts: boolean;
  /** Several tenants share the node (now or within the last steps): a step without decodes is budgeted too (maxSharedChunk). */
  readonly shared: boolean;
  /** Fault `crowded-first-token-step`: a step giving another tenant's short prompt its first token fills to the budget. */
  readonly crowdFirstTokenSteps?: boolean;
  /** Fault `loose-shared-budget`: while shared, steps keep the usual budget (maxSharedChunk's `loose`). */
  readonly looseSharedBudget?: boolean;
  /** Fault `budget-closes-admission`: a tenant's head the step budget leaves no time for stops every start in the step. */
  readonly budgetClosesAdmission?: boolean;
  /** Prompt-lookup speculation (spec-plan.ts): drafts for the step's decodes; none: off. */
  readonly speculation?: SpecOptions;
  /** A request taken off the queue starts prefilling with `table`: into `running`, the youngest. */
  start(r: SchedRequest, table: PageTable): void;
  /** Pages back (cached or freed), state waiting, front of its tenant's queue; out of `running`. */
  preempt(r: SchedRequest): void;
  /** Ends the request with the error wherever it is, pages back; out of `running` and the queues. */
  fail(r: SchedRequest, error: TesseraError): SchedulerEvent;
  /** Decode role: preemption fails the victim (pages back, out of `running`) instead of preempt(). */
  readonly failOnPreempt: boolean;
  /** Fails a request the plan would have preempted (an honest `overloaded`). */
  failPreempted(r: SchedRequest): SchedulerEvent;
}

export function planStep(ctx: PlanContext): StepPlan {
  const planned = new Map<SchedRequest, number>();
  const preempted: RequestId[] = [];
  const events: SchedulerEvent[] = [];
  let budget = ctx.chunkedPrefillSize;
  let promptRowsLeft = ctx.promptLogitRows;
  /** A prompt chunk wanting a row per token takes at most the rows left + its own one. */
  const rowLimit = (r: SchedRequest, startPos: number): number =>
    wantsPromptRows(r, startPos) ? promptRowsLeft + 1 : Infinity;
  const takeRows = (r: SchedRequest, startPos: number, n: number): void => {
    if (wantsPromptRows(r, startPos)) promptRowsLeft -= n - 1;
  };

  /** Speculation: the draft tokens of decodes that carry some (spec-plan.ts). */
  let drafts = new Map<SchedRequest, readonly number[]>();
  const preempt = (victim: SchedRequest): void => {
    drafts.delete(victim);
    const n = planned.get(victim) ?? 0;
    budget += n;
    if (n > 0) ctx.counters?.charge(victim.tenant, -n, victim.state.kind === 'decoding' ? 'output' : 'input');
    planned.delete(victim);
    if (ctx.failOnPreempt) {
      events.push(ctx.failPreempted(victim));
      return;
    }
    ctx.preempt(victim);
    preempted.push(victim.rid);
  };

  /** Plans up to `want` tokens of a running request; 0 when it was preempted or failed instead. */
  const fit = (r: SchedRequest, table: PageTable, want: number): number => {
    for (;;) {
      const n = tokensThatFit(ctx, table, want);
      if (n > 0) return grow(ctx, r, table, n);
      const youngest = ctx.running.at(-1);
      assert(youngest !== undefined, 'a running request is missing from the running set');
      if (youngest !== r) {
        preempt(youngest);
        continue;
      }
      if (ctx.running.length === 1 && !ctx.othersHoldPages) {
        events.push(ctx.fail(r, refusal(ctx, r)));
        return 0;
      }
      preempt(r);
      return 0;
    }
  };

  /**
   * Most tokens of r's chunk from `startPos` the step budget lets join what is planned so far; a
   * short prompt (prefillLimit.shortPromptTokens) may take its rest whole while the step's
   * prefill stays within that many tokens (fault `split-short-prompts`: the budget alone).
   */
  const timeLimit = (r: SchedRequest, startPos: number): number => {
    const limit = ctx.prefillLimit;
    if (limit === undefined) return Infinity;
    const shape = shapeOf(planned);
    let capped: number;
    if (ctx.shared && limit.maxSharedChunk !== undefined) {
      capped = Math.max(0, limit.maxSharedChunk(shape, startPos, ctx.looseSharedBudget === true));
    } else if (shape.numDecodes > 0) capped = Math.max(0, limit.maxChunk(shape, startPos));
    else return Infinity;
    const short = ctx.splitShortPrompts ? undefined : limit.shortPromptTokens;
    if (short === undefined) return capped;
    const prefill = shape.numTokens - shape.numDecodes;
    if (r.tokens.length <= short) return Math.max(capped, short - prefill);
    // Another tenant's first token rides in this step: a long prompt's chunk keeps the step's prefill within `short`.
    if (ctx.crowdFirstTokenSteps || !givesFirstToken(planned, r, short)) return capped;
    return Math.min(capped, Math.max(0, short - prefill));
  };

  /** Plans a running request's next tokens (its decode, or its prompt's next chunk) at most `limit`. */
  const serveRunning = (r: SchedRequest, limit: number, mayPreempt: boolean): void => {
    const table = runningTable(r);
    if (r.tokens.length > ctx.contextLength) {
      events.push(ctx.fail(r, refusal(ctx, r)));
      return;
    }
    const startPos = table.numComputed;
    const want = Math.min(r.tokens.length - startPos, budget, limit, rowLimit(r, startPos));
    if (want === 0) return;
    const n = mayPreempt ? fit(r, table, want) : grow(ctx, r, table, tokensThatFit(ctx, table, want));
    if (n > 0) {
      takeRows(r, startPos, n);
      planned.set(r, n);
      budget -= n;
      ctx.counters?.charge(r.tenant, n, r.state.kind === 'decoding' ? 'output' : 'input');
    }
  };

  // 1. Decodes, oldest first.
  for (const r of ctx.running.filter((x) => x.state.kind === 'decoding')) {
    if (ctx.running.includes(r)) serveRunning(r, Infinity, true);
  }

  // 1b. Drafts for those decodes, from the budget and pages left (never preempting: spec-plan.ts).
  if (ctx.speculation !== undefined) {
    drafts = planDrafts({
      speculation: ctx.speculation,
      decodes: ctx.running.filter((r) => planned.has(r) && r.state.kind === 'decoding'),
      numPrompting: ctx.running.filter((r) => r.state.kind !== 'decoding').length + ctx.waiting.size,
      contextLength: ctx.contextLength,
      budget,
      tableOf: runningTable,
      growUpTo: (r, want) => grow(ctx, r, runningTable(r), tokensThatFit(ctx, runningTable(r), want)),
    });
    for (const [r, draft] of drafts) {
      planned.set(r, 1 + draft.length);
      budget -= draft.length;
      ctx.counters?.charge(r.tenant, draft.length, 'output');
    }
  }

  // 2. Prompts' chunks and new requests, in the order next() gives.
  const visited = new Set<SchedRequest>();
  let admitting = true;
  let numStarted = 0;
  const admissionOpen = (): boolean =>
    admitting && preempted.length === 0 && budget > 0 && ctx.running.length + ctx.numReserved < ctx.maxRunningRequests;
  for (let c = next(ctx, visited, admissionOpen()); c !== undefined; c = next(ctx, visited, admissionOpen())) {
    const r = c.request;
    if (c.kind === 'chunk') {
      visited.add(r);
      // After a start in this step, a chunk takes what fits and preempts nothing (the victim
      // would be the request just started): a step never both starts and preempts.
      serveRunning(r, timeLimit(r, runningTable(r).numComputed), numStarted === 0);
      continue;
    }
    if (r.tokens.length > ctx.contextLength) {
      events.push(ctx.fail(r, refusal(ctx, r)));
      continue;
    }
    // Leave the last token out of the match: the first step must compute something, for logits.
    // A request wanting its prompt's log-probabilities matches nothing: every position's logits are wanted.
    const hit = ctx.pages.match(r, r.promptLogprobs ? [] : r.tokens.slice(0, -1));
    const table: PageTable = { tags: [...hit.tags], numComputed: hit.numTokens };
    const want = Math.min(
      r.tokens.length - table.numComputed,
      budget,
      timeLimit(r, table.numComputed),
      rowLimit(r, table.numComputed),
    );
    const n = tokensThatFit(ctx, table, want);
    if (n === 0) {
      ctx.pages.letGo(r, hit.tags);
      // No time left for this tenant's head: another tenant's head (a short prompt, which the
      // step budget does not split) may still start; no pages: nobody's (fault
      // `budget-closes-admission`, or first come first served: the step budget closes it too).
      if (want === 0 && ctx.counters !== undefined && !ctx.budgetClosesAdmission) visited.add(r);
      else admitting = false;
      continue;
    }
    if (ctx.counters === undefined) ctx.waiting.pop();
    else ctx.waiting.popOf(r.tenant);
    r.numCachedTokens = Math.min(hit.numTokens, r.numPromptTokens);
    ctx.start(r, table);
    visited.add(r);
    numStarted++;
    planned.set(r, grow(ctx, r, table, n));
    takeRows(r, table.numComputed, n);
    budget -= n;
    ctx.counters?.charge(r.tenant, n, 'input');
  }

  const items = ctx.running
    .filter((r) => planned.has(r))
    .map((r) => {
      const draft = drafts.get(r);
      return draft === undefined
        ? itemOf(ctx, r, planned.get(r) as number)
        : draftItemOf(r, runningTable(r), draft, ctx.pageSize);
    });
  return { items, preempted, events };
}

type Candidate =
  | { readonly kind: 'chunk'; readonly request: SchedRequest }
  | { readonly kind: 'start'; readonly request: SchedRequest };

/**
 * What gets tokens next. First come first served (no counters, or the fault `no-tenant-fairness`):
 * running prompts' chunks, oldest first, then the waiting queues' turn. Fair: per tenant, its
 * oldest unserved chunk, else its waiting head (FCFS within a tenant), and among tenants the
 * smallest virtual token counter (fair-share.ts).
 */
function next(ctx: PlanContext, visited: ReadonlySet<SchedRequest>, admissionOpen: boolean): Candidate | undefined {
  const chunks = ctx.running.filter((r) => r.state.kind === 'prefilling' && !visited.has(r));
  if (ctx.counters === undefined) {
    const chunk = chunks[0];
    if (chunk !== undefined) return { kind: 'chunk', request: chunk };
    const head = admissionOpen ? ctx.waiting.peek() : undefined;
    return head === undefined ? undefined : { kind: 'start', request: head };
  }
  const byTenant = new Map<TenantId, Candidate & FairCandidate>();
  chunks.forEach((r, order) => {
    if (byTenant.has(r.tenant)) return;
    const numTokensLeft = r.tokens.length - runningTable(r).numComputed;
    byTenant.set(r.tenant, { kind: 'chunk', request: r, tenant: r.tenant, numTokensLeft, order });
  });
  if (admissionOpen) {
    ctx.waiting.heads().forEach((r, turn) => {
      if (byTenant.has(r.tenant) || visited.has(r)) return;
      const order = ctx.running.length + turn;
      byTenant.set(r.tenant, { kind: 'start', request: r, tenant: r.tenant, numTokensLeft: r.tokens.length, order });
    });
  }
  return ctx.counters.pick([...byTenant.values()]);
}

/** Whether the step planned so far ends a short prompt (at most `short` tokens) of a tenant other than r's. */
function givesFirstToken(planned: ReadonlyMap<SchedRequest, number>, r: SchedRequest, short: number): boolean {
  for (const [q, n] of planned) {
    if (q.tenant === r.tenant || q.state.kind !== 'prefilling' || q.tokens.length > short) continue;
    if (runningTable(q).numComputed + n === q.tokens.length) return true;
  }
  return false;
}

/** The shape of the items planned so far (each reads from its table's numComputed). */
function shapeOf(planned: ReadonlyMap<SchedRequest, number>): StepShape {
  let numTokens = 0;
  let numPairs = 0;
  let numDecodes = 0;
  let numDecodePairs = 0;
  for (const [r, n] of planned) {
    const pairs = itemPairs(runningTable(r).numComputed, n);
    numTokens += n;
    numPairs += pairs;
    if (r.state.kind === 'decoding') {
      numDecodes += n;
      numDecodePairs += pairs;
    }
  }
  return { numTokens, numPairs, numDecodes, numDecodePairs };
}

export function runningTable(r: SchedRequest): PageTable {
  switch (r.state.kind) {
    case 'prefilling':
    case 'decoding':
      return r.state.table;
    case 'waiting':
    case 'receiving':
    case 'held':
    case 'ending':
      throw new InvariantError(`${r.rid} is ${r.state.kind}, not running`);
    default:
      return assertNever(r.state, 'request state');
  }
}

/** How many of `want` tokens the table can take now: all, or as many as the pages that could be had hold. */
function tokensThatFit(ctx: PlanContext, table: PageTable, want: number): number {
  const need = pagesToGrow(table, want, ctx.pageSize);
  if (need === 0) return want;
  const available = ctx.pages.available(need);
  if (available >= need) return want;
  return Math.max(0, Math.min(want, (table.tags.length + available) * ctx.pageSize - table.numComputed));
}

function grow(ctx: PlanContext, r: SchedRequest, table: PageTable, numTokens: number): number {
  const need = pagesToGrow(table, numTokens, ctx.pageSize);
  if (need > 0) {
    const tags = ctx.pages.allocate(need, r);
    assert(tags !== undefined, () => `${r.rid}: ${need} page(s) were available a moment ago`);
    table.tags.push(...tags);
  }
  return numTokens;
}

function itemOf(ctx: PlanContext, r: SchedRequest, numTokens: number): BatchItem {
  const table = runningTable(r);
  const startPos = table.numComputed;
  const end = startPos + numTokens;
  assert(
    table.tags.length === pagesFor(end, ctx.pageSize) ||
      (r.draft !== undefined && table.tags.length > pagesFor(end, ctx.pageSize)), // spare pages of rejected drafts
    () => `${r.rid}: ${table.tags.length} pages for ${end} positions`,
  );
  const promptRows = wantsPromptRows(r, startPos);
  return {
    rid: r.rid,
    tenant: r.tenant,
    tokens: r.tokens.slice(startPos, end),
    startPos,
    tags: [...table.tags],
    wantLogits: promptRows || end === r.tokens.length,
    ...(promptRows ? { logitCount: numTokens, promptRows: true } : {}),
    ...(r.embed && end === r.tokens.length ? { hiddenOut: true } : {}),
    ...(r.adapter === undefined ? {} : { adapter: r.adapter }),
  };
}

/**
 * A chunk of a request with promptLogprobs that starts before its prompt's last position wants a
 * logits row per token: row p gives prompt token p + 1's log-probability (the last, at the
 * prompt's end, samples the first output token). Recomputation after preemption asks again.
 */
function wantsPromptRows(r: SchedRequest, startPos: number): boolean {
  return r.promptLogprobs && startPos < r.numPromptTokens - 1;
}

/**
 * A backstop's error: the refusal admission would have given this request, had it run (the one
 * rule, pages/admission.ts); an invariant error if even that would have accepted it.
 */
function refusal(ctx: PlanContext, r: SchedRequest): TesseraError {
  const limits = { contextLength: ctx.contextLength, pageSize: ctx.pageSize, numPages: ctx.pages.numPages };
  return (
    admissionError(limits, ctx.role, r.numPromptTokens, r.maxTokens) ??
    new InvariantError(`${r.rid} cannot run on this node, yet admission would accept it`)
  );
}
