// Runs many seeds of the transfer simulation and summarises them; a failing seed is reported
// with the one-line command that replays it exactly, and its trace is written to a file.
//   SIM_SEED=n        run only seed n (both shard files run it)
//   SIM_SEEDS=k       seeds per CI run (default 10,000, split over the shard files)
//   SIM_FIRST=s       first seed (default 1)
//   SIM_FAULTS=a,b    fault points on every node; SIM_CHAOS=0|1, SIM_BAD_TAGS=0|1 force those modes
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FaultSet } from '../../../src/core/index.js';
import { runSeed, type SeedResult } from './cluster.js';
import { conformanceProblems } from './conformance.js';

export interface Summary {
  readonly seeds: number;
  readonly seconds: number;
  readonly chaos: number;
  readonly events: number;
  readonly succeeded: number;
  readonly failed: number;
  readonly checksumFailures: number;
  readonly injected: Record<string, number>;
  readonly outcomes: Record<string, number>;
  /** Traces replayed through spec/conformance's checkTrace (0 while it does not exist). */
  readonly conformanceChecked: number;
  readonly failures: {
    readonly seed: number;
    readonly violations: readonly string[];
    readonly repro: string;
    readonly traceFile: string;
  }[];
}

export const NUM_SHARDS = 2;

export function shardSeeds(shard: number): number[] {
  const one = process.env['SIM_SEED'];
  if (one !== undefined && one !== '') return [Number(one)];
  const total = Number(process.env['SIM_SEEDS'] ?? 10_000);
  const first = Number(process.env['SIM_FIRST'] ?? 1);
  const seeds: number[] = [];
  for (let s = first + shard; s < first + total; s += NUM_SHARDS) seeds.push(s);
  return seeds;
}

export function runSeeds(
  seeds: readonly number[],
  options: {
    readonly faults?: FaultSet;
    readonly chaos?: boolean;
    readonly badTags?: boolean;
    readonly stopAtFirst?: boolean;
    readonly label?: string;
    readonly conformance?: boolean;
  } = {},
): Summary {
  const start = performance.now();
  const injected: Record<string, number> = {};
  const outcomes: Record<string, number> = {};
  const failures: Summary['failures'][number][] = [];
  let chaos = 0;
  let events = 0;
  let succeeded = 0;
  let failed = 0;
  let checksumFailures = 0;
  let ran = 0;
  let conformanceChecked = 0;
  for (const seed of seeds) {
    const r: SeedResult = runSeed({ seed, faults: options.faults, chaos: options.chaos, badTags: options.badTags });
    ran++;
    if (options.conformance === true && r.violations.length === 0) {
      r.violations.push(
        ...conformanceProblems(r.trace, !Object.keys(r.injected).some((k) => k.startsWith('crash')), r.writers),
      );
      conformanceChecked++;
    }
    if (r.chaos) chaos++;
    events += r.events;
    succeeded += r.succeeded;
    failed += r.failed;
    checksumFailures += r.checksumFailures;
    for (const [k, v] of Object.entries(r.injected)) injected[k] = (injected[k] ?? 0) + v;
    for (const [k, v] of Object.entries(r.outcomes)) outcomes[k] = (outcomes[k] ?? 0) + v;
    if (r.violations.length > 0) {
      const faults = options.faults?.names() ?? [];
      const env =
        (faults.length > 0 ? `SIM_FAULTS=${faults.join(',')} ` : '') +
        (options.chaos === undefined ? '' : `SIM_CHAOS=${options.chaos ? 1 : 0} `) +
        (options.badTags === undefined ? '' : `SIM_BAD_TAGS=${options.badTags ? 1 : 0} `);
      const traceFile = join(tmpdir(), `tessera-sim-${options.label ?? 'transfer'}-${seed}.jsonl`);
      writeFileSync(traceFile, r.trace.map((e) => JSON.stringify(e)).join('\n') + '\n');
      failures.push({
        seed,
        violations: r.violations,
        repro: `${env}SIM_SEED=${seed} npx vitest run test/sim/transfer`,
        traceFile,
      });
      if (options.stopAtFirst === true || failures.length >= 5) break;
    }
  }
  return {
    seeds: ran,
    seconds: (performance.now() - start) / 1000,
    chaos,
    events,
    succeeded,
    failed,
    checksumFailures,
    injected,
    outcomes,
    conformanceChecked,
    failures,
  };
}

export function describeSummary(label: string, s: Summary): string {
  const list = (r: Record<string, number>) =>
    Object.entries(r)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${k}=${v}`)
      .join(' ');
  const faults = list(s.injected);
  return (
    `[sim ${label}] ${s.seeds} seeds in ${s.seconds.toFixed(1)} s (${(s.seeds / s.seconds).toFixed(0)} seeds/s, ${s.events} events), ` +
    `${s.chaos} chaos runs; ${s.conformanceChecked} traces replayed through spec/conformance; requests: ${s.succeeded} succeeded, ${s.failed} failed honestly (${list(s.outcomes)}); checksum failures ${s.checksumFailures}; faults injected: ${faults}` +
    s.failures
      .map((f) => `\n  FAILED seed ${f.seed}: ${f.violations[0]}\n    reproduce: ${f.repro}\n    trace: ${f.traceFile}`)
      .join('')
  );
}
