// argv + environment -> the typed config of disaggregated serving: the worker roles' extra flags
// (`tessera serve --role prefill|decode`), `tessera router` and `tessera up`. Pure apart from
// its `env` argument, so every refusal (exit 2) is testable without a process.
//
// Environment (besides config-env.ts's):
//   TESSERA_CLUSTER_SECRET   the cluster secret when --cluster-secret is not given (preferred:
//                            argv is visible to every user of the machine in `ps`)
//   TESSERA_PD_TIMEOUTS      protocol waits for tests, e.g. "abortAckMs=300,abortRetries=1"
//                            (names from src/transfer's Timeouts; defaults suit a real LAN)
//   TESSERA_TRACE_DIR        each process appends its protocol TraceEvents to
//                            <dir>/<role>-<pid>.jsonl (tests replay them through spec/conformance)
//   TESSERA_SUPERVISED=1     set by `tessera up` for its children: exit when stdin closes (the
//                            parent is gone), so a killed `up` leaves no orphans
// Must never: accept a cluster secret shorter than the transport's minimum, or a timeout name
// the protocol does not have.
import { ConfigError } from '../core/index.js';
import { DEFAULT_TIMEOUTS, MIN_SECRET_BYTES, type Timeouts } from '../transfer/index.js';
import type { Env } from './config-env.js';
import { parseCount } from './config-values.js';

export type ServeRole = 'colocated' | 'prefill' | 'decode';

/** The extra flags of `tessera serve` for the PD roles. */
export interface PdServeFlags {
  readonly role?: string;
  readonly dataHost?: string;
  readonly dataPort?: string;
  readonly clusterSecret?: string;
}

export interface PdWorkerConfig {
  readonly role: 'prefill' | 'decode';
  /** The internal listener (control messages and KV frames); loopback unless told otherwise. */
  readonly dataHost: string;
  /** 0 picks a free port (printed at start-up and reported in /health). */
  readonly dataPort: number;
  readonly clusterSecret: string;
  readonly timeouts: Partial<Timeouts>;
  readonly traceDir: string | null;
  readonly supervised: boolean;
}

export const DEFAULT_DATA_HOST = '127.0.0.1';

export function parseRole(flags: PdServeFlags): ServeRole {
  const role = flags.role ?? 'colocated';
  if (role !== 'colocated' && role !== 'prefill' && role !== 'decode') {
    throw new ConfigError(`--role must be colocated, prefill or decode, got "${role}"`);
  }
  return role;
}

export function parsePdWorkerConfig(role: 'prefill' | 'decode', flags: PdServeFlags, env: Env): PdWorkerConfig {
  const dataHost = flags.dataHost ?? DEFAULT_DATA_HOST;
  if (dataHost.trim() === '' || dataHost === '0.0.0.0' || dataHost === '::') {
    throw new ConfigError(
      `--data-host must be an address peers can dial (it is also this worker's cluster id), got "${dataHost}"`,
    );
  }
  return {
    role,
    dataHost,
    dataPort: flags.dataPort === undefined ? 0 : parseCount(flags.dataPort, '--data-port', 0, 65535),
    clusterSecret: clusterSecret(flags.clusterSecret, env),
    timeouts: timeoutsFromEnv(env),
    traceDir: traceDirFromEnv(env),
    supervised: env['TESSERA_SUPERVISED'] === '1',
  };
}

/** --cluster-secret, else TESSERA_CLUSTER_SECRET; required, at least MIN_SECRET_BYTES bytes. */
export function clusterSecret(flag: string | undefined, env: Env): string {
  const secret = flag ?? env['TESSERA_CLUSTER_SECRET'];
  if (secret === undefined || secret === '') {
    throw new ConfigError(
      'a disaggregated cluster needs a shared secret: pass --cluster-secret or set TESSERA_CLUSTER_SECRET on every prefill, decode ' +
        'and router process (e.g. `openssl rand -hex 32`); `tessera up` makes one itself',
    );
  }
  if (new TextEncoder().encode(secret).length < MIN_SECRET_BYTES) {
    throw new ConfigError(`the cluster secret must be at least ${MIN_SECRET_BYTES} bytes long`);
  }
  return secret;
}

/** TESSERA_PD_TIMEOUTS="name=value,...": overrides of src/transfer's DEFAULT_TIMEOUTS. */
export function timeoutsFromEnv(env: Env): Partial<Timeouts> {
  const text = env['TESSERA_PD_TIMEOUTS'] ?? '';
  const timeouts: Record<string, number> = {};
  for (const part of text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')) {
    const [name, value] = part.split('=', 2).map((s) => s.trim());
    if (name === undefined || !(name in DEFAULT_TIMEOUTS)) {
      throw new ConfigError(
        `TESSERA_PD_TIMEOUTS: unknown wait "${name ?? part}" (known: ${Object.keys(DEFAULT_TIMEOUTS).join(', ')})`,
      );
    }
    timeouts[name] = parseCount(value ?? '', `TESSERA_PD_TIMEOUTS ${name}`, name === 'abortRetries' ? 0 : 1);
  }
  return timeouts as Partial<Timeouts>;
}

export function traceDirFromEnv(env: Env): string | null {
  const dir = env['TESSERA_TRACE_DIR'];
  return dir === undefined || dir === '' ? null : dir;
}

/** `tessera router`'s flags, as commander gives them. */
export interface RouterFlags {
  readonly prefill: readonly string[];
  readonly decode: readonly string[];
  readonly host?: string;
  readonly port?: string;
  readonly model?: string;
  readonly servedModelName?: string;
  readonly contextLength?: string;
  readonly apiKeys?: string;
  readonly clusterSecret?: string;
}

/** A worker URL: http(s)://host:port, no path. */
export function parseWorkerUrl(url: string, flag: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ConfigError(`${flag} must be a worker's URL such as http://127.0.0.1:8101, got "${url}"`);
  }
  if (
    (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') ||
    (parsed.pathname !== '/' && parsed.pathname !== '')
  ) {
    throw new ConfigError(
      `${flag} must be a worker's URL such as http://127.0.0.1:8101 (its HTTP port, no path), got "${url}"`,
    );
  }
  return `${parsed.protocol}//${parsed.host}`;
}

/** Repeatable options: commander calls this once per occurrence. */
export function collect(value: string, previous: readonly string[] = []): string[] {
  return [...previous, value];
}
