// The small routes clients and tools expect beside the OpenAI ones (vLLM's shapes):
//   GET  /v1/models/{id}  one model, or 404 model_not_found
//   POST /tokenize        {prompt} or {messages[, tools]} -> {count, max_model_len, tokens, token_strs: null}
//   POST /detokenize      {tokens} -> {prompt}
//   GET  /version         {version}
// All but /version check the API key as /v1/* does. Bounds before work, as for generation: a
// /tokenize prompt (or messages) longer than the prompt bound (prompt-bound.ts) is refused
// untokenized, and /detokenize takes at most the context length in ids.
// Must never reach the back end.
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { InvalidRequestError } from '../../core/index.js';
import { problem } from '../http/errors.js';
import type { GenerateContext } from './generate-route.js';
import { parseJson, readBody, sendJson, sendProblem } from '../http/http-io.js';
import { describe, field, isObject, optionalBool, tokenIdList, validating, type JsonObject } from './params.js';
import { chatBytes, promptTooLong } from './prompt-bound.js';
import { chatTokens, completionTokens } from './prompt.js';
import { modelList } from './shapes.js';
import { resolveModel } from './adapter-model.js';
import { readTools, shownTools } from './tools.js';
import { validateChat } from './validate-chat.js';

export interface ExtraContext extends GenerateContext {
  readonly startedUnixSeconds: number;
}

const VERSION = ((): string => {
  try {
    return (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string })
      .version;
  } catch {
    return 'unknown';
  }
})();

export async function version(_req: IncomingMessage, res: ServerResponse): Promise<void> {
  sendJson(res, 200, { version: VERSION });
}

/** GET /v1/models/{id}. */
export async function oneModel(
  req: IncomingMessage,
  res: ServerResponse,
  ctx: ExtraContext,
  id: string,
): Promise<void> {
  const auth = ctx.auth.tenantOf(req.headers.authorization);
  if (auth.kind === 'refused') return sendProblem(res, auth.problem);
  const { backend } = ctx;
  // The base model, or an adapter the caller may use by `<served>:<name>` or its name (vLLM's ids).
  const choice = resolveModel(id, backend, auth.tenant);
  if (choice.kind === 'bad') return sendProblem(res, choice.problem);
  const adapters = choice.adapter === undefined ? [] : [choice.adapter.name];
  const list = modelList({
    id: backend.modelName,
    root: backend.root,
    maxModelLen: backend.contextLength,
    created: ctx.startedUnixSeconds,
    adapters,
  }) as { data: object[] };
  sendJson(res, 200, list.data[adapters.length]);
}

/** The body, and the caller's tenant (whose word cache /tokenize may use). */
async function readJsonBody(
  req: IncomingMessage,
  res: ServerResponse,
  ctx: ExtraContext,
): Promise<{ readonly body: JsonObject; readonly tenant: string } | undefined> {
  const auth = ctx.auth.tenantOf(req.headers.authorization);
  if (auth.kind === 'refused') {
    sendProblem(res, auth.problem);
    return undefined;
  }
  const body = await readBody(req, ctx.maxBodyBytes);
  if (body.kind !== 'ok') {
    if (body.kind === 'too-large')
      sendProblem(res, problem('body_too_large', `The request body exceeds ${ctx.maxBodyBytes} bytes.`));
    return undefined;
  }
  const json = parseJson(body.bytes);
  if (json.kind === 'bad') {
    sendProblem(res, json.problem);
    return undefined;
  }
  if (!isObject(json.value)) {
    sendProblem(
      res,
      problem('invalid_request', `The request body must be a JSON object, got ${describe(json.value)}.`),
    );
    return undefined;
  }
  return { body: json.value, tenant: auth.tenant };
}

export async function tokenize(req: IncomingMessage, res: ServerResponse, ctx: ExtraContext): Promise<void> {
  const read = await readJsonBody(req, res, ctx);
  if (read === undefined) return;
  const { body, tenant } = read;
  let ids;
  if (field(body, 'messages') !== undefined) {
    const call = validateChat(body, ctx.faults);
    if (call.kind === 'bad') return sendProblem(res, call.problem);
    const tooLong = promptTooLong(chatBytes(call.value.messages), ctx.maxPromptBytes, ctx.backend.contextLength);
    if (tooLong !== null) return sendProblem(res, problem('context_length_exceeded', tooLong, 'messages'));
    // The tools the template shows, as chat shows them (vLLM's /tokenize takes `tools` too).
    const plan = validating(() => readTools(body, 'chat'));
    if (plan.kind === 'bad') return sendProblem(res, plan.problem);
    const shown = shownTools(plan.value);
    ids = await chatTokens(
      call.value.messages,
      { ...call.value, ...(shown === undefined ? {} : { tools: shown }) },
      ctx.tokenizer,
      tenant,
    );
  } else {
    const prompt = field(body, 'prompt');
    if (typeof prompt !== 'string')
      return sendProblem(
        res,
        problem(
          'invalid_request',
          `\`prompt\` must be a string (or send \`messages\`), got ${describe(prompt)}.`,
          'prompt',
        ),
      );
    const tooLong = promptTooLong(Buffer.byteLength(prompt, 'utf8'), ctx.maxPromptBytes, ctx.backend.contextLength);
    if (tooLong !== null) return sendProblem(res, problem('context_length_exceeded', tooLong, 'prompt'));
    const special = validating(() => optionalBool(body, 'add_special_tokens') ?? true);
    if (special.kind === 'bad') return sendProblem(res, special.problem);
    ids = await completionTokens({ kind: 'text', text: prompt }, special.value, ctx.codec, ctx.tokenizer, tenant);
  }
  if (ids.kind === 'bad') return sendProblem(res, ids.problem);
  sendJson(res, 200, {
    count: ids.value.length,
    max_model_len: ctx.backend.contextLength,
    tokens: ids.value,
    token_strs: null,
  });
}

export async function detokenize(req: IncomingMessage, res: ServerResponse, ctx: ExtraContext): Promise<void> {
  const read = await readJsonBody(req, res, ctx);
  if (read === undefined) return;
  const { body } = read;
  // `skip-request-limits` (tests only): any number of ids, as before the bound.
  const maxIds = ctx.faults.has('skip-request-limits') ? Number.POSITIVE_INFINITY : ctx.backend.contextLength;
  const ids = validating(() => {
    const given = field(body, 'tokens') ?? [];
    // The length first: no id of an oversize list is looked at.
    if (Array.isArray(given) && given.length > maxIds)
      throw new InvalidRequestError(
        `\`tokens\` holds ${given.length} ids; at most ${maxIds} (the model's context length) are taken.`,
        'tokens',
      );
    const list = tokenIdList(given, 'tokens');
    const bad = list.find((id) => id >= ctx.codec.vocabSize);
    if (bad !== undefined)
      throw new InvalidRequestError(
        `Token id ${bad} in \`tokens\` is out of vocabulary (size ${ctx.codec.vocabSize}).`,
        'tokens',
      );
    return list;
  });
  if (ids.kind === 'bad') return sendProblem(res, ids.problem);
  const prompt = ctx.codec.decode?.(ids.value) ?? ids.value.map((id) => ctx.codec.tokenText(id)).join('');
  sendJson(res, 200, { prompt });
}
