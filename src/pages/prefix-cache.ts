// PrefixCache: a radix tree over token ids at page granularity, scoped by tenant, so a new
// request can reuse the KV pages of a prompt prefix its own tenant computed before.
// Owns: what the tree's pages mean (cached in the ledger, referenced by readers), LRU order, the
// spill and lease pins; the tree itself (roots, nodes, path index) is prefix-tree.ts's.
// Must never: share a page between tenants (the tenant is the first key of every path),
// cache a page that is not full and stamped for its epoch, or evict a page someone reads.
//
// Keys are the exact token ids (joined), not hashes: a hash collision would hand one
// prompt's KV to another. Only leaves are evicted (a child's KV is only valid after its
// parent's), least recently used first, ties by page id. Every reader of a page also reads
// its parent (match takes the whole path), so an unreferenced subtree is wholly evictable.
//
// The fault `share-prefix-across-tenants` drops the tenant from the key (one root for all):
// the negative control for the tenant-scoping tests. The ledger still refuses a reference
// across tenants, so with the fault on, a cross-tenant hit throws InvariantError.
//
// With a spill store (spill-tier.ts), evict() hands each evicted page's bytes to the store, and
// match() continues past its last cached page by loading the next pages from the store into
// fresh pages (allocated to the reader, written, stamped, then cached and referenced like any
// cached page). The pages a match already holds are referenced before it allocates, so the
// eviction an allocation may trigger never takes them. With the spill's hasher, each page goes
// with its keyed tenant tag and block hash, so the store reports it even after a restart.
//
// For the cluster-wide store (transfer/prefix-fetch-*.ts) the cache also finds a page by its
// tenant and path hash (an index kept beside the tree), leases a run of pages to a peer's read
// (lease.ts: pinned pages are never evicted), and adopts pages fetched from a peer as cached
// pages of the reader's tenant, written like pages loaded from the spill store.
import { assert, NO_FAULTS, type FaultSet, type PageId, type Tag, type TenantId } from '../core/index.js';
import type { PageLedger } from './ledger.js';
import { MinHeap } from './min-heap.js';
import { PrefixTree, type PageNode, type Root } from './prefix-tree.js';
import type { PrefixHasher } from './prefix-hash.js';
import type { KvEventSink } from './kv-events.js';
import { BlockHashes } from './block-hashes.js';
import { describeEntry, describeOwner, type AllocateResult, type Owner } from './page-entry.js';
import type { PagePool } from './pool.js';
import {
  nextPathHash,
  PageSpill,
  ROOT_PATH_HASH,
  writeFreshPage,
  type KvSpill,
  type SpillRouteHint,
} from './spill-tier.js';
import { PageLease, type LeasedPage } from './lease.js';

/** Most evicted-and-spilled pages the block-hash report remembers (so routing counts the disk tier). */
const MAX_SPILLED_REPORTED = 8192;

export interface PrefixMatch {
  /** Cached pages holding tokens [0, numTokens), in order; the reader now holds a reference to each. */
  readonly tags: readonly Tag[];
  readonly numTokens: number;
}

export interface PrefixCacheOptions {
  readonly pool: PagePool;
  readonly faults?: FaultSet;
  /** Where evicted pages go, and where match looks after its last cached page. */
  readonly spill?: KvSpill;
  /** KV events (kv-events.ts): BlockStored per page cached, BlockRemoved per page evicted. */
  readonly events?: KvEventSink;
}

export class PrefixCache {
  readonly #pool: PagePool;
  readonly #ledger: PageLedger;
  readonly #pageSize: number;
  readonly #spill: PageSpill | undefined;
  readonly #tree: PrefixTree;
  /** Pages leased to a peer's read (lease.ts), with how many leases hold each: never evicted. */
  readonly #pins = new Map<PageId, number>();
  /** Nodes evicted into the spill store, by (root, path hash), oldest first: the report's disk-tier pages. */
  readonly #spilled = new Map<string, PageNode>();
  /** Each cached page's block hash, per hasher that asked (blockHashReport, events). */
  readonly #hashes = new BlockHashes((root) => this.#tree.tenantOf(root as Root));
  readonly #events: KvEventSink | undefined;
  #clock = 0;
  /** Prompt tokens looked up, and of those found cached, over every match (the hit rate a router reads). */
  #lookupTokens = 0;
  #hitTokens = 0;

  constructor(options: PrefixCacheOptions) {
    this.#pool = options.pool;
    this.#ledger = options.pool.ledger;
    this.#pageSize = options.pool.pageSize;
    this.#tree = new PrefixTree(this.#pageSize, (options.faults ?? NO_FAULTS).has('share-prefix-across-tenants'));
    this.#spill = options.spill === undefined ? undefined : new PageSpill(options.pool, options.spill, options.faults);
    this.#events = options.events;
  }

  /** Pages the cache holds. */
  get numPages(): number {
    return this.#tree.size;
  }

  /**
   * The longest cached run of full pages that starts `tokens`, for reader's tenant; takes a
   * reference to each page for reader. Pass the prompt without its last token: the step still
   * needs at least one token to compute, to get logits.
   */
  match(reader: Owner, tokens: readonly number[]): PrefixMatch {
    this.#lookupTokens += tokens.length;
    const numFull = Math.floor(tokens.length / this.#pageSize);
    const nodes = this.#tree.path(reader.tenant, tokens, numFull);
    this.#ledger.ref(
      nodes.map((node) => node.tag),
      reader,
    );
    if (this.#spill !== undefined && nodes.length < numFull) this.#load(this.#spill, reader, tokens, nodes, numFull);
    if (nodes.length === 0) return { tags: [], numTokens: 0 };
    const tags = nodes.map((node) => node.tag);
    this.#hitTokens += tags.length * this.#pageSize;
    const now = ++this.#clock;
    for (const node of nodes) node.lastUsed = now;
    return { tags, numTokens: tags.length * this.#pageSize };
  }

  /** Appends to `nodes` the pages after them that the spill store holds, loaded, cached and referenced by reader. */
  #load(spill: PageSpill, reader: Owner, tokens: readonly number[], nodes: PageNode[], numFull: number): void {
    let hash = nodes.length === 0 ? ROOT_PATH_HASH : this.#tree.pathHashOf(nodes[nodes.length - 1] as PageNode);
    for (let i = nodes.length; i < numFull; i++) {
      const key = this.#tree.pageKey(tokens, i);
      hash = nextPathHash(hash, key);
      const tag = spill.load(reader, hash, (n, owner) => this.allocate(n, owner));
      if (tag === undefined) return;
      // The root is looked up after the allocation: an eviction may have emptied and dropped it.
      const parent = nodes[nodes.length - 1] ?? this.#tree.rootFor(reader.tenant);
      this.#ledger.cache([tag], reader);
      const node: PageNode = { kind: 'page', key, tag, parent, children: new Map(), lastUsed: 0, pathHash: hash };
      this.#addNode(node);
      this.#ledger.ref([tag], reader);
      nodes.push(node);
    }
  }

  /** Files a new node in the tree and its indexes (no longer a spilled page); publishes BlockStored. */
  #addNode(node: PageNode): void {
    this.#spilled.delete(this.#tree.add(node));
    this.#stored(node);
  }

  /**
   * A request is done: `tags` is its whole page table, holding `tokens` (only tokens whose KV
   * was written). Full, stamped pages not yet cached move into the cache; everything else is
   * let go (duplicates and the partial tail freed, references dropped). Afterwards the request
   * holds no page. Returns how many pages were newly cached.
   */
  insert(owner: Owner, tokens: readonly number[], tags: readonly Tag[]): number {
    this.#assertHeldBy(owner, tags);
    const now = ++this.#clock;
    const root = this.#tree.rootFor(owner.tenant);
    let parent: Root | PageNode = root;
    let numCached = 0;
    let i = 0;
    for (; i < Math.min(Math.floor(tokens.length / this.#pageSize), tags.length); i++) {
      const tag = tags[i] as Tag;
      const key = this.#tree.pageKey(tokens, i);
      const existing: PageNode | undefined = parent.children.get(key);
      if (existing !== undefined) {
        // Cached already: our own matched reference (dropped here) or a duplicate we computed (freed).
        this.#ledger.relinquish([tag], owner);
        existing.lastUsed = now;
        parent = existing;
        continue;
      }
      // Not full of this epoch's data, or a cached page that belongs elsewhere: stop caching here.
      if (this.#ledger.entry(tag.page).state !== 'allocated' || !this.#pool.isWritten(tag, this.#pageSize)) break;
      this.#ledger.cache([tag], owner);
      const node: PageNode = { kind: 'page', key, tag, parent, children: new Map(), lastUsed: now };
      this.#addNode(node);
      numCached++;
      parent = node;
    }
    this.#ledger.relinquish(tags.slice(i), owner);
    this.#tree.dropIfEmpty(root);
    return numCached;
  }

  /** Tokens looked up by match() and tokens it found cached, since the start. */
  lookupStats(): { readonly lookupTokens: number; readonly hitTokens: number } {
    return { lookupTokens: this.#lookupTokens, hitTokens: this.#hitTokens };
  }

  /**
   * Per tenant tag, the chained block hash (prefix-hash.ts) of every cached page, most recently
   * used first, at most `limit` in all: what a router routes on. Under share-prefix-across-tenants
   * the one shared root reports as tenant "*". A page's hash is computed once per hasher (pages
   * do not move in the tree), so a report costs a walk, not a keyed hash per cached page.
   */
  blockHashReport(limit: number, hasher: PrefixHasher): Map<string, string[]> {
    const all: { tag: string; hash: string; lastUsed: number }[] = [];
    for (const root of this.#tree.roots()) {
      const tag = hasher.tenantTag(this.#tree.tenantOf(root));
      const seed = hasher.seed(tag);
      const walk = (node: Root | PageNode): void => {
        for (const child of node.children.values()) {
          all.push({ tag, hash: this.#hashes.hash(child, hasher, seed), lastUsed: child.lastUsed });
          walk(child);
        }
      };
      walk(root);
    }
    // Pages evicted into the spill store count too (a later match loads them): routing sees every tier.
    for (const [pathKey, node] of this.#spilled) {
      const tenant = this.#tree.tenantOf(this.#tree.rootOf(node));
      if (this.#spill === undefined || !this.#spill.has(tenant as TenantId, this.#tree.pathHashOf(node))) {
        this.#spilled.delete(pathKey);
        continue;
      }
      all.push({ tag: hasher.tenantTag(tenant), hash: this.#hashes.hash(node, hasher), lastUsed: node.lastUsed });
    }
    // And what the store holds with a route of this hasher's key: pages found on disk at start-up
    // (least recent: after every page this process used; the sort is stable).
    for (const { tenantTag, blockHash } of this.#spill?.routes(hasher, limit) ?? [])
      all.push({ tag: tenantTag, hash: blockHash, lastUsed: 0 });
    all.sort((a, b) => b.lastUsed - a.lastUsed);
    const out = new Map<string, string[]>();
    const seen = new Set<string>();
    for (const { tag, hash } of all) {
      if (seen.size >= limit) break;
      const key = `${tag}|${hash}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const hashes = out.get(tag);
      if (hashes === undefined) out.set(tag, [hash]);
      else hashes.push(hash);
    }
    return out;
  }

  /** How the spill names node's page in a report (computed when the store takes it), when it has a hasher. */
  #hintOf(spill: PageSpill, node: PageNode): (() => SpillRouteHint) | undefined {
    const hasher = spill.hasher;
    if (hasher === undefined) return undefined;
    return () => ({ tenantTag: this.#hashes.tenantTag(node, hasher), blockHash: this.#hashes.hash(node, hasher) });
  }

  /** Frees up to numPages unreferenced pages, least recently used leaves first; returns them in eviction order. */
  evict(numPages: number): PageId[] {
    assert(Number.isSafeInteger(numPages) && numPages >= 0, () => `evict: ${numPages} pages`);
    const evicted: PageId[] = [];
    if (numPages === 0) return evicted;
    const heap = new MinHeap<PageNode>(
      (a, b) => a.lastUsed < b.lastUsed || (a.lastUsed === b.lastUsed && a.tag.page < b.tag.page),
    );
    for (const node of this.#tree.nodes()) if (this.#isEvictableLeaf(node)) heap.push(node);
    while (evicted.length < numPages) {
      const node = heap.pop();
      if (node === undefined) break;
      const e = this.#ledger.entry(node.tag.page);
      if (this.#spill !== undefined && e.state === 'cached') {
        this.#spill.spill(e.tenant, this.#tree.pathHashOf(node), e.page, this.#hintOf(this.#spill, node));
        this.#spilled.set(this.#tree.pathKeyOf(node), node);
        if (this.#spilled.size > MAX_SPILLED_REPORTED)
          this.#spilled.delete(this.#spilled.keys().next().value as string);
      }
      this.#removed(node);
      this.#ledger.uncache([node.tag]);
      this.#tree.remove(node); // and its root, when that leaves it empty
      evicted.push(node.tag.page);
      const parent = node.parent;
      if (parent.kind === 'page' && this.#isEvictableLeaf(parent)) heap.push(parent);
    }
    return evicted;
  }

  /**
   * Hands every cached page the spill store lacks to it, pages staying cached (at shutdown, so
   * a restart finds the hot prefixes too). Returns how many pages it offered; 0 without a store.
   */
  spillAll(): number {
    if (this.#spill === undefined) return 0;
    for (const node of this.#tree.nodes()) {
      const e = this.#ledger.entry(node.tag.page);
      if (e.state === 'cached')
        this.#spill.spill(e.tenant, this.#tree.pathHashOf(node), e.page, this.#hintOf(this.#spill, node));
    }
    return this.#tree.size;
  }

  /**
   * Full pages of tokens, from the first, that this node could serve tenant without computing:
   * cached in the pool, then (continuing the run) held by the spill store. Takes nothing.
   */
  localRun(tenant: TenantId, tokens: readonly number[]): number {
    const numFull = Math.floor(tokens.length / this.#pageSize);
    const cached = this.#tree.path(tenant, tokens, numFull);
    let n = cached.length;
    let hash = n === 0 ? ROOT_PATH_HASH : this.#tree.pathHashOf(cached[n - 1] as PageNode);
    for (; this.#spill !== undefined && n < numFull; n++) {
      hash = nextPathHash(hash, this.#tree.pageKey(tokens, n));
      if (!this.#spill.has(tenant, hash)) break;
    }
    return n;
  }

  /**
   * A lease on the leading run of `pathHashes` this node holds for tenant (pool pages pinned,
   * disk-tier pages copied out after the tier's checks); stops at the first page it lacks.
   * `pin` false (the fault ignore-prefix-lease): nothing is pinned, reads are unchecked.
   * `anyTenant` (the fault prefix-key-without-tenant): pool pages are looked up by path hash
   * alone, in whichever tenant's tree holds one.
   */
  lease(tenant: TenantId, pathHashes: readonly string[], pin = true, anyTenant = false): PageLease {
    const pages: LeasedPage[] = [];
    for (const pathHash of pathHashes) {
      const node = this.#tree.byPath(tenant, pathHash, anyTenant);
      if (node !== undefined) {
        pages.push({ pathHash, source: 'pool', tag: node.tag });
        continue;
      }
      const bytes = this.#spill?.copyOut(tenant, pathHash);
      if (bytes === undefined) break;
      pages.push({ pathHash, source: 'disk', bytes });
    }
    const tags = pages.flatMap((p) => (p.source === 'pool' ? [p.tag] : []));
    if (pin) for (const tag of tags) this.#pins.set(tag.page, (this.#pins.get(tag.page) ?? 0) + 1);
    return new PageLease(
      pages,
      {
        read: (tag, checked) => {
          if (checked) {
            const e = this.#ledger.entry(tag.page);
            if (e.state !== 'cached' || e.epoch !== tag.epoch || !this.#pool.isWritten(tag, this.#pageSize))
              return undefined;
          }
          return this.#pool.gatherSlots(tag.page, 0, this.#pageSize);
        },
        unpin: (unpinned) => {
          for (const tag of unpinned) {
            const n = this.#pins.get(tag.page) ?? 0;
            assert(n > 0, () => `prefix cache: unpin of page ${tag.page}, which no lease pins`);
            if (n === 1) this.#pins.delete(tag.page);
            else this.#pins.set(tag.page, n - 1);
          }
        },
      },
      pin,
    );
  }

  /** Pages pinned by open leases (lease()). */
  get numPinned(): number {
    return this.#pins.size;
  }

  /**
   * Installs pages fetched from a peer: `pages[j]` holds full page firstPage + j of tokens for
   * owner's tenant. They attach after the cached run (pages [0, firstPage) must be cached or
   * loadable from the spill store; else nothing is installed) and are written into fresh pages,
   * stamped full and cached like any computed page; pages cached meanwhile are kept, not
   * rewritten. Afterwards owner holds no page. Returns how many pages were installed.
   */
  adopt(owner: Owner, tokens: readonly number[], firstPage: number, pages: readonly Uint8Array[]): number {
    const end = Math.min(firstPage + pages.length, Math.floor(tokens.length / this.#pageSize));
    const nodes = this.#tree.path(owner.tenant, tokens, end);
    this.#ledger.ref(
      nodes.map((node) => node.tag),
      owner,
    );
    if (this.#spill !== undefined && nodes.length < firstPage) this.#load(this.#spill, owner, tokens, nodes, firstPage);
    let installed = 0;
    if (nodes.length >= firstPage) {
      let hash = nodes.length === 0 ? ROOT_PATH_HASH : this.#tree.pathHashOf(nodes[nodes.length - 1] as PageNode);
      const now = ++this.#clock;
      for (let i = nodes.length; i < end; i++) {
        const key = this.#tree.pageKey(tokens, i);
        hash = nextPathHash(hash, key);
        const tag = writeFreshPage(this.#pool, owner, pages[i - firstPage] as Uint8Array, (n, o) =>
          this.allocate(n, o),
        );
        if (tag === undefined) break;
        // The root is looked up after the allocation: an eviction may have emptied and dropped it.
        const parentNode = nodes[nodes.length - 1] ?? this.#tree.rootFor(owner.tenant);
        this.#ledger.cache([tag], owner);
        const node: PageNode = {
          kind: 'page',
          key,
          tag,
          parent: parentNode,
          children: new Map(),
          lastUsed: now,
          pathHash: hash,
        };
        this.#addNode(node);
        this.#ledger.ref([tag], owner);
        nodes.push(node);
        installed++;
      }
    }
    this.#ledger.relinquish(
      nodes.map((node) => node.tag),
      owner,
    );
    return installed;
  }

  /** Pages evict() could free now: those with no reader in their subtree. */
  numEvictable(): number {
    const pinned = new Set<PageNode>();
    for (const node of this.#tree.nodes()) {
      if (this.#numReaders(node) === 0 && !this.#pins.has(node.tag.page)) continue;
      for (let n: Root | PageNode = node; n.kind === 'page' && !pinned.has(n); n = n.parent) pinned.add(n);
    }
    return this.#tree.size - pinned.size;
  }

  /** ledger.allocate, evicting just enough cached pages first when that makes the allocation fit. */
  allocate(numPages: number, owner: Owner): AllocateResult {
    const shortfall = numPages - this.#ledger.numFree;
    if (shortfall > 0 && shortfall <= this.numEvictable()) this.evict(shortfall);
    return this.#ledger.allocate(numPages, owner);
  }

  /**
   * The tree holds together (prefix-tree.ts's check) and agrees with the ledger: every node's
   * page is cached in the node's epoch for the root's tenant, full and stamped; every cached page
   * has one node; a child's readers all read its parent; every pinned page is cached. Throws
   * InvariantError.
   */
  checkIntegrity(): void {
    this.#tree.checkIntegrity((node, root) => {
      const e = this.#ledger.entry(node.tag.page);
      const where = `prefix cache page ${node.tag.page}`;
      assert(
        e.state === 'cached' && e.epoch === node.tag.epoch,
        () => `${where} (epoch ${node.tag.epoch}) is ${describeEntry(e)}`,
      );
      assert(
        e.state === 'cached' && this.#tree.admits(root, e.tenant),
        () => `${where} sits under tenant ${this.#tree.tenantOf(root)} but is ${describeEntry(e)}`,
      );
      assert(
        this.#pool.isWritten(node.tag, this.#pageSize),
        () => `${where} is not stamped full in epoch ${node.tag.epoch}`,
      );
      const parent = node.parent;
      if (parent.kind === 'page') {
        const parentEntry = this.#ledger.entry(parent.tag.page);
        const parentReaders = parentEntry.state === 'cached' ? parentEntry.readers : [];
        assert(
          e.state === 'cached' && e.readers.every((rid) => parentReaders.includes(rid)),
          () => `${where} has a reader that does not read its parent page ${parent.tag.page}`,
        );
      }
    });
    const numCached = this.#ledger.counts().cached;
    assert(
      numCached === this.#tree.size,
      () => `ledger has ${numCached} cached pages, the prefix cache ${this.#tree.size}`,
    );
    for (const page of this.#pins.keys())
      assert(this.#tree.has(page), () => `prefix cache page ${page} is pinned by a lease but not cached`);
  }

  #stored(node: PageNode): void {
    if (this.#events !== undefined) this.#events.publish(this.#hashes.stored(node, this.#events.hasher));
  }

  #removed(node: PageNode): void {
    if (this.#events !== undefined) this.#events.publish(this.#hashes.removed(node, this.#events.hasher));
  }

  #numReaders(node: PageNode): number {
    const e = this.#ledger.entry(node.tag.page);
    assert(e.state === 'cached', () => `prefix cache page ${node.tag.page} is ${describeEntry(e)}`);
    return e.readers.length;
  }

  #isEvictableLeaf(node: PageNode): boolean {
    return node.children.size === 0 && this.#numReaders(node) === 0 && !this.#pins.has(node.tag.page);
  }

  /** Validates up front, so a misuse changes nothing: each tag once, each allocated to or referenced by owner. */
  #assertHeldBy(owner: Owner, tags: readonly Tag[]): void {
    const seen = new Set<number>();
    for (const tag of tags) {
      assert(!seen.has(tag.page), () => `insert: page ${tag.page} appears twice`);
      seen.add(tag.page);
      const e = this.#ledger.entry(tag.page);
      const held =
        e.epoch === tag.epoch &&
        ((e.state === 'allocated' && e.rid === owner.rid && e.tenant === owner.tenant) ||
          (e.state === 'cached' && e.tenant === owner.tenant && e.readers.includes(owner.rid)));
      assert(
        held,
        () =>
          `insert: page ${tag.page} (epoch ${tag.epoch}) is not held by ${describeOwner(owner)}; it is ${describeEntry(e)}`,
      );
    }
  }
}
