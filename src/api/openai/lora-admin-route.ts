// The admin's LoRA routes, named as vLLM names them:
//   POST /v1/load_lora_adapter    {"lora_name", "lora_path", "tenants"?: [..]}  -> 200 {name, digest}
//   POST /v1/unload_lora_adapter  {"lora_name"}                                -> 200 | 404 | 503 (in use)
// Who may call them (LoraAdminAccess.keys): the admin key (--admin-key) on `serve` and on the router;
// on a PD worker also the cluster secret (the router's fan-out of its admin's loads, router/cluster-lora.ts).
// Without a key or a directory they do not exist (404).
// Must never: load a file for a tenant's key, or answer a failed load with 200.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isTesseraError, type AdapterDirectory } from '../../core/index.js';
import { sameKey } from '../ops/dashboard-route.js';
import { problem, type Problem } from '../http/errors.js';
import { parseJson, readBody, sendJson, sendProblem } from '../http/http-io.js';

/** The directory the admin routes change, and the bearer keys that may change it (none: the routes are off). */
export interface LoraAdminAccess {
  readonly adapters: AdapterDirectory;
  readonly keys: readonly string[];
}

/** What the routes need of the server's context (routes.ts's RouteContext has it). */
export interface LoraAdminContext {
  readonly loraAdmin: LoraAdminAccess | null;
}

/** The access a server gives: the directory (a back end's, or a PD worker's own), the keys that are set. */
export function loraAdminAccess(
  adapters: AdapterDirectory | undefined,
  keys: readonly (string | null | undefined)[],
): LoraAdminAccess | null {
  const set = keys.filter((k): k is string => typeof k === 'string' && k !== '');
  return adapters === undefined || set.length === 0 ? null : { adapters, keys: set };
}

export async function handleLoraAdmin(
  verb: 'load' | 'unload',
  req: IncomingMessage,
  res: ServerResponse,
  ctx: LoraAdminContext,
): Promise<void> {
  const access = ctx.loraAdmin;
  if (access === null)
    return sendProblem(res, problem('route_not_found', `Invalid URL (POST /v1/${verb}_lora_adapter).`));
  const adapters = access.adapters;
  const given = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1];
  if (given === undefined || !access.keys.some((key) => sameKey(given, key)))
    return sendProblem(res, problem('unauthorized', 'Loading and unloading LoRA adapters needs the admin key.'));
  const body = await readBody(req, 64 * 1024);
  if (body.kind !== 'ok') return sendProblem(res, problem('invalid_request', 'The request body is too large.'));
  const json = parseJson(body.bytes);
  if (json.kind === 'bad') return sendProblem(res, json.problem);
  const fields = json.value as Record<string, unknown>;
  const bad = (field: string, why: string): void => sendProblem(res, problem('invalid_request', why, field));
  const name = fields['lora_name'];
  if (typeof name !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(name))
    return bad('lora_name', '`lora_name` must be a name of [A-Za-z0-9._-], up to 64 characters.');
  if (verb === 'unload') {
    const outcome = await adapters.unload(name);
    if (outcome === 'unloaded') return sendJson(res, 200, { name, unloaded: true });
    const p: Problem =
      outcome === 'unknown'
        ? problem('model_not_found', `The LoRA adapter \`${name}\` is not loaded.`, 'lora_name')
        : problem('overloaded', `The LoRA adapter \`${name}\` is in use by running requests; retry when they end.`);
    return sendProblem(res, p);
  }
  const path = fields['lora_path'];
  if (typeof path !== 'string' || path.length === 0) return bad('lora_path', '`lora_path` must be a file path.');
  const tenants = fields['tenants'];
  if (tenants !== undefined && (!Array.isArray(tenants) || !tenants.every((t) => typeof t === 'string')))
    return bad('tenants', '`tenants` must be an array of tenant names.');
  try {
    const ref = await adapters.load(name, path, 1, (tenants as string[] | undefined) ?? null);
    sendJson(res, 200, { name: ref.name, digest: ref.digest });
  } catch (error) {
    // The cluster's state keeps its code (a worker down or busy: 503; the workers read another
    // file than the router: 500); anything else is the file's fault: 400 naming lora_path.
    const message = `The LoRA adapter was not loaded: ${error instanceof Error ? error.message : String(error)}`;
    const cluster = isTesseraError(error) && (error.code === 'overloaded' || error.code === 'config_invalid');
    sendProblem(res, cluster ? problem(error.code, message) : problem('invalid_request', message, 'lora_path'));
  }
}
