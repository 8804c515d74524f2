// /v1/files: upload (multipart/form-data, as the openai client sends `files.create`: fields
// `purpose` and `file`), list, retrieve, content, delete; a batch's output and error files are
// served here too (batch-shapes.ts). Every lookup is by the caller's tenant: another tenant's id
// is a 404, exactly as an id that never existed. An upload with purpose "batch" is checked line
// by line at once; bad lines do not refuse the file, they become the error file's lines of any
// batch made from it (and are listed in the batch's `errors`).
// Must never show or delete another tenant's file.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { MAX_BATCH_LINES, parseBatchLines, type BatchStore } from '../../batch/index.js';
import { parseResultFileId, fileObject, resultFileMeta, resultLines } from './batch-shapes.js';
import { problem } from '../http/errors.js';
import { readBody, sendJson, sendProblem } from '../http/http-io.js';

/** Most bytes one upload may have (OpenAI's batch input limit is 200 MB; a CPU server takes less). */
export const MAX_UPLOAD_BYTES = 64 * 1024 * 1024;

const notFound = (id: string) => problem('route_not_found', `No such File object: ${id}`, 'file_id');

export async function handleFiles(
  req: IncomingMessage,
  res: ServerResponse,
  store: BatchStore,
  tenant: string,
  rest: readonly string[],
  now: number,
): Promise<void> {
  const method = req.method ?? 'GET';
  if (rest.length === 0) {
    if (method === 'POST') return upload(req, res, store, tenant, now);
    if (method === 'GET') {
      const uploads = store.files(tenant).map(fileObject);
      const outputs = store
        .batches(tenant)
        .flatMap((b) => [resultFileMeta(b, 'out'), resultFileMeta(b, 'err')])
        .flatMap((f) => (f === null ? [] : [fileObject(f)]));
      const data = [...uploads, ...outputs].sort(
        (a, b) => (b as { created_at: number }).created_at - (a as { created_at: number }).created_at,
      );
      return sendJson(res, 200, { object: 'list', data, has_more: false });
    }
    return sendProblem(res, problem('method_not_allowed', `Method ${method} is not allowed on /v1/files.`));
  }
  const id = rest[0] as string;
  const result = parseResultFileId(id);
  if (result !== null) {
    const batch = store.batch(tenant, result.batchId);
    const meta = batch === undefined ? null : resultFileMeta(batch, result.kind);
    if (batch === undefined || meta === null) return sendProblem(res, notFound(id));
    if (rest.length === 1 && method === 'GET') return sendJson(res, 200, fileObject(meta));
    if (rest[1] === 'content' && method === 'GET') return sendText(res, resultLines(batch, result.kind));
    if (rest.length === 1 && method === 'DELETE')
      return sendProblem(res, problem('invalid_request', 'A batch output file is deleted with its batch.', 'file_id'));
    return sendProblem(res, problem('route_not_found', `Invalid URL (${method} /v1/files/${rest.join('/')}).`));
  }
  const meta = store.file(tenant, id);
  if (meta === undefined) return sendProblem(res, notFound(id));
  if (rest.length === 1 && method === 'GET') return sendJson(res, 200, fileObject(meta));
  if (rest.length === 1 && method === 'DELETE') {
    store.deleteFile(tenant, id);
    return sendJson(res, 200, { id, object: 'file', deleted: true });
  }
  if (rest.length === 2 && rest[1] === 'content' && method === 'GET')
    return sendText(res, store.fileBytes(meta).toString('utf8'));
  sendProblem(res, problem('route_not_found', `Invalid URL (${method} /v1/files/${rest.join('/')}).`));
}

function sendText(res: ServerResponse, text: string): void {
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

async function upload(
  req: IncomingMessage,
  res: ServerResponse,
  store: BatchStore,
  tenant: string,
  now: number,
): Promise<void> {
  const type = req.headers['content-type'] ?? '';
  const boundary = /boundary=(?:"([^"]+)"|([^;]+))/i.exec(type);
  if (!/^multipart\/form-data/i.test(type) || boundary === null)
    return sendProblem(
      res,
      problem('invalid_request', 'Upload a file as multipart/form-data (fields purpose and file).'),
    );
  const body = await readBody(req, MAX_UPLOAD_BYTES);
  if (body.kind === 'too-large')
    return sendProblem(res, problem('body_too_large', `An upload may have at most ${MAX_UPLOAD_BYTES} bytes.`));
  if (body.kind === 'closed') return;
  const parts = parseMultipart(body.bytes, (boundary[1] ?? boundary[2] ?? '').trim());
  const purpose = parts.find((p) => p.name === 'purpose')?.data.toString('utf8');
  const file = parts.find((p) => p.name === 'file');
  if (purpose !== 'batch')
    return sendProblem(res, problem('invalid_request', 'Tessera takes files of purpose "batch" only.', 'purpose'));
  if (file === undefined)
    return sendProblem(res, problem('invalid_request', 'The upload has no `file` field.', 'file'));
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(file.data);
  } catch {
    return sendProblem(res, problem('invalid_request', 'The file is not valid UTF-8 JSONL.', 'file'));
  }
  const parsed = parseBatchLines(text);
  if (parsed.total === 0) return sendProblem(res, problem('invalid_request', 'The file has no lines.', 'file'));
  if (parsed.total > MAX_BATCH_LINES)
    return sendProblem(
      res,
      problem('invalid_request', `The file has ${parsed.total} lines; at most ${MAX_BATCH_LINES} are taken.`, 'file'),
    );
  const meta = store.putFile(tenant, file.filename ?? 'upload.jsonl', purpose, file.data, now);
  sendJson(res, 200, fileObject(meta));
}

interface Part {
  readonly name: string;
  readonly filename: string | null;
  readonly data: Buffer;
}

/** multipart/form-data (RFC 7578) -> its parts; a malformed part is skipped. */
export function parseMultipart(body: Buffer, boundary: string): Part[] {
  const delimiter = Buffer.from(`--${boundary}`);
  const parts: Part[] = [];
  let at = body.indexOf(delimiter);
  while (at >= 0) {
    const start = at + delimiter.length;
    if (body.subarray(start, start + 2).toString() === '--') break;
    const next = body.indexOf(delimiter, start);
    if (next < 0) break;
    const chunk = body.subarray(start + 2, next - 2); // CRLF after the delimiter, CRLF before the next
    const split = chunk.indexOf('\r\n\r\n');
    if (split >= 0) {
      const head = chunk.subarray(0, split).toString('utf8');
      const name = /(?:^|[;\s])name="([^"]*)"/i.exec(head)?.[1];
      const filename = /filename="([^"]*)"/i.exec(head)?.[1] ?? null;
      if (name !== undefined) parts.push({ name, filename, data: chunk.subarray(split + 4) });
    }
    at = next;
  }
  return parts;
}
