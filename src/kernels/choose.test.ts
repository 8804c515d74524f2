import { describe, expect, it } from 'vitest';
import { ConfigError } from '../core/index.js';
import { detectKernelSupport, formatKernelPlan, planKernels, type KernelSupport } from './choose.js';

const BOTH: KernelSupport = { native: { kind: 'available', variant: 'avx512-vnni' }, wasm: { kind: 'available' } };
const NO_ADDON: KernelSupport = {
  native: { kind: 'missing', why: 'this CPU lacks AVX-512' },
  wasm: { kind: 'available' },
};
const NOTHING: KernelSupport = {
  native: NO_ADDON.native,
  wasm: { kind: 'missing', why: 'build/kernels.wasm is missing' },
};

describe('planKernels', () => {
  it('auto falls back native -> wasm -> ref, saying why', () => {
    expect(planKernels('auto', false, BOTH)).toMatchObject({
      backend: 'native',
      variant: 'avx512-vnni',
      fellBack: null,
    });
    expect(planKernels('auto', false, NO_ADDON)).toMatchObject({
      backend: 'wasm',
      ops: 'wasm',
      variant: null,
      fellBack: 'native kernels unavailable: this CPU lacks AVX-512',
    });
    expect(planKernels('auto', false, NOTHING)).toMatchObject({ backend: 'ref', ops: 'ref' });
  });

  it('runs every op on one backend for every dtype and batch: no weight is held twice', () => {
    for (const support of [BOTH, NO_ADDON])
      for (const row of planKernels('auto', false, support).rows) expect(row.batch).not.toMatch(/m ?[<>]/);
    expect(planKernels('native', false, BOTH).rows.map((r) => [r.op, r.dtypes, r.backend])).toEqual([
      ['matmul', 'f32 f16 bf16 q8_0 q4_0 q4_k q5_k q6_k', 'native (avx512-vnni)'],
      ['paged attention', 'KV f32 f16 q8_0', 'native (avx512-vnni)'],
      ['rms norm, rope, silu/gelu, add, KV write', 'f32', 'wasm'],
    ]);
  });

  it('refuses a backend this machine cannot run, with the reason', () => {
    expect(() => planKernels('native', false, NO_ADDON)).toThrow(
      new ConfigError('--kernels native: this CPU lacks AVX-512'),
    );
    expect(() => planKernels('wasm', false, NOTHING)).toThrow(/--kernels wasm: build\/kernels.wasm is missing/);
    expect(planKernels('ref', false, NOTHING).backend).toBe('ref');
  });

  it('--deterministic keeps the same backends: every one is batch-invariant', () => {
    for (const choice of ['auto', 'native', 'wasm', 'ref'] as const) {
      const plan = planKernels(choice, true, BOTH);
      expect([plan.backend, plan.batchInvariant, plan.deterministic]).toEqual([
        planKernels(choice, false, BOTH).backend,
        true,
        true,
      ]);
    }
  });

  it('prints a table a reader can check', () => {
    expect(formatKernelPlan(planKernels('auto', false, NO_ADDON))).toBe(
      [
        'kernels: --kernels auto -> wasm dense + attention, wasm ops, batch-invariant',
        '  (native kernels unavailable: this CPU lacks AVX-512)',
        '  op                                        dtypes                             batch        backend',
        '  matmul                                    f32 f16 bf16 q8_0 q4_0             any m        wasm',
        '  matmul                                    q4_k q5_k (as q4_0 / q8_0 blocks)  any m        wasm',
        '  matmul                                    q6_k (widened to f32 at load)      any m        wasm',
        '  paged attention                           KV f32 f16 q8_0                    per request  wasm',
        '  rms norm, rope, silu/gelu, add, KV write  f32                                any          wasm',
      ].join('\n'),
    );
  });

  it('detects this machine: the wasm kernels are built (npm run build)', () => {
    expect(detectKernelSupport().wasm).toEqual({ kind: 'available' });
  });
});
