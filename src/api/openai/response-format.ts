// `response_format` (chat and completions) -> the request's ConstraintSpec, or the 400 naming the
// field. Shapes: {type: "text"} (free text), {type: "json_object"}, {type: "json_schema",
// json_schema: {name, schema, strict?, description?}}. `strict` is accepted either way: Tessera
// always enforces the schema by constrained decoding (it never merely asks the model).
// enforceableSpec() is the schema pass every spec goes through before it is checked (src/grammar's
// schemaRules: keywords xgrammar would not enforce exactly get rules of Tessera's own, or a 400
// naming the keyword).
// Must never compile the schema (that is asynchronous; generate-route.ts asks the GrammarEngine).
import {
  InvalidRequestError,
  MAX_SCHEMA_CHARS,
  NO_FAULTS,
  type ConstraintSpec,
  type FaultSet,
} from '../../core/index.js';
import { schemaRules } from '../../grammar/index.js';
import { describe, field, isObject, type JsonObject } from './params.js';

export function readResponseFormat(body: JsonObject, key = 'response_format'): ConstraintSpec | undefined {
  const value = field(body, key);
  if (value === undefined) return undefined;
  if (!isObject(value)) throw new InvalidRequestError(`\`${key}\` must be an object, got ${describe(value)}.`, key);
  const type = field(value, 'type');
  switch (type) {
    case 'text':
      return undefined;
    case 'json_object':
      return { kind: 'json_object' };
    case 'json_schema': {
      const inner = field(value, 'json_schema');
      if (!isObject(inner))
        throw new InvalidRequestError(
          `\`${key}.json_schema\` must be an object, got ${describe(inner)}.`,
          `${key}.json_schema`,
        );
      return { kind: 'json_schema', schema: schemaText(field(inner, 'schema'), `${key}.json_schema.schema`) };
    }
    default:
      throw new InvalidRequestError(
        `\`${key}.type\` must be one of "text", "json_object", "json_schema", got ${describe(type)}.`,
        `${key}.type`,
      );
  }
}

/** A JSON schema (an object, or `true` for any JSON) as canonical text within MAX_SCHEMA_CHARS. */
export function schemaText(schema: unknown, param: string): string {
  if (schema === undefined) return JSON.stringify({ type: 'object' }); // OpenAI: a name without a schema
  if (!isObject(schema))
    throw new InvalidRequestError(`\`${param}\` must be a JSON schema object, got ${describe(schema)}.`, param);
  const text = JSON.stringify(schema);
  if (text.length > MAX_SCHEMA_CHARS)
    throw new InvalidRequestError(
      `\`${param}\` is ${text.length} characters of JSON; at most ${MAX_SCHEMA_CHARS} are taken.`,
      param,
    );
  return text;
}

/**
 * The spec whose schema xgrammar can enforce exactly (rules of Tessera's own in place of number
 * bounds, lengths, formats, patterns), or the 400 naming the keyword it cannot enforce.
 * Fault point skip-schema-rules: the schema goes to xgrammar as the client sent it.
 */
export function enforceableSpec(spec: ConstraintSpec, param: string, faults: FaultSet = NO_FAULTS): ConstraintSpec {
  if (spec.kind !== 'json_schema' || faults.has('skip-schema-rules')) return spec;
  const plan = schemaRules(spec.schema);
  if (plan.kind === 'refused')
    throw new InvalidRequestError(
      `\`${param}\`: Tessera cannot enforce the schema keyword \`${plan.keyword}\`: ${plan.reason}.`,
      param,
    );
  return { kind: 'json_schema', schema: plan.schema };
}
