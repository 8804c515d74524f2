// Compiles a ConstraintSpec's schema that holds rule nodes ({"x-tessera-ebnf": expr}, written by
// schema-rules.ts): each rule node becomes a marker const, xgrammar's JSON-schema converter builds
// the EBNF around the markers, and each marker's literal is replaced by its rule. A schema without
// rule nodes compiles as before (xgrammar's converter alone).
// Must never let a marker collide with text of the schema, or leave a marker unreplaced.
import { InvariantError } from '../core/index.js';
import { RULE_KEY } from './schema-rules.js';
import type { XgrammarModule } from './xgrammar.js';

type Compiler = Awaited<ReturnType<XgrammarModule['GrammarCompiler']['createGrammarCompiler']>>;
type Compiled = Awaited<ReturnType<Compiler['compileBuiltinJSONGrammar']>>;

/** anyWhitespace false, indent -1 (none), compact separators, as the engine always asks. */
export async function compileSchema(
  xg: XgrammarModule,
  compiler: Compiler,
  schema: string,
  strict: boolean,
): Promise<Compiled> {
  if (!schema.includes(`"${RULE_KEY}"`)) return compiler.compileJSONSchema(schema, false, -1, [',', ':'], strict);
  return compiler.compileGrammar(await schemaEbnf(xg, schema, strict));
}

/** The EBNF of a schema with rule nodes (exported for tests). */
export async function schemaEbnf(xg: XgrammarModule, schema: string, strict: boolean): Promise<string> {
  const { withMarkers, rules } = placeMarkers(schema);
  const ebnf = await xg.Testings._jsonSchemaToEBNF(withMarkers, false, -1, [',', ':'], strict);
  return spliceRules(ebnf, rules);
}

export interface Marked {
  readonly withMarkers: string;
  readonly rules: ReadonlyMap<string, string>;
}

/** Each rule node -> {"const": marker}; the markers' names never occur in the schema's text. */
export function placeMarkers(schema: string): Marked {
  let prefix = 'tessera_rule_';
  while (schema.includes(prefix)) prefix += 'x';
  const rules = new Map<string, string>();
  const visit = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(visit);
    if (typeof node !== 'object' || node === null) return node;
    const rule = (node as Record<string, unknown>)[RULE_KEY];
    if (typeof rule === 'string') {
      const marker = `${prefix}${rules.size}`;
      rules.set(marker, rule);
      return { const: marker };
    }
    return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, visit(v)]));
  };
  return { withMarkers: JSON.stringify(visit(JSON.parse(schema))), rules };
}

/** Replace each marker's literal ("\"marker\"") in xgrammar's EBNF by its rule. */
export function spliceRules(ebnf: string, rules: ReadonlyMap<string, string>): string {
  let out = ebnf;
  for (const [marker, rule] of rules) {
    const literal = `"\\"${marker}\\""`;
    if (!out.includes(literal)) {
      // An unused $defs entry is left out by xgrammar; any other missing marker is a broken splice.
      continue;
    }
    out = out.split(literal).join(`(${rule})`);
  }
  if (out.includes('"\\"tessera_rule_')) throw new InvariantError('a grammar rule was not placed in the schema');
  return out;
}
