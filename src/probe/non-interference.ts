// non-interference: one greedy, seeded request of tenant B, repeated alone, amid tenant A's
// storms (concurrent long requests), and amid B's own storms (the same load, no other tenant:
// B-only variability), in random order. Every answer is compared with the first lone answer.
// Where the server is batch-invariant (--batch-invariant: Tessera --deterministic, ...), any
// change is a finding. Elsewhere batching may legitimately change a greedy answer, so a change
// is reported as a statistic (changed answers amid A vs amid B's own load) and the check is
// inconclusive; it is clean only when nothing changed at all. Then self-consistency (its own
// file), which gives a verdict on any server: the greedy answer must agree with the server's own
// one-step predictions.
// Budget: 1 + 3 R trials + 2 R x S storm requests + 16 (self-consistency); S = 3, R = budget / 12
// (2 to 10).
import { greedy, inParallel, usableTokens, type CheckContext, type CheckOutput } from './context.js';
import { canarySet, randomIds, shuffle } from './prompts.js';
import { MIN_AGREEMENT, selfConsistency } from './self-consistency.js';
import type { Finding, RequestRecord, Tenant } from './types.js';

type Phase = 'alone' | 'amid-A' | 'amid-B';
const PHASES: readonly Phase[] = ['alone', 'amid-A', 'amid-B'];
const ANSWER_TOKENS = 16;

export function nonInterferenceSizes(budget: number): { repeats: number; storm: number } {
  const storm = 3;
  return { repeats: Math.max(2, Math.min(10, Math.floor(budget / (3 * (1 + storm))))), storm };
}

export function nonInterferenceBudget(budget: number): number {
  const { repeats, storm } = nonInterferenceSizes(budget);
  return 1 + repeats * 3 + repeats * 2 * storm + ANSWER_TOKENS;
}

export async function nonInterference(ctx: CheckContext): Promise<CheckOutput> {
  const { client, facts, rng } = ctx;
  const { repeats, storm } = nonInterferenceSizes(ctx.budget);
  const usable = usableTokens(facts);
  const promptTokens = Math.max(16, Math.floor(usable * 0.6));
  const prompt = randomIds(rng, promptTokens);
  const body = greedy(facts.model, prompt, ANSWER_TOKENS);
  const total = nonInterferenceBudget(ctx.budget);
  let done = 0;
  const tick = () => ctx.progress(++done, total);
  // Storm prompts: long canary texts (A) or token ids (B), each with a long answer, so they run beside B's request.
  const stormWords = Math.max(8, Math.floor((usable - 64) / 6)); // ~4.5 tokens a word on a small vocabulary
  const stormBody = (tenant: Tenant) => ({
    model: facts.model,
    prompt:
      tenant === 'A'
        ? (canarySet(rng, 1, stormWords).texts[0] as string)
        : randomIds(rng, Math.floor((usable - 64) * 0.8)),
    max_tokens: 32,
    temperature: 1,
    seed: rng.int(1e9),
  });

  const reference = await client.complete('B', 'non-interference: the lone reference answer', body);
  tick();
  const refText = (reference.texts ?? []).join('');
  const trials = shuffle(
    rng,
    PHASES.flatMap((phase) => Array.from({ length: repeats }, () => phase)),
  );
  const results: { phase: Phase; record: RequestRecord; same: boolean; prefix: number }[] = [];
  for (const phase of trials) {
    const stormTenant: Tenant | undefined = phase === 'amid-A' ? 'A' : phase === 'amid-B' ? 'B' : undefined;
    let record: RequestRecord;
    if (stormTenant === undefined) {
      record = await client.complete('B', 'non-interference: alone', body);
    } else {
      const stormBodies = Array.from({ length: storm }, () => stormBody(stormTenant));
      const stormRuns = inParallel(
        stormBodies.map(
          (b) => () =>
            client.stream(stormTenant, `non-interference: storm of ${stormTenant}`, b).then((r) => (tick(), r)),
        ),
        storm,
      );
      await new Promise((resolve) => setTimeout(resolve, 30)); // the storm is admitted first
      record = await client.complete('B', `non-interference: amid ${stormTenant}'s storm`, body);
      await stormRuns;
    }
    tick();
    const text = (record.texts ?? []).join('');
    let prefix = 0;
    while (prefix < text.length && text[prefix] === refText[prefix]) prefix++;
    results.push({ phase, record, same: record.status === 200 && text === refText, prefix });
  }
  // After the storms: the pool now holds pages A wrote.
  const consistency = await selfConsistency(ctx, prompt, ANSWER_TOKENS, tick);
  const changed = (phase: Phase) => results.filter((r) => r.phase === phase && !r.same);
  const counts = Object.fromEntries(PHASES.map((p) => [p, changed(p).length])) as Record<Phase, number>;
  const anyChange = counts.alone + counts['amid-A'] + counts['amid-B'] > 0;
  const findings: Finding[] = [];
  if (reference.status !== 200) {
    return {
      status: 'error',
      summary: `the reference request failed (HTTP ${reference.status ?? 'none'})`,
      findings,
      figures: { reference: reference.id },
      plots: [],
    };
  }
  if (anyChange && ctx.batchInvariant) {
    for (const p of PHASES) {
      const c = changed(p);
      if (c.length > 0)
        findings.push({
          what: `${c.length}/${repeats} answers ${p} differ from the lone reference on a batch-invariant server`,
          requests: c.map((r) => r.record.id),
        });
    }
  }
  if (consistency.kind === 'measured' && consistency.finding) {
    findings.push({
      what:
        `B's greedy answer disagrees with the server's own next-token predictions at ` +
        `${consistency.positions - consistency.agreeing} of ${consistency.positions} positions (agreement ` +
        `${(100 * consistency.agreement).toFixed(0)}% < ${100 * MIN_AGREEMENT}%): decode did not read this prompt's KV`,
      requests: consistency.requests,
    });
  }
  const consistent =
    consistency.kind === 'measured'
      ? `self-consistency ${consistency.agreeing}/${consistency.positions}`
      : `self-consistency not available: ${consistency.why}`;
  const statistic =
    `changed answers: alone ${counts.alone}/${repeats}, amid A ${counts['amid-A']}/${repeats}, ` +
    `amid B's own load ${counts['amid-B']}/${repeats}`;
  const status = findings.length > 0 ? 'finding' : anyChange ? 'inconclusive' : 'clean';
  return {
    status,
    summary:
      status === 'clean'
        ? `every answer equal to the lone reference (${3 * repeats} trials); ${consistent}`
        : `${findings[0]?.what ?? statistic + ' (not batch-invariant: a statistic, not a verdict)'}; ${consistent}`,
    findings,
    figures: {
      promptTokens,
      answerTokens: ANSWER_TOKENS,
      repeats,
      stormSize: storm,
      batchInvariant: ctx.batchInvariant,
      changed: counts,
      selfConsistency: consistency,
      referenceRequest: reference.id,
      commonPrefixChars: Object.fromEntries(
        PHASES.map((p) => [p, results.filter((r) => r.phase === p).map((r) => r.prefix)]),
      ),
      referenceChars: refText.length,
    },
    plots: [
      {
        kind: 'bars',
        title: 'Answers that differ from the lone one',
        unit: `of ${repeats}`,
        bars: PHASES.map((p) => ({ label: p, value: counts[p] })),
      },
      ...(consistency.kind === 'measured'
        ? [
            {
              kind: 'bars' as const,
              title: 'Self-consistency: next-token predictions',
              unit: 'positions',
              bars: [
                { label: 'agree', value: consistency.agreeing },
                { label: 'disagree', value: consistency.positions - consistency.agreeing },
              ],
            },
          ]
        : []),
    ],
  };
}
