// The request-id scheme of a PD cluster: one client request, three forms of its rid, each
// derived here and nowhere else.
//   client      `<8 hex digits>-<counter>` (api/http/request-ids.ts): what the client sees (the
//               response's id), the PdRouter's key for the request while it lives.
//   submission  the client rid, then `<client>~w<n>` (n = 1, 2, ...): PdRouter hands a request
//               that waited for room (no pair, a worker down) to the RouterMachine again under a
//               new rid, since the machine remembers every rid it ended (its tombstone).
//   attempt     the submission rid, then `<submission>.<n>` (n = 2, 3, ...): RouterMachine's retry
//               on another prefill reserves afresh under a new rid. The attempt rid is the
//               protocol's rid: on the wire (Reserve, Prefill, every frame), in traces, and the
//               key of the request's records on the prefill and decode nodes.
// So `r~w1.2` is the second attempt of the second submission of client request `r`. The two
// suffixes differ because one submission may make several attempts: one spelling for both
// would let `r.2` mean either. A node never parses a rid (it is an opaque key on the wire);
// only the router maps an attempt back to its client (RouterMachine.clientOf, PdRouter's map).
// Must never: hand out a rid twice within a router's tombstone time, or change a form the
// traces and tests read (`.n`, `~wn`) without the spec's README.
import { asRequestId, type RequestId } from '../core/index.js';

/** The rid of a client request's `n`th submission to the RouterMachine (n = 0: the client rid itself). */
export function submissionRid(client: RequestId, n: number): RequestId {
  return n === 0 ? client : asRequestId(`${client}~w${n}`);
}

/** The rid of a submission's `n`th attempt (n = 1: the submission rid itself). */
export function attemptRid(submission: RequestId, n: number): RequestId {
  return n === 1 ? submission : asRequestId(`${submission}.${n}`);
}
