import { describe, expect, it } from 'vitest';
import {
  asEpoch,
  asPageId,
  asRequestId,
  asTenantId,
  FaultSet,
  InvariantError,
  KV_DTYPES,
  NO_FAULTS,
  PageCheckError,
  type PageCheckFailure,
  type Tag,
} from '../core/index.js';
import { elementsPerPage, type KvShape } from './kv-layout.js';
import type { AllocateResult, Owner } from './page-entry.js';
import { PagePool } from './pool.js';

const A: Owner = { rid: asRequestId('a'), tenant: asTenantId('t1') };
const B: Owner = { rid: asRequestId('b'), tenant: asTenantId('t1') };
const C: Owner = { rid: asRequestId('c'), tenant: asTenantId('t2') };
const SHAPE: KvShape = { numPages: 11, pageSize: 4, numLayers: 2, numKvHeads: 1, headDim: 2 };
const SKIP_PAGE_CHECK = new FaultSet(['skip-page-check']);
const CANARY = 7;

function tagsOf(result: AllocateResult): Tag[] {
  if (result.kind !== 'allocated') throw new Error(`expected pages, got ${JSON.stringify(result)}`);
  return [...result.tags];
}

/** Writes `value` into every float of the page and stamps it full, as a forward step would. */
function fill(pool: PagePool, writer: Owner, tag: Tag, value: number): void {
  pool.checkWrite(writer, [tag]);
  const perPage = elementsPerPage(pool.kv);
  pool.kv.data.fill(value, tag.page * perPage, (tag.page + 1) * perPage);
  pool.stamp(tag, pool.pageSize);
}

/** What a reader would compute from: the page's elements (f32, f16 bits, or q8_0 bytes), read only after the check passes. */
function readPage(pool: PagePool, reader: Owner, tag: Tag, numSlots: number): Float32Array | Uint16Array | Uint8Array {
  pool.checkRead(reader, [tag], numSlots);
  const bytes = pool.gatherSlots(tag.page, 0, numSlots);
  if (pool.kv.dtype === 'q8_0') return bytes;
  return pool.kv.dtype === 'f16'
    ? new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2)
    : new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4);
}

function failureOf(action: () => unknown): PageCheckFailure | 'passed' {
  try {
    action();
    return 'passed';
  } catch (error) {
    if (error instanceof PageCheckError) return error.failure;
    throw error;
  }
}

interface StaleRead {
  readonly name: string;
  readonly failure: PageCheckFailure;
  /** Sets the scene in a pool with the given faults; returns the read that must not happen. */
  readonly build: (pool: PagePool) => () => Float32Array | Uint16Array | Uint8Array;
}

const STALE_READS: readonly StaleRead[] = [
  {
    name: 'a page allocated in this epoch but never written (the incident)',
    failure: 'stamp-epoch',
    build: (pool) => {
      const all = tagsOf(pool.ledger.allocate(11, A));
      fill(pool, A, all[0] as Tag, CANARY);
      pool.ledger.free(all, A);
      const mine = tagsOf(pool.ledger.allocate(11, B)); // page 0 is handed out last (FIFO)
      const stale = mine.find((t) => t.page === 0) as Tag;
      return () => readPage(pool, B, stale, 1);
    },
  },
  {
    name: 'a tag whose epoch is stale (freed and handed out again, to the same request)',
    failure: 'wrong-epoch',
    build: (pool) => {
      const all = tagsOf(pool.ledger.allocate(11, A));
      fill(pool, A, all[0] as Tag, CANARY);
      pool.ledger.free([all[0] as Tag], A);
      tagsOf(pool.ledger.allocate(1, A));
      return () => readPage(pool, A, all[0] as Tag, 4);
    },
  },
  {
    name: "another request's page of the same tenant",
    failure: 'wrong-owner',
    build: (pool) => {
      const [tag] = tagsOf(pool.ledger.allocate(1, A));
      fill(pool, A, tag as Tag, CANARY);
      return () => readPage(pool, B, tag as Tag, 4);
    },
  },
  {
    name: "another tenant's page",
    failure: 'wrong-tenant',
    build: (pool) => {
      const [tag] = tagsOf(pool.ledger.allocate(1, A));
      fill(pool, A, tag as Tag, CANARY);
      return () => readPage(pool, C, tag as Tag, 4);
    },
  },
  {
    name: "the owner's rid under another tenant",
    failure: 'wrong-tenant',
    build: (pool) => {
      const [tag] = tagsOf(pool.ledger.allocate(1, A));
      fill(pool, A, tag as Tag, CANARY);
      return () => readPage(pool, { rid: A.rid, tenant: C.tenant }, tag as Tag, 4);
    },
  },
  {
    name: 'a stamp that does not cover the slots read',
    failure: 'stamp-coverage',
    build: (pool) => {
      const all = tagsOf(pool.ledger.allocate(11, A));
      fill(pool, A, all[0] as Tag, CANARY);
      pool.ledger.free(all, A);
      const stale = tagsOf(pool.ledger.allocate(11, B)).find((t) => t.page === 0) as Tag;
      pool.stamp(stale, 2); // B wrote slots 0 and 1; slots 2 and 3 still hold A's data
      return () => readPage(pool, B, stale, 3);
    },
  },
  {
    name: 'a freed page',
    failure: 'not-allocated',
    build: (pool) => {
      const [tag] = tagsOf(pool.ledger.allocate(1, A));
      fill(pool, A, tag as Tag, CANARY);
      pool.ledger.free([tag as Tag], A);
      return () => readPage(pool, A, tag as Tag, 4);
    },
  },
  {
    name: 'a quarantined page',
    failure: 'not-allocated',
    build: (pool) => {
      const [tag] = tagsOf(pool.ledger.allocate(1, A));
      fill(pool, A, tag as Tag, CANARY);
      pool.ledger.quarantine([tag as Tag], A);
      return () => readPage(pool, A, tag as Tag, 4);
    },
  },
  {
    name: 'a cached page the reader holds no reference to',
    failure: 'wrong-owner',
    build: (pool) => {
      const [tag] = tagsOf(pool.ledger.allocate(1, A));
      fill(pool, A, tag as Tag, CANARY);
      pool.ledger.cache([tag as Tag], A);
      return () => readPage(pool, B, tag as Tag, 4);
    },
  },
];

// Every stale read, in a pool of each KV dtype: the checks do not depend on what a page stores.
const STALE_READS_BY_DTYPE = KV_DTYPES.flatMap((dtype) => STALE_READS.map((r) => ({ ...r, dtype })));

describe.each(STALE_READS_BY_DTYPE)('reading $name ($dtype KV)', ({ failure, build, dtype }) => {
  it(`fails closed with PageCheckError (${failure}) and reads nothing`, () => {
    const pool = PagePool.create({ ...SHAPE, dtype });
    expect(pool.kv.dtype).toBe(dtype);
    const read = build(pool);
    expect(failureOf(read)).toBe(failure);
    expect(pool.numCheckFailures).toBe(1);
    pool.checkIntegrity();
  });

  it('goes through, returning the earlier data, when skip-page-check is on (negative control)', () => {
    const pool = PagePool.create({ ...SHAPE, dtype }, SKIP_PAGE_CHECK);
    const read = build(pool);
    expect(failureOf(read)).toBe('passed');
    expect([...read()].every((x) => x === CANARY)).toBe(true);
  });
});

describe('PagePool.checkRead', () => {
  it('names the page, what it expected and what it found', () => {
    const pool = PagePool.create(SHAPE);
    const [tag] = tagsOf(pool.ledger.allocate(1, A));
    expect(() => pool.checkRead(C, [tag as Tag], 1)).toThrow(
      'read check failed (wrong-tenant) on page 0: expected allocated to or cached and referenced by c (tenant t2) in epoch 1, found allocated to a (tenant t1) in epoch 1',
    );
    expect(() => pool.checkRead(A, [tag as Tag], 1)).toThrow(
      'read check failed on page 0: expected a stamp of epoch 1 covering 1 slot(s), found a stamp of epoch 0 covering 0 slot(s)',
    );
  });

  it('passes for the owner in the current epoch, checking exactly the pages that hold the slots read', () => {
    const pool = PagePool.create(SHAPE);
    const table = tagsOf(pool.ledger.allocate(4, A)); // pages 0..3; page 3 reserved, not yet written
    pool.stamp(table[0] as Tag, 4);
    pool.stamp(table[1] as Tag, 4);
    pool.stamp(table[2] as Tag, 1);
    expect(failureOf(() => pool.checkRead(A, table, 0))).toBe('passed');
    expect(failureOf(() => pool.checkRead(A, table, 9))).toBe('passed');
    expect(failureOf(() => pool.checkRead(A, table, 10))).toBe('stamp-coverage');
    expect(() => pool.checkRead(A, table.slice(0, 2), 9)).toThrow(InvariantError);
  });

  it('lets readers of the same tenant that hold a reference read a cached page, and nobody write it', () => {
    const pool = PagePool.create(SHAPE);
    const [tag] = tagsOf(pool.ledger.allocate(1, A));
    fill(pool, A, tag as Tag, CANARY);
    pool.ledger.cache([tag as Tag], A);
    pool.ledger.ref([tag as Tag], B);
    expect([...readPage(pool, B, tag as Tag, 4)]).toEqual(new Array(32).fill(CANARY));
    expect(failureOf(() => pool.checkWrite(B, [tag as Tag]))).toBe('read-only');
  });
});

describe('PagePool.checkWrite', () => {
  it('passes for the owner in the current epoch and refuses everyone else', () => {
    const pool = PagePool.create(SHAPE);
    const [mine, quarantined] = tagsOf(pool.ledger.allocate(2, A));
    pool.ledger.quarantine([quarantined as Tag], A);
    expect(failureOf(() => pool.checkWrite(A, [mine as Tag]))).toBe('passed');
    expect(failureOf(() => pool.checkWrite(B, [mine as Tag]))).toBe('wrong-owner');
    expect(failureOf(() => pool.checkWrite(C, [mine as Tag]))).toBe('wrong-tenant');
    expect(failureOf(() => pool.checkWrite(A, [{ page: (mine as Tag).page, epoch: asEpoch(9) }]))).toBe('wrong-epoch');
    expect(failureOf(() => pool.checkWrite(A, [quarantined as Tag]))).toBe('not-allocated');
    // A tag from a peer may name any page: out of range is a refusal, not a crash.
    expect(failureOf(() => pool.checkWrite(A, [{ page: asPageId(99), epoch: asEpoch(1) }]))).toBe('not-allocated');
    expect(pool.numCheckFailures).toBe(5);
  });

  it("lets a late frame write another request's page when skip-page-check is on (negative control)", () => {
    const pool = PagePool.create(SHAPE, SKIP_PAGE_CHECK);
    const [mine] = tagsOf(pool.ledger.allocate(1, A));
    expect(failureOf(() => pool.checkWrite(B, [mine as Tag]))).toBe('passed');
  });
});

describe('PagePool.stamp', () => {
  it('records the epoch and filled slots; a new epoch starts from the old stamp, never from its coverage', () => {
    const pool = PagePool.create(SHAPE);
    const [first] = tagsOf(pool.ledger.allocate(1, A));
    pool.stamp(first as Tag, 3);
    pool.stamp(first as Tag, 4);
    expect(pool.stampOf(asPageId(0))).toEqual({ epoch: 1, filledSlots: 4 });
    expect(() => pool.stamp(first as Tag, 2)).toThrow(/would shrink from 4 to 2/);
    pool.ledger.free([first as Tag], A);
    expect(() => pool.stamp(first as Tag, 4)).toThrow(/not allocated in epoch 1/);
    const again = tagsOf(pool.ledger.allocate(11, B)).find((t) => t.page === 0) as Tag;
    expect(pool.isWritten(again, 1)).toBe(false);
    pool.stamp(again, 1);
    expect(pool.stampOf(asPageId(0))).toEqual({ epoch: 12, filledSlots: 1 });
    expect(() => pool.stamp(again, 5)).toThrow(InvariantError);
    pool.checkIntegrity();
  });

  it('refuses a stamp on a cached page: cached data never changes', () => {
    const pool = PagePool.create(SHAPE);
    const [tag] = tagsOf(pool.ledger.allocate(1, A));
    pool.stamp(tag as Tag, 4);
    pool.ledger.cache([tag as Tag], A);
    expect(() => pool.stamp(tag as Tag, 4)).toThrow(InvariantError);
  });
});

describe('PagePool construction', () => {
  it('refuses storage of the wrong size and a ledger of another size', () => {
    expect(() => new PagePool({ kv: { ...SHAPE, dtype: 'f32', data: new Float32Array(10) } })).toThrow(/needs 352/);
    const pool = PagePool.create(SHAPE, NO_FAULTS);
    expect(() => new PagePool({ kv: pool.kv, ledger: PagePool.create({ ...SHAPE, numPages: 3 }).ledger })).toThrow(
      /ledger has 3 pages/,
    );
  });
});
