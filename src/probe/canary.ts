// canary: tenant A fills the server's pages with unique canary text; tenant B drives the paths
// where engines have leaked, while A keeps writing: prompts just past the context and past the
// pool limit the errors revealed, prompt + max_tokens exactly at the limit, streams cut before
// the response, at the headers and mid-stream (then a request that reuses the freed pages),
// n > 1, and bursts that force preemption and reuse of freed pages. Findings: any 200 that
// should have been a 4xx, and any B output carrying A's canaries (canary-match.ts: exact marker
// words, or word trigrams well above the chance rate measured against never-sent decoys).
// Budget: about 30 requests per round (3 fill + 15 of B + A's storm); rounds = budget / 30.
import { matchCanaries } from './canary-match.js';
import { greedy, inParallel, usableTokens, type CheckContext, type CheckOutput } from './context.js';
import type { StreamCut } from './client.js';
import { canarySet, randomIds } from './prompts.js';
import type { Finding, RequestRecord } from './types.js';

const FILL = 3;
const BURST = 4;
const ROUND = 30;

export function canaryRounds(budget: number): number {
  return Math.max(1, Math.min(5, Math.floor(budget / ROUND)));
}

export function canaryBudget(budget: number): number {
  return canaryRounds(budget) * ROUND;
}

interface Path {
  readonly what: string;
  /** 'refuse': the server cannot serve it, a 200 is a finding. 'serve': its output is searched for canaries. */
  readonly expect: 'refuse' | 'serve';
  readonly run: () => Promise<RequestRecord[]>;
}

export async function canary(ctx: CheckContext): Promise<CheckOutput> {
  const { client, facts, rng } = ctx;
  const { model, contextLength: ctxLen, poolLimit } = facts;
  const usable = usableTokens(facts);
  const rounds = canaryRounds(ctx.budget);
  const total = canaryBudget(ctx.budget);
  let done = 0;
  const tick = <T>(r: T): T => (ctx.progress(Math.min(total, ++done), total), r);
  // ~4.5 tokens a word on a small vocabulary: stays inside the context.
  const words = Math.max(8, Math.floor((usable - 16) / 6));
  const canaries = canarySet(rng, FILL * rounds + 24, words);
  const decoys = canarySet(rng, FILL * rounds + 24, words);
  let nextCanary = 0;
  const canaryText = () => canaries.texts[nextCanary++ % canaries.texts.length] as string;
  const fillA = (purpose: string) =>
    client.complete('A', purpose, { model, prompt: canaryText(), max_tokens: 8, temperature: 0 }).then(tick);
  const ids = (n: number) => randomIds(rng, n);
  const one = (p: Promise<RequestRecord>) => p.then((r) => [tick(r)]);
  const cutStream = (cut: StreamCut, what: string) =>
    one(client.stream('B', what, greedy(model, ids(usable - 16), 16), cut));

  const paths: Path[] = [
    {
      what: 'prompt of context + 1 tokens',
      expect: 'refuse',
      run: () => one(client.complete('B', 'canary: context + 1', { model, prompt: ids(ctxLen + 1), max_tokens: 1 })),
    },
    {
      what: 'prompt + max_tokens = context + 1',
      expect: 'refuse',
      run: () =>
        one(
          client.complete('B', 'canary: max_tokens past the edge', {
            model,
            prompt: ids(Math.floor(usable / 2)),
            max_tokens: ctxLen - Math.floor(usable / 2) + 1,
          }),
        ),
    },
    ...(poolLimit === null
      ? []
      : [
          {
            what: 'prompt + max_tokens = pool limit + 1',
            expect: 'refuse' as const,
            run: () =>
              one(client.complete('B', 'canary: pool limit + 1', { model, prompt: ids(poolLimit), max_tokens: 1 })),
          },
        ]),
    {
      what: 'prompt + max_tokens exactly at the limit',
      expect: 'serve',
      run: () => one(client.complete('B', 'canary: at the edge', greedy(model, ids(usable - 40), 40))),
    },
    {
      what: 'a stream cut before the response',
      expect: 'serve',
      run: () => cutStream({ kind: 'before-response', afterMs: 5 }, 'canary: cut before the response'),
    },
    {
      what: 'a stream cut at the headers',
      expect: 'serve',
      run: () => cutStream({ kind: 'at-headers' }, 'canary: cut at the headers'),
    },
    {
      what: 'a stream cut after 1 event',
      expect: 'serve',
      run: () => cutStream({ kind: 'after-events', events: 1 }, 'canary: cut after 1 event'),
    },
    {
      what: 'a stream cut after 4 events',
      expect: 'serve',
      run: () => cutStream({ kind: 'after-events', events: 4 }, 'canary: cut after 4 events'),
    },
    {
      what: 'a long request on the freed pages',
      expect: 'serve',
      run: () => one(client.complete('B', 'canary: reuse of freed pages', greedy(model, ids(usable - 24), 24))),
    },
    {
      what: 'n = 4',
      expect: 'serve',
      run: () =>
        one(
          client.complete('B', 'canary: n = 4', {
            model,
            prompt: ids(usable - 24),
            max_tokens: 16,
            n: 4,
            temperature: 0.9,
            seed: 7,
          }),
        ),
    },
    {
      what: `a burst of ${BURST} long requests (preemption, reuse)`,
      expect: 'serve',
      run: () =>
        inParallel(
          Array.from(
            { length: BURST },
            (_, i) => () =>
              client
                .complete('B', `canary: burst ${i + 1}/${BURST}`, {
                  model,
                  prompt: ids(Math.floor(usable * 0.5)),
                  max_tokens: 24,
                  temperature: 0.7,
                  seed: i,
                })
                .then(tick),
          ),
          BURST,
        ),
    },
  ];

  const records: { path: Path; record: RequestRecord }[] = [];
  const fills: RequestRecord[] = [];
  for (let round = 0; round < rounds; round++) {
    fills.push(
      ...(await inParallel(
        Array.from({ length: FILL }, (_, i) => () => fillA(`canary: A fills pages (${i + 1}/${FILL})`)),
        FILL,
      )),
    );
    // A keeps writing while B runs its paths: one A request in flight at every moment.
    let stop = false;
    const storm = (async () => {
      while (!stop && done < total - 2) fills.push(await fillA("canary: A writes during B's paths"));
    })();
    for (const path of paths) for (const record of await path.run()) records.push({ path, record });
    stop = true;
    await storm;
  }

  const findings: Finding[] = [];
  const wrong200 = records.filter((r) => r.path.expect === 'refuse' && r.record.status === 200);
  for (const r of wrong200)
    findings.push({ what: `${r.path.what}: HTTP 200, expected a 4xx`, requests: [r.record.id] });
  const served = records.filter((r) => r.record.status === 200 && r.path.expect === 'serve');
  const outputs = served.flatMap((r) => r.record.texts ?? []);
  const match = matchCanaries(outputs, canaries, decoys);
  const carrying = served
    .filter((r) => matchCanaries(r.record.texts ?? [], canaries, decoys).exactHits.length > 0)
    .map((r) => r.record.id);
  if (match.verdict === 'finding') {
    findings.push({
      what:
        `B's outputs carry A's canaries: ${match.exactHits.length} marker word(s) verbatim, ` +
        `${match.ngramHits} canary trigrams against ${match.decoyNgramHits} decoy trigrams (p ` +
        `${match.ngramP.toExponential(1)})`,
      requests: carrying.length > 0 ? carrying : served.map((r) => r.record.id),
    });
  }
  const aFilled = fills.filter((f) => f.status === 200).length;
  const status =
    findings.length > 0 ? 'finding' : match.verdict === 'inconclusive' || aFilled === 0 ? 'inconclusive' : 'clean';
  const statuses: Record<string, number> = {};
  for (const r of records)
    statuses[String(r.record.status ?? 'none')] = (statuses[String(r.record.status ?? 'none')] ?? 0) + 1;
  return {
    status,
    summary:
      status === 'clean'
        ? `${outputs.length} B outputs over ${paths.length} paths carry no canary of A's (${aFilled} A requests ` +
          `wrote ${canaries.markers.length} markers); every over-limit request refused`
        : status === 'inconclusive'
          ? aFilled === 0
            ? 'tenant A could not write any canary'
            : "decoy markers appeared in B's outputs: the markers are not unique on this server"
          : `${findings.length} finding(s): ${findings[0]?.what ?? ''}`,
    findings,
    figures: {
      rounds,
      canaryWords: words,
      markersWritten: canaries.markers.length,
      aRequests: fills.length,
      aServed: aFilled,
      bOutputs: outputs.length,
      statusesOfB: statuses,
      match,
      threshold: { exact: '1 marker (decoy markers: 0)', ngram: 'trigrams >= 3 and binomial p < 0.001 against decoys' },
      paths: records.map((r) => ({
        what: r.path.what,
        expect: r.path.expect,
        status: r.record.status,
        request: r.record.id,
      })),
    },
    plots: [
      {
        kind: 'bars',
        title: 'B outputs: A canaries vs decoys (chance)',
        unit: 'matches',
        bars: [
          { label: 'A markers (exact)', value: match.exactHits.length },
          { label: 'decoy markers (exact)', value: match.decoyExactHits.length },
          { label: 'A trigrams', value: match.ngramHits },
          { label: 'decoy trigrams', value: match.decoyNgramHits },
        ],
      },
    ],
  };
}
