// A request's structured-output constraint, read and checked before any back-end call: the
// shape (response-format.ts), then whether the schema can be enforced for this model (the front
// end holds the same GrammarEngine kind as the workers, so a schema Tessera cannot enforce is a
// 400 here, never a failure after the 200). The check runs off the event loop (the engine's
// checker thread) and is per tenant: the key's tenant, never anything from the body.
import { NO_FAULTS, type ConstraintSpec, type FaultSet, type TenantId } from '../../core/index.js';
import type { GrammarEngine } from '../../grammar/index.js';
import { problem, problemOf } from '../http/errors.js';
import { isObject, validating, type Validated } from './params.js';
import { enforceableSpec, readResponseFormat } from './response-format.js';
import { toolConstraint, type ToolPlan } from './tools.js';

/** The tool constraint (tool_choice required or named) wins over response_format. */
export async function requestConstraint(
  body: unknown,
  tools: ToolPlan | undefined,
  grammar: GrammarEngine | undefined,
  tenant: TenantId,
  faults: FaultSet = NO_FAULTS,
): Promise<Validated<ConstraintSpec | undefined>> {
  const fromTools = toolConstraint(tools);
  if (fromTools !== undefined) return checkConstraint(fromTools, grammar, 'tools', tenant, faults);
  return readConstraint(body, grammar, tenant, 'response_format', faults);
}

export async function readConstraint(
  body: unknown,
  grammar: GrammarEngine | undefined,
  tenant: TenantId,
  param = 'response_format',
  faults: FaultSet = NO_FAULTS,
): Promise<Validated<ConstraintSpec | undefined>> {
  if (!isObject(body)) return { kind: 'ok', value: undefined };
  const read = validating(() => readResponseFormat(body, param));
  if (read.kind === 'bad' || read.value === undefined) return read;
  return checkConstraint(read.value, grammar, param, tenant, faults);
}

export async function checkConstraint(
  spec: ConstraintSpec,
  grammar: GrammarEngine | undefined,
  param: string,
  tenant: TenantId,
  faults: FaultSet = NO_FAULTS,
): Promise<Validated<ConstraintSpec>> {
  if (grammar === undefined)
    return {
      kind: 'bad',
      problem: problem('invalid_request', 'This server was started without structured-output support.', param),
    };
  const enforceable = validating(() => enforceableSpec(spec, param, faults));
  if (enforceable.kind === 'bad') return enforceable;
  const error = await grammar.check(enforceable.value, param, tenant);
  // An InvalidRequestError is the 400; `overloaded` (too many schemas waiting) keeps its own status.
  return error === null ? { kind: 'ok', value: enforceable.value } : { kind: 'bad', problem: problemOf(error) };
}
