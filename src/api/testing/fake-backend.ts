// Test support: an in-memory Backend that records every call (request, tenant, signal) and
// answers from a script, a PromptCodec with one token per code point, and a manual clock.
// Must never be wired into a real server (src/cli uses the worker or the router).
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import {
  AbortedError,
  type GenerateEvent,
  type GenerateRequest,
  type PageCounts,
  type PageMap,
  type TesseraError,
  type TokenLogprob,
} from '../../core/index.js';
import type { Backend, BackendHealth, BackendStats, PromptCodec } from '../backend.js';
import type { Clock } from '../http/clock.js';

export interface FakeCall {
  readonly request: GenerateRequest;
  readonly signal: AbortSignal;
}

export type FakeScript = (request: GenerateRequest, signal: AbortSignal) => AsyncIterable<GenerateEvent>;

/** The words the default script generates, one token each, cycling. */
export const FAKE_WORDS = ['Hello', ' world', ',', ' this', ' is', ' Tessera', '.'] as const;

export class FakeBackend implements Backend {
  readonly modelName: string;
  readonly root = '/models/fake';
  readonly contextLength: number;
  readonly calls: FakeCall[] = [];
  script: FakeScript = wordScript();
  health: () => Promise<BackendHealth> = async () => ({ healthy: true, detail: { backend: 'fake' } });
  statsSnapshot: BackendStats = {
    kvPages: { free: 10, allocated: 0, cached: 0, quarantined: 0 } satisfies PageCounts,
    requestsRunning: 0,
    requestsWaiting: 0,
    tagMismatchesTotal: 0,
  };

  constructor(options: { readonly contextLength?: number; readonly modelName?: string } = {}) {
    this.contextLength = options.contextLength ?? 64;
    this.modelName = options.modelName ?? 'fake-model';
  }

  generate(request: GenerateRequest, signal: AbortSignal): AsyncIterable<GenerateEvent> {
    this.calls.push({ request, signal });
    return this.script(request, signal);
  }

  async stats(): Promise<BackendStats> {
    return this.statsSnapshot;
  }

  /** A pool of statsSnapshot's pages, all free (the dashboard route's tests). */
  async pageMap(): Promise<PageMap> {
    const numPages = Object.values(this.statsSnapshot.kvPages).reduce((a, b) => a + b, 0);
    return {
      kind: 'node',
      role: 'colocated',
      node: 'fake',
      pageSize: 16,
      numPages,
      states: 'f'.repeat(numPages),
      epochs: new Array<number>(numPages).fill(0),
      holderOf: new Array<null>(numPages).fill(null),
      holders: [],
      transfers: [],
      quarantined: [],
      running: 0,
      waiting: 0,
      loop: { numSteps: 0, numTokensSampled: 0, stepMsTotal: 0, numItemsStepped: 0 },
      totals: {},
    };
  }

  get lastCall(): FakeCall {
    const call = this.calls.at(-1);
    if (call === undefined) throw new Error('the fake back end was never called');
    return call;
  }
}

export interface WordScriptOptions {
  readonly cachedTokens?: number;
  /** Called before each token: e.g. advance a FakeClock. */
  readonly beforeToken?: (index: number) => void;
}

/**
 * Generates FAKE_WORDS until max_tokens ('length') or a stop string ('stop', the match and what
 * follows it withheld), one token per event; ends early when the signal aborts.
 */
export function wordScript(options: WordScriptOptions = {}): FakeScript {
  return async function* (request, signal) {
    const { maxTokens, stop } = request.sampling;
    let text = '';
    let sent = 0;
    for (let i = 0; i < maxTokens; i++) {
      await yieldToLoop();
      if (signal.aborted) {
        yield { type: 'failed', error: new AbortedError('client disconnected') };
        return;
      }
      options.beforeToken?.(i);
      text += FAKE_WORDS[i % FAKE_WORDS.length] as string;
      const at = Math.min(...stop.map((s) => text.indexOf(s)).filter((j) => j >= 0));
      const visible = Number.isFinite(at) ? text.slice(0, at) : text;
      const id = 100 + (i % FAKE_WORDS.length);
      yield { type: 'tokens', ids: [id], text: visible.slice(sent), ...fakeLogprobs(request, id, i) };
      sent = visible.length;
      if (Number.isFinite(at)) {
        yield finished('stop', request, i + 1, options.cachedTokens ?? 0);
        return;
      }
    }
    yield finished('length', request, maxTokens, options.cachedTokens ?? 0);
  };
}

/**
 * With sampling.logprobs = N: the token's log-probability -0.25 * (step + 1), and N alternatives
 * (the token itself first, then ids 200, 201, ... at -5, -6, ...).
 */
export function fakeLogprobs(
  request: GenerateRequest,
  id: number,
  step: number,
): { logprobs?: readonly TokenLogprob[] } {
  const n = request.sampling.logprobs;
  if (n === null) return {};
  const logprob = -0.25 * (step + 1);
  const top = Array.from({ length: n }, (_, k) => (k === 0 ? { id, logprob } : { id: 200 + k - 1, logprob: -4 - k }));
  return { logprobs: [{ logprob, top }] };
}

function finished(
  finishReason: 'stop' | 'length',
  request: GenerateRequest,
  completionTokens: number,
  cachedTokens: number,
): GenerateEvent {
  return {
    type: 'finished',
    finishReason,
    usage: { promptTokens: request.promptTokens.length, completionTokens, cachedTokens },
  };
}

/** The word script's first `numTokens` token events, its length unbounded by the request's max_tokens. */
async function* firstWords(
  request: GenerateRequest,
  signal: AbortSignal,
  numTokens: number,
): AsyncGenerator<GenerateEvent> {
  let i = 0;
  for await (const event of wordScript()({ ...request, sampling: { ...request.sampling, maxTokens: 1000 } }, signal)) {
    if (i++ === numTokens) break;
    yield event;
  }
}

/** Yields `numTokens` tokens of the word script, then fails with `error`. 0: fails first. */
export function failingScript(numTokens: number, error: TesseraError): FakeScript {
  return async function* (request, signal) {
    yield* firstWords(request, signal, numTokens);
    yield { type: 'failed', error };
  };
}

/** Throws `error` from the iterator after `numTokens` tokens (a back end that throws instead of yielding `failed`). */
export function throwingScript(numTokens: number, error: unknown): FakeScript {
  return async function* (request, signal) {
    yield* firstWords(request, signal, numTokens);
    throw error;
  };
}

/** Yields `numTokens` tokens, then waits for the abort and ends with an AbortedError. */
export function untilAbortScript(numTokens: number, onStarted?: () => void): FakeScript {
  return async function* (request, signal) {
    for (let i = 0; i < numTokens; i++)
      yield { type: 'tokens', ids: [100 + i], text: FAKE_WORDS[i % FAKE_WORDS.length] as string };
    onStarted?.();
    if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
    yield { type: 'failed', error: new AbortedError(`aborted after ${numTokens} tokens of ${request.rid}`) };
  };
}

/** BOS = 1; every code point c is token c + 2 (in prompts). Chat: `<|role|>content\n` per turn. */
export const fakeCodec: PromptCodec = {
  vocabSize: 0x110000 + 2,
  encode(text, { addSpecialTokens }) {
    const ids = Array.from(text, (c) => (c.codePointAt(0) as number) + 2);
    return addSpecialTokens ? [1, ...ids] : ids;
  },
  /** The word script's ids 100.. are its words; any other id c + 2 is the code point c. */
  tokenText(id) {
    const word = FAKE_WORDS[id - 100];
    if (word !== undefined) return word;
    return id >= 2 ? String.fromCodePoint(id - 2) : id === 1 ? '<s>' : '';
  },
  renderChat(messages, { addGenerationPrompt }) {
    return messages.map((m) => `<|${m.role}|>${m.content}\n`).join('') + (addGenerationPrompt ? '<|assistant|>' : '');
  },
};

export class FakeClock implements Clock {
  #ms = 1_000;
  nowMs(): number {
    return this.#ms;
  }
  unixSeconds(): number {
    return 1_700_000_000 + Math.floor(this.#ms / 1000);
  }
  advance(ms: number): void {
    this.#ms += ms;
  }
}
