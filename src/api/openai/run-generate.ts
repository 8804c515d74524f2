// Drives one client request through Backend.generate and writes its answer: a JSON body, or an
// SSE stream whose 200 is held back until the first token (or a finish with none). A request
// with `n` choices (of each of its prompts) is that many back-end requests (their own rids and
// seeds), run side by side; choice i is requests[i].
//
// Life of a generate call here:
//   1. generate(request, signal) is iterated for every choice at once; `tokens` events go out as
//      chunks of their choice (streaming) or accumulate (not streaming); TTFT and inter-token
//      gaps are observed.
//   2. A choice's `finished`: its final chunk (streaming). Once every choice finished: the usage
//      chunk (include_usage) and `[DONE]`; or the JSON body with every choice.
//   3. A choice's `failed` (or its iterator throws, or ends without a terminal event): the other
//      choices are aborted, and the request fails: before the stream started, with the error's
//      real status; after, with an SSE error event and no `[DONE]`.
//   4. The client left (signal aborted by the server): nothing is written; the outcome is
//      `aborted`; every iterator is still read to its end, so the back end finishes its aborts.
// Must never answer 200 for a request that failed (any of its choices), nor report success for
// one the client did not receive.
import {
  AbortedError,
  assertNever,
  isTesseraError,
  type FaultSet,
  type FinishReason,
  type GenerateEvent,
  type GenerateRequest,
  type TokenLogprob,
  type Usage,
} from '../../core/index.js';
import type { ServerResponse } from 'node:http';
import type { Backend } from '../backend.js';
import type { Clock } from '../http/clock.js';
import { problem, problemOf, type Problem } from '../http/errors.js';
import { sendJson, sendProblem } from '../http/http-io.js';
import type { ApiMetrics, Outcome } from '../ops/metrics.js';
import {
  chatDeltaChunk,
  echoChunk,
  finishChunk,
  fullResponse,
  logprobsTextLength,
  openingChunk,
  textChunk,
  usageChunk,
  type ResponseMeta,
} from './shapes.js';
import { echoTextOffset } from './echo.js';
import { answerSplitter, offersCalls, type AnswerSplitter } from './reasoning.js';
import { StreamingAnswer } from './tool-output.js';
import { SseStream } from '../http/sse.js';

export interface GenerateJob {
  /**
   * One back-end request per choice (own rid and seed), in choice order: choicesPerPrompt of
   * them per prompt, the prompts in order.
   */
  readonly requests: readonly GenerateRequest[];
  readonly choicesPerPrompt: number;
  readonly meta: ResponseMeta;
  readonly stream: boolean;
  /** Arrival time on the server's clock (ms). */
  readonly arrivedMs: number;
}

export interface RunContext {
  readonly backend: Backend;
  readonly metrics: ApiMetrics;
  readonly clock: Clock;
  readonly faults: FaultSet;
  /** Where back-end errors that are not TesseraErrors (bugs) are reported. */
  readonly logError: (message: string, error: unknown) => void;
}

type Finished = { readonly kind: 'finished'; readonly finishReason: FinishReason; readonly usage: Usage };
type End = Finished | { readonly kind: 'failed'; readonly problem: Problem };

interface Choice {
  text: string;
  readonly ids: number[];
  /** One per id in `ids` (not streaming), when the request asked for log-probabilities. */
  readonly logprobs: TokenLogprob[];
  /** Streaming: the text length (as logprobs count it) of the tokens sent so far: the next chunk's text_offset. */
  logprobsOffset: number;
  lastTokenMs: number | null;
  end: End | null;
  /** With meta.echo: the prompt's log-probabilities, from the first tokens event. */
  prompt?: readonly (TokenLogprob | null)[];
  /** Streaming with meta.echo: the prompt's part went out (echoChunk), before the first output token. */
  echoSent?: boolean;
  /** Chat with tools, streaming: text -> content and tool-call deltas. */
  readonly answer: StreamingAnswer | null;
  /** Chat with a reasoning parser, streaming: text -> reasoning_content deltas, the rest on as content. */
  readonly reasoning: AnswerSplitter | null;
}

/** `clientGone()`: true once the client disconnected (the caller aborted `signal` then). */
export async function runGenerate(
  job: GenerateJob,
  res: ServerResponse,
  signal: AbortSignal,
  clientGone: () => boolean,
  ctx: RunContext,
): Promise<Outcome> {
  const { meta } = job;
  const sse = job.stream ? new SseStream(res) : null;
  const answerOf = (): StreamingAnswer | null =>
    meta.endpoint === 'chat' && meta.tools !== undefined ? new StreamingAnswer(meta.tools) : null;
  const choices: Choice[] = job.requests.map(() => ({
    text: '',
    ids: [],
    logprobs: [],
    logprobsOffset: 0,
    lastTokenMs: null,
    end: null,
    answer: answerOf(),
    reasoning:
      meta.endpoint === 'chat' && meta.reasoning !== undefined
        ? answerSplitter(meta.reasoning, offersCalls(meta.tools))
        : null,
  }));
  let firstTokenSeen = false;
  /** The error the client gets: the first choice that failed (its siblings' aborts follow from it). */
  let failure: Problem | undefined;
  // One choice failing ends the others: the client gets one honest error, not part of an answer.
  const siblings = new AbortController();
  const choiceSignal = AbortSignal.any([signal, siblings.signal]);

  // Once, whichever choice gets there first; the others wait for every opening chunk to be out.
  let started: Promise<void> | undefined;
  const startStream = (stream: SseStream): Promise<void> =>
    (started ??= (async () => {
      stream.start();
      for (let index = 0; index < choices.length; index++) {
        const opening = openingChunk(meta, index);
        if (opening !== null) await stream.send(opening);
      }
    })());

  const onTokens = async (index: number, event: Extract<GenerateEvent, { type: 'tokens' }>): Promise<void> => {
    const choice = choices[index] as Choice;
    const now = ctx.clock.nowMs();
    if (!firstTokenSeen) ctx.metrics.observeTimeToFirstToken((now - job.arrivedMs) / 1000);
    else if (choice.lastTokenMs !== null)
      ctx.metrics.observeInterToken((now - choice.lastTokenMs) / 1000, event.ids.length);
    firstTokenSeen = true;
    choice.lastTokenMs = now;
    if (event.promptLogprobs !== undefined) choice.prompt = event.promptLogprobs;
    if (sse !== null && meta.echo !== undefined && choice.echoSent !== true) {
      // The prompt's part first, in a chunk of its own; the output's text offsets start after it.
      await startStream(sse);
      choice.echoSent = true;
      choice.logprobsOffset = echoTextOffset(meta.echo, index);
      await sse.send(echoChunk(meta, index, choice.prompt));
    }
    if (meta.echo?.promptOnly === true) return; // max_tokens 0: the one sampled token is not the answer's
    if (sse === null) {
      choice.text += event.text;
      choice.ids.push(...event.ids);
      choice.logprobs.push(...(event.logprobs ?? []));
      return;
    }
    await startStream(sse);
    let text = event.text;
    if (choice.reasoning !== null) {
      const piece = choice.reasoning.push(text);
      if (piece.reasoning !== '')
        await sse.send(chatDeltaChunk(meta, { reasoning_content: piece.reasoning }, null, index));
      text = piece.content;
    }
    if (choice.answer !== null) {
      for (const delta of choice.answer.push(text)) await sse.send(chatDeltaChunk(meta, delta, null, index));
      return;
    }
    const withIds = (meta.tokenIds !== null || meta.tokenText !== null) && event.ids.length > 0;
    if (text === '' && !withIds) return;
    const logprobs =
      event.logprobs === undefined
        ? undefined
        : { ids: event.ids, logprobs: event.logprobs, textOffset: choice.logprobsOffset };
    choice.logprobsOffset += logprobsTextLength(meta, event.ids);
    await sse.send(textChunk(meta, text, event.ids, index, logprobs));
  };

  const onEnd = async (index: number, end: End): Promise<void> => {
    const choice = choices[index] as Choice;
    if (choice.end !== null) return;
    choice.end = end;
    if (end.kind === 'failed') {
      failure ??= end.problem;
      siblings.abort(new AbortedError('another choice of this request failed'));
      return;
    }
    if (sse !== null && !clientGone() && failure === undefined) {
      await startStream(sse);
      const held = choice.reasoning?.end();
      if (held !== undefined && held.reasoning !== '')
        await sse.send(chatDeltaChunk(meta, { reasoning_content: held.reasoning }, null, index));
      if (held !== undefined && held.content !== '') {
        if (choice.answer === null) await sse.send(textChunk(meta, held.content, [], index));
        else
          for (const delta of choice.answer.push(held.content))
            await sse.send(chatDeltaChunk(meta, delta, null, index));
      }
      if (choice.answer !== null) {
        const last = choice.answer.end(end.finishReason);
        for (const delta of last.deltas) await sse.send(chatDeltaChunk(meta, delta, null, index));
        await sse.send(chatDeltaChunk(meta, {}, last.finishReason, index));
      } else await sse.send(finishChunk(meta, meta.echo?.promptOnly === true ? 'length' : end.finishReason, index));
    }
  };

  // Negative control only: with the headers out early, a failure before the first token
  // can no longer get its real status.
  if (sse !== null && ctx.faults.has('eager-stream-headers')) await startStream(sse);

  await Promise.all(
    job.requests.map(async (request, index) => {
      try {
        // A signal of its own per choice: a back end listens on it, and n choices' listeners on one
        // shared signal would pile up past Node's limit of 10 (MaxListenersExceededWarning).
        // AbortSignal.any follows its sources without adding listeners to them.
        for await (const event of ctx.backend.generate(request, AbortSignal.any([choiceSignal]))) {
          if (event.type === 'tokens') {
            if ((choices[index] as Choice).end === null) await onTokens(index, event);
            continue;
          }
          await onEnd(index, terminal(event));
          break;
        }
      } catch (error) {
        if (!isTesseraError(error)) ctx.logError(`back end failed request ${request.rid}`, error);
        await onEnd(index, { kind: 'failed', problem: problemOf(error) });
      }
      await onEnd(index, {
        kind: 'failed',
        problem: problem('internal', 'The back end ended the request without finishing it.'),
      });
    }),
  );

  if (clientGone()) return 'aborted';
  if (failure !== undefined) {
    if (sse !== null && sse.started) await sse.fail(failure);
    else sendProblem(res, failure);
    return failure.code;
  }
  // No failure: every choice finished.
  const finished = choices.map((c) => ({ text: c.text, ids: c.ids, logprobs: c.logprobs, end: c.end as Finished }));
  const promptOnly = meta.echo?.promptOnly === true; // max_tokens 0: no completion tokens, cut at 'length'
  const usage = totalUsage(
    finished.map((c) => (promptOnly ? { ...c.end.usage, completionTokens: 0 } : c.end.usage)),
    job.choicesPerPrompt,
  );
  if (sse === null) {
    sendJson(
      res,
      200,
      fullResponse(
        meta,
        finished.map((c, index) => ({
          text: c.text,
          ids: c.ids,
          logprobs: c.logprobs,
          finishReason: promptOnly ? 'length' : c.end.finishReason,
          ...(choices[index]?.prompt === undefined ? {} : { promptLogprobs: choices[index].prompt }),
        })),
        usage,
      ),
    );
  } else {
    await startStream(sse);
    if (meta.includeUsage) await sse.send(usageChunk(meta, usage));
    await sse.done();
  }
  if (clientGone()) return 'aborted';
  ctx.metrics.observeEndToEnd((ctx.clock.nowMs() - job.arrivedMs) / 1000);
  return 'success';
}

/** Each prompt once (its choices share it: the first of each `perPrompt` counts), the completions of all. */
function totalUsage(usages: readonly Usage[], perPrompt: number): Usage {
  const firsts = usages.filter((_, i) => i % perPrompt === 0);
  const sum = (of: readonly Usage[], field: 'promptTokens' | 'completionTokens' | 'cachedTokens') =>
    of.reduce((total, u) => total + u[field], 0);
  return {
    promptTokens: sum(firsts, 'promptTokens'),
    completionTokens: sum(usages, 'completionTokens'),
    cachedTokens: sum(firsts, 'cachedTokens'),
    ...(usages.some((u) => u.draftTokens !== undefined)
      ? {
          draftTokens: usages.reduce((total, u) => total + (u.draftTokens ?? 0), 0),
          acceptedDraftTokens: usages.reduce((total, u) => total + (u.acceptedDraftTokens ?? 0), 0),
        }
      : {}),
  };
}

function terminal(event: Exclude<GenerateEvent, { type: 'tokens' }>): End {
  switch (event.type) {
    case 'finished':
      return { kind: 'finished', finishReason: event.finishReason, usage: event.usage };
    case 'failed':
      return { kind: 'failed', problem: problemOf(event.error) };
    default:
      return assertNever(event, 'generate event');
  }
}
