// Self-consistency, the part of non-interference that gives a verdict on any server, batch-
// invariant or not: a greedy answer c_1..c_k to prompt P must agree with the server's own
// one-step greedy predictions, i.e. the first token of P + c_1..c_j must be c_(j+1). The first
// token of every request is computed from the whole prompt; a decoder that reads KV it did not
// write for this prompt (the incident's stale pages) generates tokens that its own prefill does
// not predict. Legitimate disagreement needs a near-tie between the two top logits (numerics of
// a different kernel path), which is rare, so the threshold is generous: a finding needs at
// least MIN_POSITIONS positions checked and under MIN_AGREEMENT of them agreeing.
// Needs token ids back (vLLM's and Tessera's `return_token_ids`); without them: not available.
// Budget: 1 + (answer tokens - 1) requests of max_tokens 1.
import type { CheckContext } from './context.js';

export const MIN_POSITIONS = 6;
export const MIN_AGREEMENT = 0.8;

export type Consistency =
  | { readonly kind: 'unavailable'; readonly why: string }
  | {
      readonly kind: 'measured';
      readonly positions: number;
      readonly agreeing: number;
      readonly agreement: number;
      readonly finding: boolean;
      readonly requests: readonly number[];
    };

export async function selfConsistency(
  ctx: CheckContext,
  prompt: readonly number[],
  answerTokens: number,
  tick: () => void,
): Promise<Consistency> {
  const { client, facts } = ctx;
  const body = (ids: readonly number[], maxTokens: number) => ({
    model: facts.model,
    prompt: [...ids],
    max_tokens: maxTokens,
    temperature: 0,
    seed: 1234,
    return_token_ids: true,
  });
  const reference = await client.complete(
    'B',
    'self-consistency: the greedy answer with ' + 'its token ids',
    body(prompt, answerTokens),
  );
  tick();
  const answer = reference.tokenIds;
  if (reference.status !== 200 || answer === undefined) {
    return {
      kind: 'unavailable',
      why:
        `no token ids in the answer (HTTP ${reference.status ?? 'none'}; the ` +
        `server may not support return_token_ids)`,
    };
  }
  const requests = [reference.id];
  let agreeing = 0;
  let positions = 0;
  for (let j = 1; j < answer.length; j++) {
    const r = await client.complete(
      'B',
      `self-consistency: the next token after ${j} answer tokens`,
      body([...prompt, ...answer.slice(0, j)], 1),
    );
    tick();
    requests.push(r.id);
    const predicted = r.tokenIds?.[0];
    if (r.status !== 200 || predicted === undefined) continue;
    positions++;
    if (predicted === answer[j]) agreeing++;
  }
  const agreement = positions === 0 ? 1 : agreeing / positions;
  return {
    kind: 'measured',
    positions,
    agreeing,
    agreement,
    finding: positions >= MIN_POSITIONS && agreement < MIN_AGREEMENT,
    requests,
  };
}
