// Admission at the boundaries of asymmetric nodes, and the cluster channel's authentication.
//   r-p-small: a prefill whose context (and pool) is small, in front of a large decode
//   r-d-small: a large prefill in front of a decode whose context (and pool) is small
// A request that fits one side but not the other gets 400 from the router's cluster admission,
// before any Reserve: no page allocated on either node (their ledgers' epochs do not move), no
// byte transferred. Negative control: with the router's check switched off (skip-admission on
// the router) the prefill's own check still refuses it (400), but only after decode reserved
// pages for it: the epoch moves, which is what the router's check prevents.
// Authentication: a connection to a worker's cluster port that does not prove the secret (raw
// garbage, or a handshake with a wrong secret) is closed, counted and never heard; the right
// secret gets an answer.
import { connect } from 'node:net';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asRequestId, asTenantId, samplingParams } from '../../../src/core/index.js';
import { TcpTransport, type Message } from '../../../src/transfer/index.js';
import {
  allIdle,
  detail,
  greedyIds,
  promptIds,
  SECRET,
  startRouter,
  startWorker,
  useTestHome,
  transferBytes,
  waitUntil,
  type Router,
  type Worker,
} from './support.js';

const home = useTestHome();
const procs: { stop(): Promise<unknown> }[] = [];
let pSmall: Worker, pBig: Worker, dSmall: Worker, dBig: Worker;
let rPSmall: Router, rDSmall: Router, rUnchecked: Router;

const SMALL = ['--context-length', '128', '--kv-pages', '8'];
const BIG = ['--context-length', '512', '--kv-pages', '64'];

beforeAll(async () => {
  [pSmall, pBig, dSmall, dBig] = await Promise.all([
    startWorker('p-small', 'prefill', SMALL, home.dir),
    startWorker('p-big', 'prefill', BIG, home.dir),
    startWorker('d-small', 'decode', SMALL, home.dir),
    startWorker('d-big', 'decode', BIG, home.dir, { TESSERA_PD_TIMEOUTS: 'abortAckMs=500,abortRetries=1' }),
  ]);
  procs.push(pSmall, pBig, dSmall, dBig);
  [rPSmall, rDSmall, rUnchecked] = await Promise.all([
    startRouter('r-p-small', [pSmall], [dBig], [], home.dir),
    startRouter('r-d-small', [pBig], [dSmall], [], home.dir),
    startRouter('r-unchecked', [pSmall], [dBig], [], home.dir, {
      TESSERA_ALLOW_FAULTS: '1',
      TESSERA_FAULT: 'skip-admission',
    }),
  ]);
  procs.push(rPSmall, rDSmall, rUnchecked);
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
});

interface Footprint {
  readonly lastEpoch: number;
  readonly bytes: number;
  readonly metricBytes: number;
}

async function footprint(w: Worker): Promise<Footprint> {
  const d = await detail(w);
  const f = {
    lastEpoch: d['lastEpoch'] as number,
    bytes: (d.transfer['bytesSent'] ?? 0) + (d.transfer['bytesWritten'] ?? 0),
    metricBytes: await transferBytes(w.url),
  };
  expect(Object.values(f).every(Number.isFinite)).toBe(true); // every figure is really there
  return f;
}

async function refusal(
  router: Router,
  numPromptTokens: number,
  maxTokens: number,
): Promise<InstanceType<typeof OpenAI.APIError>> {
  const e = await router
    .client()
    .completions.create({ model: 'builtin:tiny', prompt: promptIds(numPromptTokens, 500), max_tokens: maxTokens })
    .catch((x: unknown) => x);
  expect(e).toBeInstanceOf(OpenAI.APIError);
  return e as InstanceType<typeof OpenAI.APIError>;
}

describe('admission across asymmetric nodes', () => {
  it('a prompt that fits decode but not prefill: 400, no page allocated and no byte moved on either node', async () => {
    const before = await Promise.all([footprint(pSmall), footprint(dBig)]);
    const e = await refusal(rPSmall, 150, 10);
    expect(e.status).toBe(400);
    expect(e.message).toMatch(/maximum context length is 128 tokens/);
    expect(await Promise.all([footprint(pSmall), footprint(dBig)])).toEqual(before);
    expect((await detail(dBig)).transfer['reserved']).toBe(0);
  });

  it('a prompt that fits prefill but not decode: 400, no page allocated and no byte moved on either node', async () => {
    const before = await Promise.all([footprint(pBig), footprint(dSmall)]);
    const e = await refusal(rDSmall, 100, 50);
    expect(e.status).toBe(400);
    expect(e.message).toMatch(/maximum context length is 128 tokens/);
    expect(await Promise.all([footprint(pBig), footprint(dSmall)])).toEqual(before);
  });

  it('requests that fit both sides are served by the same pairs, and their bytes are counted', async () => {
    expect(await greedyIds(rPSmall.client(), promptIds(100, 1), 20)).toHaveLength(20);
    expect(await greedyIds(rDSmall.client(), promptIds(60, 2), 60)).toHaveLength(60);
    await allIdle([pSmall, pBig, dSmall, dBig]);
    // 100 and 60 prompt tokens at 2 KiB per token, sent by each prefill and written by each decode.
    expect(await Promise.all([pSmall, dBig, pBig, dSmall].map((w) => transferBytes(w.url)))).toEqual(
      [100, 100, 60, 60].map((n) => n * 2048),
    );
  });

  it("negative control: without the router's check, the prefill still refuses (400), but decode had already allocated pages", async () => {
    const before = await footprint(dBig);
    const e = await refusal(rUnchecked, 150, 10);
    expect(e.status).toBe(400);
    const after = await footprint(dBig);
    expect(after.lastEpoch - before.lastEpoch).toBe(10); // pagesFor(150, 16): reserved, then given back
    expect(after.bytes).toBe(before.bytes);
    await allIdle([pSmall, dBig]);
  });
});

describe('the cluster channel proves the secret', () => {
  it('closes a connection that sends garbage instead of a handshake, and counts it refused', async () => {
    const before = (await detail(dBig)).transport['refused'] as number;
    const [host, port] = dBig.address.split(':') as [string, string];
    const closed = await new Promise<boolean>((resolve) => {
      const socket = connect({ host, port: Number(port) }, () => socket.write(Buffer.alloc(64, 0x41)));
      socket.on('error', () => undefined);
      socket.resume(); // read (and drop) the worker's handshake, so its close is seen
      socket.on('close', () => resolve(true));
      setTimeout(() => (socket.destroy(), resolve(false)), 10_000);
    });
    expect(closed).toBe(true);
    await waitUntil(
      'the refusal to be counted',
      async () => ((await detail(dBig)).transport['refused'] as number) === before + 1,
    );
  });

  it('refuses a peer with a wrong secret before any message, and answers one with the right secret', async () => {
    const before = await detail(dBig);
    const reserve = (rid: string): Message => ({
      type: 'Reserve',
      rid: asRequestId(rid),
      tenant: asTenantId('t'),
      promptTokens: 4,
      promptDigest: '0'.repeat(16),
      sampling: samplingParams({ maxTokens: 2 }),
      prefillAddress: pSmall.address, // connected to d-big by now: it acknowledges our Abort at once
    });
    const talk = async (
      secret: string,
      message: Message,
    ): Promise<{ received: Message[]; closed: string | undefined }> => {
      const received: Message[] = [];
      let closed: string | undefined;
      const t = TcpTransport.client({
        nodeId: `e2e-${secret.length}`,
        secret,
        dial: true,
        handlers: {
          connected: () => undefined,
          message: (_f, m) => received.push(m),
          closed: (_p, reason) => (closed = reason),
        },
      });
      t.send(dBig.address, message);
      await waitUntil('an answer or a close', async () => received.length > 0 || closed !== undefined, 10_000);
      if (received.length > 0) t.send(dBig.address, { type: 'Abort', rid: message.rid, reason: 'router' });
      await new Promise((resolve) => setTimeout(resolve, 200));
      await t.close();
      return { received, closed };
    };
    const wrong = await talk('not-the-cluster-secret-at-all!!', reserve('auth-wrong'));
    expect(wrong.received).toEqual([]);
    expect(wrong.closed).toMatch(/proof|secret|auth/i);
    const afterWrong = await detail(dBig);
    expect(afterWrong.transport['refused']).toBe((before.transport['refused'] as number) + 1);
    expect(afterWrong.transfer['reserved']).toBe(before.transfer['reserved']);

    const right = await talk(SECRET, reserve('auth-right'));
    expect(right.received[0]).toMatchObject({ type: 'Reserved', rid: 'auth-right' });
    await allIdle([dBig], 30_000);
  });
});
