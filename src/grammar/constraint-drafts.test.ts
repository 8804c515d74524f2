// Structured output under speculative decoding: a step's drafts get one mask per draft the
// grammar accepts (row j's mask: after d1..dj), and the matcher rolls them back, so the tokens
// verification then accepts reach it once, as in plain decoding.
//   - the draft masks equal the masks of a constraint fed the same tokens one by one
//   - a draft the grammar refuses ends the list (its row is never sampled: the mask before it
//     rejects it)
//   - after the drafts, the constraint is where the accepted output is: accepting the verified
//     prefix and the bonus token gives the masks plain decoding gives
//   - fault skip-grammar-rollback (the negative control): the drafts stay accepted, so the
//     verified tokens reach the matcher twice and it refuses them (the request would fail)
// Needs the built thread entry (dist/grammar/grammar-thread-main.js: `npx tsc -p tsconfig.build.json`).
import { afterEach, describe, expect, it } from 'vitest';
import { asTenantId, FaultSet, type ConstraintSpec, type FaultName } from '../core/index.js';
import { GrammarEngine } from './engine.js';
import { allows, charIds, testVocab } from './test-vocab.js';

const A = asTenantId('tenant-a');
const vocab = testVocab();
const SPEC: ConstraintSpec = {
  kind: 'json_schema',
  schema: JSON.stringify({
    type: 'object',
    properties: { name: { type: 'string' }, n: { type: 'integer' } },
    required: ['name', 'n'],
  }),
};

const engines: GrammarEngine[] = [];
function engine(armed: readonly FaultName[] = []): GrammarEngine {
  const e = new GrammarEngine(vocab, { faults: new FaultSet(armed) });
  engines.push(e);
  return e;
}
afterEach(async () => {
  await Promise.all(engines.splice(0).map((e) => e.close()));
});

/** The masks a constraint gives after each of `tokens`, fed one by one (plain decoding). */
async function plainMasks(e: GrammarEngine, tokens: readonly number[]): Promise<Int32Array[]> {
  const c = e.constraint(SPEC, A);
  const masks: Int32Array[] = [];
  await c.prepare();
  masks.push(c.mask());
  for (const t of tokens) {
    c.accept(t);
    await c.prepare();
    masks.push(c.mask());
  }
  c.dispose();
  return masks;
}

describe('grammar masks for speculative drafts', () => {
  it("gives row j's mask after d1..dj for the drafts it accepts, and rolls them back", async () => {
    const e = engine();
    const before = charIds(vocab, '{"name":"');
    const drafts = charIds(vocab, 'ab","n');
    const plain = await plainMasks(e, [...before, ...drafts]);
    const c = e.constraint(SPEC, A);
    for (const t of before) c.accept(t);
    await c.prepare(drafts);
    expect(c.mask()).toEqual(plain[before.length]);
    const draftMasks = c.draftMasks(drafts);
    expect(draftMasks).toHaveLength(drafts.length);
    draftMasks.forEach((m, j) => expect(m).toEqual(plain[before.length + j + 1]));
    // Verification accepted 'a' and sampled 'x' (rejecting 'b'): the matcher is where that output is.
    c.accept(drafts[0]!);
    c.accept(charIds(vocab, 'x')[0]!);
    await c.prepare();
    const [after] = (await plainMasks(e, [...before, ...charIds(vocab, 'ax')])).slice(-1);
    expect(c.mask()).toEqual(after);
    expect(() => c.draftMasks(drafts)).toThrow(/not prepared for/);
    c.dispose();
  });

  it('a draft the grammar refuses ends the list: no mask for it or past it', async () => {
    const e = engine();
    const c = e.constraint(SPEC, A);
    // '{' starts the object; '1' cannot follow it (a key must): the list ends at '{'.
    const drafts = charIds(vocab, '{1"n');
    await c.prepare(drafts);
    const masks = c.draftMasks(drafts);
    expect(masks).toHaveLength(1);
    expect(allows(masks[0]!, drafts[1]!)).toBe(false); // row 1 samples under it: '1' is never the draw
    expect(allows(masks[0]!, charIds(vocab, '"')[0]!)).toBe(true);
    c.dispose();
  });

  it('fault skip-grammar-rollback: the drafts stay accepted, and the verified tokens are then refused', async () => {
    const e = engine(['skip-grammar-rollback']);
    const drafts = charIds(vocab, '{"na');
    const c = e.constraint(SPEC, A);
    await c.prepare(drafts);
    expect(c.draftMasks(drafts)).toHaveLength(drafts.length);
    c.accept(drafts[0]!); // verification accepted '{' and sampled '"'
    c.accept(drafts[1]!);
    await expect(c.prepare()).rejects.toThrow(/does not continue the grammar/);
    c.dispose();
  });
});
