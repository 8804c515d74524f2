// The co-located worker over a fake runner whose outputs are known by hand ("a" -> "bcd..."):
// events and text, stop strings, admission before allocation, aborts in every phase, a reader
// that leaves, integrity after every step, and a runner bug.
import { afterEach, describe, expect, it } from 'vitest';
import {
  asRequestId,
  DEFAULT_TENANT,
  isAbortedError,
  isAdmissionError,
  isInvariantError,
  NO_FAULTS,
  samplingParams,
  type GenerateEvent,
  type SamplingParams,
} from '../core/index.js';
import { ColocatedWorker } from './colocated.js';
import { argmaxSampler, EOS, fakePool, FakeRunner, fakeTokenizer, tok } from './testing/fake-engine.js';

let workers: ColocatedWorker[] = [];
afterEach(async () => {
  await Promise.all(workers.map((w) => w.close()));
  workers = [];
});

function setup(
  o: { numPages?: number; contextLength?: number; checkEveryStep?: boolean; onFatal?: (e: unknown) => void } = {},
) {
  const pool = fakePool(o.numPages ?? 16);
  const runner = new FakeRunner(pool);
  const worker = new ColocatedWorker({
    modelName: 'fake',
    root: 'fake',
    contextLength: o.contextLength ?? 40,
    pool,
    runner,
    sampler: argmaxSampler,
    tokenizer: fakeTokenizer,
    eosTokenIds: [EOS],
    maxRunningRequests: 4,
    chunkedPrefillSize: 8,
    maxWaiting: 16,
    faults: NO_FAULTS,
    checkEveryStep: o.checkEveryStep ?? true,
    ...(o.onFatal ? { onFatal: o.onFatal } : {}),
  });
  workers.push(worker);
  return { pool, runner, worker };
}

let nextId = 0;
function request(prompt: string, sampling: Partial<SamplingParams>) {
  return {
    rid: asRequestId(`r${nextId++}`),
    tenant: DEFAULT_TENANT,
    promptTokens: [...prompt].map(tok),
    sampling: samplingParams(sampling),
  };
}

async function collect(iterable: AsyncIterable<GenerateEvent>): Promise<GenerateEvent[]> {
  const events: GenerateEvent[] = [];
  for await (const event of iterable) events.push(event);
  return events;
}

const textOf = (events: readonly GenerateEvent[]) => events.map((e) => (e.type === 'tokens' ? e.text : '')).join('');
const idsOf = (events: readonly GenerateEvent[]) => events.flatMap((e) => (e.type === 'tokens' ? e.ids : []));

describe('ColocatedWorker', () => {
  it('generates max_tokens tokens, streams their text and ends with usage, every page back', async () => {
    const { worker } = setup();
    const events = await collect(worker.generate(request('abcde', { maxTokens: 6 }), new AbortController().signal));
    expect(textOf(events)).toBe('fghijk');
    expect(idsOf(events)).toEqual([...'fghijk'].map(tok));
    expect(events.at(-1)).toEqual({
      type: 'finished',
      finishReason: 'length',
      usage: { promptTokens: 5, completionTokens: 6, cachedTokens: 0 },
    });
    expect((await worker.stats()).kvPages.allocated).toBe(0);
  });

  it('ends at a stop string split across tokens, never sending it or what follows', async () => {
    const { worker } = setup();
    const events = await collect(
      worker.generate(request('a', { maxTokens: 20, stop: ['zz', 'ef'] }), new AbortController().signal),
    );
    // "bcd" is safe; "e" could start "ef" and is held back; "f" completes the match.
    expect(textOf(events)).toBe('bcd');
    expect(events.at(-1)).toMatchObject({ type: 'finished', finishReason: 'stop', usage: { completionTokens: 5 } });
    expect(events.filter((e) => e.type === 'tokens').map((e) => (e as { text: string }).text)).toEqual([
      'b',
      'c',
      'd',
      '',
      '',
    ]);
  });

  it('sends held-back text that turned out not to be a stop string', async () => {
    const { worker } = setup();
    const events = await collect(
      worker.generate(request('a', { maxTokens: 3, stop: ['dx'] }), new AbortController().signal),
    );
    expect(textOf(events)).toBe('bcd');
    expect(events.at(-1)).toMatchObject({ type: 'finished', finishReason: 'length' });
  });

  it('a stop string that completes on the last token still ends as stop', async () => {
    const { worker } = setup();
    const events = await collect(
      worker.generate(request('a', { maxTokens: 3, stop: ['cd'] }), new AbortController().signal),
    );
    expect(textOf(events)).toBe('b');
    expect(events.at(-1)).toMatchObject({ type: 'finished', finishReason: 'stop', usage: { completionTokens: 3 } });
  });

  it('ends at EOS with finish_reason stop and no text for it', async () => {
    const { worker } = setup();
    const events = await collect(worker.generate(request('x', { maxTokens: 10 }), new AbortController().signal));
    expect(textOf(events)).toBe('yz');
    expect(idsOf(events)).toEqual([tok('y'), tok('z'), EOS]);
    expect(events.at(-1)).toMatchObject({ type: 'finished', finishReason: 'stop' });
  });

  it('refuses a request that can never fit the pool before touching a page', async () => {
    const { worker, pool } = setup({ numPages: 2, contextLength: 40 }); // 8 tokens of pool
    const events = await collect(worker.generate(request('abcd', { maxTokens: 5 }), new AbortController().signal));
    expect(events).toHaveLength(1);
    expect(events[0]?.type === 'failed' && isAdmissionError(events[0].error) && events[0].error.code).toBe(
      'pool_too_small',
    );
    expect(pool.ledger.lastEpoch).toBe(0); // no page was ever allocated
    const fits = await collect(worker.generate(request('abcd', { maxTokens: 4 }), new AbortController().signal));
    expect(fits.at(-1)).toMatchObject({ type: 'finished' });
  });

  it('aborts a request whose step is in flight: one failed event, its pages back after the step', async () => {
    const { worker, runner, pool } = setup();
    let open: () => void = () => undefined;
    runner.gate = new Promise((resolve) => (open = resolve));
    const controller = new AbortController();
    const events = collect(worker.generate(request('abcdefgh', { maxTokens: 10 }), controller.signal));
    await new Promise((resolve) => setTimeout(resolve, 10)); // the first step is now waiting on the gate
    expect(pool.ledger.counts().allocated).toBeGreaterThan(0);
    controller.abort();
    runner.gate = undefined;
    open();
    const got = await events;
    expect(got).toHaveLength(1);
    expect(got[0]?.type === 'failed' && isAbortedError(got[0].error)).toBe(true);
    await waitFor(async () => (await worker.health()).detail['idle'] === true);
    expect(pool.ledger.counts().allocated).toBe(0);
  });

  it('aborts a request whose reader stops reading, and keeps serving others', async () => {
    const { worker, pool } = setup();
    for await (const event of worker.generate(
      request('a', { maxTokens: 30, ignoreEos: true }),
      new AbortController().signal,
    )) {
      expect(event.type).toBe('tokens');
      break;
    }
    const other = await collect(worker.generate(request('a', { maxTokens: 2 }), new AbortController().signal));
    expect(textOf(other)).toBe('bc');
    await waitFor(async () => (await worker.health()).detail['idle'] === true);
    expect(pool.ledger.counts().allocated).toBe(0);
  });

  it('checks integrity after every step when asked to', async () => {
    const { worker } = setup({ checkEveryStep: true });
    await Promise.all(
      [0, 1, 2].map(() =>
        collect(worker.generate(request('abcdefghij', { maxTokens: 5 }), new AbortController().signal)),
      ),
    );
    const detail = (await worker.health()).detail;
    expect(detail['steps']).toBeGreaterThan(3);
    expect(detail['integrityChecksAfterStep']).toBe(detail['steps']);
  });

  it('stops on a runner bug: live requests fail as internal, health turns bad, new requests are refused', async () => {
    const fatal: unknown[] = [];
    const { worker, runner } = setup({ onFatal: (e) => fatal.push(e) });
    runner.throwNext = new Error('boom');
    const events = await collect(worker.generate(request('ab', { maxTokens: 3 }), new AbortController().signal));
    const last = events.at(-1);
    expect(last?.type === 'failed' && isInvariantError(last.error)).toBe(true);
    expect(fatal).toHaveLength(1);
    expect((await worker.health()).healthy).toBe(false);
    const after = await collect(worker.generate(request('ab', { maxTokens: 3 }), new AbortController().signal));
    expect(after).toHaveLength(1);
    expect(after[0]?.type).toBe('failed');
  });
});

async function waitFor(condition: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error('condition not met');
}
