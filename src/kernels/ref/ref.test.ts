import { describe, expect, it } from 'vitest';
import { batchInvarianceCases, denseCases } from '../cases/dense-cases.js';
import { KV_DTYPES, Rng } from '../../core/index.js';
import { f16PromotionCases } from '../cases/f16-cases.js';
import { opsCases, poisonedPool } from '../cases/ops-cases.js';
import { f16ToF32, f32ToF16 } from '../half.js';
import type { AttentionArgs, DenseWeight, PagedKvView } from '../types.js';
import { RefDense, createRefDense } from './dense.js';
import { RefOps, createRefOps } from './ops.js';

describe('RefDense runs the dense case suite', () => {
  for (const c of [...denseCases(), ...batchInvarianceCases()]) it(c.name, () => c.run(createRefDense()));
});

describe('RefOps runs the ops case suite', () => {
  for (const c of [...opsCases(), ...f16PromotionCases()]) it(c.name, () => c.run(createRefOps()));
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

/** Leaves the sinks out of the softmax. */
class IgnoresSinks extends RefOps {
  override attention(kv: PagedKvView, args: AttentionArgs): void {
    const { sinks: _ignored, ...none } = args;
    super.attention(kv, none);
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
    expect(windowed.length).toBe(4 * KV_DTYPES.length); // four windowed setups (one with sinks), over each KV dtype
    for (const c of windowed)
      await expect(Promise.resolve().then(() => c.run(new IgnoresWindow()))).rejects.toThrow(/is NaN|expected/);
  });

  it('fails every attention-sink case for a backend that leaves the sinks out', async () => {
    const withSinks = opsCases().filter(
      (c) => c.name.includes('sinks') && (c.name.includes('matches the reference') || c.name.includes('dominant')),
    );
    expect(withSinks.length).toBe(2 * KV_DTYPES.length + 1); // two setups over each KV dtype, and the sink case
    for (const c of withSinks)
      await expect(Promise.resolve().then(() => c.run(new IgnoresSinks()))).rejects.toThrow(/expected|moved no output/);
  });
});

/** Promotes an f16 pool's halves through `misread` (a wrong conversion) before attending over it. */
class MisreadsHalves extends RefOps {
  readonly #misread: (h: number) => number;

  constructor(misread: (h: number) => number) {
    super();
    this.#misread = misread;
  }

  override attention(kv: PagedKvView, args: AttentionArgs): void {
    super.attention(kv.dtype === 'f16' ? { ...kv, data: kv.data.map(this.#misread) } : kv, args);
  }
}

describe('the f16 promotion cases themselves (negative controls)', () => {
  const promotionCases = f16PromotionCases();
  const misreads: [string, (h: number) => number, RegExp][] = [
    ['flushes subnormal halves to zero', (h) => ((h & 0x7c00) === 0 ? h & 0x8000 : h), /./],
    ['reads the largest half one step smaller', (h) => ((h & 0x7fff) === 0x7bff ? h - 1 : h), /./],
    // What the 3-op conversion (shift, mask, multiply by 2^112) does with exponent 31.
    ['reads inf and nan as finite halves', (h) => ((h & 0x7c00) === 0x7c00 ? (h & 0x8000) | 0x7bff : h), /inf and nan/],
  ];
  for (const [what, misread, which] of misreads) {
    it(`fails for a backend that ${what}`, async () => {
      const failing = promotionCases.filter((c) => which.test(c.name));
      expect(failing.length).toBeGreaterThan(0);
      for (const c of failing)
        await expect(Promise.resolve().then(() => c.run(new MisreadsHalves(misread)))).rejects.toThrow(
          /f16 pool .* f32 pool|outputs finite/,
        );
    });
  }
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

describe('RefOps over an f16 KV pool (the oracle of the f16 kernels)', () => {
  it('gives the f32 pool its bits back when every K and V value is a half: reads promote exactly', () => {
    const ref = new RefOps();
    const geometry = { numLayers: 1, pageSize: 4, numKvHeads: 2, headDim: 8 };
    const rng = new Rng(9);
    // Values that are exact halves, so the f16 pool loses nothing on write.
    const halves = (n: number) => Float32Array.from({ length: n }, () => f16ToF32(f32ToF16(rng.normal())));
    const [k, v] = [halves(10 * 16), halves(10 * 16)];
    const q = halves(2 * 4 * 8);
    const pageTable = Int32Array.from([2, 0, 1]);
    const outs = (['f32', 'f16'] as const).map((dtype) => {
      const kv = poisonedPool(ref, dtype, geometry, 3);
      ref.writeKv(kv, 0, pageTable, 0, 10, k, v);
      const out = new Float32Array(2 * 4 * 8);
      const shape = { numHeads: 4, numKvHeads: 2, headDim: 8, scale: 1 / Math.sqrt(8) };
      ref.attention(kv, { layer: 0, shape, q, out, numTokens: 2, startPos: 8, pageTable });
      return out;
    });
    expect(outs[1]).toEqual(outs[0]);
    expect(outs[0]!.every((x) => Number.isFinite(x))).toBe(true);
  });
});
