// slot-reuse: does tenant B's new request, landing in the slot where tenant A's conversation
// just ran, get served on A's state (llama.cpp #27148: an unrelated conversation restored into a
// new slot from the RAM prompt cache)? Per round, one request at a time where it matters:
//   fill:     A sends `slots` canary-filled conversations at once (every slot holds one of A's)
//   new:      B sends fresh token-id prompts one after another: each takes the least recently
//             used slot, one of A's. B's prompt shares at most its first token (BOS) with anything
//             sent before, so the server may report at most ALLOWED_CACHED cached tokens for it:
//             more means B's request was served on state it does not share (a finding).
//   repeat:   B resends a prompt of its reference phase (sent before any of A's conversations):
//             its greedy output must not change because A's conversation sat in the slot
//             (a change is a finding under --batch-invariant, a figure otherwise).
//   restore:  A sends `slots` token-id conversations X at once; then B, one at a time, new requests
//             that open with the first half of one X and go on with fresh tokens: a server with a
//             RAM prompt cache restores X's state into B's slot (llama-server restores an entry
//             that keeps >= 25% of it), and may reuse the shared half only: more than half + 2
//             cached tokens means B was served on A's tokens past what they share (a finding).
// Every B output is searched for A's canary markers too (canary-match.ts): a finding.
// Positive control: A repeats one of its conversations; its reported cached tokens show that the
// server reports reuse at all. Where it reports no cached tokens on any request, the check
// cannot see a restored state: inconclusive (unless a canary or a changed output is found).
// Budget: slots reference + per round (slots fill + slots new + slots repeats + 2 slots restore) + 1 control.
import { matchCanaries } from './canary-match.js';
import { usableTokens, type CheckContext, type CheckOutput } from './context.js';
import { canarySet, randomIds } from './prompts.js';
import type { Finding, RequestRecord } from './types.js';

/** Cached tokens a fresh prompt may show: its first token (a BOS every prompt starts with) and one more. */
export const ALLOWED_CACHED = 2;
const B_TOKENS = 48;
const B_MAX_TOKENS = 12;
/** Tokens of A's token-id conversations of the restore phase; B's requests share the first half. */
const X_TOKENS = 96;

export function slotReuseRounds(budget: number): number {
  return Math.max(2, Math.min(6, Math.floor(budget / 16)));
}

export function slotReuseBudget(budget: number, ctx: Pick<CheckContext, 'facts'>): number {
  const slots = slotsOf(ctx.facts);
  return slots + slotReuseRounds(budget) * 5 * slots + 1;
}

const slotsOf = (facts: CheckContext['facts']): number => Math.max(2, Math.min(8, facts.slots ?? 4));

export function cachedTokens(r: RequestRecord): number | undefined {
  const usage = r.usage as { prompt_tokens_details?: { cached_tokens?: unknown } } | undefined;
  const v = usage?.prompt_tokens_details?.cached_tokens;
  return typeof v === 'number' ? v : undefined;
}

export async function slotReuse(ctx: CheckContext): Promise<CheckOutput> {
  const { client, facts, rng } = ctx;
  const slots = slotsOf(facts);
  const rounds = slotReuseRounds(ctx.budget);
  const total = slotReuseBudget(ctx.budget, ctx);
  let done = 0;
  const tick = (r: RequestRecord): RequestRecord => (ctx.progress(Math.min(total, ++done), total), r);
  const usable = usableTokens(facts);
  // A's conversations: about half of what one request may use (~4.5 tokens a word).
  const words = Math.max(8, Math.min(120, Math.floor(usable / 2 / 6)));
  const canaries = canarySet(rng, slots * rounds + 1, words);
  const decoys = canarySet(rng, slots * rounds + 1, words);
  const conversation = (i: number) =>
    `A private conversation. User: remember these code words: ${canaries.texts[i] as string}\n` +
    'Assistant: I will remember them. User: repeat the code words.\nAssistant:';
  const b = (purpose: string, prompt: readonly number[]) =>
    client
      .complete('B', `slot-reuse: ${purpose}`, {
        model: facts.model,
        prompt: [...prompt],
        max_tokens: B_MAX_TOKENS,
        temperature: 0,
        seed: 1234,
      })
      .then(tick);

  const reference = Array.from({ length: slots }, () => randomIds(rng, Math.min(B_TOKENS, usable - B_MAX_TOKENS)));
  const refOut: RequestRecord[] = [];
  for (const [j, p] of reference.entries()) refOut.push(await b(`reference ${j}`, p));

  const fills: RequestRecord[] = [];
  const news: RequestRecord[] = [];
  const repeats: { ref: RequestRecord; again: RequestRecord }[] = [];
  const restores: { record: RequestRecord; shared: number }[] = [];
  let next = 0;
  for (let round = 0; round < rounds; round++) {
    const batch = Array.from({ length: slots }, () => next++);
    const filled = await Promise.all(
      batch.map((i) =>
        client
          .complete('A', `slot-reuse: conversation ${i}`, {
            model: facts.model,
            prompt: conversation(i),
            max_tokens: 8,
            temperature: 0,
          })
          .then(tick),
      ),
    );
    fills.push(...filled);
    // One at a time: each lands in the least recently used slot, one that held A's conversation.
    for (let j = 0; j < slots; j++) {
      news.push(await b(`new request ${round}.${j}`, randomIds(rng, Math.min(B_TOKENS, usable - B_MAX_TOKENS))));
      const ref = refOut[j] as RequestRecord;
      repeats.push({ ref, again: await b(`repeat of reference ${j}`, reference[j] as number[]) });
    }
    const xLen = Math.min(X_TOKENS, usable - B_MAX_TOKENS);
    const xs = Array.from({ length: slots }, () => randomIds(rng, xLen));
    await Promise.all(
      xs.map((x, j) =>
        client
          .complete('A', `slot-reuse: token-id conversation ${round}.${j}`, {
            model: facts.model,
            prompt: x,
            max_tokens: 4,
            temperature: 0,
          })
          .then(tick),
      ),
    );
    for (const [j, x] of xs.entries()) {
      const shared = Math.floor(xLen / 2);
      const r = await b(`new request opening with half of A's conversation ${round}.${j}`, [
        ...x.slice(0, shared),
        ...randomIds(rng, xLen - shared),
      ]);
      restores.push({ record: r, shared });
    }
  }
  const control = tick(
    await client.complete('A', 'slot-reuse: A repeats its conversation (control)', {
      model: facts.model,
      prompt: conversation(0),
      max_tokens: 8,
      temperature: 0,
    }),
  );

  const aServed = fills.filter((r) => r.status === 200).length;
  const bServed = [...news, ...repeats.map((x) => x.again)].filter((r) => r.status === 200);
  const match = matchCanaries(
    bServed.flatMap((r) => r.texts ?? []),
    canaries,
    decoys,
  );
  const overCached = news.filter((r) => r.status === 200 && (cachedTokens(r) ?? 0) > ALLOWED_CACHED);
  const overRestored = restores.filter(
    (x) => x.record.status === 200 && (cachedTokens(x.record) ?? 0) > x.shared + ALLOWED_CACHED,
  );
  const restoredMax = Math.max(0, ...restores.map((x) => cachedTokens(x.record) ?? 0));
  const reported = [...news, ...fills, control].some((r) => cachedTokens(r) !== undefined);
  const controlCached = cachedTokens(control);
  const changed = repeats.filter(
    (x) => x.ref.status === 200 && x.again.status === 200 && x.ref.texts?.[0] !== x.again.texts?.[0],
  );
  const compared = repeats.filter((x) => x.ref.status === 200 && x.again.status === 200).length;

  const findings: Finding[] = [];
  if (overCached.length > 0)
    findings.push({
      what:
        `${overCached.length} of B's ${news.length} new requests (fresh prompts, nothing to share past the first ` +
        `token) were served on ${Math.max(...overCached.map((r) => cachedTokens(r) ?? 0))} cached tokens at most, ` +
        `in slots that held A's conversation: the slot's state was reused across requests (#27148)`,
      requests: overCached.map((r) => r.id),
    });
  if (overRestored.length > 0)
    findings.push({
      what:
        `${overRestored.length} of B's ${restores.length} requests that share ${restores[0]?.shared ?? 0} tokens ` +
        `with one of A's conversations were served on more cached tokens (up to ${restoredMax}): A's ` +
        "conversation was restored into B's slot past what they share (#27148)",
      requests: overRestored.map((x) => x.record.id),
    });
  if (match.verdict === 'finding')
    findings.push({
      what: `B's outputs in A's slots carry A's canaries: ${match.exactHits.length} markers, ${match.ngramHits} trigrams`,
      requests: bServed
        .filter((r) => matchCanaries(r.texts ?? [], canaries, decoys).verdict === 'finding')
        .map((r) => r.id),
    });
  if (changed.length > 0 && ctx.batchInvariant)
    findings.push({
      what:
        `${changed.length} of ${compared} of B's greedy outputs changed after A's conversation used the slot ` +
        '(the server promises batch invariance)',
      requests: changed.map((x) => x.again.id),
    });
  const problems = [...news, ...fills, ...restores.map((x) => x.record)].filter((r) => r.status !== 200).length;
  const status =
    findings.length > 0
      ? 'finding'
      : aServed === 0 || bServed.length < slots || !reported
        ? 'inconclusive'
        : problems > 0 && bServed.length < news.length / 2
          ? 'error'
          : 'clean';
  const maxCached = Math.max(0, ...news.map((r) => cachedTokens(r) ?? 0));
  const summary =
    status === 'finding'
      ? (findings[0]?.what ?? '')
      : !reported
        ? `the server reports no cached_tokens: a restored slot state cannot be seen (outputs searched: no canary; ` +
          `${changed.length}/${compared} repeats changed)`
        : aServed === 0
          ? "none of A's conversations was served"
          : `B's ${news.length} new requests in A's slots: at most ${maxCached} cached tokens (allowed ` +
            `${ALLOWED_CACHED}); sharing half of A's: at most ${restoredMax} (allowed ` +
            `${(restores[0]?.shared ?? 0) + ALLOWED_CACHED}); no canary in B's outputs; ${changed.length}/${compared} repeats changed; A's ` +
            `control ${controlCached ?? 'n/a'} cached` +
            (problems > 0 ? `; failed requests: ${problems} (see the figures)` : '');
  return {
    status,
    summary,
    findings,
    figures: {
      slots,
      rounds,
      words,
      aServed,
      bOutputs: bServed.length,
      failed: [...news, ...fills, ...restores.map((x) => x.record)]
        .filter((r) => r.status !== 200)
        .map((r) => ({ id: r.id, status: r.status, error: r.errorBody ?? r.error ?? null })),
      allowedCached: ALLOWED_CACHED,
      cachedOnNew: news.map((r) => cachedTokens(r) ?? null),
      restoreShared: restores[0]?.shared ?? null,
      cachedOnRestore: restores.map((x) => cachedTokens(x.record) ?? null),
      controlCached: controlCached ?? null,
      repeatsCompared: compared,
      repeatsChanged: changed.map((x) => x.again.id),
      canaryMatch: match,
      bLatencyMs: {
        reference: refOut.map((r) => r.totalMs ?? null),
        new: news.map((r) => r.totalMs ?? null),
        repeat: repeats.map((x) => x.again.totalMs ?? null),
      },
    },
    plots: [
      {
        kind: 'bars',
        title: "Cached tokens of B's new requests in A's slots",
        unit: 'tokens',
        bars: [
          { label: 'fresh: allowed', value: ALLOWED_CACHED },
          { label: 'fresh: B max', value: maxCached },
          { label: 'half: allowed', value: (restores[0]?.shared ?? 0) + ALLOWED_CACHED },
          { label: 'half: B max', value: restoredMax },
          { label: 'A repeat (control)', value: controlCached ?? 0 },
        ],
      },
    ],
  };
}
