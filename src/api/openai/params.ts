// Reading request fields: typed readers that name the field at fault, the parameters both
// endpoints share (sampling, stream, model), and the table of OpenAI parameters Tessera does
// not support. Field readers throw InvalidRequestError; validate-*.ts turn that into a value.
// Unknown fields are ignored, as vLLM and OpenAI do, so new client fields do not break us;
// known ones we cannot honour are refused by name, never silently ignored.
import {
  InvalidRequestError,
  isInvalidRequestError,
  MAX_TOP_LOGPROBS,
  NO_FAULTS,
  REQUEST_LIMITS,
  requestLimitViolation,
  type FaultSet,
} from '../../core/index.js';
import { problem, type Problem } from '../http/errors.js';

export type JsonObject = Readonly<Record<string, unknown>>;

export type Validated<T> =
  { readonly kind: 'ok'; readonly value: T } | { readonly kind: 'bad'; readonly problem: Problem };

/** Run a reader that throws InvalidRequestError; anything else it throws is a bug and escapes. */
export function validating<T>(read: () => T): Validated<T> {
  try {
    return { kind: 'ok', value: read() };
  } catch (error) {
    if (!isInvalidRequestError(error)) throw error;
    return { kind: 'bad', problem: problem(error.code, error.message, error.param ?? null) };
  }
}

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `${typeof value} ${JSON.stringify(value)}`;
}

/** A field's value; JSON null counts as absent, as in OpenAI's API. */
export function field(body: JsonObject, key: string): unknown {
  return Object.hasOwn(body, key) && body[key] !== null ? body[key] : undefined;
}

export function optionalBool(body: JsonObject, key: string): boolean | undefined {
  const value = field(body, key);
  if (value === undefined || typeof value === 'boolean') return value;
  throw new InvalidRequestError(`\`${key}\` must be a boolean, got ${describe(value)}.`, key);
}

export function optionalString(body: JsonObject, key: string): string | undefined {
  const value = field(body, key);
  if (value === undefined || typeof value === 'string') return value;
  throw new InvalidRequestError(`\`${key}\` must be a string, got ${describe(value)}.`, key);
}

interface Range {
  readonly min: number;
  readonly max: number;
  readonly minExclusive?: boolean;
}

export function optionalNumber(body: JsonObject, key: string, range: Range): number | undefined {
  const value = field(body, key);
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new InvalidRequestError(`\`${key}\` must be a number, got ${describe(value)}.`, key);
  }
  const low = range.minExclusive === true ? value <= range.min : value < range.min;
  if (low || value > range.max) {
    const open = range.minExclusive === true ? '(' : '[';
    throw new InvalidRequestError(`\`${key}\` must be in ${open}${range.min}, ${range.max}], got ${value}.`, key);
  }
  return value;
}

export function optionalInt(body: JsonObject, key: string, range: Range): number | undefined {
  const value = field(body, key);
  if (value !== undefined && (typeof value !== 'number' || !Number.isSafeInteger(value))) {
    throw new InvalidRequestError(`\`${key}\` must be an integer, got ${describe(value)}.`, key);
  }
  return optionalNumber(body, key, range);
}

export function tokenIdList(value: unknown, key: string): number[] {
  if (!Array.isArray(value) || !value.every((id) => typeof id === 'number' && Number.isSafeInteger(id) && id >= 0)) {
    throw new InvalidRequestError(`\`${key}\` must be an array of non-negative integer token ids.`, key);
  }
  return value as number[];
}

/** At most this many choices per request (OpenAI's limit). */
export const MAX_CHOICES = 128;

/** At most this many stop strings (vLLM has no limit, OpenAI allows 4; each costs a scan per token). */
export const MAX_STOP_STRINGS = REQUEST_LIMITS.maxStopStrings;

/** Parameters Tessera does not support, each with the values that ask for nothing (allowed). */
const UNSUPPORTED: Readonly<Record<string, (value: unknown) => boolean>> = {
  best_of: (v) => v === 1,
  prompt_logprobs: () => false,
  logit_bias: (v) => isObject(v) && Object.keys(v).length === 0,
  repetition_penalty: (v) => v === 1,
  min_tokens: (v) => v === 0,
  echo: (v) => v === false,
  suffix: (v) => v === '',
  functions: (v) => Array.isArray(v) && v.length === 0,
  function_call: (v) => v === 'none',
  modalities: (v) => Array.isArray(v) && v.length === 1 && v[0] === 'text',
  audio: () => false,
  prediction: () => false,
  guided_json: () => false,
  guided_regex: () => false,
  guided_choice: () => false,
  guided_grammar: () => false,
  structured_outputs: () => false,
};

export function rejectUnsupported(body: JsonObject): void {
  for (const [key, neutral] of Object.entries(UNSUPPORTED)) {
    const value = field(body, key);
    if (value !== undefined && !neutral(value)) {
      const detail = key === 'best_of' ? ' Tessera returns every choice it generates; ask for them with `n`.' : '';
      throw new InvalidRequestError(`\`${key}\` = ${JSON.stringify(value)} is not supported by Tessera.${detail}`, key);
    }
  }
}

/** The fields /v1/completions and /v1/chat/completions share, validated. */
export interface CommonParams {
  /** null: not given (the served model is used, as vLLM does). */
  readonly model: string | null;
  /** null: not given (what remains of the context). */
  readonly maxTokens: number | null;
  readonly temperature: number;
  readonly topP: number;
  readonly topK: number;
  /** null: not given (the server draws one). Else reduced to 32 bits. */
  readonly seed: number | null;
  readonly stop: readonly string[];
  readonly stopTokenIds: readonly number[];
  readonly ignoreEos: boolean;
  readonly presencePenalty: number;
  readonly frequencyPenalty: number;
  /** Choices to generate from the one prompt, each with its own seed (seed + i). */
  readonly n: number;
  /** null: none. N: each output token's log-probability and the N most likely tokens'. */
  readonly logprobs: number | null;
  readonly stream: boolean;
  readonly includeUsage: boolean;
  /** vLLM's `return_token_ids`: answer with the prompt's and the completion's token ids too. */
  readonly returnTokenIds: boolean;
}

/** `maxTokensKeys`: the names of the max-tokens field, the first present one wins. */
/**
 * The two APIs ask for log-probabilities differently: completions with `logprobs: N` (the
 * alternatives, 0..20; null for none), chat with `logprobs: true` and `top_logprobs: N`.
 */
function readLogprobs(body: JsonObject, style: 'completion' | 'chat'): number | null {
  if (style === 'completion') {
    if (field(body, 'top_logprobs') !== undefined)
      throw new InvalidRequestError(
        '`top_logprobs` belongs to chat completions; completions take `logprobs` = the number of alternatives.',
        'top_logprobs',
      );
    return optionalInt(body, 'logprobs', { min: 0, max: MAX_TOP_LOGPROBS }) ?? null;
  }
  const wanted = optionalBool(body, 'logprobs') ?? false;
  const top = optionalInt(body, 'top_logprobs', { min: 0, max: MAX_TOP_LOGPROBS });
  if (top !== undefined && !wanted)
    throw new InvalidRequestError('`top_logprobs` needs `logprobs` = true.', 'top_logprobs');
  return wanted ? (top ?? 0) : null;
}

export function readCommon(
  body: JsonObject,
  maxTokensKeys: readonly string[],
  style: 'completion' | 'chat',
  faults: FaultSet = NO_FAULTS,
): CommonParams {
  rejectUnsupported(body);
  const stream = optionalBool(body, 'stream') ?? false;
  const params = readFields(body, maxTokensKeys, style, stream);
  // The limits the wire shares (core/limits.ts): a request decode's codec would refuse is a 400 here.
  const overLimit = faults.has('skip-request-limits') ? null : requestLimitViolation(params);
  if (overLimit !== null) throw new InvalidRequestError(overLimit.message, overLimit.param);
  return params;
}

function readFields(
  body: JsonObject,
  maxTokensKeys: readonly string[],
  style: 'completion' | 'chat',
  stream: boolean,
): CommonParams {
  return {
    model: optionalString(body, 'model') ?? null,
    maxTokens: readMaxTokens(body, maxTokensKeys),
    temperature: optionalNumber(body, 'temperature', { min: 0, max: 2 }) ?? 1,
    topP: optionalNumber(body, 'top_p', { min: 0, max: 1, minExclusive: true }) ?? 1,
    // vLLM's -1 and Tessera's 0 both mean "no top-k".
    topK: Math.max(0, optionalInt(body, 'top_k', { min: -1, max: Number.MAX_SAFE_INTEGER }) ?? 0),
    seed: readSeed(body),
    stop: readStop(body),
    stopTokenIds:
      field(body, 'stop_token_ids') === undefined ? [] : tokenIdList(body['stop_token_ids'], 'stop_token_ids'),
    ignoreEos: optionalBool(body, 'ignore_eos') ?? false,
    presencePenalty: optionalNumber(body, 'presence_penalty', { min: -2, max: 2 }) ?? 0,
    frequencyPenalty: optionalNumber(body, 'frequency_penalty', { min: -2, max: 2 }) ?? 0,
    n: optionalInt(body, 'n', { min: 1, max: MAX_CHOICES }) ?? 1,
    logprobs: readLogprobs(body, style),
    stream,
    includeUsage: readStreamOptions(body, stream),
    returnTokenIds: optionalBool(body, 'return_token_ids') ?? false,
  };
}

function readMaxTokens(body: JsonObject, keys: readonly string[]): number | null {
  for (const key of keys) {
    const value = optionalInt(body, key, { min: 1, max: Number.MAX_SAFE_INTEGER });
    if (value !== undefined) return value;
  }
  return null;
}

function readSeed(body: JsonObject): number | null {
  const seed = optionalInt(body, 'seed', { min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER });
  return seed === undefined ? null : Number(BigInt.asUintN(32, BigInt(seed)));
}

function readStop(body: JsonObject): string[] {
  const value = field(body, 'stop');
  if (value === undefined) return [];
  const list = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(list) || !list.every((s) => typeof s === 'string')) {
    throw new InvalidRequestError(`\`stop\` must be a string or an array of strings, got ${describe(value)}.`, 'stop');
  }
  if (list.some((s) => s === '')) throw new InvalidRequestError('`stop` strings must not be empty.', 'stop');
  // How many and how long: core's requestLimitViolation, which the wire codec shares (readCommon).
  return list as string[];
}

function readStreamOptions(body: JsonObject, stream: boolean): boolean {
  const options = field(body, 'stream_options');
  if (options === undefined) return false;
  if (!stream)
    throw new InvalidRequestError('`stream_options` can only be given when `stream` is true.', 'stream_options');
  if (!isObject(options))
    throw new InvalidRequestError(`\`stream_options\` must be an object, got ${describe(options)}.`, 'stream_options');
  const include = field(options, 'include_usage');
  if (include !== undefined && typeof include !== 'boolean') {
    throw new InvalidRequestError(
      `\`stream_options.include_usage\` must be a boolean, got ${describe(include)}.`,
      'stream_options.include_usage',
    );
  }
  return include === true;
}
