// The page map reads the ledger page by page: one letter, epoch and holder per page, with exact
// page ids, in an 8-page pool taken through allocate, cache and quarantine.
import { describe, expect, it } from 'vitest';
import { asRequestId, asTenantId } from '../core/index.js';
import { PagePool } from '../pages/index.js';
import { abortTotals, nodePageMap } from './page-map.js';

const LOOP = {
  numSteps: 4,
  numStepChecks: 0,
  numIdleChecks: 1,
  numTokensSampled: 9,
  stepCost: null,
  lastStepMs: 2,
  stepMsTotal: 12.5,
  numItemsStepped: 10,
  fatal: null,
};

function parts(pool: PagePool) {
  return {
    role: 'decode' as const,
    node: 'd1',
    pool,
    loop: LOOP,
    running: 1,
    waiting: 2,
    transfers: [],
    quarantined: [],
    totals: { x: 1 },
  };
}

describe('nodePageMap', () => {
  it('a fresh pool: every page free, epoch 0, no holder', () => {
    const map = nodePageMap(
      parts(PagePool.create({ numPages: 8, pageSize: 4, numLayers: 1, numKvHeads: 1, headDim: 2 })),
    );
    expect(map).toMatchObject({
      kind: 'node',
      role: 'decode',
      node: 'd1',
      numPages: 8,
      pageSize: 4,
      states: 'ffffffff',
      holders: [],
      running: 1,
      waiting: 2,
    });
    expect(map.epochs).toEqual([0, 0, 0, 0, 0, 0, 0, 0]);
    expect(map.holderOf).toEqual([null, null, null, null, null, null, null, null]);
    expect(map.loop).toEqual({ numSteps: 4, numTokensSampled: 9, stepMsTotal: 12.5, numItemsStepped: 10 });
  });

  it('shows each page as the ledger holds it: allocated, cached for a tenant, quarantined, free', () => {
    const pool = PagePool.create({ numPages: 8, pageSize: 4, numLayers: 1, numKvHeads: 1, headDim: 2 });
    const a = { rid: asRequestId('a'), tenant: asTenantId('acme') };
    const b = { rid: asRequestId('b'), tenant: asTenantId('globex') };
    const ta = pool.ledger.allocate(3, a);
    const tb = pool.ledger.allocate(2, b);
    if (ta.kind !== 'allocated' || tb.kind !== 'allocated') throw new Error('allocation failed');
    pool.ledger.cache([ta.tags[0]!], a); // page 0
    pool.ledger.quarantine([tb.tags[1]!], b); // page 4
    pool.ledger.free([ta.tags[2]!], a); // page 2
    const map = nodePageMap(parts(pool));
    expect(map.states).toBe('cafaqfff');
    expect(map.epochs).toEqual([1, 2, 3, 4, 5, 0, 0, 0]);
    expect(map.holders).toEqual([
      { tenant: 'acme', rid: null },
      { tenant: 'acme', rid: 'a' },
      { tenant: 'globex', rid: 'b' },
    ]);
    expect(map.holderOf).toEqual([0, 1, null, 2, 2, null, null, null]);
  });

  it('abortTotals names each state', () => {
    expect(abortTotals({ Receiving: 2, AwaitingKv: 1 })).toEqual({ 'aborts Receiving': 2, 'aborts AwaitingKv': 1 });
  });
});
