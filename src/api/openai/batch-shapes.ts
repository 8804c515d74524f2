// OpenAI's Batch API objects from the store's state: `file` (uploads, and each batch's output and
// error files, which exist only as views of its answers), `batch`, and the output/error JSONL
// records. Plain functions; must never do I/O nor show a file or batch of another tenant (the
// store's lookups take the tenant).
import type { BatchState, FileMeta, LineError, LineResult } from '../../batch/index.js';

export function fileObject(f: FileMeta): object {
  return {
    id: f.id,
    object: 'file',
    bytes: f.bytes,
    created_at: f.createdAt,
    filename: f.filename,
    purpose: f.purpose,
    status: 'processed',
    expires_at: null,
    status_details: null,
  };
}

/** A batch's output (`out`) or error (`err`) file id: `file-batch_<hex>-out`. */
export const resultFileId = (batch: BatchState, kind: 'out' | 'err'): string => `file-${batch.id}-${kind}`;

/** `file-batch_<hex>-out` -> the batch id and kind; null for an upload's id. */
export function parseResultFileId(id: string): { readonly batchId: string; readonly kind: 'out' | 'err' } | null {
  const m = /^file-(batch_[0-9a-f]+)-(out|err)$/.exec(id);
  return m === null ? null : { batchId: m[1] as string, kind: m[2] as 'out' | 'err' };
}

const FINISHED = new Set(['completed', 'expired', 'cancelled', 'failed']);

/** The results of one kind in line order: the output file's (ok) or the error file's lines. */
export function resultLines(batch: BatchState, kind: 'out' | 'err'): string {
  const rows = [...batch.results.values()]
    .filter((r) => r.ok === (kind === 'out'))
    .sort((a, b) => a.index - b.index)
    .map((r) => `${JSON.stringify(r.record)}\n`);
  return rows.join('');
}

/** The batch's result files once it has finished (null: none of that kind). */
function resultFile(batch: BatchState, kind: 'out' | 'err'): FileMeta | null {
  if (!FINISHED.has(batch.status)) return null;
  if (![...batch.results.values()].some((r) => r.ok === (kind === 'out'))) return null;
  return {
    id: resultFileId(batch, kind),
    tenant: batch.tenant,
    filename: `${batch.id}_${kind === 'out' ? 'output' : 'error'}.jsonl`,
    purpose: 'batch_output',
    bytes: Buffer.byteLength(resultLines(batch, kind)),
    createdAt: batch.times.completed ?? batch.times.cancelled ?? batch.times.expired ?? batch.createdAt,
  };
}

export function resultFileMeta(batch: BatchState, kind: 'out' | 'err'): FileMeta | null {
  return resultFile(batch, kind);
}

export function batchObject(b: BatchState): object {
  const counts = { total: b.total, completed: 0, failed: 0 };
  for (const r of b.results.values()) {
    if (r.ok) counts.completed++;
    else counts.failed++;
  }
  const t = b.times;
  return {
    id: b.id,
    object: 'batch',
    endpoint: b.endpoint,
    errors:
      b.lineErrors.length === 0
        ? null
        : {
            object: 'list',
            data: b.lineErrors.map((e) => ({ code: e.code, message: e.message, param: e.param, line: e.line })),
          },
    input_file_id: b.inputFileId,
    completion_window: b.completionWindow,
    status: b.status,
    output_file_id: resultFile(b, 'out')?.id ?? null,
    error_file_id: resultFile(b, 'err')?.id ?? null,
    created_at: b.createdAt,
    in_progress_at: t.in_progress ?? null,
    expires_at: b.expiresAt,
    finalizing_at: t.finalizing ?? null,
    completed_at: t.completed ?? null,
    failed_at: t.failed ?? null,
    expired_at: t.expired ?? null,
    cancelling_at: t.cancelling ?? null,
    cancelled_at: t.cancelled ?? null,
    request_counts: counts,
    metadata: b.metadata,
  };
}

const requestId = (batch: BatchState, index: number): string => `batch_req_${batch.id.slice(6)}_${index}`;

/** A line answered by the endpoint: 2xx to the output file, anything else to the error file. */
export function answeredLine(
  batch: BatchState,
  index: number,
  customId: string,
  status: number,
  body: unknown,
): LineResult {
  const id = requestId(batch, index);
  return {
    index,
    ok: status >= 200 && status < 300,
    record: { id, custom_id: customId, response: { status_code: status, request_id: id, body }, error: null },
  };
}

/** A line that never reached the endpoint: invalid, expired, or its batch cancelled. */
export function refusedLine(
  batch: BatchState,
  index: number,
  customId: string | null,
  error: Pick<LineError, 'code' | 'message'>,
): LineResult {
  return {
    index,
    ok: false,
    record: {
      id: requestId(batch, index),
      custom_id: customId,
      response: null,
      error: { code: error.code, message: error.message },
    },
  };
}
