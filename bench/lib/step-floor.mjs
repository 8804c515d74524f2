// The host's own floor for bench:pd's ratio: the same decode work with no server at all. Run
// pinned to one core (bench:pd starts it with taskset), one of two jobs:
//   decode STEPS   8 requests decode like bench:pd's chats (150-token prompts, 48 tokens each,
//                  again and again) until STEPS decode steps were timed; prints one JSON line
//                  { steps, medianMs, p99Ms } of the step-to-step intervals
//   prefill        940-token prompts prefilled one after another until killed (the load a
//                  prefill node puts on the other core)
// Both use the engine as the server does: on its own thread, with the serving kernels, one
// thread per matmul.
// Plain JavaScript over the built dist/ (bench:pd builds first), like the servers it stands for:
// run through the benchmarks' TypeScript hooks (register-ts.mjs), the process held two idle
// module-loader threads with the TypeScript compiler's heap (main's ~75 MB), and V8's memory
// reducer collected them in the middle of the run, on the pinned core — mark-compacts of 4-37 ms
// in incremental steps of up to 25 ms that the servers never pay.
//
//   node bench/lib/step-floor.mjs MODEL decode|prefill [STEPS]
import { samplingParams } from '../../dist/core/index.js';
import { createThreadedEngine, generate } from '../../dist/engine/index.js';

const [modelPath, job, stepsArg] = process.argv.slice(2);
if (modelPath === undefined || (job !== 'decode' && job !== 'prefill')) {
  throw new Error('usage: step-floor.mjs MODEL decode|prefill [STEPS]');
}
const engine = await createThreadedEngine({ spec: modelPath, kvPages: 1024 }, 1);
/** @type {(n: number, seed: number) => number[]} */
const prompt = (n, seed) => Array.from({ length: n }, (_, j) => 3 + ((seed * 7919 + j * 31) % 31_000));

if (job === 'prefill') {
  const sampling = samplingParams({ maxTokens: 1, temperature: 0, ignoreEos: true });
  for (let round = 0; ; round++) await generate(engine.runner, [{ promptIds: prompt(940, round), sampling }]);
}

/** The p-th percentile of xs, interpolated (bench/lib/pd-client.ts's `percentile`). */
function percentile(/** @type {number[]} */ xs, /** @type {number} */ p) {
  const sorted = [...xs].sort((a, b) => a - b);
  const rank = (p / 100) * (sorted.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo);
}

const wanted = Number(stepsArg ?? 400);
/** @type {number[]} */
const gaps = [];
const sampling = samplingParams({ maxTokens: 48, temperature: 0, ignoreEos: true });
for (let round = 0; gaps.length < wanted; round++) {
  const inputs = Array.from({ length: 8 }, (_, i) => ({ promptIds: prompt(150, round * 8 + i), sampling }));
  let lastIndex = -1;
  let lastAt = 0;
  await generate(engine.runner, inputs, {
    // Every request gets token i in the same step: the first call for each i marks the step's end.
    onToken: (/** @type {number} */ index) => {
      if (index === lastIndex) return;
      const now = performance.now();
      if (index >= 2) gaps.push(now - lastAt); // from the second decode step on (the first follows prefills)
      lastIndex = index;
      lastAt = now;
    },
  });
}
console.log(JSON.stringify({ steps: gaps.length, medianMs: percentile(gaps, 50), p99Ms: percentile(gaps, 99) }));
await engine.dispose();
