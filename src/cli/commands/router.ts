// `tessera router --prefill URL ... --decode URL ...`: the front of a disaggregated cluster. The
// composition root of that process:
//   1. flags + environment -> the worker URLs, the cluster secret, the API's flags
//   2. the model's tokenizer and chat template (the router tokenizes and checks the context)
//   3. PdRouter (src/router) over the workers; the first look at every worker's /health
//   4. the same OpenAI front end as `tessera serve` (src/api), plus the PD series in /metrics,
//      and with --batch-dir the Batch API on the router's disk (its lines run through the router)
//   5. SIGINT/SIGTERM or, under `tessera up`, the parent's death: drain, then close
// It must never relay or decide anything itself: it wires the modules that do.
import { randomInt } from 'node:crypto';
import { httpLimitsFromEnv } from '../config-http.js';
import type { Command } from 'commander';
import { BatchStore } from '../../batch/index.js';
import { createApiServer, pdMetrics, promptCodecOf, reasoningParserFor, routingMetrics } from '../../api/index.js';
import { ConfigError, TextStream } from '../../core/index.js';
import { loraFileDigest } from '../../engine/index.js';
import { loadModelInfo } from '../../model/index.js';
import { LoraRegistry } from '../../worker/index.js';
import { LORA_HELP, parseLoraFlags, type LoraFlag } from '../config-lora.js';
import { corsOption, grammarFor } from '../grammar-for.js';
import { ClusterLora, parseDnsTarget, PdRouter } from '../../router/index.js';
import { ADMIN_KEY_HELP, parseAdminKey, withAdminKey, type AdminKeyFlags } from '../config-admin.js';
import { loadApiKeys } from '../config-api-keys.js';
import { startPromptTokenizing } from '../tokenizer-threads.js';
import { faultsFromEnv, tesseraHome } from '../config-env.js';
import {
  clusterSecret,
  collect,
  parseWorkerUrl,
  timeoutsFromEnv,
  traceDirFromEnv,
  type RouterFlags,
} from '../config-pd.js';
import { parseCount } from '../config-values.js';
import { DEFAULT_HOST, DEFAULT_MODEL, DEFAULT_PORT } from '../config.js';
import { TraceFile } from '../trace-file.js';
import { progressDisplay } from './gen-model.js';
import { stopRequested } from './lifecycle.js';

/** How long client requests may run on after a stop request before they are aborted (through the protocol). */
const DRAIN_MS = 10_000;

export function registerRouter(program: Command): void {
  program
    .command('router')
    .description('serve the OpenAI-compatible API in front of prefill and decode workers (disaggregated serving)')
    .option('--prefill <url>', "a prefill worker's HTTP URL (repeat for more)", collect, [])
    .option('--decode <url>', "a decode worker's HTTP URL (repeat for more)", collect, [])
    .option(
      '--prefill-dns <name:port>',
      'prefill workers by DNS: one A record per worker, re-resolved (repeat for more)',
      collect,
      [],
    )
    .option(
      '--decode-dns <name:port>',
      'decode workers by DNS: one A record per worker, re-resolved (repeat for more)',
      collect,
      [],
    )
    .option('--dns-interval <ms>', 'how often DNS names are re-resolved (default 5000)')
    .option(
      '--routing <policy>',
      'prefix (default): the prefill holding the longest cached prefix for the tenant, within 1.5x the mean load; load: least loaded',
    )
    .option('--model <spec>', `the model the workers serve: its tokenizer and chat template (default ${DEFAULT_MODEL})`)
    .option('--served-model-name <name>', 'the model name clients pass (default: the --model value)')
    .option('--host <host>', `address to listen on (default ${DEFAULT_HOST})`)
    .option('--port <n>', `port to listen on; 0 picks a free one (default ${DEFAULT_PORT})`)
    .option(
      '--context-length <n>',
      "largest prompt + max_tokens per request (default: the model's); each worker re-checks its own",
    )
    .option('--api-keys <file>', 'JSON object mapping each API key to its tenant; requests without a valid key get 401')
    .option('--lora <name=path>', `${LORA_HELP}; every worker needs the same --lora`, collect, [])
    .option('--admin-key <key>', ADMIN_KEY_HELP)
    .option('--cors-origin <origin>', 'answer browsers from this origin (CORS; * for any); default: no CORS headers')
    .option(
      '--cluster-secret <secret>',
      'the secret shared by the router and its workers (default: $TESSERA_CLUSTER_SECRET)',
    )
    .option(
      '--batch-dir <dir>',
      "serve the Batch API (/v1/files, /v1/batches) on the router's disk: its lines run through the router at low priority",
    )
    .action(async (flags: RouterFlags & AdminKeyFlags & DnsFlags) => {
      process.exitCode = await runRouter(flags);
    });
}

interface DnsFlags {
  readonly lora?: readonly string[];
  readonly prefillDns: readonly string[];
  readonly decodeDns: readonly string[];
  readonly dnsInterval?: string;
  readonly routing?: string;
  readonly batchDir?: string;
}

async function runRouter(flags: RouterFlags & AdminKeyFlags & DnsFlags): Promise<number> {
  const env = process.env;
  const log = (line: string): void => void process.stderr.write(`tessera router: ${line}\n`);
  if (flags.prefill.length + flags.prefillDns.length === 0 || flags.decode.length + flags.decodeDns.length === 0) {
    throw new ConfigError(
      'give at least one --prefill URL (or --prefill-dns NAME:PORT) and one --decode URL (or --decode-dns NAME:PORT)',
    );
  }
  const dnsTargets = [
    ...flags.prefillDns.map((v) => parseDnsTarget(v, 'prefill', '--prefill-dns')),
    ...flags.decodeDns.map((v) => parseDnsTarget(v, 'decode', '--decode-dns')),
  ];
  const routing = flags.routing ?? 'prefix';
  if (routing !== 'prefix' && routing !== 'load')
    throw new ConfigError(`--routing must be prefix or load, got "${routing}"`);
  const dnsIntervalMs =
    flags.dnsInterval === undefined ? 5000 : parseCount(flags.dnsInterval, '--dns-interval', 100, 3_600_000);
  const prefills = flags.prefill.map((u) => parseWorkerUrl(u, '--prefill'));
  const decodes = flags.decode.map((u) => parseWorkerUrl(u, '--decode'));
  const secret = clusterSecret(flags.clusterSecret, env);
  const faults = faultsFromEnv(env);
  const timeouts = timeoutsFromEnv(env);
  const traceDir = traceDirFromEnv(env);
  const modelSpec = flags.model ?? DEFAULT_MODEL;
  const port = flags.port === undefined ? DEFAULT_PORT : parseCount(flags.port, '--port', 0, 65535);
  const host = flags.host ?? DEFAULT_HOST;
  if (faults.size > 0) log(`FAULT POINTS ARMED (tests only): ${faults.names().join(', ')}`);
  const apiKeys = flags.apiKeys === undefined ? undefined : await loadApiKeys(flags.apiKeys);
  const adminKey = parseAdminKey(flags, env);
  // The admin's hot loads go to every worker (ClusterLora), with the cluster secret.
  const cluster = new ClusterLora({
    workers: () => router.registry.entries,
    refresh: () => router.registry.refresh(),
    clusterSecret: secret,
    fileDigest: loraFileDigest,
    timeoutMs: 120_000,
    faults,
    log,
  });
  const adapters = await routerAdapters(
    parseLoraFlags(flags.lora ?? []),
    cluster,
    (name) => router.adapterInUse(name),
    log,
  );

  const display = progressDisplay(process.stderr);
  // The router never runs the model: config, tokenizer and chat template suffice.
  const model = await loadModelInfo(modelSpec, { cacheDir: tesseraHome(env), onProgress: display.update });
  display.done();
  const maxContext = Math.min(model.config.maxPositionEmbeddings, model.config.slidingWindow ?? Infinity);
  const contextLength =
    flags.contextLength === undefined ? maxContext : parseCount(flags.contextLength, '--context-length', 1, maxContext);
  const harmony = reasoningParserFor(undefined, '', model.config.arch) === 'gpt-oss';
  const trace = traceDir === null ? undefined : new TraceFile(traceDir, 'router');
  const router = new PdRouter({
    modelName: flags.servedModelName ?? modelSpec,
    root: model.source.spec,
    contextLength,
    prefills,
    decodes,
    clusterSecret: secret,
    textStream: (promptTokens, stops) =>
      new TextStream(
        // harmony's parser (gpt-oss) reads its channels from the special tokens
        model.tokenizer.createDetokenizer({ contextIds: promptTokens, skipSpecialTokens: !harmony }),
        stops,
      ),
    timeouts,
    faults,
    adminKey,
    adapters,
    dns: { targets: dnsTargets, intervalMs: dnsIntervalMs },
    routing,
    log,
    ...(trace === undefined ? {} : { trace, onWriter: (rid: string, prefill: string) => trace.writer(rid, prefill) }),
  });
  await router.start();
  // A worker that restarted or joined since a hot load gets the adapter (every 2 s, one pass at a time).
  const reconciling = setInterval(() => void cluster.reconcile(), 2_000);
  reconciling.unref();
  for (const w of router.registry.entries)
    log(
      `${w.role} ${w.url}: ${w.state}${w.address === undefined ? '' : ` (cluster ${w.address})`}${w.lastError === undefined ? '' : ` - ${w.lastError}`}`,
    );
  const codec = promptCodecOf(model.tokenizer, model.chatTemplate);
  const tokenizing = await startPromptTokenizing(model, codec, faults);
  // The reasoning parser by the model's template (qwen3 for one that writes </think>), as `serve` without the flag.
  const reasoningParser = reasoningParserFor(undefined, model.chatTemplate.text, model.config.arch);
  // The Batch API as on `serve`: the store on this router's disk, each line a request of its
  // tenant through this router (the API's own runner, behind interactive traffic).
  const batchStore =
    flags.batchDir === undefined
      ? null
      : new BatchStore(flags.batchDir, {
          answersInMemory: faults.has('batch-answers-in-memory'),
          ignoreTenant: faults.has('batch-ignore-tenant'),
        });
  const api = createApiServer({
    backend: router,
    codec,
    tokenizer: tokenizing.tokenizer,
    seed: randomInt(2 ** 31),
    ...(apiKeys === undefined ? {} : { apiKeys }),
    ...withAdminKey(adminKey),
    faults,
    drainTimeoutMs: DRAIN_MS,
    httpLimits: httpLimitsFromEnv(env),
    metricsHooks: [
      (registry) => router.attachMetrics(pdMetrics(registry)),
      (registry) => routingMetrics(registry, () => router.routingReport()),
    ],
    dashboard: { adminKey, plan: [] },
    grammar: grammarFor(model, faults),
    ...corsOption(flags),
    ...(reasoningParser === null ? {} : { reasoningParser }),
    ...(batchStore === null ? {} : { batch: { store: batchStore } }),
  });
  const stopped = stopRequested(env['TESSERA_SUPERVISED'] === '1', log);
  const address = await api.listen(port, host);
  process.stdout.write(
    `tessera: router for ${modelSpec} over ${prefills.length} prefill and ${decodes.length} decode workers${dnsTargets.length === 0 ? '' : ` and DNS ${dnsTargets.map((t) => `${t.role} ${t.name}:${t.port}`).join(', ')} (every ${dnsIntervalMs} ms)`}; context ${contextLength} tokens\n` +
      `tessera: listening on http://${address.host}:${address.port}${apiKeys === undefined ? '' : ` (${apiKeys.size} API keys)`}\n`,
  );
  log(tokenizing.description);
  await stopped;
  log('shutting down');
  clearInterval(reconciling);
  await api.close();
  batchStore?.close();
  await tokenizing.close();
  await router.close(2_000);
  trace?.close();
  log('stopped');
  return 0;
}

/**
 * The router's adapters: the names of --lora, each with the digest of its file (the router runs no
 * model: it reads the file only to name it as the workers do; they load their own --lora), for
 * the tenants it names; then the admin's hot loads and unloads, which go to every worker.
 */
async function routerAdapters(
  loras: readonly LoraFlag[],
  cluster: ClusterLora,
  inUse: (name: string) => number,
  log: (line: string) => void,
): Promise<LoraRegistry> {
  let started = false;
  const registry = new LoraRegistry(
    {
      loadLora: (name, path, scale) => (started ? cluster.loadLora(name, path, scale) : loraFileDigest(path, scale)),
      unloadLora: (name) => cluster.unloadLora(name),
    },
    inUse,
  );
  for (const { name, path, tenants } of loras) {
    const ref = await registry.load(name, path, 1, tenants).catch((error: unknown) => {
      throw new ConfigError(`--lora ${name}: ${error instanceof Error ? error.message : String(error)}`);
    });
    log(
      `LoRA adapter ${name} from ${path} (digest ${ref.digest})${tenants === null ? '' : ` for ${tenants.join(', ')}`}`,
    );
  }
  started = true;
  return registry;
}
