// Reading model files whole into memory (Node has no mmap): one Buffer per file, from which
// loaders hand out zero-copy views. Every failure (missing, a directory, unreadable, too
// large for one Buffer) is a ModelLoadError naming the file; this file never parses anything.
import { constants as bufferConstants } from 'node:buffer';
import { open, readFile, stat } from 'node:fs/promises';
import { ModelLoadError } from '../core/index.js';
import { parseJsonObject, type JsonObject } from './json-fields.js';

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
    throw new ModelLoadError(path, describe(error), error);
  }
}

/** The whole file as one Buffer (byteOffset 0, so f32 data at aligned offsets stays aligned). */
export async function readWholeFile(path: string): Promise<Buffer> {
  let handle;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    throw new ModelLoadError(path, describe(error), error);
  }
  try {
    const size = (await handle.stat()).size;
    if (size > bufferConstants.MAX_LENGTH) {
      throw new ModelLoadError(
        path,
        `is ${size} bytes; one file may hold at most ${bufferConstants.MAX_LENGTH} bytes (shard it)`,
      );
    }
    const buffer = Buffer.allocUnsafeSlow(size);
    let at = 0;
    while (at < size) {
      const { bytesRead } = await handle.read(buffer, at, Math.min(size - at, 1 << 30), at);
      if (bytesRead === 0) throw new ModelLoadError(path, `shrank while being read (${at} of ${size} bytes)`);
      at += bytesRead;
    }
    return buffer;
  } catch (error) {
    if (error instanceof ModelLoadError) throw error;
    throw new ModelLoadError(path, describe(error), error);
  } finally {
    await handle.close();
  }
}

export async function readJsonFile(path: string): Promise<JsonObject> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new ModelLoadError(path, describe(error), error);
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
    throw new ModelLoadError(path, describe(error), error);
  }
}
