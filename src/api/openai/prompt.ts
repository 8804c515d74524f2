// Validated call -> prompt token ids and sampling parameters, with the context-length check
// that runs before the back end is called (defence 2 at the front door; each node re-checks
// against its own pool). Must never let a request whose prompt tokens + max_tokens exceed the
// context length reach the back end, unless the `skip-admission` fault point is on (tests only).
import {
  InvalidRequestError,
  isInvalidRequestError,
  isTesseraError,
  type FaultSet,
  type SamplingParams,
} from '../../core/index.js';
import { contextLengthError } from '../../pages/index.js';
import type { ChatMessage, PromptCodec, TemplateKwargs, ToolFunction } from '../backend.js';
import { problem, problemOf } from '../http/errors.js';
import { validating, type CommonParams, type Validated } from './params.js';
import type { PromptTokenizer } from './prompt-tokenizer.js';
import type { CompletionPrompt } from './validate-completion.js';

/** `cacheScope`: the request's tenant (its word cache; prompt-tokenizer.ts). */
export async function completionTokens(
  prompt: CompletionPrompt,
  addSpecialTokens: boolean,
  codec: PromptCodec,
  tokenizer: PromptTokenizer,
  cacheScope: string,
): Promise<Validated<readonly number[]>> {
  switch (prompt.kind) {
    case 'text':
      return tokenized(
        () => tokenizer.tokenize({ kind: 'text', text: prompt.text, addSpecialTokens, cacheScope }),
        'prompt',
      );
    case 'tokens':
      return validating(() => checkIds(prompt.ids, codec.vocabSize, 'prompt'));
  }
}

export async function chatTokens(
  messages: readonly ChatMessage[],
  options: {
    readonly addGenerationPrompt: boolean;
    readonly addSpecialTokens: boolean;
    readonly tools?: readonly ToolFunction[];
    readonly templateKwargs?: TemplateKwargs;
  },
  tokenizer: PromptTokenizer,
  cacheScope: string,
): Promise<Validated<readonly number[]>> {
  return tokenized(
    () =>
      tokenizer.tokenize({
        kind: 'chat',
        cacheScope,
        messages,
        addGenerationPrompt: options.addGenerationPrompt,
        addSpecialTokens: options.addSpecialTokens,
        ...(options.tools === undefined ? {} : { tools: options.tools }),
        ...(options.templateKwargs === undefined ? {} : { templateKwargs: options.templateKwargs }),
      }),
    'messages',
  );
}

/**
 * The ids, or the problem: a template's refusal (400) and a full tokenizer queue (503) are the
 * request's answer; anything else (a thread that died on it, a bug) throws on to the server's 500.
 */
async function tokenized(run: () => Promise<readonly number[]>, param: string): Promise<Validated<readonly number[]>> {
  try {
    return { kind: 'ok', value: nonEmpty(await run(), param) };
  } catch (error) {
    if (isInvalidRequestError(error))
      return { kind: 'bad', problem: problem(error.code, error.message, error.param ?? null) };
    if (isTesseraError(error) && error.code === 'overloaded') return { kind: 'bad', problem: problemOf(error) };
    throw error;
  }
}

function nonEmpty(ids: readonly number[], param: string): readonly number[] {
  if (ids.length === 0) throw new InvalidRequestError(`\`${param}\` encodes to no tokens.`, param);
  return ids;
}

function checkIds(ids: readonly number[], vocabSize: number, param: string): readonly number[] {
  const bad = ids.find((id) => id >= vocabSize);
  if (bad !== undefined)
    throw new InvalidRequestError(`Token id ${bad} in \`${param}\` is out of vocabulary (size ${vocabSize}).`, param);
  return ids;
}

export interface PlanContext {
  readonly contextLength: number;
  readonly vocabSize: number;
  readonly faults: FaultSet;
  /** Draws a seed for a request that gave none. */
  readonly drawSeed: () => number;
  /** The field that holds the prompt (`prompt` or `messages`), named in errors. */
  readonly promptParam: string;
}

/**
 * Sampling parameters for a prompt of `numPromptTokens`, after the context-length check.
 * max_tokens defaults to what remains of the context, as in vLLM.
 */
export function planSampling(
  numPromptTokens: number,
  params: CommonParams,
  ctx: PlanContext,
): Validated<SamplingParams> {
  const { contextLength } = ctx;
  const maxTokens = params.maxTokens ?? Math.max(1, contextLength - numPromptTokens);
  const refusal = ctx.faults.has('skip-admission')
    ? undefined
    : contextLengthError(contextLength, numPromptTokens, params.maxTokens, ctx.promptParam);
  if (refusal !== undefined) return { kind: 'bad', problem: problemOf(refusal) };
  const badStop = params.stopTokenIds.find((id) => id >= ctx.vocabSize);
  if (badStop !== undefined) {
    return {
      kind: 'bad',
      problem: problem(
        'invalid_request',
        `Token id ${badStop} in \`stop_token_ids\` is out of vocabulary (size ${ctx.vocabSize}).`,
        'stop_token_ids',
      ),
    };
  }
  return {
    kind: 'ok',
    value: {
      maxTokens,
      temperature: params.temperature,
      topP: params.topP,
      topK: params.topK,
      seed: params.seed ?? ctx.drawSeed(),
      stop: params.stop,
      stopTokenIds: params.stopTokenIds,
      ignoreEos: params.ignoreEos,
      presencePenalty: params.presencePenalty,
      frequencyPenalty: params.frequencyPenalty,
      logprobs: params.logprobs,
    },
  };
}
