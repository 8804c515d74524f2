// Property: for random JSON schemas (objects, arrays, enums, bounded integers and numbers,
// strings with lengths and patterns, booleans, nesting), every output the built-in model
// samples under the schema's constraint at temperature 1 validates (ajv) and ends with "stop".
// The schemas are bounded (string lengths, array sizes), so a well-formed answer always fits
// max_tokens: an output that does not close is a bug, not bad luck. In-process (no HTTP), over
// the real model, tokenizer and xgrammar. Negative controls: the same seeds without the
// constraint give free text that parses as JSON for none of them; and with the fault
// `skip-token-mask` (the mask is computed but not applied) the outputs fail.
import { Ajv } from 'ajv';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { structuredRunner, type Runner } from './harness.js';

type Schema = Record<string, unknown>;

const key = fc.constantFrom('name', 'age', 'title', 'id', 'tags', 'ok', 'score', 'place', 'kind', 'note');
const leaf: fc.Arbitrary<Schema> = fc.oneof(
  fc.integer({ min: 1, max: 12 }).map((maxLength) => ({ type: 'string', maxLength })),
  fc
    .constantFrom('^[a-z]{1,6}$', '^[A-Z][a-z]{0,5}$', '^[0-9]{2,4}$', '^(yes|no|maybe)$')
    .map((pattern) => ({ type: 'string', pattern })),
  fc
    .uniqueArray(fc.constantFrom('red', 'green', 'blue', 'Darcy', 'Bennet', 'x y'), { minLength: 1, maxLength: 4 })
    .map((values) => ({ enum: values })),
  fc
    .tuple(fc.integer({ min: -1000, max: 1000 }), fc.integer({ min: 0, max: 1000 }))
    .map(([min, span]) => ({ type: 'integer', minimum: min, maximum: min + span })),
  fc
    .tuple(fc.integer({ min: -50, max: 50 }), fc.integer({ min: 1, max: 100 }))
    .map(([min, span]) => ({ type: 'number', minimum: min, maximum: min + span })),
  fc.constant({ type: 'boolean' }),
);
const schema: fc.Arbitrary<Schema> = fc.letrec<{ node: Schema; object: Schema }>((tie) => ({
  node: fc.oneof(
    { maxDepth: 2, depthIdentifier: 'schema' },
    leaf,
    leaf,
    tie('object'),
    fc.record({ type: fc.constant('array'), items: tie('node'), maxItems: fc.integer({ min: 1, max: 3 }) }),
  ),
  object: fc
    .uniqueArray(fc.tuple(key, tie('node')), { minLength: 1, maxLength: 3, selector: ([k]) => k })
    .chain((props) =>
      fc.subarray(props.map(([k]) => k)).map((required) => ({
        type: 'object',
        properties: Object.fromEntries(props),
        required,
        additionalProperties: false,
      })),
    ),
})).object;

const NUM_SCHEMAS = 30;
const ajv = new Ajv({ strict: false });
let runner: Runner;
let samples: { schema: Schema; seed: number }[];

beforeAll(async () => {
  runner = await structuredRunner();
  samples = fc.sample(fc.record({ schema, seed: fc.integer({ min: 0, max: 2 ** 31 - 1 }) }), {
    numRuns: NUM_SCHEMAS,
    seed: 20261201,
  });
});
afterAll(async () => {
  await runner?.close();
});

describe('constrained decoding over random JSON schemas', () => {
  it('every sampled output validates against its schema, at temperature 1', async () => {
    const outcomes = await Promise.all(
      samples.map(async ({ schema: s, seed }) => {
        const out = await runner.run(
          'She wrote a letter:',
          { kind: 'json_schema', schema: JSON.stringify(s) },
          { maxTokens: 400, temperature: 1, seed },
        );
        const validate = ajv.compile(s);
        let valid = false;
        try {
          valid = validate(JSON.parse(out.text)) === true;
        } catch {
          valid = false;
        }
        return { schema: s, text: out.text, end: out.end, valid };
      }),
    );
    const bad = outcomes.filter((o) => !o.valid || o.end.type !== 'finished' || o.end.finishReason !== 'stop');
    expect(bad.map((o) => ({ schema: JSON.stringify(o.schema), text: o.text, end: o.end }))).toEqual([]);
    expect(outcomes).toHaveLength(NUM_SCHEMAS);
    expect((await runner.worker.stats()).kvPages.allocated).toBe(0);
  }, 120_000);

  it('negative control: without the constraint the same model and seeds validate for none', async () => {
    const free = await Promise.all(
      samples
        .slice(0, 8)
        .map(({ seed }) => runner.run('She wrote a letter:', undefined, { maxTokens: 40, temperature: 1, seed })),
    );
    const parses = free.filter((o) => {
      try {
        JSON.parse(o.text);
        return true;
      } catch {
        return false;
      }
    });
    expect(parses).toEqual([]);
  }, 60_000);

  it('negative control: with skip-token-mask the model leaves the grammar, and the request fails', async () => {
    const unmasked = await structuredRunner({ faults: ['skip-token-mask'] });
    try {
      const outs = await Promise.all(
        samples
          .slice(0, 8)
          .map(({ schema: s, seed }) =>
            unmasked.run(
              'She wrote a letter:',
              { kind: 'json_schema', schema: JSON.stringify(s) },
              { maxTokens: 40, temperature: 1, seed },
            ),
          ),
      );
      expect(outs.filter((o) => o.end.type === 'failed').length).toBeGreaterThan(0);
      expect(outs.filter((o) => o.end.type === 'finished' && o.end.finishReason === 'stop')).toEqual([]);
    } finally {
      await unmasked.close();
    }
  }, 60_000);
});
