// Prefix block hashes: what a prefill worker reports about its prefix cache and what the router
// computes for a request, so the router can tell which worker holds the longest cached prefix of
// a prompt without seeing the cache. One hash per full page, chained: block i's hash covers
// the tenant and every token of pages 0..i, so equal hashes mean an equal tenant and prefix.
// They leave the process (a prefill's /health), so every link is keyed with the cluster's secret:
//   key        = HMAC-SHA256(cluster secret, "tessera-prefix-key-v2")
//   tag(t)     = HMAC(key, "tenant|" + t)        the tenant as reports name it (never its name)
//   h(-1)      = HMAC(key, "seed|" + tag(t))     h(i) = HMAC(key, h(i-1) + "|" + tokens of page i)
// (each truncated to 64 bits, hex). Whoever lacks the secret cannot recompute a guessed prompt's
// hashes and confirm it against a report, nor tell which tenant a report's entry belongs to.
//   keyId(s)   = HMAC(key, "disk-key|" + s)     names the key a disk tier's page header was written
// under (s: the model and KV layout), so a restart reports only its own key's hashes; an HMAC
// output, it reveals nothing of the key.
// Routing only: a collision costs a cache miss, never a wrong read (the worker's own cache
// matches exact token ids, per tenant).
// Must never: chain a link without the key (each link is published, so an unkeyed link lets an
// outsider extend a chain it saw by a guessed page), or put a tenant's name or a token id in a hash's input
// that leaves the process unkeyed.
import { createHmac } from 'node:crypto';
import { xxh64 } from '@node-rs/xxhash';

const hex = (h: bigint): string => h.toString(16).padStart(16, '0');

/** Computes the keyed block hashes of one cluster (one secret). */
export class PrefixHasher {
  readonly #key: Buffer | undefined;

  /**
   * `secret`: the cluster secret. `unkeyed` (the test-only fault unkeyed-prefix-hashes): the old
   * scheme, seeded by the tenant's name alone with xxh64 links, and tenants reported by name.
   */
  constructor(secret: string, unkeyed = false) {
    this.#key = unkeyed ? undefined : createHmac('sha256', secret).update('tessera-prefix-key-v2').digest();
  }

  /** Whether hashes are keyed (false only under the fault). */
  get keyed(): boolean {
    return this.#key !== undefined;
  }

  /** How reports and the router's index name a tenant. */
  tenantTag(tenant: string): string {
    return this.#key === undefined ? tenant : this.#mac(`tenant|${tenant}`);
  }

  /** The chain's start for a tenant's tag. */
  seed(tag: string): string {
    return this.#key === undefined ? hex(xxh64(`tessera-prefix-v1|${tag}`)) : this.#mac(`seed|${tag}`);
  }

  /** The hash of the block after `parent`, whose page holds the tokens of `pageKey` (ids joined with ','). */
  next(parent: string, pageKey: string): string {
    return this.#key === undefined ? hex(xxh64(pageKey, BigInt(`0x${parent}`))) : this.#mac(`${parent}|${pageKey}`);
  }

  /**
   * A fingerprint of this hasher's key for `scope` (what a disk tier's page header records beside the
   * page's tag and block hash: worker/disk-tier.ts); undefined when unkeyed (such headers carry none).
   */
  keyId(scope: string): string | undefined {
    return this.#key === undefined ? undefined : this.#mac(`disk-key|${scope}`);
  }

  /** The chained hashes of the first full pages of tokens (at most maxBlocks), for a tenant's tag. */
  blockHashes(tag: string, tokens: readonly number[], pageSize: number, maxBlocks = Infinity): string[] {
    const out: string[] = [];
    let h = this.seed(tag);
    for (let i = 0; i < Math.min(Math.floor(tokens.length / pageSize), maxBlocks); i++) {
      h = this.next(h, tokens.slice(i * pageSize, (i + 1) * pageSize).join(','));
      out.push(h);
    }
    return out;
  }

  #mac(text: string): string {
    return createHmac('sha256', this.#key as Buffer)
      .update(text)
      .digest('hex')
      .slice(0, 16);
  }
}
