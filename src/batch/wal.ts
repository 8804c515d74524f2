// The Batch API's write-ahead log: an append-only file of JSON records, one a line, each line
// `<crc32 of the JSON, 8 hex digits> <JSON>\n`, appended and fsynced before the caller goes on.
// Why a log of our own and not SQLite: Tessera installs from the npm registry alone, and the
// SQLite bindings (better-sqlite3) are native builds that break across Node versions and
// machines without a compiler; the Batch API needs only appends, a replay at start-up and
// crash safety, which this file gives in a page of code.
// Crash safety: a record is durable once append() returns (write + fsync). A crash mid-append
// leaves at most one torn last line (no newline, or a checksum that does not match): replay
// drops it and truncates the file there, so the next append starts on a clean line. A bad line
// that is not the last one is corruption, not a torn append: replay refuses the file.
// Must never report a record as written before it is on disk, nor replay a torn one.
import { closeSync, fsyncSync, openSync, readFileSync, existsSync, ftruncateSync, writeSync } from 'node:fs';
import { crc32 } from 'node:zlib';

export class WalCorruptError extends Error {}

export class Wal<R> {
  readonly #fd: number;
  #bytes: number;

  /** Opens (or creates) the log at `path`; `replayed` holds its records in order. */
  private constructor(
    fd: number,
    bytes: number,
    readonly replayed: readonly R[],
  ) {
    this.#fd = fd;
    this.#bytes = bytes;
  }

  static open<R>(path: string): Wal<R> {
    const text = existsSync(path) ? readFileSync(path) : Buffer.alloc(0);
    const records: R[] = [];
    let good = 0;
    let at = 0;
    while (at < text.length) {
      const nl = text.indexOf(0x0a, at);
      const line = nl < 0 ? null : text.subarray(at, nl).toString('utf8');
      const record = line === null ? undefined : parseLine<R>(line);
      if (record === undefined) {
        // A torn append is only ever the last line.
        if (nl >= 0 && nl + 1 < text.length) throw new WalCorruptError(`${path}: bad record at byte ${at}`);
        break;
      }
      records.push(record);
      at = nl + 1;
      good = at;
    }
    const fd = openSync(path, 'a+');
    if (good < text.length) {
      ftruncateSync(fd, good);
      fsyncSync(fd);
    }
    return new Wal<R>(fd, good, records);
  }

  /** Appends one record and returns once it is on disk. */
  append(record: R): void {
    const json = JSON.stringify(record);
    const line = Buffer.from(`${crc32(json).toString(16).padStart(8, '0')} ${json}\n`, 'utf8');
    writeSync(this.#fd, line, 0, line.length, this.#bytes);
    fsyncSync(this.#fd);
    this.#bytes += line.length;
  }

  get bytes(): number {
    return this.#bytes;
  }

  close(): void {
    closeSync(this.#fd);
  }
}

function parseLine<R>(line: string): R | undefined {
  if (line.length < 10 || line[8] !== ' ') return undefined;
  const json = line.slice(9);
  if (crc32(json).toString(16).padStart(8, '0') !== line.slice(0, 8)) return undefined;
  try {
    return JSON.parse(json) as R;
  } catch {
    return undefined;
  }
}
