// Property (issue 33, finding 6): for random schemas that stress what xgrammar's own converter
// gets wrong (number bounds, integer and fractional, exclusive; multipleOf; string lengths,
// formats, patterns), every output a real model samples at temperature 1 and that ends with
// "stop" validates with ajv (strict, ajv-formats), on two vocabularies: the built-in model's and
// Qwen3's (gen-model's qwen3-tiny: 151,936 byte-level pieces). Each spec goes through the API's
// schema pass (enforceableSpec), as every request's does; a schema it refuses names a keyword.
// Negative control: with the fault point skip-schema-rules (the schema goes to xgrammar as sent)
// the same property fails: completed outputs that do not validate.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enforceableSpec } from '../../src/api/openai/response-format.js';
import { FaultSet, InvalidRequestError, NO_FAULTS, type ConstraintSpec } from '../../src/core/index.js';
import { genModel } from '../../src/gen/index.js';
import { strictAjv, validJson } from './ajv-strict.js';
import { structuredRunner, type Runner } from './harness.js';
import { schema, type Schema } from './schema-arbitraries.js';

let dir: string;
let qwen3: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'tessera-schema-rules-'));
  qwen3 = join(dir, 'qwen3-tiny.gguf');
  await genModel({ preset: 'qwen3-tiny', format: 'gguf', out: qwen3, seed: 1 });
}, 60_000);
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

interface Tally {
  readonly refused: string[];
  readonly completed: number;
  readonly invalid: string[];
}

async function sampleAll(runner: Runner, numSchemas: number, faults: FaultSet, seed: number): Promise<Tally> {
  const ajv = strictAjv();
  const samples = fc.sample(fc.record({ s: schema, seed: fc.integer({ min: 0, max: 2 ** 31 - 1 }) }), {
    numRuns: numSchemas,
    seed,
  });
  const tally: Tally = { refused: [], completed: 0, invalid: [] };
  let completed = 0;
  await Promise.all(
    samples.map(async ({ s, seed: sampleSeed }: { s: Schema; seed: number }) => {
      let spec: ConstraintSpec;
      try {
        spec = enforceableSpec({ kind: 'json_schema', schema: JSON.stringify(s) }, 'response_format', faults);
      } catch (error) {
        if (!(error instanceof InvalidRequestError)) throw error;
        tally.refused.push(error.message);
        return;
      }
      const out = await runner.run('She wrote a letter:', spec, { maxTokens: 300, temperature: 1, seed: sampleSeed });
      if (out.end.type !== 'finished' || out.end.finishReason !== 'stop') return;
      completed++;
      if (!validJson(ajv.compile(s), out.text)) tally.invalid.push(`${JSON.stringify(s)} -> ${out.text}`);
    }),
  );
  return { ...tally, completed };
}

describe.each([
  ['the built-in model', undefined],
  ['qwen3-tiny (Qwen3 vocabulary)', 'qwen3'],
])('on %s, at temperature 1', (_name, which) => {
  let runner: Runner;
  beforeAll(async () => {
    runner = await structuredRunner(which === 'qwen3' ? { model: qwen3 } : {});
  }, 60_000);
  afterAll(async () => {
    await runner?.close();
  });

  it('every output that ends with "stop" validates against its schema (ajv strict)', async () => {
    const { refused, completed, invalid } = await sampleAll(runner, 20, NO_FAULTS, 33);
    expect(invalid).toEqual([]);
    expect(completed).toBeGreaterThan(10);
    for (const message of refused) expect(message).toMatch(/cannot enforce the schema keyword `\w+`/);
  }, 90_000);
});

describe('negative control: fault point skip-schema-rules', () => {
  it('without the schema pass, completed outputs fail validation', async () => {
    const runner = await structuredRunner();
    try {
      const { invalid } = await sampleAll(runner, 30, new FaultSet(['skip-schema-rules']), 33);
      expect(invalid.length).toBeGreaterThan(0);
    } finally {
      await runner.close();
    }
  }, 90_000);
});
