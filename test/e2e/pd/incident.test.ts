// The incident cannot recur, over real processes. One set of workers, several routers, each
// router pairing one prefill with one decode:
//   bad     = placeholder-done prefill (writes the first page, claims the whole prompt) -> clean decode
//   control = the same prefill -> a decode with skip-page-check (coverage and read checks off)
//   ref     = a clean prefill -> the clean decode
//   corrupt = a corrupt-chunk prefill (one bit flipped in the first frame) -> the clean decode
// With the checks on, the placeholder transfer fails closed: 5xx, no token. With them off (the
// negative control) the same request "succeeds" with output other than the reference: the fault
// point is real and the check is what stops it. Every corrupt frame is caught. The traces of
// the clean paths conform to the model; the negative control's trace does not.
import OpenAI from 'openai';
import { mkdtemp } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  allIdle,
  conformance,
  detail,
  greedyIds,
  health,
  promptIds,
  readTraces,
  ridsOf,
  scrape,
  startRouter,
  startWorker,
  useTestHome,
  type Router,
  type Worker,
} from './support.js';

const home = useTestHome();
let traceDir: string;
let controlTraceDir: string;
const procs: { stop(): Promise<unknown> }[] = [];
let pBad: Worker, pGood: Worker, pCorrupt: Worker, dClean: Worker, dSkip: Worker;
let bad: Router, control: Router, ref: Router, corrupt: Router;

const POOL = ['--context-length', '256', '--kv-pages', '48'];
const faults = (names: string) => ({ TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: names });

beforeAll(async () => {
  traceDir = await mkdtemp(join(home.dir, 'trace-'));
  controlTraceDir = await mkdtemp(join(home.dir, 'trace-control-'));
  const trace = { TESSERA_TRACE_DIR: traceDir };
  const controlTrace = { TESSERA_TRACE_DIR: controlTraceDir };
  [pBad, pGood, pCorrupt, dClean, dSkip] = await Promise.all([
    startWorker('p-bad', 'prefill', POOL, home.dir, { ...faults('placeholder-done'), ...trace }),
    startWorker('p-good', 'prefill', POOL, home.dir, trace),
    startWorker('p-corrupt', 'prefill', POOL, home.dir, { ...faults('corrupt-chunk'), ...trace }),
    startWorker('d-clean', 'decode', POOL, home.dir, trace),
    startWorker('d-skip', 'decode', POOL, home.dir, { ...faults('skip-page-check'), ...controlTrace }),
  ]);
  procs.push(pBad, pGood, pCorrupt, dClean, dSkip);
  [bad, control, ref, corrupt] = await Promise.all([
    startRouter('r-bad', [pBad], [dClean], [], home.dir, trace),
    startRouter('r-control', [pBad], [dSkip], [], home.dir, controlTrace),
    startRouter('r-ref', [pGood], [dClean], [], home.dir, trace),
    startRouter('r-corrupt', [pCorrupt], [dClean], [], home.dir, trace),
  ]);
  procs.push(bad, control, ref, corrupt);
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop()));
});

const PROMPT = promptIds(40, 3000); // 3 pages of 16: the placeholder covers only the first

describe('the placeholder bug (placeholder-done) over real processes', () => {
  it('fails closed: HTTP 5xx and not one token, streamed or not; every page comes back', async () => {
    const before = (await detail(dClean)).transfer;
    const client = bad.client();
    const error = await client.completions
      .create({ model: 'builtin:tiny', prompt: PROMPT, max_tokens: 8 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
    expect(String((error as Error).message)).toMatch(/stamps cover 16 of the prompt's 40 tokens/);

    // Streamed: the status is held until the first token, so the failure is still a 502, with no chunk before it.
    let chunks = 0;
    const streamed = await (async () => {
      for await (const _ of await client.completions.create({
        model: 'builtin:tiny',
        prompt: PROMPT,
        max_tokens: 8,
        stream: true,
      }))
        chunks++;
    })().catch((e: unknown) => e);
    expect((streamed as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
    expect(chunks).toBe(0);

    const after = (await detail(dClean)).transfer;
    expect(after['transfersFailed'] - before['transfersFailed']).toBe(2);
    expect(after['transfersVerified']).toBe(before['transfersVerified']);
    await allIdle([pBad, dClean].map((w) => ({ url: w.url, name: w.name })));
  });

  it('negative control: with skip-page-check on decode, the same request gets 200 with other output than the reference', async () => {
    // Earlier requests leave their K/V in d-skip's pages (pages are never zeroed).
    for (let i = 0; i < 3; i++) await greedyIds(control.client(), promptIds(60, 7000 + i), 4);
    const reference = await greedyIds(ref.client(), PROMPT, 16);
    const leaked = await greedyIds(control.client(), PROMPT, 16);
    expect(reference).toHaveLength(16);
    expect(leaked).toHaveLength(16);
    expect(leaked).not.toEqual(reference);
  });

  it('corrupt-chunk is caught every time: 502, a checksum failure counted per request, nothing decoded', async () => {
    const before = (await detail(dClean)).transfer;
    const client = corrupt.client();
    const statuses: number[] = [];
    for (const [n, first] of [
      [3, 1],
      [16, 50],
      [17, 90],
      [40, 300],
      [100, 900],
    ] as const) {
      const e = await client.completions
        .create({ model: 'builtin:tiny', prompt: promptIds(n, first), max_tokens: 4 })
        .catch((x: unknown) => x);
      statuses.push((e as InstanceType<typeof OpenAI.APIError>).status ?? 200);
    }
    expect(statuses).toEqual([502, 502, 502, 502, 502]);
    const after = (await detail(dClean)).transfer;
    expect(after['checksumFailures'] - before['checksumFailures']).toBe(5);
    expect(after['transfersVerified']).toBe(before['transfersVerified']);
    expect((await scrape(corrupt.url)).get('tessera_kv_transfer_checksum_failures_total')).toBeGreaterThanOrEqual(5);
    // The clean path still works, on the same decode.
    expect(await greedyIds(ref.client(), promptIds(20, 5), 4)).toHaveLength(4);
    await allIdle([pCorrupt, pGood, dClean].map((w) => ({ url: w.url, name: w.name })));
  });

  it("the clean paths' traces conform to the protocol model; the negative control's does not", async () => {
    await allIdle([pBad, pGood, pCorrupt, dClean, dSkip].map((w) => ({ url: w.url, name: w.name })));
    const traces = await readTraces(traceDir);
    const routers = await Promise.all([bad, ref, corrupt].map(async (r) => String((await health(r.url)).body['node'])));
    const rids = new Set(routers.flatMap((node) => [...ridsOf(traces, node)]));
    expect(rids.size).toBeGreaterThanOrEqual(9);
    const clean = conformance(traces, rids, true);
    expect(clean).toEqual(expect.objectContaining({ ok: true }));
    expect(clean.numEvents).toBeGreaterThan(200);

    // d-skip and r-control trace into their own directory; p-bad's events for their requests are in the main one.
    const controlRids = new Set(
      (await readTraces(controlTraceDir)).events.flatMap((e) => (e.kind === 'close' ? [] : [e.rid])),
    );
    const verdict = conformance(await readTraces(traceDir, controlTraceDir), controlRids, false);
    expect(verdict.ok).toBe(false);
    expect(verdict).toMatchObject({
      reason: expect.stringMatching(/without full coverage|stamp says epoch|not written for/),
    });
  });
});
