// Layer 1: the paged KV pool — ledger (who owns which page, in which epoch), pool (storage,
// stamps, the checks before every read and write), tenant-scoped prefix cache. Pure and
// synchronous; imports only src/core.
export { describeEntry, sameTag } from './page-entry.js';
export type { AllocateResult, HeldPages, Owner, PageEntry } from './page-entry.js';
export { PageLedger } from './ledger.js';
export { PagePool, type PagePoolOptions, type Stamp } from './pool.js';
export { ownershipFailure, type Access, type CheckFailure } from './page-checks.js';
export { PrefixCache, type PrefixCacheOptions, type PrefixMatch } from './prefix-cache.js';
export { PrefixHasher } from './prefix-hash.js';
export type { KvEvent, KvEventRead, KvEventRecord, KvEventSink } from './kv-events.js';
export { KV_EVENT_RING_SIZE, KvEventRing } from './kv-events.js';
export {
  nextPathHash,
  PageSpill,
  pathHashes,
  poolNamespace,
  ROOT_PATH_HASH,
  SPILL_REFUSALS,
  type KvSpill,
  type SpillEntry,
  type SpillLoad,
  type SpillNamespace,
  type SpillRefusal,
  type SpillStats,
  type SpillStore,
  type SpillRoute,
  type SpillRouteHint,
} from './spill-tier.js';
export { LeaseTable, PageLease, type LeaseHost, type LeasedPage } from './lease.js';
export {
  createKvView,
  elementsPerPage,
  gatherSlots,
  kvDimOf,
  kvDtypeOf,
  kvOffset,
  scatterSlots,
  scatterSlotsPiece,
  slotRangeBytes,
  type KvData,
  type KvDtype,
  type KvShape,
  type PagedKvView,
} from './kv-layout.js';
export {
  kvBytesPerPage,
  kvBytesPerToken,
  kvBytesPerTokenPerLayer,
  pagesFor,
  pagesInBytes,
  tokensIn,
  type KvElementShape,
} from './arithmetic.js';
export {
  admissionError,
  contextLengthError,
  poolFitError,
  poolTokensNeeded,
  requestShapeError,
  type AdmissionLimits,
  type PoolRole,
} from './admission.js';
