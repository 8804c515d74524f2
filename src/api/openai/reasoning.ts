// Reasoning parsers: a reasoning model's answer text -> its reasoning (`reasoning_content` in
// chat, a `reasoning` item in the Responses API) and the rest (content, tool calls), whole or as
// it streams, as vLLM's and llama-server's reasoning parsers split it. Two parsers, both for the
// `<think>...</think>` tags:
//   qwen3        Qwen3 writes `<think>` itself at the start of its answer (its template opens no
//                block, unless `enable_thinking: false` closes an empty one in the prompt): text
//                from a leading `<think>` to `</think>` is reasoning; an answer that does not
//                start with `<think>` is all content.
//   deepseek_r1  DeepSeek-R1's template ends the prompt with `<think>\n`: the answer starts inside
//                the block (a leading `<think>` the model repeats is dropped); all of it up to
//                `</think>` is reasoning, and all of it is when `</think>` never comes.
// Either way a prompt that ends with an open `<think>` (the template opened the block) starts the
// answer inside it. A block cut by max_tokens stays reasoning (content null), as llama-server
// reports it. Tags split across stream chunks are held back until they resolve. After
// `</think>` the blank lines before the content are dropped. The third, gpt-oss (OpenAI's harmony
// channels), is reasoning-harmony.ts.
// Pure: never does I/O; the answer's tool calls are parsed from the content, after the split.
import { ConfigError } from '../../core/index.js';
import { HarmonySplitter } from './reasoning-harmony.js';
import type { AnswerSplitter, ReasoningPiece } from './reasoning-piece.js';
import type { ToolPlan } from './tools.js';

export const REASONING_PARSERS = ['qwen3', 'deepseek_r1', 'gpt-oss'] as const;
export type ReasoningParserName = (typeof REASONING_PARSERS)[number];

export const THINK_OPEN = '<think>';
export const THINK_CLOSE = '</think>';

/** How one request's answer is split: the parser, and whether the prompt left a `<think>` block open. */
export interface ReasoningPlan {
  readonly parser: ReasoningParserName;
  readonly startsInReasoning: boolean;
}

/**
 * The parser a server uses: `flag` is --reasoning-parser ('auto' or absent: by the model, gpt-oss
 * (harmony, reasoning-harmony.ts) for arch `gpt-oss`; else by the template, qwen3 for a template
 * that writes `<think>`, none otherwise; 'none': off).
 */
export function reasoningParserFor(
  flag: string | undefined,
  templateText: string,
  arch?: string,
): ReasoningParserName | null {
  if (flag === 'none') return null;
  if (flag === undefined || flag === 'auto') {
    if (arch === 'gpt-oss') return 'gpt-oss';
    // A template that opens the block in the prompt (R1's) is served right by qwen3 too: the
    // prompt's open `<think>` starts the answer inside it (promptOpensThink).
    return templateText.includes(THINK_CLOSE) ? 'qwen3' : null;
  }
  const known = REASONING_PARSERS.find((p) => p === flag);
  if (known === undefined)
    throw new ConfigError(
      `--reasoning-parser must be one of auto, none, ${REASONING_PARSERS.join(', ')}, got '${flag}'`,
    );
  return known;
}

/** Whether the prompt ends inside a `<think>` block (its last tokens' text ends with `<think>` and blanks). */
export function promptOpensThink(promptIds: readonly number[], tokenText: (id: number) => string): boolean {
  let tail = '';
  for (let i = promptIds.length - 1; i >= 0 && i >= promptIds.length - 6; i--) {
    tail = tokenText(promptIds[i] as number) + tail;
    const trimmed = tail.trimEnd();
    if (trimmed.endsWith(THINK_OPEN)) return true;
    if (trimmed.length >= THINK_OPEN.length) return false;
  }
  return false;
}

export function reasoningPlan(parser: ReasoningParserName, promptOpens: boolean): ReasoningPlan {
  return { parser, startsInReasoning: parser === 'deepseek_r1' || (parser !== 'gpt-oss' && promptOpens) };
}

export type { AnswerSplitter, ReasoningPiece } from './reasoning-piece.js';

/** Whether a request's tool plan lets a call be reported (tools offered, `tool_choice` not "none"). */
export const offersCalls = (plan: ToolPlan | undefined): boolean => plan !== undefined && plan.choice.kind !== 'none';

/** The splitter of `plan`; `withTools`: the request offered tools (else a harmony call is dropped, never shown). */
export function answerSplitter(plan: ReasoningPlan, withTools: boolean): AnswerSplitter {
  return plan.parser === 'gpt-oss' ? new HarmonySplitter({ calls: withTools }) : new ReasoningSplitter(plan);
}

type State = 'start' | 'reasoning' | 'after' | 'content';

/** One streamed `<think>` answer: text in, reasoning and content out, in order. */
export class ReasoningSplitter implements AnswerSplitter {
  readonly #startsInReasoning: boolean;
  #state: State = 'start';
  #held = '';
  /** Whether any of the answer was reasoning (else `reasoning_content` is null). */
  #sawReasoning = false;

  constructor(plan: ReasoningPlan) {
    this.#startsInReasoning = plan.startsInReasoning;
  }

  get sawReasoning(): boolean {
    return this.#sawReasoning;
  }

  push(text: string): ReasoningPiece {
    let reasoning = '';
    let content = '';
    let rest = this.#held + text;
    this.#held = '';
    for (;;) {
      switch (this.#state) {
        case 'start': {
          const lead = rest.trimStart();
          if (lead.startsWith(THINK_OPEN)) {
            this.#enterReasoning();
            rest = lead.slice(THINK_OPEN.length);
            continue;
          }
          if (THINK_OPEN.startsWith(lead)) {
            this.#held = rest; // blanks, or a `<think>` not yet whole
            return { reasoning, content };
          }
          if (this.#startsInReasoning) this.#enterReasoning();
          else this.#state = 'content';
          continue;
        }
        case 'reasoning': {
          const at = rest.indexOf(THINK_CLOSE);
          if (at >= 0) {
            reasoning += rest.slice(0, at);
            rest = rest.slice(at + THINK_CLOSE.length);
            this.#state = 'after';
            continue;
          }
          const keep = partialSuffix(rest, THINK_CLOSE);
          reasoning += rest.slice(0, rest.length - keep);
          this.#held = rest.slice(rest.length - keep);
          return { reasoning, content };
        }
        case 'after': {
          const lead = rest.trimStart();
          if (lead === '') return { reasoning, content };
          this.#state = 'content';
          rest = lead;
          continue;
        }
        case 'content':
          return { reasoning, content: content + rest };
      }
    }
  }

  /** The held text at the end of the answer. */
  end(): ReasoningPiece {
    const held = this.#held;
    this.#held = '';
    if (this.#state === 'reasoning') return { reasoning: held, content: '' };
    if (this.#state === 'start') {
      if (this.#startsInReasoning) {
        this.#enterReasoning();
        return { reasoning: held, content: '' };
      }
      this.#state = 'content';
      return { reasoning: '', content: held };
    }
    return { reasoning: '', content: held };
  }

  #enterReasoning(): void {
    this.#state = 'reasoning';
    this.#sawReasoning = true;
  }
}

/** A whole answer split: reasoning null when there was none; content as the rest of the text. */
export function splitReasoning(
  plan: ReasoningPlan,
  text: string,
  withTools = false,
): { reasoning: string | null; content: string } {
  const splitter = answerSplitter(plan, withTools);
  const a = splitter.push(text);
  const b = splitter.end();
  return { reasoning: splitter.sawReasoning ? a.reasoning + b.reasoning : null, content: a.content + b.content };
}

/** The length of the longest suffix of `text` that is a proper prefix of `tag`. */
function partialSuffix(text: string, tag: string): number {
  for (let n = Math.min(tag.length - 1, text.length); n > 0; n--) if (text.endsWith(tag.slice(0, n))) return n;
  return 0;
}
