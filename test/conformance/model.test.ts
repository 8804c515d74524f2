// The checker and the Promela model agree, both ways: every run of the correct model (random
// simulations by SPIN, faults included) is a trace the checker accepts, and the counterexample
// SPIN finds for each mutant the checker can see is a trace it refuses. Needs spin and gcc.
import { describe, expect, it } from 'vitest';
import type { TraceEvent } from '../../src/transfer/index.js';
import { checkTrace, modelTrace, modelWriterOf } from '../../spec/conformance/index.js';
import { simulate, verify } from '../../spec/scripts/pan.mjs';

const CONFIGS: { readonly name: string; readonly defines: string[]; readonly seeds: number }[] = [
  { name: 'defaults (3 requests, 2 prefill, 1 decode, 2 faults)', defines: [], seeds: 120 },
  { name: '3 faults per run', defines: ['MAXF=3'], seeds: 60 },
  { name: '2 decode nodes, 4 requests', defines: ['ND=2', 'NR=4'], seeds: 40 },
];

describe('runs of the correct model', () => {
  for (const config of CONFIGS) {
    it(`are accepted by the checker, whole: ${config.name}`, () => {
      const seen = { success: 0, error: 0, quarantine: 0, release: 0, close: 0, drop: 0 };
      for (let seed = 1; seed <= config.seeds; seed++) {
        const output = simulate({ seed, defines: config.defines });
        expect(output, `seed ${seed}: the model itself failed`).not.toMatch(/assertion violated|invalid end state/);
        const events = modelTrace(output);
        const result = checkTrace(events, { complete: true, writerOf: modelWriterOf() });
        expect(
          result,
          `seed ${seed}: ${result.ok ? '' : `${result.reason} at event ${result.index}: ${JSON.stringify(result.event)}`}`,
        ).toEqual({ ok: true });
        count(events, seen);
      }
      // Not vacuous: the runs went through the paths the checker guards.
      expect(seen.success).toBeGreaterThan(0);
      expect(seen.error).toBeGreaterThan(0);
      expect(seen.quarantine).toBeGreaterThan(0);
      expect(seen.release).toBeGreaterThan(0);
      expect(seen.drop).toBeGreaterThan(0);
    });
  }
});

/** Mutants whose bug shows in a trace (the others need what a trace cannot show: pool sizes, completions). */
const VISIBLE_MUTANTS: { readonly name: string; readonly reason: RegExp }[] = [
  { name: 'FREE_BEFORE_ACK', reason: /may still write/ },
  { name: 'NO_EPOCH_CHECK', reason: /without full coverage|stamp says epoch/ },
  { name: 'NO_COVERAGE', reason: /without full coverage|stamp says epoch/ },
  { name: 'NO_TOMBSTONE', reason: /sends AbortAck for r\d in state Idle|may still write/ },
  { name: 'SUCCESS_AFTER_CANCEL', reason: /success reported|second outcome/ },
];

describe('counterexamples of the mutants', () => {
  for (const { name, reason } of VISIBLE_MUTANTS) {
    it(`are refused by the checker: ${name}`, () => {
      const res = verify({ mode: 'safety', defines: [name], keepTrail: true });
      expect(res.violation, `SPIN found no counterexample for ${name}`).toBeDefined();
      const events = modelTrace(res.trail ?? '');
      expect(events.length).toBeGreaterThan(10);
      const result = checkTrace(events, { writerOf: modelWriterOf() });
      expect(result.ok, `the checker accepted the ${name} counterexample`).toBe(false);
      if (!result.ok) expect(result.reason).toMatch(reason);
    });
  }
});

function count(
  events: readonly TraceEvent[],
  seen: Record<'success' | 'error' | 'quarantine' | 'release' | 'close' | 'drop', number>,
): void {
  for (const e of events) {
    if (e.kind === 'outcome') seen[e.outcome]++;
    else if (e.kind === 'page' && (e.action === 'quarantine' || e.action === 'release')) seen[e.action]++;
    else if (e.kind === 'close' || e.kind === 'drop') seen[e.kind]++;
  }
}
