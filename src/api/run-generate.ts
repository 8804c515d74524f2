// Drives one request through Backend.generate and writes its answer: a JSON body, or an SSE
// stream whose 200 is held back until the first token (or a finish with none).
//
// Life of a generate call here:
//   1. generate(request, signal) is iterated; `tokens` events go out as chunks (streaming) or
//      accumulate (not streaming); TTFT and inter-token gaps are observed.
//   2. `finished`: the final chunk, the usage chunk (include_usage), `[DONE]`; or the JSON body.
//   3. `failed` (or the iterator throws, or ends without a terminal event): before the stream
//      started, the error's real status; after, an SSE error event and no `[DONE]`.
//   4. The client left (signal aborted by the server): nothing is written; the outcome is
//      `aborted`; the iterator is still read to its end, so the back end finishes its abort.
// Must never answer 200 for a request that failed, nor report success for one the client
// did not receive.
import { assertNever, isTesseraError, type FaultSet, type FinishReason, type GenerateEvent, type GenerateRequest, type Usage } from '../core/index.js';
import type { ServerResponse } from 'node:http';
import type { Backend } from './backend.js';
import type { Clock } from './clock.js';
import { problem, problemOf, type Problem } from './errors.js';
import { sendJson, sendProblem } from './http-io.js';
import type { ApiMetrics, Outcome } from './metrics.js';
import { finishChunk, fullResponse, openingChunk, textChunk, usageChunk, type ResponseMeta } from './shapes.js';
import { SseStream } from './sse.js';

export interface GenerateJob {
  readonly request: GenerateRequest;
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

type End = { readonly kind: 'finished'; readonly finishReason: FinishReason; readonly usage: Usage } | { readonly kind: 'failed'; readonly problem: Problem };

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
  let text = '';
  const ids: number[] = [];
  let lastTokenMs: number | null = null;

  const startStream = async (stream: SseStream): Promise<void> => {
    if (stream.started) return;
    stream.start();
    const opening = openingChunk(meta);
    if (opening !== null) await stream.send(opening);
  };

  const onTokens = async (event: Extract<GenerateEvent, { type: 'tokens' }>): Promise<void> => {
    const now = ctx.clock.nowMs();
    if (lastTokenMs === null) ctx.metrics.observeTimeToFirstToken((now - job.arrivedMs) / 1000);
    else ctx.metrics.observeInterToken((now - lastTokenMs) / 1000, event.ids.length);
    lastTokenMs = now;
    if (sse === null) {
      text += event.text;
      ids.push(...event.ids);
      return;
    }
    await startStream(sse);
    const withIds = meta.tokenIds !== null && event.ids.length > 0;
    if (event.text !== '' || withIds) await sse.send(textChunk(meta, event.text, event.ids));
  };

  // Negative control only: with the headers out early, a failure before the first token
  // can no longer get its real status.
  if (sse !== null && ctx.faults.has('eager-stream-headers')) await startStream(sse);

  let end: End | null = null;
  try {
    for await (const event of ctx.backend.generate(job.request, signal)) {
      if (event.type === 'tokens') {
        await onTokens(event);
        continue;
      }
      end = terminal(event);
      break;
    }
  } catch (error) {
    if (!isTesseraError(error)) ctx.logError(`back end failed request ${job.request.rid}`, error);
    end = { kind: 'failed', problem: problemOf(error) };
  }

  if (clientGone()) return 'aborted';
  if (end === null) {
    end = { kind: 'failed', problem: problem('internal', 'The back end ended the request without finishing it.') };
  }
  switch (end.kind) {
    case 'finished':
      if (sse === null) {
        sendJson(res, 200, fullResponse(meta, text, ids, end.finishReason, end.usage));
      } else {
        await startStream(sse);
        await sse.send(finishChunk(meta, end.finishReason));
        if (meta.includeUsage) await sse.send(usageChunk(meta, end.usage));
        await sse.done();
      }
      if (clientGone()) return 'aborted';
      ctx.metrics.observeEndToEnd((ctx.clock.nowMs() - job.arrivedMs) / 1000);
      return 'success';
    case 'failed':
      if (sse !== null && sse.started) await sse.fail(end.problem);
      else sendProblem(res, end.problem);
      return end.problem.code;
    default:
      return assertNever(end, 'end');
  }
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
