// LoraRegistry: the adapters one engine serves, by name: where each came from, its digest (its
// KV identity, computed by the engine from the file), which tenants may use it, and whether a live
// request runs with it. It implements core's AdapterDirectory (what api and the PD router look up).
// Life of an adapter:
//   1. load(name, path, scale, tenants): the engine (its thread) reads and checks the file and
//      answers the digest; only then is the name visible to requests.
//   2. lookup(name, tenant): a request names it; a tenant outside `tenants` sees no such adapter.
//   3. unload(name): refused while a live request runs with it ('in-use'); else the name goes at
//      once and the engine drops the weights between steps.
// Must never: replace a loaded name (a step may be reading it), or show a restricted adapter to
// another tenant.
import type { AdapterDirectory, AdapterLookup, AdapterRef, TenantId } from '../core/index.js';
import type { LoraControl } from '../engine/index.js';

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

  constructor(engine: LoraControl, inUse: (name: string) => number) {
    this.#engine = engine;
    this.#inUse = inUse;
  }

  async load(name: string, path: string, scale: number, tenants: readonly string[] | null): Promise<AdapterRef> {
    if (this.#entries.has(name) || this.#loading.has(name))
      throw new Error(`a LoRA adapter named ${name} is already loaded; unload it first`);
    this.#loading.add(name);
    try {
      const digest = await this.#engine.loadLora(name, path, scale);
      const ref = { name, digest };
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

  /** Every loaded adapter's digest by name (a PD worker's /health). */
  digests(): Record<string, string> {
    return Object.fromEntries([...this.#entries].map(([name, e]) => [name, e.ref.digest]));
  }

  list(tenant: TenantId): readonly string[] {
    return [...this.#entries.keys()].filter((name) => this.lookup(name, tenant).kind === 'found');
  }

  unload(name: string): 'unloaded' | 'unknown' | 'in-use' {
    if (!this.#entries.has(name)) return 'unknown';
    if (this.#inUse(name) > 0) return 'in-use';
    this.#entries.delete(name);
    void this.#engine.unloadLora(name);
    return 'unloaded';
  }
}
