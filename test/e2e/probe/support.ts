// E2E support for `tessera probe`: a real `tessera up --api-keys` cluster serving builtin:austen
// (the default model, given explicitly because the e2e helpers default to builtin:tiny), and
// the probe run as a real process against it. Fault points go in through the cluster's
// environment (TESSERA_ALLOW_FAULTS=1), which `up` hands to every child.
import { mkdtemp, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { runCli, writeJson, type Exited } from '../support/process.js';
import { spawnTessera, testHome, type Proc } from '../pd/support.js';
import type { ProbeReport } from '../../../src/probe/index.js';

export const KEYS = { 'key-alice': 'alice', 'key-bob': 'bob' };

export interface Cluster {
  readonly url: string;
  readonly home: string;
  readonly dir: string;
  /** The `tessera up` process (its stdout names every worker's URL). */
  readonly up: Proc;
  stop(): Promise<void>;
}

export async function startCluster(name: string, args: readonly string[] = [], faults?: string): Promise<Cluster> {
  const home = await testHome();
  const keys = await writeJson(home.dir, 'keys.json', KEYS);
  const env: Record<string, string> = faults === undefined ? {} : { TESSERA_ALLOW_FAULTS: '1', TESSERA_FAULT: faults };
  const up: Proc = spawnTessera(
    name,
    ['up', '--model', 'builtin:austen', '--port', '0', '--api-keys', keys, ...args],
    home.dir,
    env,
  );
  const url = (await up.waitFor(/listening on (http:\/\/[\d.]+:\d+)/, 150_000))[1] as string;
  const dir = await mkdtemp(join(home.dir, 'probe-'));
  return { url, home: home.dir, dir, up, stop: async () => void (await up.stop(), await home.remove()) };
}

export interface ProbeRun extends Exited {
  readonly report: ProbeReport;
  readonly jsonPath: string;
  readonly htmlPath: string;
}

/** `tessera probe` with alice as tenant A and bob as tenant B; the JSON report parsed. */
export async function probe(cluster: Cluster, args: readonly string[], timeoutMs = 120_000): Promise<ProbeRun> {
  const jsonPath = join(cluster.dir, `report-${Date.now()}.json`);
  const htmlPath = jsonPath.replace(/\.json$/, '.html');
  const exited = await runCli(
    [
      'probe',
      '--base-url',
      cluster.url,
      '--api-key',
      'key-alice',
      '--api-key',
      'key-bob',
      '--json',
      jsonPath,
      '--html',
      htmlPath,
      ...args,
    ],
    cluster.home,
    {},
    timeoutMs,
  );
  const report = JSON.parse(await readFile(jsonPath, 'utf8')) as ProbeReport;
  return { ...exited, report, jsonPath, htmlPath };
}

export function resultOf(report: ProbeReport, check: string): ProbeReport['results'][number] {
  const r = report.results.find((x) => x.check === check);
  if (r === undefined) throw new Error(`no ${check} result in the report`);
  return r;
}
