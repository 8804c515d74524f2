// The PD roles wired together in one process, over real TCP on loopback but with the worker
// module's fake engine (the next token after t is t + 1, so outputs are known by hand, and
// every page is checked before it is read and stamped after it is written): PrefillWorker,
// DecodeWorker, each with the HTTP front end for its /health, and PdRouter in front of them.
// What only this level shows: the router's stop strings end a request as finished while the
// rest is aborted through the protocol; a request that a decode node had to preempt fails with
// an honest error instead of being recomputed from placeholders; a client that leaves while its
// prompt is being computed returns every page on both nodes.
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  asRequestId,
  DEFAULT_TENANT,
  FaultSet,
  NO_FAULTS,
  samplingParams,
  type GenerateEvent,
  type SamplingParams,
} from '../../src/core/index.js';
import { PdRouter } from '../../src/router/index.js';
import { DecodeWorker, PrefillWorker } from '../../src/worker/index.js';
import { fakePool, FakeRunner, tok } from '../../src/worker/testing/fake-engine.js';
import { fakeCluster } from './support.js';

const SECRET = 'in-process-cluster-secret-0123456789';

interface Cluster {
  readonly router: PdRouter;
  readonly prefill: PrefillWorker;
  readonly decode: DecodeWorker;
  readonly prefillRunner: FakeRunner;
  readonly decodeRunner: FakeRunner;
  close(): Promise<void>;
}

let open: Cluster[] = [];
afterEach(async () => {
  await Promise.all(open.map((c) => c.close()));
  open = [];
});

async function cluster(o: {
  decodePages: number;
  prefillPages?: number;
  decodeModel?: string;
  faults?: FaultSet;
}): Promise<Cluster> {
  const faults = o.faults ?? NO_FAULTS;
  const pPool = fakePool(o.prefillPages ?? 32);
  const dPool = fakePool(o.decodePages);
  const prefillRunner = new FakeRunner(pPool);
  const decodeRunner = new FakeRunner(dPool);
  const c: Cluster = {
    ...(await fakeCluster({
      secret: SECRET,
      prefill: { pool: pPool, runner: prefillRunner, faults },
      decode: {
        pool: dPool,
        runner: decodeRunner,
        faults,
        ...(o.decodeModel === undefined ? {} : { modelFingerprint: o.decodeModel }),
      },
      faults,
    })),
    prefillRunner,
    decodeRunner,
  };
  open.push(c);
  return c;
}

let nextId = 0;
const request = (prompt: string, sampling: Partial<SamplingParams>) => ({
  rid: asRequestId(`q${nextId++}`),
  tenant: DEFAULT_TENANT,
  promptTokens: [...prompt].map(tok),
  sampling: samplingParams(sampling),
});

async function collect(events: AsyncIterable<GenerateEvent>): Promise<GenerateEvent[]> {
  const all: GenerateEvent[] = [];
  for await (const e of events) all.push(e);
  return all;
}
const textOf = (events: readonly GenerateEvent[]) => events.map((e) => (e.type === 'tokens' ? e.text : '')).join('');

async function idle(c: Cluster): Promise<void> {
  for (let i = 0; i < 400 && !(c.prefill.isIdle && c.decode.isIdle && c.router.machine.numActive === 0); i++)
    await new Promise((r) => setTimeout(r, 5));
  expect([c.prefill.isIdle, c.decode.isIdle, c.router.machine.numActive]).toEqual([true, true, 0]);
  expect(c.decode.pool.ledger.counts()).toMatchObject({ allocated: 0, quarantined: 0 });
  expect(c.prefill.pool.ledger.counts()).toMatchObject({ allocated: 0, quarantined: 0 });
}

describe('prefill worker -> decode worker -> router, in one process', () => {
  it('generates what the model says, the first token from prefill and the rest from decode, with usage', async () => {
    const c = await cluster({ decodePages: 16 });
    const events = await collect(
      c.router.generate(request('abcdefghij', { maxTokens: 6 }), new AbortController().signal),
    );
    expect(textOf(events)).toBe('klmnop');
    expect(events.at(-1)).toEqual({
      type: 'finished',
      finishReason: 'length',
      usage: { promptTokens: 10, completionTokens: 6, cachedTokens: 0 },
    });
    expect(c.prefill.machine.stats()).toMatchObject({ chunksSent: 3, transfersAcked: 1 }); // pages of 4: [0,4) [4,8) [8,10)
    await idle(c);
  });

  it('refuses to pair a prefill and a decode that serve different models: an honest error, no page allocated, no byte sent', async () => {
    const c = await cluster({ decodePages: 16, decodeModel: 'd1ffd1ffd1ffd1ff' });
    const events = await collect(
      c.router.generate(request('abcdefghij', { maxTokens: 6 }), new AbortController().signal),
    );
    expect(events).toEqual([
      {
        type: 'failed',
        error: expect.objectContaining({ code: 'config_invalid', message: expect.stringMatching(/same model/) }),
      },
    ]);
    expect((await c.decode.health()).detail['modelFingerprint']).toBe('d1ffd1ffd1ffd1ff');
    expect(c.decode.machine.stats()).toMatchObject({ reserved: 0 });
    expect(c.prefill.machine.stats()).toMatchObject({ admitted: 0, chunksSent: 0 });
    await idle(c);
  });

  it('ends a request at a stop string as finished, and aborts the rest through the protocol', async () => {
    const c = await cluster({ decodePages: 16 });
    const events = await collect(
      c.router.generate(request('abc', { maxTokens: 20, stop: ['gh'] }), new AbortController().signal),
    );
    expect(textOf(events)).toBe('def');
    expect(events.at(-1)).toMatchObject({ type: 'finished', finishReason: 'stop' });
    await idle(c);
    expect(c.router.machine.stats().abortsByState).toEqual({ Streaming: 1 });
  });

  /**
   * 6 decode pages of 4: two prompts of 4 with 12 tokens of output need 4 pages each, so they
   * cannot both run to the end (they collide at their 9th token). How each ended (its last
   * event, with the error's code and whether tokens came first), and decode's preemptions.
   */
  async function twoThatDoNotFitTogether(faults: FaultSet): Promise<{ ends: string[]; preempted: unknown }> {
    const c = await cluster({ decodePages: 6, faults });
    const first = collect(c.router.generate(request('abcd', { maxTokens: 12 }), new AbortController().signal));
    const second = collect(c.router.generate(request('bcde', { maxTokens: 12 }), new AbortController().signal));
    const ends = (await Promise.all([first, second])).map((events) => {
      const last = events.at(-1);
      const tokens = events.some((e) => e.type === 'tokens') ? 'after tokens' : 'before any token';
      return last?.type === 'failed' ? `failed ${last.error.code} ${tokens}` : `${last?.type} ${textOf(events)}`;
    });
    const preempted = (await c.decode.health()).detail['preempted'];
    return { ends, preempted };
  }

  it('never starts a stream decode could not finish: the second request waits for room, then both finish, none preempted', async () => {
    // Before, decode reserved both prompts and then preempted one mid-stream (an `overloaded`
    // error after its first token). Now decode refuses the second Reserve, the router queues it,
    // and retries once the first has finished.
    expect(await twoThatDoNotFitTogether(NO_FAULTS)).toEqual({
      ends: ['finished efghijklmnop', 'finished fghijklmnopq'],
      preempted: 0,
    });
    const c = open[0] as Cluster;
    expect((await c.router.health()).detail['queue']).toMatchObject({ waiting: 0, waited: 1, timedOut: 0 });
    await idle(c);
  });

  it('negative control: with no-pd-wait-queue the request decode has no room for gets overloaded (a 503) at once', async () => {
    const { ends } = await twoThatDoNotFitTogether(new FaultSet(['no-pd-wait-queue']));
    expect(ends).toEqual(['finished efghijklmnop', 'failed overloaded before any token']);
  });

  it('negative control: with skip-output-reservation decode takes both, and one fails mid-stream', async () => {
    const { ends, preempted } = await twoThatDoNotFitTogether(new FaultSet(['skip-output-reservation']));
    expect(ends.filter((e) => e.startsWith('failed overloaded after tokens'))).toHaveLength(1);
    expect(preempted).toBe(1);
  });

  it('returns every page on both nodes when the client leaves while its prompt is being computed', async () => {
    const c = await cluster({ decodePages: 16 });
    let open: () => void = () => undefined;
    c.prefillRunner.gate = new Promise<void>((resolve) => (open = resolve));
    const controller = new AbortController();
    const events = collect(c.router.generate(request('abcdefghijklmnopqrst', { maxTokens: 4 }), controller.signal));
    for (let i = 0; i < 400 && c.prefill.scheduler.numRunning === 0; i++) await new Promise((r) => setTimeout(r, 5));
    controller.abort();
    c.prefillRunner.gate = undefined;
    open();
    expect(await events).toEqual([{ type: 'failed', error: expect.objectContaining({ code: 'aborted' }) }]);
    await idle(c);
    expect(c.router.machine.stats().abortsByState).toEqual({ Prefilling: 1 });
  });
  it("re-polls the prefill of a request when it ends, found by the machine's own attempt map (a client rid ending in .<n> too)", async () => {
    // The router asks the prefill for a fresh prefix-cache report once a request ends. It used to find
    // that prefill by stripping /\.\d+$/ off the attempt's rid, which lost a client rid like `t.7`.
    const c = await cluster({ decodePages: 16 });
    const prefill = c.router.registry.entries.find((e) => e.role === 'prefill')?.address;
    expect(prefill).toBeDefined();
    const recheck = vi.spyOn(c.router.registry, 'recheck');
    const events = await collect(
      c.router.generate(
        { ...request('abcdefghij', { maxTokens: 2 }), rid: asRequestId(`t${nextId++}.7`) },
        new AbortController().signal,
      ),
    );
    expect(events.at(-1)).toMatchObject({ type: 'finished' });
    expect(recheck).toHaveBeenCalledWith(prefill);
    await idle(c);
  });
});
