// The prefill worker's async stage before the scheduler (the cluster-wide prefix store), in one
// process over real TCP on loopback with the worker module's fake engine: a stand-in router sends
// Prefill messages straight to two PrefillWorkers, a stand-in decode records the frames and acks
// each KvDone. What only this level shows: a Prefill carrying the router's prefixHolder hint is
// computed after its prefix pages were fetched from the holder (cachedTokens), and a Prefill
// stopped while its fetch is in flight never enters the scheduler nor sends a frame.
import { afterEach, describe, expect, it } from 'vitest';
import { asRequestId, DEFAULT_TENANT, NO_FAULTS, samplingParams, type Tag } from '../../src/core/index.js';
import { TcpTransport, type Message, type Prefill, type Transport } from '../../src/transfer/index.js';
import { PrefillWorker } from '../../src/worker/index.js';
import { argmaxSampler, EOS, fakePool, FakeRunner, tok } from '../../src/worker/testing/fake-engine.js';

const SECRET = 'peer-prefix-cluster-secret-0123456789';
const PROMPT = [...'abcdefghijklm'].map(tok); // 13 tokens: 3 full pages of 4 before the last token
const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

async function prefill(): Promise<PrefillWorker> {
  const pool = fakePool(32);
  const worker = await PrefillWorker.start({
    modelName: 'fake',
    root: 'fake',
    modelFingerprint: 'fa4efa4efa4efa4e',
    contextLength: 40,
    pool,
    runner: new FakeRunner(pool),
    sampler: argmaxSampler,
    eosTokenIds: [EOS],
    maxRunningRequests: 4,
    chunkedPrefillSize: 8,
    maxWaiting: 16,
    faults: NO_FAULTS,
    checkEveryStep: true,
    clusterHost: '127.0.0.1',
    clusterPort: 0,
    clusterSecret: SECRET,
    onFatal: (e) => {
      throw e;
    },
  });
  closers.push(() => worker.close(0));
  return worker;
}

/** A node that records what it is sent; as decode, it acks every KvDone. */
async function standIn(ack: boolean): Promise<{ transport: Transport; got: Message[] }> {
  const got: Message[] = [];
  const late: { t?: Transport } = {};
  const transport = await TcpTransport.listen({
    secret: SECRET,
    dial: true,
    handlers: {
      connected: () => undefined,
      message: (from, m) => {
        got.push(m);
        if (ack && m.type === 'KvDone') late.t?.send(from, { type: 'Ack', rid: m.rid });
      },
      closed: () => undefined,
    },
  });
  late.t = transport;
  closers.push(() => transport.close());
  return { transport, got };
}

let nextRid = 0;
function prefillMessage(decode: Transport, prefixHolder?: string): Prefill {
  const tags: Tag[] = Array.from({ length: 4 }, (_, i) => ({ page: i, epoch: 1 }) as Tag);
  return {
    type: 'Prefill',
    rid: asRequestId(`q${nextRid++}`),
    tenant: DEFAULT_TENANT,
    tokens: PROMPT,
    sampling: samplingParams({ maxTokens: 4 }),
    decodeAddress: decode.nodeId,
    tags,
    pageSize: 4,
    ...(prefixHolder === undefined ? {} : { prefixHolder }),
  };
}

async function until(test: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1000 && !test(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  if (!test()) throw new Error(`timed out waiting for ${what}`);
}

const kvDone = (got: readonly Message[], rid: string) =>
  got.find((m): m is Extract<Message, { type: 'KvDone' }> => m.type === 'KvDone' && m.rid === rid);

describe('a prefill with the router hint', () => {
  it('fetches the prefix from the holder before computing: only the tail is computed', async () => {
    const [x, y] = await Promise.all([prefill(), prefill()]);
    const decode = await standIn(true);
    const router = await standIn(false);
    const first = prefillMessage(decode.transport);
    router.transport.send(x.address, first);
    await until(() => x.isIdle && kvDone(decode.got, first.rid) !== undefined, "x's first prompt to be acked");
    const hinted = prefillMessage(decode.transport, x.address);
    router.transport.send(y.address, hinted);
    await until(() => kvDone(decode.got, hinted.rid) !== undefined, "y's KvDone");
    expect(kvDone(decode.got, hinted.rid)?.cachedTokens).toBe(12);
    expect(kvDone(decode.got, hinted.rid)?.firstToken).toBe(kvDone(decode.got, first.rid)?.firstToken);
    expect(y.peerStats()?.requester).toMatchObject({ fetches: 1, pagesFetched: 3, pagesMissed: 0 });
    expect(x.peerStats()).toMatchObject({ leasesOpen: 0, holder: { pagesServed: 3 } });
  });

  it('drops a request stopped while its fetch is in flight: it never enters the scheduler, no frame is sent', async () => {
    const y = await prefill();
    const decode = await standIn(true);
    const router = await standIn(false);
    const silent = await standIn(false); // a "holder" that never answers a PrefixFetch
    const m = prefillMessage(decode.transport, silent.transport.nodeId);
    router.transport.send(y.address, m);
    await until(() => y.peerStats()?.requester.fetches === 1, 'the fetch to start');
    router.transport.send(y.address, { type: 'Abort', rid: m.rid, reason: 'client-disconnect' });
    await until(() => router.got.some((x) => x.type === 'AbortAck' && x.rid === m.rid), 'the AbortAck');
    await silent.transport.close(); // the fetch ends (closed): nothing may be admitted after it
    await until(() => y.peerStats()?.requester.refused.closed === 1, 'the fetch to end');
    await new Promise((resolve) => setImmediate(resolve)); // the fetch's continuation has run (microtasks)
    expect(y.scheduler.isIdle).toBe(true);
    expect(y.pool.ledger.counts().allocated).toBe(0);
    // decode hears only the prefill's AbortAck (it will never write rid's pages): no KvChunk, no KvDone
    expect(decode.got.filter((x) => 'rid' in x && x.rid === m.rid).map((x) => x.type)).toEqual(['AbortAck']);
  });
});
