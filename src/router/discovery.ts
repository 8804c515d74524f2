// Discovery: workers named by DNS, re-resolved every intervalMs (the Kubernetes headless-Service
// convention: one A record per ready pod, every pod on the same port). A name that gains an
// address adds a worker to the registry; one that loses it drains that worker (no new pairs,
// requests in flight finish or fail through the protocol, then it is removed).
// A worker found this way is paired only after its join checks pass (`joinCheck`): it answered
// /health with 200 as the role it was named for (workers.ts), it serves the same model (by
// fingerprint) with the same KV layout (page size, bytes per token) as the workers already
// admitted, and its cluster address proves the cluster secret (a handshake, then closed).
// Must never: drain on a failed lookup (a DNS outage is not a scale-down: only an answer with
// fewer addresses is), pair a worker before its checks pass, or throw out of a timer.
import { Resolver } from 'node:dns/promises';
import { clearInterval, setInterval } from 'node:timers';
import { ConfigError } from '../core/index.js';
import type { WorkerRole } from './pair-policy.js';
import type { WorkerEntry, WorkerRegistry } from './workers.js';

export interface DnsTarget {
  readonly role: WorkerRole;
  readonly name: string;
  /** Every worker's HTTP (/health) port. */
  readonly port: number;
}

/** A name's IPv4 addresses; [] when the name has none (NXDOMAIN, no A record); throws when the lookup itself failed. */
export type ResolveA = (name: string) => Promise<string[]>;

/** "name:port" of --prefill-dns / --decode-dns. */
export function parseDnsTarget(value: string, role: WorkerRole, flag: string): DnsTarget {
  const match = /^([A-Za-z0-9.-]+):(\d{1,5})$/.exec(value);
  const port = Number(match?.[2]);
  if (match === null || !(port > 0 && port < 65536))
    throw new ConfigError(
      `${flag} must be NAME:PORT (a DNS name with one A record per worker, and their HTTP port), got "${value}"`,
    );
  return { role, name: match[1] as string, port };
}

/**
 * Why a worker that answered /health may not join the cluster yet, or undefined (its secret is
 * checked apart). `checkModel` false (the router's test-only skip-model-check): fingerprints are not compared.
 */
export function joinCheck(entry: WorkerEntry, admitted: readonly WorkerEntry[], checkModel = true): string | undefined {
  const mine = entry.limits;
  if (mine === undefined || entry.address === undefined) return 'it has not reported its limits and cluster address';
  for (const other of admitted) {
    const theirs = other.limits;
    if (theirs === undefined) continue;
    if (checkModel && theirs.model !== mine.model)
      return `its model fingerprint ${mine.model} differs from ${other.url}'s ${theirs.model}`;
    if (
      theirs.pageSize !== mine.pageSize ||
      theirs.kvBytesPerToken !== mine.kvBytesPerToken ||
      theirs.kvDtype !== mine.kvDtype
    ) {
      return `its KV layout (page ${mine.pageSize} tokens, ${mine.kvBytesPerToken} bytes per token, ${mine.kvDtype}) differs from ${other.url}'s (page ${theirs.pageSize}, ${theirs.kvBytesPerToken}, ${theirs.kvDtype})`;
    }
  }
  return undefined;
}

export interface DiscoveryOptions {
  readonly targets: readonly DnsTarget[];
  readonly resolve: ResolveA;
  readonly intervalMs: number;
  readonly registry: WorkerRegistry;
  readonly log: (line: string) => void;
}

export interface DiscoveryStats {
  lookups: number;
  lookupFailures: number;
  joined: number;
  left: number;
}

export class Discovery {
  readonly #o: DiscoveryOptions;
  /** Per target, the worker URLs its last answer named. */
  readonly #current = new Map<DnsTarget, Set<string>>();
  readonly #stats: DiscoveryStats = { lookups: 0, lookupFailures: 0, joined: 0, left: 0 };
  #timer: ReturnType<typeof setInterval> | undefined;
  #running: Promise<void> | undefined;

  constructor(options: DiscoveryOptions) {
    this.#o = options;
  }

  /** Resolves every name now, then every intervalMs. */
  start(): Promise<void> {
    this.#timer ??= setInterval(() => void this.refresh(), this.#o.intervalMs);
    this.#timer.unref();
    return this.refresh();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  stats(): DiscoveryStats {
    return { ...this.#stats };
  }

  refresh(): Promise<void> {
    this.#running ??= Promise.all(this.#o.targets.map((t) => this.#refreshOne(t))).then(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  async #refreshOne(target: DnsTarget): Promise<void> {
    let addresses: string[];
    this.#stats.lookups++;
    try {
      addresses = await this.#o.resolve(target.name);
    } catch (error) {
      this.#stats.lookupFailures++;
      this.#o.log(
        `DNS ${target.name}: ${error instanceof Error ? error.message : String(error)}; keeping its ${this.#current.get(target)?.size ?? 0} workers`,
      );
      return;
    }
    const next = new Set(addresses.map((ip) => `http://${ip}:${target.port}`));
    const before = this.#current.get(target) ?? new Set<string>();
    for (const url of next) {
      if (before.has(url)) continue;
      this.#stats.joined++;
      this.#o.log(`${target.role} ${url} joined (DNS ${target.name}); paired once its checks pass`);
      this.#o.registry.add(url, target.role);
    }
    for (const url of before) {
      if (next.has(url)) continue;
      this.#stats.left++;
      this.#o.log(`${target.role} ${url} left (DNS ${target.name}); draining`);
      this.#o.registry.drain(url);
    }
    this.#current.set(target, next);
  }
}

/** ResolveA over the system's resolver configuration (/etc/resolv.conf), with its own timeout per try. */
export function systemResolveA(timeoutMs: number): ResolveA {
  const resolver = new Resolver({ timeout: timeoutMs, tries: 2 });
  return async (name) => {
    try {
      return await resolver.resolve4(name);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOTFOUND' || code === 'ENODATA') return [];
      throw error;
    }
  };
}
