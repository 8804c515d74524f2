// POST /v1/responses: the Responses API over the same back end as chat completions.
//
// Life of a request here (as generate-route.ts, one choice):
//   1. auth, body, fields (responses-input.ts, tools.ts, the common sampling fields with
//      max_output_tokens), model name; chat template (tools shown as for chat), tokenization,
//      the context check; the constraint (tool_choice required/named, else text.format) compiled
//   2. one back-end request; its text goes through StreamingAnswer (tool calls found as in chat)
//   3. not streaming: one `response` object; streaming: Responses events (responses-shapes.ts),
//      the 200 held until the first token, response.completed / response.incomplete at the end
//   4. a failure before the stream: its real status; after: an error event, no completion
// Must never call the back end for a request that failed step 1, nor answer 200 for a failure.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isTesseraError, type GenerateEvent, type SamplingParams } from '../../core/index.js';
import { checkConstraint } from './constraint-check.js';
import { problem, problemOf, type Problem } from '../http/errors.js';
import { reasoningOf, type GenerateContext } from './generate-route.js';
import { answerSplitter, offersCalls, splitReasoning, type ReasoningPlan } from './reasoning.js';
import { sendJson, sendProblem } from '../http/http-io.js';
import { admitJson, countOutcome, refuseWith } from './admit-json.js';
import type { Outcome } from '../ops/metrics.js';
import { describe, isObject, readCommon, validating } from './params.js';
import { chatBytes, promptTooLong } from './prompt-bound.js';
import { chatTokens, planSampling } from './prompt.js';
import { readResponsesMessages, readTextFormat } from './responses-input.js';
import { outputItems, responseObject, ResponseEvents, responseStatus, type ResponseHead } from './responses-shapes.js';
import { SseStream } from '../http/sse.js';
import { parseAnswer, StreamingAnswer } from './tool-output.js';
import { readTools, shownTools, toolConstraint } from './tools.js';
import { clientAbort } from '../http/client-abort.js';

export async function handleResponses(req: IncomingMessage, res: ServerResponse, ctx: GenerateContext): Promise<void> {
  return countOutcome(ctx.metrics, () => respond(req, res, ctx));
}

/** Request fields the response object echoes. */
const ECHOED = [
  'instructions',
  'max_output_tokens',
  'temperature',
  'top_p',
  'tool_choice',
  'parallel_tool_calls',
  'text',
  'metadata',
  'user',
] as const;

async function respond(req: IncomingMessage, res: ServerResponse, ctx: GenerateContext): Promise<Outcome> {
  const refuse = refuseWith(res);
  const admitted = await admitJson(req, res, ctx);
  if (admitted.kind === 'done') return admitted.outcome;
  const { tenant, json } = admitted;
  const value = json;
  if (!isObject(value))
    return refuse(problem('invalid_request', `The request body must be a JSON object, got ${describe(value)}.`));

  const call = validating(() => ({
    messages: readResponsesMessages(value),
    params: readCommon(value, ['max_output_tokens'], 'chat', ctx.faults),
    tools: readTools(value, 'responses'),
    format: readTextFormat(value),
  }));
  if (call.kind === 'bad') return refuse(call.problem);
  const { messages, params, tools, format } = call.value;
  if (params.n !== 1)
    return refuse(problem('invalid_request', 'The Responses API answers one output; `n` must be 1.', 'n'));
  if (params.model !== null && params.model !== ctx.backend.modelName)
    return refuse(problem('model_not_found', `The model \`${params.model}\` does not exist.`, 'model'));
  const numBytes = chatBytes(messages); // roles, content, tool calls: all the text the prompt brings
  const tooLong = promptTooLong(numBytes, ctx.maxPromptBytes, ctx.backend.contextLength);
  if (tooLong !== null) return refuse(problem('context_length_exceeded', tooLong, 'input'));
  const shown = shownTools(tools);
  const tokens = await chatTokens(
    messages,
    { addGenerationPrompt: true, addSpecialTokens: false, ...(shown === undefined ? {} : { tools: shown }) },
    ctx.tokenizer,
    tenant,
  );
  if (tokens.kind === 'bad') return refuse(tokens.problem);
  const spec = toolConstraint(tools) ?? format;
  const constraint =
    spec === undefined
      ? undefined
      : await checkConstraint(
          spec,
          ctx.grammar,
          toolConstraint(tools) === undefined ? 'text.format' : 'tools',
          tenant,
          ctx.faults,
        );
  if (constraint?.kind === 'bad') return refuse(constraint.problem);
  const sampling = planSampling(tokens.value.length, params, {
    contextLength: ctx.backend.contextLength,
    vocabSize: ctx.codec.vocabSize,
    faults: ctx.faults,
    drawSeed: () => ctx.ids.drawSeed(),
    promptParam: 'input',
  });
  if (sampling.kind === 'bad') return refuse(sampling.problem);
  const withConstraint: SamplingParams =
    constraint === undefined ? sampling.value : { ...sampling.value, constraint: constraint.value };
  const rid = ctx.ids.nextRid();
  const echo = {
    ...Object.fromEntries(ECHOED.flatMap((k) => (value[k] === undefined || value[k] === null ? [] : [[k, value[k]]]))),
    ...(tools === undefined
      ? {}
      : {
          tools: tools.tools.map((t) => ({
            type: 'function',
            name: t.name,
            description: t.description ?? null,
            parameters: t.parameters,
            strict: false,
          })),
        }),
  };
  const head: ResponseHead = {
    id: `resp_${rid}`,
    createdAt: ctx.clock.unixSeconds(),
    model: ctx.backend.modelName,
    echo,
  };

  const client = clientAbort(res, ctx.shutdown);
  try {
    const events = ctx.backend.generate(
      { rid, tenant, promptTokens: tokens.value, sampling: withConstraint },
      client.signal,
    );
    const { reasoning } = reasoningOf(ctx, tokens.value, constraint !== undefined);
    const outcome = params.stream
      ? await stream(events, res, head, tools, ctx, reasoning)
      : await whole(events, res, head, tools, ctx, reasoning);
    return client.gone() ? 'aborted' : outcome;
  } finally {
    client.detach();
  }
}

type Plan = ReturnType<typeof readTools>;

async function whole(
  events: AsyncIterable<GenerateEvent>,
  res: ServerResponse,
  head: ResponseHead,
  tools: Plan,
  ctx: GenerateContext,
  reasoning: ReasoningPlan | undefined,
): Promise<Outcome> {
  let text = '';
  try {
    for await (const event of events) {
      if (event.type === 'tokens') {
        text += event.text;
        continue;
      }
      if (event.type === 'failed') return fail(res, null, problemOf(event.error));
      const split =
        reasoning === undefined
          ? { reasoning: null, content: text }
          : splitReasoning(reasoning, text, offersCalls(tools));
      const answer = parseAnswer(tools, split.content, event.finishReason);
      const shown = split.reasoning !== null && answer.content === '' ? { ...answer, content: null } : answer;
      const items = outputItems(shown, split.reasoning);
      sendJson(res, 200, responseObject(head, responseStatus(answer.finishReason), items, event.usage));
      return 'success';
    }
  } catch (error) {
    if (!isTesseraError(error)) ctx.logError('back end failed a response', error);
    return fail(res, null, problemOf(error));
  }
  return fail(res, null, problem('internal', 'The back end ended the request without finishing it.'));
}

async function stream(
  events: AsyncIterable<GenerateEvent>,
  res: ServerResponse,
  head: ResponseHead,
  tools: Plan,
  ctx: GenerateContext,
  reasoning: ReasoningPlan | undefined,
): Promise<Outcome> {
  const sse = new SseStream(res);
  const answer = new StreamingAnswer(tools);
  const splitter = reasoning === undefined ? null : answerSplitter(reasoning, offersCalls(tools));
  /** Text -> its reasoning delta (when there is some), then the content's deltas. */
  const deltasOf = (piece: { reasoning: string; content: string }): object[] => [
    ...(piece.reasoning === '' ? [] : [{ reasoning_content: piece.reasoning }]),
    ...answer.push(piece.content),
  ];
  const out = new ResponseEvents();
  const send = async (list: readonly object[]): Promise<void> => {
    for (const e of list) await sse.sendNamed((e as { type: string }).type, e);
  };
  const start = async (): Promise<void> => {
    if (sse.started) return;
    sse.start();
    const pending = responseObject(head, 'in_progress', [], null);
    await send([
      out.event('response.created', { response: pending }),
      out.event('response.in_progress', { response: pending }),
    ]);
  };
  try {
    for await (const event of events) {
      if (event.type === 'tokens') {
        await start();
        const piece = splitter === null ? { reasoning: '', content: event.text } : splitter.push(event.text);
        for (const delta of deltasOf(piece)) await send(out.delta(delta));
        continue;
      }
      if (event.type === 'failed') return fail(res, sse, problemOf(event.error));
      await start();
      if (splitter !== null) for (const delta of deltasOf(splitter.end())) await send(out.delta(delta));
      const last = answer.end(event.finishReason);
      for (const delta of last.deltas) await send(out.delta(delta));
      const status = responseStatus(last.finishReason);
      await send(out.finish(status));
      await send([
        out.event(status === 'completed' ? 'response.completed' : 'response.incomplete', {
          response: responseObject(head, status, out.items, event.usage),
        }),
      ]);
      sse.end();
      return 'success';
    }
  } catch (error) {
    if (!isTesseraError(error)) ctx.logError('back end failed a response', error);
    return fail(res, sse, problemOf(error));
  }
  return fail(res, sse, problem('internal', 'The back end ended the request without finishing it.'));
}

async function fail(res: ServerResponse, sse: SseStream | null, p: Problem): Promise<Outcome> {
  if (sse !== null && sse.started) await sse.fail(p);
  else sendProblem(res, p);
  return p.code;
}
