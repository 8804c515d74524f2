// `tools`, `tool_choice` and `parallel_tool_calls` (chat, and the Responses API's flat shape)
// -> a ToolPlan: what the template is shown, and for `required` or a named function the
// constraint that makes the output a valid call (the parameters' schema; vLLM's way):
//   named      output = the arguments object itself, under the function's parameter schema
//   required   output = [{"name": N, "parameters": {...}}, ...]: an array of 1 call (up to
//              MAX_PARALLEL_CALLS when parallel_tool_calls is explicitly true: OpenAI's default
//              is true, but a small model under an open-ended array keeps adding calls until
//              max_tokens, so Tessera asks for parallel calls only when told), each item one of
//              the functions
//   auto       free text; tool-output.ts finds calls in it (Hermes <tool_call> or Llama JSON)
//   none       the tools are not shown; free text
// Must never accept a tool it cannot describe to the model (a name outside [A-Za-z0-9_-]{1,64}).
import { InvalidRequestError, type ConstraintSpec } from '../../core/index.js';
import type { ToolFunction } from '../backend.js';
import { describe, field, isObject, optionalBool, type JsonObject } from './params.js';
import { schemaText } from './response-format.js';

/** With parallel_tool_calls, a `required` answer holds at most this many calls (so it always closes). */
export const MAX_PARALLEL_CALLS = 4;
const MAX_TOOLS = 128;
const NAME = /^[A-Za-z0-9_-]{1,64}$/;
/** The parameters of a function that declares none (OpenAI: an empty parameter list). */
const NO_PARAMETERS = { type: 'object', properties: {}, additionalProperties: false } as const;

export type ToolChoice =
  | { readonly kind: 'auto' }
  | { readonly kind: 'none' }
  | { readonly kind: 'required' }
  | { readonly kind: 'named'; readonly name: string };

export interface ToolPlan {
  readonly tools: readonly ToolFunction[];
  readonly choice: ToolChoice;
  readonly parallel: boolean;
}

export type ToolStyle = 'chat' | 'responses';

/** undefined: the request has no tools (or an empty list). */
export function readTools(body: JsonObject, style: ToolStyle): ToolPlan | undefined {
  const value = field(body, 'tools');
  const choiceValue = field(body, 'tool_choice');
  if (value === undefined || (Array.isArray(value) && value.length === 0)) {
    if (choiceValue !== undefined && choiceValue !== 'none' && choiceValue !== 'auto') {
      throw new InvalidRequestError('`tool_choice` needs `tools`.', 'tool_choice');
    }
    return undefined;
  }
  if (!Array.isArray(value))
    throw new InvalidRequestError(`\`tools\` must be an array, got ${describe(value)}.`, 'tools');
  if (value.length > MAX_TOOLS)
    throw new InvalidRequestError(`\`tools\` has ${value.length} entries; at most ${MAX_TOOLS} are taken.`, 'tools');
  const tools = value.map((t: unknown, i) => readTool(t, `tools[${i}]`, style));
  const names = new Set<string>();
  for (const [i, t] of tools.entries()) {
    if (names.has(t.name))
      throw new InvalidRequestError(`\`tools[${i}]\` repeats the function name "${t.name}".`, `tools[${i}]`);
    names.add(t.name);
  }
  const choice = readChoice(choiceValue, style);
  if (choice.kind === 'named' && !names.has(choice.name))
    throw new InvalidRequestError(`\`tool_choice\` names "${choice.name}", which is not in \`tools\`.`, 'tool_choice');
  return { tools, choice, parallel: optionalBool(body, 'parallel_tool_calls') ?? false };
}

function readTool(value: unknown, at: string, style: ToolStyle): ToolFunction {
  if (!isObject(value)) throw new InvalidRequestError(`\`${at}\` must be an object, got ${describe(value)}.`, at);
  if (field(value, 'type') !== 'function')
    throw new InvalidRequestError(
      `\`${at}.type\` must be "function" (the only tools Tessera runs), got ${describe(field(value, 'type'))}.`,
      `${at}.type`,
    );
  const fn = style === 'chat' ? field(value, 'function') : value;
  const fnAt = style === 'chat' ? `${at}.function` : at;
  if (!isObject(fn)) throw new InvalidRequestError(`\`${fnAt}\` must be an object, got ${describe(fn)}.`, fnAt);
  const name = field(fn, 'name');
  if (typeof name !== 'string' || !NAME.test(name))
    throw new InvalidRequestError(
      `\`${fnAt}.name\` must be 1-64 letters, digits, _ or -, got ${describe(name)}.`,
      `${fnAt}.name`,
    );
  const description = field(fn, 'description');
  if (description !== undefined && typeof description !== 'string')
    throw new InvalidRequestError(`\`${fnAt}.description\` must be a string.`, `${fnAt}.description`);
  const given = field(fn, 'parameters');
  // OpenAI reads a function without `parameters` as one that takes none: only `{}`.
  const parameters =
    given === undefined
      ? { ...NO_PARAMETERS }
      : (JSON.parse(schemaText(given, `${fnAt}.parameters`)) as Record<string, unknown>);
  return { name, parameters, ...(description === undefined ? {} : { description }) };
}

function readChoice(value: unknown, style: ToolStyle): ToolChoice {
  if (value === undefined || value === 'auto') return { kind: 'auto' };
  if (value === 'none') return { kind: 'none' };
  if (value === 'required') return { kind: 'required' };
  if (isObject(value) && field(value, 'type') === 'function') {
    const name =
      style === 'chat'
        ? isObject(field(value, 'function'))
          ? field(field(value, 'function') as JsonObject, 'name')
          : undefined
        : field(value, 'name');
    if (typeof name === 'string') return { kind: 'named', name };
  }
  throw new InvalidRequestError(
    `\`tool_choice\` must be "auto", "none", "required" or a named function, got ${describe(value)}.`,
    'tool_choice',
  );
}

/** What the model is shown: no tools under `none`. */
export function shownTools(plan: ToolPlan | undefined): readonly ToolFunction[] | undefined {
  return plan === undefined || plan.choice.kind === 'none' ? undefined : plan.tools;
}

/** The constraint `required` or a named function puts on the output; undefined for auto and none. */
export function toolConstraint(plan: ToolPlan | undefined): ConstraintSpec | undefined {
  if (plan === undefined) return undefined;
  switch (plan.choice.kind) {
    case 'auto':
    case 'none':
      return undefined;
    case 'named': {
      const { name } = plan.choice;
      const tool = plan.tools.find((t) => t.name === name) as ToolFunction;
      return { kind: 'json_schema', schema: JSON.stringify(tool.parameters) };
    }
    case 'required': {
      const item = (t: ToolFunction) => ({
        type: 'object',
        properties: { name: { const: t.name }, parameters: t.parameters },
        required: ['name', 'parameters'],
        additionalProperties: false,
      });
      const items = plan.tools.length === 1 ? item(plan.tools[0] as ToolFunction) : { anyOf: plan.tools.map(item) };
      return {
        kind: 'json_schema',
        schema: JSON.stringify({ type: 'array', items, minItems: 1, maxItems: plan.parallel ? MAX_PARALLEL_CALLS : 1 }),
      };
    }
  }
}
