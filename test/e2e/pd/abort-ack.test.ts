// Acknowledged aborts and deferred release, over real processes, with their negative controls.
// The scenario: the prefill is frozen (SIGSTOP) after the router sent it the Prefill; the client
// leaves; the router aborts through decode; decode must keep the reservation quarantined (its
// writer may still write) until the writer acknowledges, then free it.
//   clean           prefill acknowledges once thawed: quarantined meanwhile, released by the
//                   AbortAck, the writer never declared dead; the trace conforms to the model
//   drop-abort-ack  (on the prefill) no acknowledgement ever: decode re-sends Abort, declares
//                   the writer dead, closes its connection and only then releases the pages
//   free-before-ack (on decode) the pages are freed at once while the writer may still write:
//                   never quarantined, and the conformance checker rejects the trace
// Each fault is caught by the clean scenario's own assertions (they throw on its observations).
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
  ridsOf,
  startRouter,
  startWorker,
  useTestHome,
  waitUntil,
  type Router,
  type Worker,
} from './support.js';

const home = useTestHome();
let traceDir: string;
const procs: { stop(): Promise<unknown> }[] = [];
let pGood: Worker, pNoAck: Worker, dClean: Worker, dFree: Worker;
let rClean: Router, rNoAck: Router, rFree: Router;

const POOL = ['--context-length', '256', '--kv-pages', '32'];
// Decode re-sends an unacknowledged Abort once after 1 s, then declares the writer dead.
const DECODE_ENV = { TESSERA_PD_TIMEOUTS: 'abortAckMs=1000,abortRetries=1' };
const faults = (names: string) => ({ TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: names });

beforeAll(async () => {
  traceDir = await mkdtemp(join(home.dir, 'trace-'));
  const trace = { TESSERA_TRACE_DIR: traceDir };
  [pGood, pNoAck, dClean, dFree] = await Promise.all([
    startWorker('p-good', 'prefill', POOL, home.dir, trace),
    startWorker('p-noack', 'prefill', POOL, home.dir, { ...faults('drop-abort-ack'), ...trace }),
    startWorker('d-clean', 'decode', POOL, home.dir, { ...DECODE_ENV, ...trace }),
    startWorker('d-free', 'decode', POOL, home.dir, { ...DECODE_ENV, ...faults('free-before-ack'), ...trace }),
  ]);
  procs.push(pGood, pNoAck, dClean, dFree);
  [rClean, rNoAck, rFree] = await Promise.all([
    startRouter('r-clean', [pGood], [dClean], [], home.dir, trace),
    startRouter('r-noack', [pNoAck], [dClean], [], home.dir, trace),
    startRouter('r-free', [pGood], [dFree], [], home.dir, trace),
  ]);
  procs.push(rClean, rNoAck, rFree);
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
});

const PAGES = 7; // a prompt of 100 tokens in pages of 16

interface Observed {
  /** Pages decode held quarantined once it had aborted the transfer, the writer still frozen. */
  readonly maxQuarantined: number;
  /** Writers decode declared dead during the scenario. */
  readonly declaredDead: number;
  readonly rid: string;
}

async function abortWhileWriterFrozen(router: Router, prefill: Worker, decode: Worker): Promise<Observed> {
  await greedyIds(router.client(), promptIds(8, 1), 2); // the prefill has a connection to decode
  const deadBefore = (await detail(decode)).transfer['writersDeclaredDead'] as number;
  const abortsBefore = Object.values(
    (await detail(decode)).transfer['abortsByState'] as unknown as Record<string, number>,
  ).reduce((a, b) => a + b, 0);
  prefill.signal('SIGSTOP');
  const controller = new AbortController();
  const client = router
    .client()
    .completions.create(
      { model: 'builtin:tiny', prompt: promptIds(100, 77), max_tokens: 20 },
      { signal: controller.signal },
    )
    .catch((e: unknown) => e);
  await waitUntil(
    'the router to be prefilling',
    async () =>
      ((await health(router.url)).body['requests'] as { attempts: Record<string, number> }).attempts['Prefilling'] ===
      1,
  );
  controller.abort();
  expect(await client).toBeInstanceOf(OpenAI.APIUserAbortError);
  // Once decode has aborted the transfer, its pages are quarantined (the defence) or already free.
  const aborted = async () =>
    Object.values((await detail(decode)).transfer['abortsByState'] as unknown as Record<string, number>).reduce(
      (a, b) => a + b,
      0,
    );
  await waitUntil('decode to abort the transfer', async () => (await aborted()) > abortsBefore);
  const maxQuarantined = (await kvPages(decode.url)).quarantined;
  prefill.signal('SIGCONT');
  await allIdle([prefill, decode], 20_000);
  const node = String((await health(router.url)).body['node']);
  const rids = [...ridsOf(await readTraces(traceDir), node)];
  return {
    maxQuarantined,
    declaredDead: ((await detail(decode)).transfer['writersDeclaredDead'] as number) - deadBefore,
    rid: rids.at(-1) as string,
  };
}

/** What the defences promise; a fault that breaks one makes this throw. */
function expectDeferredRelease(o: Observed): void {
  expect(o.maxQuarantined, 'pages a writer may still write are quarantined').toBe(PAGES);
  expect(o.declaredDead, 'the writer acknowledged; it was not declared dead').toBe(0);
}

async function traceOf(o: Observed) {
  const traces = await readTraces(traceDir);
  return conformance(traces, new Set([o.rid]), true);
}

describe('aborts are acknowledged, and pages a peer may still write wait for it', () => {
  it("clean: quarantined until the writer's AbortAck, then released; the trace conforms", async () => {
    const o = await abortWhileWriterFrozen(rClean, pGood, dClean);
    expectDeferredRelease(o);
    expect(await traceOf(o)).toEqual(expect.objectContaining({ ok: true }));
  });

  it('drop-abort-ack is caught: no acknowledgement, so decode declares the writer dead and releases only on the close', async () => {
    const o = await abortWhileWriterFrozen(rNoAck, pNoAck, dClean);
    expect(() => expectDeferredRelease(o)).toThrow(/declared dead/);
    expect(o.maxQuarantined).toBe(PAGES); // still safe: quarantined all along
    expect(o.declaredDead).toBe(1);
    expect(await traceOf(o)).toEqual(expect.objectContaining({ ok: true })); // released after the close: allowed
  });

  it('free-before-ack is caught: the pages were never quarantined, and the trace breaks the model', async () => {
    const o = await abortWhileWriterFrozen(rFree, pGood, dFree);
    expect(() => expectDeferredRelease(o)).toThrow(/quarantined/);
    expect(o.maxQuarantined).toBe(0);
    const verdict = await traceOf(o);
    expect(verdict.ok).toBe(false);
    expect(verdict).toMatchObject({ reason: expect.stringMatching(/may still write/) });
  });
});
