// A request's `model` -> the base model or one of its LoRA adapters, for the asking tenant. Names
// accepted: the served name; `<served>:<adapter>`; the adapter's own name (vLLM's LoRA modules).
// Must never: reveal an adapter restricted to other tenants (the same 404 as an unknown name), or
// take the tenant from anything but the API key.
import type { AdapterRef, TenantId } from '../../core/index.js';
import type { Backend } from '../backend.js';
import { problem, type Problem } from '../http/errors.js';

export type ModelChoice =
  { readonly kind: 'ok'; readonly adapter?: AdapterRef } | { readonly kind: 'bad'; readonly problem: Problem };

export function resolveModel(model: string | null, backend: Backend, tenant: TenantId): ModelChoice {
  if (model === null || model === backend.modelName) return { kind: 'ok' };
  const prefix = `${backend.modelName}:`;
  const name = model.startsWith(prefix) ? model.slice(prefix.length) : model;
  const found = backend.adapters?.lookup(name, tenant);
  if (found?.kind === 'found') return { kind: 'ok', adapter: found.ref };
  return { kind: 'bad', problem: problem('model_not_found', `The model \`${model}\` does not exist.`, 'model') };
}
