// slot-reuse against a scripted server (no network): clean when B's new requests show no cached
// state; a finding when the server reports cached tokens B's prompt cannot share (#27148's
// restored conversation), or echoes A's canaries; inconclusive when it reports no cached tokens.
import { describe, expect, it } from 'vitest';
import { Rng } from '../core/index.js';
import type { ProbeClient } from './client.js';
import { slotReuse } from './slot-reuse.js';
import type { RequestRecord, ServerFacts } from './types.js';

interface Script {
  /** cached_tokens for a request of tenant B with a token-id prompt; undefined: not reported. */
  readonly bCached: number | undefined;
  /** B's output text, given the last prompt A sent. */
  readonly bText: (lastA: string) => string;
  /** cached_tokens for B's requests that open with half of A's token-id conversation (default bCached). */
  readonly restoreCached?: number;
}

function stubClient(script: Script): ProbeClient {
  let id = 0;
  let lastA = '';
  return {
    complete: async (tenant: 'A' | 'B', purpose: string, body: Record<string, unknown>): Promise<RequestRecord> => {
      const prompt = body['prompt'];
      if (tenant === 'A' && typeof prompt === 'string') lastA = prompt;
      const cached =
        script.bCached === undefined
          ? undefined
          : tenant === 'A'
            ? purpose.includes('control')
              ? 200
              : 0
            : purpose.includes('opening with half')
              ? (script.restoreCached ?? script.bCached)
              : script.bCached;
      return {
        id: ++id,
        check: 'slot-reuse',
        tenant,
        method: 'POST',
        path: '/v1/completions',
        body,
        purpose,
        startMs: 0,
        status: 200,
        totalMs: 5,
        texts: [tenant === 'A' ? 'sure' : script.bText(lastA)],
        usage: cached === undefined ? { prompt_tokens: 10 } : { prompt_tokens_details: { cached_tokens: cached } },
      };
    },
  } as unknown as ProbeClient;
}

const facts: ServerFacts = {
  model: 'm',
  contextLength: 1024,
  contextSource: '/props',
  slots: 4,
  poolLimit: null,
  sameKey: true,
};

const run = (script: Script) =>
  slotReuse({
    client: stubClient(script),
    facts,
    rng: new Rng(7),
    budget: 32,
    batchInvariant: false,
    progress: () => undefined,
  });

describe('slot-reuse', () => {
  it('is clean when B is served on nothing of A', async () => {
    const r = await run({ bCached: 1, bText: () => 'lorem' });
    expect(r.status).toBe('clean');
    expect(r.figures['controlCached']).toBe(200);
  });
  it("finds cached tokens B's fresh prompt cannot share (a restored conversation)", async () => {
    const r = await run({ bCached: 37, bText: () => 'lorem' });
    expect(r.status).toBe('finding');
    expect(r.findings[0]?.what).toMatch(/8 of B's 8 new requests .* 37 cached tokens .*#27148/);
  });
  it("finds a restored conversation reused past what B's request shares with it", async () => {
    const clean = await run({ bCached: 0, restoreCached: 49, bText: () => 'lorem' });
    expect(clean.status).toBe('clean'); // 48 shared + BOS: the shared half only
    const r = await run({ bCached: 0, restoreCached: 95, bText: () => 'lorem' });
    expect(r.status).toBe('finding');
    expect(r.findings[0]?.what).toMatch(/8 of B's 8 requests that share 48 tokens .*up to 95.*#27148/);
  });
  it("finds A's canaries in B's outputs", async () => {
    const r = await run({ bCached: 0, bText: (a) => a.split(': ')[2] ?? '' });
    expect(r.status).toBe('finding');
    expect(r.findings.map((f) => f.what).join()).toMatch(/carry A's canaries/);
  });
  it('is inconclusive where the server reports no cached tokens', async () => {
    const r = await run({ bCached: undefined, bText: () => 'lorem' });
    expect(r.status).toBe('inconclusive');
    expect(r.summary).toMatch(/reports no cached_tokens/);
  });
});
