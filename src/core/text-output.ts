// One request's output as a back end hands it to the front end: token ids -> text through its
// TextStream (detokenizer + stop strings), into its one-reader EventChannel. The co-located
// worker and the PD router's ClientStream both speak through it, so a token event's shape, where
// held-back text goes and what a stop string does to the stream are decided here once.
// Owns: the `tokens` events and the terminal event of one request.
// Must never: send text a stop string withholds, or anything after the terminal event.
import type { EventChannel } from './event-channel.js';
import type { FinishReason, TokenLogprob, Usage } from './generate.js';
import type { TesseraError } from './errors/index.js';
import type { TextStream } from './text-stream.js';

export class TextOutput {
  readonly #channel: EventChannel;
  readonly #text: TextStream;
  #numTokens = 0;
  /** The prompt's log-probabilities, sent with the next `tokens` event. */
  #prompt: readonly (TokenLogprob | null)[] | undefined;

  constructor(channel: EventChannel, text: TextStream) {
    this.#channel = channel;
    this.#text = text;
  }

  get ended(): boolean {
    return this.#channel.ended;
  }

  /** Ids taken so far (up to and including the one a stop string matched at). */
  get numTokens(): number {
    return this.#numTokens;
  }

  /** The prompt's own log-probabilities (sampling.promptLogprobs): they go out with the first ids. */
  promptLogprobs(logprobs: readonly (TokenLogprob | null)[]): void {
    this.#prompt = logprobs;
  }

  /**
   * New ids in order, with their log-probabilities (one per id, or none), as one `tokens` event.
   * `last`: no id follows, so the text held back goes out with these. Returns 'stop' when a stop
   * string matched: the event carries the ids up to that one and the text before the match; the
   * caller then ends the request ('stop') and nothing it pushes later is read as text.
   */
  tokens(ids: readonly number[], logprobs: readonly TokenLogprob[], last: boolean): 'more' | 'stop' {
    if (this.ended || this.#text.stopped) return 'more';
    let text = '';
    let taken = 0;
    let stopped = false;
    for (const id of ids) {
      taken++;
      const step = this.#text.push(id);
      text += step.text;
      if (step.kind === 'stop') {
        stopped = true;
        break;
      }
    }
    if (!stopped && last) {
      const rest = this.#text.flush();
      text += rest.text;
      stopped = rest.kind === 'stop';
    }
    this.#numTokens += taken;
    if (taken > 0) {
      const sent = ids.slice(0, taken);
      this.#channel.push({
        type: 'tokens',
        ids: sent,
        text,
        ...(logprobs.length === 0 ? {} : { logprobs: logprobs.slice(0, taken) }),
        ...(this.#prompt === undefined ? {} : { promptLogprobs: this.#prompt }),
      });
      this.#prompt = undefined;
    }
    return stopped ? 'stop' : 'more';
  }

  /** The end: whatever text is still held back, then `finished` ('stop' if a stop string ended it). */
  finished(finishReason: FinishReason, usage: Usage, embedding?: Float32Array): void {
    if (this.ended) return;
    const rest = this.#text.flush();
    // The prompt's log-probabilities go out even when no id did (the first sampled id stopped it).
    if (rest.text !== '' || this.#prompt !== undefined)
      this.#channel.push({
        type: 'tokens',
        ids: [],
        text: rest.text,
        ...(this.#prompt === undefined ? {} : { promptLogprobs: this.#prompt }),
      });
    this.#prompt = undefined;
    this.#channel.push({
      type: 'finished',
      finishReason: this.#text.stopped ? 'stop' : finishReason,
      usage,
      ...(embedding === undefined ? {} : { embedding }),
    });
  }

  failed(error: TesseraError): void {
    this.#channel.push({ type: 'failed', error });
  }
}
