import { describe, expect, it } from 'vitest';
import {
  asRequestId,
  asTenantId,
  FaultSet,
  InvariantError,
  KV_DTYPES,
  NO_FAULTS,
  PageCheckError,
  type BatchItem,
  type FaultSet as Faults,
  type KvDtype,
  type Tag,
} from '../core/index.js';
import { PagePool } from '../pages/index.js';
import { randomModel } from '../gen/index.js';
import { REF_CONFIG } from '../gen/testing/ref-config.js';
import { refRunner } from './testing/ref-runner.js';
import { ModelRunner, type ItemResult } from './runner.js';

const PAGE_SIZE = 4;

async function setup(
  numPages: number,
  faults: Faults = NO_FAULTS,
  dtype: KvDtype = 'f32',
): Promise<{ runner: ModelRunner; pool: PagePool }> {
  return refRunner(randomModel(REF_CONFIG, 5), { numPages, pageSize: PAGE_SIZE, faults, dtype });
}

const who = (rid: string, tenant = 't1') => ({ rid: asRequestId(rid), tenant: asTenantId(tenant) });

function allocate(pool: PagePool, owner: ReturnType<typeof who>, numPages: number): readonly Tag[] {
  const result = pool.ledger.allocate(numPages, owner);
  if (result.kind !== 'allocated') throw new Error('test pool too small');
  return result.tags;
}

function item(
  owner: ReturnType<typeof who>,
  tags: readonly Tag[],
  tokens: number[],
  startPos: number,
  wantLogits = true,
): BatchItem {
  return { ...owner, tags, tokens, startPos, wantLogits };
}

function logitsOf(result: ItemResult | undefined): Float32Array {
  if (result?.kind !== 'logits') throw new Error(`expected logits, got ${result?.kind}`);
  return result.logits.slice();
}

const PROMPT_A = [11, 22, 33, 44, 55, 66];
const PROMPT_B = [70, 60, 50, 40, 30, 20];
const NEXT = 7;

describe.each(KV_DTYPES)(
  'the incident (%s KV): request B is handed pages request A filled and freed, and reads them without writing',
  (dtype) => {
    /** A fills pages 0 and 1 and frees them; B gets the same pages and claims 6 positions are already there. */
    async function replay(faults: Faults) {
      const { runner, pool } = await setup(2, faults, dtype);
      const a = who('a', 'tenant-a');
      const tagsA = allocate(pool, a, 2);
      const aLogits = logitsOf((await runner.step([item(a, tagsA, [...PROMPT_A, NEXT], 0)]))[0]);
      pool.ledger.free(tagsA, a);
      const b = who('b', 'tenant-b');
      const tagsB = allocate(pool, b, 2);
      const before = pool.kv.data.slice();
      const [result] = await runner.step([item(b, tagsB, [NEXT], PROMPT_A.length)]);
      return { result, aLogits, tagsA, tagsB, pool, runner, before };
    }

    it('fails closed: PageCheckError on the stale page, a counter rises, nothing is read, written or stamped', async () => {
      const { result, tagsA, tagsB, pool, runner, before } = await replay(NO_FAULTS);
      expect(pool.kv.dtype).toBe(dtype);
      expect(tagsB.map((t) => t.page)).toEqual(tagsA.map((t) => t.page)); // the very same pages, new epochs
      expect(result?.kind).toBe('failed');
      const error = (result as Extract<ItemResult, { kind: 'failed' }>).error;
      expect(error).toBeInstanceOf(PageCheckError);
      expect([error.page, error.failure]).toEqual([0, 'stamp-epoch']);
      expect(runner.stats.numPageCheckFailures).toBe(1);
      expect(pool.kv.data).toEqual(before);
      expect(pool.stampOf(tagsB[1]!.page)).toEqual({ epoch: tagsA[1]!.epoch, filledSlots: 3 });
    });

    it("negative control: with skip-page-check, B gets logits computed from A's data, unlike a clean run of its own prompt", async () => {
      const { result, aLogits } = await replay(new FaultSet(['skip-page-check']));
      const leaked = logitsOf(result);
      expect(leaked).toEqual(aLogits); // B's "answer" is A's continuation: the leak

      const clean = await setup(2, NO_FAULTS, dtype);
      const b = who('b', 'tenant-b');
      const own = logitsOf((await clean.runner.step([item(b, allocate(clean.pool, b, 2), [...PROMPT_B, NEXT], 0)]))[0]);
      expect(leaked).not.toEqual(own);
    });
  },
);

describe('ModelRunner.step', () => {
  it('drops only the item that fails its check; the others run as they would alone', async () => {
    const { runner, pool } = await setup(8);
    const [a, b] = [who('a'), who('b')];
    const [tagsA, tagsB] = [allocate(pool, a, 2), allocate(pool, b, 2)];
    await runner.step([item(a, tagsA, PROMPT_A, 0, false), item(b, tagsB, PROMPT_B, 0, false)]);

    const alone = await setup(8);
    const tagsAlone = allocate(alone.pool, a, 2);
    await alone.runner.step([item(a, tagsAlone, PROMPT_A, 0, false)]);
    const expected = logitsOf((await alone.runner.step([item(a, tagsAlone, [NEXT], 6)]))[0]);

    const bBefore = pool.kv.data.slice();
    // b presents a's page table: same tenant, wrong owner.
    const results = await runner.step([item(b, tagsA, [NEXT], 6), item(a, tagsA, [NEXT], 6)]);
    expect(results[0]?.kind).toBe('failed');
    expect((results[0] as Extract<ItemResult, { kind: 'failed' }>).error.failure).toBe('wrong-owner');
    expect(logitsOf(results[1])).toEqual(expected);
    expect(runner.stats.numPageCheckFailures).toBe(1);
    // Only a's slot 6 (page tagsA[1], slot 2) changed; b's pages are untouched.
    const changed = [...pool.kv.data.keys()].filter((i) => !Object.is(pool.kv.data[i], bBefore[i]));
    const perPage = pool.kv.data.length / pool.kv.numPages;
    expect(new Set(changed.map((i) => Math.floor(i / perPage)))).toEqual(new Set([tagsA[1]!.page]));
  });

  it('stamps each page it wrote up to the last filled slot, and returns logits only where wanted', async () => {
    const { runner, pool } = await setup(4);
    const a = who('a');
    const tags = allocate(pool, a, 3);
    const results = await runner.step([item(a, tags, PROMPT_A, 0, false)]);
    expect(results).toEqual([{ kind: 'computed', rid: a.rid }]);
    expect(tags.map((t) => pool.stampOf(t.page).filledSlots)).toEqual([4, 2, 0]);
    const [decoded] = await runner.step([item(a, tags, [NEXT, 8, 9], 6)]);
    expect(decoded?.kind).toBe('logits');
    expect(tags.map((t) => pool.stampOf(t.page))).toEqual([
      { epoch: tags[0]!.epoch, filledSlots: 4 },
      { epoch: tags[1]!.epoch, filledSlots: 4 },
      { epoch: tags[2]!.epoch, filledSlots: 1 },
    ]);
  });

  it('gives the same logits for a prompt prefilled at once, in chunks, or token by token', async () => {
    const prompt = [...PROMPT_A, NEXT, 8, 9];
    const logitsAfter = async (chunks: number[]): Promise<Float32Array> => {
      const { runner, pool } = await setup(4);
      const a = who('a');
      const tags = allocate(pool, a, 3);
      let at = 0;
      let last: ItemResult | undefined;
      for (const n of chunks) {
        [last] = await runner.step([item(a, tags, prompt.slice(at, at + n), at, at + n === prompt.length)]);
        at += n;
      }
      return logitsOf(last);
    };
    const once = await logitsAfter([9]);
    expect(await logitsAfter([3, 5, 1])).toEqual(once);
    expect(await logitsAfter([1, 1, 1, 1, 1, 1, 1, 1, 1])).toEqual(once);
  });

  it('gives logits for the last logitCount tokens, each row as a chunk ending at that token gives it', async () => {
    const prompt = [...PROMPT_A, NEXT, 8, 9];
    const { runner, pool } = await setup(4);
    const a = who('a');
    const tags = allocate(pool, a, 3);
    await runner.step([item(a, tags, prompt.slice(0, 5), 0, false)]);
    const [multi] = await runner.step([{ ...item(a, tags, prompt.slice(5), 5), logitCount: 3 }]);
    if (multi?.kind !== 'logits') throw new Error(`expected logits, got ${multi?.kind}`);
    expect(multi.rows).toBe(3);
    const V = REF_CONFIG.vocabSize;
    expect(multi.logits.length).toBe(3 * V);
    const rows = Array.from({ length: 3 }, (_, r) => multi.logits.slice(r * V, (r + 1) * V));
    for (let r = 0; r < 3; r++) {
      const end = prompt.length - 3 + r + 1;
      const alone = await setup(4);
      const [single] = await alone.runner.step([item(a, allocate(alone.pool, a, 3), prompt.slice(0, end), 0)]);
      expect(rows[r]).toEqual(logitsOf(single));
    }
    await expect(runner.step([{ ...item(a, tags, [1, 2], 9), logitCount: 3 }])).rejects.toThrow(InvariantError);
  });

  it('runs several requests in one step, each with its own pages and positions', async () => {
    const { runner, pool } = await setup(8);
    const [a, b] = [who('a'), who('b', 't2')];
    const [tagsA, tagsB] = [allocate(pool, a, 2), allocate(pool, b, 2)];
    const together = await runner.step([item(a, tagsA, PROMPT_A, 0), item(b, tagsB, PROMPT_B.slice(0, 3), 0)]);
    for (const [owner, prompt, logits] of [
      [a, PROMPT_A, together[0]],
      [b, PROMPT_B.slice(0, 3), together[1]],
    ] as const) {
      const alone = await setup(8);
      const [single] = await alone.runner.step([item(owner, allocate(alone.pool, owner, 2), [...prompt], 0)]);
      expect(logitsOf(logits)).toEqual(logitsOf(single));
    }
  });

  it('throws on a broken contract: a page table too short for the positions', async () => {
    const { runner, pool } = await setup(4);
    const a = who('a');
    const tags = allocate(pool, a, 1);
    await expect(runner.step([item(a, tags, PROMPT_A, 0)])).rejects.toThrow(InvariantError);
  });
});
