import { describe, expect, it } from 'vitest';
import { batchInvarianceCases, denseCases } from '../cases/dense-cases.js';
import { opsCases } from '../cases/ops-cases.js';
import type { AttentionArgs, DenseWeight, PagedKvView } from '../types.js';
import { RefDense, createRefDense } from './dense.js';
import { RefOps, createRefOps } from './ops.js';

describe('RefDense runs the dense case suite', () => {
  for (const c of [...denseCases(), ...batchInvarianceCases()]) it(c.name, () => c.run(createRefDense()));
});

describe('RefOps runs the ops case suite', () => {
  for (const c of opsCases()) it(c.name, () => c.run(createRefOps()));
});

/** Reads the pool's last page (never in any case's page table) in place of the first page the call reads. */
class ReadsForeignPage extends RefOps {
  override attention(kv: PagedKvView, args: AttentionArgs): void {
    const firstRead = args.window === undefined ? 0 : Math.max(0, args.startPos + 1 - args.window);
    const at = Math.floor(firstRead / kv.pageSize);
    super.attention(kv, { ...args, pageTable: args.pageTable.map((page, i) => (i === at ? kv.numPages - 1 : page)) });
  }
}

/** Attends to every position before the query, whatever the window. */
class IgnoresWindow extends RefOps {
  override attention(kv: PagedKvView, args: AttentionArgs): void {
    const { window: _ignored, ...full } = args;
    super.attention(kv, full);
  }
}

describe('the ops case suite itself (negative controls)', () => {
  const attentionCases = opsCases().filter((c) => c.name.includes('matches the reference and reads only'));

  it('fails every attention case for a backend that reads a page outside the page table', async () => {
    expect(attentionCases.length).toBeGreaterThan(0);
    for (const c of attentionCases)
      await expect(Promise.resolve().then(() => c.run(new ReadsForeignPage()))).rejects.toThrow(/is NaN|expected/);
  });

  it('fails every sliding-window attention case for a backend that reads before the window', async () => {
    const windowed = attentionCases.filter((c) => c.name.includes('window'));
    expect(windowed.length).toBe(3);
    for (const c of windowed)
      await expect(Promise.resolve().then(() => c.run(new IgnoresWindow()))).rejects.toThrow(/is NaN|expected/);
  });
});

/** Rounds differently inside a batch: the last bit of every output flips when m > 1. */
class BatchVariant extends RefDense {
  override async matmul(weight: DenseWeight, x: Float32Array, m: number, out?: Float32Array): Promise<Float32Array> {
    const y = await super.matmul(weight, x, m, out);
    if (m > 1) new Uint32Array(y.buffer, y.byteOffset, y.length).forEach((bits, i, all) => (all[i] = bits ^ 1));
    return y;
  }
}

describe('the dense case suite itself (negative controls)', () => {
  it('fails the batch-invariance cases for a backend whose rows change by one ulp inside a batch', async () => {
    for (const c of batchInvarianceCases())
      await expect(Promise.resolve().then(() => c.run(new BatchVariant()))).rejects.toThrow(/differs/);
  });
});
