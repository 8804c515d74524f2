// The room a listening node keeps for accepted connections that have not authenticated yet: who
// is in it (oldest first, per source address) and whom to close when it is over a cap.
// Owns: the order, the counts, the choice of victims. PeerTransport closes them and logs.
// Must never: hold an authenticated connection (it leaves the room the moment it proves the
// secret, and is never counted or chosen again), or choose a connection outside the room.
//
// Why close the oldest instead of refusing the newest: before authentication a cluster peer
// and a stranger from the same address look alike. Refusing newcomers at a full cap refuses a
// peer that dials while strangers from its address hold the room (a router's dial during a
// flood from its host: 502 for every request). Closing the oldest gives every newcomer its
// chance, and a peer needs one round trip to leave the room. Among the oldest, a connection that
// has said nothing goes before one that sent its Hello (a peer's Hello is on the wire before
// the node reads it; a silent stranger has nothing to offer).

export interface PreauthCaps {
  /** Connections in the room at most, from all sources. */
  readonly total: number;
  /** From one source address. */
  readonly perSource: number;
}

export type CapKind = 'node-cap' | 'source-cap';

export class PreauthRoom<C> {
  /** Oldest first (Map order). */
  readonly #all = new Map<C, string>();
  readonly #bySource = new Map<string, Set<C>>();
  /** Whether c has sent its Hello (it goes after the silent ones). */
  readonly #greeted: (c: C) => boolean;

  constructor(greeted: (c: C) => boolean) {
    this.#greeted = greeted;
  }

  get size(): number {
    return this.#all.size;
  }

  members(): IterableIterator<C> {
    return this.#all.keys();
  }

  sourceOf(c: C): string | undefined {
    return this.#all.get(c);
  }

  fromSource(source: string): number {
    return this.#bySource.get(source)?.size ?? 0;
  }

  enter(c: C, source: string): void {
    this.#all.set(c, source);
    let set = this.#bySource.get(source);
    if (set === undefined) this.#bySource.set(source, (set = new Set()));
    set.add(c);
  }

  /** c authenticated or closed. True if it was in the room. */
  leave(c: C): boolean {
    const source = this.#all.get(c);
    if (source === undefined) return false;
    this.#all.delete(c);
    const set = this.#bySource.get(source);
    set?.delete(c);
    if (set?.size === 0) this.#bySource.delete(source);
    return true;
  }

  /**
   * Whom to close so that the room is within `caps`: per source first (a source over its cap pays
   * with its own connections), then the node. Each: the oldest silent one, else the oldest.
   */
  over(caps: PreauthCaps): { readonly c: C; readonly kind: CapKind }[] {
    const out: { c: C; kind: CapKind }[] = [];
    const chosen = new Set<C>();
    for (const set of this.#bySource.values()) {
      const excess = set.size - caps.perSource;
      for (const c of this.#victims(set, excess, chosen)) out.push({ c, kind: 'source-cap' });
    }
    const excess = this.#all.size - chosen.size - caps.total;
    for (const c of this.#victims(this.#all.keys(), excess, chosen)) out.push({ c, kind: 'node-cap' });
    return out;
  }

  /** Up to `count` of `from` (oldest first) not yet chosen: silent ones first. Adds them to `chosen`. */
  #victims(from: Iterable<C>, count: number, chosen: Set<C>): C[] {
    if (count <= 0) return [];
    const candidates = [...from].filter((c) => !chosen.has(c));
    const silentFirst = [...candidates.filter((c) => !this.#greeted(c)), ...candidates.filter((c) => this.#greeted(c))];
    const victims = silentFirst.slice(0, count);
    for (const c of victims) chosen.add(c);
    return victims;
  }
}
