// The in-process PD cluster the test/pd files share: PrefillWorker and DecodeWorker over real
// TCP on loopback, each with the HTTP front end for its /health, and PdRouter in front of them,
// on the worker module's fake engine (src/worker/testing/fake-engine.ts). Each file brings its
// own pools and runners (the fake runner, or one that really writes K/V).
// Must never: share a cluster between tests (each call starts its own; close() ends it).
import { createApiServer, type ApiServer } from '../../src/api/index.js';
import { NO_FAULTS, TextStream, type FaultSet } from '../../src/core/index.js';
import type { PagePool } from '../../src/pages/index.js';
import { PdRouter } from '../../src/router/index.js';
import { DecodeWorker, PrefillWorker } from '../../src/worker/index.js';
import { type MaxStepMs, type StepRunner } from '../../src/engine/index.js';
import { argmaxSampler, EOS, fakeTokenizer, VOCAB_SIZE } from '../../src/worker/testing/fake-engine.js';

const codec = { vocabSize: VOCAB_SIZE, encode: () => [], renderChat: () => '', tokenText: () => '' };

/** One node's own parts. */
export interface FakeNode {
  readonly pool: PagePool;
  readonly runner: StepRunner;
  readonly faults?: FaultSet;
  readonly modelFingerprint?: string;
}

export interface FakeCluster {
  readonly router: PdRouter;
  readonly prefill: PrefillWorker;
  readonly decode: DecodeWorker;
  close(): Promise<void>;
}

/** Starts prefill, decode and the router (context length 40, chunks of 8, checks after every step). */
export async function fakeCluster(o: {
  readonly secret: string;
  readonly prefill: FakeNode;
  readonly decode: FakeNode;
  /** The router's faults (default none). */
  readonly faults?: FaultSet;
  /** The workers' step budget (default: the workers' own default). */
  readonly maxStepMs?: MaxStepMs;
  /** Called with the prefill worker before decode starts (to wire a runner to its machine). */
  readonly onPrefill?: (prefill: PrefillWorker) => void;
}): Promise<FakeCluster> {
  const common = {
    modelName: 'fake',
    root: 'fake',
    modelFingerprint: 'fa4efa4efa4efa4e',
    contextLength: 40,
    sampler: argmaxSampler,
    eosTokenIds: [EOS],
    maxRunningRequests: 4,
    chunkedPrefillSize: 8,
    maxWaiting: 16,
    checkEveryStep: true,
    clusterHost: '127.0.0.1',
    clusterPort: 0,
    clusterSecret: o.secret,
    ...(o.maxStepMs === undefined ? {} : { maxStepMs: o.maxStepMs }),
    onFatal: (e: unknown) => {
      throw e;
    },
  };
  const node = (n: FakeNode) => ({
    ...common,
    pool: n.pool,
    runner: n.runner,
    faults: n.faults ?? NO_FAULTS,
    ...(n.modelFingerprint === undefined ? {} : { modelFingerprint: n.modelFingerprint }),
  });
  const prefill = await PrefillWorker.start(node(o.prefill));
  o.onPrefill?.(prefill);
  const decode = await DecodeWorker.start(node(o.decode));
  const apis: ApiServer[] = [
    createApiServer({ backend: prefill, codec, seed: 1 }),
    createApiServer({ backend: decode, codec, seed: 2 }),
  ];
  const [p, d] = await Promise.all(apis.map((a) => a.listen(0, '127.0.0.1')));
  const router = new PdRouter({
    modelName: 'fake',
    root: 'fake',
    contextLength: 40,
    prefills: [`http://127.0.0.1:${p?.port}`],
    decodes: [`http://127.0.0.1:${d?.port}`],
    clusterSecret: o.secret,
    textStream: (_prompt, stops) => new TextStream(fakeTokenizer.createDetokenizer({}), stops),
    faults: o.faults ?? NO_FAULTS,
  });
  await router.start();
  return {
    router,
    prefill,
    decode,
    close: async () => {
      await router.close(1_000);
      await Promise.all(apis.map((a) => a.close()));
      await Promise.all([prefill.close(0), decode.close(0)]);
    },
  };
}
