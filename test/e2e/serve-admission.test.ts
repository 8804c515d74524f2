// Admission at the boundaries, against real processes: prompt + max_tokens at L-1, L and L+1
// for the context length and for the pool, with the ledger (tessera_kv_pages) unchanged by a
// refused request; the start-up check that refuses a node whose pool cannot hold its context
// (and its negative control, `skip-startup-check`); `tessera plan`; refusals of bad settings.
import { createServer, type AddressInfo } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  kvPages,
  promptIds,
  runCli,
  startServer,
  useTestHome,
  waitUntil,
  writeJson,
  type Server,
} from './support/process.js';

const home = useTestHome();
beforeAll(async () => {});

const MODEL = 'builtin:tiny';

/** Sends prompt + max_tokens = total (a 10-token prompt); the outcome and the ledger before and after. */
async function boundary(server: Server, total: number) {
  await waitUntil('idle', async () => (await kvPages(server.url)).allocated === 0);
  const before = await kvPages(server.url);
  const outcome = await server
    .client()
    .completions.create({
      model: MODEL,
      prompt: promptIds(10, 5000 + total),
      max_tokens: total - 10,
      temperature: 0,
      ignore_eos: true,
    } as never)
    .then((r) => ({ status: 200, usage: (r as OpenAI.Completion).usage, error: undefined }))
    .catch((error: unknown) => {
      if (!(error instanceof OpenAI.APIError)) throw error;
      return { status: error.status, usage: undefined, error };
    });
  const after = await kvPages(server.url);
  return { outcome, before, after };
}

describe('admission at the context length (L = 64)', () => {
  let server: Server;
  beforeAll(async () => {
    server = await startServer(['--context-length', '64', '--kv-pages', '8'], home.dir);
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('serves L-1 and L tokens in full', async () => {
    for (const total of [63, 64]) {
      const { outcome } = await boundary(server, total);
      expect(outcome.status).toBe(200);
      expect(outcome.usage).toMatchObject({ prompt_tokens: 10, completion_tokens: total - 10 });
    }
  });

  it('refuses L+1 with 400 context_length_exceeded and allocates nothing', async () => {
    const { outcome, before, after } = await boundary(server, 65);
    expect(outcome.status).toBe(400);
    expect(outcome.error).toMatchObject({
      code: 'context_length_exceeded',
      type: 'invalid_request_error',
      param: 'max_tokens',
    });
    expect(outcome.error?.message).toMatch(/maximum context length is 64 tokens.*you requested 65 tokens/);
    expect(after).toEqual(before);
    expect(after.allocated).toBe(0);
  });
});

describe('admission at the pool (64 tokens) on a node whose context (256) exceeds it', () => {
  // Only reachable with the start-up check skipped: the second line of defence on its own.
  let server: Server;
  beforeAll(async () => {
    server = await startServer(['--context-length', '256', '--kv-pages', '4'], home.dir, {
      TESSERA_ALLOW_FAULTS: '1',
      TESSERA_FAULT: 'skip-startup-check',
    });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('says at start-up that the check was skipped', () => {
    expect(server.stderr()).toMatch(/FAULT POINTS ARMED.*skip-startup-check/);
    expect(server.stderr()).toMatch(
      /start-up check skipped.*context length 256 tokens does not fit the KV pool: 64 tokens/,
    );
  });

  it('serves L-1 and L tokens of pool in full', async () => {
    for (const total of [63, 64]) {
      const { outcome } = await boundary(server, total);
      expect(outcome.status).toBe(200);
      expect(outcome.usage?.completion_tokens).toBe(total - 10);
    }
  });

  it('refuses L+1 with 400 pool_too_small before allocating a page', async () => {
    const { outcome, before, after } = await boundary(server, 65);
    expect(outcome.status).toBe(400);
    expect(outcome.error).toMatchObject({ code: 'pool_too_small', type: 'invalid_request_error' });
    expect(outcome.error?.message).toMatch(
      /KV pool holds 64 tokens \(4 pages of 16\), but this request needs 65 tokens/,
    );
    expect(after).toEqual(before);
  });
});

const tooSmall = ['--context-length', '4096', '--kv-pages', '128'];
const message =
  'context length 4096 tokens does not fit the KV pool: 2048 tokens (128 pages of 16). Raise --kv-pages to at least 256 or lower --context-length to at most 2048.';

describe('the start-up check', () => {
  it('refuses to start a node whose pool cannot hold its context length: exit 2, one message with both numbers and the fix', async () => {
    const exited = await runCli(['serve', '--port', '0', ...tooSmall], home.dir);
    expect(exited.code).toBe(2);
    expect(exited.stderr.trim()).toBe(`tessera: ${message}`);
    expect(exited.stdout).not.toMatch(/listening/);
  });

  it("refuses the model's own context length on a pool sized by memory, naming --kv-memory", async () => {
    const exited = await runCli(['serve', '--port', '0', '--kv-memory', '4MiB'], home.dir);
    expect(exited.code).toBe(2);
    expect(exited.stderr).toMatch(
      /context length 4096 tokens does not fit the KV pool: 2048 tokens \(128 pages of 16\)\. Raise --kv-memory to at least 8MiB/,
    );
  });

  it('negative control: with skip-startup-check the same node starts and listens', async () => {
    const server = await startServer(tooSmall, home.dir, {
      TESSERA_ALLOW_FAULTS: '1',
      TESSERA_FAULT: 'skip-startup-check',
    });
    const stopped = await server.stop();
    expect(stopped, JSON.stringify(stopped)).toMatchObject({ code: 0 }); // not 2: the check is what refused above
  });
});

describe('tessera plan', () => {
  it('prints the arithmetic and exits 0 when the context fits', async () => {
    const r = await runCli(['plan', '--model', MODEL, '--kv-memory', '64MiB', '--context-length', '2048'], home.dir);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/KV per token per layer\s+512 B = 2 \(K and V\) x 2 heads x 32 x 4 B/);
    expect(r.stdout).toMatch(/KV per token\s+2,048 B \(2 KiB\) = 512 B x 4 layers/);
    expect(r.stdout).toMatch(/KV per page\s+32,768 B \(32 KiB\) = 2,048 B x 16 tokens/);
    expect(r.stdout).toMatch(/pool\s+2,048 pages = 32,768 tokens = 67,108,864 B \(64 MiB\)/);
    expect(r.stdout).toMatch(/context length\s+2,048 tokens \(--context-length\) = 128 pages/);
    expect(r.stdout).toMatch(/fits\s+yes: the pool holds 16 requests of the full context length/);
  });

  it('speaks in the KV dtype: --kv-dtype f16 halves the bytes per token and doubles the pool in the same memory', async () => {
    const flags = ['--kv-memory', '64MiB', '--context-length', '2048'];
    const r = await runCli(['plan', '--model', MODEL, ...flags, '--kv-dtype', 'f16'], home.dir);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/KV stored as f16 \(2 B\)/);
    expect(r.stdout).toMatch(/KV per token per layer\s+256 B = 2 \(K and V\) x 2 heads x 32 x 2 B/);
    expect(r.stdout).toMatch(/KV per token\s+1,024 B \(1 KiB\) = 256 B x 4 layers/);
    expect(r.stdout).toMatch(/pool\s+4,096 pages = 65,536 tokens = 67,108,864 B \(64 MiB\)/);
    const bad = await runCli(['plan', '--model', MODEL, ...flags, '--kv-dtype', 'q4'], home.dir);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--kv-dtype must be one of f32, f16, q8_0, got 'q4'/);
  });

  it("exits 2 with the start-up check's message when it does not fit", async () => {
    const r = await runCli(['plan', '--model', MODEL, ...tooSmall], home.dir);
    expect(r.code).toBe(2);
    expect(r.stdout).toMatch(/fits\s+NO: the context needs 256 pages, the pool has 128/);
    expect(r.stderr.trim()).toBe(`tessera: ${message}`);
  });
});

describe('bad settings refuse to start (exit 2)', () => {
  it('TESSERA_FAULT without TESSERA_ALLOW_FAULTS, an unknown fault point, a bad --api-keys file', async () => {
    const unarmed = await runCli(['serve', '--port', '0'], home.dir, { TESSERA_FAULT: 'skip-startup-check' });
    expect(unarmed.code).toBe(2);
    expect(unarmed.stderr).toMatch(/not armed.*TESSERA_ALLOW_FAULTS=1/);
    const unknown = await runCli(['serve', '--port', '0'], home.dir, {
      TESSERA_ALLOW_FAULTS: '1',
      TESSERA_FAULT: 'no-such-fault',
    });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/unknown fault point "no-such-fault"/);
    const keys = await writeJson(home.dir, 'bad-keys.json', ['not', 'an', 'object']);
    const badKeys = await runCli(['serve', '--port', '0', '--api-keys', keys], home.dir);
    expect(badKeys.code).toBe(2);
    expect(badKeys.stderr).toMatch(/--api-keys .*bad-keys.json: not a JSON object/);
  });

  it('a taken port: exit 2 naming the address, and the process ends (the engine and tokenizer threads do not hold it)', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const { port } = taken.address() as AddressInfo;
    try {
      const exited = await runCli(['serve', '--port', String(port)], home.dir);
      expect(exited.code).toBe(2);
      expect(exited.stderr).toMatch(
        new RegExp(`cannot listen on 127\\.0\\.0\\.1:${port}: the address is already in use`),
      );
      expect(exited.stdout).not.toMatch(/listening/);
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });
});
