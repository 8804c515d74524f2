// The memory check against real processes: `tessera plan` counts the weights (repacked by the
// kernels + what stays of the file: the embedding's pages with --weights mmap, the whole file with
// --weights copy), the KV pool and the activations against the machine's memory, and exits 2
// naming the numbers when they do not fit; `serve` refuses to start on the same numbers before it
// loads a weight, and with `skip-memory-check` (the negative control) goes on to load and dies
// allocating the pool instead of refusing.
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { runCli, useTestHome } from './support/process.js';

const home = useTestHome();
let model: string;

beforeAll(async () => {
  model = join(home.dir, 'tiny-q4_0.gguf');
  const r = await runCli(
    ['gen-model', '--preset', 'tiny', '--format', 'gguf', '--dtype', 'q4_0', '--out', model],
    home.dir,
  );
  expect(r.code, r.stderr).toBe(0);
}, 120_000);

const tooMuch = ['--kv-memory', '4096GiB'];
const refusal = new RegExp(
  /this node needs 4 TiB \(\d+ bytes: weights [\d.]+ [KM]iB repacked \+ [\d.]+ [KM]iB of the file, /.source +
    /KV pool 4 TiB, activations [\d.]+ MiB\) but this machine has [\d.]+ GiB \(\d+ bytes\)\. /.source +
    /Lower --kv-memory or --kv-pages, or use a smaller model\./.source,
);

describe('tessera plan: memory', () => {
  it('counts the mapped file by the pages it reads in place, the copied file whole', async () => {
    const mapped = await runCli(['plan', '--model', model, '--kv-memory', '64MiB'], home.dir);
    expect(mapped.code, mapped.stderr).toBe(0);
    expect(mapped.stdout).toMatch(
      new RegExp(
        /weights\s+[\d.]+ [KM]iB = [\d.]+ [KM]iB repacked by the kernels \+ [\d.]+ [KM]iB of the file /.source +
          /\(the embedding read in place from the map \(page cache\)\); file [\d.]+ [KM]iB/.source,
      ),
    );
    expect(mapped.stdout).toMatch(
      /memory\s+[\d.]+ [KMG]iB \(weights \+ KV pool 64 MiB \+ activations\) of [\d.]+ GiB: fits/,
    );
    const copied = await runCli(['plan', '--model', model, '--kv-memory', '64MiB', '--weights', 'copy'], home.dir);
    expect(copied.code, copied.stderr).toBe(0);
    expect(copied.stdout).toMatch(/of the file \(the whole file read into memory \(--weights copy\)\)/);
  });

  it('exits 2 naming weights, pool, activations and the machine when they do not fit', async () => {
    const r = await runCli(['plan', '--model', model, ...tooMuch], home.dir);
    expect(r.code).toBe(2);
    expect(r.stdout).toMatch(/memory\s+4 TiB .*: NO, does not fit/);
    expect(r.stderr).toMatch(refusal);
  });
});

describe('serve: the memory check at start', () => {
  it('refuses to start (exit 2) before any weight loads', async () => {
    const r = await runCli(['serve', '--port', '0', '--model', model, ...tooMuch], home.dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(refusal);
    expect(r.stderr).not.toMatch(/loading the weights/);
  });

  it('negative control: with skip-memory-check it loads and dies allocating the pool instead', async () => {
    const r = await runCli(['serve', '--port', '0', '--model', model, ...tooMuch], home.dir, {
      TESSERA_ALLOW_FAULTS: '1',
      TESSERA_FAULT: 'skip-memory-check',
    });
    expect(r.stderr).toMatch(/memory check skipped \(fault skip-memory-check\): this node needs 4 TiB/);
    expect(r.stderr).toMatch(/loading the weights/);
    expect(r.code).not.toBe(0);
    expect(r.stderr).not.toMatch(new RegExp(`^tessera: ${refusal.source}`, 'm'));
  });
});
