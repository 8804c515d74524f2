import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runMain } from '../testing/run-main.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tessera-cli-gen-'));
});
afterAll(async () => rm(root, { recursive: true, force: true }));

const run = runMain;

describe('tessera gen-model', () => {
  it('writes a tiny GGUF, reports parameters and file sizes, with plain progress lines off a TTY', async () => {
    const out = join(root, 'tiny.gguf');
    const r = await run([
      'gen-model',
      '--preset',
      'tiny',
      '--format',
      'gguf',
      '--out',
      out,
      '--seed',
      '4',
      '--dtype',
      'q4_0',
    ]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      new RegExp(
        `^wrote tiny \\(8,979,584 parameters, q4_0, seed 4\\) to ${out} in [\\d.]+ s\\n  ${out}  [\\d.]+ MB\\n$`,
      ),
    );
    expect(r.stderr.trim().split('\n').at(-1)).toMatch(/^gen-model: 100% \(/);
    expect((await stat(out)).size).toBeGreaterThan(4_000_000);
  });

  it('exits 2 with a clear message for q4_0 in a Hugging Face directory', async () => {
    const r = await run([
      'gen-model',
      '--preset',
      'tiny',
      '--format',
      'hf',
      '--out',
      join(root, 'hf'),
      '--dtype',
      'q4_0',
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      'tessera: --dtype q4_0 is not supported with --format hf: safetensors holds f32, f16 or bf16 (use --format gguf for q8_0/q4_0)\n',
    );
    await expect(stat(join(root, 'hf'))).rejects.toThrow();
  });

  it('exits 2 for an unknown preset or format', async () => {
    const r = await run(['gen-model', '--preset', 'huge', '--format', 'hf', '--out', join(root, 'x')]);
    expect([r.code, r.stderr]).toEqual([
      2,
      'tessera: --preset must be one of tiny, m100, qwen3-tiny, phi3-tiny, llama-1b, gemma3-tiny, ' +
        'qwen3moe-tiny, qwen3moe-a3b-2l, glm4moe-tiny, glm4-tiny, gpt-oss-tiny, gpt-oss-20b-2l, got "huge"\n',
    ]);
    const f = await run(['gen-model', '--preset', 'tiny', '--format', 'onnx', '--out', join(root, 'x')]);
    expect([f.code, f.stderr]).toEqual([2, 'tessera: --format must be one of hf, gguf, got "onnx"\n']);
  });
});

describe('the progress display', () => {
  it('redraws one bar in place on a TTY and ends the line when done', async () => {
    const { progressDisplay } = await import('./gen-model.js');
    let written = '';
    const tty = { isTTY: true, write: (s: string) => ((written += s), true) } as unknown as NodeJS.WriteStream;
    const display = progressDisplay(tty);
    display.update({ doneBytes: 50e6, totalBytes: 100e6, tensor: 'model.norm.weight' });
    display.update({ doneBytes: 100e6, totalBytes: 100e6, tensor: 'lm_head.weight' });
    display.done();
    expect(written).toBe(
      `\r[${'#'.repeat(15)}${'.'.repeat(15)}]  50%  50.0 MB / 100.0 MB  model.norm.weight\x1b[K` +
        `\r[${'#'.repeat(30)}] 100%  100.0 MB / 100.0 MB  lm_head.weight\x1b[K\n`,
    );
  });
});
