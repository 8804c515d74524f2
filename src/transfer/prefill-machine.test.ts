import { describe, expect, it } from 'vitest';
import {
  AdmissionError,
  asRequestId,
  asTenantId,
  FaultSet,
  samplingParams,
  TesseraError,
  type FaultName,
  type RequestId,
  type Tag,
} from '../core/index.js';
import { pagesFor, type Owner, type PagePool } from '../pages/index.js';
import { firstForeignPosition, makePool, PAGE_SIZE, writePositions } from '../../test/sim/transfer/kit.js';
import { DecodeMachine } from './decode-machine.js';
import type { DecodeEffect } from './decode-types.js';
import { promptDigest } from './digests.js';
import { LedgerDecodeHost, type AdmitVerdict, type PrefillHost } from './hosts.js';
import type { NetworkEffect } from './machine.js';
import type { Message } from './messages.js';
import { PrefillMachine } from './prefill-machine.js';

const TOKENS = [5, 6, 7, 8, 9, 10];
const R = 'router';
const P = 'p0';
const D = 'd0';

/** A prefill host over a bare pool: allocates at admission, frees at stop/release. */
class TestHost implements PrefillHost {
  readonly model = '5eed5eed5eed5eed';
  readonly tags = new Map<RequestId, readonly Tag[]>();
  stopping = false;
  constructor(readonly pool: PagePool) {}
  admit(who: Owner, tokens: readonly number[]): AdmitVerdict {
    const numPages = pagesFor(tokens.length, this.pool.pageSize);
    if (numPages > this.pool.ledger.numPages)
      return { kind: 'rejected', error: new AdmissionError('pool_too_small', `needs ${numPages} pages`) };
    const result = this.pool.ledger.allocate(numPages, who);
    if (result.kind !== 'allocated') return { kind: 'rejected', error: new TesseraError('overloaded', 'busy') };
    this.tags.set(who.rid, result.tags);
    return { kind: 'admitted' };
  }
  stop(who: Owner): 'stopped' | 'stopping' {
    if (this.stopping) return 'stopping';
    this.release(who);
    return 'stopped';
  }
  release(who: Owner): void {
    this.pool.ledger.free(this.tags.get(who.rid) ?? [], who);
    this.tags.delete(who.rid);
  }
}

function setup(options: { faults?: FaultName[]; numPages?: number } = {}) {
  const faults = new FaultSet(options.faults ?? []);
  const pool = makePool(options.numPages ?? 8);
  const host = new TestHost(pool);
  const p = new PrefillMachine({ node: P, host, faults, timeouts: { ackMs: 30 } });
  const dpool = makePool(8);
  const d = new DecodeMachine({
    node: D,
    host: new LedgerDecodeHost({ pool: dpool, model: '5eed5eed5eed5eed', contextLength: 64 }),
  });
  const rid = asRequestId('r1');
  const who = { rid, tenant: asTenantId('t0') };
  const reserved = d.handle(0, {
    kind: 'received',
    from: R,
    message: {
      type: 'Reserve',
      rid,
      tenant: who.tenant,
      promptTokens: 6,
      promptDigest: promptDigest(TOKENS),
      sampling: samplingParams({ maxTokens: 2 }),
      prefillAddress: P,
    },
  });
  const dstTags = (sent(reserved, R)[0] as Extract<Message, { type: 'Reserved' }>).tags;
  const prefill = () =>
    p.handle(0, {
      kind: 'received',
      from: R,
      message: {
        type: 'Prefill',
        rid,
        tenant: who.tenant,
        tokens: TOKENS,
        sampling: samplingParams({ maxTokens: 2 }),
        decodeAddress: D,
        tags: dstTags,
        pageSize: PAGE_SIZE,
      },
    });
  /** The worker computes positions [from, to) and reports them. */
  const compute = (from: number, to: number, done = false) => {
    const tags = host.tags.get(rid) as readonly Tag[];
    writePositions(pool, who, tags, from, to);
    return p.handle(
      0,
      done
        ? { kind: 'computeDone', rid, tags, firstToken: 42, firstLogprobs: [] }
        : { kind: 'computed', rid, numTokens: to, tags },
    );
  };
  /** Deliver P's messages for D to D, and D's replies for P back to P. */
  const deliver = (effects: readonly NetworkEffect[]): DecodeEffect[] => {
    const out: DecodeEffect[] = [];
    for (const m of sent(effects, D)) out.push(...d.handle(0, { kind: 'received', from: P, message: m }));
    for (const m of sent(out, P)) p.handle(0, { kind: 'received', from: D, message: m });
    return out;
  };
  return { pool, host, p, d, dpool, rid, dstTags, prefill, compute, deliver };
}

function sent(effects: readonly (NetworkEffect | DecodeEffect)[], to: string): Message[] {
  return effects.flatMap((e) => (e.kind === 'send' && e.to === to ? [e.message] : []));
}

describe('PrefillMachine', () => {
  it('streams checksummed chunks as the prompt is computed, claims it in KvDone, and frees its pages on Ack', () => {
    const s = setup();
    expect(s.prefill()).toEqual([]);
    expect(s.pool.ledger.counts().allocated).toBe(2);
    const first = s.compute(0, 3);
    expect(sent(first, D).map((m) => m.type === 'KvChunk' && [m.seq, m.tag.page, m.firstSlot, m.numSlots])).toEqual([
      [0, 0, 0, 3],
    ]);
    const last = s.compute(3, 6, true);
    expect(
      sent(last, D).map((m) => (m.type === 'KvChunk' ? [m.seq, m.tag.page, m.firstSlot, m.numSlots] : m.type)),
    ).toEqual([[1, 0, 3, 1], [2, 1, 0, 2], 'KvDone']);
    const decoded = [...s.deliver(first), ...s.deliver(last)];
    expect(decoded).toContainEqual(expect.objectContaining({ kind: 'startDecoding', firstToken: 42 }));
    expect(firstForeignPosition(s.dpool, 'r1', s.dstTags, 6)).toBe(-1);
    expect(s.p.stateOf(s.rid)).toBe('Released');
    expect(s.pool.ledger.counts().free).toBe(8);
  });

  it('rejects at admission before any page or byte, and tells decode it will never write', () => {
    const s = setup({ numPages: 1 });
    const effects = s.prefill();
    expect(sent(effects, R)).toEqual([expect.objectContaining({ type: 'Rejected', code: 'pool_too_small' })]);
    expect(sent(effects, D)).toEqual([{ type: 'AbortAck', rid: 'r1' }]);
    expect(s.pool.ledger.counts().free).toBe(1);
    s.deliver(effects);
    expect(s.d.stateOf(s.rid)).toBe('Released');
    expect(s.dpool.ledger.counts().free).toBe(8);
  });

  it('placeholder-done (the incident) sends the first page only and claims the whole prompt; decode refuses it', () => {
    const s = setup({ faults: ['placeholder-done'] });
    s.prefill();
    const effects = s.compute(0, 6, true);
    const chunks = sent(effects, D).filter((m) => m.type === 'KvChunk');
    expect(chunks).toHaveLength(1);
    expect(sent(effects, D).at(-1)).toMatchObject({ type: 'KvDone', tokensCovered: 6 });
    const decoded = s.deliver(effects);
    expect(decoded.some((e) => e.kind === 'startDecoding')).toBe(false);
    expect(sent(decoded, R)).toEqual([
      expect.objectContaining({ type: 'Failed', message: expect.stringContaining('stamps cover 4 of') }),
    ]);
  });

  it('corrupt-chunk flips a bit after the checksum; decode fails the transfer closed', () => {
    const s = setup({ faults: ['corrupt-chunk'] });
    s.prefill();
    const decoded = s.deliver(s.compute(0, 6, true));
    expect(s.d.stats().checksumFailures).toBe(1);
    expect(decoded.some((e) => e.kind === 'startDecoding')).toBe(false);
  });

  it('on Abort while a step is in flight, waits for the step to stop before acking and freeing', () => {
    for (const faults of [[], ['drop-abort-ack']] as FaultName[][]) {
      const s = setup({ faults });
      s.prefill();
      s.compute(0, 3);
      s.host.stopping = true;
      expect(
        s.p.handle(0, {
          kind: 'received',
          from: R,
          message: { type: 'Abort', rid: s.rid, reason: 'client-disconnect' },
        }),
      ).toEqual([]);
      expect(s.p.stateOf(s.rid)).toBe('Aborting');
      s.host.release({ rid: s.rid, tenant: asTenantId('t0') }); // the step ended: the pages are back
      const acks = s.p.handle(0, { kind: 'computeStopped', rid: s.rid });
      expect(s.p.stateOf(s.rid)).toBe('Aborted');
      expect(acks.map((e) => e.kind === 'send' && [e.to, e.message.type])).toEqual(
        faults.length === 0
          ? [
              [D, 'AbortAck'],
              [R, 'AbortAck'],
            ]
          : [],
      );
    }
  });

  it('frees its pages when no Ack comes within ackMs, and ends a transfer whose chunks a closed connection carried', () => {
    const s = setup();
    s.prefill();
    s.compute(0, 6, true);
    expect(s.p.wakeAtMs()).toBe(30);
    s.p.handle(30, { kind: 'tick' });
    expect(s.p.stateOf(s.rid)).toBe('Released');
    expect(s.pool.ledger.counts().free).toBe(8);

    // Chunks went out on the connection that closed: the transfer ends, the router is told, and
    // decode is told on the next connection (it may have seen none of them).
    const c = setup();
    c.prefill();
    c.compute(0, 3);
    const effects = c.p.handle(1, { kind: 'closed', peer: D, reason: 'reset' });
    expect(sent(effects, R)).toEqual([expect.objectContaining({ type: 'Failed', code: 'transfer_failed' })]);
    expect(sent(effects, D)).toEqual([{ type: 'AbortAck', rid: 'r1' }]);
    expect(c.pool.ledger.counts().free).toBe(8);
    // Nothing was sent yet: the transfer goes on over the next connection.
    const n = setup();
    n.prefill();
    expect(n.p.handle(1, { kind: 'closed', peer: D, reason: 'reset' })).toEqual([]);
    expect(n.p.stateOf(n.rid)).toBe('Computing');
  });

  it('refuses a Prefill that arrives after its Abort', () => {
    const s = setup();
    s.p.handle(0, { kind: 'received', from: R, message: { type: 'Abort', rid: s.rid, reason: 'router' } });
    expect(s.prefill()).toEqual([]);
    expect(s.pool.ledger.counts().free).toBe(8);
  });
});
