// Layer 2: the KV transfer protocol: messages, sans-IO state machines, wire codec, transports.
export type * from './messages.js';
export type * from './trace.js';
export { NO_TRACE } from './trace.js';
