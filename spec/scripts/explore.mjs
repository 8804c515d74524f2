// npm run spec:explore [name ...] — the model at larger sizes than spec:check, each run capped
// at 10 minutes: prints states, transitions, memory and time, and whether the search finished.
// Not part of `npm test` (too slow); run it after changing the model, and update the numbers
// in spec/README.md. Exits non-zero if a finished run found a violation.
import { fmt, requireTools, verify } from './pan.mjs';

const CAP_SEC = 600;

/** name, description, run options. */
const CONFIGS = [
  [
    'liveness-f2',
    'ltl done, defaults (3 requests, 2 prefill, 1 decode), 2 faults per run',
    { mode: 'liveness', defines: [], hashBits: 26 },
  ],
  [
    'safety-pool4',
    'safety, decode pool 4, prefill pool 3, context 5, requests of 2 and 3 pages, 2 faults',
    { mode: 'safety', defines: ['DPAGES=4', 'PPAGES=3', 'CTX=5', 'LEN1=3'], hashBits: 26 },
  ],
  [
    'safety-r4',
    'safety, 4 requests on one decode node (r3: 1 page, on p1), 2 faults',
    { mode: 'safety', defines: ['NR=4'], hashBits: 26 },
  ],
  [
    'safety-d2r4-f1',
    'safety, 2 decode nodes, 4 requests, 1 fault',
    { mode: 'safety', defines: ['ND=2', 'NR=4', 'MAXF=1'], hashBits: 26 },
  ],
  [
    'liveness-d2r4',
    'ltl done, 2 decode nodes, 4 requests, 1 fault',
    { mode: 'liveness', defines: ['ND=2', 'NR=4', 'MAXF=1'], hashBits: 26 },
  ],
  [
    'safety-d2r4',
    'safety, 2 decode nodes, 4 requests (r3: 1 page, on p1/d1), 2 faults',
    { mode: 'safety', defines: ['ND=2', 'NR=4'], hashBits: 26 },
  ],
  ['safety-f3', 'safety, defaults, 3 faults per run', { mode: 'safety', defines: ['MAXF=3'], hashBits: 26 }],
  [
    'lease-n3f3u3',
    'lease.pml safety: 3 fetches, 3 faults, 3 page reuses at the holder',
    { model: 'lease', mode: 'safety', defines: ['NF=3', 'MAXF=3', 'MAXREUSE=3'], hashBits: 26 },
  ],
  [
    'lease-live-n3f3',
    'lease.pml ltl released: 3 fetches, 3 faults, 2 page reuses',
    { model: 'lease', mode: 'liveness', defines: ['NF=3', 'MAXF=3'], hashBits: 26 },
  ],
];

function main() {
  requireTools();
  const wanted = process.argv.slice(2);
  const configs = wanted.length === 0 ? CONFIGS : CONFIGS.filter(([name]) => wanted.includes(name));
  if (configs.length === 0) {
    console.error(`spec:explore: no such configuration; choose from ${CONFIGS.map(([n]) => n).join(', ')}`);
    process.exit(2);
  }
  let failed = false;
  for (const [name, what, options] of configs) {
    const res = verify({ ...options, optimize: true, memLimitMb: 8_000, timeoutSec: CAP_SEC });
    const verdict =
      res.errors > 0 ? 'VIOLATION' : res.complete ? 'done' : res.timedOut ? `stopped at ${CAP_SEC} s` : 'incomplete';
    failed ||= res.errors > 0;
    console.log(`${name.padEnd(14)} ${verdict}: ${what}`);
    console.log(
      `               states stored ${fmt(res.statesStored)}, transitions ${fmt(res.transitions)}, depth ${fmt(res.depthReached)}, ` +
        `memory ${res.memoryMb?.toFixed(0) ?? '?'} MB, ${res.seconds.toFixed(0)} s`,
    );
    if (res.errors > 0) console.log(`               ${res.violation?.message} at depth ${res.violation?.depth}`);
  }
  process.exit(failed ? 1 : 0);
}

main();
