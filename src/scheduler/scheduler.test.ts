import { describe, expect, it } from 'vitest';
import { asRequestId, PageCheckError, type BatchItem, type RequestId } from '../core/index.js';
import { SchedulerHarness } from '../../test/sim/scheduler-runner.js';
import type { SchedulerEvent, StepResult } from './index.js';

const rid = asRequestId;
const range = (start: number, n: number): number[] => Array.from({ length: n }, (_, i) => start + i);
const pagesOf = (item: BatchItem | undefined): number[] => (item?.tags ?? []).map((t) => t.page);
const brief = (items: readonly BatchItem[]): string[] =>
  items.map((i) => `${i.rid}@${i.startPos}+${i.tokens.length}${i.wantLogits ? '!' : ''}`);
const tokensOf = (events: readonly SchedulerEvent[], who: string): number[] =>
  events.flatMap((e) => (e.kind === 'token' && e.rid === who ? [e.token] : []));

describe('chunked prefill and decode', () => {
  it('prefills a 10-token prompt in chunks of the budget, allocating pages per chunk; only the last chunk wants logits', () => {
    const h = new SchedulerHarness({ chunkedPrefillSize: 4, cache: false });
    h.admit('a', 't1', range(100, 10), 3);
    const steps = [h.step(), h.step(), h.step()];
    expect(steps.map((s) => brief(s.plan.items))).toEqual([['a@0+4'], ['a@4+4'], ['a@8+2!']]);
    expect(steps.map((s) => pagesOf(s.plan.items[0]))).toEqual([[0], [0, 1], [0, 1, 2]]);
    expect(steps[2]!.plan.items[0]!.tokens).toEqual([108, 109]);
    expect(steps[2]!.events).toEqual([{ kind: 'token', rid: 'a', token: h.runner.sample(rid('a'), 10) }]);
    expect(h.scheduler.view(rid('a'))).toMatchObject({ state: 'decoding', numComputed: 10, numOutputTokens: 1 });
  });

  it('feeds each sampled token back as a one-token decode, and allocates a page exactly when a decode crosses a page boundary', () => {
    const h = new SchedulerHarness({ cache: false });
    h.admit('a', 't1', range(100, 4), 6);
    const plans = Array.from({ length: 6 }, () => h.step().plan.items[0]);
    expect(plans.map((i) => `${i?.startPos}+${i?.tokens.length}`)).toEqual(['0+4', '4+1', '5+1', '6+1', '7+1', '8+1']);
    expect(plans.map((i) => pagesOf(i).length)).toEqual([1, 2, 2, 2, 2, 3]);
    const outputs = h.outputOf('a');
    expect(plans.slice(1).map((i) => i?.tokens[0])).toEqual(outputs.slice(0, 5));
    expect(h.ended.get(rid('a'))).toMatchObject({
      kind: 'finished',
      finishReason: 'length',
      usage: { promptTokens: 4, completionTokens: 6, cachedTokens: 0 },
    });
  });

  it('on finish, caches the full pages of prompt and output in the tenant prefix cache and frees the partial tail', () => {
    const h = new SchedulerHarness();
    h.admit('a', 't1', range(100, 10), 3);
    h.runUntilDone();
    // 10 prompt + 3 output tokens; the last output is never fed back, so 12 positions = 3 full pages.
    expect(h.pool.ledger.counts()).toEqual({ free: 8, allocated: 0, cached: 3, quarantined: 0 });
    expect(h.cache?.numPages).toBe(3);
  });

  it('a second request of the same tenant reuses the cached prefix; another tenant computes its own', () => {
    const h = new SchedulerHarness();
    h.admit('a', 't1', range(100, 10), 2);
    h.runUntilDone();
    h.admit('b', 't1', range(100, 10), 2);
    h.admit('c', 't2', range(100, 10), 2);
    const first = h.step().plan.items;
    expect(brief(first)).toEqual(['b@8+2!', 'c@0+10!']);
    expect(h.runner.contentViolations).toEqual([]);
    h.runUntilDone();
    expect(h.ended.get(rid('b'))).toMatchObject({ usage: { cachedTokens: 8 } });
    expect(h.ended.get(rid('c'))).toMatchObject({ usage: { cachedTokens: 0 } });
  });

  it('a prompt wholly in the cache still computes its last page, for the logits of its last token', () => {
    const h = new SchedulerHarness();
    h.admit('a', 't1', range(100, 8), 1);
    h.runUntilDone();
    expect(h.cache?.numPages).toBe(2);
    h.admit('b', 't1', range(100, 8), 1);
    expect(brief(h.step().plan.items)).toEqual(['b@4+4!']);
    expect(h.ended.get(rid('b'))).toMatchObject({ kind: 'finished', usage: { cachedTokens: 4 } });
  });

  it("runs decodes first, then a tenant's continuing prefills, then its new requests, within the token budget", () => {
    const h = new SchedulerHarness({ chunkedPrefillSize: 8, numPages: 20, cache: false });
    h.admit('a', 't1', range(0, 3), 5);
    h.step(); // a prefilled
    h.admit('b', 't1', range(10, 12), 5);
    h.admit('c', 't1', range(30, 6), 5); // one tenant: first come first served (across tenants: fair-share.test.ts)
    expect(brief(h.step().plan.items)).toEqual(['a@3+1!', 'b@0+7']);
    expect(brief(h.step().plan.items)).toEqual(['a@4+1!', 'b@7+5!', 'c@0+2']);
  });
});

describe('finishing', () => {
  it('ends with stop on a stop token id and with length at max_tokens', () => {
    const probe = new SchedulerHarness();
    const stop = probe.runner.sample(rid('a'), 6); // the second output token of a 5-token prompt
    const h = new SchedulerHarness();
    h.admit('a', 't1', range(100, 5), 10, { stopTokenIds: [stop] });
    h.admit('b', 't1', range(200, 5), 3);
    h.runUntilDone();
    expect(h.ended.get(rid('a'))).toMatchObject({
      kind: 'finished',
      finishReason: 'stop',
      usage: { completionTokens: 2 },
    });
    expect(h.outputOf('a').at(-1)).toBe(stop);
    expect(h.ended.get(rid('b'))).toMatchObject({
      kind: 'finished',
      finishReason: 'length',
      usage: { completionTokens: 3 },
    });
  });

  it("the model's EOS ids stop a request unless its sampling says ignoreEos", () => {
    const probe = new SchedulerHarness();
    const eos = probe.runner.sample(rid('a'), 5);
    const h = new SchedulerHarness({ eosTokenIds: [eos] });
    h.admit('a', 't1', range(100, 5), 4);
    h.admit('b', 't1', range(100, 5), 4, { ignoreEos: true });
    h.runUntilDone();
    expect(h.ended.get(rid('a'))).toMatchObject({ finishReason: 'stop', usage: { completionTokens: 1 } });
    // b has another rid, so other samples: what matters is that eos alone did not stop it.
    expect(h.ended.get(rid('b'))).toMatchObject({ finishReason: 'length', usage: { completionTokens: 4 } });
  });

  it('finish(rid) from the caller (a stop string) ends a decoding request at once; unknown rids are not-found', () => {
    const h = new SchedulerHarness();
    h.admit('a', 't1', range(100, 8), 10);
    h.step();
    h.step();
    const result = h.scheduler.finish(rid('a'), 'stop');
    expect(result).toEqual({
      kind: 'finished',
      event: {
        kind: 'finished',
        rid: 'a',
        finishReason: 'stop',
        usage: { promptTokens: 8, completionTokens: 2, cachedTokens: 0 },
      },
    });
    h.scheduler.checkIntegrity();
    expect(h.pool.ledger.counts()).toEqual({ free: 9, allocated: 0, cached: 2, quarantined: 0 });
    expect(h.scheduler.finish(rid('a'), 'stop')).toEqual({ kind: 'not-found' });
    expect(h.scheduler.isIdle).toBe(true);
  });

  it('a failed item ends only its own request; its pages are freed, not cached', () => {
    const h = new SchedulerHarness();
    h.admit('a', 't1', range(100, 8), 4);
    h.admit('b', 't1', range(200, 8), 4);
    const plan = h.scheduler.schedule();
    const results: StepResult[] = h.runner.run(plan.items).map((r) =>
      r.rid === 'a'
        ? {
            kind: 'failed',
            rid: r.rid,
            error: new PageCheckError(plan.items[0]!.tags[0]!.page, 'stamp-epoch', 'test'),
          }
        : r,
    );
    const events = h.scheduler.complete(results);
    expect(events.map((e) => `${e.kind}:${e.rid}`)).toEqual(['failed:a', 'token:b']);
    h.scheduler.checkIntegrity();
    expect(h.pool.ledger.pagesOf(rid('a'))).toEqual({ allocated: [], quarantined: [], referenced: [] });
    expect(h.pool.ledger.counts()).toMatchObject({ allocated: 2, cached: 0 });
  });
});

describe('preemption by recompute', () => {
  it('when pages run out, preempts the most recently started request; it recomputes later and its output is unchanged', () => {
    const h = new SchedulerHarness({ numPages: 4, maxRunningRequests: 2, cache: false });
    h.admit('a', 't1', range(100, 6), 7);
    h.admit('b', 't1', range(200, 6), 7);
    expect(brief(h.step().plan.items)).toEqual(['a@0+6!', 'b@0+6!']);
    expect(h.pool.ledger.freeList()).toEqual([]);
    h.step();
    h.step();
    const crossing = h.step().plan; // a's decode at position 8 needs a fifth page: b goes
    expect(crossing.preempted).toEqual(['b']);
    expect(brief(crossing.items)).toEqual(['a@8+1!']);
    expect(pagesOf(crossing.items[0])).toEqual([0, 1, 2]);
    expect(h.scheduler.view(rid('b'))).toMatchObject({
      state: 'waiting',
      numComputed: 0,
      numOutputTokens: 3,
      tags: [],
    });
    h.runUntilDone();
    for (const who of ['a', 'b']) {
      const expected = range(6, 7).map((pos) => h.runner.sample(rid(who), pos));
      expect(h.outputOf(who)).toEqual(expected);
      expect(tokensOf(h.events, who)).toEqual(expected); // no token repeated by the recompute
    }
    expect(h.runner.numPageCheckFailures).toBe(0);
    expect(h.runner.contentViolations).toEqual([]);
    expect(h.pool.ledger.counts().free).toBe(4);
  });

  it("with a prefix cache, the victim's full pages are cached, and its recompute starts from the ones that survive", () => {
    const h = new SchedulerHarness({ numPages: 6, maxRunningRequests: 2, chunkedPrefillSize: 18 });
    h.admit('a', 't1', range(100, 9), 5);
    h.admit('b', 't1', range(200, 9), 12);
    expect(brief(h.step().plan.items)).toEqual(['a@0+9!', 'b@0+9!']); // a: pages 0-2, b: pages 3-5
    h.step(); // both decode at 9, 10, 11
    h.step();
    h.step();
    const plan = h.step().plan; // a at 12 needs a fourth page
    expect(plan.preempted).toEqual(['b']);
    expect(pagesOf(plan.items[0])).toEqual([0, 1, 2, 5]); // b's full pages 3, 4, 5 were cached; the leaf 5 was evicted for a
    expect(h.ended.get(rid('a'))).toMatchObject({ finishReason: 'length' }); // in this step: pages 0-2 cached, 5 freed
    expect(h.pool.ledger.counts()).toEqual({ free: 1, allocated: 0, cached: 5, quarantined: 0 });
    expect(brief(h.step().plan.items)).toEqual(['b@8+5!']); // a hit on pages 3 and 4
    h.runUntilDone();
    expect(h.ended.get(rid('b'))).toMatchObject({
      finishReason: 'length',
      usage: { cachedTokens: 8, completionTokens: 12 },
    });
    expect(h.outputOf('b')).toEqual(range(9, 12).map((pos) => h.runner.sample(rid('b'), pos)));
    expect(h.runner.contentViolations).toEqual([]);
  });
});

describe('aborts', () => {
  const setup = (): SchedulerHarness => {
    const h = new SchedulerHarness({ chunkedPrefillSize: 4, cache: false });
    h.admit('a', 't1', range(100, 4), 8);
    h.step(); // a decodes from now on
    return h;
  };

  it('returns the pages of a waiting, a prefilling and a decoding request, and forgets them', () => {
    const h = setup();
    h.admit('b', 't2', range(200, 10), 8);
    h.step(); // a decodes, b prefills 3 of 10
    h.admit('w', 't3', range(400, 4), 2);
    expect(['a', 'b', 'w'].map((x) => h.scheduler.view(rid(x))?.state)).toEqual(['decoding', 'prefilling', 'waiting']);
    expect(h.scheduler.abort(rid('w'))).toEqual({ kind: 'aborted', was: 'waiting', pages: 'now' });
    expect(h.scheduler.abort(rid('b'))).toEqual({ kind: 'aborted', was: 'prefilling', pages: 'now' });
    expect(h.scheduler.abort(rid('a'))).toEqual({ kind: 'aborted', was: 'decoding', pages: 'now' });
    h.scheduler.checkIntegrity();
    for (const x of ['a', 'b', 'w'])
      expect(h.pool.ledger.pagesOf(rid(x))).toEqual({ allocated: [], quarantined: [], referenced: [] });
    expect(h.pool.ledger.counts().free).toBe(11);
    expect(h.scheduler.isIdle).toBe(true);
  });

  it('aborting twice, or an unknown rid, is harmless and says not-found', () => {
    const h = setup();
    h.step();
    expect(h.scheduler.abort(rid('a')).kind).toBe('aborted');
    expect(h.scheduler.abort(rid('a'))).toEqual({ kind: 'not-found' });
    expect(h.scheduler.abort(rid('nobody'))).toEqual({ kind: 'not-found' });
    h.scheduler.checkIntegrity();
  });

  it('a request aborted while its step runs keeps its pages until complete(), and its result is dropped', () => {
    const h = setup();
    h.step();
    const plan = h.scheduler.schedule();
    const held = h.pool.ledger.pagesOf(rid('a')).allocated;
    expect(h.scheduler.abort(rid('a'))).toEqual({ kind: 'aborted', was: 'decoding', pages: 'after-step' });
    expect(h.scheduler.abort(rid('a'))).toEqual({ kind: 'not-found' });
    h.scheduler.checkIntegrity();
    expect(h.pool.ledger.pagesOf(rid('a')).allocated).toEqual(held); // the runner may still be writing them
    const events = h.scheduler.complete(h.runner.run(plan.items));
    expect(events.some((e) => e.rid === 'a')).toBe(false);
    h.scheduler.checkIntegrity();
    expect(h.pool.ledger.pagesOf(rid('a')).allocated).toEqual([]);
  });

  it('finish(rid) while its step runs gives the event now and the pages back after complete()', () => {
    const h = setup();
    h.step();
    const plan = h.scheduler.schedule();
    expect(h.scheduler.finish(rid('a'), 'stop')).toMatchObject({ kind: 'finished', event: { finishReason: 'stop' } });
    expect(h.pool.ledger.pagesOf(rid('a')).allocated.length).toBe(2);
    h.scheduler.complete(h.runner.run(plan.items));
    h.scheduler.checkIntegrity();
    expect(h.pool.ledger.pagesOf(rid('a')).allocated).toEqual([]);
  });
});

describe('fairness', () => {
  it("a tenant with 20 queued requests does not delay another tenant's single request past its fair turn", () => {
    const h = new SchedulerHarness({ maxRunningRequests: 1, numPages: 20 });
    for (let i = 0; i < 20; i++) h.admit(`a${i}`, 'A', range(1000 + i * 10, 4), 2);
    h.admit('b0', 'B', range(5000, 4), 2);
    const started: RequestId[] = [];
    while (h.scheduler.numRunning + h.scheduler.numWaiting > 0) {
      for (const item of h.step().plan.items) if (item.startPos === 0) started.push(item.rid);
    }
    expect(started.indexOf(rid('b0'))).toBe(1); // right after the request that was already first
    expect(started.filter((r) => r !== 'b0')).toEqual(range(0, 20).map((i) => `a${i}`)); // FCFS within A
  });

  it('refuses new requests beyond maxWaiting as overloaded, and accepts again once the queue drains', () => {
    const h = new SchedulerHarness({ maxWaiting: 2 });
    expect(h.admit('a', 't', [1, 2], 1).kind).toBe('admitted');
    expect(h.admit('b', 't', [1, 2], 1).kind).toBe('admitted');
    const refused = h.admit('c', 't', [1, 2], 1);
    expect(refused).toMatchObject({ kind: 'rejected', error: { code: 'overloaded' } });
    h.step();
    expect(h.admit('c', 't', [1, 2], 1).kind).toBe('admitted');
  });

  it('refuses a rid already in use, an empty prompt and a non-positive max_tokens as values', () => {
    const h = new SchedulerHarness();
    h.admit('a', 't', [1, 2], 1);
    expect(h.admit('a', 't', [1, 2], 1)).toMatchObject({ kind: 'rejected', error: { code: 'invalid_request' } });
    expect(h.admit('b', 't', [], 1)).toMatchObject({
      kind: 'rejected',
      error: { code: 'invalid_request', param: 'prompt' },
    });
    expect(h.admit('c', 't', [1], 0)).toMatchObject({
      kind: 'rejected',
      error: { code: 'invalid_request', param: 'max_tokens' },
    });
  });
});

describe('checkIntegrity catches the scheduler and the ledger disagreeing', () => {
  it('a runner that does not stamp what it wrote: computed positions are not covered', () => {
    const h = new SchedulerHarness({ forgetLastStamp: true });
    h.admit('a', 't1', range(100, 6), 4);
    expect(() => h.step()).toThrow(/counts 2 slot\(s\) of page 1 .* as computed, but its stamp/);
  });

  it('a page freed behind its back, and a page allocated to a request it does not know (a leak)', () => {
    const h = new SchedulerHarness();
    h.admit('a', 't1', range(100, 6), 4);
    h.step();
    const tags = h.scheduler.view(rid('a'))!.tags;
    h.pool.ledger.free([tags[1]!], { rid: rid('a'), tenant: h.request('a', 't1', [1], 1).tenant });
    expect(() => h.scheduler.checkIntegrity()).toThrow(/a holds page 1 \(epoch 2\) as allocated, but it is free/);
    const other = new SchedulerHarness();
    other.pool.ledger.allocate(1, { rid: rid('ghost'), tenant: h.request('g', 't1', [1], 1).tenant });
    expect(() => other.scheduler.checkIntegrity()).toThrow(
      /page 0 is allocated to ghost .* no request of this scheduler holds it \(a leak\)/,
    );
  });
});
