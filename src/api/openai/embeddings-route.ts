// POST /v1/embeddings in OpenAI's shape: `input` a string, an array of strings, an array of token
// ids or an array of those; `encoding_format` float (default) or base64 (little-endian float32,
// as OpenAI's SDK decodes it); `dimensions` only as the model's own size (a 400 otherwise: no
// truncation is trained into these models); `usage` counts the input tokens.
// Each input is one back-end request with `embed` (prefill only, through the same scheduler,
// admission and page rules as any prompt; pages back when it ends): the back end answers its
// last token's final hidden state (after the final norm; src/engine/embeddings.ts says why the
// last token), and this route L2-normalises it (cosine similarity is then a dot product).
// A back end without embeddings (the PD router) gets a 400 that says where they are served.
// Must never answer 200 when any input failed, nor mix one input's vector into another's index.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { InvalidRequestError, samplingParams, type GenerateRequest } from '../../core/index.js';
import { clientAbort } from '../http/client-abort.js';
import { problem, problemOf, type Problem } from '../http/errors.js';
import type { GenerateContext } from './generate-route.js';
import { sendJson } from '../http/http-io.js';
import { admitJson, countOutcome, refuseWith } from './admit-json.js';
import type { Outcome } from '../ops/metrics.js';
import { describe, field, isObject, optionalInt, optionalString, tokenIdList, validating } from './params.js';
import { completionTokens } from './prompt.js';

/** OpenAI's limit on inputs per request. */
export const MAX_EMBEDDING_INPUTS = 2048;
/** Inputs in flight at once per request (the rest wait their turn here, not in the node's queue). */
const MAX_IN_FLIGHT = 16;

type Input = { readonly kind: 'text'; readonly text: string } | { readonly kind: 'tokens'; readonly ids: number[] };

interface EmbeddingCall {
  readonly model: string | null;
  readonly inputs: readonly Input[];
  readonly base64: boolean;
  readonly dimensions: number | null;
}

export async function handleEmbeddings(req: IncomingMessage, res: ServerResponse, ctx: GenerateContext): Promise<void> {
  return countOutcome(ctx.metrics, () => embeddings(req, res, ctx));
}

async function embeddings(req: IncomingMessage, res: ServerResponse, ctx: GenerateContext): Promise<Outcome> {
  const refuse = refuseWith(res);
  const admitted = await admitJson(req, res, ctx);
  if (admitted.kind === 'done') return admitted.outcome;
  const { tenant, json } = admitted;
  const call = validating(() => readCall(json));
  if (call.kind === 'bad') return refuse(call.problem);
  const { model, inputs, base64, dimensions } = call.value;
  if (model !== null && model !== ctx.backend.modelName)
    return refuse(problem('model_not_found', `The model \`${model}\` does not exist.`, 'model'));
  if (ctx.backend.embeddings !== true)
    return refuse(
      problem(
        'invalid_request',
        'This deployment does not serve embeddings: /v1/embeddings is served by `tessera serve` (co-located), not by the PD router.',
        'input',
      ),
    );
  const prompts: number[][] = [];
  for (const input of inputs) {
    if (input.kind === 'tokens') {
      const bad = input.ids.find((id) => id >= ctx.codec.vocabSize);
      if (bad !== undefined)
        return refuse(problem('invalid_request', `Token id ${bad} in \`input\` is out of vocabulary.`, 'input'));
      prompts.push(input.ids);
      continue;
    }
    const ids = await completionTokens(input, true, ctx.codec, ctx.tokenizer, tenant);
    if (ids.kind === 'bad') return refuse(ids.problem);
    prompts.push([...ids.value]);
  }
  const tooLong = prompts.findIndex((ids) => ids.length >= ctx.backend.contextLength);
  if (tooLong >= 0)
    return refuse(
      problem(
        'context_length_exceeded',
        `\`input[${tooLong}]\` has ${prompts[tooLong]?.length} tokens; this model's context length is ` +
          `${ctx.backend.contextLength} (an embedding needs one position more than its input).`,
        'input',
      ),
    );

  const client = clientAbort(res, ctx.shutdown);
  try {
    const vectors: Float32Array[] = new Array(prompts.length);
    let failure: Problem | undefined;
    let next = 0;
    const worker = async (): Promise<void> => {
      while (failure === undefined && next < prompts.length) {
        const index = next++;
        const request: GenerateRequest = {
          rid: ctx.ids.nextRid(),
          tenant,
          promptTokens: prompts[index] as number[],
          sampling: samplingParams({ maxTokens: 1, temperature: 0 }),
          embed: true,
        };
        const result = await embedOne(ctx, request, client.signal);
        if (result instanceof Float32Array) vectors[index] = result;
        else failure ??= result;
      }
    };
    await Promise.all(Array.from({ length: Math.min(MAX_IN_FLIGHT, prompts.length) }, worker));
    if (client.gone()) return 'aborted';
    if (failure !== undefined) return refuse(failure);
    const size = vectors[0]?.length ?? 0;
    if (dimensions !== null && dimensions !== size)
      return refuse(
        problem(
          'invalid_request',
          `\`dimensions\` = ${dimensions} is not supported: this model's embeddings have ${size} dimensions.`,
          'dimensions',
        ),
      );
    const numTokens = prompts.reduce((n, ids) => n + ids.length, 0);
    sendJson(res, 200, {
      object: 'list',
      data: vectors.map((v, index) => ({
        object: 'embedding',
        index,
        embedding: base64 ? Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64') : Array.from(v),
      })),
      model: ctx.backend.modelName,
      usage: { prompt_tokens: numTokens, total_tokens: numTokens },
    });
    return 'success';
  } finally {
    client.detach();
  }
}

/** One input's normalised vector, or the problem its request ended with. */
async function embedOne(
  ctx: GenerateContext,
  request: GenerateRequest,
  signal: AbortSignal,
): Promise<Float32Array | Problem> {
  try {
    for await (const event of ctx.backend.generate(request, AbortSignal.any([signal]))) {
      if (event.type === 'tokens') continue;
      if (event.type === 'failed') return problemOf(event.error);
      if (event.embedding === undefined) return problem('internal', 'The back end finished an embedding without one.');
      return normalised(event.embedding);
    }
  } catch (error) {
    return problemOf(error);
  }
  return problem('internal', 'The back end ended an embedding request without finishing it.');
}

/** L2-normalised (float32, little-endian on every platform Node runs on); a zero vector stays zero. */
export function normalised(v: Float32Array): Float32Array {
  let sum = 0;
  for (const x of v) sum += x * x;
  const norm = Math.sqrt(sum);
  return norm === 0 ? Float32Array.from(v) : Float32Array.from(v, (x) => x / norm);
}

function readCall(body: unknown): EmbeddingCall {
  if (!isObject(body)) throw new InvalidRequestError(`The request body must be a JSON object, got ${describe(body)}.`);
  const format = optionalString(body, 'encoding_format') ?? 'float';
  if (format !== 'float' && format !== 'base64')
    throw new InvalidRequestError(
      `\`encoding_format\` must be "float" or "base64", got ${JSON.stringify(format)}.`,
      'encoding_format',
    );
  return {
    model: optionalString(body, 'model') ?? null,
    inputs: readInputs(field(body, 'input')),
    base64: format === 'base64',
    dimensions: optionalInt(body, 'dimensions', { min: 1, max: 1 << 20 }) ?? null,
  };
}

function readInputs(value: unknown): Input[] {
  const empty = () => new InvalidRequestError('`input` is empty.', 'input');
  if (value === undefined) throw new InvalidRequestError('`input` is required.', 'input');
  if (typeof value === 'string') {
    if (value === '') throw empty();
    return [{ kind: 'text', text: value }];
  }
  if (!Array.isArray(value))
    throw new InvalidRequestError(
      `\`input\` must be a string, an array of strings, an array of token ids, or an array of those, got ${describe(value)}.`,
      'input',
    );
  if (value.length === 0) throw empty();
  if (value.every((v) => typeof v === 'number')) return [{ kind: 'tokens', ids: tokenIdList(value, 'input') }];
  if (value.length > MAX_EMBEDDING_INPUTS)
    throw new InvalidRequestError(
      `\`input\` holds ${value.length} inputs; at most ${MAX_EMBEDDING_INPUTS} are taken in one request.`,
      'input',
    );
  return value.map((one: unknown, i): Input => {
    if (typeof one === 'string') {
      if (one === '') throw empty();
      return { kind: 'text', text: one };
    }
    if (Array.isArray(one)) {
      if (one.length === 0) throw empty();
      return { kind: 'tokens', ids: tokenIdList(one, 'input') };
    }
    throw new InvalidRequestError(
      `\`input[${i}]\` must be a string or an array of token ids, got ${describe(one)}.`,
      'input',
    );
  });
}
