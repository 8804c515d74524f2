// Typed reads of fields from a parsed JSON object (config.json, tokenizer_config.json, index
// files). Every wrong type becomes one ModelLoadError naming the file and the field; this file
// must never supply a default the caller did not ask for.
import { ModelLoadError } from '../core/index.js';

export type JsonObject = { readonly [key: string]: unknown };

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Parse `text` as a JSON object or throw ModelLoadError naming `file`. */
export function parseJsonObject(text: string, file: string): JsonObject {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new ModelLoadError(
      file,
      `is not valid JSON (${error instanceof Error ? error.message : String(error)})`,
      error,
    );
  }
  if (!isJsonObject(value)) throw new ModelLoadError(file, 'must contain a JSON object');
  return value;
}

export class JsonFields {
  readonly #obj: JsonObject;
  readonly #file: string;
  readonly #prefix: string;

  constructor(obj: JsonObject, file: string, prefix = '') {
    this.#obj = obj;
    this.#file = file;
    this.#prefix = prefix;
  }

  has(key: string): boolean {
    return this.#obj[key] !== undefined && this.#obj[key] !== null;
  }

  raw(key: string): unknown {
    return this.#obj[key];
  }

  /** A nested object, or null when absent. */
  object(key: string): JsonFields | null {
    const value = this.#obj[key];
    if (value === undefined || value === null) return null;
    if (!isJsonObject(value)) throw this.#wrong(key, 'an object', value);
    return new JsonFields(value, this.#file, `${this.#prefix}${key}.`);
  }

  int(key: string, fallback?: number): number {
    const value = this.#present(key, fallback);
    if (typeof value !== 'number' || !Number.isSafeInteger(value)) throw this.#wrong(key, 'an integer', value);
    return value;
  }

  optInt(key: string): number | null {
    return this.has(key) ? this.int(key) : null;
  }

  num(key: string, fallback?: number): number {
    const value = this.#present(key, fallback);
    if (typeof value !== 'number' || !Number.isFinite(value)) throw this.#wrong(key, 'a number', value);
    return value;
  }

  optNum(key: string): number | null {
    return this.has(key) ? this.num(key) : null;
  }

  str(key: string, fallback?: string): string {
    const value = this.#present(key, fallback);
    if (typeof value !== 'string') throw this.#wrong(key, 'a string', value);
    return value;
  }

  optStr(key: string): string | null {
    return this.has(key) ? this.str(key) : null;
  }

  bool(key: string, fallback?: boolean): boolean {
    const value = this.#present(key, fallback);
    if (typeof value !== 'boolean') throw this.#wrong(key, 'true or false', value);
    return value;
  }

  /** An integer or a list of integers (e.g. eos_token_id); [] when absent. */
  intList(key: string): number[] {
    if (!this.has(key)) return [];
    const value = this.#obj[key];
    const list = Array.isArray(value) ? value : [value];
    for (const item of list) {
      if (typeof item !== 'number' || !Number.isSafeInteger(item))
        throw this.#wrong(key, 'an integer or a list of integers', value);
    }
    return list as number[];
  }

  fail(problem: string): ModelLoadError {
    return new ModelLoadError(this.#file, problem);
  }

  #present(key: string, fallback: unknown): unknown {
    const value = this.#obj[key];
    if (value === undefined || value === null) {
      if (fallback === undefined) throw new ModelLoadError(this.#file, `missing field "${this.#prefix}${key}"`);
      return fallback;
    }
    return value;
  }

  #wrong(key: string, expected: string, value: unknown): ModelLoadError {
    return new ModelLoadError(
      this.#file,
      `field "${this.#prefix}${key}" must be ${expected}, got ${JSON.stringify(value)}`,
    );
  }
}
