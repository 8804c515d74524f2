// The three machines over real TCP sockets on 127.0.0.1, driven the way workers and the router
// will drive them (see `drive`): the reference for wiring, and a check that the machines, the
// codec, authentication and the TCP transport fit together.
import { afterEach, describe, expect, it } from 'vitest';
import {
  asRequestId,
  asTenantId,
  FaultSet,
  samplingParams,
  type FaultName,
  type RequestId,
  type Tag,
} from '../core/index.js';
import { pagesFor, type Owner, type PagePool } from '../pages/index.js';
import { expectedToken, makePool, tokenFromPages, writePositions } from '../../test/sim/transfer/kit.js';
import { DecodeMachine } from './decode-machine.js';
import { LedgerDecodeHost, type AdmitVerdict, type PrefillHost } from './hosts.js';
import type { Machine, NetworkInput } from './machine.js';
import { PrefillMachine } from './prefill-machine.js';
import { RouterMachine, type ClientOutcome } from './router-machine.js';
import { TcpTransport } from './transports/tcp.js';
import type { Transport, TransportHandlers } from './transports/types.js';

const SECRET = 'loopback-test-cluster-secret-0123';
const TIMEOUTS = {
  reserveMs: 2000,
  prefillMs: 5000,
  tokenMs: 2000,
  cancelMs: 2000,
  kvStartMs: 5000,
  frameMs: 2000,
  abortAckMs: 500,
  ackMs: 2000,
};

/** The driver loop: feed an input, carry out the effects, re-arm the one timer at wakeAtMs(). */
function drive<I extends { kind: string }, E>(machine: Machine<I | NetworkInput, E>, carryOut: (effect: E) => void) {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const handle = (input: I | NetworkInput): void => {
    for (const effect of machine.handle(Date.now(), input)) carryOut(effect);
    clearTimeout(timer);
    const at = machine.wakeAtMs();
    if (at !== undefined) timer = setTimeout(() => handle({ kind: 'tick' }), Math.max(0, at - Date.now()));
  };
  return { handle, stop: () => clearTimeout(timer) };
}

/** A prefill "worker" that computes the whole prompt into its pool on the next turn of the event loop. */
class InstantPrefill implements PrefillHost {
  readonly model = '5eed5eed5eed5eed';
  readonly tags = new Map<RequestId, readonly Tag[]>();
  onComputed: (rid: RequestId, tags: readonly Tag[], firstToken: number) => void = () => {};
  constructor(readonly pool: PagePool) {}
  admit(who: Owner, tokens: readonly number[]): AdmitVerdict {
    const result = this.pool.ledger.allocate(pagesFor(tokens.length, this.pool.pageSize), who);
    if (result.kind !== 'allocated') throw new Error('test pool too small');
    this.tags.set(who.rid, result.tags);
    setImmediate(() => {
      writePositions(this.pool, who, result.tags, 0, tokens.length);
      this.onComputed(who.rid, result.tags, tokenFromPages(this.pool, result.tags, tokens.length, 0));
    });
    return { kind: 'admitted' };
  }
  stop(who: Owner): 'stopped' {
    this.release(who);
    return 'stopped';
  }
  release(who: Owner): void {
    this.pool.ledger.free(this.tags.get(who.rid) ?? [], who);
    this.tags.delete(who.rid);
  }
}

/** streamed: decode takes KvChunks as they come off the wire (as DecodeWorker does); else whole. */
async function cluster(faults: FaultName[], streamed: boolean) {
  const faultSet = new FaultSet(faults);
  const stops: (() => void)[] = [];
  const transports: Transport[] = [];
  const dPool = makePool(8, faultSet);
  const pPool = makePool(8);

  // decode: listens, never dials; decodes by reading its pages (checked) and freeing them after.
  let decodeHandle: (input: Parameters<DecodeMachine['handle']>[1]) => void = () => {};
  const dHandlers: TransportHandlers = {
    connected: (p) => decodeHandle({ kind: 'connected', peer: p }),
    message: (f, m) => decodeHandle({ kind: 'received', from: f, message: m }),
    closed: (p, r) => decodeHandle({ kind: 'closed', peer: p, reason: r }),
  };
  const dChunks: TransportHandlers['chunks'] = {
    begin: (from, head) => decodeHandle({ kind: 'chunkBegin', from, head }),
    piece: (from, bytes) => decodeHandle({ kind: 'chunkPiece', from, bytes }),
    end: (from) => decodeHandle({ kind: 'chunkEnd', from }),
  };
  const dT = await TcpTransport.listen({
    secret: SECRET,
    handlers: streamed ? { ...dHandlers, chunks: dChunks } : dHandlers,
    dial: false,
  });
  const decode = new DecodeMachine({
    node: dT.nodeId,
    host: new LedgerDecodeHost({ pool: dPool, model: '5eed5eed5eed5eed', contextLength: 64, faults: faultSet }),
    faults: faultSet,
    timeouts: TIMEOUTS,
  });
  const d = drive(decode, (e) => {
    if (e.kind === 'send') dT.send(e.to, e.message);
    else if (e.kind === 'closePeer') dT.closePeer(e.peer, e.reason);
    else if (e.kind === 'startDecoding') {
      setImmediate(() => {
        dPool.checkRead(e.owner, e.tags, e.promptTokens);
        const ids = Array.from({ length: e.sampling.maxTokens - 1 }, (_, i) =>
          tokenFromPages(dPool, e.tags, e.promptTokens, i + 1),
        );
        d.handle({ kind: 'decodeTokens', rid: e.rid, ids, logprobs: [] });
        dPool.ledger.free(e.tags, e.owner);
        d.handle({ kind: 'decodeFinished', rid: e.rid, finishReason: 'length' });
      });
    }
  });
  decodeHandle = d.handle;

  // prefill: listens for the router, dials decode.
  const host = new InstantPrefill(pPool);
  let prefillHandle: (input: Parameters<PrefillMachine['handle']>[1]) => void = () => {};
  const pT = await TcpTransport.listen({
    secret: SECRET,
    dial: true,
    handlers: {
      connected: (p) => prefillHandle({ kind: 'connected', peer: p }),
      message: (f, m) => prefillHandle({ kind: 'received', from: f, message: m }),
      closed: (p, r) => prefillHandle({ kind: 'closed', peer: p, reason: r }),
    },
  });
  const prefill = new PrefillMachine({ node: pT.nodeId, host, faults: faultSet, timeouts: TIMEOUTS });
  const p = drive(prefill, (e) => (e.kind === 'send' ? pT.send(e.to, e.message) : pT.closePeer(e.peer, e.reason)));
  prefillHandle = p.handle;
  host.onComputed = (rid, tags, firstToken) =>
    p.handle({ kind: 'computeDone', rid, tags, firstToken, firstLogprobs: [] });

  // router: only dials.
  const outcomes = new Map<RequestId, ClientOutcome>();
  const tokens = new Map<RequestId, number[]>();
  let routerHandle: (input: Parameters<RouterMachine['handle']>[1]) => void = () => {};
  const rT = TcpTransport.client({
    nodeId: 'router',
    secret: SECRET,
    dial: true,
    handlers: {
      connected: (x) => routerHandle({ kind: 'connected', peer: x }),
      message: (f, m) => routerHandle({ kind: 'received', from: f, message: m }),
      closed: (x, r) => routerHandle({ kind: 'closed', peer: x, reason: r }),
    },
  });
  const router = new RouterMachine({
    node: 'router',
    contextLength: 64,
    pickPair: () => ({ prefill: pT.nodeId, decode: dT.nodeId }),
    timeouts: TIMEOUTS,
  });
  const r = drive(router, (e) => {
    if (e.kind === 'send') rT.send(e.to, e.message);
    else if (e.kind === 'closePeer') rT.closePeer(e.peer, e.reason);
    else if (e.kind === 'clientTokens') tokens.set(e.rid, [...(tokens.get(e.rid) ?? []), ...e.ids]);
    else if (e.kind === 'clientOutcome') outcomes.set(e.rid, e.outcome);
  });
  routerHandle = r.handle;

  transports.push(rT, pT, dT);
  stops.push(d.stop, p.stop, r.stop);
  const submit = async (
    rid: RequestId,
    prompt: number[],
    maxTokens: number,
  ): Promise<{ outcome: ClientOutcome; tokens: number[] }> => {
    r.handle({
      kind: 'submit',
      request: { rid, tenant: asTenantId('t0'), tokens: prompt, sampling: samplingParams({ maxTokens }) },
    });
    for (let i = 0; i < 500 && !outcomes.has(rid); i++) await new Promise((resolve) => setTimeout(resolve, 5));
    const outcome = outcomes.get(rid);
    if (outcome === undefined) throw new Error(`no outcome for ${rid}`);
    return { outcome, tokens: tokens.get(rid) ?? [] };
  };
  const idle = async () => {
    for (
      let i = 0;
      i < 200 && (dPool.ledger.numFree < 8 || pPool.ledger.numFree < 8 || decode.numActive + prefill.numActive > 0);
      i++
    )
      await new Promise((resolve) => setTimeout(resolve, 5));
    return { decode: dPool.ledger.counts(), prefill: pPool.ledger.counts() };
  };
  const close = async () => {
    for (const stop of stops) stop();
    await Promise.all(transports.map((t) => t.close()));
  };
  return { submit, idle, close };
}

describe.each([
  ['whole', false],
  ['streamed', true],
] as const)('the protocol over TCP on loopback, KvChunks %s', (_name, streamed) => {
  let close: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await close?.();
  });

  it("moves a prompt's KV from prefill to decode and streams the tokens that KV gives", async () => {
    const c = await cluster([], streamed);
    close = c.close;
    const rid = asRequestId('loop-1');
    const prompt = [...Array(10).keys()];
    const { outcome, tokens } = await c.submit(rid, prompt, 3);
    expect(outcome).toMatchObject({ ok: true, attempt: rid, completionTokens: 3 });
    expect(tokens).toEqual([0, 1, 2].map((step) => expectedToken(rid, 10, step)));
    expect(await c.idle()).toEqual({
      decode: expect.objectContaining({ free: 8 }),
      prefill: expect.objectContaining({ free: 8 }),
    });
  });

  it('placeholder-done: the client gets an error and no token, and every page comes back', async () => {
    const c = await cluster(['placeholder-done'], streamed);
    close = c.close;
    const { outcome, tokens } = await c.submit(asRequestId('loop-2'), [...Array(10).keys()], 3);
    expect(outcome).toMatchObject({
      ok: false,
      error: expect.objectContaining({
        code: 'transfer_failed',
        message: expect.stringContaining('stamps cover 4 of'),
      }),
    });
    expect(tokens).toEqual([]);
    expect(await c.idle()).toEqual({
      decode: expect.objectContaining({ free: 8 }),
      prefill: expect.objectContaining({ free: 8 }),
    });
  });

  it('negative control: placeholder-done with skip-page-check "succeeds" with other output', async () => {
    const c = await cluster(['placeholder-done', 'skip-page-check'], streamed);
    close = c.close;
    const rid = asRequestId('loop-3');
    const { outcome, tokens } = await c.submit(rid, [...Array(10).keys()], 3);
    expect(outcome.ok).toBe(true);
    expect(tokens).not.toEqual([0, 1, 2].map((step) => expectedToken(rid, 10, step)));
  });
});
