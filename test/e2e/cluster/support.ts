// E2E support for clusters across hosts: the PD support's processes (test/e2e/pd/support.ts),
// each started inside a network-namespace host (test/e2e/support/netns.ts) and listening on
// that host's own address, never loopback: workers' HTTP and cluster listeners on the host's
// IP, routers too, with workers given to routers by those addresses (or by a DNS name).
import OpenAI from 'openai';
import { health, SECRET, spawnTessera, waitUntil, type Proc, type Router, type Worker } from '../pd/support.js';
import type { Host } from '../support/netns.js';

export { createLan, type Host, type Lan } from '../support/netns.js';
import { namespacesUnavailable } from '../support/netns.js';

/** Why this machine cannot make namespace hosts (said once, loudly, for `file`), or undefined. */
export function namespacesOrWarn(file: string): string | undefined {
  const unavailable = namespacesUnavailable();
  if (unavailable !== undefined) console.warn(`\n!!! SKIPPING ${file}: ${unavailable}\n`);
  return unavailable;
}

export interface HostWorker extends Worker {
  readonly host: Host;
}

export interface HostRouter extends Router {
  readonly host: Host;
}

/** `tessera serve --role <role>` inside host, on host.ip (HTTP and cluster ports picked by the OS). */
export async function startWorkerOn(
  host: Host,
  role: 'prefill' | 'decode',
  args: readonly string[],
  home: string,
  env: Record<string, string> = {},
): Promise<HostWorker> {
  const p = spawnTessera(
    host.name,
    ['serve', '--role', role, '--host', host.ip, '--port', '0', '--data-host', host.ip, '--data-port', '0', ...args],
    home,
    { TESSERA_CLUSTER_SECRET: SECRET, ...env },
    host.wrap,
  );
  const url = (await p.waitFor(/listening on (http:\/\/[\d.]+:\d+)/))[1] as string;
  const address = (await p.waitFor(/cluster listener on ([\d.]+:\d+)/))[1] as string;
  return { ...p, url, address, host };
}

/** `tessera serve` (co-located) inside host, on host.ip. */
export async function startServeOn(
  host: Host,
  args: readonly string[],
  home: string,
  env: Record<string, string> = {},
): Promise<Proc & { url: string; client(apiKey?: string): OpenAI }> {
  const p = spawnTessera(host.name, ['serve', '--host', host.ip, '--port', '0', ...args], home, env, host.wrap);
  const url = (await p.waitFor(/listening on (http:\/\/[\d.]+:\d+)/))[1] as string;
  return {
    ...p,
    url,
    client: (apiKey = 'none') => new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0, timeout: 120_000 }),
  };
}

export interface RouterOn {
  readonly prefills?: readonly { url: string }[];
  readonly decodes?: readonly { url: string }[];
  /** Extra flags (e.g. --prefill-dns NAME:PORT). */
  readonly args?: readonly string[];
  readonly env?: Record<string, string>;
  /** Wait until this many workers are up (default: every static one). */
  readonly waitForUp?: number;
}

/** `tessera router` inside host, on host.ip; resolves once it listens and its workers are up. */
export async function startRouterOn(host: Host, o: RouterOn, home: string): Promise<HostRouter> {
  const prefills = o.prefills ?? [];
  const decodes = o.decodes ?? [];
  const args = [
    'router',
    '--host',
    host.ip,
    '--port',
    '0',
    ...prefills.flatMap((w) => ['--prefill', w.url]),
    ...decodes.flatMap((w) => ['--decode', w.url]),
    ...(o.args ?? []),
  ];
  const p = spawnTessera(host.name, args, home, { TESSERA_CLUSTER_SECRET: SECRET, ...(o.env ?? {}) }, host.wrap);
  const url = (await p.waitFor(/listening on (http:\/\/[\d.]+:\d+)/))[1] as string;
  const want = o.waitForUp ?? prefills.length + decodes.length;
  await waitUntil(
    `${host.name}'s workers to be up`,
    async () => {
      const h = await health(url);
      return (h.body['workers'] as { state: string }[]).filter((w) => w.state === 'up').length >= want;
    },
    60_000,
  );
  return {
    ...p,
    url,
    host,
    client: (apiKey = 'none') => new OpenAI({ baseURL: `${url}/v1`, apiKey, maxRetries: 0, timeout: 120_000 }),
  };
}

/**
 * Two routers over the same workers on their own hosts: `router` with every defence, and
 * `unguarded`, the host-loss tests' negative control, with `ignore-host-loss` armed.
 */
export async function startGuardedAndUnguarded(
  lan: { host(name: string): Host },
  guarded: RouterOn,
  unguarded: RouterOn,
  home: string,
): Promise<[HostRouter, HostRouter]> {
  return Promise.all([
    startRouterOn(lan.host('router'), guarded, home),
    startRouterOn(
      lan.host('unguarded'),
      { ...unguarded, env: { ...unguarded.env, TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: 'ignore-host-loss' } },
      home,
    ),
  ]);
}

/** The router's /health `workers` list. */
export async function routerWorkers(router: {
  url: string;
}): Promise<{ url: string; role: string; state: string; address: string | null; inFlight: number }[]> {
  return (await health(router.url)).body['workers'] as never;
}
