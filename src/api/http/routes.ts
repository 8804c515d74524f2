// The route table: path -> method -> handler, plus the small handlers (/v1/models, /health,
// /metrics). Unknown paths are 404 and known paths with another method 405, in the OpenAI error
// shape; a path that is not valid percent-encoding (`/v1/models/%`, `%zz`, a lone surrogate) is
// a 400, never a thrown URIError's 500. Must never serve /v1/* without the auth check when API
// keys are configured.
import { handleLoraAdmin, type LoraAdminAccess } from '../openai/lora-admin-route.js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Clock } from './clock.js';
import { handleDashboardPage, handleDashboardState, type DashboardAccess } from '../ops/dashboard-route.js';
import { handleKvEvents, handleKvEventStream, type KvEventsAccess } from '../ops/kv-events-route.js';
import { problem } from './errors.js';
import { handleGenerate, type GenerateContext } from '../openai/generate-route.js';
import { handleEmbeddings } from '../openai/embeddings-route.js';
import { sendJson, sendProblem } from './http-io.js';
import { modelList } from '../openai/shapes.js';
import { handleResponses } from '../openai/responses-route.js';
import { detokenize, oneModel, tokenize, version } from '../openai/extra-routes.js';
import { withoutTenantSeries } from '../ops/metrics.js';
import type { BatchStore } from '../../batch/index.js';
import type { InteractiveGauge } from '../openai/batch-runner.js';
import { handleBatches } from '../openai/batches-route.js';
import { handleFiles } from '../openai/files-route.js';

export type Handler = (req: IncomingMessage, res: ServerResponse, ctx: RouteContext) => Promise<void>;

export interface RouteContext extends GenerateContext {
  /** When the server started (unix seconds): the model's `created`. */
  readonly startedUnixSeconds: number;
  readonly clock: Clock;
  /** The admin-only /dashboard (off without an admin key). */
  readonly dashboard: DashboardAccess;
  /** The node's KV events (admin key or cluster secret only); null: off. */
  readonly kvEvents: KvEventsAccess | null;
  /** Aborts when the server starts closing: endless streams (KV events) end then, not at the drain deadline. */
  readonly closing: AbortSignal;
  /** Who may load and unload LoRA adapters, and into which directory; null: off (404). */
  readonly loraAdmin: LoraAdminAccess | null;
  /** The Batch API (/v1/files, /v1/batches; --batch-dir); null: off (404). */
  readonly batch: { readonly store: BatchStore; readonly gauge: InteractiveGauge } | null;
}

/** Counts the request as interactive while it runs (the batch runner starts lines only in a lull). */
const interactive =
  (handler: Handler): Handler =>
  async (req, res, ctx) => {
    const gauge = ctx.batch?.gauge;
    gauge?.enter();
    try {
      await handler(req, res, ctx);
    } finally {
      gauge?.leave();
    }
  };

const ROUTES: ReadonlyMap<string, ReadonlyMap<string, Handler>> = new Map<string, Map<string, Handler>>([
  ['/v1/completions', new Map([['POST', interactive((req, res, ctx) => handleGenerate('completion', req, res, ctx))]])],
  ['/v1/chat/completions', new Map([['POST', interactive((req, res, ctx) => handleGenerate('chat', req, res, ctx))]])],
  ['/v1/responses', new Map([['POST', interactive((req, res, ctx) => handleResponses(req, res, ctx))]])],
  ['/v1/embeddings', new Map([['POST', interactive((req, res, ctx) => handleEmbeddings(req, res, ctx))]])],
  ['/v1/models', new Map([['GET', models]])],
  ['/v1/load_lora_adapter', new Map([['POST', (req, res, ctx) => handleLoraAdmin('load', req, res, ctx)]])],
  ['/v1/unload_lora_adapter', new Map([['POST', (req, res, ctx) => handleLoraAdmin('unload', req, res, ctx)]])],
  ['/health', new Map([['GET', health]])],
  ['/tokenize', new Map([['POST', tokenize]])],
  ['/detokenize', new Map([['POST', detokenize]])],
  ['/version', new Map([['GET', version]])],
  ['/metrics', new Map([['GET', metrics]])],
  ['/dashboard', new Map([['GET', handleDashboardPage]])],
  ['/dashboard/state', new Map([['GET', handleDashboardState]])],
  ['/kv-events', new Map([['GET', handleKvEvents]])],
  [
    '/kv-events/stream',
    new Map([['GET', (req, res, ctx) => handleKvEventStream(req, res, { ...ctx, shutdown: ctx.closing })]]),
  ],
]);

export async function dispatch(req: IncomingMessage, res: ServerResponse, ctx: RouteContext): Promise<void> {
  const method = req.method ?? 'GET';
  const path = (req.url ?? '/').split('?', 1)[0] as string;
  const modelId = /^\/v1\/models\/(.+)$/.exec(path)?.[1];
  if (modelId !== undefined && method === 'GET') {
    const id = decodedSegment(modelId);
    if (id === null) return sendProblem(res, malformedPath(path));
    return oneModel(req, res, ctx, id);
  }
  const batchApi = /^\/v1\/(files|batches)(?:\/(.*))?$/.exec(path);
  if (batchApi !== null) return batchRoute(batchApi[1] as 'files' | 'batches', batchApi[2], req, res, ctx);
  const methods = ROUTES.get(path);
  if (methods === undefined) {
    sendProblem(res, problem('route_not_found', `Invalid URL (${method} ${path}).`));
    return;
  }
  const handler = methods.get(method);
  if (handler === undefined) {
    const allowed = [...methods.keys()].join(', ');
    sendProblem(res, problem('method_not_allowed', `Method ${method} is not allowed on ${path}; use ${allowed}.`), {
      allow: allowed,
    });
    return;
  }
  await handler(req, res, ctx);
}

/** A percent-encoded path segment as text, or null when it is not valid percent-encoded UTF-8. */
export function decodedSegment(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null; // URIError: a `%` without two hex digits, or bytes that are not UTF-8
  }
}

function malformedPath(path: string): ReturnType<typeof problem> {
  // The path is echoed JSON-escaped by sendProblem; cut it so a long one does not fill the answer.
  const shown = path.length > 200 ? `${path.slice(0, 200)}...` : path;
  return problem('invalid_request', `The request path ${JSON.stringify(shown)} is not valid percent-encoding.`);
}

async function models(req: IncomingMessage, res: ServerResponse, ctx: RouteContext): Promise<void> {
  const auth = ctx.auth.tenantOf(req.headers.authorization);
  if (auth.kind === 'refused') {
    sendProblem(res, auth.problem);
    return;
  }
  const { backend } = ctx;
  sendJson(
    res,
    200,
    modelList({
      id: backend.modelName,
      root: backend.root,
      maxModelLen: backend.contextLength,
      created: ctx.startedUnixSeconds,
      adapters: backend.adapters?.list(auth.tenant) ?? [],
    }),
  );
}

async function health(req: IncomingMessage, res: ServerResponse, ctx: RouteContext): Promise<void> {
  // GET /health?probe=live (a liveness probe): the process answers at all; 200 whatever the back end's state
  // (a router whose workers are all down is alive, only not ready), and no detail.
  if (new URL(req.url ?? '/', 'http://probe').searchParams.get('probe') === 'live') {
    sendJson(res, 200, { status: 'alive' });
    return;
  }
  const report = await ctx.backend.health();
  // With API keys, strangers learn only up or down (auth.ts seesDetail).
  const open = ctx.faults.has('open-health'); // test-only
  const detail = open || ctx.auth.seesDetail(req.headers.authorization) ? report.detail : {};
  sendJson(res, report.healthy ? 200 : 503, { status: report.healthy ? 'ok' : 'unhealthy', ...detail });
}

async function metrics(req: IncomingMessage, res: ServerResponse, ctx: RouteContext): Promise<void> {
  const rendered = await ctx.metrics.render(await ctx.backend.stats());
  const { contentType } = rendered;
  // With API keys, only the admin key sees the per-tenant series (tenant names and their volumes).
  const open = ctx.faults.has('open-tenant-metrics'); // test-only
  const text =
    open || ctx.auth.seesDetail(req.headers.authorization) ? rendered.text : withoutTenantSeries(rendered.text);
  res.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** /v1/files and /v1/batches: the caller's tenant, then files-route.ts or batches-route.ts. */
async function batchRoute(
  kind: 'files' | 'batches',
  tail: string | undefined,
  req: IncomingMessage,
  res: ServerResponse,
  ctx: RouteContext,
): Promise<void> {
  const path = `/v1/${kind}${tail === undefined ? '' : `/${tail}`}`;
  if (ctx.batch === null)
    return sendProblem(
      res,
      problem('route_not_found', `Invalid URL (${req.method ?? 'GET'} ${path}): the Batch API is off (--batch-dir).`),
    );
  const auth = ctx.auth.tenantOf(req.headers.authorization);
  if (auth.kind === 'refused') return sendProblem(res, auth.problem);
  const rest: string[] = [];
  for (const segment of (tail ?? '').split('/').filter((s) => s !== '')) {
    const decoded = decodedSegment(segment);
    if (decoded === null) return sendProblem(res, malformedPath(path));
    rest.push(decoded);
  }
  const now = ctx.clock.unixSeconds();
  await (kind === 'files' ? handleFiles : handleBatches)(req, res, ctx.batch.store, auth.tenant, rest, now);
}
