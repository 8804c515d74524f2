// npm run spec:check — the exhaustive check of the correct models (spec/tessera.pml, then the
// prefix lease model spec/lease.pml, each through the same three steps).
//   1. safety: every assertion (properties a-d, the edge tables, the final-state check of e)
//      and no invalid end state, over the whole state space at the default sizes;
//   2. liveness: the ltl claim `done` (every request ends, every page is free again) with
//      acceptance-cycle search, at a smaller fault budget (MAXF=1);
//   3. witnesses: the scenarios the properties are about are reachable (not vacuous).
// Prints states, transitions, memory and time; exits non-zero on any violation, incomplete
// search, or unreachable witness. Never modifies the model.
import { fmt, requireTools, verify } from './pan.mjs';

const WITNESSES = [
  [1, 'a request succeeds'],
  [2, "a page still holding an older epoch's data and stamp is allocated (the stale page)"],
  [3, 'a write lands in a quarantined page after its request was aborted (late landing)'],
  [4, 'a write lands after its writer crashed'],
  [5, "decode releases quarantined pages when the writer's connection closes"],
  [6, 'decode fails a transfer closed: its stamps do not cover the prompt'],
  [7, 'prefill drains its posted writes before it sends AbortAck'],
  [8, 'a request succeeds although a fault touched it'],
  [9, 'a prompt too long for prefill is rejected after decode reserved its pages'],
  [10, 'Finished reaches a router that is cancelling the request'],
];

/** spec/lease.pml's witnesses (its SEEN points). */
const LEASE_WITNESSES = [
  [1, 'a fetch completes: every page asked is installed, then PrefixDone'],
  [2, 'a late frame of an abandoned fetch arrives while another fetch is open, and is dropped'],
  [3, "R installs bytes whose page H has since reused (the copy handed to the transport is the lease's)"],
  [4, "H releases a lease because R's connection closed"],
  [5, 'H releases a lease at its deadline with pages still unsent'],
  [6, 'two leases pin the same page'],
  [7, "tenant B asks for the pathHashes of tenant A's cached pages (same tokens) and B has none"],
  [8, 'after a restart, a late frame carries the fetchId of the open fetch: only its epoch tells, and it is dropped'],
];

function main() {
  requireTools();
  let failed = false;
  const runs = [
    {
      label: 'safety   (defaults: 3 requests, 2 prefill, 1 decode, MAXF=2)',
      mode: 'safety',
      defines: [],
      hashBits: 24,
      optimize: true,
    },
    { label: 'liveness (ltl done, -a; MAXF=1)', mode: 'liveness', defines: ['MAXF=1'], hashBits: 22, optimize: true },
    {
      label: 'lease safety   (lease.pml defaults: 2 fetches, pool 3, 2 reuses, MAXF=2)',
      model: 'lease',
      mode: 'safety',
      defines: [],
      hashBits: 22,
    },
    { label: 'lease liveness (ltl released, -a)', model: 'lease', mode: 'liveness', defines: [], hashBits: 22 },
  ];
  for (const r of runs) {
    const res = verify(r);
    const ok = res.errors === 0 && res.complete;
    failed ||= !ok;
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${r.label}`);
    console.log(
      `     states stored ${fmt(res.statesStored)}, transitions ${fmt(res.transitions)}, ` +
        `depth ${fmt(res.depthReached)}, memory ${res.memoryMb?.toFixed(0)} MB, ${res.seconds.toFixed(1)} s, errors ${res.errors}`,
    );
    if (!ok)
      console.log(
        res.violation ? `     violation: ${res.violation.message} at depth ${res.violation.depth}` : res.text,
      );
  }
  console.log('witnesses (each must be reachable):');
  for (const [k, what] of WITNESSES) {
    const res = verify({ mode: 'safety', defines: [`WITNESS=${k}`] });
    const ok = res.violation !== undefined && /assertion violated/.test(res.violation.message);
    failed ||= !ok;
    console.log(`${ok ? 'ok  ' : 'FAIL'} W${k} ${what}${ok ? ` (depth ${res.violation.depth})` : ': NOT REACHED'}`);
  }
  console.log('lease witnesses (each must be reachable):');
  for (const [k, what] of LEASE_WITNESSES) {
    const res = verify({ model: 'lease', mode: 'safety', defines: [`WITNESS=${k}`] });
    const ok = res.violation !== undefined && /assertion violated/.test(res.violation.message);
    failed ||= !ok;
    console.log(`${ok ? 'ok  ' : 'FAIL'} L${k} ${what}${ok ? ` (depth ${res.violation.depth})` : ': NOT REACHED'}`);
  }
  if (failed) {
    console.error('spec:check FAILED');
    process.exit(1);
  }
  console.log('spec:check passed');
}

main();
