// openModelFile (files.ts): a GGUF mapped read-only holds the same bytes as the file read whole;
// a truncated file, mapped, is a ModelLoadError naming the tensor, not a crash; a missing file or
// a directory is one too. That a write through the map faults: test/e2e/weights-map.test.ts.
import { copyFileSync, mkdtempSync, readFileSync, rmSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModelLoadError, NO_FAULTS } from '../core/index.js';
import { nativeAvailability } from '../kernels/index.js';
import { genModel } from '../gen/index.js';
import { openModelFile, readGguf } from './index.js';

const dir = mkdtempSync(join(tmpdir(), 'tessera-model-file-'));
const file = join(dir, 'qwen3moe-tiny-q4_0.gguf');
const mapped = 'addon' in nativeAvailability();

describe('openModelFile', () => {
  beforeAll(async () => {
    await genModel({ preset: 'qwen3moe-tiny', format: 'gguf', out: file, seed: 3, dtype: 'q4_0' });
  }, 120_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('maps a GGUF read-only (where the addon loads): the same bytes as reading it whole', async () => {
    const map = await openModelFile(file, 'mmap');
    const copy = await openModelFile(file, 'copy');
    expect(copy).toMatchObject({ how: 'copy', fellBack: null });
    expect(map.how).toBe(mapped ? 'mmap' : 'copy');
    expect(map.fellBack === null).toBe(mapped);
    expect(map.bytes.byteLength).toBe(copy.bytes.byteLength);
    // Buffer.equals, not toEqual: a deep compare of 30 MB element by element runs out of heap.
    expect(Buffer.from(map.bytes.view(0, map.bytes.byteLength)).equals(readFileSync(file))).toBe(true);
    // One piece for a file under 4 GiB: an ArrayBuffer over the mapping, not this process's heap.
    expect(map.mapped.length).toBe(mapped ? 1 : 0);
    expect(readGguf(map.bytes, file).tensors.length).toBe(readGguf(copy.bytes, file).tensors.length);
  });

  it('refuses a truncated GGUF, mapped or read, with a ModelLoadError naming the tensor', async () => {
    const cut = join(dir, 'cut.gguf');
    copyFileSync(file, cut);
    truncateSync(cut, readFileSync(file).byteLength - 1000);
    for (const mode of ['mmap', 'copy'] as const) {
      const opened = await openModelFile(cut, mode);
      expect(() => readGguf(opened.bytes, cut)).toThrow(ModelLoadError);
      expect(() => readGguf(opened.bytes, cut)).toThrow(
        /truncated: tensor \S+ needs bytes \d+\.\.\d+ but the file has/,
      );
    }
  });

  it('names a missing file or a directory instead of mapping it', async () => {
    await expect(openModelFile(join(dir, 'none.gguf'), 'mmap', NO_FAULTS)).rejects.toThrow(
      new ModelLoadError(join(dir, 'none.gguf'), 'file not found'),
    );
    await expect(openModelFile(dir, 'mmap')).rejects.toThrow(ModelLoadError);
    await expect(openModelFile(dir, 'mmap')).rejects.toThrow(mapped ? /not a regular file/ : /directory/);
  });
});
