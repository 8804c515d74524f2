// /v1/batches: create (from an uploaded file of purpose "batch"), retrieve, list, cancel, with
// OpenAI's batch object (batch-shapes.ts); the lines run in batch-runner.ts. The input's bad
// lines (files-route.ts checked them) are answered at creation, into the error file. Every
// lookup is by the caller's tenant: another tenant's batch id is a 404, as one that never existed.
// Must never create a batch from another tenant's file.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { BATCH_ENDPOINTS, TERMINAL, type BatchStore } from '../../batch/index.js';
import { batchObject, refusedLine } from './batch-shapes.js';
import { problem } from '../http/errors.js';
import { parseJson, readBody, sendJson, sendProblem } from '../http/http-io.js';
import { describe, isObject } from './params.js';

/** The only completion window OpenAI offers. */
export const COMPLETION_WINDOW = '24h';
const WINDOW_SECONDS = 24 * 3600;

const notFound = (id: string) => problem('route_not_found', `No such Batch object: ${id}`, 'batch_id');

export async function handleBatches(
  req: IncomingMessage,
  res: ServerResponse,
  store: BatchStore,
  tenant: string,
  rest: readonly string[],
  now: number,
): Promise<void> {
  const method = req.method ?? 'GET';
  if (rest.length === 0 && method === 'POST') return create(req, res, store, tenant, now);
  if (rest.length === 0 && method === 'GET') {
    const url = new URL(req.url ?? '/', 'http://batch');
    const limit = Math.min(100, Math.max(1, Number(url.searchParams.get('limit') ?? 20) || 20));
    const after = url.searchParams.get('after');
    let all = store.batches(tenant).sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : -1));
    if (after !== null) {
      const at = all.findIndex((b) => b.id === after);
      all = at < 0 ? [] : all.slice(at + 1);
    }
    const page = all.slice(0, limit).map(batchObject);
    const ids = page.map((b) => (b as { id: string }).id);
    return sendJson(res, 200, {
      object: 'list',
      data: page,
      first_id: ids[0] ?? null,
      last_id: ids[ids.length - 1] ?? null,
      has_more: all.length > limit,
    });
  }
  const id = rest[0] as string;
  const batch = rest.length > 0 ? store.batch(tenant, id) : undefined;
  if (rest.length > 0 && batch === undefined) return sendProblem(res, notFound(id));
  if (batch !== undefined && rest.length === 1 && method === 'GET') return sendJson(res, 200, batchObject(batch));
  if (batch !== undefined && rest.length === 2 && rest[1] === 'cancel' && method === 'POST') {
    // As OpenAI: cancelling, then cancelled once the running lines end; a finished batch stays as it is.
    if (!TERMINAL.has(batch.status) && batch.status !== 'cancelling') store.setStatus(batch, 'cancelling', now);
    return sendJson(res, 200, batchObject(batch));
  }
  sendProblem(res, problem('route_not_found', `Invalid URL (${method} /v1/batches/${rest.join('/')}).`));
}

async function create(
  req: IncomingMessage,
  res: ServerResponse,
  store: BatchStore,
  tenant: string,
  now: number,
): Promise<void> {
  const body = await readBody(req, 64 * 1024);
  if (body.kind === 'too-large') return sendProblem(res, problem('body_too_large', 'The request body is too large.'));
  if (body.kind === 'closed') return;
  const json = parseJson(body.bytes);
  if (json.kind === 'bad') return sendProblem(res, json.problem);
  const v = json.value;
  if (!isObject(v))
    return sendProblem(res, problem('invalid_request', `The request body must be a JSON object, got ${describe(v)}.`));
  const bad = (message: string, param: string) => sendProblem(res, problem('invalid_request', message, param));
  const inputFileId = v['input_file_id'];
  if (typeof inputFileId !== 'string') return bad('`input_file_id` must be a string.', 'input_file_id');
  const endpoint = v['endpoint'];
  if (typeof endpoint !== 'string' || !(BATCH_ENDPOINTS as readonly string[]).includes(endpoint))
    return bad(`\`endpoint\` must be one of ${BATCH_ENDPOINTS.join(', ')}.`, 'endpoint');
  if (v['completion_window'] !== COMPLETION_WINDOW)
    return bad(`\`completion_window\` must be "${COMPLETION_WINDOW}".`, 'completion_window');
  const metadata = v['metadata'] ?? null;
  if (
    metadata !== null &&
    (!isObject(metadata) ||
      Object.keys(metadata).length > 16 ||
      Object.values(metadata).some((x) => typeof x !== 'string' || x.length > 512))
  )
    return bad('`metadata` must be an object of at most 16 strings.', 'metadata');
  const input = store.file(tenant, inputFileId);
  if (input === undefined)
    return sendProblem(res, problem('route_not_found', `No such File object: ${inputFileId}`, 'input_file_id'));
  if (input.purpose !== 'batch') return bad('The input file must have purpose "batch".', 'input_file_id');
  const batch = store.createBatch(
    {
      tenant,
      endpoint,
      inputFileId,
      completionWindow: COMPLETION_WINDOW,
      createdAt: now,
      expiresAt: now + WINDOW_SECONDS,
      metadata: metadata as Record<string, string> | null,
    },
    input,
    now,
  );
  for (const e of batch.lineErrors) store.answer(batch, refusedLine(batch, e.index, e.customId, e));
  sendJson(res, 200, batchObject(batch));
}
