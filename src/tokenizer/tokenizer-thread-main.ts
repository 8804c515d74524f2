// A tokenizer thread (a worker_thread; tokenizer-pool.ts is the other side). It builds the
// Tokenizer and ChatTemplate from the recipe the main thread's own were built from, then answers
// one job at a time: render (chat) and encode, the ids in a transferred Int32Array. A template
// that refuses the messages is answered `invalid` (the client's 400); any other throw `failed`.
// Chat: the user's strings are escaped before rendering and the rendering encoded with
// encodeRendered, so only the template emits control tokens (tokenizer-plain-text.ts), unless
// the `parse-special-in-content` fault point is on (tests only).
// It must never hold state between jobs, or answer a job it was not sent.
//
//   main -> thread   { kind: 'job', id, job }
//   thread -> main   { kind: 'ready' } once, then per job
//                    { kind: 'done', id, ids } | { kind: 'invalid', id, message, param } | { kind: 'failed', id, message }
import { parentPort, workerData } from 'node:worker_threads';
import { assert, isInvalidRequestError } from '../core/index.js';
import { createChatTemplate } from './chat-template.js';
import { createTokenizer, type TokenizerSources } from './tokenizer.js';
import {
  TOKENIZER_CRASH_MARKER,
  type TokenizeJob,
  type TokenizerThreadData,
  type TokenizerThreadReply,
  type TokenizerThreadRequest,
} from './tokenizer-messages.js';

const port = parentPort;
assert(port !== null, 'tokenizer-thread-main.ts runs as a worker thread');
const data = workerData as TokenizerThreadData;
const sources = JSON.parse(data.recipe.sourcesJson) as TokenizerSources;
const tokenizer = createTokenizer(sources);
const template = createChatTemplate(data.recipe.chatTemplate, tokenizer, sources.file);
const crashOnMarker = data.faults.includes('crash-tokenizer-thread');
const parseSpecialInContent = data.faults.includes('parse-special-in-content');

function run(job: TokenizeJob): number[] {
  switch (job.kind) {
    case 'text':
      if (crashOnMarker && job.text.includes(TOKENIZER_CRASH_MARKER)) process.exit(70);
      return tokenizer.encode(job.text, { addSpecialTokens: job.addSpecialTokens, cacheScope: job.cacheScope });
    case 'chat': {
      if (crashOnMarker && job.messages.some((m) => m.content.includes(TOKENIZER_CRASH_MARKER))) process.exit(70);
      const text = template.render(job.messages, {
        addGenerationPrompt: job.addGenerationPrompt,
        ...(job.tools === undefined ? {} : { tools: job.tools }),
        ...(job.templateKwargs === undefined ? {} : { templateKwargs: job.templateKwargs }),
        ...(parseSpecialInContent ? {} : { escapeText: (t: string) => tokenizer.escapePlain(t) }),
      });
      return tokenizer.encodeRendered(text, { addSpecialTokens: job.addSpecialTokens, cacheScope: job.cacheScope });
    }
  }
}

function reply(message: TokenizerThreadReply, transfer: ArrayBuffer[] = []): void {
  port!.postMessage(message, transfer);
}

port.on('message', (m: TokenizerThreadRequest) => {
  try {
    const ids = Int32Array.from(run(m.job));
    reply({ kind: 'done', id: m.id, ids }, [ids.buffer]);
  } catch (error) {
    if (isInvalidRequestError(error))
      reply({ kind: 'invalid', id: m.id, message: error.message, param: error.param ?? null });
    else reply({ kind: 'failed', id: m.id, message: error instanceof Error ? error.message : String(error) });
  }
});
reply({ kind: 'ready' });
