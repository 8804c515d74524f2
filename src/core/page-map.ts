// The page map: a point-in-time snapshot of one node's pool (every page's state, owner and epoch),
// its transfers in flight, its quarantined pages and why, and its step-loop counters; and the
// router's cluster-wide view over its workers' snapshots. The contract between a back end
// (`Backend.pageMap()`), the router (which fetches its workers' maps) and the operator's
// /dashboard. Types only: it exposes which tenant owns which page, so src/api serves it only to
// the admin key. Must never carry page data, stamps' contents or prompts.

/** One letter per page state: free, allocated, cached, quarantined (src/pages' PAGE_STATES, in order). */
export type PageLetter = 'f' | 'a' | 'c' | 'q';

/** Who holds a page: the request (absent for a cached page, held by its tenant) and the tenant. */
export interface PageHolder {
  readonly tenant: string;
  readonly rid: string | null;
}

/** A transfer this node takes part in, as its own protocol machine sees it. */
export interface TransferView {
  readonly rid: string;
  readonly tenant: string;
  /** The machine's state (decode: AwaitingKv, Receiving, Aborting; prefill: Computing, AwaitingAck, Aborting). */
  readonly phase: string;
  /** The other end: the prefill that writes (on decode), the decode written to (on prefill). */
  readonly peer: string;
  readonly numPages: number;
  readonly numTokens: number;
  /** KV payload bytes moved so far (decode: landed and verified; prefill: sent). */
  readonly bytes: number;
}

/** Pages a peer may still write, held until its AbortAck or its connection closes. */
export interface QuarantineView {
  readonly rid: string;
  readonly tenant: string;
  readonly numPages: number;
  readonly reason: string;
  /** Whose AbortAck (or connection close) releases them. */
  readonly waitingFor: string;
}

/** Cumulative step-loop counters; the dashboard's charts are their differences over time. */
export interface LoopCounters {
  readonly numSteps: number;
  readonly numTokensSampled: number;
  /** Wall time spent inside steps, summed. */
  readonly stepMsTotal: number;
  /** Batch items stepped, summed (a step's batch size is its share). */
  readonly numItemsStepped: number;
}

/** One cache tier of a node (its pool's prefix cache, its disk tier, its peer fetches): the dashboard's tier table. */
export interface TierView {
  readonly name: 'pool' | 'disk' | 'peer';
  /** Pages the tier holds now (peer: pages installed from peers, cumulative). */
  readonly pages: number;
  readonly hits: number;
  readonly misses: number;
  /** Loads refused, by reason (checksum, namespace, truncated, ...); a refusal is also a miss. */
  readonly refused: Readonly<Record<string, number>>;
}

/** Speculative decoding on a node (co-located or decode), cumulative: the dashboard's speculation panel. */
export interface SpeculationView {
  /** Where drafts come from: the request's own text (prompt lookup) or a draft model. */
  readonly drafter: 'lookup' | 'model';
  readonly drafted: number;
  readonly accepted: number;
  /** Rejected positions whose stamps were rolled back (the target's pool). */
  readonly rolledBack: number;
  /** A draft model's own pool: pages held of all, and whether it is paused (not paying). */
  readonly draftPool?: { readonly pagesHeld: number; readonly numPages: number; readonly paused: boolean };
}

/** One node's pool and work, from its back end. */
export interface NodePageMap {
  readonly kind: 'node';
  readonly role: 'colocated' | 'prefill' | 'decode';
  /** The node's cluster address, or "colocated". */
  readonly node: string;
  readonly pageSize: number;
  readonly numPages: number;
  /** `numPages` letters, page 0 first. */
  readonly states: string;
  /** Each page's epoch (the allocation that last handed it out; 0: never allocated). */
  readonly epochs: readonly number[];
  /** Each page's holder as an index into `holders`; null for a free page. */
  readonly holderOf: readonly (number | null)[];
  readonly holders: readonly PageHolder[];
  readonly transfers: readonly TransferView[];
  readonly quarantined: readonly QuarantineView[];
  readonly running: number;
  readonly waiting: number;
  readonly loop: LoopCounters;
  /** Role-specific totals worth a glance (aborts by phase, checksum failures, ...). */
  readonly totals: Readonly<Record<string, number>>;
  /** The node's cache tiers, in order of lookup (pool, disk, peer); absent on a back end that keeps none. */
  readonly tiers?: readonly TierView[];
  /** Speculative decoding's counts; absent on a node that does not speculate (a prefill). */
  readonly speculation?: SpeculationView;
}

/** A client request the router is relaying: its pair and how far it got. */
export interface PairView {
  readonly rid: string;
  readonly tenant: string;
  readonly phase: string;
  readonly prefill: string;
  readonly decode: string;
  readonly tokensForwarded: number;
}

/** One worker as the router knows it, with its own dashboard view when it answered. */
export interface WorkerMapEntry {
  readonly url: string;
  readonly role: 'prefill' | 'decode';
  readonly state: string;
  readonly view: DashboardView | null;
  readonly error: string | null;
}

/** The router's view: every worker it knows and the pairs in flight. */
export interface ClusterPageMap {
  readonly kind: 'cluster';
  readonly node: string;
  readonly pairs: readonly PairView[];
  readonly workers: readonly WorkerMapEntry[];
}

export type PageMap = NodePageMap | ClusterPageMap;

/** What GET /dashboard/state answers: the back end's map plus what the HTTP front end knows. */
export interface DashboardView {
  readonly atMs: number;
  readonly map: PageMap;
  /** `tessera plan`'s lines for this node (empty on the router). */
  readonly plan: readonly string[];
  /** Generate requests by outcome (success, aborted, or the error code): the failures by code. */
  readonly outcomes: Readonly<Record<string, number>>;
}
