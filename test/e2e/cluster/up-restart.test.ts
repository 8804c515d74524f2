// `tessera up` restarts a worker process that dies: kill -9 of its prefill worker, and `up`
// says so (which worker, how it exited, the backoff), starts it again on the same ports (the
// router knows it by them), and says where; the router sees it up again and requests are served
// through it. Killed again at once, the next restart waits twice as long (backoff).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  greedyIds,
  health,
  isGone,
  promptIds,
  spawnTessera,
  useTestHome,
  waitUntil,
  type Proc,
} from '../pd/support.js';
import OpenAI from 'openai';

const home = useTestHome();
let cluster: Proc;
let routerUrl: string;

beforeAll(async () => {
  cluster = spawnTessera('up', ['up', '--port', '0', '--context-length', '256', '--kv-pages', '32'], home.dir);
  routerUrl = (await cluster.waitFor(/listening on (http:\/\/[\d.]+:\d+)/))[1] as string;
});
afterAll(async () => {
  await cluster?.stop();
});

const client = () => new OpenAI({ baseURL: `${routerUrl}/v1`, apiKey: 'none', maxRetries: 0, timeout: 60_000 });
const prefillPid = (text: string): number[] =>
  [...text.matchAll(/prefill-1 +http: \S+ +cluster: \S+ +pid (\d+)|prefill-1 restarted: pid (\d+)/g)].map((m) =>
    Number(m[1] ?? m[2]),
  );

describe('tessera up restarts a worker that dies', () => {
  it('kill -9 of the prefill: restarted with backoff on the same address, said so, and serving again', async () => {
    expect(await greedyIds(client(), promptIds(20, 3), 4)).toHaveLength(4);
    const first = prefillPid(cluster.stdout() + cluster.stderr())[0] as number;
    const url = ((await health(routerUrl)).body['workers'] as { role: string; url: string }[]).find(
      (w) => w.role === 'prefill',
    )?.url;
    process.kill(first, 'SIGKILL');
    await waitUntil('up to restart it', async () => /prefill-1 restarted: pid \d+/.test(cluster.stderr()), 30_000);
    expect(cluster.stderr()).toMatch(
      new RegExp(
        `prefill-1 \\(pid ${first}\\) exited \\(signal SIGKILL\\); restarting it in 500 ms \\(restart 1 in a row\\)`,
      ),
    );
    expect(isGone(first)).toBe(true);
    await waitUntil(
      'the router to see it up again',
      async () =>
        ((await health(routerUrl)).body['workers'] as { role: string; url: string; state: string }[]).some(
          (w) => w.role === 'prefill' && w.url === url && w.state === 'up',
        ),
      30_000,
    );
    expect(await greedyIds(client(), promptIds(20, 5), 4)).toHaveLength(4);

    const second = prefillPid(cluster.stderr()).at(-1) as number;
    expect(second).not.toBe(first);
    process.kill(second, 'SIGKILL');
    await waitUntil(
      'the second restart',
      async () => (cluster.stderr().match(/prefill-1 restarted/g) ?? []).length === 2,
      30_000,
    );
    expect(cluster.stderr()).toMatch(/restarting it in 1000 ms \(restart 2 in a row\)/);
    await waitUntil(
      'serving again',
      async () => (await greedyIds(client(), promptIds(10, 9), 2).catch(() => [])).length === 2,
      30_000,
    );
  });
});
