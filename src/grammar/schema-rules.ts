// The schema pass: a request's JSON schema -> the schema xgrammar is given, in which every keyword
// is enforced exactly, or the keyword Tessera refuses and why. Pure: no xgrammar, no I/O.
//   number, integer     -> {"x-tessera-ebnf": rule} of number-rules.ts (bounds, multipleOf);
//                          also without bounds (values below 1e15, so JSON.parse never gives Infinity)
//   string + lengths, format -> a rule of string-rules.ts; + pattern -> the pattern made JSON-safe
//   type: [a, b]        -> anyOf of one schema per type (so each branch gets its rules)
//   oneOf               -> kept when its branches are disjoint (different types, or a property
//                          every branch requires with a different const: pydantic's unions); refused otherwise
//   keywords xgrammar ignores (allOf, not, if, uniqueItems, minProperties, ...) -> refused
// A rule node {"x-tessera-ebnf": expr} travels inside the ConstraintSpec's schema to whichever node
// compiles it (schema-compile.ts splices it into xgrammar's EBNF); a client's schema that holds the
// key is refused, so only this pass writes rules.
// Must never accept a keyword whose outputs could fail ajv (strict) for that schema.
import { numberRule } from './number-rules.js';
import { stringRule } from './string-rules.js';
import { trieRule } from './trie-rule.js';

export const RULE_KEY = 'x-tessera-ebnf';

export type SchemaPlan =
  | { readonly kind: 'schema'; readonly schema: string }
  | { readonly kind: 'refused'; readonly keyword: string; readonly reason: string };

type Node = Record<string, unknown>;

/** Keywords that constrain values but that xgrammar does not enforce (refused when they constrain). */
const UNENFORCED = [
  'allOf',
  'not',
  'if',
  'then',
  'else',
  'dependentRequired',
  'dependentSchemas',
  'dependencies',
  'contains',
  'minContains',
  'maxContains',
  'minProperties',
  'maxProperties',
  'propertyNames',
  'patternProperties',
  '$dynamicRef',
  '$recursiveRef',
] as const;
/** Keywords that describe a schema without constraining values. */
const ANNOTATIONS = new Set(['allOf', 'title', 'description', 'default', 'examples', '$comment', 'deprecated']);
/** Schemas nested deeper are refused before the walk could exhaust the stack (schema-limits.ts refuses far less). */
export const MAX_SCHEMA_LEVELS = 256;
const NUMERIC = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'] as const;
const TEXTUAL = ['minLength', 'maxLength', 'pattern', 'format'] as const;

class Refusal extends Error {
  constructor(
    readonly keyword: string,
    readonly reason: string,
  ) {
    super(reason);
  }
}

/** The pass over one schema (JSON text). */
export function schemaRules(schemaText: string): SchemaPlan {
  let root: unknown;
  try {
    root = JSON.parse(schemaText) as unknown;
  } catch {
    return { kind: 'refused', keyword: 'schema', reason: 'the schema is not JSON' };
  }
  try {
    return { kind: 'schema', schema: JSON.stringify(walk(root, root, 0)) };
  } catch (error) {
    if (error instanceof Refusal) return { kind: 'refused', keyword: error.keyword, reason: error.reason };
    throw error;
  }
}

function walk(node: unknown, root: unknown, level: number): unknown {
  if (typeof node !== 'object' || node === null || Array.isArray(node)) return node;
  if (level > MAX_SCHEMA_LEVELS)
    throw new Refusal('schema', `the schema is nested deeper than ${MAX_SCHEMA_LEVELS} levels`);
  const s = node as Node;
  if (Object.hasOwn(s, RULE_KEY)) throw new Refusal(RULE_KEY, `\`${RULE_KEY}\` is reserved for Tessera`);
  // pydantic v1 writes {allOf: [{$ref}], description}: one branch beside annotations is that branch.
  if (Array.isArray(s['allOf']) && s['allOf'].length === 1 && Object.keys(s).every((k) => ANNOTATIONS.has(k)))
    return walk(s['allOf'][0], root, level + 1);
  for (const k of UNENFORCED) if (Object.hasOwn(s, k)) throw new Refusal(k, `Tessera does not enforce \`${k}\``);
  for (const k of ['unevaluatedProperties', 'unevaluatedItems'])
    if (Object.hasOwn(s, k) && s[k] !== false) throw new Refusal(k, `Tessera enforces \`${k}\` only as false`);
  const type = s['type'];
  const hasValues = Object.hasOwn(s, 'enum') || Object.hasOwn(s, 'const');
  if (Array.isArray(type) && !hasValues) return walkTypes(s, root, level);
  if (hasValues) {
    const extra = [...NUMERIC, ...TEXTUAL].find((k) => Object.hasOwn(s, k));
    if (extra !== undefined) throw new Refusal(extra, `Tessera does not enforce \`${extra}\` beside enum or const`);
    return valuesRule(s);
  }
  if (type === 'number' || type === 'integer') {
    const bad = TEXTUAL.find((k) => Object.hasOwn(s, k));
    if (bad !== undefined) throw new Refusal(bad, `\`${bad}\` does not apply to type ${type}`);
    const rule = numberRule(s, type === 'integer');
    if (rule.kind === 'refused') throw new Refusal(rule.keyword, rule.reason);
    return { [RULE_KEY]: rule.ebnf };
  }
  if (type === 'string') {
    if (!TEXTUAL.some((k) => Object.hasOwn(s, k))) return s;
    const rule = stringRule(s);
    if (rule.kind === 'refused') throw new Refusal(rule.keyword, rule.reason);
    return rule.kind === 'rule' ? { [RULE_KEY]: rule.ebnf } : rule.schema;
  }
  const stray = [...NUMERIC, ...TEXTUAL].find((k) => Object.hasOwn(s, k));
  if (stray !== undefined)
    throw new Refusal(stray, `Tessera enforces \`${stray}\` only with a \`type\` it applies to (number or string)`);
  if (s['uniqueItems'] === true && !(typeof s['maxItems'] === 'number' && s['maxItems'] <= 1))
    throw new Refusal('uniqueItems', 'Tessera does not enforce `uniqueItems`');
  if (Array.isArray(s['items'])) throw new Refusal('items', 'Tessera takes `items` as a schema (use prefixItems)');
  checkRequired(s);
  if (Array.isArray(s['oneOf'])) checkDisjoint(s['oneOf'], root);
  return mapChildren(s, (child) => walk(child, root, level + 1));
}

/** enum and const: their JSON texts as a trie (xgrammar's own list of literals can over-accept). */
function valuesRule(s: Node): Node {
  const candidates = Object.hasOwn(s, 'const') ? [s['const']] : Array.isArray(s['enum']) ? s['enum'] : null;
  if (candidates === null) throw new Refusal('enum', '`enum` must be an array');
  if (Object.hasOwn(s, 'const') && Object.hasOwn(s, 'enum'))
    throw new Refusal('enum', 'Tessera does not enforce `enum` beside `const`');
  const types = s['type'] === undefined ? null : Array.isArray(s['type']) ? s['type'] : [s['type']];
  const kept = candidates.filter((v) => types === null || types.some((t) => hasType(v, t)));
  if (kept.length === 0) throw new Refusal('enum', "no value of `enum` or `const` has the schema's type");
  return { [RULE_KEY]: trieRule(kept.map((v) => JSON.stringify(v))) };
}

function hasType(v: unknown, t: unknown): boolean {
  switch (t) {
    case 'null':
      return v === null;
    case 'array':
      return Array.isArray(v);
    case 'object':
      return typeof v === 'object' && v !== null && !Array.isArray(v);
    case 'integer':
      return Number.isInteger(v);
    default:
      return typeof v === t;
  }
}

/** {type: [a, b], ...} -> {anyOf: [{type: a, ...}, {type: b, ...}]}. */
function walkTypes(s: Node, root: unknown, level: number): unknown {
  const types = s['type'] as unknown[];
  if (Object.hasOwn(s, 'anyOf') || Object.hasOwn(s, 'oneOf'))
    throw new Refusal('type', 'Tessera does not enforce a list of types beside anyOf or oneOf');
  if (types.length === 0) throw new Refusal('type', '`type` lists no type');
  // Each branch keeps only the keywords that apply to its type (JSON Schema ignores the others).
  const forType = (t: unknown): Node =>
    Object.fromEntries(
      Object.entries({ ...s, type: t }).filter(
        ([k]) =>
          !((NUMERIC as readonly string[]).includes(k) && t !== 'number' && t !== 'integer') &&
          !((TEXTUAL as readonly string[]).includes(k) && t !== 'string'),
      ),
    );
  return { anyOf: types.map((t) => walk(forType(t), root, level + 1)) };
}

/** In strict mode every required property must be one the schema names. */
function checkRequired(s: Node): void {
  const required = s['required'];
  if (!Array.isArray(required)) return;
  const props = typeof s['properties'] === 'object' && s['properties'] !== null ? (s['properties'] as Node) : {};
  const open = s['additionalProperties'] !== undefined && s['additionalProperties'] !== false;
  for (const name of required)
    if (typeof name === 'string' && !Object.hasOwn(props, name) && !open)
      throw new Refusal('required', `\`required\` names "${name}", which \`properties\` does not define`);
}

/** oneOf is anyOf when no value can match two branches. */
function checkDisjoint(branches: readonly unknown[], root: unknown): void {
  const resolved = branches.map((b) => resolve(b, root));
  const types = resolved.map((b) => (typeof b['type'] === 'string' ? b['type'] : undefined));
  const numeric = (t: string | undefined) => t === 'number' || t === 'integer';
  const typed = types.every((t) => t !== undefined);
  if (typed && types.every((t, i) => types.findIndex((u) => u === t || (numeric(u) && numeric(t))) === i)) return;
  const tag = discriminator(resolved);
  if (tag !== undefined) return;
  throw new Refusal('oneOf', 'Tessera enforces `oneOf` only when its branches are disjoint (use anyOf)');
}

/** A property every branch requires, with a different const in each. */
function discriminator(branches: readonly Node[]): string | undefined {
  const first = branches[0];
  if (first === undefined) return undefined;
  const candidates = Array.isArray(first['required']) ? (first['required'] as unknown[]) : [];
  return candidates.find((name): name is string => {
    if (typeof name !== 'string') return false;
    const values = branches.map((b) => {
      const props = (b['properties'] ?? {}) as Node;
      const prop = props[name] as Node | undefined;
      const required = Array.isArray(b['required']) && b['required'].includes(name);
      if (!required || prop === undefined) return undefined;
      const one = Array.isArray(prop['enum']) && prop['enum'].length === 1 ? prop['enum'][0] : prop['const'];
      return one === undefined ? undefined : JSON.stringify(one);
    });
    return values.every((v) => v !== undefined) && new Set(values).size === values.length;
  });
}

/** A local $ref (#/$defs/x, #/definitions/x), one level; other schemas as they are. */
function resolve(node: unknown, root: unknown): Node {
  const s = (typeof node === 'object' && node !== null ? node : {}) as Node;
  const ref = s['$ref'];
  if (typeof ref !== 'string' || !ref.startsWith('#/')) return s;
  let at: unknown = root;
  for (const part of ref.slice(2).split('/'))
    at = (at as Node | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
  return (typeof at === 'object' && at !== null ? at : {}) as Node;
}

/** The schema with each subschema-valued keyword's subschemas mapped. */
function mapChildren(s: Node, f: (child: unknown) => unknown): Node {
  const out: Node = { ...s };
  for (const k of ['properties', '$defs', 'definitions'])
    if (typeof s[k] === 'object' && s[k] !== null && !Array.isArray(s[k]))
      out[k] = Object.fromEntries(Object.entries(s[k] as Node).map(([name, v]) => [name, f(v)]));
  for (const k of ['items', 'additionalProperties', 'additionalItems'])
    if (typeof s[k] === 'object' && s[k] !== null) out[k] = f(s[k]);
  for (const k of ['anyOf', 'oneOf', 'prefixItems']) if (Array.isArray(s[k])) out[k] = (s[k] as unknown[]).map(f);
  return out;
}
