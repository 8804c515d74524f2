// grammar-timing: can tenant B tell from TTFT that tenant A sent a JSON schema (a compiled-grammar
// cache shared across tenants)? A schema's field names and enum values are data: a hit tells B
// that someone used them. Each sample i, in random order of its arms after the prime:
//   prime:    A sends a fresh, distinctive schema S_i twice at once (behind a PD router the two go
//             to different prefills, so every node that compiles grammars has S_i, and a later
//             sending can hit wherever it lands); not measured
//   cross:    B sends S_i                   -> compared with B's fresh schemas (cross-tenant test)
//   control:  A sends S_i again             -> compared with A's fresh schemas (same tenant: the
//             positive control, which proves a compile cache exists and this check can see it)
//   baseline: A sends a fresh schema U_i;   fresh: B sends a fresh schema T_i (same shape, size)
// Every request is a structured-output completion (response_format json_schema, strict) of a
// fresh short token-id prompt (no prefix cache in play), max_tokens 1, streamed: its TTFT holds
// the schema's check and compile on a miss, neither on a hit. One-sided KS tests, alpha 0.01
// (timing-verdict.ts). A server without structured output refuses the prime: inconclusive. A
// server that ignores response_format on /v1/completions (llama-server reads it on chat only)
// is found by the first request, a schema of one fixed answer: its output is not that JSON, and
// the check is skipped (inconclusive) with that reason, never timed as if it were constrained.
// Budget: 6 requests per sample; samples = budget / 6 (8 to 40).
// Must never: send a schema twice for B (B's second sending would be B's own hit).
import type { Rng } from '../core/index.js';
import type { CheckContext, CheckOutput } from './context.js';
import { randomIds, shuffle } from './prompts.js';
import { timingArms, timingVerdict, type TimingArm } from './timing-verdict.js';
import type { Tenant } from './types.js';

/** Properties of each schema: enough that a compile costs well above the noise, far under servers' limits. */
export const SCHEMA_PROPERTIES = 48;
const ENUM_VALUES = 6;
const PROMPT_TOKENS = 8;

export function grammarTimingSamples(budget: number): number {
  return Math.max(8, Math.min(40, Math.floor(budget / 6)));
}

export function grammarTimingBudget(budget: number): number {
  return 6 * grammarTimingSamples(budget) + 1;
}

function word(rng: Rng, syllables: number): string {
  let w = '';
  for (let i = 0; i < syllables; i++) w += 'bdfgklmnprstvz'[rng.int(14)] + 'aeiou'[rng.int(5)];
  return w;
}

/** A fresh object schema: SCHEMA_PROPERTIES required properties with pseudo-word names, each an enum of pseudo-words. */
export function distinctiveSchema(rng: Rng): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  while (Object.keys(properties).length < SCHEMA_PROPERTIES) {
    properties[word(rng, 4)] = { type: 'string', enum: Array.from({ length: ENUM_VALUES }, () => word(rng, 3)) };
  }
  return { type: 'object', properties, required: Object.keys(properties), additionalProperties: false };
}

const ONE_ANSWER = {
  type: 'object',
  properties: { k: { type: 'string', enum: ['ok'] } },
  required: ['k'],
  additionalProperties: false,
};

/** Text a server applying ONE_ANSWER can produce: {"k": "ok"} or a prefix of it (max_tokens), with JSON whitespace. */
export function honoursOneAnswer(text: string): boolean {
  const squeezed = text.replace(/\s+/g, '');
  return squeezed.length > 0 && '{"k":"ok"}'.startsWith(squeezed);
}

export async function grammarTiming(ctx: CheckContext): Promise<CheckOutput> {
  const { client, facts, rng } = ctx;
  const samples = grammarTimingSamples(ctx.budget);
  const total = grammarTimingBudget(ctx.budget);
  const arms = timingArms();
  let done = 0;
  let refusal: { status: number | null; message: string } | undefined;
  let primed = 0;
  const send = async (
    arm: TimingArm | 'warm-up' | 'prime',
    tenant: Tenant,
    schema: Record<string, unknown>,
  ): Promise<void> => {
    const r = await client.stream(tenant, `grammar-timing: ${arm}`, {
      model: facts.model,
      prompt: randomIds(rng, PROMPT_TOKENS),
      max_tokens: 1,
      temperature: 0,
      response_format: { type: 'json_schema', json_schema: { name: 'probe', schema, strict: true } },
    });
    ctx.progress(++done, total);
    if (arm === 'warm-up') return;
    if (r.status !== 200 || r.ttftMs === undefined) {
      arms.failed.push(r.id);
      refusal ??= {
        status: r.status,
        message: JSON.stringify(
          (r.errorBody as { error?: { message?: unknown } } | undefined)?.error?.message ?? r.error,
        ),
      };
      return;
    }
    if (arm === 'prime') {
      primed++;
      return;
    }
    arms.ttftMs[arm].push(r.ttftMs);
    arms.ids[arm].push(r.id);
  };
  // Warm-up, not counted (a server's first structured request starts its grammar threads), and the
  // feature test: a schema that admits one answer only, {"k": "ok"}.
  const verify = await client.stream('B', 'grammar-timing: does the server apply response_format?', {
    model: facts.model,
    prompt: randomIds(rng, PROMPT_TOKENS),
    max_tokens: 24,
    temperature: 0,
    response_format: { type: 'json_schema', json_schema: { name: 'probe', schema: ONE_ANSWER, strict: true } },
  });
  ctx.progress(++done, total);
  const text = (verify.texts ?? []).join('').trim();
  if (verify.status === 200 && !honoursOneAnswer(text)) {
    return {
      status: 'inconclusive',
      summary:
        'skipped: the server ignores response_format json_schema on /v1/completions (a schema of one answer, ' +
        `{"k": "ok"}, got ${JSON.stringify(text.slice(0, 40))}): no constrained request to time`,
      findings: [],
      figures: { verifyRequest: verify.id, verifyText: text },
      plots: [],
    };
  }
  for (let i = 0; i < samples; i++) {
    const s = distinctiveSchema(rng);
    await Promise.all([send('prime', 'A', s), send('prime', 'A', s)]);
    if (i === 0 && primed === 0) {
      return {
        status: 'inconclusive',
        summary:
          `the server refused a structured-output request (HTTP ${refusal?.status ?? 'none'}: ` +
          `${refusal?.message ?? ''}): no grammar cache to probe`,
        findings: [],
        figures: { refusal, failed: arms.failed },
        plots: [],
      };
    }
    for (const arm of shuffle(rng, [
      () => send('cross', 'B', s),
      () => send('control', 'A', s),
      () => send('fresh', 'B', distinctiveSchema(rng)),
      () => send('baseline', 'A', distinctiveSchema(rng)),
    ]))
      await arm();
  }
  return timingVerdict(
    arms,
    {
      cache: 'compiled grammar',
      leak: '(a compiled-grammar cache shared across tenants)',
      series: {
        baseline: 'A fresh schema',
        control: 'A repeats its schema (control)',
        fresh: 'B fresh schema',
        cross: "B sends A's schema (cross-tenant)",
      },
      plotTitle: `TTFT of structured requests, schemas of ${SCHEMA_PROPERTIES} enum properties (empirical CDFs)`,
    },
    { figures: { samples, schemaProperties: SCHEMA_PROPERTIES, enumValues: ENUM_VALUES, refusal } },
  );
}
