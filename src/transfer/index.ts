// Layer 2: the KV transfer protocol: messages, sans-IO state machines (router, prefill, decode),
// the hosts through which they use a node's pages, digests, the wire codec, channel
// authentication. The transports (TCP, in-memory) are in ./transports/index.ts, the only part
// that does I/O.
export type * from './messages.js';
export type * from './trace.js';
export { NO_TRACE, Tracer } from './trace.js';
export {
  DEFAULT_TIMEOUTS,
  type ChunkInput,
  type Machine,
  type NetworkEffect,
  type NetworkInput,
  type PeerId,
  type Timeouts,
} from './machine.js';
export {
  ChunkHasher,
  chunkChecksum,
  promptDigest,
  TransferDigest,
  DIGEST_PATTERN,
  type ChunkHeader,
} from './digests.js';
export {
  LedgerDecodeHost,
  type AdmitVerdict,
  type DecodeHost,
  type LedgerDecodeHostOptions,
  type PrefillHost,
  type ReserveVerdict,
} from './hosts.js';
export { stampCoverage } from './decode-checks.js';
export { attemptRid, submissionRid } from './request-ids.js';
export { DecodeMachine } from './decode-machine.js';
export {
  DECODE_STATES,
  type DecodeEffect,
  type DecodeInput,
  type DecodeMachineOptions,
  type DecodeState,
  type DecodeStats,
} from './decode-types.js';
export {
  PREFILL_STATES,
  PrefillMachine,
  type PrefillEffect,
  type PrefillInput,
  type PrefillMachineOptions,
  type PrefillState,
  type PrefillStats,
} from './prefill-machine.js';
export {
  ROUTER_STATES,
  RouterMachine,
  type ClientOutcome,
  type ClientRequest,
  type Pair,
  type PickPair,
  type RouterEffect,
  type RouterInput,
  type RouterMachineOptions,
  type RouterState,
  type RouterStats,
} from './router-machine.js';
export { CodecError, isCodecError } from './codec-fields.js';
export {
  CODEC_VERSION,
  DEFAULT_MAX_FRAME_BYTES,
  MESSAGE_TYPES,
  decodeAnyFrame,
  decodeFrame,
  encodeFrame,
  encodeFrameParts,
  encodeHandshake,
  FrameReader,
  type Frame,
  type Hello,
  type Proof,
} from './codec.js';
export {
  AuthError,
  Handshake,
  isAuthError,
  checkSecret,
  MIN_SECRET_BYTES,
  type HandshakeOptions,
  type HandshakeRole,
} from './auth.js';
export type {
  ChunkHandlers,
  Transport,
  TransportHandlers,
  TransportOptions,
  TransportStats,
} from './transports/types.js';
export { FrameStream, type FrameSink } from './frame-stream.js';
export { TcpTransport, parseAddress, type TcpListenOptions } from './transports/tcp.js';
export { probeClusterSecret } from './transports/probe.js';
export { MemoryNetwork } from './transports/memory.js';
export { MachineDriver } from './transports/driver.js';
export type * from './prefix-fetch-messages.js';
export { PREFIX_MESSAGE_TYPES } from './codec.js';
export {
  PrefixHolder,
  type HolderIo,
  type HolderStats,
  type PrefixSource,
  type Schedule,
} from './prefix-fetch-holder.js';
export {
  FETCH_REFUSALS,
  PrefixRequester,
  type FetchOutcome,
  type FetchRefusal,
  type RequesterStats,
} from './prefix-fetch-requester.js';
export { PeerPrefixStore, tenantOfNamespace, type FillResult, type PeerStoreStats } from './prefix-fetch-store.js';
