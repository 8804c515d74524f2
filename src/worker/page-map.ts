// The page map of one worker (src/core's NodePageMap): every page's state, holder and epoch read
// from the ledger, plus what the role adds (transfers in flight, quarantined pages and why, its
// totals), the step loop's counters and the pool's cache tiers (tier-views.ts: pool, disk, peer).
// Every role's `pageMap()` calls `nodePageMap`.
// Owner thread: it reads the ledger on the thread that owns it (the one that runs the loop and the
// machines), synchronously, so the snapshot is one consistent moment. Must never change anything.
import {
  assertNever,
  type NodePageMap,
  type PageHolder,
  type PageId,
  type PageLetter,
  type PageState,
  type QuarantineView,
  type SpeculationView,
  type TierView,
  type TransferView,
} from '../core/index.js';
import type { PagePool } from '../pages/index.js';
import type { DraftModelStats, EngineLoopStats } from '../engine/index.js';
import { tiersOf } from './tier-views.js';

const LETTER: Readonly<Record<PageState, PageLetter>> = { free: 'f', allocated: 'a', cached: 'c', quarantined: 'q' };

export interface NodePageMapParts {
  readonly role: NodePageMap['role'];
  readonly node: string;
  readonly pool: PagePool;
  readonly loop: EngineLoopStats;
  readonly running: number;
  readonly waiting: number;
  readonly transfers: readonly TransferView[];
  readonly quarantined: readonly QuarantineView[];
  readonly totals: Readonly<Record<string, number>>;
  readonly speculation?: SpeculationView;
}

export function nodePageMap(p: NodePageMapParts): NodePageMap {
  const { ledger } = p.pool;
  const holders: PageHolder[] = [];
  const holderIndex = new Map<string, number>();
  const indexOf = (holder: PageHolder): number => {
    const key = `${holder.tenant}\u0000${holder.rid ?? ''}`;
    let index = holderIndex.get(key);
    if (index === undefined) {
      index = holders.push(holder) - 1;
      holderIndex.set(key, index);
    }
    return index;
  };
  let states = '';
  const epochs: number[] = [];
  const holderOf: (number | null)[] = [];
  for (let page = 0; page < ledger.numPages; page++) {
    const e = ledger.entry(page as PageId);
    states += LETTER[e.state];
    epochs.push(e.epoch);
    switch (e.state) {
      case 'free':
        holderOf.push(null);
        break;
      case 'allocated':
      case 'quarantined':
        holderOf.push(indexOf({ tenant: e.tenant, rid: e.rid }));
        break;
      case 'cached':
        holderOf.push(indexOf({ tenant: e.tenant, rid: null }));
        break;
      default:
        assertNever(e, 'page entry');
    }
  }
  return {
    kind: 'node',
    role: p.role,
    node: p.node,
    pageSize: p.pool.pageSize,
    numPages: ledger.numPages,
    states,
    epochs,
    holderOf,
    holders,
    transfers: p.transfers,
    quarantined: p.quarantined,
    running: p.running,
    waiting: p.waiting,
    loop: {
      numSteps: p.loop.numSteps,
      numTokensSampled: p.loop.numTokensSampled,
      stepMsTotal: p.loop.stepMsTotal,
      numItemsStepped: p.loop.numItemsStepped,
    },
    totals: p.totals,
    ...tierField(p.pool),
    ...(p.speculation === undefined ? {} : { speculation: p.speculation }),
  };
}

/** The pool's cache tiers (tier-views.ts), when anything keeps one over it. */
function tierField(pool: PagePool): { readonly tiers?: readonly TierView[] } {
  const tiers = tiersOf(pool);
  return tiers === undefined ? {} : { tiers };
}

/** A machine's abortsByState as dashboard totals: `aborts <state>`. */
export function abortTotals(abortsByState: Readonly<Record<string, number>>): Record<string, number> {
  return Object.fromEntries(Object.entries(abortsByState).map(([state, n]) => [`aborts ${state}`, n]));
}

/** A speculating node's panel: its scheduler's counts, its loop's rollbacks and its draft model's pool. */
export function speculationView(
  spec: { readonly numDrafted: number; readonly numAccepted: number },
  numRolledBack: number,
  draft: DraftModelStats | undefined,
): SpeculationView {
  return {
    drafter: draft === undefined ? 'lookup' : 'model',
    drafted: spec.numDrafted,
    accepted: spec.numAccepted,
    rolledBack: numRolledBack,
    ...(draft === undefined
      ? {}
      : { draftPool: { pagesHeld: draft.numPagesHeld, numPages: draft.numPages, paused: draft.paused } }),
  };
}
