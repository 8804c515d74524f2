// `tessera plan`'s weight count for an MoE GGUF whose routed experts the native kernels read in
// place (kernels/native/experts.c): those bytes are not repacked, so they are counted once, as file
// pages (mapped) or as part of the file read whole (copied), never also as repacked memory. The
// count agrees with what an engine really reads in place (WeightBytes), and is 0 where the experts
// are repacked (f16 experts, or kernels other than native).
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEngine } from '../engine/index.js';
import { openModelFile, readGguf } from '../formats/index.js';
import { genModel } from '../gen/index.js';
import { nativeAvailability } from '../kernels/index.js';
import { loadModel } from '../model/index.js';
import { planMemory, readWeightsOnDisk } from './config-memory.js';
import { planPool } from './config-pool.js';

const native = 'addon' in nativeAvailability();
let dir: string;
const file = (dtype: string): string => join(dir, `qwen3moe-tiny-${dtype}.gguf`);

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tessera-plan-moe-'));
  for (const dtype of ['q4_0', 'q4_k_m', 'f16'] as const)
    await genModel({
      preset: 'qwen3moe-tiny',
      format: 'gguf',
      out: file(dtype),
      seed: 1,
      dtype,
      overrides: { hiddenSize: 256 },
    });
}, 120_000);
afterAll(async () => rm(dir, { recursive: true, force: true }));

/** Bytes of the file's 3-D expert tensors, read from its header. */
async function expertTensorBytes(path: string): Promise<number> {
  const g = readGguf((await openModelFile(path, 'mmap')).bytes, path);
  return g.tensors.filter((t) => /_exps\.weight$/.test(t.name)).reduce((a, t) => a + (t.byteLength ?? 0), 0);
}

describe.skipIf(!native)('tessera plan: routed experts read in place', () => {
  for (const dtype of ['q4_0', 'q4_k_m'] as const)
    it(`${dtype}: the experts are counted as file bytes, not repacked, as the engine reads them`, async () => {
      const path = file(dtype);
      const experts = await expertTensorBytes(path);
      expect(experts).toBeGreaterThan(0);
      const model = await loadModel(path);
      const pool = planPool(model.config, {
        size: { kind: 'pages', numPages: 16 },
        pageSize: 16,
        kvDtype: 'f32',
        contextLength: null,
      });
      const step = { maxStepTokens: 16, maxStepLogits: 4 };
      const copied = await readWeightsOnDisk(path, dir, 'copy', true);
      expect(copied.expertsInPlaceBytes).toBe(experts);
      const m = planMemory(model.config, copied, pool, step);
      // Copied: the file once, plus what the kernels repack (neither the embedding nor the experts).
      expect(m.repackedBytes).toBe(copied.fileBytes - copied.embeddingBytes - experts);
      expect(m.fileResidentBytes).toBe(copied.fileBytes);
      const mapped = planMemory(model.config, await readWeightsOnDisk(path, dir, 'mmap', true), pool, step);
      expect(mapped.repackedBytes).toBe(m.repackedBytes);
      expect(mapped.fileResidentBytes).toBe(copied.embeddingBytes + experts);
      // What an engine on the native kernels reads in place: the embedding and these experts.
      const engine = await createEngine(model, { kvPages: 16, threads: 1, kernels: 'native' });
      try {
        expect(engine.weightBytes.inPlace).toBe(copied.embeddingBytes + experts);
      } finally {
        await engine.dispose();
      }
    });

  it('counts nothing in place for f16 experts, or when the kernels are not native', async () => {
    expect((await readWeightsOnDisk(file('f16'), dir, 'copy', true)).expertsInPlaceBytes).toBe(0);
    expect((await readWeightsOnDisk(file('q4_0'), dir, 'copy', false)).expertsInPlaceBytes).toBe(0);
  });
});
