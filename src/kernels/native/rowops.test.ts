// The addon's row ops (rowops.c: RMSNorm, SiLU·mul, add) give WasmOps' bits exactly, on the
// calling thread and shared with the helper threads: ragged widths (not multiples of 4 or 8),
// one row and many, in place, and values across the whole range (huge, tiny, subnormal, signed
// zeros, infinities, nan), where SiLU's exp clamps. A nan's payload and sign are not compared
// (wasm leaves them to the engine; both give a nan at the same places).
import { beforeAll, describe, it } from 'vitest';
import { Rng } from '../../core/index.js';
import { expectBitwiseEqual as bitwise } from '../cases/support.js';
import { WasmOps } from '../wasm/ops.js';
import { WasmRuntime } from '../wasm/runtime.js';
import { NativeDense, nativeVariantsHere, selectNativeVariant } from './native.js';
import { NativeAttentionOps } from './native-ops.js';

let wasm: WasmOps;
beforeAll(async () => {
  wasm = new WasmOps(await WasmRuntime.load({ maxMemoryBytes: 256 * 1024 ** 2 }));
  new NativeDense({ threads: 3, spinMicros: 50 }); // the process's helper threads
});

/** expectBitwiseEqual with every nan made the one quiet nan first. */
function expectBitwiseEqual(what: string, actual: Float32Array, expected: Float32Array, length: number): void {
  const canonical = (v: Float32Array) => v.map((x) => (Number.isNaN(x) ? NaN : x));
  bitwise(what, canonical(actual), canonical(expected), length);
}

const SPECIAL = [0, -0, Infinity, -Infinity, NaN, 1e-40, -1e-42, 3e38, -3e38, 88.5, -87.5, 100, -100, 20, -20];

/** Normal values of scale `scale`, with one special value in every 37. */
function values(rng: Rng, n: number, scale: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) =>
    i % 37 === 5 ? SPECIAL[rng.nextU32() % SPECIAL.length]! : rng.normal() * scale,
  );
}

for (const variant of nativeVariantsHere())
  describe(`the addon's row ops (${variant}) give WasmOps' bits`, () => {
    beforeAll(() => void selectNativeVariant(variant));
    for (const threads of [1, 2])
      it(`RMSNorm, SiLU·mul and add, ${threads === 1 ? 'alone' : 'shared with the helpers'}`, () => {
        const native = new NativeAttentionOps(wasm, { threads });
        const rng = new Rng(threads);
        for (const [m, dim] of [
          [1, 7],
          [3, 64],
          [2, 1001],
          [300, 768],
          [40, 2048],
        ] as const) {
          const x = values(rng, m * dim, 3);
          const weight = values(rng, dim, 1);
          const a = new Float32Array(m * dim);
          const b = new Float32Array(m * dim);
          wasm.rmsNorm(x, weight, 1e-5, m, dim, a);
          native.rmsNorm(x, weight, 1e-5, m, dim, b);
          expectBitwiseEqual(`rmsNorm ${m}x${dim}`, b, a, m * dim);
          const inPlace = x.slice();
          native.rmsNorm(inPlace, weight, 1e-6, m, dim, inPlace);
          wasm.rmsNorm(x, weight, 1e-6, m, dim, a);
          expectBitwiseEqual(`rmsNorm in place ${m}x${dim}`, inPlace, a, m * dim);
        }
        for (const n of [1, 7, 8, 13, 4096, 4097, 100_003, 393_216]) {
          const gate = values(rng, n, 4);
          const up = values(rng, n, 2);
          const a = new Float32Array(n);
          const b = new Float32Array(n);
          wasm.siluMul(gate, up, a, n);
          native.siluMul(gate, up, b, n);
          expectBitwiseEqual(`siluMul ${n}`, b, a, n);
          const x = values(rng, n, 1);
          const y = values(rng, n, 1);
          const x2 = x.slice();
          wasm.addInPlace(x, y, n);
          native.addInPlace(x2, y, n);
          expectBitwiseEqual(`addInPlace ${n}`, x2, x, n);
        }
      });
  });
