// POST /v1/completions and POST /v1/chat/completions, from request bytes to GenerateRequest.
//
// Life of a request here:
//   1. auth: bearer key -> tenant (401 if keys are configured and it does not match);
//   2. body: read within maxBodyBytes (413), strict UTF-8 + JSON (400);
//   3. validate the fields (400 naming the field), check the model name (404);
//   4. chat template, tokenize, check prompt + max_tokens against the context length (400);
//   5. a fresh rid and (if none was given) a server-drawn seed; run-generate.ts does the rest.
// Every path ends with exactly one counted outcome. Must never call the back end for a request
// that failed any of steps 1-4, and never take the tenant from anything but step 1.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { asTenantId, type ConstraintSpec, type FaultSet, type SamplingParams } from '../../core/index.js';
import { resolveModel } from './adapter-model.js';
import type { GrammarEngine } from '../../grammar/index.js';
import type { TenantAuth } from '../http/auth.js';
import type { Backend, PromptCodec } from '../backend.js';
import type { PromptTokenizer } from './prompt-tokenizer.js';
import type { Clock } from '../http/clock.js';
import { requestConstraint } from './constraint-check.js';
import { readTools, shownTools, type ToolPlan } from './tools.js';
import { problem } from '../http/errors.js';
import { admitJson, countOutcome, refuseWith } from './admit-json.js';
import type { ApiMetrics, Outcome } from '../ops/metrics.js';
import { MAX_CHOICES, validating, type CommonParams, type JsonObject, type Validated } from './params.js';
import { chatBytes, promptTooLong } from './prompt-bound.js';
import { chatTokens, completionTokens, planSampling } from './prompt.js';
import type { RequestIds } from '../http/request-ids.js';
import { promptOpensThink, reasoningPlan, type ReasoningParserName, type ReasoningPlan } from './reasoning.js';
import { echoSampling, type EchoPlan } from './echo.js';
import { runGenerate } from './run-generate.js';
import type { Endpoint } from './shapes.js';
import { validateChat } from './validate-chat.js';
import { validateCompletion } from './validate-completion.js';
import { clientAbort } from '../http/client-abort.js';

export interface GenerateContext {
  readonly backend: Backend;
  readonly codec: PromptCodec;
  /** Renders and tokenizes prompts (off the main thread, but for short text: prompt-tokenizer.ts). */
  readonly tokenizer: PromptTokenizer;
  readonly auth: TenantAuth;
  readonly metrics: ApiMetrics;
  readonly clock: Clock;
  readonly ids: RequestIds;
  readonly faults: FaultSet;
  readonly maxBodyBytes: number;
  /** Text prompts longer than this many UTF-8 bytes are refused before tokenization (prompt-bound.ts). */
  readonly maxPromptBytes: number;
  /** How long an oversize body may keep arriving after its 413 before the socket is cut. */
  readonly oversizeGraceMs: number;
  /** Aborted when the server gives up draining: in-flight requests end. */
  readonly shutdown: AbortSignal;
  readonly logError: (message: string, error: unknown) => void;
  /** Structured output (`response_format`); absent: such requests get 400. */
  readonly grammar?: GrammarEngine;
  /** The reasoning parser of chat and Responses answers (--reasoning-parser, or the template's); absent: none. */
  readonly reasoningParser?: ReasoningParserName;
}

/** A chat answer's reasoning split: with a parser, unless a constraint shapes the whole answer (its grammar has no <think>). */
export function reasoningOf(
  ctx: GenerateContext,
  promptTokens: readonly number[],
  constrained: boolean,
): { readonly reasoning?: ReasoningPlan } {
  if (ctx.reasoningParser === undefined || constrained) return {};
  const opens = promptOpensThink(promptTokens, (id) => ctx.codec.tokenText(id));
  return { reasoning: reasoningPlan(ctx.reasoningParser, opens) };
}

interface Parsed {
  readonly params: CommonParams;
  /** Chat with `tools`. */
  readonly tools?: ToolPlan;
  /** One prompt (chat), or one or more (completions). */
  readonly prompts: readonly (readonly number[])[];
  readonly constraint: ConstraintSpec | undefined;
  /** Completions with `echo` or `prompt_logprobs` (echo.ts): the plan, and each prompt's text as sent (null: token ids). */
  readonly echo?: Omit<EchoPlan, 'promptOf' | 'tokenText'> & { readonly texts: readonly (string | null)[] };
}

/**
 * The request's constraint, checked before its prompt is templated and tokenized: a schema over
 * a limit (a 500 KB tool list under tool_choice `required`) is refused before that work.
 */
type ConstraintOf = (tools: ToolPlan | undefined) => Promise<Validated<ConstraintSpec | undefined>>;

export async function handleGenerate(
  endpoint: Endpoint,
  req: IncomingMessage,
  res: ServerResponse,
  ctx: GenerateContext,
): Promise<void> {
  return countOutcome(ctx.metrics, () => generate(endpoint, req, res, ctx));
}

async function generate(
  endpoint: Endpoint,
  req: IncomingMessage,
  res: ServerResponse,
  ctx: GenerateContext,
): Promise<Outcome> {
  const arrivedMs = ctx.clock.nowMs();
  const refuse = refuseWith(res);
  const admitted = await admitJson(req, res, ctx);
  if (admitted.kind === 'done') return admitted.outcome;
  const { tenant, json } = admitted;

  const constraintOf: ConstraintOf = (tools) => requestConstraint(json, tools, ctx.grammar, tenant, ctx.faults);
  const parsed =
    endpoint === 'chat'
      ? await parseChat(json, ctx, tenant, constraintOf)
      : await parseCompletion(json, ctx, tenant, constraintOf);
  if (parsed.kind === 'bad') return refuse(parsed.problem);
  const { params, prompts, tools, echo } = parsed.value;
  const model = resolveModel(params.model, ctx.backend, tenant);
  const adapter = model.kind === 'ok' && model.adapter !== undefined ? { adapter: model.adapter } : {};
  const constraint: { readonly constraint?: ConstraintSpec } =
    parsed.value.constraint === undefined ? {} : { constraint: parsed.value.constraint };
  if (prompts.length * params.n > MAX_CHOICES) {
    return refuse(
      problem(
        'invalid_request',
        `${prompts.length} prompts x n = ${params.n} asks for ${prompts.length * params.n} choices; at most ${MAX_CHOICES} are taken in one request.`,
        'n',
      ),
    );
  }

  // Each prompt's sampling: its own context-length check (and default max_tokens), and seed.
  const samplings: SamplingParams[] = [];
  for (const promptTokens of prompts) {
    const sampling = planSampling(promptTokens.length, params, {
      contextLength: ctx.backend.contextLength,
      vocabSize: ctx.codec.vocabSize,
      faults: ctx.faults,
      drawSeed: () => ctx.ids.drawSeed(),
      promptParam: endpoint === 'chat' ? 'messages' : 'prompt',
    });
    if (sampling.kind === 'bad') return refuse(sampling.problem);
    samplings.push(sampling.value);
  }

  // The client may leave at any point from here: abort the back end's work for it.
  const client = clientAbort(res, ctx.shutdown);
  try {
    // Choice p * n + i: prompt p, its own rid, and seed + i (so the choices differ when sampling,
    // and a seeded request gives the same choices every time).
    const requests = prompts.flatMap((promptTokens, p) => {
      const sampling = samplings[p] as SamplingParams;
      return Array.from({ length: params.n }, (_, i) => ({
        rid: ctx.ids.nextRid(),
        tenant,
        promptTokens,
        ...adapter,
        sampling: {
          ...sampling,
          seed: (sampling.seed + i) % 2 ** 32,
          ...constraint,
          ...(echo === undefined ? {} : echoSampling(echo)),
        },
      }));
    });
    const rid = (requests[0] as (typeof requests)[number]).rid;
    return await runGenerate(
      {
        requests,
        meta: {
          endpoint,
          id: `${endpoint === 'chat' ? 'chatcmpl' : 'cmpl'}-${rid}`,
          created: ctx.clock.unixSeconds(),
          model: adapter.adapter === undefined ? ctx.backend.modelName : (params.model ?? ctx.backend.modelName),
          includeUsage: params.includeUsage,
          tokenIds: params.returnTokenIds
            ? { promptOf: (index) => (requests[index] as (typeof requests)[number]).promptTokens }
            : null,
          tokenText: params.logprobs === null ? null : (id) => ctx.codec.tokenText(id),
          ...(tools === undefined ? {} : { tools }),
          ...(echo === undefined
            ? {}
            : {
                echo: {
                  ...echo,
                  promptOf: (index: number) => {
                    const ids = (requests[index] as (typeof requests)[number]).promptTokens;
                    const text = echo.texts[Math.floor(index / params.n)] ?? null;
                    return {
                      ids,
                      text: text ?? ctx.codec.decode?.(ids) ?? ids.map((id) => ctx.codec.tokenText(id)).join(''),
                    };
                  },
                  tokenText: (id: number) => ctx.codec.tokenText(id),
                },
              }),
          ...(endpoint === 'chat'
            ? reasoningOf(ctx, requests[0]!.promptTokens, constraint.constraint !== undefined)
            : {}),
        },
        stream: params.stream,
        choicesPerPrompt: params.n,
        arrivedMs,
      },
      res,
      client.signal,
      client.gone,
      ctx,
    );
  } finally {
    client.detach();
  }
}

/** `tenant`: whose word cache the prompt's encode may use. */
async function parseCompletion(
  body: unknown,
  ctx: GenerateContext,
  tenant: string,
  constraintOf: ConstraintOf,
): Promise<Validated<Parsed>> {
  const call = validateCompletion(body, ctx.faults);
  if (call.kind === 'bad') return call;
  const { params, prompts: texts, addSpecialTokens, echo, promptLogprobs, promptOnly } = call.value;
  const model = resolveModel(params.model, ctx.backend, asTenantId(tenant));
  if (model.kind === 'bad') return model;
  const prompts: (readonly number[])[] = [];
  for (const prompt of texts) {
    // The cheap checks first: no tokenizing text that could not fit the context anyway.
    const tooLong =
      prompt.kind === 'text'
        ? promptTooLong(Buffer.byteLength(prompt.text, 'utf8'), ctx.maxPromptBytes, ctx.backend.contextLength)
        : null;
    if (tooLong !== null) return { kind: 'bad', problem: problem('context_length_exceeded', tooLong, 'prompt') };
  }
  const constrained = await constraintOf(undefined);
  if (constrained.kind === 'bad') return constrained;
  for (const prompt of texts) {
    const tokens = await completionTokens(prompt, addSpecialTokens, ctx.codec, ctx.tokenizer, tenant);
    if (tokens.kind === 'bad') return tokens;
    prompts.push(tokens.value);
  }
  const echoPlan =
    echo || promptLogprobs !== null
      ? {
          echo: {
            echo,
            logprobs: params.logprobs,
            promptLogprobs,
            promptOnly,
            texts: texts.map((p) => (p.kind === 'text' ? p.text : null)),
          },
        }
      : {};
  return { kind: 'ok', value: { params, prompts, constraint: constrained.value, ...echoPlan } };
}

async function parseChat(
  body: unknown,
  ctx: GenerateContext,
  tenant: string,
  constraintOf: ConstraintOf,
): Promise<Validated<Parsed>> {
  const call = validateChat(body, ctx.faults);
  if (call.kind === 'bad') return call;
  const { params, messages } = call.value;
  const model = resolveModel(params.model, ctx.backend, asTenantId(tenant));
  if (model.kind === 'bad') return model;
  const numBytes = chatBytes(messages); // roles, content, tool calls: all the text the prompt brings
  const tooLong = promptTooLong(numBytes, ctx.maxPromptBytes, ctx.backend.contextLength);
  if (tooLong !== null) return { kind: 'bad', problem: problem('context_length_exceeded', tooLong, 'messages') };
  const plan = validating(() => readTools(body as JsonObject, 'chat'));
  if (plan.kind === 'bad') return plan;
  const constrained = await constraintOf(plan.value);
  if (constrained.kind === 'bad') return constrained;
  const shown = shownTools(plan.value);
  const tokens = await chatTokens(
    messages,
    { ...call.value, ...(shown === undefined ? {} : { tools: shown }) },
    ctx.tokenizer,
    tenant,
  );
  const tools = plan.value === undefined ? {} : { tools: plan.value };
  return tokens.kind === 'bad'
    ? tokens
    : { kind: 'ok', value: { params, prompts: [tokens.value], constraint: constrained.value, ...tools } };
}
