// A one-reader queue of a request's GenerateEvents: a back end (the co-located worker loop, the PD
// router's ClientStream) pushes synchronously as events come, the front end pulls with
// `for await`. Unbounded, but a request's events are at most one per generated token plus its
// end, which admission already bounded.
// Must never deliver anything after the terminal event (finished or failed), and must tell
// its owner when the reader stops early (`onReturn`), so the request is aborted, not orphaned.
import type { GenerateEvent } from './generate.js';

export class EventChannel implements AsyncIterable<GenerateEvent> {
  readonly #queue: GenerateEvent[] = [];
  #wake: (() => void) | undefined;
  #ended = false;
  #returned = false;
  readonly #onReturn: () => void;

  /** `onReturn`: the reader left before the terminal event (called at most once). */
  constructor(onReturn: () => void) {
    this.#onReturn = onReturn;
  }

  /** True once the terminal event was pushed (or the reader left). */
  get ended(): boolean {
    return this.#ended || this.#returned;
  }

  push(event: GenerateEvent): void {
    if (this.ended) return;
    this.#queue.push(event);
    if (event.type !== 'tokens') this.#ended = true;
    this.#wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<GenerateEvent> {
    try {
      for (;;) {
        const event = this.#queue.shift();
        if (event !== undefined) {
          yield event;
          if (event.type !== 'tokens') return;
          continue;
        }
        await new Promise<void>((resolve) => (this.#wake = resolve));
        this.#wake = undefined;
      }
    } finally {
      if (!this.#ended && !this.#returned) {
        this.#returned = true;
        this.#onReturn();
      }
    }
  }
}
