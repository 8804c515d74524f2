// The cost of a speculative verify step against a plain decode step (issue 27): one request's
// step feeding 1 token versus 1 + k tokens (k drafts, every row's logits) at the same context
// depth, on the serving runner (fast kernels, this thread), interleaved. Speculation's speed-up
// is bounded by (accepted + 1) / (cost of k + 1 rows / cost of 1 row): this prints that cost ratio.
//
//   node --import ./bench/lib/register-ts.mjs bench/spec-step.ts [--model /tmp/h2-m100.gguf] [--depth 256]
//        [--reps 20] [--threads N] [--one-logit] [--llama] [--ks 1,2,4,8]
// --one-logit: the last row's logits only (what the rows cost without their logits: on m100 the
// output matrix is a large share of a step).
// --llama: llama.cpp's llama-bench on the same file at the same threads, the same ratio: a batch of
// k + 1 tokens at the same depth (-p k+1 -n 0 -d depth) against one token (-p 1).
import { availableParallelism, loadavg } from 'node:os';
import { asRequestId, DEFAULT_TENANT, type BatchItem } from '../src/core/index.js';
import { createEngine } from '../src/engine/index.js';
import { loadModel } from '../src/model/index.js';
import { llamaBench, llamaNativeBin } from './lib/llama-native.js';

const args = process.argv.slice(2);
const flag = (name: string, fallback: string): string => {
  const i = args.indexOf(name);
  return i >= 0 ? (args[i + 1] as string) : fallback;
};
const MODEL = flag('--model', '/tmp/h2-m100.gguf');
const DEPTH = Number(flag('--depth', '256'));
const REPS = Number(flag('--reps', '20'));
const THREADS = Number(flag('--threads', String(availableParallelism())));
/** --ks 1,2,3: the draft lengths measured (0, the plain step, always). */
const KS = [0, ...flag('--ks', '1,2,4,8').split(',').map(Number)];

const model = await loadModel(MODEL, {});
const MAX_K = Math.max(...KS);
const engine = await createEngine(model, {
  kvPages: Math.max(256, Math.ceil((DEPTH + MAX_K + 16) / 16) + 16),
  pageSize: 16,
  threads: THREADS,
  maxStepLogits: Math.max(16, MAX_K + 1),
});
const owner = { rid: asRequestId('step'), tenant: DEFAULT_TENANT };
const got = engine.pool.ledger.allocate(Math.ceil((DEPTH + MAX_K + 16) / 16), owner);
if (got.kind !== 'allocated') throw new Error('pool too small');
const tags = got.tags;
const vocab = model.config.vocabSize;
const prompt = Array.from({ length: DEPTH }, (_, i) => 300 + ((i * 7919) % (vocab - 400)));
await engine.runner.step([{ ...owner, tags, tokens: prompt, startPos: 0, wantLogits: false }]);
const times = new Map<number, number[]>(KS.map((k) => [k, []]));
for (let rep = 0; rep < REPS; rep++) {
  for (const k of rep % 2 === 0 ? KS : [...KS].reverse()) {
    const item: BatchItem = {
      ...owner,
      tags,
      tokens: Array.from({ length: k + 1 }, (_, i) => 500 + i),
      startPos: DEPTH,
      wantLogits: true,
      logitCount: args.includes('--one-logit') ? 1 : k + 1,
      ...(k > 0 ? { verifiesDrafts: true } : {}),
    };
    const t0 = performance.now();
    const [r] = await engine.runner.step([item]);
    times.get(k)!.push(performance.now() - t0);
    if (r?.kind !== 'logits') throw new Error(`step: ${r?.kind}`);
    engine.pool.rollbackStamps(tags, DEPTH, DEPTH + k + 1);
  }
}
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const one = med(times.get(0)!);
console.log(
  `bench:spec-step  model ${MODEL}  kernels ${engine.kernels.dense}/${engine.kernels.ops}  threads ${THREADS}  depth ${DEPTH}  reps ${REPS}  load ${loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}`,
);
await engine.dispose();
// llama.cpp's ms per step of k + 1 tokens at the same depth (after Tessera's: the two never overlap).
const llama = new Map<number, number>();
if (args.includes('--llama')) {
  const found = llamaNativeBin();
  if ('why' in found) console.log(`llama.cpp: none (${found.why})`);
  else
    for (const k of KS) {
      const got = await llamaBench(found.bin, {
        model: MODEL,
        threads: THREADS,
        prompt: k + 1,
        gen: 0,
        depth: DEPTH,
        reps: Math.max(3, Math.floor(REPS / 4)),
      });
      llama.set(k, ((k + 1) / got.tokensPerSecond) * 1000);
    }
}
const llamaOne = llama.get(0);
for (const k of KS) {
  const ms = med(times.get(k)!);
  const theirs = llama.get(k);
  console.log(
    `  k ${k}: ${ms.toFixed(2)} ms per step  (${(ms / one).toFixed(2)}x one token)` +
      (theirs === undefined || llamaOne === undefined
        ? ''
        : `   llama.cpp ${theirs.toFixed(2)} ms (${(theirs / llamaOne).toFixed(2)}x)  tessera / llama ${(ms / theirs).toFixed(2)}x`),
  );
}
