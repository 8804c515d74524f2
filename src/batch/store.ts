// The Batch API's durable state: uploaded files (their bytes in `files/<id>`, written whole and
// renamed into place before the log names them) and batches (their status changes and each
// line's answer) as records of one write-ahead log (wal.ts) under the batch directory. Every
// state is the log replayed; a line is answered once its `result` record is on disk, and a
// replay that meets two results for one line keeps the first: after a crash the lines without a
// result run again, and no line appears twice in an output file (output files are built from the
// results, in line order, when read). Tenants: every file and batch belongs to the tenant that
// made it; a lookup by another tenant finds nothing (the routes answer 404).
// Must never hand one tenant's file or batch to another, nor return before a change is on disk.
import { randomBytes } from 'node:crypto';
import { fsyncSync, mkdirSync, openSync, closeSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { parseBatchLines, type LineError, type RequestLine } from './lines.js';
import { Wal } from './wal.js';

export type BatchStatus =
  'validating' | 'failed' | 'in_progress' | 'finalizing' | 'completed' | 'expired' | 'cancelling' | 'cancelled';

export const TERMINAL: ReadonlySet<BatchStatus> = new Set(['failed', 'completed', 'expired', 'cancelled']);

export interface FileMeta {
  readonly id: string;
  readonly tenant: string;
  readonly filename: string;
  readonly purpose: string;
  readonly bytes: number;
  readonly createdAt: number;
}

/** One line's answer: the output file's record (ok) or the error file's. */
export interface LineResult {
  readonly index: number;
  readonly ok: boolean;
  readonly record: Readonly<Record<string, unknown>>;
}

export interface BatchMeta {
  readonly id: string;
  readonly tenant: string;
  readonly endpoint: string;
  readonly inputFileId: string;
  readonly completionWindow: string;
  readonly createdAt: number;
  readonly expiresAt: number;
  readonly metadata: Readonly<Record<string, string>> | null;
  readonly total: number;
}

export interface BatchState extends BatchMeta {
  status: BatchStatus;
  /** Unix seconds of each status reached (in_progress_at, completed_at, ...). */
  readonly times: Partial<Record<BatchStatus, number>>;
  readonly results: Map<number, LineResult>;
  /** The input's good lines (for the runner) and its bad ones (answered as errors at creation). */
  lines: readonly RequestLine[];
  lineErrors: readonly LineError[];
}

type Rec =
  | ({ t: 'file' } & FileMeta)
  | { t: 'file-deleted'; id: string }
  | ({ t: 'batch' } & BatchMeta)
  | { t: 'status'; id: string; status: BatchStatus; at: number }
  | { t: 'result'; id: string; result: LineResult };

export class BatchStore {
  readonly #dir: string;
  readonly #wal: Wal<Rec>;
  readonly #files = new Map<string, FileMeta>();
  readonly #batches = new Map<string, BatchState>();

  readonly #answersInMemory: boolean;
  readonly #ignoreTenant: boolean;

  /**
   * Fault points (tests only): `answersInMemory` (`batch-answers-in-memory`): answers are not
   * logged; `ignoreTenant` (`batch-ignore-tenant`): a file or batch is found by id whoever asks.
   */
  constructor(dir: string, options: { readonly answersInMemory?: boolean; readonly ignoreTenant?: boolean } = {}) {
    this.#dir = dir;
    this.#answersInMemory = options.answersInMemory === true;
    this.#ignoreTenant = options.ignoreTenant === true;
    mkdirSync(join(dir, 'files'), { recursive: true });
    this.#wal = Wal.open<Rec>(join(dir, 'batch.wal'));
    for (const rec of this.#wal.replayed) this.#apply(rec);
    for (const b of this.#batches.values()) if (!TERMINAL.has(b.status)) this.#loadLines(b);
  }

  // Files.

  putFile(tenant: string, filename: string, purpose: string, bytes: Buffer, now: number): FileMeta {
    const id = `file-${randomBytes(12).toString('hex')}`;
    const path = this.#filePath(id);
    const tmp = `${path}.tmp`;
    const fd = openSync(tmp, 'w');
    try {
      writeSync(fd, bytes);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
    const meta: FileMeta = { id, tenant, filename, purpose, bytes: bytes.length, createdAt: now };
    this.#log({ t: 'file', ...meta });
    return meta;
  }

  file(tenant: string, id: string): FileMeta | undefined {
    const f = this.#files.get(id);
    return f !== undefined && (f.tenant === tenant || this.#ignoreTenant) ? f : undefined;
  }

  files(tenant: string): FileMeta[] {
    return [...this.#files.values()].filter((f) => f.tenant === tenant);
  }

  fileBytes(meta: FileMeta): Buffer {
    return readFileSync(this.#filePath(meta.id));
  }

  deleteFile(tenant: string, id: string): boolean {
    if (this.file(tenant, id) === undefined) return false;
    this.#log({ t: 'file-deleted', id });
    // A running batch still reads its input after a restart: its bytes go when it ends (not before).
    const inUse = [...this.#batches.values()].some((b) => b.inputFileId === id && !TERMINAL.has(b.status));
    if (!inUse) rmSync(this.#filePath(id), { force: true });
    return true;
  }

  // Batches.

  createBatch(meta: Omit<BatchMeta, 'id' | 'total'>, input: FileMeta, now: number): BatchState {
    const parsed = parseBatchLines(this.fileBytes(input).toString('utf8'));
    const id = `batch_${randomBytes(12).toString('hex')}`;
    this.#log({ t: 'batch', ...meta, id, total: parsed.total });
    const batch = this.#batches.get(id) as BatchState;
    this.#loadLines(batch);
    this.setStatus(batch, 'in_progress', now);
    return batch;
  }

  batch(tenant: string, id: string): BatchState | undefined {
    const b = this.#batches.get(id);
    return b !== undefined && (b.tenant === tenant || this.#ignoreTenant) ? b : undefined;
  }

  batches(tenant: string): BatchState[] {
    return [...this.#batches.values()].filter((b) => b.tenant === tenant);
  }

  /** Batches the runner still works on. */
  active(): BatchState[] {
    return [...this.#batches.values()].filter((b) => b.status === 'in_progress' || b.status === 'cancelling');
  }

  setStatus(batch: BatchState, status: BatchStatus, now: number): void {
    this.#log({ t: 'status', id: batch.id, status, at: now });
  }

  /** Records a line's answer (durably); false when it already had one (kept: the first wins). */
  answer(batch: BatchState, result: LineResult): boolean {
    if (batch.results.has(result.index)) return false;
    const rec: Rec = { t: 'result', id: batch.id, result };
    if (this.#answersInMemory) this.#apply(rec);
    else this.#log(rec);
    return true;
  }

  close(): void {
    this.#wal.close();
  }

  #log(rec: Rec): void {
    this.#wal.append(rec);
    this.#apply(rec);
  }

  #apply(rec: Rec): void {
    switch (rec.t) {
      case 'file': {
        const { t: _, ...meta } = rec;
        this.#files.set(rec.id, meta);
        return;
      }
      case 'file-deleted':
        this.#files.delete(rec.id);
        return;
      case 'batch': {
        const { t: _, ...meta } = rec;
        this.#batches.set(rec.id, {
          ...meta,
          status: 'validating',
          times: {},
          results: new Map(),
          lines: [],
          lineErrors: [],
        });
        return;
      }
      case 'status': {
        const b = this.#batches.get(rec.id);
        if (b === undefined) return;
        b.status = rec.status;
        b.times[rec.status] = rec.at;
        return;
      }
      case 'result': {
        const b = this.#batches.get(rec.id);
        if (b !== undefined && !b.results.has(rec.result.index)) b.results.set(rec.result.index, rec.result);
        return;
      }
    }
  }

  /** The input file's lines, again from its bytes (the file is kept while a batch uses it). */
  #loadLines(batch: BatchState): void {
    let text: string;
    try {
      text = readFileSync(this.#filePath(batch.inputFileId), 'utf8');
    } catch {
      return; // its input is gone: the runner finds no lines and answers the rest as errors
    }
    const parsed = parseBatchLines(text);
    batch.lines = parsed.lines;
    batch.lineErrors = parsed.errors;
  }

  #filePath(id: string): string {
    return join(this.#dir, 'files', id);
  }
}
