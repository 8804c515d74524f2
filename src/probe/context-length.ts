// Where the probe learns the context length of the server it audits, and says which source it
// used: the operator's --context-length, vLLM's /v1/models max_model_len, llama-server's /props
// (default_generation_settings.n_ctx: one slot's context, what one request may use) or its
// /v1/models meta.n_ctx, Ollama's /api/show (num_ctx in the model's parameters), or the wording
// of the error a far too long request gets (vLLM and OpenAI, SGLang, llama-server).
// Must never: guess a number no source stated (a guess skews every check that sizes prompts to it).
import { ProbeConnectionError, type ProbeClient } from './client.js';

export interface ContextLength {
  readonly tokens: number;
  /** Where the number came from, in words, for the reports. */
  readonly source: string;
  /** Slots the server serves at once, where it says (llama-server's /props total_slots). */
  readonly slots?: number;
}

const positive = (v: unknown): number | undefined =>
  typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : undefined;

/** The error wordings that name a context length, with the server that words it so. */
const ERROR_WORDINGS: readonly { readonly re: RegExp; readonly who: string }[] = [
  // vLLM and OpenAI: "This model's maximum context length is 2048 tokens. However, you requested ..."
  { re: /maximum context length is (\d+)/, who: 'vLLM/OpenAI' },
  // SGLang: "Requested token count exceeds the model's maximum context length of 2048 tokens."
  { re: /maximum context length of (\d+)/, who: 'SGLang' },
  // SGLang: "The input (5000 tokens) is longer than the model's context length (2048 tokens)."
  { re: /longer than the model's context length \((\d+) tokens\)/, who: 'SGLang' },
  // llama-server: "request (5000 tokens) exceeds the available context size (1024 tokens), try increasing it"
  { re: /exceeds the available context size \((\d+) tokens\)/, who: 'llama-server' },
];

/** The context length an error body names, with its wording's server; undefined when none does. */
export function contextFromError(body: unknown): ContextLength | undefined {
  const text = JSON.stringify(body ?? '');
  for (const { re, who } of ERROR_WORDINGS) {
    const m = re.exec(text);
    if (m !== null) return { tokens: Number(m[1]), source: `the error's wording (${who}): "${m[0]}"` };
  }
  // llama-server's older errors carry the number as a field: {"error": {..., "n_ctx": 1024}}.
  const nCtx = positive((body as { error?: { n_ctx?: unknown } } | null)?.error?.n_ctx);
  return nCtx === undefined ? undefined : { tokens: nCtx, source: "the error's n_ctx field (llama-server)" };
}

/** num_ctx in Ollama's /api/show parameters ("num_ctx 8192\nstop ..."). */
export function ollamaNumCtx(body: unknown): number | undefined {
  const parameters = (body as { parameters?: unknown } | null)?.parameters;
  if (typeof parameters !== 'string') return undefined;
  const m = /(?:^|\n)\s*num_ctx\s+(\d+)/.exec(parameters);
  return m === null ? undefined : positive(Number(m[1]));
}

export async function learnContextLength(
  client: ProbeClient,
  model: string,
  entry: Record<string, unknown>,
  override: number | undefined,
): Promise<ContextLength> {
  if (override !== undefined) return { tokens: override, source: '--context-length (the operator)' };
  const maxModelLen = positive(entry['max_model_len']);
  if (maxModelLen !== undefined) return { tokens: maxModelLen, source: '/v1/models max_model_len' };
  const props = await client.json('GET', '/props', 'learn the context length (llama-server /props)');
  const perSlot = positive(
    (props.body as { default_generation_settings?: { n_ctx?: unknown } } | null)?.default_generation_settings?.n_ctx,
  );
  if (props.status === 200 && perSlot !== undefined) {
    const slots = positive((props.body as { total_slots?: unknown }).total_slots);
    return {
      tokens: perSlot,
      ...(slots === undefined ? {} : { slots }),
      source: `/props default_generation_settings.n_ctx (one slot's context${slots === undefined ? '' : ` of ${slots} slots`})`,
    };
  }
  const metaCtx = positive((entry['meta'] as { n_ctx?: unknown } | undefined)?.n_ctx);
  if (metaCtx !== undefined) return { tokens: metaCtx, source: '/v1/models meta.n_ctx (llama-server, one slot)' };
  const show = await client.json('POST', '/api/show', 'learn the context length (Ollama /api/show)', { model });
  const numCtx = show.status === 200 ? ollamaNumCtx(show.body) : undefined;
  if (numCtx !== undefined) return { tokens: numCtx, source: '/api/show parameters num_ctx (Ollama)' };
  const r = await client.complete('A', 'learn the context length from the error', {
    model,
    prompt: 'Hello',
    max_tokens: 100_000_000,
  });
  const fromError = contextFromError(r.errorBody);
  if (fromError !== undefined) return fromError;
  throw new ProbeConnectionError(
    'the server states no context length (no /v1/models max_model_len, no /props n_ctx, no num_ctx in ' +
      "Ollama's /api/show) and its error to a far too long request names none; pass --context-length N " +
      "(the tokens one request may use: llama-server's -c divided by -np, Ollama's num_ctx)",
  );
}
