// The first and last steps of the OpenAI surface's JSON endpoints (completions, chat, Responses,
// embeddings): the caller's tenant from its key, then its body, bounded and parsed as JSON, each
// refusal answered in OpenAI's error shape; at the end, the request's outcome counted once. Owns
// no endpoint's fields; must never read the body of a caller it refused.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TenantId } from '../../core/index.js';
import type { TenantAuth } from '../http/auth.js';
import type { Problem } from '../http/errors.js';
import { parseJson, readBody, refuseOversizeBody, sendProblem } from '../http/http-io.js';
import type { ApiMetrics, Outcome } from '../ops/metrics.js';

/** Sends `p` in OpenAI's error shape; returns its code, the request's outcome. */
export function refuseWith(res: ServerResponse): (p: Problem) => Outcome {
  return (p) => {
    sendProblem(res, p);
    return p.code;
  };
}

export type Admitted =
  | { readonly kind: 'ok'; readonly tenant: TenantId; readonly json: unknown }
  /** Refused (and answered), or the client left while its body arrived. */
  | { readonly kind: 'done'; readonly outcome: Outcome };

export async function admitJson(
  req: IncomingMessage,
  res: ServerResponse,
  ctx: { readonly auth: TenantAuth; readonly maxBodyBytes: number; readonly oversizeGraceMs: number },
): Promise<Admitted> {
  const done = (outcome: Outcome): Admitted => ({ kind: 'done', outcome });
  const refuse = refuseWith(res);
  const auth = ctx.auth.tenantOf(req.headers.authorization);
  if (auth.kind === 'refused') return done(refuse(auth.problem));
  const body = await readBody(req, ctx.maxBodyBytes);
  if (body.kind === 'too-large') {
    refuseOversizeBody(req, res, ctx.maxBodyBytes, ctx.oversizeGraceMs);
    return done('body_too_large');
  }
  if (body.kind === 'closed') return done('aborted');
  const json = parseJson(body.bytes);
  if (json.kind === 'bad') return done(refuse(json.problem));
  return { kind: 'ok', tenant: auth.tenant, json: json.value };
}

/**
 * Runs one request's handler and counts its outcome once. A throw (a bug, e.g. in the tokenizer)
 * is answered 500 by the server and counted here as 'internal'.
 */
export async function countOutcome(metrics: ApiMetrics, handle: () => Promise<Outcome>): Promise<void> {
  let outcome: Outcome = 'internal';
  try {
    outcome = await handle();
  } finally {
    metrics.countOutcome(outcome);
  }
}
