// Completions' `echo` and vLLM's `prompt_logprobs`: how a choice shows its prompt. With `echo`
// the prompt's text goes before the choice's text and, with `logprobs`, its tokens before the
// output's in `logprobs` (the first token's entries null: nothing precedes it, as OpenAI and vLLM
// answer); `prompt_logprobs` is vLLM's list [null, {id: {logprob, rank, decoded_token}}, ...].
// The back end computes the prompt's log-probabilities in its prefill (sampling.promptLogprobs;
// src/engine/prompt-logprobs.ts) and sends them with the first tokens event. Streaming, the
// prompt's part is a chunk of its own before the output's first (shapes.ts echoChunk), and the
// output's text offsets start after it (echoTextOffset): the chunks joined equal the JSON answer.
// Owns: the plan of one request's echo and the JSON of its prompt part. Must never do I/O, nor
// show a log-probability the back end did not send (a missing one is an error, not a zero).
import { InvariantError, type SamplingParams, type TokenLogprob } from '../../core/index.js';

export interface EchoPlan {
  /** `echo`: the prompt goes before the choice's text (and tokens). */
  readonly echo: boolean;
  /** `logprobs` of the request (alternatives per token); null: none asked. */
  readonly logprobs: number | null;
  /** vLLM's `prompt_logprobs`: alternatives per prompt token; null: the field is left out. */
  readonly promptLogprobs: number | null;
  /** `max_tokens` 0: the token the back end sampled is not part of the answer. */
  readonly promptOnly: boolean;
  /** Choice `index`'s prompt: its text (as sent, or its ids decoded) and ids. */
  promptOf(index: number): { readonly text: string; readonly ids: readonly number[] };
  /** A token's text alone (the codec's tokenText). */
  readonly tokenText: (id: number) => string;
}

/** What the back end must compute for an echo plan: sampling.promptLogprobs, or nothing. */
export function echoSampling(plan: Omit<EchoPlan, 'promptOf' | 'tokenText'>): Pick<SamplingParams, 'promptLogprobs'> {
  const fromEcho = plan.echo && plan.logprobs !== null ? plan.logprobs : null;
  const topN = Math.max(fromEcho ?? -1, plan.promptLogprobs ?? -1);
  return topN < 0 ? {} : { promptLogprobs: topN };
}

/** One choice as echo shows it: its text, its completions `logprobs`, and vLLM's `prompt_logprobs` when asked. */
export function echoChoice(
  plan: EchoPlan,
  index: number,
  text: string,
  /** The output's completions `logprobs` object (text offsets from 0), or null. */
  outputLogprobs: CompletionLogprobs | null,
  prompt: readonly (TokenLogprob | null)[] | undefined,
): { text: string; logprobs?: CompletionLogprobs | null; prompt_logprobs?: object } {
  const { text: promptText, ids } = plan.promptOf(index);
  const wantsPrompt = (plan.echo && plan.logprobs !== null) || plan.promptLogprobs !== null;
  if (wantsPrompt && (prompt === undefined || prompt.length !== ids.length || prompt.slice(1).includes(null)))
    throw new InvariantError(`the back end sent no log-probabilities for choice ${index}'s prompt`);
  const out: { text: string; logprobs?: CompletionLogprobs | null; prompt_logprobs?: object } = {
    text: plan.echo ? promptText + text : text,
  };
  if (plan.echo && plan.logprobs !== null && prompt !== undefined) {
    const head = promptPart(plan, ids, prompt, plan.logprobs);
    const shift = head.text_offset.length === 0 ? 0 : promptTextLength(plan, ids);
    out.logprobs =
      outputLogprobs === null
        ? head
        : {
            tokens: [...head.tokens, ...outputLogprobs.tokens],
            token_logprobs: [...head.token_logprobs, ...outputLogprobs.token_logprobs],
            top_logprobs: [...head.top_logprobs, ...outputLogprobs.top_logprobs],
            text_offset: [...head.text_offset, ...outputLogprobs.text_offset.map((at) => at + shift)],
          };
  }
  if (plan.promptLogprobs !== null && prompt !== undefined) {
    const topN = plan.promptLogprobs;
    out.prompt_logprobs = ids.map((id, p) => {
      const lp = prompt[p];
      if (p === 0 || lp === undefined || lp === null) return null;
      const entry = (logprob: number, rank: number, of: number) => ({
        logprob,
        rank,
        decoded_token: plan.tokenText(of),
      });
      const top = lp.top.slice(0, topN);
      const rankOf = top.findIndex((t) => t.id === id);
      return Object.fromEntries([
        [id, entry(lp.logprob, rankOf >= 0 ? rankOf + 1 : (lp.promptRank ?? top.length + 1), id)],
        ...top.filter((t) => t.id !== id).map((t, r) => [t.id, entry(t.logprob, r + 1, t.id)] as const),
      ]);
    });
  }
  return out;
}

/**
 * Streaming: where the output's `text_offset` starts in the choice's text as a whole (the echoed
 * prompt's length as logprobs count it, when the prompt's part carries logprobs; else 0), so the
 * chunks joined equal echoChoice's answer.
 */
export function echoTextOffset(plan: EchoPlan, index: number): number {
  return plan.echo && plan.logprobs !== null ? promptTextLength(plan, plan.promptOf(index).ids) : 0;
}

/** OpenAI's completions `logprobs` object. */
export interface CompletionLogprobs {
  readonly tokens: readonly string[];
  readonly token_logprobs: readonly (number | null)[];
  readonly top_logprobs: readonly (Readonly<Record<string, number>> | null)[];
  readonly text_offset: readonly number[];
}

function promptTextLength(plan: EchoPlan, ids: readonly number[]): number {
  return ids.reduce((n, id) => n + plan.tokenText(id).length, 0);
}

/** The prompt's tokens in completions' shape: the first with null entries. */
function promptPart(
  plan: EchoPlan,
  ids: readonly number[],
  prompt: readonly (TokenLogprob | null)[],
  topN: number,
): CompletionLogprobs {
  let offset = 0;
  const text_offset = ids.map((id) => {
    const at = offset;
    offset += plan.tokenText(id).length;
    return at;
  });
  return {
    tokens: ids.map(plan.tokenText),
    token_logprobs: ids.map((_, p) => prompt[p]?.logprob ?? null),
    top_logprobs: ids.map((id, p) => {
      const lp = prompt[p];
      if (lp === null || lp === undefined) return null;
      return Object.fromEntries([
        ...lp.top.slice(0, topN).map((t) => [plan.tokenText(t.id), t.logprob] as const),
        [plan.tokenText(id), lp.logprob] as const,
      ]);
    }),
    text_offset,
  };
}
