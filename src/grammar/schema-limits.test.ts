// The schema limits, checked by one walk before any compile: each limit refuses with a message
// that names it and the request's param; a schema at every limit passes.
import { describe, expect, it } from 'vitest';
import { SCHEMA_LIMITS, schemaOverLimit } from './schema-limits.js';
import { schemaRules } from './schema-rules.js';

const over = (schema: unknown) => schemaOverLimit(JSON.stringify(schema), 'response_format', SCHEMA_LIMITS);
const props = (n: number, value: unknown = { type: 'string' }) =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, value]));

describe('schemaOverLimit', () => {
  it('passes a schema at every limit', () => {
    let deep: unknown = { type: 'string' };
    for (let i = 0; i < 31; i++) deep = { type: 'object', properties: { a: deep } }; // 63 levels of JSON
    expect(over(deep)).toBeNull();
    expect(over({ type: 'object', properties: props(5000) })).toBeNull();
    expect(over({ enum: Array.from({ length: 1000 }, (_, i) => i) })).toBeNull();
    expect(over({ type: 'object', properties: props(100, { type: 'string', pattern: 'a'.repeat(1000) }) })).toBeNull();
  });

  it.each([
    [
      'nesting depth',
      (() => {
        let s: unknown = {};
        for (let i = 0; i < 40; i++) s = { properties: { a: s } };
        return s;
      })(),
    ],
    ['size in bytes', { description: 'x'.repeat(300 * 1024) }],
    ['number of properties', { type: 'object', properties: props(5001) }],
    ['number of enum and const values', { anyOf: [{ enum: Array.from({ length: 1000 }, (_, i) => i) }, { const: 1 }] }],
    ['number of patterns', { type: 'object', properties: props(101, { type: 'string', pattern: '^a$' }) }],
    ['pattern length', { type: 'string', pattern: 'a'.repeat(1001) }],
    [
      'number of \\$ref',
      { $defs: { a: { type: 'string' } }, anyOf: Array.from({ length: 1001 }, () => ({ $ref: '#/$defs/a' })) },
    ],
    ['number of anyOf/oneOf branches', { oneOf: Array.from({ length: 1001 }, () => ({ type: 'null' })) }],
  ])('refuses a schema over its %s, naming the limit and the param', (limit, schema) => {
    const error = over(schema);
    expect(error?.message).toMatch(new RegExp(`\`response_format\`: the schema's ${limit}`));
    expect(error?.param).toBe('response_format');
  });

  it('counts tool_choice "required"\'s combined anyOf: 128 tools of 60 patterned parameters are over the limits', () => {
    const tool = (i: number) => ({
      type: 'object',
      properties: {
        name: { const: `f${i}` },
        parameters: { type: 'object', properties: props(60, { type: 'string', pattern: '^[a-z]+$' }) },
      },
    });
    const combined = { type: 'array', items: { anyOf: Array.from({ length: 128 }, (_, i) => tool(i)) } };
    expect(over(combined)?.message).toMatch(/over Tessera's limit/);
  });

  it('walks a very deep document without recursion', () => {
    const text = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    expect(schemaOverLimit(text, 'tools', { ...SCHEMA_LIMITS, maxSchemaBytes: 1 << 20 })?.message).toMatch(
      /nesting depth/,
    );
  });
});

describe('refCycle, through schemaOverLimit', () => {
  it('refuses a ring of definitions that are only references, wherever it is used', () => {
    expect(over({ $defs: { n: { $ref: '#/$defs/n' } }, $ref: '#/$defs/n' })?.message).toMatch(
      /\$ref cycle #\/\$defs\/n -> #\/\$defs\/n never reaches a value/,
    );
    const nested = {
      type: 'object',
      properties: { a: { $ref: '#/$defs/x' } },
      $defs: { x: { $ref: '#/$defs/y' }, y: { $ref: '#/$defs/x', description: 'y' } },
    };
    expect(over(nested)?.message).toMatch(/\$ref cycle/);
  });

  it('passes a recursion through a value', () => {
    const list = {
      $defs: { node: { type: 'object', properties: { next: { $ref: '#/$defs/node' } } } },
      $ref: '#/$defs/node',
    };
    expect(over(list)).toBeNull();
  });
});

describe('the size in bytes, on a schema the schema pass rewrote', () => {
  it("does not count the text of Tessera's own rule nodes (2000 bounded numbers pass)", () => {
    const rules = schemaRules(
      JSON.stringify({ type: 'object', properties: props(2000, { type: 'number', minimum: -1.25, maximum: 1e6 }) }),
    );
    expect(rules.kind).toBe('schema');
    const rewritten = (rules as { readonly schema: string }).schema;
    expect(rewritten.length).toBeGreaterThan(SCHEMA_LIMITS.maxSchemaBytes);
    expect(schemaOverLimit(rewritten, 'response_format', SCHEMA_LIMITS)).toBeNull();
  });
});
