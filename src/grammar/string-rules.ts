// Grammar rules for JSON strings whose keywords xgrammar 0.1.27 does not enforce exactly, and the
// checks that refuse the rest. What xgrammar gets wrong (measured with Testings._jsonSchemaToEBNF):
//   minLength/maxLength   [^"\\\r\n]{m,n}: a raw tab or other control character, not JSON
//   beside format/pattern ignored ("not supported yet"): maxLength 30 beside email ran past 300
//   pattern "."/[^a]      any code point, a raw quote or backslash included: not JSON
//   format email          a quoted local part with raw quotes; a domain without a dot (ajv: invalid)
//   format date/date-time February 31st; minute 60 (ajv-formats checks both)
//   format ipv4           leading zeros ("01"), which ajv-formats refuses
//   other formats         ignored (any string)
// So: lengths alone and the formats below get rules of our own (each a subset of what ajv-formats
// accepts); a pattern is rewritten so that it can only match characters a JSON string holds raw;
// everything else is refused with the keyword's name.
// Must never allow a string ajv (strict, with ajv-formats) would reject under the same keywords.

export type StringRule =
  | { readonly kind: 'rule'; readonly ebnf: string }
  | { readonly kind: 'schema'; readonly schema: Readonly<Record<string, unknown>> }
  | { readonly kind: 'refused'; readonly keyword: string; readonly reason: string };

/** The longest maxLength (and minLength) enforced; longer ones are refused. */
export const MAX_STRING_LENGTH = 4096;

/** One character of a JSON string that counts as one code point: unescaped, or a one-letter escape. */
const CHAR = '([^"\\\\\\0-\\x1f] | "\\\\" ["\\\\/bfnrt])';
const label = '[a-zA-Z0-9] ([a-zA-Z0-9-]* [a-zA-Z0-9])?';
const hostLabel = '[a-z0-9] ([a-z0-9-]{0,61} [a-z0-9])?';
const octet = '("25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9])';
const date = '[0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | "1" [0-9] | "2" [0-8])';
const time = '([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? "Z"';

/** Formats enforced, each by a grammar whose strings ajv-formats (full mode) accepts. */
export const FORMAT_RULES: Readonly<Record<string, string>> = {
  date,
  time,
  'date-time': `${date} "T" ${time}`,
  email: `[a-zA-Z0-9_+-]+ ("." [a-zA-Z0-9_+-]+)* "@" ${label} ("." ${label})+`,
  hostname: `${hostLabel} ("." ${hostLabel}){0,2}`,
  ipv4: `${octet} "." ${octet} "." ${octet} "." ${octet}`,
  uuid: '[0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12}',
  uri: `"https://" ${label} ("." ${label})* ("/" [a-zA-Z0-9_.~-]*)*`,
};

/** The rule for one `{type: "string", ...}` schema with any of minLength, maxLength, format, pattern. */
export function stringRule(schema: Readonly<Record<string, unknown>>): StringRule {
  const { minLength, maxLength, format, pattern } = schema;
  const lengthKeyword = minLength !== undefined ? 'minLength' : 'maxLength';
  const hasLength = minLength !== undefined || maxLength !== undefined;
  if (hasLength && (format !== undefined || pattern !== undefined))
    return refused(
      lengthKeyword,
      `Tessera cannot enforce \`${lengthKeyword}\` beside \`${format !== undefined ? 'format' : 'pattern'}\``,
    );
  if (format !== undefined && pattern !== undefined)
    return refused('format', 'Tessera cannot enforce `format` beside `pattern`');
  if (format !== undefined) {
    const rule = typeof format === 'string' && Object.hasOwn(FORMAT_RULES, format) ? FORMAT_RULES[format] : undefined;
    if (rule === undefined)
      return refused(
        'format',
        `Tessera enforces only the formats ${Object.keys(FORMAT_RULES).join(', ')}; got ${JSON.stringify(format)}`,
      );
    return { kind: 'rule', ebnf: `("\\"" ${rule} "\\"")` };
  }
  if (pattern !== undefined) {
    if (typeof pattern !== 'string') return refused('pattern', '`pattern` must be a string');
    const safe = jsonSafePattern(pattern);
    return typeof safe === 'string' ? { kind: 'schema', schema: { ...schema, pattern: safe } } : safe;
  }
  const min = minLength ?? 0;
  const max = maxLength ?? MAX_STRING_LENGTH;
  for (const [k, v] of [
    ['minLength', min],
    ['maxLength', max],
  ] as const) {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0)
      return refused(k, `\`${k}\` must be a nonnegative integer`);
    if (v > MAX_STRING_LENGTH) return refused(k, `Tessera enforces string lengths up to ${MAX_STRING_LENGTH}`);
  }
  if ((min as number) > (max as number)) return refused('minLength', '`minLength` is above `maxLength`');
  return { kind: 'rule', ebnf: `("\\"" ${CHAR}{${min as number},${max as number}} "\\"")` };
}

/**
 * A pattern that matches only characters a JSON string may hold unescaped (xgrammar puts the
 * pattern's characters between the quotes as they are): `.` and negated classes exclude the quote,
 * the backslash and control characters; what would match one of those on purpose is refused.
 * xgrammar matches the whole string (as if anchored): a subset of what ajv's search accepts.
 */
export function jsonSafePattern(pattern: string): string | StringRule {
  const EXCLUDE = '"\\\\\\x00-\\x1f\\u2028\\u2029';
  const bad = (why: string): StringRule => refused('pattern', `the pattern ${why}, which a JSON string must escape`);
  let out = '';
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i] as string;
    if (c === '\\') {
      const next = pattern[i + 1] ?? '';
      if ('sSDWbB'.includes(next) || next === '\\' || next === '"' || next === '') return bad(`uses \\${next}`);
      if (next === 'x' || next === 'u') {
        const hex = pattern.slice(i + 2, i + (next === 'x' ? 4 : 6));
        const code = Number.parseInt(hex, 16);
        if (Number.isNaN(code) || code < 0x20 || code === 0x22 || code === 0x5c) return bad(`escapes \\${next}${hex}`);
      }
      if ('nrtfv0c'.includes(next)) return bad(`matches a control character (\\${next})`);
      out += c + next;
      i++;
      continue;
    }
    if (c.charCodeAt(0) < 0x20 || c === '"') return bad('matches a quote or a control character');
    if (inClass) {
      if (c === ']') inClass = false;
      else if (c === '-' && pattern[i + 1] !== ']' && out.at(-1) !== '[') {
        const from = classCharBefore(out);
        const to = pattern[i + 1] ?? '';
        if (from !== undefined && spans(from, to))
          return bad(`has the range ${from}-${to}, which holds a quote or a backslash`);
      }
      out += c;
      continue;
    }
    if (c === '[') {
      inClass = true;
      if (pattern[i + 1] === '^') {
        out += `[^${EXCLUDE}`;
        i++;
      } else out += c;
      continue;
    }
    out += c === '.' ? `[^${EXCLUDE}]` : c;
  }
  return out;
}

function classCharBefore(out: string): string | undefined {
  const c = out.at(-1);
  return c === undefined || out.at(-2) === '\\' ? undefined : c;
}

/** Whether the class range from-to holds the quote, the backslash or a control character. */
function spans(from: string, to: string): boolean {
  const [a, b] = [from.charCodeAt(0), to.charCodeAt(0)];
  return [0x22, 0x5c].some((x) => a <= x && x <= b) || a < 0x20;
}

const refused = (keyword: string, reason: string): StringRule => ({ kind: 'refused', keyword, reason });
