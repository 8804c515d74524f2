// Mixed-adapter batch decode against the base model alone: one engine (fast kernels), a decode
// batch of B sequences stepped together, in three mixes measured in interleaved rounds:
//   base   every row on the base model
//   mixed  rows spread over the base and two rank-R adapters (a and b), in one step
//   lora   every row on adapter a
// The adapted mixes run twice: with the low-rank products on the native addon (kernels/native/lora.c, the
// default when the dense kernels are native) and in TypeScript (`ts`: a second engine, loraKernels
// 'typescript', its own base run as a check that it is as fast without adapters), all rounds
// interleaved. Prints decode tok/s per mix and the ratio to base, measured in the same run.
//   node --import ./bench/lib/register-ts.mjs bench/lora.ts [--model FILE (default: bench/decode.ts's m100 q4_0 GGUF)] [--batch 8] [--rank 16]
import { mkdir } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { asRequestId, DEFAULT_TENANT, type BatchItem } from '../src/core/index.js';
import { createEngine, genLoraGguf, type Engine } from '../src/engine/index.js';
import { loadModel } from '../src/model/index.js';

const arg = (name: string, fallback: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? fallback : process.argv[i + 1]!;
};
const MODEL = arg('model', 'bench/results/models/m100-q4_0-seed0.gguf');
const BATCH = Number(arg('batch', '8'));
const RANK = Number(arg('rank', '16'));
const STEPS = Number(arg('steps', '24'));
const ROUNDS = Number(arg('rounds', '3'));
const PROMPT_TOKENS = 16;
const home = process.env['TESSERA_HOME'] ?? '/tmp/lora-bench-home';

type Mix = 'base' | 'mixed' | 'lora';
const adapterOf = (mix: Mix, row: number): string | undefined =>
  mix === 'base' ? undefined : mix === 'lora' ? 'a' : [undefined, 'a', 'b'][row % 3];
const RUNS = ['base', 'mixed', 'lora', 'base ts', 'mixed ts', 'lora ts'] as const;
type Run = (typeof RUNS)[number];

/** Decode tokens per second of BATCH sequences for STEPS steps after a prompt each. */
async function decodeRate(engine: Engine, mix: Mix): Promise<number> {
  const { pool, runner } = engine;
  const rows = Array.from({ length: BATCH }, (_, i) => {
    const owner = { rid: asRequestId(`r${i}`), tenant: DEFAULT_TENANT };
    const got = pool.ledger.allocate(Math.ceil((PROMPT_TOKENS + STEPS + 1) / pool.pageSize), owner);
    if (got.kind !== 'allocated') throw new Error('pool too small');
    return { owner, tags: got.tags };
  });
  const item = (i: number, tokens: number[], startPos: number): BatchItem => {
    const adapter = adapterOf(mix, i);
    const { owner, tags } = rows[i]!;
    return { ...owner, tags, tokens, startPos, wantLogits: true, ...(adapter === undefined ? {} : { adapter }) };
  };
  await runner.step(
    rows.map((_, i) =>
      item(
        i,
        Array.from({ length: PROMPT_TOKENS }, (_, t) => 10 + i + t),
        0,
      ),
    ),
  );
  const started = performance.now();
  for (let s = 0; s < STEPS; s++)
    await runner.step(rows.map((_, i) => item(i, [20 + ((i + s) % 50)], PROMPT_TOKENS + s)));
  const seconds = (performance.now() - started) / 1000;
  for (const { owner, tags } of rows) pool.ledger.free(tags, owner);
  return (BATCH * STEPS) / seconds;
}

async function main(): Promise<void> {
  await mkdir(home, { recursive: true });
  const model = await loadModel(MODEL, { cacheDir: home });
  const engine = await createEngine(model, { kvPages: BATCH * 8 + 8 });
  const tsEngine = await createEngine(model, { kvPages: BATCH * 8 + 8, loraKernels: 'typescript' });
  for (const [name, seed] of [
    ['a', 1],
    ['b', 2],
  ] as const) {
    const path = join(home, `bench-lora-${name}-r${RANK}.gguf`);
    await genLoraGguf(model.config, { out: path, rank: RANK, seed });
    await engine.lora.loadLora(name, path, 1);
    await tsEngine.lora.loadLora(name, path, 1);
  }
  const rates: Record<Run, number[]> = { base: [], mixed: [], lora: [], 'base ts': [], 'mixed ts': [], 'lora ts': [] };
  await decodeRate(engine, 'base'); // warm-up
  await decodeRate(tsEngine, 'mixed');
  for (let round = 0; round < ROUNDS; round++)
    for (const run of RUNS)
      rates[run].push(await decodeRate(run.endsWith(' ts') ? tsEngine : engine, run.replace(' ts', '') as Mix));
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  const base = median(rates.base);
  console.log(
    `${MODEL}, batch ${BATCH}, rank ${RANK} adapters on q,k,v,o,gate,up,down; kernels ${engine.kernels.dense}/${engine.kernels.ops}; ` +
      `${STEPS} decode steps x ${ROUNDS} interleaved rounds; load average ${loadavg()[0]!.toFixed(2)}`,
  );
  for (const run of RUNS) {
    const m = median(rates[run]);
    console.log(
      `  ${run.padEnd(8)} ${m.toFixed(1).padStart(7)} tok/s  (x${(m / base).toFixed(2)} of base; rounds ${rates[run].map((r) => r.toFixed(1)).join(', ')})`,
    );
  }
  await engine.dispose();
  await tsEngine.dispose();
}

await main();
