// How much of a chats' ITL ratio (p99 / median) the decode batch's mix explains by itself, as
// the client sees it. A decode step's time grows with its batch (m100 on one core: ~16 ms for one
// request, ~27 ms for seven), and in PD the batch varies: prefill is the bottleneck, so requests
// reach the decode node one by one. Each ITL sample is tagged with how many requests were
// decoding when it arrived (between their first and last token, chats and long prompts alike:
// about the decode step's batch), and then replaced by the median of the samples with the same
// count. The p99 / median of those medians is the ratio a host with no noise at all would give
// this workload; the measured ratio over it is what noise, the relay and the server add.
import { percentile, type RequestResult } from './pd-client.js';

/** Samples of one count of decoding requests. */
export interface BatchGroup {
  readonly decoding: number;
  readonly samples: number;
  readonly medianMs: number;
}

export interface BatchMix {
  readonly groups: BatchGroup[];
  /** p99 / median over the samples, each replaced by its group's median (1 with no samples). */
  readonly ratio: number;
}

/** [first token, last token] in ms since the phase began; undefined with fewer than two tokens. */
export function decodeSpan(r: RequestResult): readonly [number, number] | undefined {
  const first = r.itlAt[0];
  const last = r.itlAt[r.itlAt.length - 1];
  if (first === undefined || last === undefined) return undefined;
  return [first[0] - first[1], last[0]];
}

/** `chats`' ITL samples against everyone decoding beside them (`all` includes the chats). */
export function batchMix(chats: readonly RequestResult[], all: readonly RequestResult[]): BatchMix {
  const spans = all.flatMap((r) => {
    const span = decodeSpan(r);
    return span === undefined ? [] : [span];
  });
  const byCount = new Map<number, number[]>();
  const counts: number[] = [];
  for (const chat of chats)
    for (const [at, gap] of chat.itlAt) {
      // The token arrived at `at`: the requests between their first and last token then.
      const decoding = spans.filter(([from, to]) => from < at && at <= to).length;
      counts.push(decoding);
      const group = byCount.get(decoding) ?? [];
      group.push(gap);
      byCount.set(decoding, group);
    }
  const groups = [...byCount.entries()]
    .sort(([a], [b]) => a - b)
    .map(([decoding, gaps]) => ({ decoding, samples: gaps.length, medianMs: percentile(gaps, 50) }));
  const medianOf = new Map(groups.map((g) => [g.decoding, g.medianMs]));
  const mixed = counts.map((c) => medianOf.get(c) as number);
  const median = percentile(mixed, 50);
  return { groups, ratio: mixed.length === 0 || median === 0 ? 1 : percentile(mixed, 99) / median };
}
