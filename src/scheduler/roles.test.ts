import { describe, expect, it } from 'vitest';
import { asRequestId, FaultSet, NO_FAULTS, type Tag } from '../core/index.js';
import { SchedulerHarness } from '../../test/sim/scheduler-runner.js';

const rid = asRequestId;
const range = (start: number, n: number): number[] => Array.from({ length: n }, (_, i) => start + i);
const brief = (h: SchedulerHarness): string[] =>
  h.step().plan.items.map((i) => `${i.rid}@${i.startPos}+${i.tokens.length}${i.wantLogits ? '!' : ''}`);

describe('prefill role', () => {
  it('prefills in chunks, samples the first token, then holds the pages (no decode) until release', () => {
    const h = new SchedulerHarness({ role: 'prefill', chunkedPrefillSize: 4 });
    h.admit('a', 't1', range(100, 10), 50);
    expect([brief(h), brief(h), brief(h)]).toEqual([['a@0+4'], ['a@4+4'], ['a@8+2!']]);
    const prefilled = h.ended.get(rid('a'));
    expect(prefilled).toEqual({
      kind: 'prefilled',
      rid: 'a',
      firstToken: h.runner.sample(rid('a'), 10),
      tags: [0, 1, 2].map((page) => ({ page, epoch: page + 1 })),
      numTokens: 10,
    });
    expect([h.scheduler.numRunning, h.scheduler.numHeld, h.scheduler.view(rid('a'))?.state]).toEqual([0, 1, 'held']);
    expect(brief(h)).toEqual([]); // nothing to run: held pages are never decoded
    expect(h.pool.ledger.counts()).toMatchObject({ allocated: 3 });
    expect(h.scheduler.release(rid('a'))).toEqual({ kind: 'released', numPages: 3 });
    h.scheduler.checkIntegrity();
    expect(h.pool.ledger.counts()).toEqual({ free: 9, allocated: 0, cached: 2, quarantined: 0 }); // the prompt's full pages
    expect(h.scheduler.release(rid('a'))).toEqual({ kind: 'not-found' });
    expect(h.scheduler.isIdle).toBe(true);
  });

  it('an abort while held frees the pages (nothing cached); held requests are never preempted', () => {
    const h = new SchedulerHarness({ role: 'prefill', numPages: 4 });
    h.admit('a', 't1', range(100, 8), 4);
    h.step();
    h.admit('b', 't1', range(200, 12), 4);
    h.step(); // b gets the two free pages and waits for a's
    expect(h.scheduler.view(rid('a'))?.state).toBe('held');
    expect(h.scheduler.view(rid('b'))).toMatchObject({ state: 'prefilling', numComputed: 8 });
    expect(brief(h)).toEqual([]); // b waits: it preempts itself rather than touch held pages
    expect(h.scheduler.view(rid('b'))?.state).toBe('waiting');
    expect(h.scheduler.abort(rid('a'))).toEqual({ kind: 'aborted', was: 'held', pages: 'now' });
    h.runUntilDone();
    expect(h.ended.get(rid('b'))).toMatchObject({ kind: 'prefilled', numTokens: 12 });
  });
});

describe('decode role', () => {
  const decodeNode = (faults = NO_FAULTS) =>
    new SchedulerHarness({ role: 'decode', faults, numPages: 8, maxRunningRequests: 2 });

  it('reserves pages for the prompt, and after the transfer decodes from the first token at startPos = prompt length', () => {
    const h = decodeNode();
    const prompt = range(100, 6);
    const reserved = h.scheduler.reserve(h.request('a', 't1', prompt, 4));
    expect(reserved).toEqual({
      kind: 'reserved',
      tags: [
        { page: 0, epoch: 1 },
        { page: 1, epoch: 2 },
      ],
    });
    if (reserved.kind !== 'reserved') return;
    expect([h.scheduler.numReceiving, h.scheduler.numRunning]).toEqual([1, 0]);
    expect(brief(h)).toEqual([]); // receiving pages are never read
    h.transfer('a', 't1', reserved.tags, prompt);
    const started = h.scheduler.startDecode(rid('a'), 777);
    expect(started).toEqual({ kind: 'started', events: [] }); // the first token's one path is the DecodeMachine's
    h.known.get(rid('a'))?.push(777);
    const first = h.step().plan.items[0];
    expect(first).toMatchObject({ rid: 'a', startPos: 6, tokens: [777], wantLogits: true });
    h.runUntilDone();
    expect(h.ended.get(rid('a'))).toMatchObject({
      kind: 'finished',
      finishReason: 'length',
      usage: { promptTokens: 6, completionTokens: 4 },
    });
    expect(h.runner.contentViolations).toEqual([]);
  });

  it('refuses a reservation that can never fit (prompt + max_tokens), or that finds the node full, with no page allocated', () => {
    const h = decodeNode();
    expect(h.scheduler.reserve(h.request('big', 't1', range(0, 20), 13))).toMatchObject({
      kind: 'rejected',
      error: { code: 'pool_too_small' },
    });
    expect(h.pool.ledger.lastEpoch).toBe(0);
    expect(h.scheduler.reserve(h.request('a', 't1', range(0, 4), 4)).kind).toBe('reserved');
    expect(h.scheduler.reserve(h.request('b', 't1', range(0, 4), 4)).kind).toBe('reserved');
    expect(h.scheduler.reserve(h.request('c', 't1', range(0, 4), 4))).toMatchObject({
      kind: 'rejected',
      error: { code: 'overloaded' },
    });
    expect(h.pool.ledger.counts().allocated).toBe(2);
  });

  it('the placeholder bug: a transfer that covered only the first page fails at startDecode, and nothing is read', () => {
    const h = decodeNode();
    const prompt = range(100, 10);
    const reserved = h.scheduler.reserve(h.request('a', 't1', prompt, 4));
    if (reserved.kind !== 'reserved') throw new Error('not reserved');
    h.transfer('a', 't1', reserved.tags, prompt, 4); // one page written; KvDone claims all 10
    const started = h.scheduler.startDecode(rid('a'), 1);
    expect(started).toMatchObject({
      kind: 'started',
      events: [{ kind: 'failed', rid: 'a', error: { code: 'transfer_failed' } }],
    });
    if (started.kind === 'started')
      expect(String(started.events[0]?.kind === 'failed' && started.events[0].error.message)).toMatch(
        /page 1 \(page 1, epoch 2\) should hold 4 slot\(s\), its stamp says 0/,
      );
    h.scheduler.checkIntegrity();
    expect(brief(h)).toEqual([]);
    expect(h.pool.ledger.counts()).toMatchObject({ allocated: 0, free: 8 });
  });

  it('negative control: with skip-page-check (coverage and read checks off) the same request decodes from stale pages', () => {
    const h = new SchedulerHarness({
      role: 'decode',
      faults: new FaultSet(['skip-page-check']),
      numPages: 8,
      maxRunningRequests: 8,
    });
    // An earlier request leaves its K/V in pages 0-2, then goes away (pages not zeroed).
    const earlier = h.scheduler.reserve(h.request('old', 't2', range(900, 12), 4));
    if (earlier.kind !== 'reserved') throw new Error('not reserved');
    h.transfer('old', 't2', earlier.tags, range(900, 12));
    h.scheduler.abort(rid('old'));
    for (let i = 0; i < 5; i++) h.scheduler.reserve(h.request(`filler${i}`, 't3', [1], 1)); // pages 3-7 taken, 0-2 next
    const prompt = range(100, 10);
    const reserved = h.scheduler.reserve(h.request('a', 't1', prompt, 4));
    if (reserved.kind !== 'reserved') throw new Error(`not reserved: ${JSON.stringify(reserved)}`);
    expect(reserved.tags.map((t: Tag) => t.page)).toEqual([0, 1, 2]);
    h.transfer('a', 't1', reserved.tags, prompt, 4);
    expect(h.scheduler.startDecode(rid('a'), 1)).toEqual({ kind: 'started', events: [] });
    h.known.get(rid('a'))?.push(1);
    const plan = h.scheduler.schedule();
    h.runner.run(plan.items); // the runner's checkRead is off too: it reads the earlier request's K/V
    expect(h.runner.contentViolations[0]).toMatch(/a read \(904, 1000\) at position 4, expected \(104, 1001\)/);
    expect(() => h.scheduler.checkIntegrity()).toThrow(/a counts 4 slot\(s\) of page 1 .* as computed, but its stamp/); // the test-time check still sees it
  });

  it('an abort while receiving quarantines the pages a peer may still write, until release()', () => {
    const h = decodeNode();
    const reserved = h.scheduler.reserve(h.request('a', 't1', range(100, 6), 4));
    expect(reserved.kind).toBe('reserved');
    expect(h.scheduler.abort(rid('a'), 'peer-may-write')).toEqual({
      kind: 'aborted',
      was: 'receiving',
      pages: 'after-peer',
    });
    h.scheduler.checkIntegrity();
    expect(h.pool.ledger.counts()).toMatchObject({ quarantined: 2, free: 6 });
    expect([h.scheduler.numQuarantined, h.scheduler.isIdle]).toEqual([1, false]);
    expect(h.scheduler.abort(rid('a'), 'peer-may-write')).toEqual({ kind: 'not-found' });
    expect(h.scheduler.reserve(h.request('a', 't1', [1], 1))).toMatchObject({
      kind: 'rejected',
      error: { code: 'invalid_request' },
    });
    expect(h.scheduler.release(rid('a'))).toEqual({ kind: 'released', numPages: 2 });
    h.scheduler.checkIntegrity();
    expect(h.pool.ledger.counts()).toMatchObject({ quarantined: 0, free: 8 });
    expect(h.scheduler.isIdle).toBe(true);
  });

  it('negative control: with free-before-ack the pages are free at once, while the peer may still write them', () => {
    const quarantinedAfterAbort = (faults: FaultSet): number => {
      const h = decodeNode(faults);
      h.scheduler.reserve(h.request('a', 't1', range(100, 6), 4));
      h.scheduler.abort(rid('a'), 'peer-may-write');
      h.scheduler.checkIntegrity();
      return h.pool.ledger.counts().quarantined;
    };
    expect(quarantinedAfterAbort(NO_FAULTS)).toBe(2);
    expect(quarantinedAfterAbort(new FaultSet(['free-before-ack']))).toBe(0);
  });

  it('a transferred request the plan would preempt fails with an honest overloaded instead: a decode node never recomputes', () => {
    const h = new SchedulerHarness({ role: 'decode', numPages: 5, maxRunningRequests: 2 });
    for (const who of ['a', 'b']) {
      const prompt = range(who === 'a' ? 100 : 200, 8);
      const reserved = h.scheduler.reserve(h.request(who, 't1', prompt, 6));
      if (reserved.kind !== 'reserved') throw new Error('not reserved');
      h.transfer(who, 't1', reserved.tags, prompt);
      const first = h.runner.sample(rid(who), 8);
      h.scheduler.startDecode(rid(who), first);
      h.known.get(rid(who))?.push(first);
    }
    const preempted: string[] = [];
    const prefills: string[] = [];
    for (let i = 0; i < 40 && h.scheduler.numRunning + h.scheduler.numWaiting > 0; i++) {
      const { plan } = h.step();
      preempted.push(...plan.preempted);
      prefills.push(
        ...plan.items.filter((item) => item.tokens.length > 1 || item.startPos === 0).map((item) => item.rid),
      );
    }
    expect(preempted).toEqual([]); // nothing went back to a queue
    expect(prefills).toEqual([]); // nothing was ever recomputed from placeholders
    expect(h.ended.get(rid('b'))).toMatchObject({ kind: 'failed', error: { code: 'overloaded' } });
    expect(h.ended.get(rid('a'))).toMatchObject({ kind: 'finished', usage: { completionTokens: 6 } });
    expect(h.outputOf('a')).toEqual(range(8, 6).map((pos) => h.runner.sample(rid('a'), pos)));
    expect(h.scheduler.numPreemptions).toBe(1);
    expect(h.pool.ledger.counts()).toMatchObject({ allocated: 0, quarantined: 0 });
    expect(h.runner.contentViolations).toEqual([]);
    expect(h.runner.numPageCheckFailures).toBe(0);
  });
});
