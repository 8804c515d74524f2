// Replays a simulated trace through the spec's conformance checker (spec/conformance): the
// real code's events against the Promela model's guards, event by event.
import { checkTrace } from '../../../spec/conformance/index.js';
import type { TraceEvent } from '../../../src/transfer/index.js';

/**
 * The checker's complaint about one trace (empty: it conforms). `complete`: also check that
 * everything ended — only for runs without a crash (the checker counts a crashed decode's
 * pages, which nobody frees, as left over).
 */
export function conformanceProblems(
  trace: readonly TraceEvent[],
  complete: boolean,
  writers: ReadonlyMap<string, string>,
): string[] {
  const result = checkTrace(trace, { complete, writerOf: (rid) => writers.get(rid) });
  return result.ok ? [] : [`conformance: event ${result.index} ${JSON.stringify(result.event)}: ${result.reason}`];
}
