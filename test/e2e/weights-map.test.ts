// A GGUF's weights map is read-only, against real processes: a child that maps the file
// (files.ts's openModelFile, as the engine thread does) and writes one byte through the map dies
// of SIGSEGV, and the file is unchanged; with `writable-weights-map` (the negative control) the
// write goes through (copy-on-write: that process's view only, never the file).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nativeAvailability } from '../../src/kernels/index.js';
import { genModel } from '../../src/gen/index.js';

const root = join(import.meta.dirname, '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'tessera-weights-map-'));
const file = join(dir, 'tiny-q4_0.gguf');
const mapped = 'addon' in nativeAvailability();

/** A child process that maps `path` (with the fault point when asked) and writes its first byte. */
function writeThroughMap(path: string, fault: 'writable-weights-map' | null): ReturnType<typeof spawnSync> {
  const script = [
    `import { openModelFile } from ${JSON.stringify(join(root, 'src/formats/index.ts'))};`,
    `import { FaultSet } from ${JSON.stringify(join(root, 'src/core/index.ts'))};`,
    `const faults = new FaultSet(${JSON.stringify(fault === null ? [] : [fault])});`,
    `const opened = await openModelFile(${JSON.stringify(path)}, 'mmap', faults);`,
    `if (opened.how !== 'mmap') process.exit(3);`,
    `opened.bytes.view(0, 1)[0] = 0x58;`,
    `process.stdout.write('wrote ' + String.fromCharCode(opened.bytes.view(0, 1)[0]));`,
  ].join('\n');
  return spawnSync(
    process.execPath,
    ['--import', join(root, 'bench/lib/register-ts.mjs'), '--input-type=module', '-e', script],
    { encoding: 'utf8', timeout: 60_000 },
  );
}

describe('the weights map', () => {
  beforeAll(async () => {
    await genModel({ preset: 'tiny', format: 'gguf', out: file, seed: 3, dtype: 'q4_0' });
  }, 120_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it.runIf(mapped)('faults on a write through the map (SIGSEGV in a child) and leaves the file as it was', () => {
    const before = readFileSync(file);
    const child = writeThroughMap(file, null);
    expect(child.signal).toBe('SIGSEGV');
    expect(child.stdout).toBe('');
    expect(readFileSync(file).equals(before)).toBe(true);
  });

  it.runIf(mapped)('negative control: with writable-weights-map the write goes through (copy-on-write)', () => {
    const before = readFileSync(file);
    const child = writeThroughMap(file, 'writable-weights-map');
    expect(child.status).toBe(0);
    expect(child.stdout).toBe('wrote X');
    expect(readFileSync(file).equals(before)).toBe(true); // private to that process, never the file
  });
});
