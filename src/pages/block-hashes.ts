// BlockHashes: each cached page's keyed block hash (prefix-hash.ts), computed once per hasher
// (pages do not move in the tree), for the prefix cache's block-hash report and its KV events.
// Owns: the memos (per hasher, per node; per hasher, per tree root: its tenant's tag; all weakly
// held) and the events' shape for one node.
// Must never: hash anything but the hasher's own links (the tenant's tag, the chain, page keys),
// or put a token id or a tenant's name into an event.
import { adapterDigestOf } from '../core/index.js';
import type { KvEvent } from './kv-events.js';
import type { PrefixHasher } from './prefix-hash.js';

export interface ChainRoot {
  readonly kind: 'root';
}

export interface ChainNode {
  readonly kind: 'page';
  /** The page's token ids, joined with ','. */
  readonly key: string;
  readonly parent: ChainNode | ChainRoot;
}

export class BlockHashes {
  readonly #memos = new WeakMap<PrefixHasher, WeakMap<ChainNode, string>>();
  /** Each tree root's tenant tag, per hasher (a keyed HMAC: once per root, not once per event). */
  readonly #tags = new WeakMap<PrefixHasher, WeakMap<ChainRoot, string>>();
  /** The tenant a root stands for ("*" for the one root of share-prefix-across-tenants). */
  readonly #tenantOf: (root: ChainRoot) => string;

  constructor(tenantOf: (root: ChainRoot) => string) {
    this.#tenantOf = tenantOf;
  }

  /** The keyed tag of the tenant whose tree holds node. */
  tenantTag(node: ChainNode, hasher: PrefixHasher): string {
    let at: ChainNode | ChainRoot = node;
    while (at.kind === 'page') at = at.parent;
    let tags = this.#tags.get(hasher);
    if (tags === undefined) this.#tags.set(hasher, (tags = new WeakMap()));
    let tag = tags.get(at);
    if (tag === undefined) tags.set(at, (tag = hasher.tenantTag(this.#tenantOf(at))));
    return tag;
  }

  /** node's chained block hash; `seed`, when the caller has it, is the chain's start (hasher.seed(tag)). */
  hash(node: ChainNode, hasher: PrefixHasher, seed?: string): string {
    let memo = this.#memos.get(hasher);
    if (memo === undefined) this.#memos.set(hasher, (memo = new WeakMap()));
    let hash = memo.get(node);
    if (hash === undefined) {
      const parent =
        node.parent.kind === 'page'
          ? this.hash(node.parent, hasher, seed)
          : (seed ?? hasher.seed(this.tenantTag(node, hasher)));
      hash = hasher.next(parent, node.key);
      memo.set(node, hash);
    }
    return hash;
  }

  stored(node: ChainNode, hasher: PrefixHasher): KvEvent {
    let root: ChainNode | ChainRoot = node;
    while (root.kind === 'page') root = root.parent;
    return {
      type: 'BlockStored',
      tenant: this.tenantTag(node, hasher),
      blockHash: this.hash(node, hasher),
      parentHash: node.parent.kind === 'page' ? this.hash(node.parent, hasher) : null,
      adapterDigest: adapterDigestOf(this.#tenantOf(root)),
    };
  }

  removed(node: ChainNode, hasher: PrefixHasher): KvEvent {
    return { type: 'BlockRemoved', tenant: this.tenantTag(node, hasher), blockHash: this.hash(node, hasher) };
  }
}
