// The statistics the probe reports, pure: the one-sided two-sample Kolmogorov-Smirnov test
// (Gu et al., "Auditing Prompt Caching in Language Model APIs", use it on TTFT samples), its
// exact p-value, effect sizes, and a binomial tail for the canary counts.
// Must never: read a clock or draw randomness (samples and seeds are arguments).

export interface KsResult {
  /** D+ = max over t of (F_x(t) - F_y(t)): how far x's samples run ahead of y's (x smaller). */
  readonly statistic: number;
  /** P(D+ >= statistic) when x and y come from one continuous distribution (exact). */
  readonly pValue: number;
  readonly n: number;
  readonly m: number;
}

/**
 * One-sided two-sample KS test, H1: x is stochastically smaller than y (scipy's
 * `ks_2samp(x, y, alternative='greater', method='exact')`). The p-value is exact: the
 * probability that a uniformly random interleaving of n x's and m y's reaches D+ >= d,
 * computed by dynamic programming over the interleaving lattice in probabilities (no
 * binomial coefficients, so no overflow for large samples).
 */
export function ksGreater(x: readonly number[], y: readonly number[]): KsResult {
  const n = x.length;
  const m = y.length;
  if (n === 0 || m === 0) throw new RangeError('the KS test needs two non-empty samples');
  const xs = [...x].sort((a, b) => a - b);
  const ys = [...y].sort((a, b) => a - b);
  let d = 0;
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    const t = Math.min(xs[i] as number, ys[j] as number);
    while (i < n && (xs[i] as number) <= t) i++;
    while (j < m && (ys[j] as number) <= t) j++;
    d = Math.max(d, i / n - j / m);
  }
  return { statistic: d, pValue: d <= 0 ? 1 : ksGreaterTail(n, m, d), n, m };
}

/** P(D+ >= d) for samples of n and m under H0. */
export function ksGreaterTail(n: number, m: number, d: number): number {
  const eps = 1e-9;
  // mass[j]: probability of having taken i x-steps and j y-steps without reaching D+ >= d.
  let mass = new Float64Array(m + 1);
  mass[0] = 1;
  let tail = 0; // summed directly (not 1 - the rest), so tiny p-values keep their precision
  for (let i = 0; i <= n; i++) {
    const next = new Float64Array(m + 1);
    for (let j = 0; j <= m; j++) {
      let p = mass[j] as number;
      if (j > 0) {
        // A y-step from (i, j-1), already in this row.
        const from = next[j - 1] as number;
        p += from * ((m - (j - 1)) / (n - i + m - (j - 1)));
      }
      if (i / n - j / m >= d - eps) {
        tail += p; // reached the boundary: these paths count towards the tail
        p = 0;
      }
      next[j] = p;
    }
    if (i === n) return Math.min(1, tail);
    // x-steps from row i into row i+1.
    mass = new Float64Array(m + 1);
    for (let j = 0; j <= m; j++) mass[j] = (next[j] as number) * ((n - i) / (n - i + m - j));
  }
  return 1;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/** Effect sizes of x against y: the median ratio and Cliff's delta (P(x < y) - P(x > y)). */
export function effectSize(
  x: readonly number[],
  y: readonly number[],
): { readonly medianRatio: number; readonly cliffsDelta: number } {
  let less = 0;
  let more = 0;
  for (const a of x) for (const b of y) a < b ? less++ : a > b ? more++ : 0;
  return { medianRatio: median(x) / median(y), cliffsDelta: (less - more) / (x.length * y.length) };
}

/** P(X >= k) for X ~ Binomial(n, p). */
export function binomialTail(n: number, k: number, p: number): number {
  if (k <= 0) return 1;
  if (k > n) return 0;
  let term = Math.pow(1 - p, n); // P(X = 0)
  let below = 0;
  for (let i = 0; i < k; i++) {
    below += term;
    term *= ((n - i) / (i + 1)) * (p / (1 - p));
  }
  return Math.min(1, Math.max(0, 1 - below));
}
