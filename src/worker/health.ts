// The /health fields every worker role reports the same way: its pool, and its step loop.
// Must never compute anything: it only reads counters the pool and the loop keep.
import type { PagePool } from '../pages/index.js';
import type { EngineLoopStats } from './engine-loop.js';

/** The pool's shape and the ledger's counts (pages per state, last epoch, page-check failures). */
export function poolHealth(pool: PagePool): Record<string, unknown> {
  return {
    pageSize: pool.pageSize,
    kvPages: pool.ledger.numPages,
    kvBytesPerToken: pool.slotRangeBytes(1),
    pages: pool.ledger.counts(),
    lastEpoch: pool.ledger.lastEpoch,
    tagMismatches: pool.numCheckFailures,
  };
}

/** Steps taken and integrity checks run; `fatal` once the loop stopped on a bug. */
export function loopHealth(loop: EngineLoopStats, checkEveryStep: boolean): Record<string, unknown> {
  return {
    steps: loop.numSteps,
    integrityChecksAfterStep: loop.numStepChecks,
    integrityChecksWhenIdle: loop.numIdleChecks,
    checkEveryStep,
    ...(loop.fatal === null ? {} : { fatal: loop.fatal }),
  };
}
