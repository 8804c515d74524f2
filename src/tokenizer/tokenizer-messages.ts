// What the main thread and a tokenizer thread say to each other (tokenizer-pool.ts,
// tokenizer-thread-main.ts), and the recipe both build a tokenizer and template from. Types and
// plain data only: everything here crosses a thread by structured clone.
import type { FaultName } from '../core/index.js';
import type { ChatMessage, ChatTemplate } from './chat-template.js';
import type { Tokenizer } from './tokenizer.js';
import type { ToolSpec } from './tool-prompt.js';

/**
 * Render (chat) and encode: what one request's prompt needs. `cacheScope`: whose word cache the
 * encode may use (the request's tenant; tokenizer.ts EncodeOptions).
 */
export type TokenizeJob =
  | { readonly kind: 'text'; readonly text: string; readonly addSpecialTokens: boolean; readonly cacheScope: string }
  | {
      readonly kind: 'chat';
      readonly cacheScope: string;
      readonly messages: readonly ChatMessage[];
      readonly addGenerationPrompt: boolean;
      readonly addSpecialTokens: boolean;
      readonly tools?: readonly ToolSpec[];
      /** vLLM's chat_template_kwargs (chat-template.ts RenderOptions). */
      readonly templateKwargs?: Readonly<Record<string, unknown>>;
    };

/** What a thread builds its tokenizer and template from (structured-clone safe). */
export interface PromptRecipe {
  /** TokenizerSources as JSON text: one copy to each thread, parsed there. */
  readonly sourcesJson: string;
  /** The model's template text, or null for Tessera's ChatML default. */
  readonly chatTemplate: string | null;
}

export function promptRecipeOf(tokenizer: Tokenizer, template: ChatTemplate): PromptRecipe {
  return {
    sourcesJson: JSON.stringify(tokenizer.sources),
    chatTemplate: template.source === 'model' ? template.text : null,
  };
}

/** A tokenizer thread exits on text holding this, when `crash-tokenizer-thread` is armed (tests only). */
export const TOKENIZER_CRASH_MARKER = '<<tessera:crash-tokenizer-thread>>';

/** workerData of a tokenizer thread. */
export interface TokenizerThreadData {
  readonly recipe: PromptRecipe;
  readonly faults: readonly FaultName[];
}

export type TokenizerThreadRequest = { readonly kind: 'job'; readonly id: number; readonly job: TokenizeJob };

export type TokenizerThreadReply =
  | { readonly kind: 'ready' }
  | { readonly kind: 'done'; readonly id: number; readonly ids: Int32Array }
  | { readonly kind: 'invalid'; readonly id: number; readonly message: string; readonly param: string | null }
  | { readonly kind: 'failed'; readonly id: number; readonly message: string };
