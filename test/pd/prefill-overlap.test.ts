// A prefill node sends one step's chunks while it computes the next, and never sends a slot the
// step in flight still writes. The PD roles run in one process over real TCP on loopback, with a
// fake model that really writes K/V: each step writes a marker (position + 1) into every slot it
// computes only when its "forward pass" (a timer standing for the engine thread) ends, stamps it
// after that, and counts every slot it reads whose marker is missing. So a frame gathered while
// the step in flight writes its slots carries zeros, and decode generates from them.
// `send-in-flight` puts that bug in (progress claimed up to the end of the step in flight); the
// machine's page check before each send (stamps cover finished steps only) refuses it, and
// `skip-page-check` on prefill is the negative control.
import { afterEach, describe, expect, it } from 'vitest';
import {
  asRequestId,
  DEFAULT_TENANT,
  FaultSet,
  isPageCheckError,
  NO_FAULTS,
  samplingParams,
  type BatchItem,
  type GenerateEvent,
  type Tag,
} from '../../src/core/index.js';
import type { ItemResult, StepRunner } from '../../src/engine/index.js';
import { PagePool } from '../../src/pages/index.js';
import { PdRouter } from '../../src/router/index.js';
import { DecodeWorker, PrefillWorker } from '../../src/worker/index.js';
import { EOS, fakePool, nextToken, tok, VOCAB_SIZE } from '../../src/worker/testing/fake-engine.js';
import { fakeCluster } from './support.js';

const SECRET = 'prefill-overlap-cluster-secret-0123456789';
const STEP_MS = 30;

/** The fake model of fake-engine.ts (next token t + 1), over K/V it really writes and reads. */
class WritingRunner implements StepRunner {
  readonly pool: PagePool;
  /** Slots read whose marker was missing (data never written, or gathered before it was). */
  staleReads = 0;
  /** Per step: the prefill machine's chunksSent when the step was handed over, and when it ended. */
  readonly sentAtStart: number[] = [];
  readonly sentAtEnd: number[] = [];
  chunksSent: () => number = () => 0;

  constructor(pool: PagePool) {
    this.pool = pool;
  }

  async step(items: readonly BatchItem[]): Promise<ItemResult[]> {
    this.sentAtStart.push(this.chunksSent());
    const checked = items.map((item) => this.#check(item));
    const pages = items.flatMap((item) => item.tags.map((t) => t.page));
    this.pool.lend(pages);
    await new Promise((resolve) => setTimeout(resolve, STEP_MS)); // the forward pass on its thread
    this.pool.unlend(pages);
    this.sentAtEnd.push(this.chunksSent());
    return items.map((item, i) => checked[i] ?? this.#compute(item));
  }

  #check(item: BatchItem): ItemResult | undefined {
    const { pool } = this;
    const who = { rid: item.rid, tenant: item.tenant };
    const end = item.startPos + item.tokens.length;
    try {
      pool.checkWrite(who, item.tags.slice(Math.floor(item.startPos / pool.pageSize), Math.ceil(end / pool.pageSize)));
      pool.checkRead(who, item.tags, item.startPos);
      return undefined;
    } catch (error) {
      if (isPageCheckError(error)) return { kind: 'failed', rid: item.rid, error };
      throw error;
    }
  }

  #compute(item: BatchItem): ItemResult {
    const { pool } = this;
    const size = pool.pageSize;
    let stale = 0;
    for (let pos = 0; pos < item.startPos; pos++) {
      const bytes = pool.gatherSlots((item.tags[Math.floor(pos / size)] as Tag).page, pos % size, 1);
      if (new Float32Array(bytes.buffer, bytes.byteOffset, 2).some((v) => v !== pos + 1)) stale++;
    }
    this.staleReads += stale;
    const end = item.startPos + item.tokens.length;
    for (let pos = item.startPos; pos < end; pos++) {
      const marker = new Float32Array([pos + 1, pos + 1]);
      pool.scatterSlots((item.tags[Math.floor(pos / size)] as Tag).page, pos % size, 1, new Uint8Array(marker.buffer));
    }
    for (let p = Math.floor(item.startPos / size); p * size < end; p++) {
      pool.stamp(item.tags[p] as Tag, Math.min(size, end - p * size));
    }
    if (!item.wantLogits) return { kind: 'computed', rid: item.rid };
    const logits = new Float32Array(VOCAB_SIZE);
    // A context with a slot it cannot read ends the answer: what a user sees as garbage.
    logits[stale > 0 ? EOS : nextToken(item.tokens.at(-1) as number)] = 10;
    return { kind: 'logits', rid: item.rid, logits, rows: 1 };
  }
}

interface Cluster {
  readonly router: PdRouter;
  readonly prefill: PrefillWorker;
  readonly decode: DecodeWorker;
  readonly prefillRunner: WritingRunner;
  readonly decodeRunner: WritingRunner;
}

let closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.map((close) => close()));
  closers = [];
});

async function cluster(prefillFaults: FaultSet): Promise<Cluster> {
  // The pool holds the page checks: prefill's faults go to its pool as they would from src/cli.
  const pPool = PagePool.create({ numPages: 32, pageSize: 4, numLayers: 1, numKvHeads: 1, headDim: 1 }, prefillFaults);
  const dPool = fakePool(32);
  const prefillRunner = new WritingRunner(pPool);
  const decodeRunner = new WritingRunner(dPool);
  const c = await fakeCluster({
    secret: SECRET,
    prefill: { pool: pPool, runner: prefillRunner, faults: prefillFaults },
    decode: { pool: dPool, runner: decodeRunner },
    maxStepMs: 'off',
    onPrefill: (prefill) => (prefillRunner.chunksSent = () => prefill.machine.stats().chunksSent),
  });
  closers.push(c.close);
  return { router: c.router, prefill: c.prefill, decode: c.decode, prefillRunner, decodeRunner };
}

/** A 20-token prompt: three prefill steps of 8, 8 and 4 tokens, five chunks of one page (4 slots) each. */
async function generate(c: Cluster): Promise<GenerateEvent[]> {
  const request = {
    rid: asRequestId('p0'),
    tenant: DEFAULT_TENANT,
    promptTokens: [...'abcdefghijklmnopqrst'].map(tok),
    sampling: samplingParams({ maxTokens: 4 }),
  };
  const all: GenerateEvent[] = [];
  for await (const e of c.router.generate(request, new AbortController().signal)) all.push(e);
  return all;
}
const textOf = (events: readonly GenerateEvent[]) => events.map((e) => (e.type === 'tokens' ? e.text : '')).join('');

async function idle(c: Cluster): Promise<void> {
  for (let i = 0; i < 400 && !(c.prefill.isIdle && c.decode.isIdle && c.router.machine.numActive === 0); i++)
    await new Promise((r) => setTimeout(r, 5));
  expect(c.prefill.pool.ledger.counts()).toMatchObject({ allocated: 0, quarantined: 0 });
  expect(c.decode.pool.ledger.counts()).toMatchObject({ allocated: 0, quarantined: 0 });
}

describe('a prefill node sends while it computes', () => {
  it("sends step N's chunks while step N+1 computes, and decode reads exactly what prefill wrote", async () => {
    const c = await cluster(NO_FAULTS);
    const events = await generate(c);
    expect(textOf(events)).toBe('uvwx');
    // Step 1's two chunks leave after step 2 was handed over and before it ended; likewise step 2's.
    expect(c.prefillRunner.sentAtStart).toEqual([0, 0, 2]);
    expect(c.prefillRunner.sentAtEnd).toEqual([0, 2, 4]);
    expect(c.prefill.machine.stats()).toMatchObject({ chunksSent: 5, transfersAcked: 1 });
    expect(c.decodeRunner.staleReads).toBe(0);
    await idle(c);
  });

  it('refuses to send a slot the step in flight still writes: with send-in-flight the request fails honestly', async () => {
    const c = await cluster(new FaultSet(['send-in-flight']));
    const events = await generate(c);
    expect(textOf(events)).toBe('');
    expect(events.at(-1)).toMatchObject({ type: 'failed' });
    expect(c.prefill.pool.numCheckFailures).toBeGreaterThan(0);
    expect(c.decodeRunner.staleReads).toBe(0);
    await idle(c);
  });

  it('negative control: with send-in-flight and skip-page-check, decode generates from slots gathered before they were written', async () => {
    const c = await cluster(new FaultSet(['send-in-flight', 'skip-page-check']));
    const events = await generate(c);
    expect(textOf(events)).not.toBe('uvwx');
    expect(c.decodeRunner.staleReads).toBeGreaterThan(0);
    await idle(c);
  });
});
