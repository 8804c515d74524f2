// The Batch API's durable store (files, batches, each line's answer) on a write-ahead log.
export {
  BATCH_ENDPOINTS,
  MAX_BATCH_LINES,
  parseBatchLines,
  type BatchEndpoint,
  type LineError,
  type ParsedLines,
  type RequestLine,
} from './lines.js';
export {
  BatchStore,
  TERMINAL,
  type BatchMeta,
  type BatchState,
  type BatchStatus,
  type FileMeta,
  type LineResult,
} from './store.js';
export { Wal, WalCorruptError } from './wal.js';
