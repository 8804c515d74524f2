// What the HTTP front end needs from whatever generates tokens (the co-located worker, or the
// PD router) and from the model's tokenizer and chat template. Interfaces only: the front end
// codes against these, src/cli plugs the real implementations in. Must never hold state.
//
// Split of duties:
//   api (this module): HTTP, auth -> tenant, validation, chat templating, tokenization, the
//     context-length check, OpenAI shapes, SSE, metrics, error -> HTTP status.
//   back end: admission against its own pool(s), scheduling, sampling, stop strings,
//     detokenization (text arrives in `tokens` events), returning pages on abort.
import type {
  AdapterDirectory,
  BackendHealth,
  BackendStats,
  GenerateEvent,
  GenerateRequest,
  PageMap,
} from '../core/index.js';
import type { ChatMessage as TemplateMessage, ChatTemplate, Tokenizer, ToolSpec } from '../tokenizer/index.js';

export type { AdapterDirectory, AdapterLookup, BackendHealth, BackendStats } from '../core/index.js';

/**
 * A back end. `generate` must honour `signal`: once it aborts, the back end stops work, returns
 * the request's pages (through its ledger, quarantine rules and all) and ends the iterable
 * promptly, either by returning or with a `failed` event carrying an AbortedError. It reports
 * every other failure as a `failed` event (or by throwing a TesseraError from the iterator);
 * after `finished` or `failed` nothing more is read.
 */
export interface Backend {
  /** The name clients pass as `model` (vLLM's served model name). */
  readonly modelName: string;
  /** Where the weights came from (a path or `builtin:...`), shown as `root` in /v1/models. */
  readonly root: string;
  /** Largest prompt tokens + max_tokens this back end serves; the front end rejects more. */
  readonly contextLength: number;
  /** It answers embedding requests (GenerateRequest.embed; co-located only); absent: /v1/embeddings is refused. */
  readonly embeddings?: boolean;
  /** Its LoRA adapters (`--lora`, admin hot-load); absent: no adapters, `model` names the base alone. */
  readonly adapters?: AdapterDirectory;
  generate(request: GenerateRequest, signal: AbortSignal): AsyncIterable<GenerateEvent>;
  health(): Promise<BackendHealth>;
  /** A snapshot for /metrics, taken at scrape time. */
  stats(): Promise<BackendStats>;
  /** Who holds which page, transfers, quarantine: for the admin-only /dashboard (never for API keys). */
  pageMap(): Promise<PageMap>;
}

/**
 * One chat turn after validation (content parts already joined into text): the chat template's
 * message, its role one of the four OpenAI's chat API accepts.
 */
export interface ChatMessage extends TemplateMessage {
  readonly role: 'system' | 'user' | 'assistant' | 'tool';
}

/** vLLM's `chat_template_kwargs`: extra variables for the chat template (Qwen3's `enable_thinking`). */
export type TemplateKwargs = Readonly<Record<string, unknown>>;

/** A function the model may call (OpenAI's `tools[i].function`): the chat template's ToolSpec. */
export type ToolFunction = ToolSpec;

/**
 * Text -> token ids, the way the served model expects them: src/tokenizer's Tokenizer and
 * ChatTemplate behind one interface (`promptCodecOf`), which tests fake.
 *
 * BOS: completions encode with `addSpecialTokens: true` (the tokenizer adds BOS); chat
 * renders the template (which writes any BOS itself) and encodes with `addSpecialTokens:
 * false`, as vLLM does. Token-id prompts are used exactly as given.
 */
export interface PromptCodec {
  /** Token ids must lie in [0, vocabSize). */
  readonly vocabSize: number;
  /** `cacheScope`: whose word cache the encode may use (the request's tenant). */
  encode(text: string, options: { readonly addSpecialTokens: boolean; readonly cacheScope?: string }): number[];
  /** May throw an InvalidRequestError when the template refuses the messages. */
  renderChat(
    messages: readonly TemplateMessage[],
    options: {
      readonly addGenerationPrompt: boolean;
      readonly tools?: readonly ToolFunction[];
      readonly templateKwargs?: TemplateKwargs;
    },
  ): string;
  /**
   * Render and encode a chat with user text as plain text: special-token strings in messages and
   * tools are not special tokens, only the template's own are. Absent: encode(renderChat(...)).
   */
  encodeChat?(
    messages: readonly TemplateMessage[],
    options: {
      readonly addGenerationPrompt: boolean;
      readonly addSpecialTokens: boolean;
      readonly tools?: readonly ToolFunction[];
      readonly cacheScope?: string;
      readonly templateKwargs?: TemplateKwargs;
    },
  ): number[];
  /** One token's text, decoded alone (for log-probabilities; part of a character decodes to U+FFFD). */
  tokenText(id: number): string;
  /** Token ids -> text, as a whole (for /detokenize); absent: the ids' texts joined. */
  decode?(ids: readonly number[]): string;
}

/** Build a PromptCodec from src/model's tokenizer and chat template. */
export function promptCodecOf(
  tokenizer: Pick<Tokenizer, 'vocabSize' | 'encode' | 'decode'> &
    Partial<Pick<Tokenizer, 'escapePlain' | 'encodeRendered'>>,
  template: Pick<ChatTemplate, 'render'>,
): PromptCodec {
  const { escapePlain, encodeRendered } = tokenizer;
  const encodeChat: Pick<PromptCodec, 'encodeChat'> =
    escapePlain === undefined || encodeRendered === undefined
      ? {}
      : {
          encodeChat: (messages, options) =>
            encodeRendered.call(
              tokenizer,
              template.render(messages, {
                addGenerationPrompt: options.addGenerationPrompt,
                ...(options.tools === undefined ? {} : { tools: options.tools }),
                ...(options.templateKwargs === undefined ? {} : { templateKwargs: options.templateKwargs }),
                escapeText: (text) => escapePlain.call(tokenizer, text),
              }),
              {
                addSpecialTokens: options.addSpecialTokens,
                ...(options.cacheScope === undefined ? {} : { cacheScope: options.cacheScope }),
              },
            ),
        };
  return {
    ...encodeChat,
    vocabSize: tokenizer.vocabSize,
    encode: (text, options) =>
      tokenizer.encode(text, {
        addSpecialTokens: options.addSpecialTokens,
        ...(options.cacheScope === undefined ? {} : { cacheScope: options.cacheScope }),
      }),
    renderChat: (messages, options) =>
      template.render(messages, {
        addGenerationPrompt: options.addGenerationPrompt,
        ...(options.tools === undefined ? {} : { tools: options.tools }),
        ...(options.templateKwargs === undefined ? {} : { templateKwargs: options.templateKwargs }),
      }),
    tokenText: (id) => tokenizer.decode([id]),
    decode: (ids) => tokenizer.decode(ids),
  };
}
