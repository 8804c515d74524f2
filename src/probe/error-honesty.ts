// error-honesty: inputs a server cannot serve must get a 4xx in OpenAI's error shape; a 200 or
// a 5xx is reported. Over-long prompts (past the context, and past the pool limit the server's
// own errors revealed), over-long max_tokens, and malformed bodies. Then the tail test: a 200
// for a long prompt must have read the whole prompt. Variants of the longest admitted prompt
// that differ only in their last tokens must not all get the same greedy answer, when variants
// of a short prompt do not (the short ones are the control that the model reacts to its tail
// at all). A server that admits a prompt its pool cannot hold and serves a truncated copy (the
// incident's "200 instead of 400") fails it.
// Budget: 15 requests + 2 per pool probe + 8 for the tail test (2 x 4 variants).
import { isOpenAiError } from './client.js';
import { greedy, usableTokens, type CheckContext, type CheckOutput } from './context.js';
import { randomIds, withNewTail } from './prompts.js';
import type { Finding, RequestRecord } from './types.js';

const TAIL_VARIANTS = 4;
const TAIL_TOKENS = 8;
const ANSWER_TOKENS = 8;

interface Case {
  readonly what: string;
  readonly send: () => Promise<RequestRecord>;
}

export function errorHonestyBudget(): number {
  return 15 + 4 + 2 * TAIL_VARIANTS;
}

export async function errorHonesty(ctx: CheckContext): Promise<CheckOutput> {
  const { client, facts, rng } = ctx;
  const { model, contextLength: ctxLen, poolLimit } = facts;
  const ids = (n: number) => randomIds(rng, n);
  const post = (what: string, body: Record<string, unknown>): Case => ({
    what,
    send: () => client.complete('B', what, body),
  });
  const raw = (what: string, text: string): Case => ({
    what,
    send: () => client.raw('B', what, '/v1/completions', text),
  });
  const cases: Case[] = [
    post(`prompt of context + 1 = ${ctxLen + 1} tokens`, { model, prompt: ids(ctxLen + 1), max_tokens: 1 }),
    post(`prompt of 2 x context = ${2 * ctxLen} tokens`, { model, prompt: ids(2 * ctxLen), max_tokens: 1 }),
    post(`prompt + max_tokens = context + 1`, { model, prompt: ids(ctxLen - 8), max_tokens: 9 }),
    post(`max_tokens = context (${ctxLen})`, { model, prompt: ids(4), max_tokens: ctxLen }),
    post('max_tokens = 10^9', { model, prompt: ids(4), max_tokens: 1_000_000_000 }),
    post('max_tokens = 0', { model, prompt: ids(4), max_tokens: 0 }),
    post('max_tokens = -1', { model, prompt: ids(4), max_tokens: -1 }),
    post('max_tokens as a string', { model, prompt: ids(4), max_tokens: 'many' }),
    post('temperature as a string', { model, prompt: 'Hello', max_tokens: 4, temperature: 'hot' }),
    post('prompt as a number', { model, prompt: 5, max_tokens: 4 }),
    post('no prompt', { model, max_tokens: 4 }),
    raw('a body that is not JSON', '{"model": "x", "prompt": '),
    raw('a JSON array as the body', '[1, 2, 3]'),
    raw('an empty body', ''),
    post('an unknown model', { model: `${model}-does-not-exist-${rng.int(1e9)}`, prompt: 'Hello', max_tokens: 4 }),
  ];
  if (poolLimit !== null) {
    cases.push(
      post(`prompt + max_tokens = pool limit + 1 (${poolLimit} + 1)`, { model, prompt: ids(poolLimit), max_tokens: 1 }),
    );
    cases.push(
      post(`prompt between pool limit and context (${Math.floor((poolLimit + ctxLen) / 2)} tokens)`, {
        model,
        prompt: ids(Math.floor((poolLimit + ctxLen) / 2)),
        max_tokens: 1,
      }),
    );
  }
  const total = cases.length + 2 * TAIL_VARIANTS;
  const findings: Finding[] = [];
  const rows: { what: string; status: number | null; shaped: boolean; id: number }[] = [];
  let done = 0;
  for (const c of cases) {
    const r = await c.send();
    const shaped = isOpenAiError(r.errorBody);
    rows.push({ what: c.what, status: r.status, shaped, id: r.id });
    if (r.status === null)
      findings.push({ what: `${c.what}: no answer (${r.error ?? 'connection closed'})`, requests: [r.id] });
    else if (r.status < 400 || r.status >= 500)
      findings.push({ what: `${c.what}: HTTP ${r.status}, expected a 4xx`, requests: [r.id] });
    else if (!shaped)
      findings.push({ what: `${c.what}: HTTP ${r.status} without OpenAI's error shape`, requests: [r.id] });
    ctx.progress(++done, total);
  }

  // The tail test, at the longest prompt the server admits with ANSWER_TOKENS to generate.
  const tail = async (
    numTokens: number,
  ): Promise<{ answers: string[]; statuses: (number | null)[]; ids: number[] }> => {
    const base = ids(numTokens);
    const out = { answers: [] as string[], statuses: [] as (number | null)[], ids: [] as number[] };
    for (let v = 0; v < TAIL_VARIANTS; v++) {
      const prompt = v === 0 ? base : withNewTail(rng, base, TAIL_TOKENS);
      const r = await client.complete(
        'B',
        `tail variant ${v} of a ${numTokens}-token prompt`,
        greedy(model, prompt, ANSWER_TOKENS),
      );
      out.answers.push((r.texts ?? []).join('\u0000'));
      out.statuses.push(r.status);
      out.ids.push(r.id);
      ctx.progress(++done, total);
    }
    return out;
  };
  const longTokens = usableTokens(facts) - ANSWER_TOKENS;
  const short = await tail(Math.min(64, longTokens));
  const long = await tail(longTokens);
  const distinct = (a: readonly string[]) => new Set(a).size;
  const shortOk = short.statuses.every((s) => s === 200) && distinct(short.answers) > 1;
  const longOk = long.statuses.every((s) => s === 200);
  let tailVerdict = 'not run';
  if (!shortOk) tailVerdict = 'inconclusive: variants of a short prompt got the same answer (or an error)';
  else if (!longOk) tailVerdict = 'inconclusive: the longest admitted prompt was refused';
  else if (distinct(long.answers) === 1) {
    tailVerdict = 'finding';
    findings.push({
      what:
        `a ${longTokens}-token prompt got HTTP 200, but ${TAIL_VARIANTS} variants differing only in their ` +
        `last ${TAIL_TOKENS} tokens got the same answer: the server did not read the whole prompt (served a ` +
        `truncated copy?)`,
      requests: long.ids,
    });
  } else tailVerdict = 'clean';
  const tailInconclusive = tailVerdict.startsWith('inconclusive');
  const status = findings.length > 0 ? 'finding' : tailInconclusive ? 'inconclusive' : 'clean';
  const answered4xx = rows.filter((r) => r.status !== null && r.status >= 400 && r.status < 500 && r.shaped).length;
  return {
    status,
    summary:
      findings.length > 0
        ? `${findings.length} dishonest answer${findings.length === 1 ? '' : 's'}: ${findings[0]?.what ?? ''}`
        : `${answered4xx}/${rows.length} bad inputs got a 4xx in OpenAI's shape; tail test ${tailVerdict}`,
    findings,
    figures: {
      cases: rows,
      tail: {
        shortTokens: Math.min(64, longTokens),
        longTokens,
        short: { distinct: distinct(short.answers), statuses: short.statuses },
        long: { distinct: distinct(long.answers), statuses: long.statuses },
        verdict: tailVerdict,
      },
    },
    plots: [
      {
        kind: 'bars',
        title: 'Tail test: distinct answers of 4 variants',
        unit: 'answers',
        bars: [
          { label: `short (${Math.min(64, longTokens)} tokens)`, value: distinct(short.answers) },
          { label: `long (${longTokens} tokens)`, value: distinct(long.answers) },
        ],
      },
    ],
  };
}
