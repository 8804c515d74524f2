// The grammar engine off the event loop: a schema that traps, or takes too long to compile,
// costs only its own request; the checker's queue is bounded; approvals are per tenant.
// Needs the built thread entry (dist/grammar/grammar-thread-main.js: `npx tsc -p tsconfig.build.json`).
import { afterEach, describe, expect, it } from 'vitest';
import { asTenantId, FaultSet, InvalidRequestError, type ConstraintSpec, type FaultName } from '../core/index.js';
import { GrammarEngine, type GrammarEngineOptions } from './engine.js';
import { GRAMMAR_CRASH_MARKER } from './grammar-messages.js';
import { SCHEMA_LIMITS } from './schema-limits.js';
import { allows, charIds, testVocab } from './test-vocab.js';

const A = asTenantId('tenant-a');
const B = asTenantId('tenant-b');
const vocab = testVocab();
const schema = (s: unknown): ConstraintSpec => ({ kind: 'json_schema', schema: JSON.stringify(s) });
const SIMPLE = schema({ type: 'object', properties: { x: { type: 'integer' } }, required: ['x'] });

function nested(depth: number): ConstraintSpec {
  let s: unknown = { type: 'string' };
  for (let i = 0; i < depth; i++) s = { type: 'object', properties: { a: s }, required: ['a'] };
  return schema(s);
}

/** 2000 patterned string properties: many seconds of compile (600 took 2.4-11 s). */
const COSTLY_PROPERTIES = Object.fromEntries(
  Array.from({ length: 2000 }, (_, i) => [`p${i}`, { type: 'string', pattern: '^[a-z]{3}-[0-9]{4}-[A-Z]{2}$' }]),
);
const COSTLY = schema({ type: 'object', properties: COSTLY_PROPERTIES });

const engines: GrammarEngine[] = [];
function engine(options: GrammarEngineOptions & { readonly armed?: readonly FaultName[] } = {}): GrammarEngine {
  const e = new GrammarEngine(vocab, { ...options, faults: new FaultSet(options.armed ?? []) });
  engines.push(e);
  return e;
}
afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.close()));
});

describe('GrammarEngine', () => {
  it('refuses a schema nested 200 deep before compiling it, naming the limit', async () => {
    const error = await engine().check(nested(200), 'response_format', A);
    expect(error).toBeInstanceOf(InvalidRequestError);
    expect(error?.message).toMatch(/nesting depth/);
    expect(error?.param).toBe('response_format');
  });

  it("a schema that traps the compiler fails only its own request: another tenant's schema then compiles", async () => {
    const e = engine({ armed: ['skip-schema-limits'] });
    const poisoned = await e.check(nested(200), 'response_format', A);
    expect(poisoned).toBeInstanceOf(InvalidRequestError);
    expect(poisoned?.message).toMatch(/memory access out of bounds|Aborted/);
    expect(await e.check(SIMPLE, 'response_format', B)).toBeNull();
    expect(e.restarts.checker).toBe(1);
  });

  it('under keep-trapped-grammar, the trapped instance is kept and the other tenant fails (negative control)', async () => {
    const e = engine({ armed: ['skip-schema-limits', 'keep-trapped-grammar'] });
    expect(await e.check(nested(200), 'response_format', A)).toBeInstanceOf(InvalidRequestError);
    expect(await e.check(SIMPLE, 'response_format', B)).not.toBeNull();
  });

  it('a constraint built after a poisoned schema gives masks that follow its grammar', async () => {
    const e = engine({ armed: ['skip-schema-limits'] });
    await e.check(nested(200), 'response_format', A);
    const c = e.constraint(SIMPLE, B);
    await c.prepare();
    expect(allows(c.mask(), vocab.pieces.indexOf('{'))).toBe(true);
    expect(allows(c.mask(), vocab.pieces.indexOf('['))).toBe(false);
    for (const id of charIds(vocab, '{"x":12}')) c.accept(id);
    await c.prepare();
    expect(allows(c.mask(), vocab.stopTokenIds[0] as number)).toBe(true);
    expect(allows(c.mask(), vocab.pieces.indexOf(','))).toBe(false);
    c.dispose();
  });

  it("masks of several constraints asked for in one turn each follow their own request's tokens", async () => {
    const e = engine();
    const first = e.constraint(SIMPLE, A);
    const second = e.constraint(schema({ type: 'array', items: { type: 'boolean' } }), B);
    await Promise.all([first.prepare(), second.prepare()]);
    for (const id of charIds(vocab, '{"x":')) first.accept(id);
    second.accept(vocab.pieces.indexOf('['));
    await Promise.all([first.prepare(), second.prepare()]);
    expect(allows(first.mask(), vocab.pieces.indexOf('7'))).toBe(true);
    expect(allows(first.mask(), vocab.pieces.indexOf('t'))).toBe(false);
    expect(allows(second.mask(), vocab.pieces.indexOf('true'))).toBe(true);
    expect(allows(second.mask(), vocab.pieces.indexOf('7'))).toBe(false);
  });

  it('a complete output (its stop token accepted) still gets a mask, of the stop tokens only, and breaks nothing', async () => {
    const e = engine();
    const done = e.constraint(schema({ type: 'integer' }), A);
    for (const id of [...charIds(vocab, '7'), vocab.stopTokenIds[0] as number]) done.accept(id);
    await done.prepare();
    expect(done.isTerminated).toBe(true);
    expect(allows(done.mask(), vocab.stopTokenIds[0] as number)).toBe(true);
    expect(allows(done.mask(), vocab.pieces.indexOf('7'))).toBe(false);
    const other = e.constraint(SIMPLE, B);
    await other.prepare();
    expect(e.restarts.matcher).toBe(0);
  });

  it('a token the grammar refuses fails that constraint only', async () => {
    const e = engine();
    const bad = e.constraint(SIMPLE, A);
    const good = e.constraint(SIMPLE, B);
    bad.accept(vocab.pieces.indexOf('['));
    await expect(bad.prepare()).rejects.toThrow(/does not continue the grammar/);
    await good.prepare();
    expect(allows(good.mask(), vocab.pieces.indexOf('{'))).toBe(true);
  });

  it('refuses a schema over the compile budget, ends that compile, and checks the next schema on a new thread', async () => {
    const e = engine({ compileBudgetMs: 1000, limits: { ...SCHEMA_LIMITS, maxPatterns: 10_000 } });
    const error = await e.check(COSTLY, 'response_format', A);
    expect(error?.message).toMatch(/too costly to compile/);
    expect(await e.check(SIMPLE, 'response_format', B)).toBeNull();
    expect(e.restarts.checker).toBe(1);
  });

  it('refuses a check `overloaded` while its queue is full, at once', async () => {
    const e = engine({ maxQueuedCompiles: 1, compileBudgetMs: 1000, armed: ['skip-schema-limits'] });
    const running = e.check(COSTLY, 'p', A); // the checker holds it
    const queued = e.check(SIMPLE, 'p', A);
    const refused = await e.check(nested(3), 'p', A);
    expect(refused?.code).toBe('overloaded');
    expect((await running)?.message).toMatch(/too costly/);
    expect(await queued).toBeNull();
  });

  it('refuses a schema that allows no value (a $ref cycle) with a 400, not a mask that allows no token', async () => {
    const error = await engine().check(
      schema({ $defs: { n: { $ref: '#/$defs/n' } }, $ref: '#/$defs/n' }),
      'response_format',
      A,
    );
    expect(error).toBeInstanceOf(InvalidRequestError);
  });

  it('when the matcher thread dies, only the requests with matchers on it fail, and the next request gets a new thread', async () => {
    const e = engine({ armed: ['crash-grammar-thread'] });
    const onIt = e.constraint(SIMPLE, A);
    await onIt.prepare();
    const crashing = e.constraint(schema({ type: 'string', description: GRAMMAR_CRASH_MARKER }), B);
    await expect(crashing.prepare()).rejects.toThrow(/grammar thread stopped/);
    onIt.accept(vocab.pieces.indexOf('{'));
    await expect(onIt.prepare()).rejects.toThrow(/structured output was lost/);
    const after = e.constraint(SIMPLE, A);
    await after.prepare();
    expect(allows(after.mask(), vocab.pieces.indexOf('{'))).toBe(true);
    expect(e.restarts.matcher).toBe(1);
  });

  it('a grammar that compiled slowly in the checker gets a matcher thread of its own, kept for its next request', async () => {
    await expectHeavyThread([]);
  });

  it('under shared-matcher-thread, the slow grammar shares the one matcher thread (negative control)', async () => {
    await expect(expectHeavyThread(['shared-matcher-thread'])).rejects.toThrow(/expected \+?0 to be 1/);
  });

  async function expectHeavyThread(armed: readonly FaultName[]): Promise<void> {
    // A thread runs one thing at a time: on the shared thread, every other request's mask would
    // wait behind this compile (on m100: 839 ms behind a 100-pattern schema's).
    const limits = { ...SCHEMA_LIMITS, maxPatterns: 10_000 };
    const e = engine({ heavyCompileMs: 500, compileBudgetMs: 60_000, limits, armed }); // far from both schemas' compile times
    const light = e.constraint(SIMPLE, A);
    await light.prepare();
    expect(e.numHeavyThreads).toBe(0);
    const slow = schema({
      type: 'object',
      // All 2000 patterned properties: 300 of them compiled in under 500 ms on a full `npm test`
      // run (the bound below), so the gap to that bound is kept wide on both sides.
      properties: COSTLY_PROPERTIES,
    });
    const heavy = e.constraint(slow, B);
    await heavy.prepare();
    expect(e.numHeavyThreads).toBe(1);
    light.accept(vocab.pieces.indexOf('{'));
    await light.prepare();
    expect(allows(light.mask(), vocab.pieces.indexOf('"'))).toBe(true);
    heavy.dispose();
    expect(e.numHeavyThreads).toBe(1); // idle, its grammar compiled, for the next request with that schema
    const again = e.constraint(slow, B);
    await again.prepare();
    expect(e.numHeavyThreads).toBe(1);
  }

  it('approves a schema per tenant: a second tenant sending the same schema is checked again', async () => {
    const e = engine();
    expect(await e.check(SIMPLE, 'p', A)).toBeNull();
    expect(await e.check(SIMPLE, 'p', A)).toBeNull();
    expect(e.numChecked).toBe(1);
    expect(await e.check(SIMPLE, 'p', B)).toBeNull();
    expect(e.numChecked).toBe(2);
  });

  it('under share-grammar-cache-across-tenants, the second tenant is not checked again (negative control)', async () => {
    const e = engine({ armed: ['share-grammar-cache-across-tenants'] });
    expect(await e.check(SIMPLE, 'p', A)).toBeNull();
    expect(await e.check(SIMPLE, 'p', B)).toBeNull();
    expect(e.numChecked).toBe(1);
  });
});
