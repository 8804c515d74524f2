// The /health fields every worker role reports the same way: its pool, and its step loop; and
// the frame both PD roles share around their own fields.
// Must never compute anything: it only reads counters the pool, the loop and the machines keep.
import type { PagePool } from '../pages/index.js';
import type { DraftModelStats, EngineLoopStats } from '../engine/index.js';
import type { PdWorkerOptions } from './pd-common.js';

/** The pool's shape and the ledger's counts (pages per state, last epoch, page-check failures). */
export function poolHealth(pool: PagePool): Record<string, unknown> {
  return {
    pageSize: pool.pageSize,
    kvPages: pool.ledger.numPages,
    kvBytesPerToken: pool.slotRangeBytes(1),
    kvDtype: pool.kv.dtype,
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
    lastStepMs: Math.round(loop.lastStepMs * 10) / 10,
    ...(loop.stepCost === null ? {} : { stepCost: loop.stepCost }),
    ...(loop.fatal === null ? {} : { fatal: loop.fatal }),
  };
}

/**
 * Speculative decoding's counts (co-located and decode): draft tokens verified, accepted, the
 * acceptance rate, and the rejected positions whose stamps were rolled back; null rate before any draft.
 */
export function speculationHealth(
  spec: { readonly numDrafted: number; readonly numAccepted: number },
  numRolledBack: number,
  draftModel?: { readonly name: string; readonly stats: DraftModelStats },
): Record<string, unknown> {
  return {
    speculation: {
      drafter: draftModel === undefined ? 'lookup' : 'model',
      draftTokens: spec.numDrafted,
      acceptedTokens: spec.numAccepted,
      acceptanceRate: spec.numDrafted === 0 ? null : Math.round((spec.numAccepted / spec.numDrafted) * 1000) / 1000,
      rolledBackPositions: numRolledBack,
      ...(draftModel === undefined ? {} : { draftModel: { name: draftModel.name, ...draftModel.stats } }),
    },
  };
}

/** What a PD worker (prefill or decode) reports about itself for pdHealth. */
export interface PdHealthParts {
  readonly role: 'prefill' | 'decode';
  readonly options: PdWorkerOptions;
  readonly address: string;
  readonly pool: PagePool;
  readonly idle: boolean;
  readonly running: number;
  /** Requests its machine is working on. */
  readonly active: number;
  readonly transfer: object;
  readonly transport: object;
  readonly loop: EngineLoopStats;
}

/**
 * A PD worker's /health detail: who it is (role, model and fingerprint, cluster address,
 * limits), its pool, its load, the role's own fields (`own`), its transfer and transport totals,
 * its loop, and the CLI's extra fields.
 */
export function pdHealth(p: PdHealthParts, own: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const o = p.options;
  return {
    role: p.role,
    model: o.modelName,
    modelFingerprint: o.modelFingerprint,
    address: p.address,
    contextLength: o.contextLength,
    ...poolHealth(p.pool),
    idle: p.idle,
    running: p.running,
    ...own,
    active: p.active,
    transfer: p.transfer,
    transport: p.transport,
    ...loopHealth(p.loop, o.checkEveryStep),
    ...o.healthDetail,
  };
}
