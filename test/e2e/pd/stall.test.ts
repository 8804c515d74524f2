// Issue 17, a stalled peer: with one of two prefill workers frozen (SIGSTOP) after requests were
// sent to it, those requests do not wait out the stall. Once the router's polls mark the worker
// down (3 timed-out polls of 2 s: about 6-9 s), it closes that worker's connection: requests
// before their first token retry on the other prefill, so every request finishes while the
// worker is still frozen (before: they waited for the whole stall, bounded only by 600 s).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  allIdle,
  detail,
  promptIds,
  startRouter,
  startWorker,
  useTestHome,
  type Router,
  type Worker,
} from './support.js';

const home = useTestHome();
let prefills: Worker[];
let decode: Worker;
let router: Router;

beforeAll(async () => {
  const args = ['--context-length', '512'];
  [prefills, decode] = await Promise.all([
    Promise.all([
      startWorker('prefill-a', 'prefill', args, home.dir),
      startWorker('prefill-b', 'prefill', args, home.dir),
    ]),
    startWorker('decode', 'decode', args, home.dir),
  ]);
  router = await startRouter('router', prefills, [decode], ['--context-length', '512'], home.dir);
});
afterAll(async () => {
  for (const w of prefills ?? []) w.signal('SIGCONT');
  await Promise.all([router?.stop(), decode?.stop(), ...(prefills ?? []).map((w) => w.stop())]);
});

describe('a stalled prefill worker', () => {
  it('does not hold the requests sent to it: they retry on the other prefill and all finish while it is frozen', async () => {
    const [frozen, alive] = prefills as [Worker, Worker];
    const client = router.client();
    // Warm up: the router holds an authenticated connection to each prefill (a frozen worker's
    // handshake would otherwise time out after 5 s, which already made the router retry).
    const warm = (i: number) =>
      client.completions.create({
        model: 'builtin:tiny',
        prompt: promptIds(40, 50 + i),
        max_tokens: 2,
        temperature: 0,
      });
    await Promise.all(Array.from({ length: 8 }, (_, i) => warm(i)));
    expect((await detail(frozen)).transfer).toBeDefined();
    await allIdle([...prefills, decode]);
    frozen.signal('SIGSTOP');
    const started = Date.now();
    // Sent before the router notices: least-loaded pairing gives the frozen worker its share.
    const requests = Array.from({ length: 8 }, (_, i) =>
      client.completions
        .create({ model: 'builtin:tiny', prompt: promptIds(40, 500 + i), max_tokens: 6, temperature: 0 })
        .then(
          (r) => r.choices[0]?.finish_reason,
          (e: unknown) => String(e),
        ),
    );
    const outcomes = await Promise.race([
      Promise.all(requests),
      new Promise<string>((resolve) => setTimeout(() => resolve('still waiting after 25 s'), 25_000)),
    ]);
    const seconds = (Date.now() - started) / 1000;
    expect(outcomes).toEqual(new Array(8).fill('length'));
    process.stdout.write(`stalled prefill: 8 requests done in ${seconds.toFixed(1)} s with it frozen\n`);
    frozen.signal('SIGCONT');
    await allIdle([alive, decode]);
  });
});
