// ClientStream: one client request's events as the router produces them: token ids from decode
// (via the RouterMachine) turned into text and checked for stop strings here, where the
// tokenizer is (core's TextOutput, the same as the co-located worker's), then the one outcome,
// into a one-reader EventChannel the HTTP front end pulls with for-await.
// Must never: deliver anything after the terminal event (finished or failed), send text a stop
// string withholds, or stay silent when the reader leaves early (onReturn: the request is
// aborted through the protocol, never cut).
import {
  EventChannel,
  TextOutput,
  type FinishReason,
  type GenerateEvent,
  type TesseraError,
  type TextStream,
  type TokenLogprob,
} from '../core/index.js';

export class ClientStream implements AsyncIterable<GenerateEvent> {
  readonly #channel: EventChannel;
  readonly #output: TextOutput;
  readonly #numPromptTokens: number;

  /** `onReturn`: the reader left before the outcome (the request is then aborted through the protocol). */
  constructor(text: TextStream, numPromptTokens: number, onReturn: () => void) {
    this.#numPromptTokens = numPromptTokens;
    this.#channel = new EventChannel(onReturn);
    this.#output = new TextOutput(this.#channel, text);
  }

  get ended(): boolean {
    return this.#channel.ended;
  }

  get numTokens(): number {
    return this.#output.numTokens;
  }

  /**
   * New token ids, in order, with their log-probabilities (one per id) when the request asked
   * for them. Returns 'stop' when a stop string matched: the stream has then ended as finished
   * ('stop'), and the caller must abort the rest through the protocol.
   */
  /** The prompt's tokens 1.. log-probabilities (KvDone's, through decode): they go out with the first ids. */
  promptLogprobs(logprobs: readonly TokenLogprob[]): void {
    this.#output.promptLogprobs([null, ...logprobs]);
  }

  tokens(ids: readonly number[], logprobs: readonly TokenLogprob[] = []): 'more' | 'stop' {
    if (this.#output.tokens(ids, logprobs, false) === 'more') return 'more';
    this.finished('stop');
    return 'stop';
  }

  /** Decode finished: what the text stream held back, then the end with usage. */
  /** `cachedTokens`: prefill's prefix-cache hit (KvDone -> Finished); 0 when a stop string ended it here. */
  finished(finishReason: FinishReason, cachedTokens = 0): void {
    const usage = { promptTokens: this.#numPromptTokens, completionTokens: this.#output.numTokens, cachedTokens };
    this.#output.finished(finishReason, usage);
  }

  failed(error: TesseraError): void {
    this.#output.failed(error);
  }

  [Symbol.asyncIterator](): AsyncIterator<GenerateEvent> {
    return this.#channel[Symbol.asyncIterator]();
  }
}
