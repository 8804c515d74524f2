// The prompt byte bound (prompt-bound.ts) in the API server: a text prompt whose UTF-8 bytes
// could not fit the context is refused from its length alone, before any tokenization, and a
// body past the limit derived from the context gets a 413 unread. The negative control
// `skip-prompt-bound` (the limits as before the bound) fails both: the same prompt is tokenized
// and refused only by its token count, and the body is read whole.
// (test/e2e/serve-robust.test.ts checks it against a real `tessera serve`.)
import { afterEach, describe, expect, it } from 'vitest';
import { FaultSet, NO_FAULTS } from '../../core/index.js';
import { bodyLimitFor, longestTokenBytes, maxPromptBytes } from './prompt-bound.js';
import { DEFAULT_MAX_BODY_BYTES } from '../http/server.js';
import { fakeCodec } from '../testing/fake-backend.js';
import { send, startTestServer, type TestServer } from '../testing/harness.js';

const CONTEXT = 16;
const PROMPT_BYTES = maxPromptBytes(CONTEXT, longestTokenBytes(fakeCodec));
const BODY_LIMIT = bodyLimitFor(PROMPT_BYTES, DEFAULT_MAX_BODY_BYTES);

let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

/** How the server refuses a prompt one byte past the bound, and a body 1 MiB past the derived limit. */
async function overlong(faults: FaultSet): Promise<{ prompt: string; responses: string; body: string }> {
  t = await startTestServer({ contextLength: CONTEXT, faults });
  const how = (asked: Awaited<ReturnType<typeof send>>): string => {
    const fromLength = /your prompt is \d+ bytes long/.test(String(asked.json?.error?.message));
    return `${asked.status} ${asked.json?.error?.code} ${fromLength ? 'from its length' : 'after tokenizing'}`;
  };
  const text = 'a'.repeat(PROMPT_BYTES + 1);
  const prompt = how(await send(t.url, 'POST', '/v1/completions', { prompt: text, max_tokens: 1 }));
  const responses = how(await send(t.url, 'POST', '/v1/responses', { input: text, max_output_tokens: 1 }));
  const big = await send(t.url, 'POST', '/v1/completions', {
    prompt: 'b'.repeat(BODY_LIMIT + (1 << 20)),
    max_tokens: 1,
  });
  return { prompt, responses, body: `${big.status} ${big.json?.error?.code}` };
}

describe('the prompt byte bound', () => {
  it('refuses a prompt that cannot fit from its length alone, and a body past the derived limit with 413', async () => {
    expect(BODY_LIMIT + (1 << 20)).toBeLessThan(DEFAULT_MAX_BODY_BYTES); // the derived limit is the one at work
    expect(await overlong(NO_FAULTS)).toEqual({
      prompt: '400 context_length_exceeded from its length',
      responses: '400 context_length_exceeded from its length',
      body: '413 body_too_large',
    });
  });

  it('negative control: with skip-prompt-bound both are read and tokenized, refused only by their token count', async () => {
    expect(await overlong(new FaultSet(['skip-prompt-bound']))).toEqual({
      prompt: '400 context_length_exceeded after tokenizing',
      responses: '400 context_length_exceeded after tokenizing',
      body: '400 context_length_exceeded',
    });
  });
});
