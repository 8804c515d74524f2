// --weights mmap against --weights copy on a GGUF MoE (Qwen3-MoE in miniature, q4_0): the same
// logits bit for bit, in process and on the engine thread (which maps the file itself: a
// mapping cannot be transferred), and the load's byte counts (repacked by the kernels, read in
// place) summing to the file's tensors. Runs dist/'s thread entry: build first.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asRequestId, asTenantId, type BatchItem } from '../core/index.js';
import { nativeAvailability } from '../kernels/index.js';
import { genModel } from '../gen/index.js';
import { loadModel } from '../model/index.js';
import { createEngine, type Engine } from './engine.js';
import { createThreadedEngine } from './engine-thread.js';
import { describeWeights } from './weights-prepared.js';

const dir = mkdtempSync(join(tmpdir(), 'tessera-weights-mmap-'));
const file = join(dir, 'qwen3moe-tiny-q4_0.gguf');
const who = { rid: asRequestId('a'), tenant: asTenantId('t1') };
const PROMPT = Array.from({ length: 20 }, (_, i) => 300 + 7 * i);
const OPTIONS = { kvPages: 8, pageSize: 16, maxStepTokens: 32, maxStepLogits: 2, deterministic: true, threads: 1 };
const mapped = 'addon' in nativeAvailability();

/** The logits of a prefill, then of one decode step, on a fresh engine. */
async function logitsOf(engine: Engine): Promise<Float32Array[]> {
  const result = engine.pool.ledger.allocate(2, who);
  if (result.kind !== 'allocated') throw new Error('test pool too small');
  const item = (tokens: number[], startPos: number): BatchItem => ({
    ...who,
    tags: result.tags,
    tokens,
    startPos,
    wantLogits: true,
  });
  const out: Float32Array[] = [];
  for (const [tokens, start] of [
    [PROMPT, 0],
    [[11], PROMPT.length],
  ] as const) {
    const [r] = await engine.runner.step([item([...tokens], start)]);
    if (r?.kind !== 'logits') throw new Error(`expected logits, got ${r?.kind}`);
    out.push(r.logits.slice());
  }
  engine.pool.ledger.free(result.tags, who);
  return out;
}

describe('weights mapped, not copied', () => {
  let copied: Float32Array[];

  beforeAll(async () => {
    await genModel({ preset: 'qwen3moe-tiny', format: 'gguf', out: file, seed: 5, dtype: 'q4_0' });
    const engine = await createEngine(await loadModel(file, { weights: 'copy' }), OPTIONS);
    copied = await logitsOf(engine);
    await engine.dispose();
  }, 180_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('gives the same logits, bit for bit, from the map as from the copy', async () => {
    const model = await loadModel(file, { weights: 'mmap' });
    expect(model.source.weights).toBe(mapped ? 'mmap' : 'copy');
    const engine = await createEngine(model, OPTIONS);
    try {
      const logits = await logitsOf(engine);
      expect(logits.map((l, i) => Buffer.from(l.buffer).equals(Buffer.from(copied[i]!.buffer)))).toEqual([true, true]);
      // Every tensor byte is either repacked by the kernels or read in place (the untied embedding,
      // and on the native kernels the q4_0 routed experts: kernels/native/experts.c).
      const bytesOf = (keep: (name: string) => boolean) =>
        [...model.tensors.values()].filter((t) => keep(t.name)).reduce((a, t) => a + t.data.byteLength, 0);
      expect(engine.weightBytes.repacked + engine.weightBytes.inPlace).toBe(bytesOf(() => true));
      const experts = engine.kernels.dense === 'native' ? bytesOf((n) => /\.mlp\.experts\.\d+\./.test(n)) : 0;
      expect(experts > 0 || engine.kernels.dense !== 'native').toBe(true);
      expect(engine.weightBytes.inPlace).toBe(
        model.tensors.get('model.embed_tokens.weight')!.data.byteLength + experts,
      );
    } finally {
      await engine.dispose();
    }
  });

  it('maps on the engine thread itself and computes the same logits there', async () => {
    const threaded = await createThreadedEngine({ spec: file, weights: 'mmap', ...OPTIONS }, 1);
    try {
      expect(threaded.weightsFile).toEqual(
        mapped ? { how: 'mmap', fellBack: null } : { how: 'copy', fellBack: expect.any(String) },
      );
      const logits = await logitsOf(threaded);
      expect(Buffer.from(logits[1]!.buffer).equals(Buffer.from(copied[1]!.buffer))).toBe(true);
      expect(describeWeights(threaded.weightsFile, threaded.weightBytes, threaded.kernels.dense)).toMatch(
        mapped
          ? /^weights mapped read-only \(mmap\): \d+\.\d\d GB repacked into the \w+ kernels' memory, \d+\.\d\d GB read in place/
          : /^weights read into memory, not mapped/,
      );
    } finally {
      await threaded.dispose();
    }
  });
});
