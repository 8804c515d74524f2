// Branded ids. One word per concept (see DESIGN.md): a request is a `rid`, a page a `PageId`.
// Brands stop a PageId being passed where an epoch is expected, at no run-time cost.

declare const brand: unique symbol;
type Brand<T, B extends string> = T & { readonly [brand]: B };

/** The id of one request across router, prefill and decode ("room" in SGLang). */
export type RequestId = Brand<string, 'RequestId'>;
/** Who a request belongs to; derived server-side from the API key, never from the body. */
export type TenantId = Brand<string, 'TenantId'>;
/** Index of a page in a pool: the same index addresses it in every layer's K and V. */
export type PageId = Brand<number, 'PageId'>;
/** Bumped every time the ledger hands a page to a new owner. Never reused for one page. */
export type Epoch = Brand<number, 'Epoch'>;

export const asRequestId = (s: string): RequestId => s as RequestId;
export const asTenantId = (s: string): TenantId => s as TenantId;
export const asPageId = (n: number): PageId => n as PageId;
export const asEpoch = (n: number): Epoch => n as Epoch;

/** The tenant of requests on a server started without --api-keys. */
export const DEFAULT_TENANT = asTenantId('default');

/**
 * A tag names one page *in one epoch*: what a request's page table and every transfer
 * frame carry. A tag whose epoch is not the ledger's current epoch for that page is stale.
 */
export interface Tag {
  readonly page: PageId;
  readonly epoch: Epoch;
}
