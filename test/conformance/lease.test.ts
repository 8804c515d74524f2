// The prefix lease model (spec/lease.pml) against the implementation, rule by rule, from the tables
// of spec/conformance/lease-rules.ts: every guard of the requester's frame check and every way a
// lease ends is found in the model's text, and the code does what the model does with each.
//   - requester: every combination of wrong fields in a PrefixPages or PrefixDone frame, fed to a
//     real PrefixRequester, is accepted, dropped or ends the fetch exactly as the model's r_frame
//     says (a port: modelVerdict), with the code's refusal name for a single wrong field;
//   - late frames (the model's witnesses L2, L8): a frame of a fetch abandoned at its deadline, and
//     one of an older epoch carrying the open fetch's fetchId, are dropped;
//   - holder: a lease on a real PrefixCache's pages, ended by done, by the requester's close or at
//     its deadline, unpins every page once, and the holder sends nothing of the fetch afterwards;
//     two leases pin one page by count (L6), and a pinned page is never evictable.
import { readFileSync } from 'node:fs';
import { xxh64 } from '@node-rs/xxhash';
import { describe, expect, it } from 'vitest';
import { asRequestId, asTenantId, type Tag } from '../../src/core/index.js';
import { PagePool, pagesFor, pathHashes, PrefixCache, type Owner } from '../../src/pages/index.js';
import { PrefixHolder, type Schedule } from '../../src/transfer/prefix-fetch-holder.js';
import type { PrefixDone, PrefixMessage, PrefixPages } from '../../src/transfer/prefix-fetch-messages.js';
import { PrefixRequester } from '../../src/transfer/prefix-fetch-requester.js';
import {
  CODE_ONLY_CHECKS,
  FRAME_CHECKS,
  LEASE_ENDS,
  modelVerdict,
  type FrameField,
  type Verdict,
} from '../../spec/conformance/lease-rules.js';
import { LEASE_MODEL } from '../../spec/scripts/pan.mjs';

const model = readFileSync(LEASE_MODEL, 'utf8').replace(/\s+/g, ' ');
const faults = readFileSync(new URL('../../src/core/faults.ts', import.meta.url), 'utf8');

/** A schedule whose timers fire only when the test says. */
function manualSchedule() {
  const timers = new Set<() => void>();
  const schedule: Schedule = (fn) => {
    timers.add(fn);
    return () => timers.delete(fn);
  };
  const fire = () => {
    const due = [...timers];
    timers.clear();
    for (const fn of due) fn();
  };
  return { schedule, fire };
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('the lease model and its tables', () => {
  it("holds every guard of the tables, and the code's fault points as its mutants", () => {
    for (const c of FRAME_CHECKS) expect(model, c.field).toContain(c.model);
    for (const e of LEASE_ENDS) expect(model, e.why).toContain(e.model);
    expect(model).toContain('#ifdef IGNORE_PREFIX_LEASE');
    expect(model).toContain('#ifdef PREFIX_KEY_WITHOUT_TENANT');
    expect(faults).toContain("'ignore-prefix-lease'");
    expect(faults).toContain("'prefix-key-without-tenant'");
  });
});

describe("the requester's frame checks are the model's (r_frame)", () => {
  const NS = 'ns';
  const HASHES = ['a', 'b'].map((c) => c.repeat(64));
  const PAGE_BYTES = 16;
  const checksum = (b: Uint8Array) => xxh64(b).toString(16).padStart(16, '0');

  function start(epoch = 5) {
    const { schedule, fire } = manualSchedule();
    const req = new PrefixRequester({ send: () => undefined, pageBytes: PAGE_BYTES, epoch, schedule });
    return { req, fire, outcome: req.fetch('H', NS, HASHES) };
  }

  function frame(kind: 'PrefixPages' | 'PrefixDone', wrong: ReadonlySet<FrameField>): PrefixPages | PrefixDone {
    const fetchId = wrong.has('fetchId') ? 2 : 1;
    const epoch = wrong.has('epoch') ? 6 : 5;
    if (kind === 'PrefixDone') return { type: 'PrefixDone', fetchId, epoch, count: wrong.has('count') ? 1 : 0 };
    const index = wrong.has('index') ? 1 : 0;
    // a wrong pathHash is the one asked at another position; a wrong index keeps its own pathHash
    const pathHash = HASHES[wrong.has('pathHash') ? 1 - index : index] as string;
    const payload = new Uint8Array(PAGE_BYTES).fill(7);
    const namespace = wrong.has('namespace') ? 'other' : NS;
    return { type: 'PrefixPages', fetchId, epoch, namespace, index, pathHash, xxh64: checksum(payload), payload };
  }

  /** What the code did with one frame: the verdict, and the refusal when it ended the fetch. */
  async function codeVerdict(kind: 'PrefixPages' | 'PrefixDone', wrong: ReadonlySet<FrameField>) {
    const { req, outcome } = start();
    req.received('H', frame(kind, wrong));
    if (req.stats().refused.stale === 1) return { verdict: 'drop' as Verdict, open: req.numOpen };
    if (req.numOpen === 1) {
      req.received('H', { type: 'PrefixDone', fetchId: 1, epoch: 5, count: 1 });
      const got = await outcome;
      return { verdict: got.ended === 'done' && got.pages.length === 1 ? ('accept' as Verdict) : undefined };
    }
    const got = await outcome;
    return { verdict: (got.ended === 'done' ? 'done' : 'end') as Verdict, ended: got.ended, pages: got.pages.length };
  }

  const subsets = <T>(xs: readonly T[]): T[][] =>
    xs.reduce<T[][]>((acc, x) => [...acc, ...acc.map((s) => [...s, x])], [[]]);

  for (const kind of ['PrefixPages', 'PrefixDone'] as const) {
    const fields = FRAME_CHECKS.filter((c) => c.frames.includes(kind)).map((c) => c.field);
    it(`${kind}: each of the ${2 ** fields.length} combinations of wrong fields (${fields.join(', ')}) as the model says`, async () => {
      for (const wrong of subsets(fields)) {
        const set = new Set(wrong);
        const got = await codeVerdict(kind, set);
        expect(got.verdict, `${kind} with wrong ${wrong.join('+') || 'nothing'}`).toBe(modelVerdict(kind, set));
        if (got.verdict === 'drop') expect(got.open, 'a dropped frame leaves the fetch open').toBe(1);
        if (got.verdict === 'end') expect(got.pages, 'a fetch ended by a frame installs nothing of it').toBe(0);
        if (wrong.length === 1) {
          const check = FRAME_CHECKS.find((c) => c.field === wrong[0]);
          if (typeof check?.fails === 'object') expect(got.ended).toBe(check.fails.end);
        }
      }
    });
  }

  it.each(CODE_ONLY_CHECKS)(
    "the code's %s check (abstracted by the model: intact frames) ends the fetch",
    async (reason) => {
      const { req, outcome } = start();
      const good = frame('PrefixPages', new Set()) as PrefixPages;
      const bad =
        reason === 'length'
          ? { ...good, payload: new Uint8Array(PAGE_BYTES - 1), xxh64: checksum(new Uint8Array(PAGE_BYTES - 1)) }
          : { ...good, xxh64: checksum(new Uint8Array(PAGE_BYTES)) };
      req.received('H', bad);
      expect(await outcome).toMatchObject({ pages: [], ended: reason });
    },
  );

  it('L2: a late frame of a fetch abandoned at its deadline is dropped; the open fetch goes on', async () => {
    const { req, fire, outcome } = start();
    fire();
    expect(await outcome).toMatchObject({ ended: 'timeout' });
    const second = req.fetch('H', NS, HASHES);
    req.received('H', frame('PrefixPages', new Set()));
    expect(req.stats().refused.stale).toBe(1);
    expect(req.numOpen).toBe(1);
    req.received('H', { type: 'PrefixDone', fetchId: 2, epoch: 5, count: 0 });
    expect(await second).toMatchObject({ pages: [], ended: 'done' });
  });

  it("L8: after a restart, a frame of the old epoch with the open fetch's fetchId is dropped", async () => {
    const { req, outcome } = start(6); // the restarted requester: epoch 6, fetchIds from 1 again
    const good = frame('PrefixPages', new Set()) as PrefixPages;
    req.received('H', good); // epoch 5: the old one
    expect(req.stats().refused.stale).toBe(1);
    expect(req.numOpen).toBe(1);
    req.received('H', { ...good, epoch: 6 });
    req.received('H', { type: 'PrefixDone', fetchId: 1, epoch: 6, count: 1 });
    const got = await outcome;
    expect(got.ended).toBe('done');
    expect(got.pages).toHaveLength(1);
  });
});

describe('the holder ends every lease as the model does (h_release), unpinning once', () => {
  const PAGE = 4;
  const T1 = asTenantId('t1');
  const PROMPT = Array.from({ length: 13 }, (_, i) => 100 + i); // 3 full pages
  const HASHES = pathHashes(PROMPT, PAGE);

  /** A pool whose cache holds PROMPT's pages for t1, and a holder over it whose reads wait for drain(). */
  function holderNode() {
    const pool = PagePool.create({ numPages: 8, pageSize: PAGE, numLayers: 1, numKvHeads: 1, headDim: 2 });
    const cache = new PrefixCache({ pool });
    const who: Owner = { rid: asRequestId('a1'), tenant: T1 };
    const result = cache.allocate(pagesFor(PROMPT.length, PAGE), who);
    if (result.kind !== 'allocated') throw new Error('out of pages');
    result.tags.forEach((tag: Tag, i) => {
      pool.checkWrite(who, [tag]);
      pool.scatterSlots(tag.page, 0, PAGE, new Uint8Array(pool.slotRangeBytes(PAGE)).fill(i + 1));
      pool.stamp(tag, Math.min(PAGE, PROMPT.length - i * PAGE));
    });
    cache.insert(who, PROMPT, result.tags);
    const sent: { peer: string; m: PrefixMessage }[] = [];
    const drains: (() => void)[] = [];
    const drain = async () => {
      for (const resolve of drains.splice(0)) resolve();
      await flush();
    };
    let clock = 0;
    const { schedule, fire } = manualSchedule();
    const holder = new PrefixHolder({
      io: {
        send: (peer, m) => sent.push({ peer, m }),
        bufferedBytes: () => 1,
        whenDrained: () => new Promise<void>((resolve) => drains.push(resolve)),
      },
      source: (_namespace, hashes) => cache.lease(T1, hashes),
      schedule,
      leaseTimeoutMs: 1_000,
      highWaterBytes: 0,
      now: () => clock,
    });
    const fetch = (peer: string, fetchId: number) =>
      holder.received(peer, { type: 'PrefixFetch', fetchId, epoch: 5, namespace: 'ns', pathHashes: HASHES });
    const expire = () => {
      clock += 1_000;
      fire();
    };
    return { cache, holder, sent, drain, fetch, expire };
  }

  it.each(LEASE_ENDS)(
    'ends by $why: every page unpinned, and nothing of the fetch sent after',
    async ({ why, sendsDone }) => {
      const n = holderNode();
      n.fetch('R', 1);
      expect(n.holder.numOpenLeases).toBe(1);
      expect(n.cache.numPinned).toBe(3);
      expect(n.cache.numEvictable()).toBe(0);
      expect(n.sent).toHaveLength(1); // page 0, then the holder waits for the drain
      if (why === 'closed') n.holder.closed('R');
      if (why === 'deadline') n.expire();
      const sentAtEnd = n.sent.length;
      for (let i = 0; i < 4; i++) await n.drain();
      expect(n.holder.numOpenLeases).toBe(0);
      expect(n.cache.numPinned).toBe(0);
      expect(n.cache.numEvictable()).toBe(3);
      const types = n.sent.map((s) => s.m.type);
      if (sendsDone) expect(types).toEqual(['PrefixPages', 'PrefixPages', 'PrefixPages', 'PrefixDone']);
      else expect(n.sent).toHaveLength(sentAtEnd);
      expect(types.includes('PrefixDone')).toBe(sendsDone);
    },
  );

  it('L6: two leases pin the same pages by count; the close of one peer leaves the other lease pinning them', async () => {
    const n = holderNode();
    n.fetch('R1', 1);
    n.fetch('R2', 1);
    expect(n.holder.numOpenLeases).toBe(2);
    n.holder.closed('R1');
    expect(n.holder.numOpenLeases).toBe(1);
    expect(n.cache.numPinned).toBe(3);
    expect(n.cache.numEvictable()).toBe(0);
    n.holder.closed('R2');
    await n.drain();
    expect(n.cache.numPinned).toBe(0);
  });
});
