// /v1/embeddings from a real `tessera serve` process (builtin:tiny, --deterministic) through the
// official openai client: a string, strings, token ids; float and base64 (the SDK decodes base64
// to the same floats); unit length (L2-normalised last-token state); one input's vector is the
// same alone or in a batch beside others; usage counts the input tokens; `dimensions` other
// than the model's size and bad inputs are 400s; pages all back after. (`tessera up` refuses
// /v1/embeddings with a 400: test/e2e/pd/echo.test.ts.)
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kvPages, startServer, useTestHome, waitUntil, type Server } from './support/process.js';

const MODEL = 'builtin:tiny';
const home = useTestHome();
let server: Server;
let client: OpenAI;

beforeAll(async () => {
  server = await startServer(['--deterministic', '--context-length', '256', '--kv-pages', '64'], home.dir);
  client = server.client();
});
afterAll(async () => {
  await server?.stop();
});

const norm = (v: readonly number[]) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));

describe('/v1/embeddings through the openai client', () => {
  it('embeds strings and token ids: unit vectors of the model size, in input order, usage counted', async () => {
    const r = await client.embeddings.create({
      model: MODEL,
      input: ['Once upon a time', 'there lived a fox', 'Once upon a time'],
    });
    expect(r.object).toBe('list');
    expect(r.data.map((d) => d.index)).toEqual([0, 1, 2]);
    const [a, b, c] = r.data.map((d) => d.embedding);
    expect(a?.length).toBeGreaterThan(8);
    for (const v of [a, b, c]) expect(norm(v ?? [])).toBeCloseTo(1, 5);
    expect(c).toEqual(a); // the same text, the same vector (a prefix-cache hit on the third)
    expect(b).not.toEqual(a);
    const alone = await client.embeddings.create({ model: MODEL, input: 'there lived a fox' });
    expect(alone.data[0]?.embedding).toEqual(b); // batch-invariant (--deterministic)
    expect(alone.usage.prompt_tokens).toBeGreaterThan(0);
    expect(r.usage.prompt_tokens).toBe(r.usage.total_tokens);
    const ids = await client.embeddings.create({
      model: MODEL,
      input: [
        [1, 450, 4996],
        [1, 450],
      ],
    });
    expect(ids.data).toHaveLength(2);
    expect(ids.usage.prompt_tokens).toBe(5);
  });

  it('gives the same floats as base64 (little-endian float32)', async () => {
    const input = 'The quick brown fox';
    const [floats, encoded] = await Promise.all([
      client.embeddings.create({ model: MODEL, input, encoding_format: 'float' }),
      fetch(`${server.url}/v1/embeddings`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, input, encoding_format: 'base64' }),
      }).then((res) => res.json() as Promise<{ data: { embedding: string }[] }>),
    ]);
    const bytes = Buffer.from(encoded.data[0]?.embedding ?? '', 'base64');
    const decoded = Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 4));
    expect(decoded).toEqual(floats.data[0]?.embedding);
    // The SDK asks for base64 by default when no format is given and decodes it: the same vector.
    const sdk = await client.embeddings.create({ model: MODEL, input });
    expect(sdk.data[0]?.embedding).toEqual(floats.data[0]?.embedding);
  });

  it('refuses dimensions other than the model size, empty or bad input, with 400s; pages back after', async () => {
    const size = (await client.embeddings.create({ model: MODEL, input: 'x' })).data[0]?.embedding.length ?? 0;
    const ok = await client.embeddings.create({ model: MODEL, input: 'x', dimensions: size });
    expect(ok.data[0]?.embedding).toHaveLength(size);
    const bad = async (body: object) => {
      const e = await client.embeddings.create(body as never).catch((error: unknown) => error);
      expect(e).toBeInstanceOf(OpenAI.BadRequestError);
      return (e as InstanceType<typeof OpenAI.BadRequestError>).param;
    };
    expect(await bad({ model: MODEL, input: 'x', dimensions: size - 1 })).toBe('dimensions');
    expect(await bad({ model: MODEL, input: '' })).toBe('input');
    expect(await bad({ model: MODEL, input: [] })).toBe('input');
    expect(await bad({ model: MODEL, input: [{ text: 'x' }] })).toBe('input');
    expect(await bad({ model: MODEL, input: [[1, 10_000_000]] })).toBe('input');
    expect(await bad({ model: MODEL, input: 'x', encoding_format: 'int8' })).toBe('encoding_format');
    await waitUntil('idle', async () => (await kvPages(server.url)).allocated === 0);
  });
});
