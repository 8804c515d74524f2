// ClusterLora: the router's admin loads and unloads a LoRA adapter on every worker of the cluster,
// all or nothing. It is the LoraControl under the router's adapter directory (the same
// LoraRegistry `serve` has, built in src/cli), so the directory shows a name only once every
// worker serves it under the router's digest.
// Life of a hot load (POST /v1/load_lora_adapter on the router):
//   1. the router reads the file's digest itself (the KV identity every Reserve and Prefill names);
//   2. every worker that is up (vetted, not leaving) loads it through its own admin route, with
//      the cluster secret; at least one prefill and one decode must be up;
//   3. one that fails, or answers another digest, fails the load: every worker that may hold it
//      now is told to unload the name again (rollback), and the admin gets that worker's reason;
//   4. the router polls every worker's /health again (its pair policy pairs only workers whose
//      /health lists the digest), and only then does the name become visible to requests.
// An unload: the directory drops the name first (new requests: 404; one still running at the
// router refuses it), then every worker drops it, its weights kept until its own last request
// under the name ends (worker/lora-registry.ts). A worker down during a load, or restarted since
// (`tessera up` restarts a crashed one with its start-up flags), gets the adapter from reconcile()
// once it is up again; until its /health lists it, the pair policy never pairs it for that adapter.
// Must never: show a name before every worker holds it, leave a half-loaded cluster after a
// failure it saw, or send the cluster secret anywhere but a worker's URL.
import { TesseraError, type FaultSet } from '../core/index.js';
import type { WorkerEntry } from './workers.js';

export interface ClusterLoraOptions {
  /** The router's workers (its registry's entries). */
  readonly workers: () => readonly WorkerEntry[];
  /** Polls every worker's /health again (WorkerRegistry.refresh). */
  readonly refresh: () => Promise<void>;
  readonly clusterSecret: string;
  /** The digest of the adapter at `path` with `scale`, as the workers compute it (engine's loraFileDigest). */
  readonly fileDigest: (path: string, scale: number) => Promise<string>;
  /** How long one worker may take to load a file. */
  readonly timeoutMs: number;
  /** Test-only `lora-no-rollback`: a failed load is not undone on the workers that took it. */
  readonly faults: FaultSet;
  readonly log?: (line: string) => void;
}

type Answer =
  | { readonly kind: 'ok'; readonly body: Record<string, unknown> }
  | { readonly kind: 'refused'; readonly status: number; readonly message: string }
  | { readonly kind: 'unreachable'; readonly message: string };

export class ClusterLora {
  readonly #o: ClusterLoraOptions;
  /** The adapters hot-loaded through this router, by name: what a worker that (re)joins is given. */
  readonly #loaded = new Map<string, { readonly path: string; readonly scale: number; readonly digest: string }>();
  /** Loads, unloads and reconciles run one at a time, so none lands on a worker after a later one. */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(options: ClusterLoraOptions) {
    this.#o = options;
  }

  #serial<T>(run: () => Promise<T>): Promise<T> {
    const next = this.#queue.then(run, run);
    this.#queue = next.catch(() => undefined);
    return next;
  }

  loadLora(name: string, path: string, scale: number): Promise<string> {
    return this.#serial(async () => {
      const digest = await this.#load(name, path, scale);
      this.#loaded.set(name, { path, scale, digest });
      return digest;
    });
  }

  unloadLora(name: string): Promise<void> {
    return this.#serial(async () => {
      this.#loaded.delete(name);
      await this.#unloadEverywhere(name, this.#o.workers());
      await this.#o.refresh();
      this.#o.log?.(`LoRA adapter ${name} unloaded`);
    });
  }

  /**
   * Gives every up worker whose /health lacks a hot-loaded adapter (one restarted, or joined since)
   * that adapter; one that then reports another digest drops it again. Until its /health lists the
   * adapter the pair policy never pairs it for that adapter. Called every few seconds (src/cli).
   */
  reconcile(): Promise<void> {
    return this.#serial(async () => {
      let changed = false;
      for (const w of this.#o.workers()) {
        if (w.state !== 'up' || !w.admitted || w.draining || w.limits === undefined) continue;
        for (const [name, { path, digest }] of this.#loaded) {
          if (w.limits.adapters?.[name] === digest) continue;
          changed = true;
          const answer = await this.#post(w, 'load_lora_adapter', { lora_name: name, lora_path: path });
          if (answer.kind === 'ok' && answer.body['digest'] === digest) {
            this.#o.log?.(`LoRA adapter ${name} given to ${w.role} ${w.url}, which lacked it`);
            continue;
          }
          if (answer.kind === 'ok') await this.#post(w, 'unload_lora_adapter', { lora_name: name });
          this.#o.log?.(
            `${w.role} ${w.url} lacks LoRA adapter ${name} and did not take it ` +
              `(${answer.kind === 'ok' ? `digest ${String(answer.body['digest'])}` : answer.message}): never paired for it`,
          );
        }
      }
      if (changed) await this.#o.refresh();
    });
  }

  async #load(name: string, path: string, scale: number): Promise<string> {
    const digest = await this.#o.fileDigest(path, scale);
    const targets = this.#o.workers().filter((w) => w.state === 'up' && w.admitted && !w.draining);
    for (const role of ['prefill', 'decode'] as const)
      if (!targets.some((w) => w.role === role))
        throw new TesseraError('overloaded', `no ${role} worker is up to load the LoRA adapter ${name} on`);
    const answers = await Promise.all(
      targets.map((w) => this.#post(w, 'load_lora_adapter', { lora_name: name, lora_path: path })),
    );
    const failure = answers
      .map((answer, i) => ({ answer, worker: targets[i] as WorkerEntry }))
      .find(({ answer }) => answer.kind !== 'ok' || answer.body['digest'] !== digest);
    if (failure !== undefined) {
      // Rolled back wherever it may have loaded: every worker but those that refused it (a refusal
      // leaves the worker as it was, which may be its own adapter of that name).
      const mayHold = targets.filter((_, i) => answers[i]?.kind !== 'refused');
      if (!this.#o.faults.has('lora-no-rollback')) await this.#unloadEverywhere(name, mayHold);
      await this.#o.refresh();
      throw failureError(name, digest, failure.worker, failure.answer);
    }
    await this.#o.refresh();
    this.#o.log?.(`LoRA adapter ${name} loaded on ${targets.length} workers from ${path} (digest ${digest})`);
    return digest;
  }

  /** Each of `workers` drops `name` (one that never had it answers 404: nothing to do); failures are logged. */
  async #unloadEverywhere(name: string, workers: readonly WorkerEntry[]): Promise<void> {
    const answers = await Promise.all(workers.map((w) => this.#post(w, 'unload_lora_adapter', { lora_name: name })));
    answers.forEach((answer, i) => {
      if (answer.kind === 'ok' || (answer.kind === 'refused' && answer.status === 404)) return;
      const w = workers[i] as WorkerEntry;
      this.#o.log?.(`${w.role} ${w.url} did not unload LoRA adapter ${name}: ${answer.message}`);
    });
  }

  async #post(w: WorkerEntry, route: string, body: object): Promise<Answer> {
    try {
      const response = await fetch(`${w.url}/v1/${route}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.#o.clusterSecret}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.#o.timeoutMs),
      });
      const json = (await response.json().catch(() => ({}))) as Record<string, unknown>;
      if (response.ok) return { kind: 'ok', body: json };
      const error = json['error'] as { message?: unknown } | undefined;
      const message = typeof error?.message === 'string' ? error.message : `HTTP ${response.status}`;
      return { kind: 'refused', status: response.status, message };
    } catch (error) {
      return { kind: 'unreachable', message: error instanceof Error ? error.message : String(error) };
    }
  }
}

/** Why a load failed on `worker`, as the admin reads it: the worker's own 4xx stays a 400 (the file). */
function failureError(name: string, digest: string, worker: WorkerEntry, answer: Answer): TesseraError {
  const at = `${worker.role} ${worker.url}`;
  switch (answer.kind) {
    case 'ok':
      return new TesseraError(
        'config_invalid',
        `${at} loaded ${name} with digest ${String(answer.body['digest'])}, the router read ${digest} ` +
          '(the workers see another file at that path); rolled back on every worker',
      );
    case 'refused':
      return new TesseraError(
        answer.status >= 400 && answer.status < 500 ? 'invalid_request' : 'overloaded',
        `${at} refused it (${answer.message}); rolled back on every worker`,
      );
    case 'unreachable':
      return new TesseraError('overloaded', `${at} did not answer (${answer.message}); rolled back on every worker`);
  }
}
