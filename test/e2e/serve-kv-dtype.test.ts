// --kv-dtype on a real server: `tessera serve --kv-dtype f16` beside one with f32 KV, both of
// --kv-memory 16MiB, driven by the openai client. The f16 node reports kvDtype and half the
// bytes per token in /health, holds twice the pages in the same memory, and answers greedy
// requests with the f32 node's tokens (builtin:tiny; bench:kv-dtype measures the agreement at
// scale). Its stale-page defence is checked per dtype in src/pages and src/model.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { health, promptIds, startServer, testHome, type Server } from './support/process.js';

let home: Awaited<ReturnType<typeof testHome>>;
const servers: Partial<Record<'f32' | 'f16', Server>> = {};

beforeAll(async () => {
  home = await testHome();
  const flags = ['--context-length', '512', '--kv-memory', '16MiB'];
  const [f32, f16] = await Promise.all([
    startServer([...flags, '--kv-dtype', 'f32'], home.dir),
    startServer([...flags, '--kv-dtype', 'f16'], home.dir),
  ]);
  Object.assign(servers, { f32, f16 });
}, 180_000);
afterAll(async () => {
  await Promise.all(Object.values(servers).map((s) => s.stop()));
  await home?.remove();
});

describe('tessera serve --kv-dtype f16', () => {
  it('reports its KV dtype, half the bytes per token and twice the pages of an f32 pool in the same memory', async () => {
    const [a, b] = [await health(servers.f32!.url), await health(servers.f16!.url)];
    expect(a.body).toMatchObject({ kvDtype: 'f32' });
    expect(b.body).toMatchObject({ kvDtype: 'f16', kvBytesPerToken: (a.body['kvBytesPerToken'] as number) / 2 });
    expect(b.body['kvPages']).toBe(2 * (a.body['kvPages'] as number));
    expect(servers.f16!.stderr()).not.toMatch(/error/i);
  });

  it('answers greedy completions with the tokens of the f32 node', async () => {
    for (const [i, length] of [8, 60, 200].entries()) {
      const body = {
        model: 'builtin:tiny',
        prompt: promptIds(length, 3000 + 97 * i),
        max_tokens: 24,
        temperature: 0,
        ignore_eos: true,
        return_token_ids: true,
      };
      const [a, b] = await Promise.all([
        servers.f32!.client().completions.create(body),
        servers.f16!.client().completions.create(body),
      ]);
      expect(b.choices[0]?.text).toBe(a.choices[0]?.text);
      expect(b.usage?.completion_tokens).toBe(24);
    }
  });
});
