// PrefixTree: the prefix cache's radix tree and its indexes, as structure alone. prefix-cache.ts
// decides what a node's page means (the ledger's cached state, readers, LRU, spill, leases,
// events); this file only files nodes, finds them and names their paths.
// Owns: the roots (one per tenant, or the one root of share-prefix-across-tenants), the node of
// each cached page, the index by (root, path hash), and each node's path hash.
// Must never: touch the ledger, the pool or a store, file a node under a root other than its
// parent's, or keep an empty root.
//
//   roots: tenant -> root                       each edge is one full page of token ids
//     t1 -> ( [1,2,3,4] -> page 0 -> ( [5,6,7,8] -> page 1 ,  [9,9,9,9] -> page 5 ) )
//     t2 -> ( [1,2,3,4] -> page 7 )            same tokens, other tenant: its own page
import { assert, type PageId, type Tag, type TenantId } from '../core/index.js';
import { nextPathHash, ROOT_PATH_HASH } from './spill-tier.js';

const EVERY_TENANT = Symbol('every tenant');
type RootKey = TenantId | typeof EVERY_TENANT;

export interface Root {
  readonly kind: 'root';
  readonly key: RootKey;
  readonly children: Map<string, PageNode>;
}

export interface PageNode {
  readonly kind: 'page';
  /** The page's token ids, joined with ','. */
  readonly key: string;
  readonly tag: Tag;
  readonly parent: Root | PageNode;
  readonly children: Map<string, PageNode>;
  /** The cache's logical clock at the last match or insert through this node. */
  lastUsed: number;
  /** The hash of every token id from the root to this page (spill-tier.ts), once asked for. */
  pathHash?: string;
}

export class PrefixTree {
  readonly #pageSize: number;
  readonly #shareAcrossTenants: boolean;
  readonly #roots = new Map<RootKey, Root>();
  readonly #nodes = new Map<PageId, PageNode>();
  /** Every node by (root, path hash): how a peer's fetch finds pages. */
  readonly #byPath = new Map<string, PageNode>();

  /** `shareAcrossTenants`: the fault share-prefix-across-tenants (one root for every tenant). */
  constructor(pageSize: number, shareAcrossTenants: boolean) {
    this.#pageSize = pageSize;
    this.#shareAcrossTenants = shareAcrossTenants;
  }

  /** Nodes (cached pages) in the tree. */
  get size(): number {
    return this.#nodes.size;
  }

  nodes(): IterableIterator<PageNode> {
    return this.#nodes.values();
  }

  roots(): IterableIterator<Root> {
    return this.#roots.values();
  }

  has(page: PageId): boolean {
    return this.#nodes.has(page);
  }

  /** The tenant a root stands for: "*" for the one root of share-prefix-across-tenants. */
  tenantOf(root: Root): string {
    return root.key === EVERY_TENANT ? '*' : root.key;
  }

  /** tenant's root, made on first use (drop it again with dropIfEmpty when nothing was filed). */
  rootFor(tenant: TenantId): Root {
    const key = this.#rootKey(tenant);
    let root = this.#roots.get(key);
    if (root === undefined) {
      root = { kind: 'root', key, children: new Map() };
      this.#roots.set(key, root);
    }
    return root;
  }

  /** Whether tenant's pages may sit under root: its own root, or the one root of every tenant. */
  admits(root: Root, tenant: TenantId): boolean {
    return root.key === EVERY_TENANT || root.key === tenant;
  }

  dropIfEmpty(root: Root): void {
    if (root.children.size === 0) this.#roots.delete(root.key);
  }

  /** The nodes of the first full pages of `tokens` under tenant's root, from the first, up to `numPages` or the first page not in the tree. */
  path(tenant: TenantId, tokens: readonly number[], numPages: number): PageNode[] {
    const nodes: PageNode[] = [];
    let parent: Root | PageNode | undefined = this.#roots.get(this.#rootKey(tenant));
    for (let i = 0; parent !== undefined && i < numPages; i++) {
      const child: PageNode | undefined = parent.children.get(this.pageKey(tokens, i));
      if (child !== undefined) nodes.push(child);
      parent = child;
    }
    return nodes;
  }

  /** The node of tenant's page at `pathHash`; `anyTenant` (the fault prefix-key-without-tenant): in whichever root holds one. */
  byPath(tenant: TenantId, pathHash: string, anyTenant = false): PageNode | undefined {
    return anyTenant
      ? [...this.#roots.keys()].map((k) => this.#byPath.get(this.#pathKey(k, pathHash))).find((n) => n !== undefined)
      : this.#byPath.get(this.#pathKey(this.#rootKey(tenant), pathHash));
  }

  /** Files a new node under its parent and in both indexes; returns its path key (pathKeyOf). */
  add(node: PageNode): string {
    node.parent.children.set(node.key, node);
    this.#nodes.set(node.tag.page, node);
    const pathKey = this.pathKeyOf(node);
    this.#byPath.set(pathKey, node);
    return pathKey;
  }

  /** Takes a leaf out of its parent and both indexes, and drops its root if that emptied it. */
  remove(node: PageNode): void {
    const pathKey = this.pathKeyOf(node);
    node.parent.children.delete(node.key);
    this.#nodes.delete(node.tag.page);
    this.#byPath.delete(pathKey);
    if (node.parent.kind === 'root') this.dropIfEmpty(node.parent);
  }

  rootOf(node: PageNode): Root {
    let at: Root | PageNode = node;
    while (at.kind === 'page') at = at.parent;
    return at;
  }

  /** node's (root, path hash) key: the same page of the same root's tree has the same key across evictions. */
  pathKeyOf(node: PageNode): string {
    return this.#pathKey(this.rootOf(node).key, this.pathHashOf(node));
  }

  pathHashOf(node: PageNode): string {
    if (node.pathHash === undefined) {
      const parentHash = node.parent.kind === 'root' ? ROOT_PATH_HASH : this.pathHashOf(node.parent);
      node.pathHash = nextPathHash(parentHash, node.key);
    }
    return node.pathHash;
  }

  /** The key of full page `pageIndex` of `tokens`: its token ids, exact (no hash that could collide). */
  pageKey(tokens: readonly number[], pageIndex: number): string {
    return tokens.slice(pageIndex * this.#pageSize, (pageIndex + 1) * this.#pageSize).join(',');
  }

  /**
   * The structure holds together: no empty root, each node filed under its own key and parent
   * and in both indexes. `checkNode` adds the caller's checks of each node, in the walk.
   * Throws InvariantError.
   */
  checkIntegrity(checkNode: (node: PageNode, root: Root) => void): void {
    let numNodes = 0;
    for (const root of this.#roots.values()) {
      assert(root.children.size > 0, () => `prefix cache keeps an empty root for ${String(root.key)}`);
      const stack: (Root | PageNode)[] = [root];
      for (let parent = stack.pop(); parent !== undefined; parent = stack.pop()) {
        for (const [key, node] of parent.children) {
          const where = `prefix cache page ${node.tag.page}`;
          assert(node.key === key && node.parent === parent, () => `${where} is filed under the wrong key or parent`);
          assert(this.#nodes.get(node.tag.page) === node, () => `${where} is missing from the page index`);
          checkNode(node, root);
          numNodes++;
          stack.push(node);
        }
      }
    }
    assert(
      numNodes === this.#nodes.size,
      () => `prefix cache tree holds ${numNodes} pages, its index ${this.#nodes.size}`,
    );
    assert(
      this.#byPath.size === numNodes,
      () => `the path index holds ${this.#byPath.size} pages, the tree ${numNodes}`,
    );
  }

  #rootKey(tenant: TenantId): RootKey {
    return this.#shareAcrossTenants ? EVERY_TENANT : tenant;
  }

  #pathKey(root: RootKey, pathHash: string): string {
    return `${root === EVERY_TENANT ? '\u0000*' : root}\n${pathHash}`;
  }
}
