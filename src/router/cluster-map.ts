// The router's page map (src/core's ClusterPageMap): every worker the registry knows, each with
// the dashboard view it serves itself (GET <worker>/dashboard/state, with the admin key), and the
// pairs the router is relaying now. Fetched when an operator's /dashboard asks, never on a timer.
// Must never: wait on a worker without a timeout, send the admin key anywhere but to a worker it
// was given, or fail as a whole because one worker did not answer (that worker shows its error).
import type { ClusterPageMap, DashboardView, PairView, WorkerMapEntry } from '../core/index.js';
import type { WorkerEntry } from './workers.js';

export interface ClusterMapSource {
  readonly node: string;
  readonly workers: readonly WorkerEntry[];
  readonly pairs: readonly PairView[];
  /** null: the dashboard is off on this router, so no worker is asked. */
  readonly adminKey: string | null;
  readonly timeoutMs: number;
}

export async function clusterPageMap(s: ClusterMapSource): Promise<ClusterPageMap> {
  const workers = await Promise.all(s.workers.map((w) => workerEntry(w, s.adminKey, s.timeoutMs)));
  return { kind: 'cluster', node: s.node, pairs: s.pairs, workers };
}

async function workerEntry(w: WorkerEntry, adminKey: string | null, timeoutMs: number): Promise<WorkerMapEntry> {
  const base = { url: w.url, role: w.role, state: w.state };
  if (adminKey === null) return { ...base, view: null, error: 'the dashboard is off (no admin key)' };
  try {
    const response = await fetch(`${w.url}/dashboard/state`, {
      headers: { authorization: `Bearer ${adminKey}` },
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (response.status !== 200)
      return { ...base, view: null, error: `GET ${w.url}/dashboard/state answered ${response.status}` };
    const view = (await response.json()) as DashboardView;
    return { ...base, view, error: null };
  } catch (error) {
    return {
      ...base,
      view: null,
      error: `GET ${w.url}/dashboard/state: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
}
