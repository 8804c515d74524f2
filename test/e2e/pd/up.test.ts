// `tessera up`: a whole cluster from one command. PD is transparent: with --deterministic on
// every node, the token ids of greedy requests through `tessera up` (router -> prefill -> KV
// transfer -> decode) equal those of co-located `tessera serve`, for prompts of one page, of
// several pages, and longer than one prefill chunk (the transfer then streams while the prompt
// is still being computed). Then: where it listens, /health and /metrics, SIGTERM stops every
// process, and a killed `up` leaves no orphans.
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type Server } from '../support/process.js';
import {
  greedyIds,
  health,
  isGone,
  promptIds,
  scrape,
  spawnTessera,
  useTestHome,
  waitUntil,
  type Proc,
} from './support.js';

const home = useTestHome();
let cluster: Proc;
let colocated: Server;
let routerUrl: string;
const POOL = ['--context-length', '512', '--kv-pages', '96', '--chunked-prefill-size', '64', '--deterministic'];

beforeAll(async () => {
  cluster = spawnTessera('up', ['up', '--port', '0', ...POOL], home.dir);
  [colocated, routerUrl] = await Promise.all([
    startServer(POOL, home.dir),
    cluster.waitFor(/listening on (http:\/\/[\d.]+:\d+)/).then((m) => m[1] as string),
  ]);
});
afterAll(async () => {
  await Promise.all([cluster?.stop(), colocated?.stop()]);
});

const client = (url: string) => new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120_000 });

describe('tessera up', () => {
  it('is transparent: greedy token ids through the cluster equal co-located serving, bit for bit', async () => {
    const pd = client(routerUrl);
    const co = colocated.client();
    for (const [length, first] of [
      [5, 100],
      [40, 2000],
      [150, 4000],
    ] as const) {
      const prompt = promptIds(length, first);
      const [viaPd, viaColocated] = [await greedyIds(pd, prompt, 24), await greedyIds(co, prompt, 24)];
      expect(viaPd).toHaveLength(24);
      expect(viaPd).toEqual(viaColocated);
    }
    // A chat request (templated and tokenized by the router) and a streamed one say the same.
    const messages = [{ role: 'user' as const, content: 'Tell me about pages.' }];
    const chat = async (c: OpenAI) =>
      (await c.chat.completions.create({ model: 'builtin:tiny', messages, max_tokens: 16, temperature: 0 })).choices[0]
        ?.message.content;
    expect(await chat(pd)).toBe(await chat(co));
    let streamed = '';
    const body = {
      model: 'builtin:tiny',
      prompt: promptIds(70, 9000),
      max_tokens: 20,
      temperature: 0,
      ignore_eos: true,
    };
    for await (const chunk of (await pd.completions.create({
      ...body,
      stream: true,
    } as never)) as unknown as AsyncIterable<OpenAI.Completion>) {
      streamed += chunk.choices[0]?.text ?? '';
    }
    const whole = await co.completions.create(body as never);
    expect(streamed).toBe(whole.choices[0]?.text);
  });

  it('prints where everything listens; /health reports its workers and /metrics the transfer', async () => {
    const out = cluster.stdout();
    expect(out).toMatch(/prefill-1 +http: http:\/\/127\.0\.0\.1:\d+ +cluster: 127\.0\.0\.1:\d+ +pid \d+/);
    expect(out).toMatch(/decode-1 +http: http:\/\/127\.0\.0\.1:\d+ +cluster: 127\.0\.0\.1:\d+ +pid \d+/);
    expect(out).toMatch(/router +http: http:\/\/127\.0\.0\.1:\d+ +pid \d+/);
    const h = await health(routerUrl);
    expect(h.status).toBe(200);
    expect(h.body['workers']).toEqual([
      expect.objectContaining({ role: 'prefill', state: 'up', address: expect.stringMatching(/^127\.0\.0\.1:\d+$/) }),
      expect.objectContaining({ role: 'decode', state: 'up', address: expect.stringMatching(/^127\.0\.0\.1:\d+$/) }),
    ]);
    const metrics = await scrape(routerUrl);
    // 5 + 40 + 150 + 70 prompt tokens, plus the chat prompt, moved at 2 KiB per token (4 layers x 2 x 2 heads x 32 x f32).
    expect(metrics.get('tessera_kv_transfer_bytes_total')).toBeGreaterThanOrEqual((5 + 40 + 150 + 70) * 2048);
    expect(metrics.get('tessera_kv_transfer_checksum_failures_total')).toBe(0);
    expect(metrics.get('tessera_kv_transfer_seconds_count')).toBeGreaterThanOrEqual(5);
    expect(metrics.get('tessera_requests_total{outcome="success"}')).toBeGreaterThanOrEqual(5);
    expect(metrics.get('tessera_kv_pages{state="allocated"}')).toBe(0);
  });

  it('stops every process on SIGTERM', async () => {
    const pids = [...cluster.stdout().matchAll(/pid (\d+)/g)].map((m) => Number(m[1]));
    expect(pids).toHaveLength(3);
    const exit = await cluster.stop();
    expect(exit.code).toBe(0);
    await waitUntil('every child to exit', async () => pids.every(isGone), 20_000);
    expect(cluster.stderr()).toMatch(/tessera up: stopped/);
  });

  it('leaves no orphans when it is killed with -9: its children notice and stop', async () => {
    const second = spawnTessera('up-2', ['up', '--port', '0', '--context-length', '256', '--kv-pages', '32'], home.dir);
    await second.waitFor(/listening on/);
    const pids = [...second.stdout().matchAll(/pid (\d+)/g)].map((m) => Number(m[1]));
    expect(pids).toHaveLength(3);
    second.signal('SIGKILL');
    await second.exited;
    await waitUntil('the orphaned children to stop', async () => pids.every(isGone), 20_000);
  });
});
