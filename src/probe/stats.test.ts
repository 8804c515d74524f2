import { describe, expect, it } from 'vitest';
import { binomialTail, effectSize, ksGreater, ksGreaterTail } from './stats.js';

// Reference values from scipy 1.17.1: ks_2samp(x, y, alternative='greater', method='exact').
const X = [
  0.61, 0.29, 0.06, 0.59, -1.73, -0.74, 0.51, -0.56, 0.39, 1.64, 0.05, -0.06, 0.64, -0.82, 0.37, 1.77, 1.09, -1.28,
  2.36, 1.31, 1.05, -0.32, -0.4, 1.06, -2.47,
];
const Y = [2.2, 1.66, 1.38, 0.2, 0.36, 0.0, 0.96, 1.56, 0.44, 1.5, -0.3, 0.66, 2.31, 3.29, -0.27];

describe('the one-sided two-sample KS test', () => {
  it('matches scipy on mixed samples: D+ 0.34667, p 0.0855316', () => {
    const r = ksGreater(X, Y);
    expect(r.statistic).toBeCloseTo(0.3466666666666667, 12);
    expect(r.pValue).toBeCloseTo(0.08553162888249259, 10);
    // The other direction: y is not smaller than x.
    expect(ksGreater(Y, X)).toMatchObject({ statistic: 0, pValue: 1 });
  });

  it('gives 1 / C(2n, n) for two fully separated samples of n', () => {
    expect(ksGreater([1, 2, 3, 4, 5], [6, 7, 8, 9, 10]).pValue).toBeCloseTo(0.003968253968253967, 14);
    expect(ksGreaterTail(8, 8, 1)).toBeCloseTo(1 / 12870, 14);
    expect(ksGreaterTail(20, 20, 1) * 137846528820).toBeCloseTo(1, 9);
  });

  it('stays finite and near the asymptote exp(-2 d^2 nm/(n+m)) for large samples', () => {
    const p = ksGreaterTail(300, 300, 0.1);
    expect(p).toBeGreaterThan(0);
    expect(p / Math.exp((-2 * 0.01 * 90000) / 600)).toBeGreaterThan(0.7);
    expect(p / Math.exp((-2 * 0.01 * 90000) / 600)).toBeLessThan(1.05);
  });

  it('effect sizes and the binomial tail', () => {
    expect(effectSize([1, 2], [3, 4])).toEqual({ medianRatio: 1.5 / 3.5, cliffsDelta: 1 });
    expect(binomialTail(10, 0, 0.5)).toBe(1);
    expect(binomialTail(10, 10, 0.5)).toBeCloseTo(1 / 1024, 14);
    expect(binomialTail(10, 8, 0.5)).toBeCloseTo(56 / 1024, 12);
  });
});
