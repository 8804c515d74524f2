// The router's pair policy, pure: which prefill and which decode serve a request, and whether
// any pair of this cluster could ever serve it. Decided from a snapshot of the workers (their
// limits as they reported them, whether they answer, the router's own load on them).
// Owns: cluster admission (the incident's first fault, refused before any Reserve: a prompt that
// fits one side's pool but not the other's gets its 400 here, so no page is allocated and no
// byte moves on either side), compatibility (a pair must serve the same model, by fingerprint,
// with the same page geometry and KV dtype), and
// the choice by load.
// Must never: read a clock, a socket or randomness; pick a worker that is down, misconfigured,
// in `avoid`, or whose own limits refuse the request (each node re-checks anyway).
import { TesseraError, type AdapterRef, type KvDtype } from '../core/index.js';
import { admissionError } from '../pages/index.js';
import type { ClientRequest, Pair, PeerId } from '../transfer/index.js';

export type WorkerRole = 'prefill' | 'decode';

/** What a worker reported about its pool in /health. */
export interface WorkerLimits {
  readonly contextLength: number;
  readonly pageSize: number;
  readonly numPages: number;
  /** Bytes of one token's K and V over all layers: equal on both sides of a transfer. */
  readonly kvBytesPerToken: number;
  /** How it stores K and V (f32, f16): equal on both sides of a transfer (decode refuses a KvChunk of another). */
  readonly kvDtype: KvDtype;
  /** The fingerprint of the model it serves: equal on both sides of a transfer (decode checks it in KvDone). */
  readonly model: string;
  /** The LoRA adapters it serves, name -> digest (its /health's loraAdapters); absent: none. */
  readonly adapters?: Readonly<Record<string, string>>;
}

export interface WorkerView {
  readonly url: string;
  readonly role: WorkerRole;
  /** Its cluster address (the peer id); undefined until it answered once. */
  readonly address: string | undefined;
  readonly up: boolean;
  readonly limits: WorkerLimits | undefined;
  /** Attempts this router has running on it now. */
  readonly inFlight: number;
  /** Free and cached (evictable) pages at its last report (a tie-breaker). */
  readonly freePages: number;
}

/** Which of the policy's checks run: all of them, except under the router's test-only fault points. */
export interface PolicyChecks {
  /** Each node's limits (off under `skip-admission`: each node still checks its own). */
  readonly admission: boolean;
  /**
   * Equal model fingerprints, and a request's LoRA adapter served under the router's digest on both
   * sides (off under `skip-model-check`: each worker still refuses an adapter it lacks, decode
   * compares KvDone's).
   */
  readonly model: boolean;
}

export const ALL_CHECKS: PolicyChecks = { admission: true, model: true };

const compatible = (p: WorkerLimits, d: WorkerLimits, checks: PolicyChecks): boolean =>
  (!checks.model || p.model === d.model) &&
  p.pageSize === d.pageSize &&
  p.kvBytesPerToken === d.kvBytesPerToken &&
  p.kvDtype === d.kvDtype;

/** The worker serves `adapter` (none: the base model, which every worker serves) under the same digest. */
const servesAdapter = (w: WorkerLimits, adapter: AdapterRef | undefined, checks: PolicyChecks): boolean =>
  !checks.model || adapter === undefined || w.adapters?.[adapter.name] === adapter.digest;

/**
 * Why no pair of this cluster could ever serve a prompt of numPromptTokens + maxTokens, or
 * undefined. Workers that never reported their limits are not judged (the request then waits
 * for pickPair, which finds no pair and says `overloaded`).
 */
export function clusterAdmission(
  numPromptTokens: number,
  maxTokens: number,
  workers: readonly WorkerView[],
  checks: PolicyChecks = ALL_CHECKS,
  adapter?: AdapterRef,
): TesseraError | undefined {
  const known = (role: WorkerRole) =>
    workers.filter((w): w is WorkerView & { limits: WorkerLimits } => w.role === role && w.limits !== undefined);
  const prefills = known('prefill');
  const decodes = known('decode');
  if (prefills.length === 0 || decodes.length === 0) return undefined;
  const refusal = (w: WorkerView & { limits: WorkerLimits }) =>
    admissionError(w.limits, w.role, numPromptTokens, maxTokens);
  const okPrefills = prefills.filter((w) => refusal(w) === undefined);
  if (okPrefills.length === 0) return refusal(prefills[0] as WorkerView & { limits: WorkerLimits });
  const okDecodes = decodes.filter((w) => refusal(w) === undefined);
  if (okDecodes.length === 0) return refusal(decodes[0] as WorkerView & { limits: WorkerLimits });
  if (!okPrefills.some((p) => okDecodes.some((d) => compatible(p.limits, d.limits, checks)))) {
    return new TesseraError(
      'config_invalid',
      'no prefill worker that fits this request serves the same model (by fingerprint) with the same ' +
        'page size, KV shape and KV dtype as a decode worker that fits it; the cluster is misconfigured',
    );
  }
  const adapted = (w: WorkerView & { limits: WorkerLimits }) => servesAdapter(w.limits, adapter, checks);
  if (
    adapter !== undefined &&
    !okPrefills.some((p) => adapted(p) && okDecodes.some((d) => adapted(d) && compatible(p.limits, d.limits, checks)))
  ) {
    return new TesseraError(
      'config_invalid',
      `no prefill/decode pair of this cluster serves the LoRA adapter ${adapter.name} with the router's ` +
        `digest ${adapter.digest}: give every worker the router's --lora ${adapter.name}=PATH`,
    );
  }
  return undefined;
}

/** Least loaded first: the router's own in-flight count, then the most free pages, then the address. */
function byLoad(a: WorkerView, b: WorkerView): number {
  return a.inFlight - b.inFlight || b.freePages - a.freePages || (a.address ?? '').localeCompare(b.address ?? '');
}

/**
 * The least loaded compatible pair that is up and admits the request, or undefined.
 * `checks`: all of them, but for the router's fault points (PolicyChecks).
 */
export function pickPair(
  request: ClientRequest,
  avoid: { readonly prefills: readonly PeerId[] },
  workers: readonly WorkerView[],
  checks: PolicyChecks = ALL_CHECKS,
): Pair | undefined {
  const { length: numPromptTokens } = request.tokens;
  const { maxTokens } = request.sampling;
  const usable = (role: WorkerRole) =>
    workers
      .filter(
        (w): w is WorkerView & { limits: WorkerLimits; address: string } =>
          w.role === role && w.up && w.limits !== undefined && w.address !== undefined,
      )
      .filter((w) => !checks.admission || admissionError(w.limits, role, numPromptTokens, maxTokens) === undefined)
      .filter((w) => servesAdapter(w.limits, request.adapter, checks))
      .sort(byLoad);
  const decodes = usable('decode');
  for (const p of usable('prefill')) {
    if (avoid.prefills.includes(p.address)) continue;
    const d = decodes.find((x) => compatible(p.limits, x.limits, checks));
    if (d !== undefined) return { prefill: p.address, decode: d.address };
  }
  return undefined;
}
