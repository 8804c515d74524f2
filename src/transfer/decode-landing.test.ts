// DecodeMachine receiving KvChunks as they come off the wire (chunkBegin, chunkPiece..., chunkEnd)
// against its reference, the same frames whole (`received`): the same pages, stamps, effects
// and trace, whatever the pieces. And the order of the defences: no byte lands before the
// header checks pass, none lands in a page the request no longer holds, none lands over
// verified slots, and nothing is stamped before the checksum verifies.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  asEpoch,
  asPageId,
  asRequestId,
  asTenantId,
  FaultSet,
  samplingParams,
  type FaultName,
  type PageId,
  type Tag,
} from '../core/index.js';
import { createKvView, PagePool, type KvShape } from '../pages/index.js';
import { DecodeMachine } from './decode-machine.js';
import type { DecodeEffect, DecodeInput } from './decode-types.js';
import { chunkChecksum, promptDigest, TransferDigest } from './digests.js';
import { LedgerDecodeHost } from './hosts.js';
import type { KvChunk, KvChunkHead, KvDone, Message } from './messages.js';
import type { TraceEvent } from './trace.js';

const R = 'router';
const P = 'p0';
/** 3 layers, K and V, 6 floats per slot: a 2-slot range is 6 runs of 48 bytes, not contiguous in the page. */
const SHAPE: KvShape = { numPages: 8, pageSize: 4, numLayers: 3, numKvHeads: 2, headDim: 3 };
const TOKENS = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14]; // 10 tokens: pages of 4, 4 and 2 slots
const CHUNK_SLOTS = 2;

/**
 * A pool that checks every piece as it lands against what the test says is being received:
 * the page is allocated to that request in the frame's epoch, and no stamp of that epoch
 * covers the slots written. Violations are recorded, not thrown (the negative control counts them).
 */
class CheckedPool extends PagePool {
  receiving: { readonly rid: string; readonly tag: Tag } | undefined;
  readonly violations: string[] = [];
  numPieces = 0;

  override scatterSlotsPiece(
    page: PageId,
    firstSlot: number,
    numSlots: number,
    payloadOffset: number,
    piece: Uint8Array,
  ): void {
    this.numPieces++;
    const e = this.ledger.entry(page);
    const want = this.receiving;
    if (
      want === undefined ||
      want.tag.page !== page ||
      e.state !== 'allocated' ||
      e.rid !== want.rid ||
      e.epoch !== want.tag.epoch
    ) {
      this.violations.push(
        `piece landed in page ${page} (${e.state}${e.state === 'allocated' ? ` to ${e.rid} epoch ${e.epoch}` : ''}) while receiving ${JSON.stringify(want)}`,
      );
    }
    const stamp = this.stampOf(page);
    if (stamp.epoch === e.epoch && firstSlot < stamp.filledSlots)
      this.violations.push(`piece landed over verified slots [${firstSlot}, ${stamp.filledSlots}) of page ${page}`);
    super.scatterSlotsPiece(page, firstSlot, numSlots, payloadOffset, piece);
  }
}

function setup(faultNames: FaultName[] = [], numPages = SHAPE.numPages) {
  const faults = new FaultSet(faultNames);
  const pool = new CheckedPool({ kv: createKvView({ ...SHAPE, numPages }), faults });
  const trace: TraceEvent[] = [];
  const m = new DecodeMachine({
    node: 'd0',
    host: new LedgerDecodeHost({ pool, model: '5eed5eed5eed5eed', contextLength: 64, faults }),
    faults,
    trace: { emit: (e) => trace.push(e) },
  });
  const step = (input: DecodeInput): DecodeEffect[] => m.handle(0, input);
  const recv = (from: string, message: Message) => step({ kind: 'received', from, message });
  const reserve = (rid: string, prefill = P): Tag[] => {
    const effects = recv(R, {
      type: 'Reserve',
      rid: asRequestId(rid),
      tenant: asTenantId('t0'),
      promptTokens: TOKENS.length,
      promptDigest: promptDigest(TOKENS),
      sampling: samplingParams({ maxTokens: 2 }),
      prefillAddress: prefill,
    });
    const reply = sent(effects, R)[0];
    return reply?.type === 'Reserved' ? [...reply.tags] : [];
  };
  /** Delivers a KvChunk as the transport does when it streams: header, pieces cut at `cuts`, end. */
  const stream = (
    from: string,
    c: KvChunk,
    cuts: readonly number[] = [],
    between?: (pieceIndex: number) => void,
  ): DecodeEffect[] => {
    const { payload, ...fields } = c;
    pool.receiving = { rid: c.rid, tag: c.tag };
    const effects = step({ kind: 'chunkBegin', from, head: { ...fields, payloadBytes: payload.length } });
    const points = [
      0,
      ...[...new Set(cuts)].filter((x) => x > 0 && x < payload.length).sort((a, b) => a - b),
      payload.length,
    ];
    for (let i = 1; i < points.length; i++) {
      if (i > 1) between?.(i - 1);
      effects.push(...step({ kind: 'chunkPiece', from, bytes: payload.subarray(points[i - 1], points[i]) }));
    }
    effects.push(...step({ kind: 'chunkEnd', from }));
    return effects;
  };
  const whole = (from: string, c: KvChunk): DecodeEffect[] => {
    pool.receiving = { rid: c.rid, tag: c.tag };
    return recv(from, c);
  };
  const poolBytes = (): Uint8Array => new Uint8Array(pool.kv.data.buffer.slice(0));
  return { pool, m, trace, step, recv, reserve, stream, whole, poolBytes };
}

function sent(effects: readonly DecodeEffect[], to: string): Message[] {
  return effects.flatMap((e) => (e.kind === 'send' && e.to === to ? [e.message] : []));
}

/** What an honest prefill sends for rid into dstTags: chunks of CHUNK_SLOTS slots of KV made from (rid, position). */
function frames(rid: string, dstTags: readonly Tag[]): { chunks: KvChunk[]; done: KvDone } {
  const src = PagePool.create({ ...SHAPE, numPages: 3 });
  src.kv.data.forEach(
    (_, i) => (src.kv.data[i] = ((i * 2654435761 + rid.length * 97 + rid.charCodeAt(rid.length - 1)) % 100_003) + 1),
  );
  const digest = new TransferDigest();
  const chunks: KvChunk[] = [];
  for (let pos = 0, seq = 0; pos < TOKENS.length; seq++) {
    const index = Math.floor(pos / SHAPE.pageSize);
    const firstSlot = pos % SHAPE.pageSize;
    const numSlots = Math.min(CHUNK_SLOTS, TOKENS.length - pos);
    const header = {
      rid: asRequestId(rid),
      seq,
      tag: dstTags[index] as Tag,
      firstSlot,
      numSlots,
      kvDtype: src.kv.dtype,
    };
    const payload = src.gatherSlots(asPageId(index), firstSlot, numSlots);
    const checksum = chunkChecksum(header, payload);
    digest.add(checksum);
    chunks.push({ type: 'KvChunk', ...header, checksum, payload });
    pos += numSlots;
  }
  return {
    chunks,
    done: {
      type: 'KvDone',
      rid: asRequestId(rid),
      numChunks: chunks.length,
      tokensCovered: TOKENS.length,
      digest: digest.hex(),
      promptDigest: promptDigest(TOKENS),
      model: '5eed5eed5eed5eed',
      firstToken: 42,
      firstLogprobs: [],
    },
  };
}

/** Everything a run leaves behind that the two delivery paths must agree on. */
function outcome(d: ReturnType<typeof setup>, effects: readonly DecodeEffect[]) {
  return {
    effects,
    trace: d.trace,
    bytes: Buffer.from(d.poolBytes()).toString('base64'),
    stamps: Array.from({ length: d.pool.ledger.numPages }, (_, p) => d.pool.stampOf(asPageId(p))),
    stats: d.m.stats(),
    ledger: d.pool.ledger.counts(),
  };
}

describe('DecodeMachine: a KvChunk in pieces lands exactly as the whole frame does', () => {
  it('for any cuts of every chunk of a transfer, and verifies it', () => {
    const reference = setup();
    const tags = reference.reserve('r1');
    const { chunks, done } = frames('r1', tags);
    const refEffects = [...chunks.flatMap((c) => reference.whole(P, c)), ...reference.recv(P, done)];
    expect(refEffects).toContainEqual(expect.objectContaining({ kind: 'startDecoding', rid: 'r1' }));
    const want = outcome(reference, refEffects);
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.nat(chunks[0]?.payload.length ?? 1), { maxLength: 6 }), {
          minLength: chunks.length,
          maxLength: chunks.length,
        }),
        (cutsPerChunk) => {
          const d = setup();
          d.reserve('r1');
          const effects = [...chunks.flatMap((c, i) => d.stream(P, c, cutsPerChunk[i])), ...d.recv(P, done)];
          expect(outcome(d, effects)).toEqual(want);
          expect(d.pool.violations).toEqual([]);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('for a chunk cut at every single byte boundary', () => {
    const reference = setup();
    const tags = reference.reserve('r1');
    const { chunks } = frames('r1', tags);
    const [first, second] = chunks as [KvChunk, KvChunk];
    reference.whole(P, first);
    reference.whole(P, second);
    const want = outcome(reference, []);
    for (let cut = 1; cut < second.payload.length; cut++) {
      const d = setup();
      d.reserve('r1');
      d.stream(P, first);
      d.stream(P, second, [cut]);
      expect(outcome(d, [])).toEqual(want);
    }
  });

  it('keeps the chunks of two writers apart when their pieces interleave', () => {
    const d = setup();
    const one = frames('r1', d.reserve('r1', 'p0'));
    const two = frames('r2', d.reserve('r2', 'p1'));
    d.pool.receiving = undefined; // two frames at once: the instrumented pool cannot tell which; the machine can
    const head = (c: KvChunk): KvChunkHead => {
      const { payload, ...fields } = c;
      return { ...fields, payloadBytes: payload.length };
    };
    one.chunks.forEach((a, i) => {
      const b = two.chunks[i] as KvChunk;
      d.step({ kind: 'chunkBegin', from: 'p0', head: head(a) });
      d.step({ kind: 'chunkBegin', from: 'p1', head: head(b) });
      d.step({ kind: 'chunkPiece', from: 'p0', bytes: a.payload.subarray(0, 100) });
      d.step({ kind: 'chunkPiece', from: 'p1', bytes: b.payload.subarray(0, 100) });
      d.step({ kind: 'chunkPiece', from: 'p1', bytes: b.payload.subarray(100) });
      d.step({ kind: 'chunkPiece', from: 'p0', bytes: a.payload.subarray(100) });
      d.step({ kind: 'chunkEnd', from: 'p1' });
      d.step({ kind: 'chunkEnd', from: 'p0' });
    });
    const started = [...d.recv('p0', one.done), ...d.recv('p1', two.done)].flatMap((e) =>
      e.kind === 'startDecoding' ? [e.rid] : [],
    );
    expect(started).toEqual(['r1', 'r2']);
    expect(d.m.stats().checksumFailures).toBe(0);
  });
});

describe('DecodeMachine: a corrupted piece fails the transfer closed', () => {
  it('detects a bit flipped in a middle piece, stamps nothing of that chunk, and aborts through the acknowledged path', () => {
    for (const faults of [[], ['skip-checksum']] as FaultName[][]) {
      const d = setup(faults);
      const tags = d.reserve('r1');
      const { chunks, done } = frames('r1', tags);
      d.step({ kind: 'connected', peer: P });
      d.stream(P, chunks[0] as KvChunk);
      const bad = chunks[1] as KvChunk;
      const payload = bad.payload.slice();
      payload[150] = (payload[150] as number) ^ 0x04; // inside the second of three pieces
      const effects = [
        ...d.stream(P, { ...bad, payload }, [100, 200]),
        ...chunks.slice(2).flatMap((c) => d.stream(P, c)),
        ...d.recv(P, done),
      ];
      const decoded = effects.some((e) => e.kind === 'startDecoding');
      expect(decoded).toBe(faults.length > 0); // the negative control decodes corrupted KV
      if (faults.length > 0) continue;
      expect(d.m.stats().checksumFailures).toBe(1);
      expect(sent(effects, R)).toEqual([
        expect.objectContaining({
          type: 'Failed',
          code: 'transfer_failed',
          message: expect.stringContaining('checksum mismatch'),
        }),
      ]);
      expect(sent(effects, P)).toEqual([{ type: 'Abort', rid: 'r1', reason: 'decode-failed' }]);
      expect(d.pool.stampOf((tags[0] as Tag).page)).toEqual({ epoch: (tags[0] as Tag).epoch, filledSlots: 2 }); // chunk 0 only
      expect(d.pool.ledger.counts().quarantined).toBe(3);
      expect(
        d.trace
          .filter((e) => e.kind === 'page' && (e.action === 'write' || e.action === 'stamp'))
          .map((e) => (e.kind === 'page' ? e.action : '')),
      ).toEqual(['write', 'stamp']);
    }
  });
});

describe('DecodeMachine: a frame whose header fails a check never touches the pool', () => {
  /** r1 reserved and its chunk 0 written; returns the frames and tags to spoil. */
  function started(faults: FaultName[] = []) {
    const d = setup(faults);
    const tags = d.reserve('r1');
    const { chunks } = frames('r1', tags);
    d.stream(P, chunks[0] as KvChunk);
    return { d, tags, next: chunks[1] as KvChunk };
  }
  const resign = (c: KvChunk): KvChunk => ({ ...c, checksum: chunkChecksum(c, c.payload) });

  it.each([
    [
      "a tag of a page that is not the request's",
      'drop',
      (c: KvChunk) => resign({ ...c, tag: { page: asPageId(7), epoch: asEpoch(1) } }),
    ],
    [
      'a tag of its own page in a stale epoch',
      'drop',
      (c: KvChunk, tags: Tag[]) =>
        resign({ ...c, tag: { ...(tags[0] as Tag), epoch: asEpoch(((tags[0] as Tag).epoch as number) - 1) } }),
    ],
    ['a gap in seq', 'fail', (c: KvChunk) => resign({ ...c, seq: 2 })],
    [
      'a slot range past the prompt',
      'fail',
      (c: KvChunk, tags: Tag[]) => resign({ ...c, tag: tags[2] as Tag, firstSlot: 2, seq: 1 }),
    ],
    [
      "a payload that is not the slot range's size",
      'fail',
      (c: KvChunk) => resign({ ...c, payload: c.payload.subarray(0, 100) }),
    ],
    ['a range over slots already verified', 'fail', (c: KvChunk) => resign({ ...c, firstSlot: 1 })],
  ] as const)('%s (%s)', (_what, verdict, spoil) => {
    const { d, tags, next } = started();
    const before = d.poolBytes();
    const pieces = d.pool.numPieces;
    const effects = d.stream(P, spoil(next, tags), [64, 128]);
    expect(d.poolBytes()).toEqual(before);
    expect(d.pool.numPieces).toBe(pieces);
    expect(d.m.stats().framesWritten).toBe(1);
    if (verdict === 'drop')
      expect(d.trace.at(-1)).toMatchObject({ kind: 'drop', message: 'KvChunk', why: expect.stringMatching(/^tag: /) });
    else expect(sent(effects, R)).toEqual([expect.objectContaining({ type: 'Failed', code: 'transfer_failed' })]);
  });

  it("negative control: with skip-tag-check, the frame for a page that is not the request's lands in it", () => {
    const { d, next } = started(['skip-tag-check']);
    const before = d.poolBytes();
    d.stream(P, resign({ ...next, tag: { page: asPageId(7), epoch: asEpoch(1) } }), [64, 128]);
    expect(d.poolBytes()).not.toEqual(before);
  });
});

describe('DecodeMachine: every piece lands only in a page held for the frame, over no verified slot', () => {
  /** A transfer, then a late frame of an earlier owner of the same page replayed into it. */
  function replay(faults: FaultName[]) {
    const d = setup(faults, 3);
    const old = d.reserve('r1');
    d.recv(R, { type: 'Abort', rid: asRequestId('r1'), reason: 'router' });
    d.recv(P, { type: 'AbortAck', rid: asRequestId('r1') });
    const tags = d.reserve('r2'); // the same pages, new epochs
    expect(tags.map((t) => t.page)).toEqual(old.map((t) => t.page));
    const { chunks, done } = frames('r2', tags);
    d.stream(P, chunks[0] as KvChunk, [50]);
    const late = frames('r1', old).chunks[1] as KvChunk;
    d.stream(
      P,
      {
        ...late,
        rid: asRequestId('r2'),
        seq: 1,
        checksum: chunkChecksum({ ...late, rid: asRequestId('r2'), seq: 1 }, late.payload),
      },
      [10, 90],
    );
    for (const c of chunks.slice(1)) d.stream(P, c, [33]);
    d.recv(P, done);
    return d;
  }

  it('holds on every piece of a transfer with a replayed late frame in the middle', () => {
    const d = replay([]);
    expect(d.pool.numPieces).toBeGreaterThan(5);
    expect(d.pool.violations).toEqual([]);
  });

  it('negative control: with skip-tag-check the replayed frame lands in a page not held for it in its epoch, and the instrumented pool sees it', () => {
    const d = replay(['skip-tag-check']);
    expect(d.pool.violations).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/piece landed in page \d+ \(allocated to r2 epoch \d+\) while receiving .*"epoch":1/),
      ]),
    );
  });
});

describe('DecodeMachine: a request that ends while a chunk of it arrives', () => {
  it('lands no piece after an Abort, even when free-before-ack gives its pages to another request', () => {
    for (const faults of [[], ['free-before-ack']] as FaultName[][]) {
      const d = setup(faults);
      const tags = d.reserve('r1');
      const { chunks } = frames('r1', tags);
      d.stream(P, chunks[0] as KvChunk);
      let after: Uint8Array | undefined;
      d.stream(P, chunks[1] as KvChunk, [100, 200], (i) => {
        if (i !== 1) return;
        d.recv(R, { type: 'Abort', rid: asRequestId('r1'), reason: 'client-disconnect' });
        if (faults.length > 0) expect(d.reserve('r9')).toHaveLength(3); // r1's pages, freed early
        after = d.poolBytes();
      });
      expect(d.poolBytes()).toEqual(after);
      expect(d.trace.at(-1)).toMatchObject({ kind: 'drop', rid: 'r1', message: 'KvChunk', why: 'state' });
      expect(d.pool.stampOf((tags[0] as Tag).page).filledSlots).toBe(2); // chunk 0 only
      expect(d.pool.violations).toEqual([]);
    }
  });

  it('forgets a chunk cut off by its connection closing, and takes the next one on a new connection', () => {
    const d = setup();
    const one = d.reserve('r1');
    const two = d.reserve('r2');
    const first = frames('r1', one).chunks[0] as KvChunk;
    const { payload, ...fields } = first;
    d.step({ kind: 'chunkBegin', from: P, head: { ...fields, payloadBytes: payload.length } });
    d.step({ kind: 'chunkPiece', from: P, bytes: payload.subarray(0, 10) });
    const effects = d.step({ kind: 'closed', peer: P, reason: 'reset' });
    expect(sent(effects, R)).toEqual([expect.objectContaining({ type: 'Failed', rid: 'r1' })]);
    expect(d.pool.stampOf((one[0] as Tag).page).epoch).not.toBe((one[0] as Tag).epoch);
    d.step({ kind: 'connected', peer: P });
    const { chunks, done } = frames('r2', two);
    for (const c of chunks) d.stream(P, c, [7]);
    expect(d.recv(P, done)).toContainEqual(expect.objectContaining({ kind: 'startDecoding', rid: 'r2' }));
  });

  it('refuses a piece or an end without a header: the transport broke its contract', () => {
    const d = setup();
    expect(() => d.step({ kind: 'chunkPiece', from: P, bytes: new Uint8Array(1) })).toThrow(/without its header/);
    expect(() => d.step({ kind: 'chunkEnd', from: P })).toThrow(/without its header/);
  });
});
