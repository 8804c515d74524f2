// Grammar rules (xgrammar EBNF expressions) for JSON numbers and integers within bounds, exact in
// decimal arithmetic. Why our own: xgrammar 0.1.27's JSON-schema converter builds number ranges
// with a regex that is wrong in three ways (measured with its Testings._jsonSchemaToEBNF):
//   minimum 0, maximum 1          "1" "." [0-9]{1,6}      so 1.291291 is allowed
//   minimum 0.5, maximum 1.5      "1" [\u0000-\U0010FFFF] "5"   (an unescaped "."): 1r5, "0 5"
//   exclusiveMinimum 0            "0" is allowed
// The sampler then picked those characters: the grammar allowed them (the mask was applied).
// How a range becomes a grammar: a number with at most D decimals is an integer of units
// 10^-D; the bounds become an inclusive range [lo, hi] of units (ceil/floor in exact decimal
// arithmetic, +-1 for exclusive bounds); nonnegative and negative halves are digit-range
// grammars over the integer part and the fraction (a fraction "5" stands for "500000").
// Every value is within +-10^15 and has at most 15 significant digits near an exclusive bound,
// so the double that JSON.parse makes compares with the bound as the decimal does.
// Must never allow text that is not a JSON number, or a number outside the schema's bounds.
import { trieRule } from './trie-rule.js';

export type NumberRule =
  | { readonly kind: 'rule'; readonly ebnf: string }
  | { readonly kind: 'refused'; readonly keyword: string; readonly reason: string };

/** Digits of the integer part a number may have (values stay below 10^15 in magnitude). */
export const MAX_INTEGER_DIGITS = 15;
/** Decimals a fractional number may have, unless its bounds need more. */
export const DEFAULT_DECIMALS = 6;
/** At most this many values are enumerated for `multipleOf`. */
export const MAX_MULTIPLES = 256;

const BOUND_KEYWORDS = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'] as const;

/** The rule for one `{type: "number" | "integer", ...}` schema (keywords other than bounds are ignored). */
export function numberRule(schema: Readonly<Record<string, unknown>>, integer: boolean): NumberRule {
  for (const k of BOUND_KEYWORDS) {
    const v = schema[k];
    if (v !== undefined && (typeof v !== 'number' || !Number.isFinite(v)))
      return refused(k, `\`${k}\` must be a finite number`);
    if (typeof v === 'number' && Math.abs(v) >= 10 ** MAX_INTEGER_DIGITS)
      return refused(k, `Tessera enforces numeric bounds below 1e${MAX_INTEGER_DIGITS} in magnitude`);
  }
  const num = (k: string) => schema[k] as number | undefined;
  const mult = num('multipleOf');
  if (mult !== undefined) return multiplesRule(schema, mult);
  const decimals = integer ? 0 : decimalsFor(schema);
  if (decimals < 0)
    return refused('exclusiveMaximum', 'an exclusive bound this large cannot be compared exactly with a double');
  const unit = 10n ** BigInt(decimals);
  const cap = 10n ** BigInt(MAX_INTEGER_DIGITS) * unit - 1n;
  let lo = -cap;
  let hi = cap;
  const min = num('minimum');
  const xmin = num('exclusiveMinimum');
  const max = num('maximum');
  const xmax = num('exclusiveMaximum');
  if (min !== undefined) lo = big(lo, scaled(min, decimals, 'ceil'), 'max');
  if (xmin !== undefined) lo = big(lo, scaled(xmin, decimals, 'floor') + 1n, 'max');
  if (max !== undefined) hi = big(hi, scaled(max, decimals, 'floor'), 'min');
  if (xmax !== undefined) hi = big(hi, scaled(xmax, decimals, 'ceil') - 1n, 'min');
  if (lo > hi)
    return refused(
      min !== undefined || xmin !== undefined ? (min !== undefined ? 'minimum' : 'exclusiveMinimum') : 'maximum',
      `no ${integer ? 'integer' : `number with at most ${decimals} decimals`} is within the bounds`,
    );
  return { kind: 'rule', ebnf: rangeRule(lo, hi, decimals) };
}

/** EBNF for the decimal texts of the values lo..hi, in units of 10^-decimals. */
export function rangeRule(lo: bigint, hi: bigint, decimals: number): string {
  const alts: string[] = [];
  if (lo < 0n) alts.push(seq(['"-"', magnitudes(hi < 0n ? -hi : 1n, -lo, decimals)]));
  if (hi >= 0n) alts.push(magnitudes(lo > 0n ? lo : 0n, hi, decimals));
  return alt(alts);
}

/** Nonnegative values lo..hi (units), written without a sign. */
function magnitudes(lo: bigint, hi: bigint, decimals: number): string {
  if (decimals === 0) return intRange(lo, hi);
  const unit = 10n ** BigInt(decimals);
  const [ilo, flo] = [lo / unit, pad(lo % unit, decimals)];
  const [ihi, fhi] = [hi / unit, pad(hi % unit, decimals)];
  const nines = '9'.repeat(decimals);
  const zeros = '0'.repeat(decimals);
  if (ilo === ihi) return seq([lit(String(ilo)), fractionPart(flo, fhi)]);
  // Integer parts whose every fraction is in range share one alternative.
  const [loWhole, hiWhole] = [flo === zeros, fhi === nines];
  const [midLo, midHi] = [loWhole ? ilo : ilo + 1n, hiWhole ? ihi : ihi - 1n];
  const alts: string[] = [];
  if (!loWhole) alts.push(seq([lit(String(ilo)), fractionPart(flo, nines)]));
  if (midLo <= midHi) alts.push(seq([intRange(midLo, midHi), fractionPart(zeros, nines)]));
  if (!hiWhole) alts.push(seq([lit(String(ihi)), fractionPart(zeros, fhi)]));
  return alt(alts);
}

/** Nothing, or "." and 1..n digits, such that the digits padded with zeros are within [lo, hi]. */
function fractionPart(lo: string, hi: string): string {
  const digits = fraction(lo, hi);
  const dotted = digits === null ? null : seq(['"."', digits]);
  if (/^0*$/.test(lo)) return dotted === null ? '""' : `(${dotted})?`;
  return dotted ?? '""'; // lo > 0 means some digit is needed; fraction() then never returns null
}

/** Non-empty digit strings s (|s| <= n) whose zero-padded value is within [lo, hi] (length n each). */
function fraction(lo: string, hi: string): string | null {
  const n = lo.length;
  if (n === 0) return null;
  if (/^0*$/.test(lo) && /^9*$/.test(hi)) return `[0-9]${rep(1, n)}`;
  const [a, b] = [Number(lo[0]), Number(hi[0])];
  if (/^0*$/.test(lo.slice(1)) && /^9*$/.test(hi.slice(1)))
    return seq([digitClass(a, b), n > 1 ? `[0-9]${rep(0, n - 1)}` : '""']);
  const rest = (l: string, h: string) => {
    const tail = fraction(l, h);
    return /^0*$/.test(l) ? (tail === null ? '""' : `(${tail})?`) : (tail ?? '""');
  };
  if (a === b) return seq([lit(lo[0] as string), rest(lo.slice(1), hi.slice(1))]);
  const alts = [seq([lit(String(a)), rest(lo.slice(1), '9'.repeat(n - 1))])];
  if (b - a >= 2) alts.push(seq([digitClass(a + 1, b - 1), n > 1 ? `[0-9]${rep(0, n - 1)}` : '""']));
  alts.push(seq([lit(String(b)), rest('0'.repeat(n - 1), hi.slice(1))]));
  return alt(alts);
}

/** Canonical decimal integers lo..hi (no leading zeros), 0 <= lo <= hi. */
function intRange(lo: bigint, hi: bigint): string {
  const alts: string[] = [];
  let whole: [number, number] | undefined; // a run of lengths whose every number is in range
  const flush = () => {
    if (whole !== undefined) alts.push(`[1-9] [0-9]${rep(whole[0] - 1, whole[1] - 1)}`);
    whole = undefined;
  };
  for (let n = String(lo).length; n <= String(hi).length; n++) {
    const first = n === 1 ? 0n : 10n ** BigInt(n - 1);
    const last = 10n ** BigInt(n) - 1n;
    const a = lo > first ? lo : first;
    const b = hi < last ? hi : last;
    if (a > b) continue;
    if (n > 1 && a === first && b === last) {
      whole = whole === undefined ? [n, n] : [whole[0], n];
      continue;
    }
    flush();
    alts.push(fixedRange(String(a), String(b)));
  }
  flush();
  return alt(alts);
}

/** Digit strings of one length within [lo, hi]. */
function fixedRange(lo: string, hi: string): string {
  const n = lo.length;
  if (n === 0) return '""';
  if (/^0*$/.test(lo) && /^9*$/.test(hi)) return `[0-9]{${n}}`;
  const [a, b] = [Number(lo[0]), Number(hi[0])];
  if (/^0*$/.test(lo.slice(1)) && /^9*$/.test(hi.slice(1)))
    return seq([digitClass(a, b), n > 1 ? `[0-9]{${n - 1}}` : '""']);
  if (a === b) return seq([lit(lo[0] as string), fixedRange(lo.slice(1), hi.slice(1))]);
  const alts = [seq([lit(String(a)), fixedRange(lo.slice(1), '9'.repeat(n - 1))])];
  if (b - a >= 2) alts.push(seq([digitClass(a + 1, b - 1), n > 1 ? `[0-9]{${n - 1}}` : '""']));
  alts.push(seq([lit(String(b)), fixedRange('0'.repeat(n - 1), hi.slice(1))]));
  return alt(alts);
}

/** multipleOf: the multiples within finite bounds, enumerated (each checked as ajv checks it). */
function multiplesRule(schema: Readonly<Record<string, unknown>>, mult: number): NumberRule {
  if (!(mult > 0)) return refused('multipleOf', '`multipleOf` must be greater than 0');
  const lows = [schema['minimum'], schema['exclusiveMinimum']].filter((v) => typeof v === 'number');
  const highs = [schema['maximum'], schema['exclusiveMaximum']].filter((v) => typeof v === 'number');
  if (lows.length === 0 || highs.length === 0)
    return refused('multipleOf', 'Tessera enforces `multipleOf` only between a lower and an upper bound');
  const decimals = Math.max(fractionDigits(mult), 0);
  if (decimals > 12) return refused('multipleOf', '`multipleOf` has too many decimals to enumerate its multiples');
  const unit = scaled(mult, decimals, 'floor');
  const lo = scaled(Math.max(...lows), decimals, 'floor');
  const hi = scaled(Math.min(...highs), decimals, 'ceil');
  const first = lo / unit - 1n;
  const last = hi / unit + 1n;
  if (last - first > BigInt(MAX_MULTIPLES) + 3n)
    return refused('multipleOf', `Tessera enumerates at most ${MAX_MULTIPLES} multiples within the bounds`);
  const values: string[] = [];
  for (let k = first; k <= last; k++) {
    const text = decimalText(k * unit, decimals);
    const value = Number(text);
    if (admits(schema, value)) values.push(text);
  }
  if (values.length === 0) return refused('multipleOf', 'no multiple is within the bounds');
  return { kind: 'rule', ebnf: trieRule(values) };
}

/** What ajv checks for these keywords (its multipleOf test is `x / m !== parseInt(x / m)`). */
function admits(schema: Readonly<Record<string, unknown>>, x: number): boolean {
  const n = (k: string) => schema[k] as number | undefined;
  const [min, xmin, max, xmax] = [n('minimum'), n('exclusiveMinimum'), n('maximum'), n('exclusiveMaximum')];
  const mult = n('multipleOf');
  if (schema['type'] === 'integer' && !Number.isInteger(x)) return false;
  if (mult !== undefined && x / mult !== Number.parseInt(String(x / mult), 10)) return false;
  return !(
    (min !== undefined && x < min) ||
    (xmin !== undefined && x <= xmin) ||
    (max !== undefined && x > max) ||
    (xmax !== undefined && x >= xmax)
  );
}

/** Decimals for a number rule: at least DEFAULT_DECIMALS, enough for the bounds; -1 when impossible. */
function decimalsFor(schema: Readonly<Record<string, unknown>>): number {
  const bounds = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'].flatMap((k) =>
    typeof schema[k] === 'number' ? [schema[k]] : [],
  );
  let decimals = Math.max(DEFAULT_DECIMALS, ...bounds.map(fractionDigits));
  // Near an exclusive bound a value must keep <= 15 significant digits (see the header).
  for (const k of ['exclusiveMinimum', 'exclusiveMaximum']) {
    const v = schema[k];
    if (typeof v === 'number') decimals = Math.min(decimals, 15 - String(Math.trunc(Math.abs(v))).length);
  }
  return Math.min(decimals, 15);
}

/** x * 10^decimals rounded up or down, in exact decimal arithmetic (from x's shortest text). */
export function scaled(x: number, decimals: number, round: 'ceil' | 'floor'): bigint {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(String(x));
  if (m === null) throw new RangeError(`not a finite number: ${x}`);
  const [, sign, int, frac = '', exp = '0'] = m;
  const digits = BigInt(`${int}${frac}`);
  const shift = Number(exp) - frac.length + decimals; // |x| * 10^decimals = digits * 10^shift
  let magnitude: bigint;
  let exact = true;
  if (shift >= 0) magnitude = digits * 10n ** BigInt(shift);
  else {
    const div = 10n ** BigInt(-shift);
    magnitude = digits / div;
    exact = digits % div === 0n;
  }
  const negative = sign === '-';
  const value = negative ? -magnitude : magnitude;
  if (exact) return value;
  // Truncation went toward zero: step away from zero when rounding in that direction.
  if (round === 'ceil') return negative ? value : value + 1n;
  return negative ? value - 1n : value;
}

function fractionDigits(x: number): number {
  const m = /^-?\d+(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(String(x));
  if (m === null) return 0;
  return Math.max(0, (m[1]?.length ?? 0) - Number(m[2] ?? '0'));
}

function decimalText(units: bigint, decimals: number): string {
  const negative = units < 0n;
  const abs = negative ? -units : units;
  const unit = 10n ** BigInt(decimals);
  const int = String(abs / unit);
  const frac = decimals === 0 ? '' : pad(abs % unit, decimals).replace(/0+$/, '');
  return `${negative && abs !== 0n ? '-' : ''}${int}${frac === '' ? '' : `.${frac}`}`;
}

function big(a: bigint, b: bigint, pick: 'min' | 'max'): bigint {
  return pick === 'max' ? (a > b ? a : b) : a < b ? a : b;
}
const pad = (v: bigint, n: number): string => String(v).padStart(n, '0');
const lit = (s: string): string => `"${s.replace(/["\\]/g, (c) => `\\${c}`)}"`;
const digitClass = (a: number, b: number): string => (a === b ? `"${a}"` : `[${a}-${b}]`);
const rep = (min: number, max: number): string => (min === max ? `{${min}}` : `{${min},${max}}`);
const seq = (parts: readonly string[]): string => {
  const kept = parts.filter((p) => p !== '""');
  return kept.length === 0 ? '""' : kept.join(' ');
};
const alt = (alts: readonly string[]): string => (alts.length === 1 ? `(${alts[0]})` : `(${alts.join(' | ')})`);
const refused = (keyword: string, reason: string): NumberRule => ({ kind: 'refused', keyword, reason });
