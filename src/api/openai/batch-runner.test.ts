// The batch runner against the fake back end, through the openai client: expiry as OpenAI's
// (lines not run by expires_at answered `batch_expired` in the error file, status `expired`), and
// preemption: an interactive request aborts the running batch line, which runs again later and is
// answered exactly once.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { BatchStore } from '../../batch/index.js';
import { FakeBackend, wordScript } from '../testing/fake-backend.js';
import { startTestServer, type TestServer } from '../testing/harness.js';

const open: { t: TestServer; store: BatchStore; dir: string }[] = [];
afterEach(async () => {
  for (const o of open.splice(0)) {
    await o.t.close();
    o.store.close();
    rmSync(o.dir, { recursive: true, force: true });
  }
});

const LINES = [0, 1]
  .map((i) =>
    JSON.stringify({
      custom_id: `r${i}`,
      method: 'POST',
      url: '/v1/completions',
      body: { prompt: 'hi', max_tokens: 6 },
    }),
  )
  .join('\n');

async function setUp(options: { maxInteractive?: number; backend?: FakeBackend }) {
  const dir = mkdtempSync(join(tmpdir(), 'h4-runner-'));
  const store = new BatchStore(dir);
  let offset = 0;
  const clock = { nowMs: () => performance.now(), unixSeconds: () => 1_000_000 + offset };
  const t = await startTestServer({
    contextLength: 64,
    clock,
    batch: { store, runner: { pollMs: 5, ...(options.maxInteractive === undefined ? {} : options) } },
    ...(options.backend === undefined ? {} : { backend: options.backend }),
  });
  open.push({ t, store, dir });
  const client = new OpenAI({ baseURL: `${t.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  const file = await client.files.create({ file: await toFile(Buffer.from(LINES), 'in.jsonl'), purpose: 'batch' });
  const batch = await client.batches.create({
    input_file_id: file.id,
    endpoint: '/v1/completions',
    completion_window: '24h',
  });
  return { t, client, batch, advance: (s: number) => (offset += s) };
}

async function until(client: OpenAI, id: string, status: string): Promise<OpenAI.Batches.Batch> {
  for (let i = 0; i < 400; i++) {
    const b = await client.batches.retrieve(id);
    if (b.status === status) return b;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`batch ${id} never reached ${status}`);
}

describe('BatchRunner', () => {
  it('expires as OpenAI: lines not run by expires_at are answered batch_expired in the error file', async () => {
    // maxInteractive -1: the runner never finds a lull, so no line starts before the window ends.
    const { client, batch, advance } = await setUp({ maxInteractive: -1 });
    expect(batch.expires_at! - batch.created_at).toBe(24 * 3600);
    await new Promise((r) => setTimeout(r, 30));
    expect((await client.batches.retrieve(batch.id)).status).toBe('in_progress');
    advance(24 * 3600);
    const done = await until(client, batch.id, 'expired');
    expect(done.request_counts).toEqual({ total: 2, completed: 0, failed: 2 });
    expect(done.output_file_id).toBeNull();
    const errors = (await (await client.files.content(done.error_file_id!)).text()).trim().split('\n');
    expect(errors.map((l) => (JSON.parse(l) as { error: { code: string } }).error.code)).toEqual([
      'batch_expired',
      'batch_expired',
    ]);
  });

  it('an interactive request preempts the running batch line; it runs again and is answered once', async () => {
    const backend = new FakeBackend({ contextLength: 64 });
    const slow = wordScript();
    backend.script = async function* (request, signal) {
      for await (const event of slow(request, signal)) {
        await new Promise((r) => setTimeout(r, 15));
        yield event;
      }
    };
    const { client, batch } = await setUp({ backend });
    for (let i = 0; i < 100 && backend.calls.length === 0; i++) await new Promise((r) => setTimeout(r, 5));
    const first = backend.lastCall;
    await client.completions.create({ model: backend.modelName, prompt: 'interactive', max_tokens: 2 });
    expect(first.signal.aborted).toBe(true); // the batch line gave way
    const done = await until(client, batch.id, 'completed');
    expect(done.request_counts).toEqual({ total: 2, completed: 2, failed: 0 });
    const out = (await (await client.files.content(done.output_file_id!)).text()).trim().split('\n');
    expect(out.map((l) => (JSON.parse(l) as { custom_id: string }).custom_id)).toEqual(['r0', 'r1']);
    // Both lines, the preempted one twice, and the interactive request.
    expect(backend.calls.length).toBeGreaterThanOrEqual(4);
  });
});
