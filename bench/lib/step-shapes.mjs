// The engine alone at the step shapes `serve` makes at 16 streams (docs/benchmarks.md, serve,
// "Wave 3 (w8-sched)"): D decodes at a context of CTX positions beside a prefill chunk of C tokens
// from position 0 (its last L rows wanting logits), the median ms of REPS such steps and tokens/s.
// No server and no scheduler: the decodes' pages are allocated and prefilled once per shape, each
// repetition decodes one position further and takes a fresh chunk's pages. Plain JavaScript over
// dist/ (build first), like step-floor.mjs; under `perf record` it gives a step's split by kernel.
//   [CTX=160] [KV=f32|f16|q8_0] node bench/lib/step-shapes.mjs MODEL [THREADS] [REPS] [D:C[:L],...]
import { asRequestId, DEFAULT_TENANT } from '../../dist/core/index.js';
import { createEngine } from '../../dist/engine/index.js';
import { loadModel } from '../../dist/model/index.js';
import { pagesFor } from '../../dist/pages/index.js';

const [modelPath, threadsArg, repsArg, shapesArg] = process.argv.slice(2);
const threads = Number(threadsArg ?? 2);
const reps = Number(repsArg ?? 5);
const shapes = (shapesArg ?? '16:0,9:16,9:32,9:64,8:128,0:128,0:256,4:256')
  .split(',')
  .map((s) => s.split(':').map(Number));
const model = await loadModel(modelPath);
const engine = await createEngine(model, {
  kvPages: 2048,
  threads,
  ...(process.env.KV ? { kvDtype: process.env.KV } : {}),
});
const { runner } = engine;
const { pool } = runner;
const V = model.config.vocabSize;
const ids = (n, seed) => Array.from({ length: n }, (_, j) => 3 + ((seed * 7919 + j * 31) % (V - 3)));
const CTX = Number(process.env.CTX ?? 160); // decodes' context: a 128-token prompt plus half of 64 outputs
let seq = 0;
function alloc(positions) {
  const owner = { rid: asRequestId(`shape-${seq++}`), tenant: DEFAULT_TENANT };
  const a = pool.ledger.allocate(pagesFor(positions, pool.pageSize), owner);
  if (a.kind !== 'allocated') throw new Error('out of pages');
  return { ...owner, tags: a.tags };
}
async function stepTimed(items) {
  const t = performance.now();
  const res = await runner.step(items);
  for (const r of res) if (r.kind === 'failed') throw r.error;
  return performance.now() - t;
}
for (const [D, C, L = 1] of shapes) {
  const times = [];
  const decs = [];
  for (let i = 0; i < D; i++) {
    const o = alloc(CTX + reps + 1);
    for (let p = 0; p < CTX; p += runner.maxStepTokens) {
      const n = Math.min(runner.maxStepTokens, CTX - p);
      await stepTimed([{ ...o, tokens: ids(n, i), startPos: p, wantLogits: false }]);
    }
    decs.push(o);
  }
  for (let rep = 0; rep < reps + 1; rep++) {
    const ch = C > 0 ? alloc(C) : undefined;
    const items = decs.map((o, i) => ({ ...o, tokens: [5 + i], startPos: CTX + rep, wantLogits: true }));
    if (ch)
      items.push({
        ...ch,
        tokens: ids(C, 99 + rep),
        startPos: 0,
        wantLogits: true,
        ...(L > 1 ? { logitCount: L } : {}),
      });
    const ms = await stepTimed(items);
    if (rep > 0) times.push(ms);
    if (ch) pool.ledger.free(ch.tags, ch);
  }
  for (const o of decs) pool.ledger.free(o.tags, o);
  times.sort((a, b) => a - b);
  const med = times[Math.floor(times.length / 2)];
  const m = D + C;
  console.log(
    `D=${D} C=${C} L=${L} m=${m}: median ${med.toFixed(2)} ms (min ${times[0].toFixed(2)}), ${((m / med) * 1000).toFixed(0)} tok/s`,
  );
}
process.exit(0);
