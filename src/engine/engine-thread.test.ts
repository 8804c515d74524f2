// The engine thread against the in-process engine (same logits, row by row, passed through one
// shared buffer rather than a copy per step), the lend boundary (a landing
// into a page of the step in flight is refused; `skip-lend-check` lets it through and the step
// reads the foreign bytes), and the main thread's event loop while steps run on the thread
// (a measurement with a generous bound, not a benchmark). Runs dist/'s thread entry: build first.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asRequestId, asTenantId, FaultSet, InvariantError, type BatchItem, type Tag } from '../core/index.js';
import type { PagePool } from '../pages/index.js';
import { createEngine, type Engine } from './engine.js';
import { createThreadedEngine, type ThreadedEngine } from './engine-thread.js';
import { loadModel } from '../model/index.js';
import type { ItemResult } from './runner.js';

const cacheDir = mkdtempSync(join(tmpdir(), 'tessera-engine-thread-'));
const who = { rid: asRequestId('a'), tenant: asTenantId('t1') };
const PROMPT = Array.from({ length: 40 }, (_, i) => 100 + i);
const OPTIONS = { kvPages: 16, pageSize: 16, maxStepTokens: 64, maxStepLogits: 4, deterministic: true, threads: 1 };

function allocate(pool: PagePool, numPages: number): readonly Tag[] {
  const result = pool.ledger.allocate(numPages, who);
  if (result.kind !== 'allocated') throw new Error('test pool too small');
  return result.tags;
}

const prefill = (tags: readonly Tag[]): BatchItem => ({ ...who, tags, tokens: PROMPT, startPos: 0, wantLogits: true });
const decode = (tags: readonly Tag[]): BatchItem => ({
  ...who,
  tags,
  tokens: [7],
  startPos: PROMPT.length,
  wantLogits: true,
});

function logitsOf(result: ItemResult | undefined): Float32Array {
  if (result?.kind !== 'logits') throw new Error(`expected logits, got ${result?.kind}`);
  return result.logits.slice();
}

describe('the engine thread', () => {
  let local: Engine;
  let threaded: ThreadedEngine;
  let expected: Float32Array;

  beforeAll(async () => {
    const model = await loadModel('builtin:tiny', { cacheDir });
    local = await createEngine(model, OPTIONS);
    const tags = allocate(local.pool, 3);
    await local.runner.step([prefill(tags)]);
    expected = logitsOf((await local.runner.step([decode(tags)]))[0]);
    threaded = await createThreadedEngine({ spec: 'builtin:tiny', cacheDir, ...OPTIONS }, 1);
  }, 60_000);

  afterAll(async () => {
    await local?.dispose();
    await threaded?.dispose();
  });

  it('computes the same logits as the engine on the main thread, and stamps on the main thread', async () => {
    const tags = allocate(threaded.pool, 3);
    await threaded.runner.step([prefill(tags)]);
    expect(threaded.pool.stampOf(tags[2]!.page).filledSlots).toBe(8);
    expect(logitsOf((await threaded.runner.step([decode(tags)]))[0])).toEqual(expected);
    expect(threaded.pool.isLent(tags[0]!.page)).toBe(false);
    threaded.pool.ledger.free(tags, who);
  });

  it("a draft model's head cut to some tokens (draft-head.ts): those tokens' logits only, the same values", async () => {
    const headTokens = [42, 5, 100, 3];
    const cut = await createThreadedEngine({ spec: 'builtin:tiny', cacheDir, ...OPTIONS, headTokens }, 1);
    try {
      const tags = allocate(cut.pool, 3);
      await cut.runner.step([prefill(tags)]);
      expect([...logitsOf((await cut.runner.step([decode(tags)]))[0])]).toEqual(headTokens.map((t) => expected[t]));
    } finally {
      await cut.dispose();
    }
  });

  it('passes every step’s logits through one shared buffer (no copy per step)', async () => {
    const tags = allocate(threaded.pool, 3);
    const [first] = await threaded.runner.step([prefill(tags)]);
    const [second] = await threaded.runner.step([decode(tags)]);
    threaded.pool.ledger.free(tags, who);
    if (first?.kind !== 'logits' || second?.kind !== 'logits') throw new Error('expected logits');
    expect(first.logits.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(first.logits.buffer).toBe(second.logits.buffer);
    // A view is valid until the next run(): the first step's row now holds the second's logits.
    expect(first.logits).toEqual(expected);
  });

  it('returns the rows of a step with two items as the engine on the main thread does', async () => {
    const other = { rid: asRequestId('b'), tenant: asTenantId('t1') };
    const rowsOf = async (engine: Engine): Promise<Float32Array[]> => {
      const a = allocate(engine.pool, 3);
      const bAlloc = engine.pool.ledger.allocate(3, other);
      if (bAlloc.kind !== 'allocated') throw new Error('test pool too small');
      await engine.runner.step([prefill(a)]);
      await engine.runner.step([{ ...prefill(bAlloc.tags), ...other, tokens: PROMPT.map((t) => t + 5) }]);
      const both = await engine.runner.step([decode(a), { ...decode(bAlloc.tags), ...other, tokens: [9] }]);
      const rows = both.map(logitsOf);
      engine.pool.ledger.free(a, who);
      engine.pool.ledger.free(bAlloc.tags, other);
      return rows;
    };
    const expectedRows = await rowsOf(local);
    expect(expectedRows[0]).not.toEqual(expectedRows[1]);
    expect(await rowsOf(threaded)).toEqual(expectedRows);
  });

  it('refuses a landing into a page of the step in flight, and gives the pages back after the step', async () => {
    const tags = allocate(threaded.pool, 3);
    await threaded.runner.step([prefill(tags)]);
    const step = threaded.runner.step([decode(tags)]);
    expect(threaded.pool.isLent(tags[0]!.page)).toBe(true);
    const bytes = new Uint8Array(threaded.pool.slotRangeBytes(1));
    expect(() => threaded.pool.scatterSlots(tags[0]!.page, 0, 1, bytes)).toThrow(InvariantError);
    expect(logitsOf((await step)[0])).toEqual(expected);
    expect(threaded.pool.isLent(tags[0]!.page)).toBe(false);
    threaded.pool.scatterSlots(tags[2]!.page, 9, 1, bytes); // not lent any more: a landing may write
    threaded.pool.ledger.free(tags, who);
  });

  it('negative control: with skip-lend-check the landing crosses into the running step, which reads its bytes', async () => {
    const crossing = await createThreadedEngine(
      { spec: 'builtin:tiny', cacheDir, ...OPTIONS, faults: new FaultSet(['skip-lend-check']), testStepDelayMs: 300 },
      1,
    );
    try {
      const tags = allocate(crossing.pool, 3);
      await crossing.runner.step([prefill(tags)]);
      const step = crossing.runner.step([decode(tags)]);
      // The "landing": NaN into every slot of the first page, inside the step's window: the thread waits
      // 300 ms before its forward pass, so the write lands before the read however busy the machine is.
      const nan = new Uint8Array(new Float32Array(crossing.pool.slotRangeBytes(16) / 4).fill(Number.NaN).buffer);
      crossing.pool.scatterSlots(tags[0]!.page, 0, 16, nan);
      expect(logitsOf((await step)[0])).not.toEqual(expected);
    } finally {
      await crossing.dispose();
    }
  }, 60_000);

  it('keeps the main event loop turning while steps run on the thread (measured: a generous bound)', async () => {
    const tags = allocate(threaded.pool, 3);
    let ticks = 0;
    let maxGapMs = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      maxGapMs = Math.max(maxGapMs, now - last);
      last = now;
      ticks++;
    }, 1);
    const started = performance.now();
    let threadMs = 0;
    for (let i = 0; i < 20; i++) {
      const t0 = performance.now();
      await threaded.runner.step([prefill(tags)]);
      threadMs += performance.now() - t0;
    }
    clearInterval(timer);
    const totalMs = performance.now() - started;
    process.stdout.write(
      `engine thread: 20 steps of ${PROMPT.length} tokens in ${totalMs.toFixed(1)} ms; ` +
        `${ticks} timer ticks meanwhile, the longest gap ${maxGapMs.toFixed(1)} ms\n`,
    );
    expect(ticks).toBeGreaterThan(0);
    expect(maxGapMs).toBeLessThan(Math.max(250, threadMs)); // generous: the machine is shared
    threaded.pool.ledger.free(tags, who);
  });
});
