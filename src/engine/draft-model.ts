// Speculative decoding with a draft model (--draft-model): a smaller model of the same vocabulary
// drafts each speculating decode's next k tokens greedily, before the step that verifies them.
// Owns: the draft model's runner and its pool (its own ledger, pages, epochs and stamps), one
// sequence per drafting request (its draft-pool page table and the positions the draft computed),
// the draft passes, the rollback of draft positions the target rejected, and the draft pool's
// integrity check.
// Must never: touch the target's pool; offer a draft for any text but the request's as it is now
// (DraftState.offer carries the length it continues); let a position the target rejected stay
// stamped in the draft pool (fault `keep-draft-model-stamps`); keep pages of
// a request that no longer decodes past the next prepare().
//
// The draft is greedy: a point mass on the small model's argmax, so the target's verifier
// (spec-verify.ts) keeps the target's distribution exactly and greedy and seeded requests give
// the same tokens as without speculation.
//
// Life of one step (engine-loop.ts: prepare() before schedule(), settle() after verification):
//   1. prepare: the decoding requests (scheduler.decodingDrafts; none when more than maxBatch
//      requests run or wait); for each whose DraftState wants k >= 1 tokens, with L its real tokens (a decode
//      node's prompt ids are placeholders: the draft sees its output only, at positions from 0):
//        catch-up   feed tokens[computed, L): the whole prompt the first time (the draft's
//                   prefill, in chunks), afterwards the token the last step sampled and at most
//                   one accepted draft the draft never fed; the last row's argmax is d1. While
//                   the draft model is unproven (no evidence yet, or a probe after a pause) a
//                   new sequence is a window: the last PROBE_WINDOW real tokens at positions
//                   from 0 (L counts from its base); once the node's acceptance beats the cost
//                   ratio, a window is dropped and reopened on the whole text. So a draft model
//                   that does not pay never runs over a whole prompt again.
//        drafting   k - 1 passes of one token each: d_j at position L - 1 + j gives d_(j+1)
//      every sequence rides in the same batch of each pass; the offer [d1..dk] goes to its DraftState
//   2. the scheduler plans the verification from the offer (spec-plan.ts: maybe fewer drafts)
//   3. settle: the target accepted d1..dm; the draft keeps positions [0, L + min(m, k - 1))
//      (the fed token t and the accepted drafts it fed) and rolls back the rest it wrote
//   4. a request no longer decoding gives its draft pages back at the next prepare
//
//   draft pool, one request:  ... t  d1  d2  d3 |          (k = 4: d4 never fed)
//   positions:                L-1  L   L+1 L+2
//   target accepted d1 (m=1): keep [0, L+1), roll back [L+1, L+3)
import { argmax } from './sampler.js';
import { type ItemResult } from './runner.js';
import type { BatchItem, FaultSet, RequestId, Tag } from '../core/index.js';
import { assert } from '../core/index.js';
import { pagesFor, type PagePool } from '../pages/index.js';
import {
  bestDraftLength,
  DEFAULT_SPEC,
  perTokenAcceptance,
  type DraftCandidate,
  type Scheduler,
  type StepResult,
} from '../scheduler/index.js';

/** The draft model's runner (src/engine's ModelRunner, structurally). */
export interface DraftRunner {
  readonly pool: PagePool;
  readonly maxStepTokens: number;
  readonly maxStepLogits: number;
  readonly maxPositions: number;
  step(items: readonly BatchItem[]): Promise<ItemResult[]>;
}

export interface DraftModelOptions {
  readonly runner: DraftRunner;
  /** Most decodes in a step for which it drafts (SpecOptions.maxBatch). */
  readonly maxBatch: number;
  /** Most drafts a step verifies (SpecOptions.maxDraft; DEFAULT_SPEC's by default): the longest draft the judge weighs. */
  readonly maxDraft?: number;
  readonly faults: FaultSet;
  /**
   * A fixed cost ratio instead of the measured one (tests: a run that does not depend on timing);
   * with it the judge weighs the verify steps only by `verifyCost`, and without that not at all.
   */
  readonly costRatio?: number;
  /** A fixed C(k) instead of the scheduler's measured fit (tests). */
  readonly verifyCost?: (k: number) => number;
  /** Real tokens an unproven draft model catches a new sequence up on (PROBE_WINDOW by default). */
  readonly probeWindow?: number;
  /**
   * The tokens of a restricted head (draft-head.ts: the runner's logit row i is token
   * headTokens[i]'s); absent: the whole vocabulary.
   */
  readonly headTokens?: Int32Array;
}

/** The draft model's counts for /health. */
export interface DraftModelStats {
  readonly numSequences: number;
  readonly numPagesHeld: number;
  readonly numPages: number;
  /** Draft model passes run, and the draft positions rolled back after verification. */
  readonly numPasses: number;
  readonly numRolledBack: number;
  /** What one drafted token costs against a plain target step, as measured (the acceptance a draft must beat); null before any. */
  readonly costRatio: number | null;
  /** Times the node's acceptance fell below the cost ratio and the draft model paused, and whether it is paused now. */
  readonly numPauses: number;
  readonly paused: boolean;
  /** Real tokens fed to the draft model to catch its sequences up (prompts included). */
  readonly numCaughtUp: number;
  /** Whether the node's acceptance has beaten the cost ratio since the last pause (sequences then see the whole text). */
  readonly proven: boolean;
  /** Tokens its head covers (--draft-vocab: draft-head.ts); null: the whole vocabulary. */
  readonly headTokens: number | null;
}

interface Sequence {
  readonly owner: DraftCandidate;
  readonly tags: Tag[];
  /** Real tokens before the draft's position 0 (a window: the draft never saw them); 0: the whole text. */
  readonly base: number;
  /** Draft positions whose K/V is the request's real text (stamped, never rolled back). */
  computed: number;
  /** This step's offer: the real length L it continues and the positions it wrote, [computed, writtenEnd). */
  offered: { readonly atLength: number; readonly numDrafts: number; readonly writtenEnd: number } | undefined;
}

/** Decay of the measured costs and of the node's acceptance per step. */
const COST_DECAY = 0.8;
/** Decayed drafted tokens before the node's acceptance may pause the draft model. */
// (Under 1 / (1 - COST_DECAY) = 5, which one rejected draft a step tends to: scheduler/spec-lookup.ts.)
const MIN_EVIDENCE = 3;
const FIRST_PAUSE_STEPS = 32;
const MAX_PAUSE_STEPS = 4096;
/**
 * The real tokens an unproven draft model (no evidence yet, or probing after a pause) catches a
 * new sequence up on: the last 32, at draft positions from 0. A whole 256-token prompt through
 * m100's first 2 layers cost about as much as 10 target steps, paid by every probe of a new
 * request (bench:spec quote, draft model 0.82-0.88x at 0% accepted); a window costs about one.
 */
const PROBE_WINDOW = 32;

export class DraftModel {
  readonly #o: DraftModelOptions;
  readonly #seqs = new Map<RequestId, Sequence>();
  #numPasses = 0;
  #numRolledBack = 0;
  /** Decayed draft ms per drafted token and target step ms. */
  #draftMsPerToken: number | undefined;
  #stepMs: number | undefined;
  #lastDraftMs = 0;
  #lastNumDrafted = 0;
  /**
   * A plain decode step's ms by the scheduler's fit, read at each prepare: the cost ratio's
   * denominator. The step that verified the drafts feeds k + 1 rows (1.7-2.6 plain steps on the
   * 1B, bench:spec-step); dividing by it understated the draft's cost by that much (bench:spec,
   * 1B: a ratio of 0.07 while the draft passes took 21-36% of the decode time).
   */
  #plainStepMs: number | undefined;
  /**
   * Whether the last prepare fed at most 2 real tokens per sequence (the sampled token and an
   * accepted draft): its time is what drafting costs from step to step. A prepare that first
   * caught a sequence up on a whole prompt (a new request, a probe after a pause) is a one-off
   * prefill: counted in the cost ratio it made a 256-token prompt's drafts look 3-4 target steps
   * each on m100 (bench:spec quote), so no acceptance could ever pay for them again.
   */
  #lastSteady = true;
  /** The node's decayed drafted and accepted tokens and per-token trials (spec-lookup.ts), and the pause they may call. */
  #decayedDrafted = 0;
  #decayedAccepted = 0;
  #decayedTrials = 0;
  /** C(k), a step verifying k drafts against a plain one (the scheduler's fit), read at each prepare. */
  #verifyCost: ((k: number) => number | undefined) | undefined;
  #pauseLeft = 0;
  #nextPause = FIRST_PAUSE_STEPS;
  #numPauses = 0;
  /** The first judged step after a pause: it alone decides whether the draft model stays on. */
  #probing = false;
  /** The node's acceptance beat the cost ratio since the last pause: new sequences see the whole text. */
  #proven = false;
  #numCaughtUp = 0;

  constructor(options: DraftModelOptions) {
    this.#o = options;
    this.#verifyCost = options.verifyCost;
  }

  get stats(): DraftModelStats {
    let numPagesHeld = 0;
    for (const s of this.#seqs.values()) numPagesHeld += s.tags.length;
    return {
      numSequences: this.#seqs.size,
      numPagesHeld,
      numPages: this.#o.runner.pool.kv.numPages,
      numPasses: this.#numPasses,
      numRolledBack: this.#numRolledBack,
      costRatio: this.#costRatio() ?? null,
      numPauses: this.#numPauses,
      paused: this.#pauseLeft > 0,
      numCaughtUp: this.#numCaughtUp,
      proven: this.#proven,
      headTokens: this.#o.headTokens?.length ?? null,
    };
  }

  /** Pages back from every request that no longer decodes (before each prepare, and when the loop goes idle). */
  sweep(scheduler: Scheduler): void {
    const live = new Set<RequestId>();
    for (const r of scheduler.decodingDrafts.drafting) if (r.draft.byModel) live.add(r.rid);
    for (const [rid, s] of this.#seqs) if (!live.has(rid)) this.#release(s);
  }

  /** Step 1: drafts for the decodes the next plan will see (and pages back from those that ended). */
  async prepare(scheduler: Scheduler, now: () => number): Promise<void> {
    this.sweep(scheduler);
    this.#plainStepMs = scheduler.plainStepMs;
    if (this.#o.costRatio === undefined) this.#verifyCost = (k) => scheduler.verifyCostRatio(k);
    const { numDecoding, drafting } = scheduler.decodingDrafts;
    this.#lastNumDrafted = 0;
    if (this.#pauseLeft > 0) {
      this.#pauseLeft--;
      this.#probing = this.#pauseLeft === 0;
      return;
    }
    // Prompts in flight count as spec-plan.ts counts them: the plan would take none of the drafts.
    if (numDecoding > this.#o.maxBatch || scheduler.numRunning + scheduler.numWaiting > this.#o.maxBatch) return;
    const started = now();
    const ratio = this.#costRatio();
    const work: { seq: Sequence; real: readonly number[]; k: number; drafts: number[] }[] = [];
    for (const r of drafting) {
      const k = r.draft.byModel ? r.draft.draftLength : 0;
      if (ratio !== undefined && r.draft.byModel) r.draft.setMinAcceptance(ratio);
      if (k === 0) continue;
      let seq = this.#seqs.get(r.rid);
      // A window opened while unproven gives way to the whole text once the draft model pays.
      if (seq !== undefined && seq.base > 0 && this.#proven) {
        this.#release(seq);
        seq = undefined;
      }
      const numReal = r.tokens.length - r.draft.from;
      seq ??= this.#open(r, this.#proven ? 0 : Math.max(0, numReal - (this.#o.probeWindow ?? PROBE_WINDOW)));
      const real = r.tokens.slice(r.draft.from + seq.base);
      // The draft's positions: the real tokens, then k - 1 fed drafts; within its context.
      const limit = Math.min(k, r.maxTokens - (r.tokens.length - r.numPromptTokens) - 1);
      if (
        limit <= 0 ||
        real.length - 1 + limit > this.#o.runner.maxPositions ||
        !this.#grow(seq, real.length + limit - 1)
      )
        continue;
      work.push({ seq, real, k: limit, drafts: [] });
    }
    if (work.length === 0) return;
    this.#lastSteady = work.every((w) => w.real.length - w.seq.computed <= 2);
    await this.#catchUp(work);
    for (let j = 1; work.some((w) => w.drafts.length > 0 && w.drafts.length < w.k); j++) {
      const active = work.filter((w) => w.drafts.length === j && j < w.k);
      const items = active.map((w) => this.#item(w.seq, [w.drafts[j - 1] as number], w.real.length - 1 + j));
      const outputs = await this.#step(items);
      active.forEach((w, i) => this.#take(w, outputs[i]));
    }
    let numDrafted = 0;
    for (const w of work) {
      if (w.drafts.length === 0) continue; // its pass failed a page check: no offer, its positions roll back
      w.seq.owner.draft.offer(w.seq.owner.tokens.length, w.drafts);
      numDrafted += w.drafts.length;
    }
    this.#lastDraftMs = now() - started;
    this.#lastNumDrafted = numDrafted;
  }

  /** Step 3: after verification, before complete(): keep what the target accepted, roll back the rest. */
  settle(items: readonly BatchItem[], results: readonly StepResult[], stepMs: number | undefined): void {
    // A prefill-like catch-up's time is counted only while there is no steady measurement yet.
    if (this.#lastNumDrafted > 0 && stepMs !== undefined && (this.#lastSteady || this.#draftMsPerToken === undefined)) {
      this.#draftMsPerToken = decayed(this.#draftMsPerToken, this.#lastDraftMs / this.#lastNumDrafted);
      this.#stepMs = decayed(this.#stepMs, this.#plainStepMs ?? stepMs);
    }
    let numAccepted = 0;
    let numTrials = 0;
    const accepted = new Map<RequestId, number>();
    items.forEach((item, i) => {
      const result = results[i];
      if (item.verifiesDrafts !== true || result?.kind !== 'sampled') return;
      const m = result.drafts?.accepted.length ?? 0;
      accepted.set(item.rid, m);
      numTrials += m + (m < item.tokens.length - 1 ? 1 : 0);
    });
    for (const seq of this.#seqs.values()) {
      const offered = seq.offered;
      if (offered === undefined) continue;
      seq.offered = undefined;
      // t (position L - 1) is real whatever happened; the accepted drafts the draft fed are too.
      const m = accepted.get(seq.owner.rid) ?? 0;
      numAccepted += m;
      const kept = Math.min(offered.atLength + Math.min(m, offered.numDrafts - 1), offered.writtenEnd);
      if (kept < offered.writtenEnd) {
        this.#numRolledBack += offered.writtenEnd - kept;
        if (!this.#o.faults.has('keep-draft-model-stamps'))
          this.#o.runner.pool.rollbackStamps(seq.tags, kept, offered.writtenEnd);
      }
      seq.computed = kept;
    }
    this.#judge(numAccepted, numTrials);
  }

  /**
   * Off when it does not pay: a step verifying k drafted tokens costs C(k) plain steps (the
   * scheduler's measured fit) plus k draft tokens at costRatio each, and yields E(k) = 1 + a + ...
   * + a^k tokens at the node's per-token acceptance a; the draft model pays while some k up to
   * maxDraft beats plain decoding (spec-cost.ts's bestDraftLength; before C is fitted: while a
   * beats the cost ratio). When it does not it pauses for a number of steps that doubles each
   * time (32 ... 4096), then tries again; the sequences keep their pages (a request that ends gives
   * them back), so a probe after the pause catches up on the pause's tokens, not on the whole text.
   * It pauses before the evidence threshold too when even an optimistic acceptance, one more
   * accepted trial than seen, would not pay: on m100 (a draft at 0.65 of a target step per
   * token needs about 95% accepted) the first step's rejected drafts end the trial at once.
   */
  #judge(numAccepted: number, numTrials: number): void {
    if (this.#lastNumDrafted === 0) return;
    this.#decayedDrafted = this.#decayedDrafted * COST_DECAY + this.#lastNumDrafted;
    this.#decayedAccepted = this.#decayedAccepted * COST_DECAY + numAccepted;
    this.#decayedTrials = this.#decayedTrials * COST_DECAY + numTrials;
    this.#lastNumDrafted = 0;
    const ratio = this.#costRatio();
    // A probe after a pause that drafted nothing acceptable pauses again at once (twice as long).
    const failedProbe = this.#probing && numAccepted === 0;
    this.#probing = false;
    if (!failedProbe && ratio === undefined) return;
    const optimistic = (this.#decayedAccepted + 1) / (this.#decayedTrials + 1);
    const hopeless = ratio !== undefined && !this.#pays(optimistic, ratio);
    if (!failedProbe && !hopeless && this.#decayedDrafted < MIN_EVIDENCE) return;
    if (
      !failedProbe &&
      !hopeless &&
      this.#pays(perTokenAcceptance(this.#decayedAccepted, this.#decayedTrials), ratio)
    ) {
      this.#nextPause = FIRST_PAUSE_STEPS;
      this.#proven = true;
      return;
    }
    this.#proven = false;
    this.#pauseLeft = this.#nextPause;
    this.#nextPause = Math.min(MAX_PAUSE_STEPS, 2 * this.#nextPause);
    this.#numPauses++;
    this.#decayedDrafted = 0;
    this.#decayedAccepted = 0;
    this.#decayedTrials = 0;
  }

  /** Whether drafting at per-token acceptance `a` beats plain decoding at a draft cost of `ratio` target steps per token. */
  #pays(a: number, ratio: number | undefined): boolean {
    if (ratio === undefined) return true;
    const cost = this.#verifyCost;
    if (cost === undefined || cost(1) === undefined) return a >= ratio;
    return bestDraftLength(a, this.#o.maxDraft ?? DEFAULT_SPEC.maxDraft, (k) => cost(k) ?? 1, ratio) > 0;
  }

  /** The draft pool: the ledger's invariants, every held page a sequence's, no stamp past what a sequence computed. */
  checkIntegrity(): void {
    const pool = this.#o.runner.pool;
    pool.ledger.checkIntegrity();
    let numHeld = 0;
    for (const s of this.#seqs.values()) {
      numHeld += s.tags.length;
      s.tags.forEach((tag, p) => {
        const entry = pool.ledger.entry(tag.page);
        assert(
          entry.state === 'allocated' && entry.epoch === tag.epoch && entry.rid === s.owner.rid,
          () => `draft pool: page ${tag.page} of ${s.owner.rid} is not its allocation in epoch ${tag.epoch}`,
        );
        if (s.offered !== undefined) return; // mid-step: the offer's positions are stamped until settle()
        const want = Math.max(0, Math.min(pool.pageSize, s.computed - p * pool.pageSize));
        const stamp = pool.stampOf(tag.page);
        const filled = stamp.epoch === tag.epoch ? stamp.filledSlots : 0;
        assert(
          filled === want,
          () =>
            `draft pool: page ${tag.page} of ${s.owner.rid} is stamped with ${filled} slots, its ` +
            `computed positions fill ${want} (rejected drafts not rolled back?)`,
        );
      });
    }
    const counts = pool.ledger.counts();
    assert(
      counts.allocated === numHeld,
      () => `draft pool: ${counts.allocated} pages allocated, the sequences hold ${numHeld}`,
    );
  }

  /** Every sequence's pages back (the worker closes). */
  releaseAll(): void {
    for (const s of this.#seqs.values()) this.#release(s);
  }

  #costRatio(): number | undefined {
    if (this.#o.costRatio !== undefined) return this.#o.costRatio;
    return this.#draftMsPerToken === undefined || this.#stepMs === undefined || this.#stepMs <= 0
      ? undefined
      : this.#draftMsPerToken / this.#stepMs;
  }

  /** Catch-up passes: each sequence's real tokens not yet in the draft pool, in chunks; the last row gives d1. */
  async #catchUp(work: { seq: Sequence; real: readonly number[]; k: number; drafts: number[] }[]): Promise<void> {
    const { maxStepTokens, maxStepLogits } = this.#o.runner;
    for (const w of work) {
      // A request the last step did not run has every real token in the draft pool already: its
      // last one is fed again (rolled back first), for the row that gives d1.
      const last = w.real.length - 1;
      if (w.seq.computed > last) {
        this.#o.runner.pool.rollbackStamps(w.seq.tags, last, w.seq.computed);
        w.seq.computed = last;
      }
    }
    let pending = [...work];
    while (pending.length > 0) {
      const batch: { w: (typeof work)[number]; item: BatchItem; last: boolean }[] = [];
      let room = maxStepTokens;
      for (const w of pending) {
        if (room === 0 || batch.length === maxStepLogits) break;
        const start = w.seq.computed;
        const n = Math.min(room, w.real.length - start);
        room -= n;
        const last = start + n === w.real.length;
        batch.push({ w, item: this.#item(w.seq, w.real.slice(start, start + n), start, last), last });
      }
      const outputs = await this.#step(batch.map((b) => b.item));
      batch.forEach((b, i) => {
        const out = outputs[i];
        if (out?.kind === 'failed') {
          b.w.k = 0; // nothing was written: no draft this step
          return;
        }
        b.w.seq.computed += b.item.tokens.length;
        this.#numCaughtUp += b.item.tokens.length;
        if (b.last) this.#take(b.w, out);
      });
      pending = pending.filter((w) => w.k > 0 && w.seq.computed < w.real.length);
    }
  }

  /** A drafted token from a pass's last row; the positions the offer wrote grow with each fed token. */
  #take(w: { seq: Sequence; k: number; drafts: number[] }, out: ItemResult | undefined): void {
    if (out?.kind !== 'logits') {
      w.k = w.drafts.length; // a failed pass: the offer stops here
      return;
    }
    const best = argmax(out.logits.subarray(0, out.logits.length / out.rows));
    w.drafts.push(this.#o.headTokens === undefined ? best : (this.#o.headTokens[best] as number));
    const atLength = w.seq.owner.tokens.length - w.seq.owner.draft.from - w.seq.base;
    w.seq.offered = { atLength, numDrafts: w.drafts.length, writtenEnd: atLength + w.drafts.length - 1 };
  }

  #item(seq: Sequence, tokens: readonly number[], startPos: number, wantLogits = true): BatchItem {
    return {
      rid: seq.owner.rid,
      tenant: seq.owner.tenant,
      tokens,
      startPos,
      tags: seq.tags.slice(0, pagesFor(startPos + tokens.length, this.#o.runner.pool.pageSize)),
      wantLogits,
    };
  }

  async #step(items: readonly BatchItem[]): Promise<ItemResult[]> {
    this.#numPasses++;
    return this.#o.runner.step(items);
  }

  #open(owner: DraftCandidate, base: number): Sequence {
    const seq: Sequence = { owner, tags: [], base, computed: 0, offered: undefined };
    this.#seqs.set(owner.rid, seq);
    return seq;
  }

  /** Pages for `numPositions` draft positions; false when the draft pool has none left (no draft, nobody preempted). */
  #grow(seq: Sequence, numPositions: number): boolean {
    const need = pagesFor(numPositions, this.#o.runner.pool.pageSize) - seq.tags.length;
    if (need <= 0) return true;
    const got = this.#o.runner.pool.ledger.allocate(need, seq.owner);
    if (got.kind !== 'allocated') return false;
    seq.tags.push(...got.tags);
    return true;
  }

  #release(seq: Sequence): void {
    if (seq.tags.length > 0) this.#o.runner.pool.ledger.free(seq.tags, seq.owner);
    this.#seqs.delete(seq.owner.rid);
  }
}

function decayed(previous: number | undefined, sample: number): number {
  return previous === undefined ? sample : previous * COST_DECAY + sample * (1 - COST_DECAY);
}
