// The size of a JSON schema, measured before anything compiles it: one linear walk of the schema
// document (an explicit stack, no recursion, so no depth can overflow it) that counts what makes
// xgrammar's compile slow or makes its WASM instance trap, and refuses a schema over any limit
// with an InvalidRequestError naming the limit and the request's param (the client's 400).
// Why before compiling: a compile runs for seconds on a big schema, and xgrammar's instance traps
// ("memory access out of bounds") on a schema nested about 100 objects deep (measured: 50 levels
// compile, 100 trap). The limits are generous for real schemas; OpenAI's structured outputs take
// at most 5000 properties and 1000 enum values (and 10 levels of nesting in strict mode).
// The schema measured is the one the schema pass (schema-rules.ts) wrote: its rule nodes, whose
// text Tessera wrote (about 600 bytes per bounded number), do not count toward the size in bytes.
// Keywords are counted wherever they appear (a property named "enum" whose value is an array
// counts as an enum): a slight over-count, never an under-count.
// Must never compile, allocate per character, or recurse on the input.
import { InvalidRequestError } from '../core/index.js';
import { refCycle } from './ref-cycles.js';
import { RULE_KEY } from './schema-rules.js';

/** Above this many times the byte limit, a schema is refused before parsing, rule nodes or not. */
const RULE_HEADROOM = 8;

export interface SchemaLimits {
  /** UTF-8 bytes of the schema text. */
  readonly maxSchemaBytes: number;
  /** Nesting of the schema document's objects and arrays (one schema level via `properties` is two). */
  readonly maxDepth: number;
  /** Entries of every `properties` object, summed. */
  readonly maxProperties: number;
  /** Elements of every `enum`, plus one per `const`. */
  readonly maxEnumValues: number;
  /** `pattern` keywords plus `patternProperties` keys. */
  readonly maxPatterns: number;
  /** UTF-16 units of one pattern. */
  readonly maxPatternLength: number;
  /** `$ref` keywords. */
  readonly maxRefs: number;
  /** Branches of every `anyOf` and `oneOf`, summed (tool_choice "required" makes one per tool). */
  readonly maxBranches: number;
}

export const SCHEMA_LIMITS: SchemaLimits = {
  maxSchemaBytes: 256 * 1024,
  maxDepth: 64,
  maxProperties: 5000,
  maxEnumValues: 1000,
  maxPatterns: 100,
  maxPatternLength: 1000,
  maxRefs: 1000,
  maxBranches: 1000,
};

interface Counts {
  properties: number;
  enumValues: number;
  patterns: number;
  refs: number;
  branches: number;
  /** Bytes of the rule nodes' text, as it stands in the schema (escaped). */
  ruleBytes: number;
}

/** null when `schema` (JSON text) is within `limits`; else the 400 naming the limit and `param`. */
export function schemaOverLimit(schema: string, param: string, limits: SchemaLimits): InvalidRequestError | null {
  const over = (what: string, value: number | string, limit: number) =>
    new InvalidRequestError(
      `\`${param}\`: the schema's ${what} (${value}) is over Tessera's limit of ${limit}; a smaller schema is needed.`,
      param,
    );
  // Cheap before parsing: far over the limit is refused whatever its rule nodes hold.
  if (schema.length > limits.maxSchemaBytes * RULE_HEADROOM)
    return over('size in bytes', `at least ${schema.length}`, limits.maxSchemaBytes);
  let root: unknown;
  try {
    root = JSON.parse(schema);
  } catch {
    return new InvalidRequestError(`\`${param}\`: the schema is not valid JSON.`, param);
  }
  const counts: Counts = { properties: 0, enumValues: 0, patterns: 0, refs: 0, branches: 0, ruleBytes: 0 };
  const stack: { readonly value: unknown; readonly depth: number }[] = [{ value: root, depth: 1 }];
  while (stack.length > 0) {
    const { value, depth } = stack.pop() as { value: unknown; depth: number };
    if (typeof value !== 'object' || value === null) continue;
    if (depth > limits.maxDepth) return over('nesting depth', `more than ${limits.maxDepth}`, limits.maxDepth);
    if (Array.isArray(value)) {
      for (const item of value) stack.push({ value: item, depth: depth + 1 });
      continue;
    }
    const tooLong = countKeywords(value as Record<string, unknown>, counts, limits.maxPatternLength);
    if (tooLong !== null) return over('pattern length', tooLong, limits.maxPatternLength);
    for (const item of Object.values(value)) stack.push({ value: item, depth: depth + 1 });
  }
  const numBytes = Buffer.byteLength(schema, 'utf8') - counts.ruleBytes;
  if (numBytes > limits.maxSchemaBytes) return over('size in bytes', numBytes, limits.maxSchemaBytes);
  if (counts.properties > limits.maxProperties)
    return over('number of properties', counts.properties, limits.maxProperties);
  if (counts.enumValues > limits.maxEnumValues)
    return over('number of enum and const values', counts.enumValues, limits.maxEnumValues);
  if (counts.patterns > limits.maxPatterns) return over('number of patterns', counts.patterns, limits.maxPatterns);
  if (counts.refs > limits.maxRefs) return over('number of $ref', counts.refs, limits.maxRefs);
  if (counts.branches > limits.maxBranches)
    return over('number of anyOf/oneOf branches', counts.branches, limits.maxBranches);
  const cycle = refCycle(root);
  if (cycle !== null)
    return new InvalidRequestError(
      `\`${param}\`: the schema's $ref cycle ${cycle} never reaches a value; no output could match it.`,
      param,
    );
  return null;
}

/** Adds one object's keywords to `counts`; the length of a pattern over the limit, else null. */
function countKeywords(node: Record<string, unknown>, counts: Counts, maxPatternLength: number): number | null {
  const { properties, patternProperties, pattern, $ref, anyOf, oneOf } = node;
  if (isRecord(properties)) counts.properties += Object.keys(properties).length;
  if (Array.isArray(node.enum)) counts.enumValues += node.enum.length;
  if ('const' in node) counts.enumValues += 1;
  if (typeof pattern === 'string') {
    counts.patterns++;
    if (pattern.length > maxPatternLength) return pattern.length;
  }
  if (isRecord(patternProperties)) {
    for (const key of Object.keys(patternProperties)) {
      counts.patterns++;
      if (key.length > maxPatternLength) return key.length;
    }
  }
  if (typeof $ref === 'string') counts.refs++;
  const rule = node[RULE_KEY];
  if (typeof rule === 'string') counts.ruleBytes += Buffer.byteLength(JSON.stringify(rule), 'utf8');
  if (Array.isArray(anyOf)) counts.branches += anyOf.length;
  if (Array.isArray(oneOf)) counts.branches += oneOf.length;
  return null;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
