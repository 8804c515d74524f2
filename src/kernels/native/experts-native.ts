// A layer's routed experts run in place (experts.c): the GGUF's 3-D gate, up and down tensors in
// GGML's q4_0, q8_0, q4_K or q6_K blocks (a Q4_K_M file's experts: down may be q6_K beside q4_K
// gate and up), read where they lie (the read-only file map, or the file's buffer),
// never repacked or copied; the whole layer's chosen experts in one native call (one hand-out of
// rows to the helper threads for gate | up and one for down, not two per expert).
// NativeDense.expertsInPlace hands these out; forward/moe.ts runs them after its routing.
import { assert } from '../../core/index.js';
import type { ExpertsInPlace, HostTensor } from '../types.js';

/** The addon's experts.c entry (native.ts's Addon extends it, so this file imports nothing of native.ts). */
export interface ExpertsAddon {
  experts(
    kind: number,
    kindDown: number,
    gate: Uint8Array,
    up: Uint8Array,
    down: Uint8Array,
    E: number,
    f: number,
    d: number,
    x: Float32Array,
    T: number,
    k: number,
    ids: Int32Array,
    weights: Float32Array,
    out: Float32Array,
    helpers: 0 | 1,
  ): void;
}

/** GGML block kinds experts.c reads in place (dense.h's Kind numbers). */
const IN_PLACE_KIND: Readonly<Partial<Record<HostTensor['dtype'], number>>> = { q4_0: 3, q8_0: 4, q4_k: 5, q6_k: 7 };

/** Values per block of an in-place kind: a row's length must be a whole number of them. */
function blockOf(dtype: HostTensor['dtype']): number {
  return dtype === 'q4_k' || dtype === 'q6_k' ? 256 : 32;
}

/** Whether a GGUF expert stack of this dtype and row length is one experts.c reads in place. */
export function expertKindInPlace(dtype: HostTensor['dtype'], cols: number): boolean {
  return IN_PLACE_KIND[dtype] !== undefined && cols % blockOf(dtype) === 0;
}

/**
 * The E experts' gate, up and down views as three whole [E, rows, cols] stacks, when each
 * projection's views lie end to end in one buffer (a GGUF's 3-D tensor split per expert) and are
 * of a kind experts.c reads (gate and up of one kind, down of its own); else null (the caller
 * repacks them as before).
 */
export function expertStacks(
  gate: readonly HostTensor[],
  up: readonly HostTensor[],
  down: readonly HostTensor[],
): { kind: number; kindDown: number; gate: Uint8Array; up: Uint8Array; down: Uint8Array; f: number; d: number } | null {
  const E = gate.length;
  if (E === 0 || up.length !== E || down.length !== E) return null;
  const kind = IN_PLACE_KIND[gate[0]!.dtype];
  const kindDown = IN_PLACE_KIND[down[0]!.dtype];
  const [f, d] = gate[0]!.shape as [number, number];
  if (kind === undefined || kindDown === undefined) return null;
  if (!expertKindInPlace(gate[0]!.dtype, d) || !expertKindInPlace(down[0]!.dtype, f)) return null;
  const stack = (views: readonly HostTensor[], want: number, rows: number, cols: number): Uint8Array | null => {
    const first = views[0]!.data;
    const each = first.byteLength;
    for (let e = 0; e < E; e++) {
      const v = views[e]!;
      if (IN_PLACE_KIND[v.dtype] !== want || v.shape[0] !== rows || v.shape[1] !== cols) return null;
      if (v.data.buffer !== first.buffer || v.data.byteOffset !== first.byteOffset + e * each) return null;
      if (v.data.byteLength !== each) return null;
    }
    return new Uint8Array(first.buffer, first.byteOffset, E * each);
  };
  const g = stack(gate, kind, f, d);
  const u = stack(up, kind, f, d);
  const w = stack(down, kindDown, d, f);
  return g === null || u === null || w === null ? null : { kind, kindDown, gate: g, up: u, down: w, f, d };
}

class NativeExperts implements ExpertsInPlace {
  readonly bytes: number;
  constructor(
    private readonly addon: ExpertsAddon,
    private readonly s: NonNullable<ReturnType<typeof expertStacks>>,
    private readonly E: number,
    private readonly helpers: 0 | 1,
  ) {
    this.bytes = s.gate.byteLength + s.up.byteLength + s.down.byteLength;
  }

  run(x: Float32Array, T: number, k: number, ids: Int32Array, weights: Float32Array, out: Float32Array): void {
    const { kind, kindDown, gate, up, down, f, d } = this.s;
    this.addon.experts(kind, kindDown, gate, up, down, this.E, f, d, x, T, k, ids, weights, out, this.helpers);
  }
}

/** The experts in place on `addon`, or null when their layout is not one experts.c reads. */
export function nativeExpertsInPlace(
  addon: ExpertsAddon,
  gate: readonly HostTensor[],
  up: readonly HostTensor[],
  down: readonly HostTensor[],
  helpers: boolean,
): ExpertsInPlace | null {
  const s = expertStacks(gate, up, down);
  if (s === null) return null;
  assert(typeof addon.experts === 'function', 'nativeExpertsInPlace: the addon predates experts.c (npm run build)');
  return new NativeExperts(addon, s, gate.length, helpers ? 1 : 0);
}
