// DiskTier: the prefix cache's spill store on local files — one file per evicted page, bounded
// in total size, least recently used deleted first, kept across restarts.
// Owns: the directory given with --kv-disk (its *.kvp files and .tmp-* files), the index of what
// is stored, the write queue, and the checks every load passes.
// Must never: hand back bytes whose namespace, path hash, length or xxh64 differ from the file's
// header and the caller's request (each is a refused load: counted, logged, the file deleted),
// leave a file under a final name before its bytes are durable (temp name, fsync, rename), block
// the caller of put(), or delete a file in the directory that it did not name.
//
// A file: header (little-endian) then the page's bytes
//   magic "TKVP" | version u32 | namespace length u32 | path hash (32 bytes) | byte length u32 |
//   xxh64 of the bytes u64 | route: key id, tenant tag, block hash (8 bytes each) | namespace (UTF-8) | bytes
// The route (zeros when the page was put without one) is what a report names the page by: its
// keyed tenant tag and block hash (pages/prefix-hash.ts), and a fingerprint of the key they were
// computed with; routes() hands out only those of the asked key, so a file written under another
// cluster secret (or model) is served when asked but never reported. Never a token id or a name.
// A file of another version (version 1 had no route) is refused at start-up with a log line.
// Its name is sha256(namespace + "\n" + path hash) + ".kvp", so a page is found without a scan.
// Start-up reads every header eagerly (magic, version, sizes, name) and deletes what fails or
// what a killed write left (.tmp-*); the checksum is verified lazily, at each load (the whole
// file is read then anyway). Until its file is written, a put page is served from memory.
// Buffers are reused (a fresh 384 KiB buffer costs more than reading a page from the page
// cache): get() reads into one buffer, valid until the next get; written pages' buffers take
// the next puts.
// The fault `skip-spill-checksum` skips the xxh64 comparison on load (the negative control);
// `report-foreign-disk-pages` makes routes() hand out every route, whatever its key.
import { createHash } from 'node:crypto';
import { closeSync, fstatSync, mkdirSync, openSync, readdirSync, readSync, statSync, unlinkSync } from 'node:fs';
import { open, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { xxh64 } from '@node-rs/xxhash';
import { NO_FAULTS, type FaultSet } from '../core/index.js';
import {
  SPILL_REFUSALS,
  type SpillEntry,
  type SpillLoad,
  type SpillNamespace,
  type SpillRefusal,
  type SpillRoute,
  type SpillRouteHint,
  type SpillStats,
  type SpillStore,
} from '../pages/index.js';

const MAGIC = 0x504b5654; // "TKVP" read as little-endian u32
const VERSION = 2;
const ROUTE_AT = 4 + 4 + 4 + 32 + 4 + 8;
const FIXED_HEADER = ROUTE_AT + 3 * 8;
const HEX16 = /^[0-9a-f]{16}$/;
const NO_ROUTE = Buffer.alloc(3 * 8);
const SUFFIX = '.kvp';
const TEMP_PREFIX = '.tmp-';
const NAME = /^[0-9a-f]{64}\.kvp$/;
export const DEFAULT_KV_DISK_BYTES = 1024 ** 3;

export interface DiskTierOptions {
  readonly dir: string;
  /** The most bytes of files kept; least recently used files are deleted beyond it. */
  readonly maxBytes: number;
  /** The most bytes of put pages waiting to be written; puts beyond it are dropped. Default 64 MiB. */
  readonly maxPendingBytes?: number;
  readonly faults?: FaultSet;
  readonly log: (line: string) => void;
}

interface Header {
  readonly namespace: string;
  readonly pathHash: string;
  readonly numBytes: number;
  readonly checksum: bigint;
  readonly headerBytes: number;
  readonly route: SpillRoute | undefined;
}

const fileNameOf = (namespace: SpillNamespace, pathHash: string): string =>
  createHash('sha256').update(`${namespace}\n${pathHash}`).digest('hex') + SUFFIX;

function encodeHeader(entry: SpillEntry): Buffer {
  const ns = Buffer.from(entry.namespace, 'utf8');
  const header = Buffer.alloc(FIXED_HEADER + ns.length);
  header.writeUInt32LE(MAGIC, 0);
  header.writeUInt32LE(VERSION, 4);
  header.writeUInt32LE(ns.length, 8);
  Buffer.from(entry.pathHash, 'hex').copy(header, 12);
  header.writeUInt32LE(entry.bytes.length, 44);
  header.writeBigUInt64LE(xxh64(entry.bytes), 48);
  const r = entry.route;
  if (r !== undefined && HEX16.test(r.keyId) && HEX16.test(r.tenantTag) && HEX16.test(r.blockHash))
    Buffer.from(r.keyId + r.tenantTag + r.blockHash, 'hex').copy(header, ROUTE_AT);
  ns.copy(header, FIXED_HEADER);
  return header;
}

function decodeRoute(head: Buffer): SpillRoute | undefined {
  const raw = head.subarray(ROUTE_AT, FIXED_HEADER);
  if (raw.equals(NO_ROUTE)) return undefined;
  const hex = raw.toString('hex');
  return { keyId: hex.slice(0, 16), tenantTag: hex.slice(16, 32), blockHash: hex.slice(32, 48) };
}

/** The header of a file `size` bytes long whose first bytes are `head`; a refusal when it cannot be ours. */
function decodeHeader(head: Buffer, size: number): Header | SpillRefusal {
  if (head.length < FIXED_HEADER || head.readUInt32LE(0) !== MAGIC || head.readUInt32LE(4) !== VERSION) return 'header';
  const nsLength = head.readUInt32LE(8);
  const numBytes = head.readUInt32LE(44);
  if (FIXED_HEADER + nsLength > head.length || FIXED_HEADER + nsLength + numBytes !== size) return 'length';
  return {
    namespace: head.toString('utf8', FIXED_HEADER, FIXED_HEADER + nsLength),
    pathHash: head.toString('hex', 12, 44),
    numBytes,
    checksum: head.readBigUInt64LE(48),
    headerBytes: FIXED_HEADER + nsLength,
    route: decodeRoute(head),
  };
}

export class DiskTier implements SpillStore {
  readonly #dir: string;
  readonly #maxBytes: number;
  readonly #maxPendingBytes: number;
  readonly #skipChecksum: boolean;
  readonly #log: (line: string) => void;
  /** File name -> size; Map order is LRU order (first = least recently used). */
  readonly #files = new Map<string, number>();
  readonly #pending = new Map<string, SpillEntry>();
  /** File name -> the route in its header (written files with one only). */
  readonly #routes = new Map<string, SpillRoute>();
  readonly #reportForeign: boolean;
  #pendingBytes = 0;
  #bytesOnDisk = 0;
  #writing: Promise<void> = Promise.resolve();
  #tempCounter = 0;
  /** Page files of another format version found at start-up (refused). */
  #otherVersions = 0;
  /** Page buffers whose write is done, for the next put (a fresh 384 KiB buffer costs more than the read). */
  readonly #spare: Uint8Array[] = [];
  /** What get() reads a file into (grown as needed): a load allocates nothing. */
  #readBuffer = Buffer.alloc(0);
  #spilledPages = 0;
  #loadedPages = 0;
  #misses = 0;
  #droppedPuts = 0;
  readonly #refused = Object.fromEntries(SPILL_REFUSALS.map((r) => [r, 0])) as Record<SpillRefusal, number>;

  /** Opens (creating) the directory and scans it: see the header comment for what is kept. */
  static open(options: DiskTierOptions): DiskTier {
    return new DiskTier(options);
  }

  private constructor(options: DiskTierOptions) {
    this.#dir = options.dir;
    this.#maxBytes = options.maxBytes;
    this.#maxPendingBytes = options.maxPendingBytes ?? 64 * 1024 ** 2;
    this.#skipChecksum = (options.faults ?? NO_FAULTS).has('skip-spill-checksum');
    this.#reportForeign = (options.faults ?? NO_FAULTS).has('report-foreign-disk-pages');
    this.#log = options.log;
    mkdirSync(this.#dir, { recursive: true });
    this.#scan();
  }

  has(namespace: SpillNamespace, pathHash: string): boolean {
    const name = fileNameOf(namespace, pathHash);
    return this.#pending.has(name) || this.#files.has(name);
  }

  put(
    namespace: SpillNamespace,
    pathHash: string,
    numBytes: number,
    fill: (into: Uint8Array) => void,
    route?: SpillRoute,
  ): void {
    const name = fileNameOf(namespace, pathHash);
    if (this.#pending.has(name) || this.#files.has(name)) return;
    if (this.#pendingBytes + numBytes > this.#maxPendingBytes) {
      this.#droppedPuts++;
      return;
    }
    const spare = this.#spare.pop();
    const bytes = spare !== undefined && spare.length === numBytes ? spare : new Uint8Array(numBytes);
    fill(bytes);
    const entry: SpillEntry =
      route === undefined ? { namespace, pathHash, bytes } : { namespace, pathHash, bytes, route };
    this.#pending.set(name, entry);
    this.#pendingBytes += entry.bytes.length;
    this.#spilledPages++;
    this.#writing = this.#writing.then(() => this.#write(name, entry));
  }

  get(namespace: SpillNamespace, pathHash: string, numBytes: number): SpillLoad {
    const name = fileNameOf(namespace, pathHash);
    const pending = this.#pending.get(name);
    if (pending !== undefined) {
      if (pending.namespace !== namespace || pending.pathHash !== pathHash) return this.#refuse(undefined, 'namespace');
      if (pending.bytes.length !== numBytes) return this.#refuse(undefined, 'length');
      this.#loadedPages++;
      return { kind: 'hit', bytes: pending.bytes };
    }
    if (!this.#files.has(name)) {
      this.#misses++;
      return { kind: 'absent' };
    }
    let file: Buffer;
    try {
      file = this.#read(join(this.#dir, name));
    } catch {
      return this.#refuse(name, 'io');
    }
    const header = decodeHeader(file, file.length);
    if (typeof header === 'string') return this.#refuse(name, header);
    if (header.namespace !== namespace) return this.#refuse(name, 'namespace');
    if (header.pathHash !== pathHash) return this.#refuse(name, 'path');
    if (header.numBytes !== numBytes) return this.#refuse(name, 'length');
    const bytes = file.subarray(header.headerBytes);
    if (!this.#skipChecksum && xxh64(bytes) !== header.checksum) return this.#refuse(name, 'checksum');
    this.#touch(name);
    this.#loadedPages++;
    return { kind: 'hit', bytes };
  }

  stats(): SpillStats {
    return {
      spilledPages: this.#spilledPages,
      loadedPages: this.#loadedPages,
      misses: this.#misses,
      refused: { ...this.#refused },
      numPages: this.#files.size + this.#pending.size,
      bytesOnDisk: this.#bytesOnDisk,
      pendingWrites: this.#pending.size,
    };
  }

  /**
   * The tenant tags and block hashes of the pages stored with a route of keyId (pages put since the
   * start, and pages found at start-up), most recently used first, at most limit.
   */
  routes(keyId: string, limit: number): SpillRouteHint[] {
    const out: SpillRouteHint[] = [];
    const take = (route: SpillRoute | undefined): void => {
      if (route === undefined || (route.keyId !== keyId && !this.#reportForeign)) return;
      out.push({ tenantTag: route.tenantTag, blockHash: route.blockHash });
    };
    for (const entry of [...this.#pending.values()].reverse()) if (out.length < limit) take(entry.route);
    for (const name of [...this.#files.keys()].reverse()) if (out.length < limit) take(this.#routes.get(name));
    return out;
  }

  /** Puts dropped because too many bytes waited to be written. */
  get droppedPuts(): number {
    return this.#droppedPuts;
  }

  /** Resolves when every page put so far is written (or failed to be). */
  flush(): Promise<void> {
    return this.#writing;
  }

  async #write(name: string, entry: SpillEntry): Promise<void> {
    const temp = join(this.#dir, `${TEMP_PREFIX}${name}-${process.pid}-${this.#tempCounter++}`);
    const header = encodeHeader(entry);
    try {
      const handle = await open(temp, 'w');
      try {
        await handle.writev([header, entry.bytes]);
        await handle.datasync();
      } finally {
        await handle.close();
      }
      await rename(temp, join(this.#dir, name));
      this.#files.set(name, header.length + entry.bytes.length);
      if (entry.route !== undefined) this.#routes.set(name, entry.route);
      this.#bytesOnDisk += header.length + entry.bytes.length;
      this.#bound();
    } catch (error) {
      this.#log(`kv-disk: could not write ${name}: ${error instanceof Error ? error.message : String(error)}`);
      await unlink(temp).catch(() => undefined);
    } finally {
      this.#pending.delete(name);
      this.#pendingBytes -= entry.bytes.length;
      if (this.#spare.length < 64) this.#spare.push(entry.bytes);
    }
  }

  /** The whole file, in the reused read buffer. */
  #read(path: string): Buffer {
    const fd = openSync(path, 'r');
    try {
      const size = fstatSync(fd).size;
      if (this.#readBuffer.length < size) this.#readBuffer = Buffer.alloc(size);
      const file = this.#readBuffer.subarray(0, size);
      let at = 0;
      while (at < size) {
        const n = readSync(fd, file, at, size - at, at);
        if (n === 0) break;
        at += n;
      }
      return file.subarray(0, at);
    } finally {
      closeSync(fd);
    }
  }

  #touch(name: string): void {
    const size = this.#files.get(name) as number;
    this.#files.delete(name);
    this.#files.set(name, size);
  }

  /** Deletes least recently used files until the total fits maxBytes. */
  #bound(): void {
    for (const [name] of this.#files) {
      if (this.#bytesOnDisk <= this.#maxBytes) return;
      this.#delete(name);
    }
  }

  #delete(name: string): void {
    const size = this.#files.get(name);
    if (size !== undefined) {
      this.#files.delete(name);
      this.#routes.delete(name);
      this.#bytesOnDisk -= size;
    }
    try {
      unlinkSync(join(this.#dir, name));
    } catch {
      // already gone: nothing to free
    }
  }

  #refuse(name: string | undefined, reason: SpillRefusal): SpillLoad {
    this.#refused[reason]++;
    this.#log(`kv-disk: refused ${name ?? 'a pending page'} (${reason}); deleted`);
    if (name !== undefined) this.#delete(name);
    return { kind: 'refused', reason };
  }

  #scan(): void {
    const found: { name: string; size: number; mtimeMs: number; route: SpillRoute | undefined }[] = [];
    for (const name of readdirSync(this.#dir)) {
      const path = join(this.#dir, name);
      if (name.startsWith(TEMP_PREFIX)) {
        this.#log(`kv-disk: deleting ${name}, a write that did not finish`);
        unlinkSync(path);
        continue;
      }
      if (!NAME.test(name)) {
        this.#log(`kv-disk: ignoring ${name}: not a page file`);
        continue;
      }
      const stat = statSync(path);
      const header = this.#checkHeader(path, name, stat.size);
      if (typeof header === 'string') {
        this.#log(`kv-disk: refused ${name} (${header}); deleted`);
        this.#refused[header]++;
        unlinkSync(path);
        continue;
      }
      found.push({ name, size: stat.size, mtimeMs: stat.mtimeMs, route: header.route });
    }
    found.sort((a, b) => a.mtimeMs - b.mtimeMs || (a.name < b.name ? -1 : 1));
    for (const { name, size, route } of found) {
      this.#files.set(name, size);
      if (route !== undefined) this.#routes.set(name, route);
      this.#bytesOnDisk += size;
    }
    if (this.#otherVersions > 0)
      this.#log(
        `kv-disk: ${this.#otherVersions} page files of another format version refused (this one writes ${VERSION})`,
      );
    this.#bound();
  }

  /** The header of the file at path if it is a page of ours under this name; else why not. */
  #checkHeader(path: string, name: string, size: number): Header | SpillRefusal {
    const fd = openSync(path, 'r');
    let head: Buffer;
    try {
      head = Buffer.alloc(Math.min(size, 4096));
      readSync(fd, head, 0, head.length, 0);
    } finally {
      closeSync(fd);
    }
    const header = decodeHeader(head, size);
    if (header === 'header' && head.length >= 8 && head.readUInt32LE(0) === MAGIC && head.readUInt32LE(4) !== VERSION)
      this.#otherVersions++;
    if (typeof header === 'string') return header;
    return fileNameOf(header.namespace as SpillNamespace, header.pathHash) === name ? header : 'path';
  }
}
