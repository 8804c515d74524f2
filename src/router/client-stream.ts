// ClientStream: one client request's events as the router produces them: token ids from decode
// (via the RouterMachine) turned into text and checked for stop strings here, where the
// tokenizer is, then the one outcome, into a one-reader EventChannel the HTTP front end pulls with
// for-await.
// Must never: deliver anything after the terminal event (finished or failed), send text a stop
// string withholds, or stay silent when the reader leaves early (onReturn: the request is
// aborted through the protocol, never cut).
import { EventChannel, type FinishReason, type GenerateEvent, type TesseraError, type TokenLogprob } from '../core/index.js';

/** src/worker's TextStream, structurally (the router may not import the worker layer). */
export interface RouterText {
  push(id: number): { readonly kind: 'text' | 'stop'; readonly text: string };
  flush(): { readonly kind: 'text' | 'stop'; readonly text: string };
}

export class ClientStream implements AsyncIterable<GenerateEvent> {
  readonly #channel: EventChannel;
  readonly #text: RouterText;
  readonly #numPromptTokens: number;
  #numTokens = 0;

  /** `onReturn`: the reader left before the outcome (the request is then aborted through the protocol). */
  constructor(text: RouterText, numPromptTokens: number, onReturn: () => void) {
    this.#text = text;
    this.#numPromptTokens = numPromptTokens;
    this.#channel = new EventChannel(onReturn);
  }

  get ended(): boolean {
    return this.#channel.ended;
  }

  get numTokens(): number {
    return this.#numTokens;
  }

  /**
   * New token ids, in order, with their log-probabilities (one per id) when the request asked
   * for them. Returns 'stop' when a stop string matched: the stream has then ended as finished
   * ('stop'), and the caller must abort the rest through the protocol.
   */
  tokens(ids: readonly number[], logprobs: readonly TokenLogprob[] = []): 'more' | 'stop' {
    if (this.ended) return 'more';
    let text = '';
    const sent: number[] = [];
    const event = () => ({ type: 'tokens' as const, ids: sent, text, ...(logprobs.length === 0 ? {} : { logprobs: logprobs.slice(0, sent.length) }) });
    for (const id of ids) {
      this.#numTokens++;
      sent.push(id);
      const step = this.#text.push(id);
      text += step.text;
      if (step.kind === 'stop') {
        this.#channel.push(event());
        this.#finish('stop');
        return 'stop';
      }
    }
    if (sent.length > 0) this.#channel.push(event());
    return 'more';
  }

  /** Decode finished: what the text stream held back, then the end with usage. */
  finished(finishReason: FinishReason, cachedTokens = 0): void {
    if (this.ended) return;
    const rest = this.#text.flush();
    if (rest.text !== '') this.#channel.push({ type: 'tokens', ids: [], text: rest.text });
    this.#finish(rest.kind === 'stop' ? 'stop' : finishReason, cachedTokens);
  }

  failed(error: TesseraError): void {
    this.#channel.push({ type: 'failed', error });
  }

  /** `cachedTokens`: prefill's prefix-cache hit (KvDone -> Finished); 0 when a stop string ended it here. */
  #finish(finishReason: FinishReason, cachedTokens = 0): void {
    this.#channel.push({ type: 'finished', finishReason, usage: { promptTokens: this.#numPromptTokens, completionTokens: this.#numTokens, cachedTokens } });
  }

  [Symbol.asyncIterator](): AsyncIterator<GenerateEvent> {
    return this.#channel[Symbol.asyncIterator]();
  }
}
