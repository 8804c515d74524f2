// npm run spec:mutants — every mutant of spec/tessera.pml and spec/lease.pml (a known bug,
// switched on with -D<NAME>) must be caught: pan must find a counterexample that violates one of
// the model's properties ((a)-(e); the lease model's (I1)-(I3)), not a bookkeeping assertion. Safety mutants are searched breadth-first,
// so the depth printed is that of a shortest counterexample; the liveness mutant depth-first
// (acceptance cycles need it). Prints each one's depth and property;
// exits zero only when all are caught. Never modifies the model.
import { fmt, requireTools, verify } from './pan.mjs';

/** name, what the bug is, the run that must catch it, the model (default tessera.pml). */
export const MUTANTS = [
  [
    'PLACEHOLDER',
    'the placeholder reported as done: a prompt that fails prefill admission becomes a one-page placeholder, written once and claimed complete (the incident)',
    'safety',
  ],
  [
    'FREE_BEFORE_ACK',
    "decode frees an aborted request's pages at once instead of quarantining them until the writer's AbortAck",
    'safety',
  ],
  ['NO_EPOCH_CHECK', 'the page check accepts any written stamp, not only one of the current epoch', 'safety'],
  [
    'NO_COVERAGE',
    "decode starts (and reads) on KvDone's claim, without checking its stamps cover the prompt",
    'safety',
  ],
  [
    'ACK_BEFORE_LANDED',
    'prefill sends KvDone / AbortAck when its writes are posted, not when they have landed',
    'safety',
  ],
  [
    'NO_TOMBSTONE',
    'prefill forgets an Abort for a request it has not seen, so a late Prefill starts writing',
    'safety',
  ],
  ['SUCCESS_AFTER_CANCEL', 'the router reports success when Finished arrives after it began cancelling', 'safety'],
  ['DROP_ABORT_ACK', 'prefill never sends AbortAck: quarantined pages never return (liveness)', 'liveness'],
  [
    'IGNORE_PREFIX_LEASE',
    'evict during read: the holder takes a lease without pinning, so eviction reuses a leased page mid-read (ignore-prefix-lease)',
    'safety',
    'lease',
  ],
  [
    'PREFIX_KEY_WITHOUT_TENANT',
    "key without tenant: the holder looks pages up by pathHash alone and serves another tenant's page (prefix-key-without-tenant)",
    'safety',
    'lease',
  ],
  [
    'SEND_AFTER_LEASE_TIMEOUT',
    "the holder's send loop goes on after the lease timed out (its pages unpinned)",
    'safety',
    'lease',
  ],
  ['LEASE_LEAK_ON_CLOSE', "the holder ends a lease at the requester's close without unpinning it", 'safety', 'lease'],
  [
    'ACCEPT_STALE_FRAMES',
    'the requester accepts a frame without checking its fetchId and epoch (a late frame of an abandoned fetch)',
    'safety',
    'lease',
  ],
];

/** Which property an assertion message or error belongs to (null: not a property). */
export function classify(message) {
  if (/bytes_ver==lsnap/.test(message)) return '(I1) installs only the bytes leased';
  if (/bytes_ns==fns/.test(message)) return "(I2) never another namespace's page";
  if (/lst\[0\]!=1.*pin\[0\]==0/.test(message)) return '(I3) every lease released: final state';
  if (/acceptance cycle/.test(message)) return '(e) liveness: ltl done';
  if (/dfree\[0\]==/.test(message)) return '(e) liveness: final state';
  if (/stamp\[hp\]==he/.test(message)) return '(a) reads only own pages, current epoch';
  if (/doom\[r\]|tainted\[r\]|outcome\[r\]==0/.test(message)) return '(b) honest outcome';
  if (/inflight\[hp\]==0|wr\[r\]==0|\(lstate\[hp\]!=0\)&&\(lepoch\[hp\]==he\)/.test(message))
    return '(c) no free while a write may land';
  if (/rlen\[r\]/.test(message)) return '(d) admission before allocation or transfer';
  return null;
}

function main() {
  requireTools();
  let failed = false;
  for (const [name, what, mode, model] of MUTANTS) {
    const defines = mode === 'liveness' ? [name, 'MAXF=1'] : [name];
    const res = verify({ model, mode, defines, bfs: mode === 'safety' });
    const property = res.violation ? classify(res.violation.message) : null;
    const ok = property !== null;
    failed ||= !ok;
    const depth = String(res.violation?.depth ?? '-').padStart(3);
    const verdict = property ?? res.violation?.message ?? 'no counterexample';
    console.log(`${ok ? 'caught ' : 'MISSED '} ${name.padEnd(25)} depth ${depth}  ${verdict}`);
    console.log(`        ${what}; ${fmt(res.statesStored)} states, ${res.seconds.toFixed(1)} s`);
  }
  if (failed) {
    console.error('spec:mutants FAILED: a mutant survived');
    process.exit(1);
  }
  console.log(`spec:mutants passed: all ${MUTANTS.length} mutants caught`);
}

if (import.meta.url === `file://${process.argv[1]}`) main();
