// The cache namespace: one domain-separated key for everything that decides whether a cached KV
// page may be handed to a request — the server-side tenant, the model's fingerprint, the KV
// layout (dtype, page size, bytes per token) and the adapter, if any. Every store of KV beyond
// the pool (the disk tier today) keys and checks its entries with it.
// Must never: be built from anything the client writes, or join its parts in a way two different
// part lists can produce the same key (JSON of a fixed-order array, with a version tag).
import type { TenantId } from './ids.js';

/** What decides the bytes of a KV page besides the tokens: equal layouts can exchange pages. */
export interface KvLayout {
  readonly dtype: string;
  readonly pageSize: number;
  /** K and V bytes of one token, all layers. */
  readonly bytesPerToken: number;
}

export interface CacheNamespaceParts {
  readonly tenant: TenantId;
  /** The model's fingerprint (src/model's modelFingerprint). */
  readonly model: string;
  readonly kvLayout: KvLayout;
  /** A LoRA or other adapter that changes the KV (its digest). */
  readonly adapter?: string;
}

/** An opaque, comparable key: equal only when every part is equal. */
export type CacheNamespace = string & { readonly __cacheNamespace: true };

const VERSION = 'tessera-cache-ns-v1';

export function cacheNamespace(parts: CacheNamespaceParts): CacheNamespace {
  const { tenant, model, kvLayout, adapter } = parts;
  return JSON.stringify([
    VERSION,
    tenant,
    model,
    kvLayout.dtype,
    kvLayout.pageSize,
    kvLayout.bytesPerToken,
    adapter ?? '',
  ]) as CacheNamespace;
}

/**
 * The tenant a request's KV is owned and cached under: the tenant itself for the base model, the
 * tenant joined with the adapter's digest under a LoRA adapter. Every KV store keyed by tenant (the
 * pool's prefix cache and its ledger owners, the spill tiers, block hashes, PD's Reserve/Prefill,
 * peer prefix fetch) thereby keeps adapters apart without a field of its own. Fault
 * `lora-drop-from-key` (dropAdapter): the tenant alone, so KV computed under one adapter is reused
 * under another. Tenant names come from the admin's keys file, never from a request.
 */
export function kvTenantOf(
  tenant: TenantId,
  adapter: { readonly digest: string } | undefined,
  dropAdapter: boolean,
): TenantId {
  if (adapter === undefined || dropAdapter) return tenant;
  return `${tenant} [lora ${adapter.digest}]` as TenantId;
}

/** The adapter digest a KV tenant (kvTenantOf) carries; null for the base model's. */
export function adapterDigestOf(kvTenant: string): string | null {
  return /^.* \[lora ([^\]]+)\]$/s.exec(kvTenant)?.[1] ?? null;
}
