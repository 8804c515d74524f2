// KV events and tier counters, what they cost the prefix cache (`npm run bench:kv-events`), in one
// run, arms interleaved round by round: a pool of 16-token pages where each request of a fresh
// tenant computes and caches a 512-token prompt, then asks for it again (a 32-page hit), then it
// is evicted. Arms: a plain PrefixCache; the same publishing KV events into a KvEventRing (a keyed
// HMAC per page stored and removed); CountedPrefixCache (the tier counters, over a disk-tier-shaped
// store's stats). Prints microseconds per page cached (compute, insert, hit, evict), best of the
// rounds, and each arm's ratio to the plain cache. A benchmark: it asserts nothing.
//
//   node --import ./bench/lib/register-ts.mjs bench/kv-events.ts [--rounds 7] [--requests 200]
import { asRequestId, asTenantId, type Tag } from '../src/core/index.js';
import { KvEventRing, PagePool, pagesFor, PrefixCache, PrefixHasher, type Owner } from '../src/pages/index.js';
import { CountedPrefixCache } from '../src/worker/index.js';

const args = process.argv.slice(2);
const flag = (name: string, fallback: number): number => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const ROUNDS = flag('--rounds', 7);
const REQUESTS = flag('--requests', 200);
const PAGE = 16;
const PROMPT = 512;
const NUM_PAGES = 2 * pagesFor(PROMPT + 1, PAGE);

type Arm = 'plain' | 'events' | 'counted';
let rids = 0;

function cacheFor(arm: Arm, pool: PagePool): PrefixCache {
  switch (arm) {
    case 'plain':
      return new PrefixCache({ pool });
    case 'events':
      return new PrefixCache({ pool, events: new KvEventRing(new PrefixHasher('bench-secret')) });
    case 'counted':
      return new CountedPrefixCache({ pool });
  }
}

/** One request: match, allocate the rest, stamp, insert. */
function serve(pool: PagePool, cache: PrefixCache, who: Owner, tokens: readonly number[]): void {
  const hit = cache.match(who, tokens.slice(0, -1));
  const result = cache.allocate(pagesFor(tokens.length, PAGE) - hit.tags.length, who);
  if (result.kind !== 'allocated') throw new Error('out of pages');
  const table = [...hit.tags, ...result.tags];
  for (let i = hit.tags.length; i < table.length; i++)
    pool.stamp(table[i] as Tag, Math.min(PAGE, tokens.length - i * PAGE));
  cache.insert(who, tokens, table);
}

/** Microseconds per cached page over REQUESTS tenants: compute and cache, hit, evict. */
function run(arm: Arm): number {
  const pool = PagePool.create({ numPages: NUM_PAGES, pageSize: PAGE, numLayers: 1, numKvHeads: 1, headDim: 1 });
  const cache = cacheFor(arm, pool);
  const started = performance.now();
  for (let r = 0; r < REQUESTS; r++) {
    const tenant = asTenantId(`tenant-${r}`);
    const tokens = Array.from({ length: PROMPT + 1 }, (_, i) => 1000 + ((r * 7919 + i * 104_729) % 30_000));
    serve(pool, cache, { rid: asRequestId(`r${++rids}`), tenant }, tokens);
    serve(pool, cache, { rid: asRequestId(`r${++rids}`), tenant }, tokens);
    cache.evict(cache.numPages);
  }
  return ((performance.now() - started) * 1000) / (REQUESTS * Math.floor(PROMPT / PAGE));
}

const ARMS: readonly Arm[] = ['plain', 'events', 'counted'];
const best = new Map<Arm, number>(ARMS.map((arm) => [arm, Infinity]));
for (const arm of ARMS) run(arm); // warm-up
for (let round = 0; round < ROUNDS; round++)
  for (const arm of round % 2 === 0 ? ARMS : [...ARMS].reverse()) best.set(arm, Math.min(best.get(arm)!, run(arm)));

const plain = best.get('plain')!;
console.log(`prefix cache, ${REQUESTS} tenants x ${PROMPT}-token prompt (${PROMPT / PAGE} pages), best of ${ROUNDS}:`);
for (const arm of ARMS) {
  const us = best.get(arm)!;
  console.log(
    `  ${arm.padEnd(8)} ${us.toFixed(2).padStart(7)} us per page (cached, hit, evicted)  x${(us / plain).toFixed(2)}`,
  );
}
