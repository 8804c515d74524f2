import { describe, expect, it } from 'vitest';
import {
  createRefDense,
  createRefOps,
  NativeDense,
  nativeAvailability,
  type DenseKernels,
  type DenseWeight,
  type HostTensor,
} from '../../kernels/index.js';
import { allocateActivations } from '../activations.js';
import type { ModelConfig } from '../../formats/index.js';
import { groupByExpert, moeFfn, routeTopK } from './moe.js';
import { tensorToF32, expertName, layerName } from '../../formats/index.js';
import { PRESET_CONFIGS, randomModel } from '../../gen/index.js';
import { prepareWeights, type MoeFfnWeights } from '../weights-prepared.js';

/** qwen3moe-tiny's layer shape over a 64-token vocabulary, one layer: 16 experts of 256, 4 per token. */
const CONFIG: ModelConfig = { ...PRESET_CONFIGS['qwen3moe-tiny'], vocabSize: 64, numLayers: 1 };
const MOE = CONFIG.moe!;
const D = CONFIG.hiddenSize;

async function setup(dense: DenseKernels) {
  const model = randomModel(CONFIG, 7);
  const ops = createRefOps();
  const weights = await prepareWeights(CONFIG, model.tensors, dense, ops);
  const layer = weights.layers[0]!;
  if (layer.moe === null) throw new Error('not an MoE layer');
  return {
    model,
    ops,
    w: layer.moe,
    act: allocateActivations(
      CONFIG,
      16,
      1,
      (n) => new Float32Array(n),
      (n) => new Float32Array(n),
    ),
  };
}

function randomRows(T: number, seed: number): Float32Array {
  let s = seed;
  return Float32Array.from({ length: T * D }, () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return (s / 2 ** 32) * 2 - 1;
  });
}

/** A dense backend that records which weights each call multiplied, and with how many rows. */
function recording(inner: DenseKernels): DenseKernels & { calls: [DenseWeight, number][] } {
  const calls: [DenseWeight, number][] = [];
  return {
    name: inner.name,
    batchInvariant: inner.batchInvariant,
    calls,
    prepare: (w) => inner.prepare(w),
    matmul: (w, x, m, out) => {
      calls.push([w, m]);
      return inner.matmul(w, x, m, out);
    },
    dispose: () => inner.dispose(),
  };
}

describe('routeTopK', () => {
  it('keeps the k most probable experts, descending, with softmax weights renormalised when asked', () => {
    const logits = Float32Array.of(0, 3, 1, 2);
    const ids = new Int32Array(2);
    const weights = new Float32Array(2);
    routeTopK(logits, 1, 4, 2, false, new Float32Array(4), ids, weights);
    const z = 1 + Math.E ** 3 + Math.E + Math.E ** 2;
    expect([...ids]).toEqual([1, 3]);
    expect(weights[0]).toBeCloseTo(Math.E ** 3 / z, 6);
    expect(weights[1]).toBeCloseTo(Math.E ** 2 / z, 6);
    routeTopK(logits, 1, 4, 2, true, new Float32Array(4), ids, weights);
    expect(weights[0]).toBeCloseTo(Math.E / (Math.E + 1), 6);
    expect(weights[0]! + weights[1]!).toBeCloseTo(1, 6);
  });
});

describe('groupByExpert', () => {
  it("lists each expert's slots in token order", () => {
    const start = new Int32Array(4);
    const order = new Int32Array(6);
    groupByExpert(Int32Array.of(2, 0, 2, 1, 0, 2), 6, 3, start, new Int32Array(3), order);
    expect([...start]).toEqual([0, 2, 3, 6]);
    expect([...order]).toEqual([1, 4, 3, 0, 2, 5]);
  });
});

describe('moeFfn', () => {
  it('equals a plain per-token mixture of the chosen experts (ref kernels)', async () => {
    const { model, ops, w, act } = await setup(createRefDense());
    const T = 5;
    const xn = randomRows(T, 1);
    const proj = new Float32Array(T * D);
    await moeFfn(createRefDense(), ops, w, MOE, xn, T, act.moe!, proj);
    const f32 = (name: string) => tensorToF32(model.tensors.get(name)!);
    const router = f32(layerName(0, 'mlp.gate.weight'));
    const f = MOE.expertIntermediateSize;
    for (let t = 0; t < T; t++) {
      const x = xn.subarray(t * D, (t + 1) * D);
      const logits = Array.from({ length: MOE.numExperts }, (_, e) => dot(router.subarray(e * D, (e + 1) * D), x));
      const max = Math.max(...logits);
      const p = logits.map((l) => Math.exp(l - max));
      const chosen = [...p.keys()].sort((a, b) => p[b]! - p[a]!).slice(0, MOE.numExpertsUsed);
      const total = chosen.reduce((s, e) => s + p[e]!, 0);
      const want = new Float64Array(D);
      for (const e of chosen) {
        const [g, u, dn] = (['gate_proj', 'up_proj', 'down_proj'] as const).map((n) => f32(expertName(0, e, n)));
        const h = Array.from({ length: f }, (_, i) => {
          const gi = dot(g!.subarray(i * D, (i + 1) * D), x);
          return (gi / (1 + Math.exp(-gi))) * dot(u!.subarray(i * D, (i + 1) * D), x);
        });
        for (let c = 0; c < D; c++) want[c] += (p[e]! / total) * dot(dn!.subarray(c * f, (c + 1) * f), h);
      }
      for (let c = 0; c < D; c++) expect(proj[t * D + c]).toBeCloseTo(want[c]!, 3);
    }
  });

  it('runs the router once and each chosen expert once over all of its tokens, and no other', async () => {
    const dense = recording(createRefDense());
    const { ops, w, act } = await setup(dense);
    const T = 6;
    dense.calls.length = 0;
    await moeFfn(dense, ops, w, MOE, randomRows(T, 2), T, act.moe!, new Float32Array(T * D));
    const s = act.moe!;
    const chosen = new Map<number, number>();
    for (const e of s.expertIds.subarray(0, T * MOE.numExpertsUsed)) chosen.set(e, (chosen.get(e) ?? 0) + 1);
    const expected: [DenseWeight, number][] = [[w.router, T]];
    for (const [e, n] of [...chosen].sort((a, b) => a[0] - b[0]))
      expected.push([w.experts[e]!.gateUp, n], [w.experts[e]!.down, n]);
    expect(dense.calls).toEqual(expected);
    expect(chosen.size).toBeLessThan(MOE.numExperts); // some experts were never read
  });

  it.skipIf(!('addon' in nativeAvailability()))(
    'on the native kernels (q8_0 experts), a row gives the same bits alone or grouped with others',
    async () => {
      const dense = new NativeDense({ threads: 1 });
      const model = randomModel(CONFIG, 7, 'q8_0');
      const ops = createRefOps();
      const layer = (await prepareWeights(CONFIG, model.tensors, dense, ops)).layers[0]!;
      const w = layer.moe as MoeFfnWeights;
      const act = allocateActivations(
        CONFIG,
        16,
        1,
        (n) => new Float32Array(n),
        (n) => new Float32Array(n),
      );
      const T = 7;
      const xn = randomRows(T, 3);
      const together = new Float32Array(T * D);
      await moeFfn(dense, ops, w, MOE, xn, T, act.moe!, together);
      for (let t = 0; t < T; t++) {
        const alone = new Float32Array(D);
        await moeFfn(dense, ops, w, MOE, xn.subarray(t * D, (t + 1) * D), 1, act.moe!, alone);
        expect(Buffer.from(alone.buffer).equals(Buffer.from(together.slice(t * D, (t + 1) * D).buffer))).toBe(true);
      }
      await dense.dispose();
    },
  );
});

/** randomModel's per-expert tensors laid end to end per projection, as a GGUF's 3-D tensor is split into views. */
function asGgufStacks(tensors: Map<string, HostTensor>): Map<string, HostTensor> {
  const out = new Map(tensors);
  for (const proj of ['gate_proj', 'up_proj', 'down_proj'] as const) {
    const views = Array.from({ length: MOE.numExperts }, (_, e) => tensors.get(expertName(0, e, proj))!);
    const each = views[0]!.data.byteLength;
    const stack = new Uint8Array(each * views.length);
    views.forEach((v, e) => {
      stack.set(v.data, e * each);
      out.set(v.name, { ...v, data: stack.subarray(e * each, (e + 1) * each) });
    });
  }
  return out;
}

describe.skipIf(!('addon' in nativeAvailability()))('experts in place (kernels/native/experts.c)', () => {
  for (const dtype of ['q4_0', 'q8_0'] as const)
    it(`a GGUF's ${dtype} expert stacks are read in place, not repacked, and mix as the repacked experts do`, async () => {
      const dense = new NativeDense({ threads: 1 });
      const tensors = asGgufStacks(randomModel(CONFIG, 7, dtype).tensors);
      const ops = createRefOps();
      const inPlace = await prepareWeights(CONFIG, tensors, dense, ops);
      const repacked = await prepareWeights(CONFIG, tensors, dense, ops, { expertsInPlace: false });
      const a = inPlace.layers[0]!.moe!;
      const b = repacked.layers[0]!.moe!;
      expect(a.inPlace).not.toBeNull();
      expect(a.experts).toHaveLength(0);
      expect(b.inPlace).toBeNull();
      const expertBytes = 3 * MOE.numExperts * tensors.get(expertName(0, 0, 'gate_proj'))!.data.byteLength;
      expect(inPlace.bytes.inPlace - repacked.bytes.inPlace).toBe(expertBytes);
      expect(repacked.bytes.repacked - inPlace.bytes.repacked).toBe(expertBytes);
      const act = allocateActivations(
        CONFIG,
        16,
        1,
        (n) => new Float32Array(n),
        (n) => new Float32Array(n),
      );
      const T = 6;
      const xn = randomRows(T, 4);
      const [pa, pb] = [new Float32Array(T * D), new Float32Array(T * D)];
      await moeFfn(dense, ops, a, MOE, xn, T, act.moe!, pa);
      await moeFfn(dense, ops, b, MOE, xn, T, act.moe!, pb);
      const scale = Math.max(...pb.map(Math.abs));
      const worst = Math.max(...pa.map((v, i) => Math.abs(v - pb[i]!)));
      expect(scale).toBeGreaterThan(1e-3);
      expect(worst / scale).toBeLessThan(1e-4);
      await dense.dispose();
    });
});

function dot(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i]! * b[i]!;
  return s;
}
