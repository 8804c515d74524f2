// The text of one request's output as it streams: ids -> text through the tokenizer's
// incremental detokenizer, and the stop strings, found here (the scheduler sees only ids).
//
// Held back, never sent early:
//   - bytes that do not complete a UTF-8 character yet (the detokenizer holds those);
//   - a tail of the text that could still become the start of a stop string. Once the text
//     from some position on is not a prefix of any stop string, no later token can make a stop
//     string start there, so everything before the earliest such start is safe to send.
//
//   emitted text | held tail (a proper prefix of some stop string) | <- next token's text
//
// On a match the text before it is sent, the match and everything after it never are.
// Must never send text that a later stop string match would have withheld.

/** What a detokenizer does (src/tokenizer's IncrementalDetokenizer, structurally). */
export interface Detokenizer {
  push(id: number): string;
  flush(): string;
}

export type TextStep =
  /** `text` may be sent now. */
  | { readonly kind: 'text'; readonly text: string }
  /** A stop string matched: send `text` (what came before it), then end the request with 'stop'. */
  | { readonly kind: 'stop'; readonly text: string };

export class TextStream {
  readonly #detokenizer: Detokenizer;
  readonly #stops: readonly string[];
  #held = '';
  #stopped = false;

  constructor(detokenizer: Detokenizer, stops: readonly string[]) {
    this.#detokenizer = detokenizer;
    this.#stops = stops.filter((s) => s !== '');
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /** One more output id. After a stop, further ids add nothing. */
  push(id: number): TextStep {
    if (this.#stopped) return { kind: 'text', text: '' };
    return this.#advance(this.#detokenizer.push(id));
  }

  /** The end of the output: whatever is still held back (unless a stop string ends it first). */
  flush(): TextStep {
    if (this.#stopped) return { kind: 'text', text: '' };
    const step = this.#advance(this.#detokenizer.flush());
    if (step.kind === 'stop') return step;
    const rest = this.#held;
    this.#held = '';
    return { kind: 'text', text: step.text + rest };
  }

  #advance(more: string): TextStep {
    const text = this.#held + more;
    const at = this.#firstMatch(text);
    if (at !== undefined) {
      this.#stopped = true;
      this.#held = '';
      return { kind: 'stop', text: text.slice(0, at) };
    }
    const keep = this.#longestStopPrefixSuffix(text);
    this.#held = text.slice(text.length - keep);
    return { kind: 'text', text: text.slice(0, text.length - keep) };
  }

  #firstMatch(text: string): number | undefined {
    let first: number | undefined;
    for (const stop of this.#stops) {
      const at = text.indexOf(stop);
      if (at >= 0 && (first === undefined || at < first)) first = at;
    }
    return first;
  }

  /** Length of the longest suffix of `text` that is a proper prefix of some stop string. */
  #longestStopPrefixSuffix(text: string): number {
    let best = 0;
    for (const stop of this.#stops) {
      for (let n = Math.min(stop.length - 1, text.length); n > best; n--) {
        if (text.endsWith(stop.slice(0, n))) {
          best = n;
          break;
        }
      }
    }
    return best;
  }
}
