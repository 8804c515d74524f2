// The operator's dashboard: GET /dashboard (one self-contained HTML page, dashboard-page.ts) and
// GET /dashboard/state (the JSON it polls: the back end's page map, this node's `tessera plan`
// lines, and requests by outcome). It shows which tenant owns which page, so it is off unless
// the server has an admin key (--admin-key / TESSERA_ADMIN_KEY): without one both paths are 404,
// like any unknown path; with one, a request without that exact key is 401 (an ordinary API key
// is not it). The key comes as `Authorization: Bearer KEY` or, for a browser's address bar, as
// `?key=KEY`. Must never answer a page map to anyone but the admin key.
import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { DashboardView } from '../../core/index.js';
import { problem } from '../http/errors.js';
import { sendJson, sendProblem } from '../http/http-io.js';
import { DASHBOARD_HTML } from './dashboard-page.js';
import type { GenerateContext } from '../openai/generate-route.js';

/** What the server knows for its dashboard (from src/cli). */
export interface DashboardAccess {
  /** null: the dashboard is off (404). */
  readonly adminKey: string | null;
  /** `tessera plan`'s lines for this node's pool (empty on the router). */
  readonly plan: readonly string[];
}

export const DASHBOARD_OFF: DashboardAccess = { adminKey: null, plan: [] };

/** What the dashboard's handlers read of the server's route context. */
export interface DashboardContext extends Pick<GenerateContext, 'backend' | 'metrics' | 'clock' | 'faults'> {
  readonly dashboard: DashboardAccess;
}

export async function handleDashboardPage(
  req: IncomingMessage,
  res: ServerResponse,
  ctx: DashboardContext,
): Promise<void> {
  if (!admitted(req, res, ctx)) return;
  res.writeHead(200, {
    'content-type': 'text/html; charset=utf-8',
    'content-length': Buffer.byteLength(DASHBOARD_HTML),
    'cache-control': 'no-store',
    // Everything is inline; nothing may be loaded from elsewhere, and the page is never framed.
    'content-security-policy':
      "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; frame-ancestors 'none'",
    'referrer-policy': 'no-referrer',
  });
  res.end(DASHBOARD_HTML);
}

export async function handleDashboardState(
  req: IncomingMessage,
  res: ServerResponse,
  ctx: DashboardContext,
): Promise<void> {
  if (!admitted(req, res, ctx)) return;
  const view: DashboardView = {
    atMs: ctx.clock.nowMs(),
    map: await ctx.backend.pageMap(),
    plan: ctx.dashboard.plan,
    outcomes: await outcomes(ctx),
  };
  sendJson(res, 200, view, { 'cache-control': 'no-store' });
}

/** 404 when the dashboard is off, 401 without the admin key; true when the request may see it. */
function admitted(req: IncomingMessage, res: ServerResponse, ctx: DashboardContext): boolean {
  const { adminKey } = ctx.dashboard;
  const path = (req.url ?? '/').split('?', 1)[0] as string;
  if (adminKey === null) {
    sendProblem(res, problem('route_not_found', `Invalid URL (${req.method ?? 'GET'} ${path}).`));
    return false;
  }
  if (ctx.faults.has('open-dashboard')) return true; // the negative control of this gate
  const given = keyOf(req);
  if (given === undefined || !sameKey(given, adminKey)) {
    const why =
      given === undefined
        ? 'The dashboard needs the admin key: `Authorization: Bearer KEY` or `?key=KEY`.'
        : 'Invalid admin key.';
    sendProblem(res, problem('unauthorized', why));
    return false;
  }
  return true;
}

function keyOf(req: IncomingMessage): string | undefined {
  const header = req.headers.authorization;
  if (header !== undefined && header.startsWith('Bearer ')) return header.slice('Bearer '.length).trim();
  const query = (req.url ?? '').split('?', 2)[1];
  return query === undefined ? undefined : (new URLSearchParams(query).get('key') ?? undefined);
}

export function sameKey(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

async function outcomes(ctx: DashboardContext): Promise<Record<string, number>> {
  const metric = ctx.metrics.registry.getSingleMetric('tessera_requests_total');
  if (metric === undefined) return {};
  const { values } = await metric.get();
  return Object.fromEntries(values.map((v) => [String(v.labels['outcome'] ?? ''), v.value]));
}
