// The one place that decides which kernel backend runs which op, for which weight dtype and batch
// size: a plan (a table a reader can print: `tessera plan`, the start-up line), then the kernels
// built from it. Every caller goes through here (createEngine, the engine thread, the CLI).
//
//   --kernels auto (default)  native (this CPU's variant) -> wasm -> ref, the first this machine runs
//   --kernels native          the addon, or refuse to start saying why it cannot run here
//   --kernels wasm            WebAssembly SIMD everywhere (what a CPU without the addon gets)
//   --kernels ref             plain TypeScript, the oracle (tests, checking; slow)
//
// Each backend runs every op for every weight dtype at every batch size: no op is split between
// two backends by dtype or batch, so no weight is held twice, and every backend is batch-invariant
// (a row's output depends on its own input alone, never on m: each backend's own comment says
// why, and its `batchInvariant` flag is asserted here). So `--deterministic` needs no other path:
// it demands a batch-invariant plan (refused otherwise) and says so in /health, and a greedy
// request's logits are bit-identical alone and in any batch (engine.test.ts checks each backend).
// It never reads configuration (flags are the CLI's) and keeps no state of its own.
import { assert, ConfigError } from '../core/index.js';
import { NativeAttentionOps } from './native/native-ops.js';
import { NativeDense, nativeAvailability, nativeVariant } from './native/native.js';
import { createRefDense } from './ref/dense.js';
import { createRefOps } from './ref/ops.js';
import type { DenseKernels, OpKernels, WeightDType } from './types.js';
import { createWasmDense } from './wasm/dense.js';
import { findKernelsWasm } from './wasm/locate.js';
import { createWasmOps } from './wasm/ops.js';
import { WasmRuntime } from './wasm/runtime.js';

export const KERNEL_CHOICES = ['auto', 'native', 'wasm', 'ref'] as const;
/** `--kernels`: a backend, or `auto` (the fastest this machine runs). */
export type KernelChoice = (typeof KERNEL_CHOICES)[number];
export type KernelBackend = Exclude<KernelChoice, 'auto'>;

/** What this machine can run (detectKernelSupport), the only input of a plan besides the flags. */
export interface KernelSupport {
  /** The native addon: which instruction-set variant it runs here, or why it cannot. */
  readonly native: { readonly kind: 'available'; readonly variant: string } | Missing;
  /** The WebAssembly kernels (build/kernels.wasm). */
  readonly wasm: { readonly kind: 'available' } | Missing;
}
interface Missing {
  readonly kind: 'missing';
  readonly why: string;
}

/** One line of the table: which backend runs an op, for which dtypes and batch sizes. */
export interface KernelPlanRow {
  readonly op: string;
  readonly dtypes: string;
  readonly batch: string;
  readonly backend: string;
}

/** Plain data: sent to the engine thread, printed, reported in /health. */
export interface KernelPlan {
  readonly choice: KernelChoice;
  /** The backend of every matmul and of attention; the other ops run on `ops`. */
  readonly backend: KernelBackend;
  /** Elementwise ops, norms, RoPE and KV writes (native delegates them to wasm). */
  readonly ops: Exclude<KernelBackend, 'native'>;
  /** The native variant in use (e.g. AVX-512 VNNI), when backend is native. */
  readonly variant: string | null;
  /** Why auto settled below native, or null. */
  readonly fellBack: string | null;
  readonly batchInvariant: boolean;
  /** --deterministic asked for a batch-invariant plan. */
  readonly deterministic: boolean;
  readonly rows: readonly KernelPlanRow[];
}

/**
 * Whether each backend keeps a row's output independent of the batch (m) it runs in. Every one
 * does: native computes each output row with the same arithmetic at any m (native.ts), wasm fixes
 * its reduction order (wasm/dense.ts), ref is plain f64 sums. Checked against the instances.
 */
const BATCH_INVARIANT: Readonly<Record<KernelBackend, boolean>> = { native: true, wasm: true, ref: true };

const ALL_DTYPES: readonly WeightDType[] = ['f32', 'f16', 'bf16', 'q8_0', 'q4_0', 'q4_k', 'q5_k', 'q6_k'];

/** The addon and the wasm kernels on this machine (reads build/; the addon is loaded once). */
export function detectKernelSupport(): KernelSupport {
  const found = nativeAvailability();
  let wasm: KernelSupport['wasm'];
  try {
    findKernelsWasm();
    wasm = { kind: 'available' };
  } catch (cause) {
    wasm = { kind: 'missing', why: (cause as Error).message };
  }
  return {
    // The addon's variant in use (native.ts: avx512 or avx2, by CPUID or as --cpu forced it).
    native:
      'addon' in found
        ? { kind: 'available', variant: nativeVariant() ?? 'unknown' }
        : { kind: 'missing', why: found.why },
    wasm,
  };
}

/** The plan for `choice` on a machine with `support`; refuses (ConfigError) what cannot run here. */
export function planKernels(choice: KernelChoice, deterministic: boolean, support: KernelSupport): KernelPlan {
  let backend: KernelBackend;
  let fellBack: string | null = null;
  if (choice !== 'auto') backend = choice;
  else if (support.native.kind === 'available') backend = 'native';
  else if (support.wasm.kind === 'available') {
    backend = 'wasm';
    fellBack = `native kernels unavailable: ${support.native.why}`;
  } else {
    backend = 'ref';
    fellBack = `native kernels unavailable: ${support.native.why}; wasm kernels unavailable: ${support.wasm.why}`;
  }
  if (backend === 'native' && support.native.kind === 'missing')
    throw new ConfigError(`--kernels native: ${support.native.why}`);
  if (backend !== 'ref' && support.wasm.kind === 'missing')
    throw new ConfigError(`--kernels ${backend}: ${support.wasm.why}`);
  const batchInvariant = BATCH_INVARIANT[backend];
  if (deterministic && !batchInvariant)
    throw new ConfigError(`--deterministic: the ${backend} kernels are not batch-invariant`);
  const variant = backend === 'native' && support.native.kind === 'available' ? support.native.variant : null;
  const ops = backend === 'ref' ? 'ref' : 'wasm';
  return {
    choice,
    backend,
    ops,
    variant,
    fellBack,
    batchInvariant,
    deterministic,
    rows: planRows(backend, ops, variant),
  };
}

function planRows(backend: KernelBackend, ops: KernelPlan['ops'], variant: string | null): KernelPlanRow[] {
  const named = variant === null ? backend : `${backend} (${variant})`;
  const matmul: KernelPlanRow[] =
    backend === 'wasm'
      ? [
          { op: 'matmul', dtypes: 'f32 f16 bf16 q8_0 q4_0', batch: 'any m', backend: named },
          { op: 'matmul', dtypes: 'q4_k q5_k (as q4_0 / q8_0 blocks)', batch: 'any m', backend: named },
          { op: 'matmul', dtypes: 'q6_k (widened to f32 at load)', batch: 'any m', backend: named },
        ]
      : [{ op: 'matmul', dtypes: ALL_DTYPES.join(' '), batch: 'any m', backend: named }];
  return [
    ...matmul,
    { op: 'paged attention', dtypes: 'KV f32 f16 q8_0', batch: 'per request', backend: named },
    { op: 'rms norm, rope, silu/gelu, add, KV write', dtypes: 'f32', batch: 'any', backend: ops },
  ];
}

/** The plan as a table (`tessera plan`, `serve --verbose`). */
export function formatKernelPlan(plan: KernelPlan): string {
  const header = { op: 'op', dtypes: 'dtypes', batch: 'batch', backend: 'backend' };
  const rows = [header, ...plan.rows];
  const width = (k: keyof KernelPlanRow) => Math.max(...rows.map((r) => r[k].length));
  const line = (r: KernelPlanRow) =>
    `  ${r.op.padEnd(width('op'))}  ${r.dtypes.padEnd(width('dtypes'))}  ${r.batch.padEnd(width('batch'))}  ${r.backend}`;
  return [
    `kernels: --kernels ${plan.choice} -> ${summarizeKernelPlan(plan)}`,
    ...(plan.fellBack === null ? [] : [`  (${plan.fellBack})`]),
    ...rows.map(line),
  ].join('\n');
}

/** One line: "native (avx512) dense + attention, wasm ops, batch-invariant". */
export function summarizeKernelPlan(plan: KernelPlan): string {
  const backend = plan.variant === null ? plan.backend : `${plan.backend} (${plan.variant})`;
  return `${backend} dense + attention, ${plan.ops} ops${plan.batchInvariant ? ', batch-invariant' : ''}`;
}

/** The kernels of a plan: one wasm runtime (its memory holds the KV pool) shared by every wasm part. */
export async function createKernels(
  plan: KernelPlan,
  threads: number,
): Promise<{ readonly dense: DenseKernels; readonly ops: OpKernels }> {
  const kernels = await build(plan.backend, threads);
  assert(
    kernels.dense.batchInvariant === plan.batchInvariant,
    () => `kernel plan: ${kernels.dense.name} says batchInvariant ${kernels.dense.batchInvariant}`,
  );
  return kernels;
}

async function build(backend: KernelBackend, threads: number): Promise<{ dense: DenseKernels; ops: OpKernels }> {
  if (backend === 'ref') return { dense: createRefDense(), ops: createRefOps() };
  const runtime = await WasmRuntime.load();
  const wasm = await createWasmOps({ runtime });
  if (backend === 'wasm') return { dense: await createWasmDense({ runtime, threads }), ops: wasm };
  return { dense: new NativeDense({ threads }), ops: new NativeAttentionOps(wasm, { threads }) };
}
