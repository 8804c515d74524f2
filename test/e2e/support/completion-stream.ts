// A streamed completion joined back into one choice per index: texts concatenated, completions
// `logprobs` arrays concatenated, vLLM's `prompt_logprobs` from the chunk that carried it, the
// last finish_reason. For tests comparing a stream with the JSON answer of the same request.
// Must never reorder or drop a chunk's content: what the client would assemble is what it checks.
import type OpenAI from 'openai';

export interface JoinedChoice {
  text: string;
  logprobs: {
    tokens: string[];
    token_logprobs: (number | null)[];
    top_logprobs: unknown[];
    text_offset: number[];
  } | null;
  prompt_logprobs?: unknown;
  finish_reason: string | null;
}

export async function joinCompletionStream(
  stream: AsyncIterable<OpenAI.Completions.Completion>,
): Promise<Map<number, JoinedChoice>> {
  const choices = new Map<number, JoinedChoice>();
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      const joined = choices.get(c.index) ?? { text: '', logprobs: null, finish_reason: null };
      choices.set(c.index, joined);
      joined.text += c.text;
      const lp = c.logprobs as JoinedChoice['logprobs'];
      if (lp !== null && lp !== undefined) {
        joined.logprobs ??= { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
        joined.logprobs.tokens.push(...lp.tokens);
        joined.logprobs.token_logprobs.push(...lp.token_logprobs);
        joined.logprobs.top_logprobs.push(...lp.top_logprobs);
        joined.logprobs.text_offset.push(...lp.text_offset);
      }
      const prompt = (c as { prompt_logprobs?: unknown }).prompt_logprobs;
      if (prompt !== undefined) joined.prompt_logprobs = prompt;
      if (c.finish_reason !== null) joined.finish_reason = c.finish_reason;
    }
  }
  return choices;
}

/** The JSON answer's choices in joinCompletionStream's shape (by index, the index left out), to compare with it. */
export function jsonChoices(json: OpenAI.Completions.Completion): Map<number, JoinedChoice> {
  return new Map(
    json.choices.map((choice) => {
      const { index, ...rest } = choice as typeof choice & { prompt_logprobs?: unknown };
      return [index, rest as unknown as JoinedChoice] as const;
    }),
  );
}
