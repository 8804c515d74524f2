// LoraRegistry: the adapters one engine serves, by name: where each came from, its digest (its
// KV identity, computed by the engine from the file), which tenants may use it, and whether a live
// request runs with it. It implements core's AdapterDirectory (what api and the PD router look up).
// Life of an adapter:
//   1. load(name, path, scale, tenants): the engine (its thread) reads and checks the file and
//      answers the digest; only then is the name visible to requests.
//   2. lookup(name, tenant): a request names it; a tenant outside `tenants` sees no such adapter.
//   3. unload(name): when a live request runs with it, either refused ('in-use': a co-located
//      server, whose admin retries) or, with `deferUnload` (a PD worker: the router already holds
//      no request under it, stragglers finish), the name goes at once and the weights stay until
//      the last such request ended (settle(), called after each step). Else the name goes at once
//      and the engine drops the weights between steps.
// Must never: replace a loaded name (a step may be reading it; a name whose weights are still held
// for a straggler is refused too), drop weights a live request runs with, or show a restricted
// adapter to another tenant.
import {
  TesseraError,
  type AdapterDirectory,
  type FaultSet,
  type AdapterLookup,
  type AdapterRef,
  type TenantId,
} from '../core/index.js';
import type { LoraControl } from '../engine/index.js';

/** Digests whose names nameOf() keeps (KV events name adapters unloaded since). */
const NAMES_KEPT = 1024;

interface Entry {
  readonly ref: AdapterRef;
  readonly path: string;
  readonly tenants: ReadonlySet<string> | null;
}

export class LoraRegistry implements AdapterDirectory {
  readonly #engine: LoraControl;
  readonly #inUse: (name: string) => number;
  readonly #entries = new Map<string, Entry>();
  /** Names being loaded: a second load of one waits for no one, it is refused. */
  readonly #loading = new Set<string>();
  /** Digest -> the name it was last loaded under (oldest first; at most NAMES_KEPT). */
  readonly #names = new Map<string, string>();
  /** Unloaded names whose weights stay until no live request runs with them (deferUnload). */
  readonly #retiring = new Set<string>();
  readonly #deferUnload: boolean;

  /** Test-only fault `lora-unload-in-use`: settle() drops weights whatever runs with them. */
  readonly #dropInUse: boolean;

  constructor(
    engine: LoraControl,
    inUse: (name: string) => number,
    options: { readonly deferUnload?: boolean; readonly faults?: FaultSet } = {},
  ) {
    this.#engine = engine;
    this.#inUse = inUse;
    this.#deferUnload = options.deferUnload === true;
    this.#dropInUse = options.faults?.has('lora-unload-in-use') === true;
  }

  async load(name: string, path: string, scale: number, tenants: readonly string[] | null): Promise<AdapterRef> {
    await this.settle();
    if (this.#entries.has(name) || this.#loading.has(name))
      throw new Error(`a LoRA adapter named ${name} is already loaded; unload it first`);
    if (this.#retiring.has(name))
      throw new TesseraError(
        'overloaded',
        `the LoRA adapter ${name} was unloaded but requests still run with it; load it again when they end`,
      );
    this.#loading.add(name);
    try {
      const digest = await this.#engine.loadLora(name, path, scale);
      const ref = { name, digest };
      this.#names.delete(digest);
      this.#names.set(digest, name);
      if (this.#names.size > NAMES_KEPT) this.#names.delete(this.#names.keys().next().value as string);
      this.#entries.set(name, { ref, path, tenants: tenants === null ? null : new Set(tenants) });
      return ref;
    } finally {
      this.#loading.delete(name);
    }
  }

  lookup(name: string, tenant: TenantId): AdapterLookup {
    const entry = this.#entries.get(name);
    if (entry === undefined || (entry.tenants !== null && !entry.tenants.has(tenant))) return { kind: 'unknown' };
    return { kind: 'found', ref: entry.ref };
  }

  /** The digest `name` is loaded under, whatever the tenant (a PD worker: the router decides who may use it). */
  digestOf(name: string): string | undefined {
    return this.#entries.get(name)?.ref.digest;
  }

  /**
   * The name the adapter with `digest` was last loaded under, even after its unload (KV events read
   * later still name it); the latest NAMES_KEPT digests are kept.
   */
  nameOf(digest: string): string | undefined {
    return this.#names.get(digest);
  }

  /** Every loaded adapter's digest by name (a PD worker's /health). */
  digests(): Record<string, string> {
    return Object.fromEntries([...this.#entries].map(([name, e]) => [name, e.ref.digest]));
  }

  list(tenant: TenantId): readonly string[] {
    return [...this.#entries.keys()].filter((name) => this.lookup(name, tenant).kind === 'found');
  }

  async unload(name: string): Promise<'unloaded' | 'unknown' | 'in-use'> {
    if (!this.#entries.has(name)) return 'unknown';
    if (this.#inUse(name) > 0 && !this.#deferUnload) return 'in-use';
    this.#entries.delete(name);
    this.#retiring.add(name);
    await this.settle();
    return 'unloaded';
  }

  /** Unloaded names still held for a live request (deferUnload). */
  get numRetiring(): number {
    return this.#retiring.size;
  }

  /** Drops the weights of every unloaded name no live request runs with any more. */
  async settle(): Promise<void> {
    if (this.#retiring.size === 0) return;
    const free = [...this.#retiring].filter((name) => this.#dropInUse || this.#inUse(name) === 0);
    for (const name of free) this.#retiring.delete(name);
    await Promise.all(free.map((name) => this.#engine.unloadLora(name)));
  }
}
