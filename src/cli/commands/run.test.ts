import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { genModel } from '../../gen/index.js';
import { loadModel } from '../../model/index.js';
import { runMain } from '../testing/run-main.js';

let root: string;
let modelPath: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'tessera-cli-run-'));
  modelPath = join(root, 'small.gguf');
  await genModel({ preset: 'tiny', format: 'gguf', out: modelPath, seed: 1, overrides: { numLayers: 2 } });
});
afterAll(async () => rm(root, { recursive: true, force: true }));

const run = runMain;

interface RunJson {
  promptIds: number[];
  ids: number[];
  text: string;
  tokensPerSecond: number;
  finishReason: string;
  timing: Record<string, number>;
}

describe('tessera run', () => {
  it('--prompt-ids are used exactly as given; --json prints ids, text, tokensPerSecond and timing', async () => {
    const r = await run([
      'run',
      '--model',
      modelPath,
      '--prompt-ids',
      '450, 4996,17354',
      '--max-tokens',
      '8',
      '--ignore-eos',
      '--json',
      '--threads',
      '1',
    ]);
    expect([r.code, r.stderr]).toEqual([0, '']);
    const result = JSON.parse(r.stdout) as RunJson;
    expect(result.promptIds).toEqual([450, 4996, 17354]);
    expect(result.ids).toHaveLength(8);
    expect(result.finishReason).toBe('length');
    const model = await loadModel(modelPath);
    expect(result.text).toBe(model.tokenizer.decode(result.ids, { skipSpecialTokens: true }));
    expect(result.tokensPerSecond).toBeGreaterThan(0);
    expect(Object.keys(result.timing).sort()).toEqual(['decodeMs', 'loadMs', 'prefillMs', 'prepareMs']);
  });

  it('--prompt is tokenized with BOS; greedy output does not depend on the seed, sampling does', async () => {
    const ask = async (...extra: string[]) =>
      JSON.parse(
        (
          await run([
            'run',
            '--model',
            modelPath,
            '--prompt',
            'Once upon a time',
            '--max-tokens',
            '6',
            '--ignore-eos',
            '--json',
            ...extra,
          ])
        ).stdout,
      ) as RunJson;
    const greedy = await ask('--seed', '1');
    expect(greedy.promptIds[0]).toBe(1);
    expect((await ask('--seed', '2')).ids).toEqual(greedy.ids);
    const hot = await ask('--temperature', '1.5', '--top-k', '50', '--top-p', '0.9', '--seed', '5');
    expect((await ask('--temperature', '1.5', '--top-k', '50', '--top-p', '0.9', '--seed', '5')).ids).toEqual(hot.ids);
    expect(hot.ids).not.toEqual(greedy.ids);
  });

  it('streams text to stdout and a summary to stderr without --json', async () => {
    const r = await run(['run', '--model', modelPath, '--prompt', 'Hello', '--max-tokens', '4', '--ignore-eos']);
    expect(r.code).toBe(0);
    expect(r.stdout.length).toBeGreaterThan(1);
    expect(r.stderr).toMatch(
      /4 tokens \(length\) at [\d.]+ tokens\/s; prompt \d+ tokens in \d+ ms; model loaded in \d+ ms, prepared for (native \([\w-]+\)|wasm) dense \+ attention, wasm ops, batch-invariant in \d+ ms/,
    );
  });

  it('defaults to builtin:austen, the shipped model, which speaks English', async () => {
    const r = await run(['run', '--prompt', 'It is a truth universally acknowledged', '--max-tokens', '12', '--json']);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as RunJson;
    expect(out.ids).toHaveLength(12);
    expect(out.text).toMatch(/^[\s\w,.;:'"!?-]+$/);
    expect(out.text.split(/\s+/).filter((w) => w.length > 0).length).toBeGreaterThan(4);
  });

  it('generates builtin:tiny into TESSERA_HOME', async () => {
    const saved = process.env['TESSERA_HOME'];
    process.env['TESSERA_HOME'] = join(root, 'home');
    try {
      const r = await run([
        'run',
        '--model',
        'builtin:tiny',
        '--prompt-ids',
        '1,2,3',
        '--max-tokens',
        '2',
        '--json',
        '--ignore-eos',
      ]);
      expect(r.code).toBe(0);
      expect((JSON.parse(r.stdout) as RunJson).ids).toHaveLength(2);
      expect((await loadModel('builtin:tiny', { cacheDir: join(root, 'home') })).source.path).toContain(
        join(root, 'home'),
      );
    } finally {
      if (saved === undefined) delete process.env['TESSERA_HOME'];
      else process.env['TESSERA_HOME'] = saved;
    }
  });

  it.each([
    [['--prompt', 'x', '--prompt-ids', '1'], 'give exactly one of --prompt TEXT or --prompt-ids 1,2,3'],
    [[], 'give exactly one of --prompt TEXT or --prompt-ids 1,2,3'],
    [['--prompt-ids', '1,x'], '--prompt-ids must be comma-separated token ids, got "1,x"'],
    [['--prompt-ids', '1,32000'], '--prompt-ids: token 32000 is outside the vocabulary (0..31999)'],
    [['--prompt', 'x', '--top-p', '0'], '--top-p must be in (0, 1], got 0'],
    [['--prompt', 'x', '--temperature', 'hot'], '--temperature must be a number, got "hot"'],
    [['--prompt', 'x', '--max-tokens', '0'], '--max-tokens must be an integer >= 1, got "0"'],
    [['--prompt', 'x', '--kernels', 'gpu'], "--kernels must be one of auto, native, wasm, ref, got 'gpu'"],
    [
      ['--prompt-ids', '1,2', '--max-tokens', '4095'],
      "2 prompt tokens + --max-tokens 4095 exceed the model's context of 4096 tokens",
    ],
  ])('exits 2 with one clear line for bad flags: %j', async (flags, message) => {
    const r = await run(['run', '--model', modelPath, ...flags]);
    expect([r.code, r.stderr]).toEqual([2, `tessera: ${message}\n`]);
  });
});
