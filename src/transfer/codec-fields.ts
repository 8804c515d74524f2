// Strict validators for the fields of incoming frames, and the codec's error type.
// Owns: what a well-formed field is (types, ranges, lengths, patterns; no extra or missing keys).
// Must never: coerce a value (a string "1" is not a number), keep a reference to the parsed
// object's prototype chain, or throw anything but CodecError for bad input.
import { TesseraError, type ErrorCode } from '../core/index.js';

/** A frame that is malformed, too large, or carries a field out of range. The connection is closed. */
export class CodecError extends TesseraError {
  override name = 'CodecError' as const;
  constructor(message: string, cause?: unknown) {
    super('transfer_failed', `malformed frame: ${message}`, { cause });
  }
}

export const isCodecError = (e: unknown): e is CodecError => e instanceof CodecError;

export type Check<T> = (value: unknown, path: string) => T;

function fail(path: string, what: string, value: unknown): never {
  const shown =
    typeof value === 'string'
      ? JSON.stringify(value.slice(0, 40))
      : Array.isArray(value)
        ? 'an array'
        : value === null
          ? 'null'
          : typeof value === 'object'
            ? 'an object'
            : String(value);
  throw new CodecError(`${path} must be ${what}, got ${shown}`);
}

export const int =
  (min: number, max: number): Check<number> =>
  (v, path) =>
    typeof v === 'number' && Number.isSafeInteger(v) && v >= min && v <= max
      ? v
      : fail(path, `an integer in [${min}, ${max}]`, v);

export const finite =
  (min: number, max: number): Check<number> =>
  (v, path) =>
    typeof v === 'number' && Number.isFinite(v) && v >= min && v <= max
      ? v
      : fail(path, `a number in [${min}, ${max}]`, v);

/** null, or what `check` accepts. */
export const nullable =
  <T>(check: Check<T>): Check<T | null> =>
  (v, path) =>
    v === null ? null : check(v, path);

export const bool: Check<boolean> = (v, path) => (typeof v === 'boolean' ? v : fail(path, 'a boolean', v));

export const str =
  (maxLength: number, pattern?: RegExp, minLength = 0): Check<string> =>
  (v, path) => {
    if (typeof v !== 'string' || v.length < minLength || v.length > maxLength)
      return fail(path, `a string of ${minLength}..${maxLength} characters`, v);
    if (pattern !== undefined && !pattern.test(v)) return fail(path, `a string matching ${pattern.source}`, v);
    return v;
  };

export const oneOf =
  <T extends string>(values: readonly T[]): Check<T> =>
  (v, path) =>
    typeof v === 'string' && (values as readonly string[]).includes(v)
      ? (v as T)
      : fail(path, `one of ${values.join(', ')}`, v);

export const array =
  <T>(item: Check<T>, maxLength: number): Check<T[]> =>
  (v, path) => {
    if (!Array.isArray(v) || v.length > maxLength) return fail(path, `an array of at most ${maxLength} items`, v);
    const out: T[] = new Array<T>(v.length);
    for (let i = 0; i < v.length; i++) out[i] = item(v[i], `${path}[${i}]`);
    return out;
  };

/** An object with exactly these keys, each checked; returns a fresh plain object. */
export function object<T extends object>(shape: { readonly [K in keyof T]: Check<T[K]> }): Check<T> {
  const keys = Object.keys(shape) as (keyof T & string)[];
  return (v, path) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return fail(path, 'an object', v);
    const record = v as Record<string, unknown>;
    const present = Object.keys(record);
    for (const key of present)
      if (!Object.hasOwn(shape, key))
        throw new CodecError(`${path} has an unknown field ${JSON.stringify(key.slice(0, 40))}`);
    const out = {} as T;
    for (const key of keys) {
      if (!Object.hasOwn(record, key)) throw new CodecError(`${path}.${key} is missing`);
      out[key] = shape[key](record[key], `${path}.${key}`);
    }
    return out;
  };
}

const ERROR_CODES: Record<ErrorCode, true> = {
  invalid_request: true,
  context_length_exceeded: true,
  pool_too_small: true,
  unauthorized: true,
  model_not_found: true,
  overloaded: true,
  kv_page_check_failed: true,
  transfer_failed: true,
  timeout: true,
  aborted: true,
  model_load_failed: true,
  config_invalid: true,
  internal: true,
};
export const errorCode: Check<ErrorCode> = oneOf(Object.keys(ERROR_CODES) as ErrorCode[]);

/** The wire's u31 and tenant rules are core/limits.ts's, so the API checks the same ones. */
export { TENANT_PATTERN, U31 } from '../core/index.js';
/** Request ids: what the router makes ("<id>" or "<id>.<attempt>"), never free text. */
export const RID_PATTERN = /^[A-Za-z0-9._:~-]+$/;
/** Node ids and addresses: host:port, [v6]:port, or a router's name. */
export const ADDRESS_PATTERN = /^[A-Za-z0-9.:[\]_-]+$/;
export const HEX16 = /^[0-9a-f]{16}$/;
export const HEX64 = /^[0-9a-f]{64}$/;

/**
 * Like object(), plus keys that may be absent (then absent in the result too; never undefined).
 * For fields added to a message after its first version (e.g. sampling.constraint).
 */
export function objectWithOptional<T extends object>(
  shape: { readonly [key: string]: Check<unknown> },
  optional: { readonly [key: string]: Check<unknown> },
): Check<T> {
  const required = object<Record<string, unknown>>(shape as Record<string, Check<unknown>>);
  return (v, path) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return fail(path, 'an object', v);
    const record = v as Record<string, unknown>;
    // Null prototypes: a "__proto__" key stays an own key (refused as unknown), never a prototype.
    const rest = Object.create(null) as Record<string, unknown>;
    const extra = Object.create(null) as Record<string, unknown>;
    for (const key of Object.keys(record)) (Object.hasOwn(optional, key) ? extra : rest)[key] = record[key];
    const out = required(rest, path);
    for (const [key, value] of Object.entries(extra))
      out[key] = (optional[key] as Check<unknown>)(value, `${path}.${key}`);
    return out as T;
  };
}

/** A tagged union: the `kind` field picks the shape. */
export function tagged<T extends { readonly kind: string }>(shapes: {
  readonly [K in T['kind']]: Check<Extract<T, { kind: K }>>;
}): Check<T> {
  return (v, path) => {
    const kind =
      typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>)['kind'] : undefined;
    if (typeof kind !== 'string' || !Object.hasOwn(shapes, kind))
      return fail(path, `an object with kind one of ${Object.keys(shapes).join(', ')}`, v);
    return (shapes as Record<string, Check<T>>)[kind]!(v, path);
  };
}
