// Each defence, switched off through its fault point, must make the simulation fail (the
// negative control); with the fault injected and the defence on, the simulation must pass and
// the fault must show up as honest failures. Runs in TCP mode (no chaos) unless said otherwise.
import { describe, expect, it } from 'vitest';
import { FaultSet, type FaultName } from '../../../src/core/index.js';
import { runSeed } from './cluster.js';
import { describeSummary, runSeeds } from './seeds.js';

const SEEDS = Array.from({ length: 300 }, (_, i) => 100_000 + i);

function run(faults: FaultName[], options: { chaos?: boolean; badTags?: boolean; stopAtFirst?: boolean } = {}) {
  const summary = runSeeds(SEEDS, {
    faults: new FaultSet(faults),
    chaos: options.chaos ?? false,
    badTags: options.badTags,
    stopAtFirst: options.stopAtFirst,
    label: faults.join('+') || 'none',
  });
  console.log(describeSummary(faults.join('+') || 'no fault points', summary));
  return summary;
}

const firstViolation = (s: ReturnType<typeof run>) => s.failures[0]?.violations[0] ?? '';

describe('the incident: placeholder-done', () => {
  it("is refused by decode's own stamps: requests fail honestly, nothing stale is read", () => {
    const s = run(['placeholder-done']);
    expect(s.failures).toEqual([]);
    expect(s.outcomes['transfer_failed']).toBeGreaterThan(50);
  });

  it("negative control: with skip-page-check too, a decoder reads another request's KV and the simulation fails", () => {
    const s = run(['placeholder-done', 'skip-page-check'], { stopAtFirst: true });
    expect(firstViolation(s)).toMatch(/KV leak|succeeded with tokens/);
  });
});

describe('checksums: corrupt-chunk', () => {
  it('is detected every time: no request whose chunk was corrupted succeeds', () => {
    const s = run(['corrupt-chunk']);
    expect(s.failures).toEqual([]);
    expect(s.checksumFailures).toBeGreaterThan(50);
    expect(s.succeeded).toBe(0); // every transfer carries one corrupted chunk
  });

  it('negative control: with skip-checksum, corrupted KV is decoded and the simulation fails', () => {
    const s = run(['corrupt-chunk', 'skip-checksum'], { stopAtFirst: true });
    expect(firstViolation(s)).toMatch(/KV leak|succeeded with tokens/);
  });
});

describe('tags: a router bug sends stale or foreign destination tags', () => {
  it('decode drops every frame whose tag the ledger does not hold; requests fail honestly', () => {
    const s = run([], { badTags: true });
    expect(s.failures).toEqual([]);
    expect(s.injected['bad-tags']).toBeGreaterThan(50);
  });

  it('negative control: with skip-tag-check, a frame lands in a page not held for it and the simulation fails', () => {
    const s = run(['skip-tag-check'], { badTags: true, stopAtFirst: true });
    expect(firstViolation(s)).toMatch(/wrote a KvChunk .* which the ledger does not hold|KV leak/);
  });
});

describe('deferred release and acknowledged aborts', () => {
  it('negative control: free-before-ack frees decode pages while a chunk to them is in flight', () => {
    const s = run(['free-before-ack'], { stopAtFirst: true });
    expect(firstViolation(s)).toMatch(/freed page \d+ epoch \d+ of .* while a KvChunk to it is still in flight/);
  });

  it('negative control: drop-abort-ack leaves aborts unacknowledged on a TCP network', () => {
    const s = run(['drop-abort-ack'], { stopAtFirst: true });
    expect(firstViolation(s)).toMatch(/never acknowledged/);
  });

  it('chaos runs stay safe with every fault point that keeps its defence on', () => {
    const s = run(['placeholder-done', 'corrupt-chunk'], { chaos: true, badTags: true });
    expect(s.failures).toEqual([]);
  });
});

describe('reproducibility', () => {
  it('replays a seed exactly: the same trace, event for event', () => {
    for (const seed of [7, 1234, 99_999]) {
      const a = runSeed({ seed });
      const b = runSeed({ seed });
      expect(b.trace).toEqual(a.trace);
      expect(b.events).toBe(a.events);
    }
  });
});
