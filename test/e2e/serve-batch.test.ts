// The Batch API through the official openai client against real `tessera serve` processes with
// --batch-dir and two API keys: upload (client.files.create), per-line errors (bad lines go to
// the error file and the batch's `errors`, the good ones run), output download, cancellation,
// per-tenant visibility (the other key gets 404 for every id), and the crash test: a server is
// killed with SIGKILL mid-batch and restarted on the same directory; every line is answered
// exactly once (none lost, none twice), and the restarted server runs only the lines that had no
// recorded answer (counted by its own /metrics). Negative control: with the
// `batch-answers-in-memory` fault point the answers die with the process and the restarted
// server runs lines answered before the crash again.
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, useTestHome, writeJson, type Server } from './support/process.js';

const KEYS = { 'sk-alice': 'alice', 'sk-bob': 'bob' };
const home = useTestHome();
let keysFile: string;

beforeAll(async () => {
  keysFile = await writeJson(home.dir, 'keys.json', KEYS);
});

const line = (i: number, maxTokens = 4): string =>
  JSON.stringify({
    custom_id: `req-${i}`,
    method: 'POST',
    url: '/v1/chat/completions',
    body: { messages: [{ role: 'user', content: `Say ${i}.` }], max_tokens: maxTokens, temperature: 0 },
  });

async function upload(client: OpenAI, lines: readonly string[]): Promise<string> {
  const file = await client.files.create({
    file: await toFile(Buffer.from(`${lines.join('\n')}\n`), 'input.jsonl'),
    purpose: 'batch',
  });
  return file.id;
}

async function waitFor(
  client: OpenAI,
  id: string,
  done: (b: OpenAI.Batches.Batch) => boolean,
  timeoutMs = 20_000,
): Promise<OpenAI.Batches.Batch> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const b = await client.batches.retrieve(id);
    if (done(b)) return b;
    if (Date.now() > until) throw new Error(`batch ${id} still ${b.status}: ${JSON.stringify(b.request_counts)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const customIds = (text: string): string[] =>
  text
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => (JSON.parse(l) as { custom_id: string }).custom_id);

describe('the Batch API (serve --batch-dir, two keys)', () => {
  let server: Server;
  let alice: OpenAI;
  let bob: OpenAI;
  beforeAll(async () => {
    server = await startServer(['--api-keys', keysFile, '--batch-dir', join(home.dir, 'batch-a')], home.dir);
    alice = server.client('sk-alice');
    bob = server.client('sk-bob');
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('runs the good lines, answers the bad ones in the error file, and hides everything from the other tenant', async () => {
    const lines = [line(0), line(1), '{not json', line(2), line(1), line(3)];
    const fileId = await upload(alice, lines);
    const created = await alice.batches.create({
      input_file_id: fileId,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
      metadata: { job: 'e2e' },
    });
    expect(created.object).toBe('batch');
    const done = await waitFor(alice, created.id, (b) => b.status === 'completed');
    expect(done.request_counts).toEqual({ total: 6, completed: 4, failed: 2 });
    expect(done.errors?.data?.map((e) => [e.line, e.code])).toEqual([
      [3, 'invalid_json'],
      [5, 'duplicate_custom_id'],
    ]);
    const output = await (await alice.files.content(done.output_file_id!)).text();
    expect(customIds(output).sort()).toEqual(['req-0', 'req-1', 'req-2', 'req-3']);
    const first = JSON.parse(output.split('\n')[0]!) as { response: { status_code: number; body: { object: string } } };
    expect(first.response.status_code).toBe(200);
    expect(first.response.body.object).toBe('chat.completion');
    const errors = await (await alice.files.content(done.error_file_id!)).text();
    expect(errors.trim().split('\n')).toHaveLength(2);

    // Bob sees none of it: 404 for each id, empty lists.
    await expect(bob.files.retrieve(fileId)).rejects.toMatchObject({ status: 404 });
    await expect(bob.files.content(done.output_file_id!)).rejects.toMatchObject({ status: 404 });
    await expect(bob.files.delete(fileId)).rejects.toMatchObject({ status: 404 });
    await expect(bob.batches.retrieve(created.id)).rejects.toMatchObject({ status: 404 });
    await expect(bob.batches.cancel(created.id)).rejects.toMatchObject({ status: 404 });
    await expect(
      bob.batches.create({ input_file_id: fileId, endpoint: '/v1/chat/completions', completion_window: '24h' }),
    ).rejects.toMatchObject({ status: 404 });
    expect((await bob.batches.list()).data).toEqual([]);
    expect((await bob.files.list()).data).toEqual([]);
    expect((await alice.batches.list()).data.map((b) => b.id)).toContain(created.id);
    expect((await alice.files.list()).data.map((f) => f.id)).toContain(fileId);
    expect((await alice.files.retrieve(fileId)).purpose).toBe('batch');
  });

  it('cancels as OpenAI does: cancelling, then cancelled with the lines answered so far', async () => {
    const fileId = await upload(
      alice,
      Array.from({ length: 30 }, (_, i) => line(i, 24)),
    );
    const created = await alice.batches.create({
      input_file_id: fileId,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    });
    const cancelling = await alice.batches.cancel(created.id);
    expect(['cancelling', 'cancelled']).toContain(cancelling.status);
    const done = await waitFor(alice, created.id, (b) => b.status === 'cancelled');
    expect(done.cancelled_at).not.toBeNull();
    expect(done.request_counts!.completed).toBeLessThan(30);
  });

  it('/v1/completions batches; a line whose url is not the batch endpoint is answered in the error file', async () => {
    const completion = JSON.stringify({
      custom_id: 'c0',
      method: 'POST',
      url: '/v1/completions',
      body: { prompt: 'Once upon a time', max_tokens: 4, temperature: 0 },
    });
    const fileId = await upload(alice, [completion, line(9)]);
    const created = await alice.batches.create({
      input_file_id: fileId,
      endpoint: '/v1/completions',
      completion_window: '24h',
    });
    const done = await waitFor(alice, created.id, (b) => b.status === 'completed');
    expect(done.request_counts).toEqual({ total: 2, completed: 1, failed: 1 });
    const out = JSON.parse(await (await alice.files.content(done.output_file_id!)).text()) as {
      custom_id: string;
      response: { body: { object: string } };
    };
    expect([out.custom_id, out.response.body.object]).toEqual(['c0', 'text_completion']);
    const err = JSON.parse(await (await alice.files.content(done.error_file_id!)).text()) as {
      custom_id: string;
      error: { code: string };
    };
    expect([err.custom_id, err.error.code]).toEqual(['req-9', 'invalid_url']);
  });

  it('refuses a bad create with 400 and keeps serving', async () => {
    await expect(
      alice.batches.create({ input_file_id: 'file-nope', endpoint: '/v1/chat/completions', completion_window: '24h' }),
    ).rejects.toMatchObject({ status: 404 });
    await expect(
      alice.batches.create({
        input_file_id: 'x',
        endpoint: '/v1/embeddings' as '/v1/chat/completions',
        completion_window: '24h',
      }),
    ).rejects.toMatchObject({ status: 400 });
    expect((await alice.models.list()).data.length).toBe(1);
  });
});

/** Successful generate requests this server process answered (its own /metrics). */
async function served(server: Server): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  return Number(/^tessera_requests_total\{outcome="success"\} (\d+)/m.exec(text)?.[1] ?? 0);
}

/** Kill -9 mid-batch, restart on the same directory, wait for the batch: the counts. */
async function crashRun(dir: string, env: Record<string, string>) {
  const total = 24;
  const args = ['--batch-dir', dir];
  const first = await startServer(args, home.dir, env);
  const client = first.client();
  const fileId = await upload(
    client,
    Array.from({ length: total }, (_, i) => line(i, 12)),
  );
  const { id } = await client.batches.create({
    input_file_id: fileId,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  });
  const before = await waitFor(client, id, (b) => (b.request_counts?.completed ?? 0) >= 5);
  first.child.kill('SIGKILL');
  await first.exited;
  const second = await startServer(args, home.dir, env);
  try {
    const done = await waitFor(second.client(), id, (b) => b.status === 'completed', 25_000);
    const output = await (await second.client().files.content(done.output_file_id!)).text();
    const ids = customIds(output);
    return {
      total,
      answeredBeforeKill: before.request_counts!.completed,
      outputLines: ids.length,
      distinct: new Set(ids).size,
      runAfterRestart: await served(second),
      counts: done.request_counts,
    };
  } finally {
    await second.stop();
  }
}

describe('kill -9 mid-batch and a restart: every line answered exactly once', () => {
  it('no line lost, none twice, and the restart runs only the unanswered lines', async () => {
    const r = await crashRun(join(home.dir, 'batch-crash'), {});
    console.log(`batch crash test: ${JSON.stringify(r)}`);
    expect(r.outputLines).toBe(r.total);
    expect(r.distinct).toBe(r.total);
    expect(r.counts).toEqual({ total: r.total, completed: r.total, failed: 0 });
    expect(r.runAfterRestart).toBeLessThanOrEqual(r.total - r.answeredBeforeKill);
  });

  it('negative control: with batch-answers-in-memory the restart runs answered lines again', async () => {
    const r = await crashRun(join(home.dir, 'batch-crash-fault'), {
      TESSERA_ALLOW_FAULTS: '1',
      TESSERA_FAULT: 'batch-answers-in-memory',
    });
    console.log(`batch crash test (fault batch-answers-in-memory): ${JSON.stringify(r)}`);
    expect(r.runAfterRestart).toBe(r.total);
    expect(r.runAfterRestart).toBeGreaterThan(r.total - r.answeredBeforeKill);
  });
});
