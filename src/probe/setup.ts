// Before any check: what the server says about itself (/v1/models: the model; its context length
// from context-length.ts, with the source named) and what its errors say (the longest prompt it admits, found by bisection when a prompt that
// fits the context is refused: a pool smaller than the context, the incident's configuration).
import type { Rng } from '../core/index.js';
import { ProbeConnectionError, type ProbeClient } from './client.js';
import { learnContextLength } from './context-length.js';
import { randomIds } from './prompts.js';
import type { ServerFacts } from './types.js';

export async function learnServer(
  client: ProbeClient,
  rng: Rng,
  model: string | undefined,
  sameKey: boolean,
  contextOverride?: number,
): Promise<ServerFacts> {
  client.setCheck('setup');
  const { status, body } = await client.models();
  if (status === 401 || status === 403)
    throw new ProbeConnectionError(`tenant A's API key was refused by /v1/models (HTTP ${status})`);
  const list = ((body as { data?: { id?: string }[] } | null)?.data ?? []).filter((m) => typeof m.id === 'string');
  const entry = model === undefined ? list[0] : list.find((m) => m.id === model);
  if (entry === undefined) {
    throw new ProbeConnectionError(
      model === undefined
        ? `/v1/models lists no model (HTTP ${status})`
        : `/v1/models does not list ${model} (it lists: ${list.map((m) => m.id).join(', ') || 'none'})`,
    );
  }
  const name = entry.id as string;
  const context = await learnContextLength(client, name, entry as Record<string, unknown>, contextOverride);
  const contextLength = context.tokens;
  const fits = async (numTokens: number): Promise<boolean> => {
    const r = await client.complete('A', `does a prompt of ${numTokens} tokens fit?`, {
      model: name,
      prompt: randomIds(rng, numTokens),
      max_tokens: 1,
    });
    if (r.status === null)
      throw new ProbeConnectionError(`the server did not answer a prompt of ${numTokens} tokens: ${r.error ?? ''}`);
    return r.status === 200;
  };
  let poolLimit: number | null = null;
  if (!(await fits(contextLength - 1))) {
    // Bisect the longest admitted prompt: lo fits, hi does not.
    let lo = 1;
    let hi = contextLength - 1;
    if (!(await fits(lo))) throw new ProbeConnectionError('the server refuses even a one-token prompt');
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (await fits(mid)) lo = mid;
      else hi = mid;
    }
    poolLimit = lo + 1; // prompt + max_tokens 1
  }
  return {
    model: name,
    contextLength,
    contextSource: context.source,
    ...(context.slots === undefined ? {} : { slots: context.slots }),
    poolLimit,
    sameKey,
  };
}
