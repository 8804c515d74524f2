// The verdict of a cross-tenant timing check with a positive control, shared by the tier checks
// (grammar-timing, disk-timing, prefill-timing): four arms of TTFT samples, two one-sided KS
// tests (H1: the repeat is faster), effect sizes, one ECDF plot.
//   control: A's repeat of its own item   vs  baseline: A's first sending of it (or A's fresh)
//   cross:   B's sending of A's item      vs  fresh:    B's fresh item of the same size
// A cross p < ALPHA is a finding; otherwise clean only when the control p < ALPHA (the check saw
// the cache it looks for), else inconclusive, never clean.
// Must never: send a request or read a clock (pure: samples in, verdict out).
import type { CheckOutput } from './context.js';
import { ALPHA } from './prefix-timing.js';
import { effectSize, ksGreater, median } from './stats.js';
import type { Finding } from './types.js';

export type TimingArm = 'baseline' | 'control' | 'cross' | 'fresh';

export interface TimingSamples {
  /** TTFTs (ms) of each arm's successful requests. */
  readonly ttftMs: Readonly<Record<TimingArm, readonly number[]>>;
  /** Request ids of each arm's samples, in the same order. */
  readonly ids: Readonly<Record<TimingArm, readonly number[]>>;
  /** Request ids that failed (any arm). */
  readonly failed: readonly number[];
}

export interface TimingWords {
  /** What the cache is, for the summary and the plot: "compiled grammar", "disk tier", ... */
  readonly cache: string;
  /** The finding's cause when cross is significant: "(a grammar cache shared across tenants)". */
  readonly leak: string;
  /** The plot's series names, by arm. */
  readonly series: Readonly<Record<TimingArm, string>>;
  readonly plotTitle: string;
}

export const fmtP = (p: number): string => (p < 1e-3 ? p.toExponential(1) : p.toFixed(3));

export function timingVerdict(
  samples: TimingSamples,
  words: TimingWords,
  extra: { readonly findings?: readonly Finding[]; readonly figures?: Record<string, unknown> } = {},
): CheckOutput {
  const { ttftMs: t, ids, failed } = samples;
  const arms: readonly TimingArm[] = ['baseline', 'control', 'cross', 'fresh'];
  if (!arms.every((a) => t[a].length >= 3)) {
    const extraFindings = extra.findings ?? [];
    return {
      status: extraFindings.length > 0 ? 'finding' : 'error',
      summary:
        extraFindings.length > 0
          ? (extraFindings[0]?.what ?? '')
          : `too many requests failed (${failed.length}); samples per arm: ` +
            arms.map((a) => `${a} ${t[a].length}`).join(', '),
      findings: extraFindings,
      figures: { ...extra.figures, failed, ttftMs: t },
      plots: [],
    };
  }
  const control = ksGreater(t.control, t.baseline);
  const cross = ksGreater(t.cross, t.fresh);
  const controlEffect = effectSize(t.control, t.baseline);
  const crossEffect = effectSize(t.cross, t.fresh);
  const findings: Finding[] = [
    ...(cross.pValue < ALPHA
      ? [
          {
            what:
              `B's TTFT with A's ${words.cache} items is lower than with fresh ones: KS D+ ` +
              `${cross.statistic.toFixed(2)}, p ${cross.pValue.toExponential(2)}, median x` +
              `${crossEffect.medianRatio.toFixed(2)} ${words.leak}`,
            requests: ids.cross,
          },
        ]
      : []),
    ...(extra.findings ?? []),
  ];
  const controlSees = control.pValue < ALPHA;
  const status = findings.length > 0 ? 'finding' : controlSees ? 'clean' : 'inconclusive';
  const figures = {
    ...extra.figures,
    alpha: ALPHA,
    failed,
    control: { ...control, ...controlEffect, medianMs: median(t.control), baselineMedianMs: median(t.baseline) },
    cross: { ...cross, ...crossEffect, medianMs: median(t.cross), baselineMedianMs: median(t.fresh) },
    ttftMs: t,
    requests: ids,
  };
  return {
    status,
    summary:
      status === 'inconclusive'
        ? `positive control not significant (p ${fmtP(control.pValue)}, median x${controlEffect.medianRatio.toFixed(2)}): ` +
          `this check cannot see the ${words.cache} here; cross-tenant p ${fmtP(cross.pValue)}`
        : `same-tenant control p ${fmtP(control.pValue)} (median x${controlEffect.medianRatio.toFixed(2)}); ` +
          `cross-tenant p ${fmtP(cross.pValue)} (median x${crossEffect.medianRatio.toFixed(2)})`,
    findings,
    figures,
    plots: [
      {
        kind: 'ecdf',
        title: words.plotTitle,
        unit: 'ms',
        series: arms.map((a) => ({ name: words.series[a], values: t[a] })),
      },
    ],
  };
}

/** Empty per-arm sample holders for a check to fill. */
export function timingArms(): {
  ttftMs: Record<TimingArm, number[]>;
  ids: Record<TimingArm, number[]>;
  failed: number[];
} {
  return {
    ttftMs: { baseline: [], control: [], cross: [], fresh: [] },
    ids: { baseline: [], control: [], cross: [], fresh: [] },
    failed: [],
  };
}
