// builtin:austen (models/austen, a small trained model) against the reference logits its
// exporter computed in PyTorch f32 (models/austen/reference-logits.json, format
// tessera-reference-logits/1): for every case, the last prompt position's logits within 1e-2 and
// the 32 greedy ids exactly, with the default kernels and the deterministic ones.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asRequestId, DEFAULT_TENANT, samplingParams } from '../core/index.js';
import { createEngine, type Engine } from './engine.js';
import { generate } from './generate.js';
import { loadModel, type LoadedModel, packageRoot } from '../model/index.js';

interface ReferenceCase {
  readonly name: string;
  readonly prompt_ids: number[];
  readonly last_logits: number[];
  readonly greedy_ids: number[];
}

interface ReferenceFile {
  readonly format: string;
  readonly tolerance: { readonly max_abs_logit_diff: number; readonly greedy_tokens: number };
  readonly cases: ReferenceCase[];
}

const dir = join(packageRoot(), 'models', 'austen');
let reference: ReferenceFile;
let model: LoadedModel;
const engines = new Map<string, Engine>();

beforeAll(async () => {
  reference = JSON.parse(await readFile(join(dir, 'reference-logits.json'), 'utf8')) as ReferenceFile;
  model = await loadModel(dir);
  engines.set('default', await createEngine(model, { kvPages: 64, threads: 1 }));
  engines.set('deterministic', await createEngine(model, { kvPages: 64, deterministic: true, threads: 1 }));
});
afterAll(async () => {
  for (const e of engines.values()) await e.dispose();
});

async function lastLogits(engine: Engine, promptIds: readonly number[]): Promise<Float32Array> {
  const owner = { rid: asRequestId('austen'), tenant: DEFAULT_TENANT };
  const allocated = engine.pool.ledger.allocate(Math.ceil(promptIds.length / engine.pool.pageSize), owner);
  if (allocated.kind !== 'allocated') throw new Error('pool');
  try {
    const [result] = await engine.runner.step([
      { ...owner, tags: allocated.tags, tokens: [...promptIds], startPos: 0, wantLogits: true },
    ]);
    if (result?.kind !== 'logits') throw new Error(`no logits: ${result?.kind}`);
    return result.logits.slice();
  } finally {
    engine.pool.ledger.free(allocated.tags, owner);
  }
}

describe('models/austen against its reference logits', () => {
  it('has the format and tolerances this test reads', () => {
    expect(reference.format).toBe('tessera-reference-logits/1');
    expect(reference.tolerance).toEqual({ max_abs_logit_diff: 0.01, greedy_tokens: 32 });
    expect(reference.cases.length).toBeGreaterThan(0);
  });

  it.each(['default', 'deterministic'])(
    '%s kernels: logits within 1e-2 and 32 greedy ids equal, for every case',
    async (kernels) => {
      const engine = engines.get(kernels)!;
      for (const c of reference.cases) {
        const logits = await lastLogits(engine, c.prompt_ids);
        expect(logits).toHaveLength(c.last_logits.length);
        const maxDiff = Math.max(...c.last_logits.map((v, i) => Math.abs(v - logits[i]!)));
        expect(maxDiff, c.name).toBeLessThanOrEqual(reference.tolerance.max_abs_logit_diff);
        const sampling = samplingParams({ maxTokens: c.greedy_ids.length, ignoreEos: true });
        const { outputs } = await generate(engine.runner, [{ promptIds: c.prompt_ids, sampling }]);
        expect(outputs[0]!.ids, c.name).toEqual(c.greedy_ids);
      }
    },
  );
});
