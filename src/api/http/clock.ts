// Time, injected: a monotonic clock for latencies and a wall clock for OpenAI's `created`.
// Tests pass a fake one; only systemClock reads the real time.

export interface Clock {
  /** Monotonic milliseconds (any origin): differences are latencies. */
  nowMs(): number;
  /** Unix time in whole seconds, for `created` fields. */
  unixSeconds(): number;
}

export const systemClock: Clock = {
  nowMs: () => performance.now(),
  unixSeconds: () => Math.floor(Date.now() / 1000),
};
