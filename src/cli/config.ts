// argv -> one typed Config for `tessera serve` (and the numbers `tessera plan` shares with it).
// Commander hands every flag over as a string; this file turns them into checked values and
// reads the environment through config-env.ts. Pure apart from its `env` argument: no I/O,
// so every refusal (exit 2) is testable without a process.
import { ConfigError, KV_DTYPES, type FaultSet, type KvDtype } from '../core/index.js';
import { KERNEL_CHOICES, type KernelChoice } from '../kernels/index.js';
import { WEIGHTS_MODES, type WeightsMode } from '../formats/index.js';
import { DEFAULT_SPEC, type SpecOptions } from '../scheduler/index.js';
import { checkEveryStepFromEnv, faultsFromEnv, tesseraHome, type Env } from './config-env.js';
import type { PoolFlags, PoolSize } from './config-pool.js';
import { parseCount, parseSize } from './config-values.js';

/**
 * The model every command serves or runs when --model is not given: the small Llama trained on
 * Jane Austen's novels that ships in models/austen (so `npm start` speaks English). Tests that
 * need a model of a chosen shape use builtin:tiny or gen-model.
 */
export const DEFAULT_MODEL = 'builtin:austen';
export const DEFAULT_HOST = '127.0.0.1';
export const DEFAULT_PORT = 8000;
export const DEFAULT_PAGE_SIZE = 16;
/** How the KV pool stores K and V unless --kv-dtype says otherwise (see docs/serving.md, "KV cache dtype": why this one). */
export const DEFAULT_KV_DTYPE: KvDtype = 'f32';
export const DEFAULT_MAX_RUNNING_REQUESTS = 32;
/** Most tokens in one step (the engine's default too): a full prefill chunk is the longest inter-token gap it adds to running requests. */
export const DEFAULT_CHUNKED_PREFILL_SIZE = 256;
/** Requests admitted but not yet running; one more is refused as `overloaded` (HTTP 503). */
export const DEFAULT_MAX_WAITING = 1024;

/** The flags of `tessera serve`, as commander gives them. */
export interface ServeFlags {
  readonly model?: string;
  readonly host?: string;
  readonly port?: string;
  readonly contextLength?: string;
  readonly kvPages?: string;
  readonly kvMemory?: string;
  readonly pageSize?: string;
  readonly kvDtype?: string;
  readonly maxRunningRequests?: string;
  readonly chunkedPrefillSize?: string;
  readonly maxStepMs?: string;
  readonly apiKeys?: string;
  readonly deterministic?: boolean;
  readonly kernels?: string;
  readonly weights?: string;
  readonly servedModelName?: string;
  readonly kvDisk?: string;
  readonly kvDiskSize?: string;
  readonly specMaxDraft?: string;
  readonly draftModel?: string;
  readonly draftVocab?: string;
}

/** --kv-disk: the directory of the disk tier under the prefix cache, and its size bound. */
export interface KvDiskConfig {
  readonly dir: string;
  readonly maxBytes: number;
}

/** --kv-disk-size's default. */
export const DEFAULT_KV_DISK_SIZE = '1GiB';

export interface ServeConfig {
  readonly model: string;
  /** What clients pass as `model`; defaults to the --model value. */
  readonly servedModelName: string;
  readonly host: string;
  /** 0 picks a free port (printed at start-up). */
  readonly port: number;
  readonly pool: PoolFlags;
  readonly maxRunningRequests: number;
  readonly chunkedPrefillSize: number;
  /** --max-step-ms: the time budget of a step with decodes (ms), 'auto' or 'off'. */
  readonly maxStepMs: number | 'auto' | 'off';
  readonly maxWaiting: number;
  /** The --api-keys file, read at start-up; null: an open server. */
  readonly apiKeysFile: string | null;
  /** Batch-invariant kernels: a greedy request's output does not depend on its neighbours. */
  readonly deterministic: boolean;
  /** --kernels: which backend runs the ops (kernels' planKernels turns it into a plan). */
  readonly kernels: KernelChoice;
  /** --weights: a GGUF's weights mapped read-only (mmap, default) or read whole (copy). */
  readonly weights: WeightsMode;
  /** TESSERA_HOME: where built-in models are generated. */
  readonly home: string;
  readonly faults: FaultSet;
  /** Ledger integrity after every step, not only when idle (tests). */
  readonly checkEveryStep: boolean;
  /** The disk tier (--kv-disk DIR, --kv-disk-size); null: none, an evicted prefix is gone. */
  readonly kvDisk: KvDiskConfig | null;
  /** Speculative decoding (--spec-max-draft; maxDraft 0: off): prompt lookup, or a draft model's drafts (drafter 'model'). */
  readonly speculation: SpecOptions;
  /** --draft-model: a smaller model of the same vocabulary that drafts (a spec as --model takes); null: prompt lookup. */
  readonly draftModel: string | null;
  /** --draft-vocab N: the draft model's head cut to the vocabulary's first N ids (FR-Spec; engine/draft-head.ts); absent: whole. */
  readonly draftVocab?: number;
}

/** The pool flags shared by serve and plan. */
export function parsePoolFlags(
  flags: Pick<ServeFlags, 'kvPages' | 'kvMemory' | 'pageSize' | 'kvDtype' | 'contextLength'>,
): PoolFlags {
  if (flags.kvPages !== undefined && flags.kvMemory !== undefined) {
    throw new ConfigError('give either --kv-pages or --kv-memory, not both');
  }
  const size: PoolSize =
    flags.kvPages !== undefined
      ? { kind: 'pages', numPages: parseCount(flags.kvPages, '--kv-pages') }
      : flags.kvMemory !== undefined
        ? { kind: 'memory', bytes: parseSize(flags.kvMemory, '--kv-memory') }
        : { kind: 'default' };
  return {
    size,
    pageSize: flags.pageSize === undefined ? DEFAULT_PAGE_SIZE : parseCount(flags.pageSize, '--page-size', 1, 1024),
    kvDtype: parseKvDtype(flags.kvDtype),
    contextLength: flags.contextLength === undefined ? null : parseCount(flags.contextLength, '--context-length'),
  };
}

/** --kv-dtype: f32, f16 or q8_0 (default DEFAULT_KV_DTYPE). */
export function parseKvDtype(value: string | undefined): KvDtype {
  if (value === undefined) return DEFAULT_KV_DTYPE;
  const dtype = KV_DTYPES.find((d) => d === value);
  if (dtype === undefined) throw new ConfigError(`--kv-dtype must be one of ${KV_DTYPES.join(', ')}, got '${value}'`);
  return dtype;
}

/** --kernels: auto (default), native, wasm or ref. */
export function parseKernelChoice(value: string | undefined): KernelChoice {
  if (value === undefined) return 'auto';
  const choice = KERNEL_CHOICES.find((c) => c === value);
  if (choice === undefined)
    throw new ConfigError(`--kernels must be one of ${KERNEL_CHOICES.join(', ')}, got '${value}'`);
  return choice;
}

/** --weights: mmap (default) or copy. */
export function parseWeightsMode(value: string | undefined): WeightsMode {
  if (value === undefined) return 'mmap';
  const mode = WEIGHTS_MODES.find((m) => m === value);
  if (mode === undefined) throw new ConfigError(`--weights must be one of ${WEIGHTS_MODES.join(', ')}, got '${value}'`);
  return mode;
}

/** The --weights option's help, shared by serve, run, plan and up. */
export const WEIGHTS_HELP =
  "how a GGUF's weights reach memory: mmap (default: mapped read-only, the page cache holds the file and only " +
  "what the kernels repack is this process's own; read instead where the native addon does not load) or copy " +
  '(read whole into memory)';

/** The --kernels option's help, shared by serve, run, plan and up. */
export const KERNELS_HELP =
  'which kernels run the model: auto (default: native if this CPU runs the addon, else wasm), native, wasm, ' +
  'or ref (plain TypeScript, slow: for checking); `tessera plan` prints the table';

/** The --kv-dtype option's help, shared by serve, plan and up. */
export const KV_DTYPE_HELP =
  'how the KV pool stores K and V: f32, f16 (half the bytes per token) or q8_0 (int8 with an f16 scale per 32 ' +
  `values, llama.cpp's -ctk q8_0: 1.0625 bytes a value, 1.88x the tokens of f16; default ${DEFAULT_KV_DTYPE})`;

export function parseServeConfig(flags: ServeFlags, env: Env): ServeConfig {
  const model = nonEmpty(flags.model ?? DEFAULT_MODEL, '--model');
  const maxRunningRequests =
    flags.maxRunningRequests === undefined
      ? DEFAULT_MAX_RUNNING_REQUESTS
      : parseCount(flags.maxRunningRequests, '--max-running-requests');
  const chunkedPrefillSize =
    flags.chunkedPrefillSize === undefined
      ? Math.max(DEFAULT_CHUNKED_PREFILL_SIZE, maxRunningRequests)
      : parseCount(flags.chunkedPrefillSize, '--chunked-prefill-size');
  if (chunkedPrefillSize < maxRunningRequests) {
    throw new ConfigError(
      `--chunked-prefill-size (${chunkedPrefillSize}) must be at least --max-running-requests (${maxRunningRequests}), ` +
        'so every running request can decode in every step',
    );
  }
  return {
    model,
    servedModelName: nonEmpty(flags.servedModelName ?? model, '--served-model-name'),
    host: nonEmpty(flags.host ?? DEFAULT_HOST, '--host'),
    port: flags.port === undefined ? DEFAULT_PORT : parseCount(flags.port, '--port', 0, 65535),
    pool: parsePoolFlags(flags),
    maxRunningRequests,
    chunkedPrefillSize,
    maxStepMs: parseMaxStepMs(flags.maxStepMs),
    maxWaiting: DEFAULT_MAX_WAITING,
    apiKeysFile: flags.apiKeys ?? null,
    deterministic: flags.deterministic === true,
    kernels: parseKernelChoice(flags.kernels),
    weights: parseWeightsMode(flags.weights),
    home: tesseraHome(env),
    faults: faultsFromEnv(env),
    checkEveryStep: checkEveryStepFromEnv(env),
    kvDisk: parseKvDisk(flags),
    speculation: {
      ...DEFAULT_SPEC,
      ...(flags.specMaxDraft === undefined
        ? {}
        : { maxDraft: parseCount(flags.specMaxDraft, '--spec-max-draft', 0, 16) }),
      ...(flags.draftModel === undefined ? {} : { drafter: 'model' as const }),
    },
    draftModel: flags.draftModel ?? null,
    ...(flags.draftVocab === undefined ? {} : { draftVocab: parseCount(flags.draftVocab, '--draft-vocab', 1) }),
  };
}

function parseKvDisk(flags: Pick<ServeFlags, 'kvDisk' | 'kvDiskSize'>): KvDiskConfig | null {
  if (flags.kvDisk === undefined) {
    if (flags.kvDiskSize !== undefined) throw new ConfigError('--kv-disk-size needs --kv-disk DIR');
    return null;
  }
  return {
    dir: nonEmpty(flags.kvDisk, '--kv-disk'),
    maxBytes: parseSize(flags.kvDiskSize ?? DEFAULT_KV_DISK_SIZE, '--kv-disk-size'),
  };
}

/** --max-step-ms: 'auto' (default), 'off', or a whole number of milliseconds from 1 to 60000. */
export function parseMaxStepMs(value: string | undefined): number | 'auto' | 'off' {
  if (value === undefined || value === 'auto') return 'auto';
  if (value === 'off') return 'off';
  return parseCount(value, '--max-step-ms', 1, 60_000);
}

function nonEmpty(value: string, flag: string): string {
  if (value.trim() === '') throw new ConfigError(`${flag} must not be empty`);
  return value;
}
