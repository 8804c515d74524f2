// Typed reads of GGUF metadata values, each failure one ModelLoadError naming the file and key.
// Integer keys are accepted in any integer width (writers differ: u32, i32, u64...).
// It must never invent a value: absent optional keys come back as null.
import { ModelLoadError } from '../core/index.js';
import type { GgufScalar, GgufValue } from './gguf-format.js';
import type { GgufFile } from './gguf-reader.js';

export class GgufMeta {
  readonly #values: ReadonlyMap<string, GgufValue>;
  readonly file: string;

  constructor(gguf: Pick<GgufFile, 'metadata' | 'file'>) {
    this.#values = gguf.metadata;
    this.file = gguf.file;
  }

  has(key: string): boolean {
    return this.#values.has(key);
  }

  str(key: string): string {
    return this.#required(key, this.optStr(key));
  }

  optStr(key: string): string | null {
    const v = this.#values.get(key);
    if (v === undefined) return null;
    if (v.type !== 'string') throw this.#wrong(key, 'a string', v);
    return v.value as string;
  }

  int(key: string): number {
    return this.#required(key, this.optInt(key));
  }

  optInt(key: string): number | null {
    const v = this.#values.get(key);
    if (v === undefined) return null;
    if (v.type === 'array' || v.type === 'string' || v.type === 'bool' || v.type === 'f32' || v.type === 'f64')
      throw this.#wrong(key, 'an integer', v);
    return this.#toInt(key, v.value);
  }

  num(key: string): number {
    return this.#required(key, this.optNum(key));
  }

  optNum(key: string): number | null {
    const v = this.#values.get(key);
    if (v === undefined) return null;
    if (v.type === 'array' || v.type === 'string' || v.type === 'bool') throw this.#wrong(key, 'a number', v);
    if (typeof v.value === 'bigint') return this.#toInt(key, v.value);
    return v.type === 'f32' ? shortestF32(v.value as number) : (v.value as number);
  }

  optBool(key: string): boolean | null {
    const v = this.#values.get(key);
    if (v === undefined) return null;
    if (v.type !== 'bool') throw this.#wrong(key, 'true or false', v);
    return v.value as boolean;
  }

  optStrings(key: string): readonly string[] | null {
    const items = this.#array(key, ['string'], 'an array of strings');
    return items as readonly string[] | null;
  }

  optNumbers(key: string): number[] | null {
    const items = this.#array(
      key,
      ['u8', 'i8', 'u16', 'i16', 'u32', 'i32', 'f32', 'f64', 'u64', 'i64'],
      'an array of numbers',
    );
    return items === null ? null : items.map((x) => (typeof x === 'bigint' ? this.#toInt(key, x) : (x as number)));
  }

  #array(key: string, itemTypes: readonly string[], expected: string): readonly GgufScalar[] | null {
    const v = this.#values.get(key);
    if (v === undefined) return null;
    if (v.type !== 'array' || v.itemType === 'array' || !itemTypes.includes(v.itemType))
      throw this.#wrong(key, expected, v);
    return v.items as readonly GgufScalar[];
  }

  #toInt(key: string, value: GgufScalar): number {
    const n = typeof value === 'bigint' ? Number(value) : (value as number);
    if (!Number.isSafeInteger(n))
      throw new ModelLoadError(this.file, `metadata ${key} = ${String(value)} is out of range`);
    return n;
  }

  #required<T>(key: string, value: T | null): T {
    if (value === null) throw new ModelLoadError(this.file, `missing metadata key ${key}`);
    return value;
  }

  #wrong(key: string, expected: string, v: GgufValue): ModelLoadError {
    const got = v.type === 'array' ? `an array of ${v.itemType}` : `${v.type} ${JSON.stringify(String(v.value))}`;
    return new ModelLoadError(this.file, `metadata ${key} must be ${expected}, got ${got}`);
  }
}

/**
 * The shortest decimal that rounds to the same f32: an f32 1e-5 reads back as 1e-5, not
 * 9.99999974e-6, so a GGUF's config equals the Hugging Face config it was converted from.
 */
export function shortestF32(value: number): number {
  for (let digits = 1; digits <= 9; digits++) {
    const candidate = Number(value.toPrecision(digits));
    if (Math.fround(candidate) === value) return candidate;
  }
  return value;
}
