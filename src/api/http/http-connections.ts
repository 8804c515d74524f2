// The open connections of one HTTP listener and their deadlines, as plain bookkeeping: which are
// waiting (no request in progress: fresh, or idle after a response), since when, from where;
// which have run past their bound; which one to close to make room. http-guard.ts owns the
// sockets and the timer and acts on the answers; time and bytes read are arguments here.
// Must never: name a connection with a request in progress as expired or as a victim (a stream
// waiting for its first token is silent, not idle), or grow a per-connection sweep with history.
//
// A connection's life here:
//   opened ──> waiting (fresh) ──head complete──> busy ──response closed──> waiting (idle) ──> ...
//   fresh:  closed at openedAt + headersMs whether or not a byte arrived (and at + idleMs if silent)
//   idle:   closed at idleSince + idleMs if no byte arrived; after its first byte, the next
//           request head is due within headersMs of that byte
//   at the cap: the connection that has waited longest is closed first (per source: its own)

export interface ConnectionBounds {
  /** No byte of a next request for this long after a response (or after opening): closed. */
  readonly idleMs: number;
  /** A request head complete within this of the connection opening, or of its first byte after a response. */
  readonly headersMs: number;
}

export type ExpiryReason = 'idle' | 'headers';

interface Entry {
  readonly source: string;
  /** Requests read and not yet answered (pipelining may queue more than one). */
  inFlight: number;
  /** When it began waiting (opened, or its last response closed); bytes read by then. */
  waitingSinceMs: number;
  bytesAtWait: number;
  /** Whether this wait began at the connection's opening (its head is due from then). */
  fresh: boolean;
  /** When the first byte of the next head was seen (idle connections only). */
  headStartedMs: number | undefined;
}

export class ConnectionTable<C> {
  readonly #bounds: ConnectionBounds;
  readonly #all = new Map<C, Entry>();
  /** Waiting connections, oldest wait first (Map order: re-inserted when a wait begins). */
  readonly #waiting = new Map<C, Entry>();
  /** The same, per source address, oldest first. */
  readonly #waitingBySource = new Map<string, Set<C>>();

  constructor(bounds: ConnectionBounds) {
    this.#bounds = bounds;
  }

  /** Open connections, busy or waiting. */
  get size(): number {
    return this.#all.size;
  }

  waitingFrom(source: string): number {
    return this.#waitingBySource.get(source)?.size ?? 0;
  }

  opened(c: C, source: string, nowMs: number): void {
    const entry: Entry = {
      source,
      inFlight: 0,
      waitingSinceMs: nowMs,
      bytesAtWait: 0,
      fresh: true,
      headStartedMs: undefined,
    };
    this.#all.set(c, entry);
    this.#wait(c, entry);
  }

  closed(c: C): void {
    const entry = this.#all.get(c);
    if (entry === undefined) return;
    this.#all.delete(c);
    this.#unwait(c, entry);
  }

  requestStarted(c: C): void {
    const entry = this.#all.get(c);
    if (entry === undefined) return;
    entry.inFlight++;
    this.#unwait(c, entry);
  }

  requestEnded(c: C, nowMs: number, bytesRead: number): void {
    const entry = this.#all.get(c);
    if (entry === undefined || entry.inFlight === 0) return;
    entry.inFlight--;
    if (entry.inFlight > 0) return;
    entry.waitingSinceMs = nowMs;
    entry.bytesAtWait = bytesRead;
    entry.fresh = false;
    entry.headStartedMs = undefined;
    this.#wait(c, entry);
  }

  /** The connection that has waited longest (from `source` only, when given); undefined when all are busy. */
  oldestWaiting(source?: string): C | undefined {
    const from = source === undefined ? this.#waiting.keys() : (this.#waitingBySource.get(source)?.values() ?? []);
    for (const c of from) return c;
    return undefined;
  }

  /**
   * The waiting connections past their bound at `nowMs`, and why. `bytesRead(c)`: what the socket
   * has read so far (a byte after a response starts the next head's clock). One pass over the
   * waiting ones; busy connections are never looked at.
   */
  expired(nowMs: number, bytesRead: (c: C) => number): { readonly c: C; readonly why: ExpiryReason }[] {
    const { idleMs, headersMs } = this.#bounds;
    const out: { c: C; why: ExpiryReason }[] = [];
    for (const [c, entry] of this.#waiting) {
      const waitedMs = nowMs - entry.waitingSinceMs;
      const spoke = bytesRead(c) > entry.bytesAtWait;
      if (entry.fresh) {
        if (!spoke && waitedMs >= idleMs) out.push({ c, why: 'idle' });
        else if (waitedMs >= headersMs) out.push({ c, why: 'headers' });
        continue;
      }
      if (!spoke) {
        if (waitedMs >= idleMs) out.push({ c, why: 'idle' });
        continue;
      }
      entry.headStartedMs ??= nowMs;
      if (nowMs - entry.headStartedMs >= headersMs) out.push({ c, why: 'headers' });
    }
    return out;
  }

  #wait(c: C, entry: Entry): void {
    this.#waiting.delete(c);
    this.#waiting.set(c, entry);
    let bySource = this.#waitingBySource.get(entry.source);
    if (bySource === undefined) this.#waitingBySource.set(entry.source, (bySource = new Set()));
    bySource.delete(c);
    bySource.add(c);
  }

  #unwait(c: C, entry: Entry): void {
    this.#waiting.delete(c);
    const bySource = this.#waitingBySource.get(entry.source);
    if (bySource === undefined) return;
    bySource.delete(c);
    if (bySource.size === 0) this.#waitingBySource.delete(entry.source);
  }
}
