// `tessera serve --role prefill|decode`: one worker of a disaggregated cluster. The composition
// root of that process:
//   1. ServeConfig (the co-located flags: model, pool, steps, --deterministic) + PdWorkerConfig
//      (--data-host/--data-port, the cluster secret, test-only protocol timeouts and traces)
//   2. the start-up check of this node's own pool against its context length (exit 2)
//   3. the model and the engine (the pool allocated once), as `tessera serve`
//   4. the worker (src/worker's PrefillWorker / DecodeWorker) listening on the cluster address
//   5. an HTTP server for /health (role, cluster address, limits: what the router reads) and
//      /metrics; /v1/* answers 400 (clients talk to the router)
//   6. SIGINT/SIGTERM or, under `tessera up`, the parent's death: drain, close, exit 0
// It must never compute, schedule or relay: it wires the modules that do.
import { randomInt } from 'node:crypto';
import { httpLimitsFromEnv } from '../config-http.js';
import {
  createApiServer,
  kvEventsFor,
  kvPeerMetrics,
  kvTierMetrics,
  loraAdminAccess,
  pdMetrics,
  promptCodecOf,
} from '../../api/index.js';
import { ConfigError, PROMPT_LOGIT_ROWS } from '../../core/index.js';
import { Sampler } from '../../engine/index.js';
import { PrefixHasher } from '../../pages/index.js';
import { grammarFor } from '../grammar-for.js';
import { DecodeWorker, PrefillWorker, tiersOf } from '../../worker/index.js';
import type { PdWorkerConfig } from '../config-pd.js';
import { formatBytes } from '../config-values.js';
import type { ServeConfig } from '../config.js';
import { TraceFile } from '../trace-file.js';
import { stopRequested } from './lifecycle.js';
import { planLines } from './plan.js';
import { startEngine } from './start-engine.js';
import { startPromptTokenizing } from '../tokenizer-threads.js';
import { openKvDisk } from '../kv-disk.js';
import type { LoraFlag } from '../config-lora.js';

/** How long transfers in flight may finish after a stop request. */
const DRAIN_MS = 5_000;

export async function servePd(
  config: ServeConfig,
  pd: PdWorkerConfig,
  adminKey: string | null,
  loras: readonly LoraFlag[] = [],
): Promise<number> {
  const log = (line: string): void => void process.stderr.write(`tessera ${pd.role}: ${line}\n`);
  if (config.apiKeysFile !== null)
    throw new ConfigError('--api-keys belongs to the router (clients never talk to a prefill or decode worker)');
  if (config.faults.size > 0) log(`FAULT POINTS ARMED (tests only): ${config.faults.names().join(', ')}`);
  // A prefill never drafts: it does not load a --draft-model (the decode rebuilds the draft's KV
  // from the output it generates; docs/serving.md, "Speculative decoding").
  const { plan, model, engine, kernels, drafter } = await startEngine(
    pd.role === 'prefill' ? { ...config, draftModel: null } : config,
    log,
  );
  const trace = pd.traceDir === null ? undefined : new TraceFile(pd.traceDir, pd.role);
  let fatal: () => void = () => undefined;
  const failed = new Promise<number>((resolve) => (fatal = () => resolve(1)));
  // Only a prefill has a prefix cache (decode never sees prompt ids): the disk tier is its.
  // Its pages' files record their keyed block hashes, so a restarted prefill reports them to the router.
  const hasher = new PrefixHasher(pd.clusterSecret, config.faults.has('unkeyed-prefix-hashes'));
  const kvDisk = openKvDisk(
    pd.role === 'prefill' ? config.kvDisk : null,
    engine.fingerprint,
    config.faults,
    log,
    hasher,
  );
  // KV events (GET /kv-events, admin key or cluster secret): a prefill's cache publishes them; a decode has none.
  const kvEvents = kvEventsFor({
    hashKey: pd.clusterSecret,
    readKeys: [adminKey, pd.clusterSecret],
    node: pd.role,
    blockSize: plan.pageSize,
    faults: config.faults,
  });
  const options = {
    ...kvDisk.spill,
    ...(kvEvents === null ? {} : { kvEvents: kvEvents.ring }),
    modelName: config.servedModelName,
    root: model.source.spec,
    modelFingerprint: engine.fingerprint,
    contextLength: plan.contextLength,
    pool: engine.pool,
    runner: engine.runner,
    lora: engine.lora,
    sampler: new Sampler(model.config.vocabSize),
    eosTokenIds: model.config.eosTokenIds,
    maxRunningRequests: config.maxRunningRequests,
    chunkedPrefillSize: config.chunkedPrefillSize,
    promptLogitRows: PROMPT_LOGIT_ROWS, // start-engine sizes the runner's logits for them
    maxStepMs: config.maxStepMs,
    speculation: config.speculation, // a decode node drafts from the output (its prompt ids are placeholders)
    ...(drafter === undefined ? {} : { drafter }),
    maxWaiting: config.maxWaiting,
    faults: config.faults,
    checkEveryStep: config.checkEveryStep,
    clusterHost: pd.dataHost,
    clusterPort: pd.dataPort,
    clusterSecret: pd.clusterSecret,
    timeouts: pd.timeouts,
    ...(trace === undefined ? {} : { trace }),
    healthDetail: { kernels, deterministic: config.deterministic, faults: config.faults.names() },
    grammar: grammarFor(model, config.faults),
    onFatal: (error: unknown) => {
      log(
        `worker stopped on an internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
      );
      fatal();
    },
  };
  const worker = pd.role === 'prefill' ? await PrefillWorker.start(options) : await DecodeWorker.start(options);
  // The router names each request's adapter with its digest; a worker refuses a name it lacks or
  // a digest that is not its own. Tenants (@...) are the router's to enforce.
  for (const { name, path } of loras) {
    const ref = await worker.loras?.load(name, path, 1, null);
    log(`LoRA adapter ${name} from ${path} (digest ${ref?.digest ?? '?'})`);
  }
  // Clients never generate here, but /tokenize is served: one thread keeps it off the protocol's thread.
  const codec = promptCodecOf(model.tokenizer, model.chatTemplate);
  const tokenizing = await startPromptTokenizing(model, codec, config.faults, 1);
  const api = createApiServer({
    backend: worker,
    codec,
    tokenizer: tokenizing.tokenizer,
    seed: randomInt(2 ** 31),
    faults: config.faults,
    drainTimeoutMs: 1_000,
    httpLimits: httpLimitsFromEnv(process.env),
    metricsHooks: [
      (registry) => worker.attachMetrics(pdMetrics(registry)),
      ...kvDisk.metricsHooks,
      (registry) => kvTierMetrics(registry, () => tiersOf(engine.pool) ?? []),
      (registry) => kvPeerMetrics(registry, () => (worker instanceof PrefillWorker ? worker.peerStats() : undefined)),
    ],
    dashboard: { adminKey, plan: planLines(config.model, plan, engine.kernels.plan) },
    ...(kvEvents === null
      ? {}
      : { kvEvents: { ...kvEvents, node: worker.address, adapterName: (d: string) => worker.loras?.nameOf(d) } }),
    // The router's hot loads (its admin's, fanned out with the cluster secret) and this node's admin key.
    loraAdmin: loraAdminAccess(worker.loras, [adminKey, pd.clusterSecret]),
  });
  const stopped = stopRequested(pd.supervised, log);
  const address = await api.listen(config.port, config.host);
  process.stdout.write(
    `tessera: ${pd.role} worker for ${config.model} (${kernels}); context ${plan.contextLength} tokens; ` +
      `KV pool ${plan.poolTokens} tokens = ${plan.numPages} pages of ${plan.pageSize} (${formatBytes(plan.poolBytes)}, ${plan.kvDtype} KV)\n` +
      `tessera: cluster listener on ${worker.address}${trace === undefined ? '' : ` (trace: ${trace.path})`}\n` +
      `tessera: listening on http://${address.host}:${address.port}\n`,
  );

  const code = await Promise.race([stopped, failed]);
  log(code === 0 ? 'shutting down' : 'shutting down after a fatal error');
  await api.close();
  await tokenizing.close();
  await worker.close(code === 0 ? DRAIN_MS : 0);
  await kvDisk.close(worker.scheduler.prefixCache);
  await engine.dispose();
  await drafter?.engine.dispose();
  trace?.close();
  log('stopped');
  return code;
}
