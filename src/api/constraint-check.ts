// A request's structured-output constraint, read and checked before any back-end call: the
// shape (response-format.ts), then whether the schema compiles for this model (the front end
// holds the same GrammarEngine kind as the workers, so a schema Tessera cannot enforce is a
// 400 here, never a failure after the 200).
import type { ConstraintSpec } from '../core/index.js';
import type { GrammarEngine } from '../grammar/index.js';
import { problem } from './errors.js';
import { isObject, validating, type Validated } from './params.js';
import { readResponseFormat } from './response-format.js';
import { toolConstraint, type ToolPlan } from './tools.js';

/** The tool constraint (tool_choice required or named) wins over response_format. */
export async function requestConstraint(
  body: unknown,
  tools: ToolPlan | undefined,
  grammar: GrammarEngine | undefined,
): Promise<Validated<ConstraintSpec | undefined>> {
  const fromTools = toolConstraint(tools);
  if (fromTools !== undefined) return checkConstraint(fromTools, grammar, 'tools');
  return readConstraint(body, grammar);
}

export async function readConstraint(
  body: unknown,
  grammar: GrammarEngine | undefined,
  param = 'response_format',
): Promise<Validated<ConstraintSpec | undefined>> {
  if (!isObject(body)) return { kind: 'ok', value: undefined };
  const read = validating(() => readResponseFormat(body, param));
  if (read.kind === 'bad' || read.value === undefined) return read;
  return checkConstraint(read.value, grammar, param);
}

export async function checkConstraint(
  spec: ConstraintSpec,
  grammar: GrammarEngine | undefined,
  param: string,
): Promise<Validated<ConstraintSpec>> {
  if (grammar === undefined)
    return {
      kind: 'bad',
      problem: problem('invalid_request', 'This server was started without structured-output support.', param),
    };
  const error = await grammar.check(spec, param);
  return error === null
    ? { kind: 'ok', value: spec }
    : { kind: 'bad', problem: problem('invalid_request', error.message, error.param ?? param) };
}
