// The scheduler's bookkeeping checked against the ledger and the stamps, as a pure function of
// a snapshot, so the rules read in one place. Tests run it after every step; a worker may run it
// when idle. O(numPages + pages held by requests).
// Owns: the list of invariants between scheduler and pages. Must never repair anything: a broken
// invariant is a bug, it throws InvariantError.
//
//  - Every page a request's table names is allocated to it, or cached for its tenant and
//    referenced by it, in the tag's epoch; no page is allocated to two requests; cached pages
//    come only at the front of a table (a prefix hit), never after a page the request writes.
//  - Every allocated page of the ledger belongs to a live request of this scheduler, every
//    quarantined page to a quarantine record, every reader of a cached page reads it through its
//    table: no page leaks, none is held twice.
//  - Waiting requests hold no page; the running set is exactly the prefilling and decoding
//    requests; the waiting queues are exactly the waiting requests; the running limit holds.
//  - Every position a request counts as computed is covered by a stamp of its page's epoch; a
//    table has exactly the pages its computed positions need between steps (a speculating decode
//    may keep spare pages that only rejected drafts filled).
//  - Between steps no stamp of a running request's own page covers a position it does not count
//    as computed: a speculative step's rejected positions were rolled back (fault
//    keep-rejected-stamps breaks exactly this).
import { assert, assertNever, type BatchItem, type RequestId, type Tag } from '../core/index.js';
import { describeEntry, pagesFor, type Owner, type PagePool, type PrefixCache } from '../pages/index.js';
import { numComputedOf, slotsOfPage, tagsOf, type SchedRequest } from './request-state.js';

export interface QuarantineRecord {
  readonly owner: Owner;
  readonly tags: readonly Tag[];
}

export interface SchedulerSnapshot {
  readonly pool: PagePool;
  readonly prefixCache: PrefixCache | undefined;
  readonly maxRunningRequests: number;
  readonly requests: ReadonlyMap<RequestId, SchedRequest>;
  readonly running: readonly SchedRequest[];
  readonly waiting: readonly SchedRequest[];
  readonly quarantined: ReadonlyMap<RequestId, QuarantineRecord>;
  readonly inFlight: ReadonlyMap<RequestId, BatchItem> | undefined;
}

export function checkSchedulerIntegrity(s: SchedulerSnapshot): void {
  s.pool.checkIntegrity();
  s.prefixCache?.checkIntegrity();
  const ledger = s.pool.ledger;
  const pageSize = s.pool.pageSize;
  /** page -> the rid whose own (allocated or quarantined) page it is. */
  const owners = new Map<number, RequestId>();
  /** page -> the rids reading it as a cached page. */
  const readers = new Map<number, RequestId[]>();

  const claimOwn = (who: Owner, tag: Tag, state: 'allocated' | 'quarantined'): void => {
    const e = ledger.entry(tag.page);
    assert(
      e.state === state && e.rid === who.rid && e.tenant === who.tenant && e.epoch === tag.epoch,
      () => `${who.rid} holds page ${tag.page} (epoch ${tag.epoch}) as ${state}, but it is ${describeEntry(e)}`,
    );
    assert(!owners.has(tag.page), () => `page ${tag.page} is held by both ${owners.get(tag.page)} and ${who.rid}`);
    owners.set(tag.page, who.rid);
  };

  for (const [rid, r] of s.requests) {
    assert(r.rid === rid, () => `request ${r.rid} is filed under ${rid}`);
    assert(
      r.tokens.length <= r.numPromptTokens + r.maxTokens,
      () => `${rid} has ${r.tokens.length} tokens, more than prompt + max_tokens`,
    );
    const inStep = s.inFlight?.has(rid) === true;
    let seenOwnPage = false;
    for (const tag of tagsOf(r.state)) {
      const e = ledger.entry(tag.page);
      if (e.state === 'cached') {
        assert(!seenOwnPage, () => `${rid} reads cached page ${tag.page} after a page of its own`);
        assert(
          e.tenant === r.tenant && e.epoch === tag.epoch && e.readers.includes(rid),
          () =>
            `${rid} (tenant ${r.tenant}) reads page ${tag.page} (epoch ${tag.epoch}), but it is ${describeEntry(e)}`,
        );
        const list = readers.get(tag.page) ?? [];
        assert(!list.includes(rid), () => `${rid} lists page ${tag.page} twice`);
        readers.set(tag.page, [...list, rid]);
      } else {
        seenOwnPage = true;
        claimOwn(r, tag, 'allocated');
      }
    }
    checkState(s, r, inStep, pageSize);
  }
  for (const [rid, q] of s.quarantined) {
    assert(
      q.owner.rid === rid && !s.requests.has(rid),
      () => `quarantine record ${rid} is misfiled or the request still lives`,
    );
    for (const tag of q.tags) claimOwn(q.owner, tag, 'quarantined');
  }
  for (let page = 0; page < ledger.numPages; page++) {
    const e = ledger.entry(page as Tag['page']);
    switch (e.state) {
      case 'free':
        break;
      case 'allocated':
      case 'quarantined':
        assert(
          owners.get(page) === e.rid,
          () => `page ${page} is ${describeEntry(e)}, but no request of this scheduler holds it (a leak)`,
        );
        break;
      case 'cached': {
        const list = readers.get(page) ?? [];
        assert(
          list.length === e.readers.length,
          () => `page ${page} is ${describeEntry(e)}, but ${list.length} request table(s) read it`,
        );
        break;
      }
      default:
        assertNever(e, 'page entry');
    }
  }
  checkSets(s);
}

/** Per state: what the request's table must look like, and that its computed positions are stamped. */
function checkState(s: SchedulerSnapshot, r: SchedRequest, inStep: boolean, pageSize: number): void {
  const state = r.state;
  const numComputed = numComputedOf(state);
  const tags = tagsOf(state);
  switch (state.kind) {
    case 'waiting':
      assert(tags.length === 0, () => `waiting ${r.rid} holds pages`);
      assert(!inStep, () => `waiting ${r.rid} is in the step being run`);
      return;
    case 'receiving':
      assert(
        tags.length === pagesFor(r.numPromptTokens, pageSize),
        () => `receiving ${r.rid} holds ${tags.length} pages for ${r.numPromptTokens} prompt tokens`,
      );
      assert(!inStep, () => `receiving ${r.rid} is in the step being run`);
      return; // a peer is writing: nothing is computed yet, nothing is read
    case 'prefilling':
      assert(numComputed < r.tokens.length, () => `prefilling ${r.rid} has computed all its ${r.tokens.length} tokens`);
      break;
    case 'decoding':
      assert(
        numComputed === r.tokens.length - 1,
        () => `decoding ${r.rid} computed ${numComputed} of ${r.tokens.length} tokens`,
      );
      break;
    case 'held':
      assert(
        numComputed === r.numPromptTokens && r.tokens.length === r.numPromptTokens,
        () => `held ${r.rid} computed ${numComputed} of ${r.numPromptTokens} prompt tokens`,
      );
      assert(!inStep, () => `held ${r.rid} is in the step being run`);
      break;
    case 'ending':
      assert(inStep, () => `ending ${r.rid} is not in the step being run`);
      break;
    default:
      assertNever(state, 'request state');
  }
  const needed = pagesFor(numComputed, pageSize);
  const spares = !inStep && state.kind === 'decoding' && r.draft !== undefined; // pages of rejected drafts
  assert(
    inStep || spares ? tags.length >= needed : tags.length === needed,
    () => `${r.rid} (${state.kind}) holds ${tags.length} pages for ${numComputed} computed positions`,
  );
  if (!inStep && (state.kind === 'prefilling' || state.kind === 'decoding')) {
    for (let i = 0; i < tags.length; i++) {
      const tag = tags[i] as Tag;
      const slots = slotsOfPage(i, numComputed, pageSize);
      assert(
        slots === pageSize || !s.pool.isWritten(tag, slots + 1),
        () =>
          `${r.rid} counts ${slots} slot(s) of page ${tag.page} (epoch ${tag.epoch}) as computed, ` +
          `but its stamp covers more: ${JSON.stringify(s.pool.stampOf(tag.page))} (rejected drafts not rolled back?)`,
      );
    }
  }
  for (let i = 0; i < needed; i++) {
    const tag = tags[i] as Tag;
    const slots = slotsOfPage(i, numComputed, pageSize);
    assert(
      s.pool.isWritten(tag, slots),
      () =>
        `${r.rid} counts ${slots} slot(s) of page ${tag.page} (epoch ${tag.epoch}) as computed, but its stamp is ${JSON.stringify(s.pool.stampOf(tag.page))}`,
    );
  }
}

function checkSets(s: SchedulerSnapshot): void {
  const running = new Set(s.running);
  assert(running.size === s.running.length, 'a request is in the running set twice');
  let numRunning = 0;
  let numReceiving = 0;
  let numWaiting = 0;
  for (const r of s.requests.values()) {
    const kind = r.state.kind;
    if (kind === 'prefilling' || kind === 'decoding') numRunning++;
    if (kind === 'receiving') numReceiving++;
    if (kind === 'waiting') numWaiting++;
    assert(
      running.has(r) === (kind === 'prefilling' || kind === 'decoding'),
      () => `${r.rid} is ${kind} but ${running.has(r) ? 'is' : 'is not'} in the running set`,
    );
  }
  assert(
    numRunning === s.running.length,
    () => `running set holds ${s.running.length}, ${numRunning} requests are running`,
  );
  assert(
    numRunning + numReceiving <= s.maxRunningRequests,
    () => `${numRunning} running + ${numReceiving} receiving requests, the limit is ${s.maxRunningRequests}`,
  );
  assert(s.waiting.length === numWaiting, () => `queues hold ${s.waiting.length} requests, ${numWaiting} are waiting`);
  for (const r of s.waiting)
    assert(s.requests.get(r.rid) === r && r.state.kind === 'waiting', () => `queued ${r.rid} is not a waiting request`);
  for (const rid of s.inFlight?.keys() ?? []) {
    const kind = s.requests.get(rid)?.state.kind;
    assert(
      kind === 'prefilling' || kind === 'decoding' || kind === 'ending',
      () => `${rid} is in the step being run but is ${kind ?? 'gone'}`,
    );
  }
}
