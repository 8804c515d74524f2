// The gpt-oss reasoning parser: OpenAI's harmony format -> reasoning, content and tool calls, whole
// or as it streams. A harmony answer is a run of messages, each a header and a body:
//   <|channel|>analysis<|message|>We need the weather.<|end|>
//   <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>
//   <|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>
// (the prompt ends with `<|start|>assistant`, so the first header has no `<|start|>`; the
// recipient `to=...` may stand before or after `<|channel|>`). Bodies go by channel:
//   analysis                          reasoning (`reasoning_content`, Responses reasoning items)
//   final                             content
//   commentary (or analysis)          a tool call of NAME, its body the arguments: written on as a
//     to=functions.NAME
//                                     Hermes `<tool_call>{"name","arguments"}</tool_call>` block, so
//                                     the request's ToolPlan (tool-output.ts) reports it, only for
//                                     functions the request offered, whole and streamed
//   commentary (no recipient), other  content (a preamble the user may see)
// A message ends at `<|end|>`, `<|call|>` or `<|return|>` (the last two stop generation, so they
// may also be missing: the answer's end ends the message). Special tokens split across stream
// chunks are held back until they resolve. Text outside any body (between `<|end|>` and the next
// `<|start|>`) is dropped. A body cut by max_tokens keeps its channel: an analysis body stays
// reasoning (content null); a cut tool call's block never closes, so it is no call.
// Must never: show analysis text as content, or a tool call's arguments as content.
// Pure: never does I/O; selected by `--reasoning-parser gpt-oss` or a model whose arch is gpt-oss.
import type { AnswerSplitter, ReasoningPiece } from './reasoning-piece.js';

export const HARMONY = {
  start: '<|start|>',
  channel: '<|channel|>',
  message: '<|message|>',
  end: '<|end|>',
  call: '<|call|>',
  return: '<|return|>',
  constrain: '<|constrain|>',
} as const;

/** Where a body goes. */
type Sink = { readonly kind: 'reasoning' } | { readonly kind: 'content' } | { readonly kind: 'call'; name: string };

type State =
  | { readonly kind: 'header'; text: string }
  | { readonly kind: 'body'; readonly sink: Sink }
  /** Between messages: waiting for `<|start|>`. */
  | { readonly kind: 'between' };

const BODY_ENDS = [HARMONY.end, HARMONY.call, HARMONY.return, HARMONY.start] as const;

/** One streamed harmony answer: text in, reasoning and content (with tool-call blocks) out, in order. */
export class HarmonySplitter implements AnswerSplitter {
  /** The request offered tools: a call becomes a `<tool_call>` block; else its body is dropped. */
  readonly #calls: boolean;
  #state: State = { kind: 'header', text: '' };
  #held = '';
  #sawReasoning = false;

  constructor(options: { readonly calls: boolean }) {
    this.#calls = options.calls;
  }

  get sawReasoning(): boolean {
    return this.#sawReasoning;
  }

  push(text: string): ReasoningPiece {
    let reasoning = '';
    let content = '';
    let rest = this.#held + text;
    this.#held = '';
    const emit = (sink: Sink, piece: string): void => {
      if (sink.kind === 'reasoning') reasoning += piece;
      else if (sink.kind === 'content' || this.#calls) content += piece; // a call's arguments: inside its open block
    };
    for (;;) {
      const state = this.#state;
      switch (state.kind) {
        case 'header': {
          // The header (a few tokens) is held whole until `<|message|>`.
          const all = state.text + rest;
          const at = all.indexOf(HARMONY.message);
          if (at < 0) {
            state.text = all;
            return { reasoning, content };
          }
          const sink = sinkOf(all.slice(0, at));
          rest = all.slice(at + HARMONY.message.length);
          if (sink.kind === 'reasoning') this.#sawReasoning = true;
          if (sink.kind === 'call' && this.#calls)
            content += `<tool_call>{"name":${JSON.stringify(sink.name)},"arguments":`;
          this.#state = { kind: 'body', sink };
          continue;
        }
        case 'body': {
          const hit = firstOf(rest, BODY_ENDS);
          if (hit === null) {
            const keep = heldSuffix(rest, BODY_ENDS);
            emit(state.sink, rest.slice(0, rest.length - keep));
            this.#held = rest.slice(rest.length - keep);
            return { reasoning, content };
          }
          emit(state.sink, rest.slice(0, hit.at));
          if (state.sink.kind === 'call' && this.#calls) content += '}</tool_call>';
          rest = rest.slice(hit.at + hit.tag.length);
          this.#state = hit.tag === HARMONY.start ? { kind: 'header', text: '' } : { kind: 'between' };
          continue;
        }
        case 'between': {
          const at = rest.indexOf(HARMONY.start);
          if (at < 0) {
            this.#held = rest.slice(rest.length - partialSuffix(rest, HARMONY.start));
            return { reasoning, content };
          }
          rest = rest.slice(at + HARMONY.start.length);
          this.#state = { kind: 'header', text: '' };
          continue;
        }
      }
    }
  }

  /** The held text at the end of the answer: a body ends with it (its end token was a stop token, left out). */
  end(): ReasoningPiece {
    const held = this.#held;
    this.#held = '';
    const state = this.#state;
    this.#state = { kind: 'between' };
    if (state.kind !== 'body') return { reasoning: '', content: '' };
    const piece = BODY_ENDS.some((tag) => tag.startsWith(held) && held !== '') ? '' : held;
    if (state.sink.kind === 'reasoning') return { reasoning: piece, content: '' };
    // A call whose `<|call|>` was the stop token (left out of the text) is whole: its block closes.
    // One cut by max_tokens closes too, but its arguments do not parse, so it is no call.
    if (state.sink.kind === 'call') return { reasoning: '', content: this.#calls ? `${piece}}</tool_call>` : '' };
    return { reasoning: '', content: piece };
  }
}

/** A header's destination: `to=functions.NAME` on commentary is a call, analysis reasoning, the rest content. */
function sinkOf(header: string): Sink {
  const channel = /<\|channel\|>\s*([A-Za-z_]+)/.exec(header)?.[1];
  const recipient = /\bto=functions\.([A-Za-z0-9_.-]+)/.exec(header)?.[1];
  // gpt-oss addresses function calls on commentary, and now and then on analysis: a call either way.
  if (recipient !== undefined && channel !== 'final') return { kind: 'call', name: recipient };
  if (channel === 'analysis') return { kind: 'reasoning' };
  return { kind: 'content' };
}

function firstOf(text: string, tags: readonly string[]): { at: number; tag: string } | null {
  let best: { at: number; tag: string } | null = null;
  for (const tag of tags) {
    const at = text.indexOf(tag);
    if (at >= 0 && (best === null || at < best.at)) best = { at, tag };
  }
  return best;
}

/** The longest suffix of `text` that is a proper prefix of one of `tags`. */
function heldSuffix(text: string, tags: readonly string[]): number {
  return Math.max(...tags.map((tag) => partialSuffix(text, tag)));
}

function partialSuffix(text: string, tag: string): number {
  for (let n = Math.min(tag.length - 1, text.length); n > 0; n--) if (text.endsWith(tag.slice(0, n))) return n;
  return 0;
}
