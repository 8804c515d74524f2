// The prefix lease model's rules (spec/lease.pml), as data, for test/conformance/lease.test.ts to
// drive the implementation with (src/transfer/prefix-fetch-requester.ts, -holder.ts, and
// src/pages/lease.ts): the requester's checks on a frame and what failing each does, and the
// holder's ways to end a lease. Each row carries the model's own text of its guard, so the test
// finds it in lease.pml and fails when the model and this table part.
// Owns: nothing but these tables and the model's verdict on a frame (a port of `r_frame`).
// Must never: import the implementation (the test does), or say more than the model does: the
// code's refusal names ('namespace', 'order', 'path') are the code's; the model only ends the
// fetch.
import type { FetchRefusal } from '../../src/transfer/prefix-fetch-requester.js';

/** A field of a PrefixPages or PrefixDone frame that R checks against its open fetch. */
export type FrameField = 'fetchId' | 'epoch' | 'namespace' | 'index' | 'pathHash' | 'count';

export interface FrameCheck {
  readonly field: FrameField;
  /** Which frames carry it. */
  readonly frames: readonly ('PrefixPages' | 'PrefixDone')[];
  /** The model's guard, as written in lease.pml (OF_OPEN_FETCH, r_frame). */
  readonly model: string;
  /** A frame failing it: dropped as stale (the open fetch goes on), or it ends the fetch, with the code's refusal. */
  readonly fails: 'drop' | { readonly end: FetchRefusal };
}

/** In the order the model (and the code) applies them. */
export const FRAME_CHECKS: readonly FrameCheck[] = [
  { field: 'fetchId', frames: ['PrefixPages', 'PrefixDone'], model: 'm_fid == fid[rf]', fails: 'drop' },
  { field: 'epoch', frames: ['PrefixPages', 'PrefixDone'], model: 'm_ep == fep[rf]', fails: 'drop' },
  { field: 'namespace', frames: ['PrefixPages'], model: 'm_ns == fns[rf]', fails: { end: 'namespace' } },
  { field: 'index', frames: ['PrefixPages'], model: 'm_idx == fgot[rf]', fails: { end: 'order' } },
  { field: 'pathHash', frames: ['PrefixPages'], model: 'm_ph == PH(m_idx)', fails: { end: 'path' } },
  { field: 'count', frames: ['PrefixDone'], model: 'm_count == fgot[rf]', fails: { end: 'order' } },
];

/** The code's checks the model abstracts (its frames are intact): each ends the fetch. */
export const CODE_ONLY_CHECKS: readonly FetchRefusal[] = ['length', 'checksum'];

/** What R does with one frame, in the model. */
export type Verdict = 'accept' | 'done' | 'drop' | 'end';

/** The model's `r_frame`: a frame of kind `kind` whose fields in `wrong` differ from what R's open fetch expects. */
export function modelVerdict(kind: 'PrefixPages' | 'PrefixDone', wrong: ReadonlySet<FrameField>): Verdict {
  if (wrong.has('fetchId') || wrong.has('epoch')) return 'drop';
  if (kind === 'PrefixDone') return wrong.has('count') ? 'end' : 'done';
  return wrong.has('namespace') || wrong.has('index') || wrong.has('pathHash') ? 'end' : 'accept';
}

/** How a lease ends at the holder; each unpins the lease's pages once, and nothing more of its fetch is sent. */
export interface LeaseEnd {
  readonly why: 'done' | 'closed' | 'deadline';
  /** The model's release, as written in lease.pml (H_SERVE). */
  readonly model: string;
  /** PrefixDone is sent (only when the lease ends by being done). */
  readonly sendsDone: boolean;
}

export const LEASE_ENDS: readonly LeaseEnd[] = [
  { why: 'done', model: 'h_release(f, WHY_done)', sendsDone: true },
  { why: 'closed', model: 'h_release(f, WHY_closed)', sendsDone: false },
  { why: 'deadline', model: 'h_release(f, WHY_timeout)', sendsDone: false },
];
