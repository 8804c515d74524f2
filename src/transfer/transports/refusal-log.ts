// RefusalLog: one log line per refused or malformed peer, rate-limited per class of refusal, so
// 10,000 refusals say so without 10,000 lines (and a flood cannot fill the disk).
// Owns: the classes, the window, the count of lines held back. Time is an argument.
// Must never: print a peer's bytes (only its address and the reason, both bounded), or block.

export const REFUSAL_CLASSES = ['node-cap', 'source-cap', 'handshake', 'malformed'] as const;
export type RefusalClass = (typeof REFUSAL_CLASSES)[number];

/** At most one line per class per window; the next line says how many were held back. */
export const REFUSAL_LOG_WINDOW_MS = 10_000;

export class RefusalLog {
  readonly #write: (line: string) => void;
  readonly #windowMs: number;
  readonly #last = new Map<RefusalClass, { atMs: number; heldBack: number }>();

  constructor(write: (line: string) => void, windowMs = REFUSAL_LOG_WINDOW_MS) {
    this.#write = write;
    this.#windowMs = windowMs;
  }

  refused(kind: RefusalClass, source: string, reason: string, nowMs: number): void {
    const last = this.#last.get(kind);
    if (last !== undefined && nowMs - last.atMs < this.#windowMs) {
      last.heldBack++;
      return;
    }
    const more =
      last !== undefined && last.heldBack > 0
        ? ` (and ${last.heldBack} more like it in the last ${Math.round((nowMs - last.atMs) / 1000)} s)`
        : '';
    this.#last.set(kind, { atMs: nowMs, heldBack: 0 });
    this.#write(`cluster listener: refused ${source.slice(0, 64)} [${kind}]: ${reason.slice(0, 200)}${more}`);
  }
}
