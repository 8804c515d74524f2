// The router of `tessera up` tokenizes off its main thread too: while 128 chat prompts of 6 KB
// are templated and tokenized there, its /health (the relay's own thread) is held up less than half
// as long as with `inline-tokenize` (the negative control, armed in every process of the cluster),
// the two measured by turns in the same run (an absolute bound failed beside two busy loops); the
// control alone holds it up at least HEALTH_MAX_MS. Measured on the 2-core machine at load average ~18
// (`TARGET=up npm run bench:tokenize`, 3 bursts each): threads /health max 42-110 ms; inline
// 525-2388 ms. test/e2e/serve-tokenize.test.ts checks the threads' ids against the inline path.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokenizeBurst } from '../support/tokenize-burst.js';
import { spawnTessera, useTestHome, type Proc } from './support.js';

const HEALTH_MAX_MS = 250;
const POOL = ['--context-length', '4096', '--kv-pages', '256'];

const home = useTestHome();
const clusters: Proc[] = [];
let threaded: string;
let inline: string;

function startUp(env: Record<string, string>): Promise<string> {
  const cluster = spawnTessera('up', ['up', '--port', '0', ...POOL], home.dir, env);
  clusters.push(cluster);
  return cluster.waitFor(/listening on (http:\/\/[\d.]+:\d+)/).then((m) => m[1] as string);
}

beforeAll(async () => {
  [threaded, inline] = await Promise.all([
    startUp({}),
    startUp({ TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'inline-tokenize' }),
  ]);
}, 120_000);
afterAll(async () => {
  await Promise.all(clusters.map((c) => c.stop()));
});

async function worstHealthMs(url: string): Promise<number> {
  return (await tokenizeBurst(url, { numPrompts: 128, promptBytes: 6144 })).health.maxMs;
}

/**
 * The worst /health stall of each cluster over two bursts, the clusters taking turns, so both see
 * the same machine: a busy machine slows both, and the comparison stays about the main thread.
 */
let worst: Promise<{ readonly threaded: number; readonly inline: number }> | undefined;
function measure(): Promise<{ readonly threaded: number; readonly inline: number }> {
  worst ??= (async () => {
    let t = 0;
    let i = 0;
    for (let round = 0; round < 2; round++) {
      t = Math.max(t, await worstHealthMs(threaded));
      i = Math.max(i, await worstHealthMs(inline));
    }
    return { threaded: t, inline: i };
  })();
  return worst;
}

describe("tessera up's router tokenizes off its main thread", () => {
  it('holds /health up less than half as long as tokenizing on the main thread does, in the same run', async () => {
    const w = await measure();
    expect(w.threaded * 2).toBeLessThan(w.inline);
  }, 120_000);

  it(`(control) with inline-tokenize, the same burst holds /health up at least ${HEALTH_MAX_MS} ms`, async () => {
    expect((await measure()).inline).toBeGreaterThanOrEqual(HEALTH_MAX_MS);
  }, 120_000);
});
