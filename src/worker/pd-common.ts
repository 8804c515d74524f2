// What the two PD worker roles (prefill-worker.ts, decode-worker.ts) share: the options every PD
// worker takes and the answer a worker gives a client that came to it instead of to the router.
// Must never: hold per-request state, or let a client generate on a worker directly.
import type { GrammarEngine } from '../grammar/index.js';
import type { DraftModel, MaxStepMs, StepRunner, TokenSampler } from '../engine/index.js';
import { InvalidRequestError, type FaultSet, type GenerateEvent } from '../core/index.js';
import type { KvEventSink, KvSpill, PagePool } from '../pages/index.js';
import type { LoraControl } from '../engine/index.js';
import type { SpecOptions } from '../scheduler/index.js';
import type { Timeouts, TraceSink } from '../transfer/index.js';

export interface PdWorkerOptions {
  /** The name clients pass as `model` (shown in /health; clients talk to the router). */
  readonly modelName: string;
  readonly root: string;
  /** The model's fingerprint (src/model's modelFingerprint): in /health, and checked on every transfer. */
  readonly modelFingerprint: string;
  readonly contextLength: number;
  /** The engine's pool; its ledger is the one truth about pages. */
  readonly pool: PagePool;
  readonly runner: StepRunner;
  readonly sampler: TokenSampler;
  readonly eosTokenIds: readonly number[];
  readonly maxRunningRequests: number;
  readonly chunkedPrefillSize: number;
  /** Logits rows a step gives prompt log-probabilities beyond one per request (core's PROMPT_LOGIT_ROWS); default 0. */
  readonly promptLogitRows?: number;
  /** The time budget of a step with decodes (--max-step-ms; default 'auto'). */
  readonly maxStepMs?: MaxStepMs;
  readonly maxWaiting: number;
  readonly faults: FaultSet;
  readonly checkEveryStep: boolean;
  /** The internal (cluster) listener: control messages and KV frames. Default 127.0.0.1:0. */
  readonly clusterHost: string;
  readonly clusterPort: number;
  /** The cluster secret every peer proves before any message. */
  readonly clusterSecret: string;
  readonly timeouts?: Partial<Timeouts>;
  readonly trace?: TraceSink;
  readonly healthDetail?: Readonly<Record<string, unknown>>;
  /** The loop stopped on a bug. */
  readonly onFatal: (error: unknown) => void;
  /** Structured output (sampling.constraint); absent: such requests are refused at admission. */
  readonly grammar?: GrammarEngine;
  /** Prompt-lookup speculation on a decode node (--spec-max-draft); a prefill ignores it. */
  readonly speculation?: SpecOptions;
  /** A draft model on a decode node (--draft-model; draft-model.ts); a prefill has none. */
  readonly drafter?: { readonly name: string; readonly model: DraftModel };
  /** The disk tier under a prefill's prefix cache (--kv-disk; scheduler-for.ts); decode ignores it. */
  readonly kvSpill?: KvSpill;
  /** Where a prefill's prefix cache publishes KV events (its /kv-events ring; scheduler-for.ts); decode has none. */
  readonly kvEvents?: KvEventSink;
  /** The engine's LoRA control: with it the worker serves the adapters loaded into `PdRole.adapters` (--lora). */
  readonly lora?: LoraControl;
}

/** A client that asks a PD worker to generate: 400, it should ask the router. */
export function notForClients(role: 'prefill' | 'decode'): AsyncIterable<GenerateEvent> {
  const error = new InvalidRequestError(
    `this is a ${role} worker of a disaggregated cluster; send requests to the router (tessera router / tessera up)`,
  );
  return (async function* () {
    yield { type: 'failed', error } satisfies GenerateEvent;
  })();
}
