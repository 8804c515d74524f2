// Client disconnects in every phase, and kill -9 of workers, on a cluster of two prefill and
// two decode workers behind one router (real processes, --deterministic, traced).
// A phase is held still by freezing a process (SIGSTOP) so the client can leave exactly there:
//   reserving     decodes frozen: the router waits for Reserved
//   prefilling    prefills frozen: decode has reserved and waits for frames; the router's Abort
//                 quarantines decode's pages until the prefill acknowledges (deferred release)
//   transferring  frozen after decode has written some frames of a 1,500-token prompt
//   streaming     the client leaves after three chunks
// Then kill -9 of a prefill mid-transfer (the router retries on the other: same tokens), of a
// decode mid-stream (the client gets an error, never a clean end). After each, every page on
// every surviving node is free or cached once idle, and the survivors serve the next request.
// The merged traces of all processes conform to the protocol model.
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  allIdle,
  conformance,
  detail,
  greedyIds,
  health,
  kvPages,
  promptIds,
  readTraces,
  routerSeesUp,
  scrape,
  startRouter,
  startWorker,
  useTestHome,
  waitUntil,
  type Router,
  type Worker,
} from './support.js';
import { writeJson } from '../support/process.js';

const home = useTestHome();
let traceDir: string;
const procs: { stop(): Promise<unknown> }[] = [];
let prefills: Worker[];
let decodes: Worker[];
let router: Router;
let reference: number[];

const ARGS = ['--context-length', '2048', '--kv-pages', '160', '--chunked-prefill-size', '32', '--deterministic'];
// Prompts never computed before the test that uses them: a prefix-cache hit would make the transfer instant.
const LONG = promptIds(1500, 4242);
const LONG_2 = promptIds(1500, 8484);
// The kill -9 test's request runs as tenant b: no cache hit on the pages of tenant a's reference.
const KEYS = { 'sk-a': 'a', 'sk-b': 'b' };

beforeAll(async () => {
  traceDir = await mkdtemp(join(home.dir, 'trace-'));
  // A writer that never connected to a decode cannot be told to stop: decode waits abortAckMs x (1 + abortRetries) before it declares it dead.
  const env = {
    TESSERA_TRACE_DIR: traceDir,
    TESSERA_CHECK_EVERY_STEP: '1',
    TESSERA_PD_TIMEOUTS: 'abortAckMs=1500,abortRetries=1',
  };
  const workers = await Promise.all([
    startWorker('p1', 'prefill', ARGS, home.dir, env),
    startWorker('p2', 'prefill', ARGS, home.dir, env),
    startWorker('d1', 'decode', ARGS, home.dir, env),
    startWorker('d2', 'decode', ARGS, home.dir, env),
  ]);
  procs.push(...workers);
  prefills = workers.slice(0, 2);
  decodes = workers.slice(2);
  router = await startRouter(
    'router',
    prefills,
    decodes,
    ['--context-length', '2048', '--api-keys', await writeJson(home.dir, 'keys.json', KEYS)],
    home.dir,
    env,
  );
  procs.push(router);
  reference = await greedyIds(router.client('sk-a'), LONG, 8);
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
});

const alive = (ws: Worker[]) => ws.filter((w) => w.child.exitCode === null && w.child.signalCode === null);
const attempts = async (): Promise<Record<string, number>> =>
  ((await health(router.url)).body['requests'] as { attempts: Record<string, number> }).attempts;
const aborts = async (phase: string): Promise<number> =>
  (await scrape(router.url)).get(`tessera_aborts_total{phase="${phase}"}`) ?? 0;

/** Starts a streamed request that the test aborts; resolves how it ended. */
function leavingClient(prompt: readonly number[], maxTokens: number, onChunk?: (n: number, abort: () => void) => void) {
  const controller = new AbortController();
  const done = (async () => {
    let n = 0;
    const stream = (await router
      .client('sk-a')
      .completions.create(
        { model: 'builtin:tiny', prompt: [...prompt], max_tokens: maxTokens, ignore_eos: true, stream: true } as never,
        { signal: controller.signal },
      )) as unknown as AsyncIterable<unknown>;
    for await (const _ of stream) onChunk?.(++n, () => controller.abort());
    return controller.signal.aborted ? 'aborted' : 'finished';
  })().catch((e: unknown) => (e instanceof OpenAI.APIUserAbortError || controller.signal.aborted ? 'aborted' : e));
  return { abort: () => controller.abort(), done };
}

async function settled(): Promise<void> {
  await waitUntil('the router to be idle', async () => (await health(router.url)).body['idle'] === true);
  await allIdle([...alive(prefills), ...alive(decodes)]);
  await routerSeesUp(router, [...alive(prefills), ...alive(decodes)]);
}

describe('client disconnects in every phase', () => {
  it('while reserving (decodes frozen): an acknowledged abort, every page back', async () => {
    const before = await aborts('reserving');
    decodes.forEach((d) => d.signal('SIGSTOP'));
    const client = leavingClient(promptIds(50, 1), 20);
    await waitUntil('the router to be reserving', async () => (await attempts())['Reserving'] === 1);
    client.abort();
    expect(await client.done).toBe('aborted');
    await waitUntil('the router to be cancelling', async () => (await attempts())['Cancelling'] === 1);
    decodes.forEach((d) => d.signal('SIGCONT'));
    await settled();
    expect(await aborts('reserving')).toBe(before + 1);
  });

  it('while prefilling (prefills frozen): decode quarantines its pages until the prefill acknowledges', async () => {
    const before = await aborts('prefilling');
    const dead = async () =>
      (await Promise.all(decodes.map(async (d) => (await detail(d)).transfer['writersDeclaredDead'] as number))).reduce(
        (a, b) => a + b,
        0,
      );
    const deadBefore = await dead();
    prefills.forEach((p) => p.signal('SIGSTOP'));
    const client = leavingClient(promptIds(300, 2), 20);
    await waitUntil('the router to be prefilling', async () => (await attempts())['Prefilling'] === 1);
    client.abort();
    expect(await client.done).toBe('aborted');
    // The writer has not acknowledged: its pages wait, quarantined, on one decode.
    await waitUntil('decode to quarantine the reservation', async () => {
      const q = await Promise.all(decodes.map(async (d) => (await kvPages(d.url)).quarantined));
      return q.some((n) => n === 19); // pagesFor(300, 16)
    });
    prefills.forEach((p) => p.signal('SIGCONT'));
    await settled();
    expect(await aborts('prefilling')).toBe(before + 1);
    expect(await dead()).toBe(deadBefore); // released by the writer's AbortAck, not by declaring it dead
  });

  it('mid-transfer (some frames written): the transfer is aborted, never cut, every page back', async () => {
    const base = await Promise.all(decodes.map(async (d) => (await detail(d)).transfer['framesWritten'] as number));
    const client = leavingClient(LONG_2, 20);
    await waitUntil(
      'the first frames to land',
      async () =>
        (
          await Promise.all(
            decodes.map(async (d, i) => ((await detail(d)).transfer['framesWritten'] as number) > (base[i] as number)),
          )
        ).some(Boolean),
      30_000,
    );
    prefills.forEach((p) => p.signal('SIGSTOP'));
    const receiving = await Promise.all(decodes.map(async (d) => (await detail(d))['receiving'] as number));
    expect(receiving.reduce((a, b) => a + b, 0)).toBe(1);
    client.abort();
    expect(await client.done).toBe('aborted');
    prefills.forEach((p) => p.signal('SIGCONT'));
    await settled();
  });

  it('while streaming: decode stops at once, every page back', async () => {
    const before = await aborts('streaming');
    const client = leavingClient(promptIds(30, 3), 500, (n, abort) => n === 3 && abort());
    expect(await client.done).toBe('aborted');
    await settled();
    expect(await aborts('streaming')).toBe(before + 1);
  });
});

describe('kill -9', () => {
  it('of a prefill mid-transfer: the router retries on the other prefill, and the client gets the same tokens', async () => {
    const base = await Promise.all(decodes.map(async (d) => (await detail(d)).transfer['framesWritten'] as number));
    const answer = greedyIds(router.client('sk-b'), LONG, 8);
    await waitUntil(
      'the first frames to land',
      async () =>
        (
          await Promise.all(
            decodes.map(async (d, i) => ((await detail(d)).transfer['framesWritten'] as number) > (base[i] as number)),
          )
        ).some(Boolean),
      30_000,
    );
    prefills.forEach((p) => p.signal('SIGSTOP')); // hold the transfer half done
    const receiving = await Promise.all(decodes.map(async (d) => (await detail(d))['receiving'] as number));
    expect(receiving.reduce((a, b) => a + b, 0)).toBe(1);
    const workers = (await health(router.url)).body['workers'] as { url: string; inFlight: number }[];
    const victim = prefills.find((p) => workers.find((w) => w.url === p.url)?.inFlight === 1) as Worker;
    victim.signal('SIGKILL');
    prefills.filter((p) => p !== victim).forEach((p) => p.signal('SIGCONT'));
    await victim.exited;
    expect(await answer).toEqual(reference);
    expect(((await health(router.url)).body['stats'] as { retries: number }).retries).toBeGreaterThanOrEqual(1);
    await settled();
  });

  it('of a decode mid-stream: the client gets an error, not a clean end; the survivors serve the next request', async () => {
    let victim: Worker | undefined;
    const client = leavingClient(promptIds(20, 4), 1000, (n) => {
      if (n !== 3 || victim !== undefined) return;
      void (async () => {
        const running = await Promise.all(decodes.map(async (d) => ((await detail(d))['running'] as number) > 0));
        victim = decodes[running.indexOf(true)];
        victim?.signal('SIGKILL');
      })();
    });
    const outcome = await client.done;
    expect(victim).toBeDefined();
    await victim?.exited; // before asking who is still alive
    expect(outcome).not.toBe('finished');
    expect(outcome).not.toBe('aborted');
    await settled();
    const next = await greedyIds(router.client('sk-a'), promptIds(64, 5), 16);
    expect(next).toHaveLength(16);
    await settled();
    const survivors = [...alive(prefills), ...alive(decodes)];
    expect(survivors).toHaveLength(2);
    for (const w of survivors) {
      const pages = await kvPages(w.url);
      expect(pages.allocated + pages.quarantined).toBe(0);
      expect(pages.free + pages.cached).toBe(160);
    }
  });

  it('the merged traces of every process conform to the protocol model', async () => {
    const traces = await readTraces(traceDir);
    const verdict = conformance(traces, undefined, false);
    expect(verdict).toEqual(expect.objectContaining({ ok: true }));
    expect(verdict.numEvents).toBeGreaterThan(500);
  });
});
