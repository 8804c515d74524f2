// How `tessera up` restarts a worker process that died: after a delay that doubles with each
// restart in a row (0.5 s, 1 s, 2 s, ... at most 30 s), the count reset once a worker has run
// for RESET_AFTER_MS. Pure: the caller passes the counts and times.
export const FIRST_DELAY_MS = 500;
export const MAX_DELAY_MS = 30_000;
export const RESET_AFTER_MS = 60_000;

/** The delay before restart number `restartsInARow` (0 for the first restart after a good run). */
export function restartDelayMs(restartsInARow: number): number {
  return Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** Math.min(restartsInARow, 16));
}

/** Restarts in a row after a run of ranMs that followed `previous` of them. */
export function nextRestartCount(previous: number, ranMs: number): number {
  return ranMs >= RESET_AFTER_MS ? 0 : previous + 1;
}
