// Chat templates: the model's Jinja `chat_template` (tokenizer_config.json or GGUF
// tokenizer.chat_template) rendered with @huggingface/jinja, or ChatML when a model has none.
// A template that does not parse is a ModelLoadError at load time; one that fails while
// rendering (e.g. its own raise_exception on alternating roles) is an InvalidRequestError,
// since the messages caused it. The rendered text already holds any BOS the template writes:
// encode it with addSpecialTokens: false. With `escapeText` (a Tokenizer's escapePlain), every
// user string (content, tool calls, tool ids, tool schemas) is escaped before rendering, so that
// only the template's own text can hold control tokens (tokenizer-plain-text.ts); encode that
// rendering with the Tokenizer's encodeRendered. This file must never tokenize.
import { Template } from '@huggingface/jinja';
import { InvalidRequestError, ModelLoadError } from '../core/index.js';
import { escapeJson } from './tokenizer-plain-text.js';
import {
  hermesMessages,
  templateKnowsTools,
  templateMessage,
  templateTools,
  type ToolCallText,
  type ToolSpec,
} from './tool-prompt.js';

export interface ChatMessage {
  readonly role: string;
  readonly content: string;
  /** An assistant turn's tool calls (tool-prompt.ts). */
  readonly toolCalls?: readonly ToolCallText[];
  /** A `tool` turn: the call it answers. */
  readonly toolCallId?: string;
  /**
   * An assistant turn's reasoning (the request's `reasoning_content`): the template gets it as
   * `reasoning_content` and as `thinking` (gpt-oss's name), as llama.cpp passes it.
   */
  readonly reasoning?: string;
}

export interface RenderOptions {
  /** End with the text that opens an assistant turn. Default true. */
  readonly addGenerationPrompt?: boolean;
  /** Functions the model may call (tool-prompt.ts says how they reach the template). */
  readonly tools?: readonly ToolSpec[];
  /** Applied to every user string before rendering (a Tokenizer's escapePlain). Default: none. */
  readonly escapeText?: (text: string) => string;
  /**
   * Extra template variables (vLLM's `chat_template_kwargs`, e.g. Qwen3's `enable_thinking`). They
   * never replace the variables set here (messages, tools, bos_token, eos_token, add_generation_prompt).
   */
  readonly templateKwargs?: Readonly<Record<string, unknown>>;
}

export interface ChatTemplate {
  /** Where the template came from: the model's own, or Tessera's ChatML default. */
  readonly source: 'model' | 'default-chatml';
  readonly text: string;
  render(messages: readonly ChatMessage[], options?: RenderOptions): string;
}

/** Used when a model ships no template (as transformers once defaulted to). */
export const DEFAULT_CHAT_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

export interface SpecialTokenTexts {
  readonly bosToken: string | null;
  readonly eosToken: string | null;
}

export function createChatTemplate(text: string | null, specials: SpecialTokenTexts, file: string): ChatTemplate {
  const source = text === null ? 'default-chatml' : 'model';
  const templateText = text ?? DEFAULT_CHAT_TEMPLATE;
  let template: Template;
  try {
    template = new Template(templateText);
  } catch (error) {
    throw new ModelLoadError(
      file,
      `chat template does not parse: ${error instanceof Error ? error.message : String(error)}`,
      error,
    );
  }
  return {
    source,
    text: templateText,
    render(given, options = {}) {
      const escape = options.escapeText;
      const messages = escape === undefined ? given : given.map((m) => escapeMessage(m, escape));
      const tools =
        escape === undefined
          ? (options.tools ?? [])
          : (options.tools ?? []).map((t) => escapeJson(t, escape) as ToolSpec);
      const usesTools = tools.length > 0 || messages.some((m) => m.role === 'tool' || (m.toolCalls?.length ?? 0) > 0);
      const native = usesTools && templateKnowsTools(templateText);
      const turns = usesTools && !native ? hermesMessages(messages, tools) : messages;
      try {
        return template.render({
          ...options.templateKwargs,
          messages: turns.map((m) => templateMessage(m)),
          ...(native && tools.length > 0 ? { tools: templateTools(tools) } : {}),
          bos_token: specials.bosToken ?? '',
          eos_token: specials.eosToken ?? '',
          add_generation_prompt: options.addGenerationPrompt ?? true,
        });
      } catch (error) {
        const why = error instanceof Error ? error.message : String(error);
        throw new InvalidRequestError(`the model's chat template failed on these messages: ${why}`, 'messages', error);
      }
    },
  };
}

function escapeMessage(m: ChatMessage, escape: (text: string) => string): ChatMessage {
  return {
    role: m.role,
    content: escape(m.content),
    ...(m.toolCalls === undefined
      ? {}
      : {
          toolCalls: m.toolCalls.map((c) => ({
            id: escape(c.id),
            name: escape(c.name),
            arguments: escape(c.arguments),
          })),
        }),
    ...(m.toolCallId === undefined ? {} : { toolCallId: escape(m.toolCallId) }),
    ...(m.reasoning === undefined ? {} : { reasoning: escape(m.reasoning) }),
  };
}

/** tokenizer_config.json's chat_template: a string, or a list of named templates (take "default"). */
export function pickChatTemplate(value: unknown, file: string): string | null {
  if (value === undefined || value === null) return null;
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) {
    const named = value.find(
      (t: unknown) => typeof t === 'object' && t !== null && (t as { name?: unknown }).name === 'default',
    );
    const template = (named as { template?: unknown } | undefined)?.template;
    if (typeof template === 'string') return template;
  }
  throw new ModelLoadError(file, 'chat_template must be a string or a list with a template named "default"');
}
