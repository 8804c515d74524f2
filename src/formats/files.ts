// Model files as bytes: read whole into memory (one Buffer per file), or, for a GGUF's weights,
// mapped read-only from the page cache (openModelFile: the native addon's mmap, where it loads;
// else read, and it says why), from which loaders hand out zero-copy views. Every failure
// (missing, a directory, unreadable, too large) is a ModelLoadError naming the file; this file
// never parses anything and never writes through a mapping.
import { constants as bufferConstants } from 'node:buffer';
import { open, readFile, stat, type FileHandle } from 'node:fs/promises';
import { ModelLoadError, NO_FAULTS, type FaultSet } from '../core/index.js';
import { mapFileReadOnly, PIECE_STRIDE, type MappedPiece } from '../kernels/index.js';
import { parseJsonObject, type JsonObject } from './json-fields.js';

/**
 * A file's bytes, viewed zero-copy: one Uint8Array (a read), or a mapping's pieces (a file over
 * 4 GiB is mapped in overlapping pieces: Node 20 views at most 2^32 - 1 bytes with one array).
 */
export interface FileBytes {
  readonly byteLength: number;
  /** `length` bytes from `offset`; a RangeError past the end (readers check extents first). */
  view(offset: number, length: number): Uint8Array;
}

/** A Uint8Array as FileBytes. */
export function fileBytesOf(bytes: Uint8Array): FileBytes {
  return {
    byteLength: bytes.byteLength,
    view: (offset, length) => {
      if (offset < 0 || offset + length > bytes.byteLength)
        throw new RangeError(`bytes ${offset}..${offset + length} past ${bytes.byteLength}`);
      return bytes.subarray(offset, offset + length);
    },
  };
}

/** An ArrayBuffer of any size (a large read) as FileBytes. */
function fileBytesOfBuffer(buffer: ArrayBuffer): FileBytes {
  return { byteLength: buffer.byteLength, view: (offset, length) => new Uint8Array(buffer, offset, length) };
}

/** A mapping's pieces (native.ts mapFileReadOnly) as FileBytes: a range is viewed in the piece that holds it whole. */
function fileBytesOfPieces(pieces: readonly MappedPiece[], size: number): FileBytes {
  return {
    byteLength: size,
    view: (offset, length) => {
      const piece = pieces[Math.min(Math.floor(offset / PIECE_STRIDE), pieces.length - 1)]!;
      if (offset + length > piece.start + piece.buffer.byteLength)
        throw new RangeError(
          `bytes ${offset}..${offset + length} span two mapped pieces (at most ${PIECE_STRIDE} bytes each)`,
        );
      return new Uint8Array(piece.buffer, offset - piece.start, length);
    },
  };
}

/** How a GGUF's weights reach the kernels' prepare (--weights). */
export type WeightsMode = 'mmap' | 'copy';
export const WEIGHTS_MODES: readonly WeightsMode[] = ['mmap', 'copy'];

export interface ModelFile {
  readonly bytes: FileBytes;
  /** What was done: mapped, or read into this process's memory. */
  readonly how: WeightsMode;
  /** Why `mmap` was asked for and the file was read instead (no addon here); null otherwise. */
  readonly fellBack: string | null;
  /** The mapping's buffers (releaseMappedPages drops their resident pages); none when read. */
  readonly mapped: readonly ArrayBuffer[];
}

/**
 * A model file's bytes the way `mode` asks: mapped read-only (a write through the map faults;
 * `writable-weights-map` maps it copy-on-write, the negative control), or read whole. Where the
 * native addon does not load (no compiler, another OS), `mmap` falls back to reading and says why.
 */
export async function openModelFile(path: string, mode: WeightsMode, faults: FaultSet = NO_FAULTS): Promise<ModelFile> {
  if (mode === 'copy') return { bytes: await readLargeFile(path), how: 'copy', fellBack: null, mapped: [] };
  let size: number;
  try {
    size = (await stat(path)).size;
  } catch (error) {
    throw loadError(path, error);
  }
  let mapped: ReturnType<typeof mapFileReadOnly>;
  try {
    mapped = mapFileReadOnly(path, size, faults.has('writable-weights-map'));
  } catch (error) {
    throw new ModelLoadError(path, error instanceof Error ? error.message : String(error), error);
  }
  if ('why' in mapped) return { bytes: await readLargeFile(path), how: 'copy', fellBack: mapped.why, mapped: [] };
  return {
    bytes: fileBytesOfPieces(mapped.pieces, size),
    how: 'mmap',
    fellBack: null,
    mapped: mapped.pieces.map((p) => p.buffer),
  };
}

/** The whole file in one ArrayBuffer, read in pieces of at most 1 GiB (no 4 GiB limit as for one Buffer). */
async function readLargeFile(path: string): Promise<FileBytes> {
  return readOpenedFile(path, async (handle, size) => {
    const buffer = new ArrayBuffer(size);
    await readFully(handle, path, size, (at, length) => new Uint8Array(buffer, at, length));
    return fileBytesOfBuffer(buffer);
  });
}

/**
 * Opens `path`, hands its handle and size to `read`, and closes it: a failure to open, stat or
 * read becomes a ModelLoadError naming the file (a ModelLoadError `read` throws passes as it is).
 */
async function readOpenedFile<T>(path: string, read: (handle: FileHandle, size: number) => Promise<T>): Promise<T> {
  let handle: FileHandle;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    throw loadError(path, error);
  }
  try {
    return await read(handle, (await handle.stat()).size);
  } catch (error) {
    if (error instanceof ModelLoadError) throw error;
    throw loadError(path, error);
  } finally {
    await handle.close();
  }
}

/** Reads `size` bytes from the start of the file into `viewAt`'s views, at most 1 GiB a call; a file that shrinks is an error. */
async function readFully(
  handle: FileHandle,
  path: string,
  size: number,
  viewAt: (at: number, length: number) => Uint8Array,
): Promise<void> {
  let at = 0;
  while (at < size) {
    const piece = viewAt(at, Math.min(size - at, 1 << 30));
    const { bytesRead } = await handle.read(piece, 0, piece.byteLength, at);
    if (bytesRead === 0) throw new ModelLoadError(path, `shrank while being read (${at} of ${size} bytes)`);
    at += bytesRead;
  }
}

/** A failure of the file system on `path` as a ModelLoadError that says what went wrong in words. */
function loadError(path: string, error: unknown): ModelLoadError {
  return new ModelLoadError(path, describe(error), error);
}

function describe(error: unknown): string {
  const code = (error as { code?: unknown }).code;
  switch (code) {
    case 'ENOENT':
      return 'file not found';
    case 'EISDIR':
      return 'is a directory, expected a file';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    default:
      return `cannot read (${error instanceof Error ? error.message : String(error)})`;
  }
}

export async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

export async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch (error) {
    throw loadError(path, error);
  }
}

/** The whole file as one Buffer (byteOffset 0, so f32 data at aligned offsets stays aligned). */
export async function readWholeFile(path: string): Promise<Buffer> {
  return readOpenedFile(path, async (handle, size) => {
    if (size > bufferConstants.MAX_LENGTH) {
      throw new ModelLoadError(
        path,
        `is ${size} bytes; one file may hold at most ${bufferConstants.MAX_LENGTH} bytes (shard it)`,
      );
    }
    const buffer = Buffer.allocUnsafeSlow(size);
    await readFully(handle, path, size, (at, length) => buffer.subarray(at, at + length));
    return buffer;
  });
}

export async function readJsonFile(path: string): Promise<JsonObject> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw loadError(path, error);
  }
  return parseJsonObject(text, path);
}

export async function readOptionalJsonFile(path: string): Promise<JsonObject | null> {
  return (await exists(path)) ? readJsonFile(path) : null;
}

export async function readOptionalTextFile(path: string): Promise<string | null> {
  if (!(await exists(path))) return null;
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    throw loadError(path, error);
  }
}
