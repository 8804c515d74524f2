// bench:fair --target up --breakdown: where tenant B's time to first token goes on a cluster.
// Every process of `tessera up` writes its protocol trace (TESSERA_TRACE_DIR, src/cli/trace-file.ts:
// one JSON line per event, epoch ms); B's client recorded when each request started and when its
// first content chunk came. Each B request is matched to the router's submission that started
// inside its window and whose first Tokens reached the router before B's first chunk (A's long
// prompts never get a first token that fast), and its TTFT is split by hop:
//   router in   client start -> the router starts the submission (HTTP, auth, template, tokenize)
//   reserve     -> the router sends Prefill (the decode node's Reserve/Reserved round trip, any wait)
//   to prefill  -> the prefill node takes Prefill off the wire
//   prefill     -> the prefill node sends KvDone (the step in flight, B's step, the frames beside)
//   transfer    -> the decode node takes KvDone off the wire
//   decode      -> the decode node sends the first Tokens
//   back        -> B's client has its first content chunk (the router's stream, HTTP)
// A diagnosis, not a measurement of speed: tracing costs a write per event on every node.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface BRequest {
  /** Epoch ms (performance.timeOrigin + now) when B's client sent it, and when its first content came. */
  readonly startMs: number;
  readonly firstMs: number;
  readonly beside: boolean;
}

interface Line {
  readonly t: number;
  readonly e?: {
    readonly kind: string;
    readonly role: string;
    readonly rid: string;
    readonly message?: string;
    readonly to?: string;
  };
}

/** Per machine rid, the first time of each hop's event. */
interface Hops {
  reserving?: number;
  sendPrefill?: number;
  recvPrefill?: number;
  sendKvDone?: number;
  recvKvDone?: number;
  sendTokens?: number;
  recvTokens?: number;
}

const HOPS = ['router in', 'reserve', 'to prefill', 'prefill', 'transfer', 'decode', 'back'] as const;

function hopsOf(dir: string): Map<string, Hops> {
  const byRid = new Map<string, Hops>();
  const set = (rid: string, key: keyof Hops, t: number): void => {
    const h = byRid.get(rid) ?? {};
    if (h[key] === undefined) h[key] = t;
    byRid.set(rid, h);
  };
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.jsonl'))) {
    for (const text of readFileSync(join(dir, file), 'utf8').split('\n')) {
      if (text === '') continue;
      const { t, e } = JSON.parse(text) as Line;
      if (e === undefined) continue;
      const key = `${e.role} ${e.kind} ${e.kind === 'state' ? e.to : e.message}`;
      const hop = (
        {
          'router state Reserving': 'reserving',
          'router send Prefill': 'sendPrefill',
          'prefill recv Prefill': 'recvPrefill',
          'prefill send KvDone': 'sendKvDone',
          'decode recv KvDone': 'recvKvDone',
          'decode send Tokens': 'sendTokens',
          'router recv Tokens': 'recvTokens',
        } as Record<string, keyof Hops | undefined>
      )[key];
      if (hop !== undefined) set(e.rid, hop, t);
    }
  }
  return byRid;
}

/** The hop times (ms) of each of B's requests that could be matched, in order. */
function split(dir: string, requests: readonly BRequest[]): { readonly beside: boolean; readonly ms: number[] }[] {
  const hops = [...hopsOf(dir).values()].filter(
    (h): h is Required<Hops> => Object.values(h).length === 7 && Object.values(h).every((t) => t !== undefined),
  );
  const out: { beside: boolean; ms: number[] }[] = [];
  for (const r of requests) {
    const h = hops.find((x) => x.reserving >= r.startMs && x.recvTokens <= r.firstMs + 1);
    if (h === undefined) continue;
    const points = [
      r.startMs,
      h.reserving,
      h.sendPrefill,
      h.recvPrefill,
      h.sendKvDone,
      h.recvKvDone,
      h.sendTokens,
      r.firstMs,
    ];
    out.push({ beside: r.beside, ms: HOPS.map((_, i) => (points[i + 1] as number) - (points[i] as number)) });
  }
  return out;
}

const pct = (xs: readonly number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  const rank = (p / 100) * (s.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.ceil(rank);
  return (s[lo] as number) + ((s[hi] as number) - (s[lo] as number)) * (rank - lo);
};

/** Lines to print: per phase the mean and p99 of each hop, then the slowest requests beside A, hop by hop. */
export function breakdownLines(label: string, dir: string, requests: readonly BRequest[]): string[] {
  const rows = split(dir, requests);
  const lines = [
    `  ${label}: B's TTFT by hop (${rows.length} of ${requests.length} requests matched in the trace), ms: ` +
      HOPS.join(' | '),
  ];
  for (const beside of [false, true]) {
    const xs = rows.filter((r) => r.beside === beside);
    if (xs.length === 0) continue;
    const col = (i: number, f: (v: number[]) => number): string => f(xs.map((r) => r.ms[i] as number)).toFixed(1);
    const mean = (v: number[]): number => v.reduce((a, b) => a + b, 0) / v.length;
    lines.push(`    ${beside ? 'beside A' : 'alone   '} mean ${HOPS.map((_, i) => col(i, mean)).join(' | ')}`);
    lines.push(
      `    ${beside ? 'beside A' : 'alone   '} p99  ${HOPS.map((_, i) => col(i, (v) => pct(v, 99))).join(' | ')}`,
    );
  }
  const slowest = rows
    .filter((r) => r.beside)
    .sort((a, b) => b.ms.reduce((s, x) => s + x, 0) - a.ms.reduce((s, x) => s + x, 0))
    .slice(0, 4);
  for (const r of slowest) {
    lines.push(
      `    slow beside A: ${r.ms.reduce((s, x) => s + x, 0).toFixed(0)} ms = ${r.ms.map((x) => x.toFixed(1)).join(' | ')}`,
    );
  }
  return lines;
}
