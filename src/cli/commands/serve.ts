// `tessera serve`: the co-located server. The composition root of one process:
//   1. flags + environment -> ServeConfig (config.ts; bad values exit 2)
//   2. --api-keys read and checked
//   3. the start-up check: the model's config (no weights yet) and the pool flags -> the pool;
//      a context length the pool cannot hold refuses to start (exit 2), unless the test-only
//      fault `skip-startup-check` is armed
//   4. the model loaded, the engine built (kernels, weights, the pool allocated once)
//   5. the co-located worker over the engine, the HTTP front end over the worker; listen
//   6. SIGINT/SIGTERM: stop accepting, drain, abort what is left, stop the worker, exit 0
// It must never compute, schedule or answer HTTP itself: it wires the modules that do.
import { randomInt } from 'node:crypto';
import { httpLimitsFromEnv } from '../config-http.js';
import type { Command } from 'commander';
import {
  createApiServer,
  kvEventsFor,
  kvTierMetrics,
  promptCodecOf,
  REASONING_PARSERS,
  reasoningParserFor,
  type ReasoningParserName,
} from '../../api/index.js';
import { BatchStore } from '../../batch/index.js';
import { PROMPT_LOGIT_ROWS } from '../../core/index.js';
import { Sampler } from '../../engine/index.js';
import { DEFAULT_SPEC } from '../../scheduler/index.js';
import { ColocatedWorker, tiersOf } from '../../worker/index.js';
import { loadApiKeys } from '../config-api-keys.js';
import { corsOption, grammarFor } from '../grammar-for.js';
import { DEFAULT_POOL_CONTEXTS, type PoolPlan } from '../config-pool.js';
import { formatBytes } from '../config-values.js';
import {
  DEFAULT_CHUNKED_PREFILL_SIZE,
  DEFAULT_HOST,
  DEFAULT_MAX_RUNNING_REQUESTS,
  DEFAULT_MODEL,
  DEFAULT_PAGE_SIZE,
  DEFAULT_KV_DISK_SIZE,
  DEFAULT_PORT,
  KERNELS_HELP,
  WEIGHTS_HELP,
  KV_DTYPE_HELP,
  parseServeConfig,
  type ServeConfig,
  type ServeFlags,
} from '../config.js';
import { collect, DEFAULT_DATA_HOST, parsePdWorkerConfig, parseRole, type PdServeFlags } from '../config-pd.js';
import { LORA_HELP, parseLoraFlags, type LoraFlag } from '../config-lora.js';
import { ADMIN_KEY_HELP, parseAdminKey, withAdminKey, type AdminKeyFlags } from '../config-admin.js';
import { planLines } from './plan.js';
import { servePd } from './serve-pd.js';
import { startEngine } from './start-engine.js';
import { startPromptTokenizing } from '../tokenizer-threads.js';
import { openKvDisk } from '../kv-disk.js';

/** How long in-flight requests may run on after SIGINT/SIGTERM before they are aborted. */
const DRAIN_TIMEOUT_MS = 10_000;

export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('serve the OpenAI-compatible API from one process (prefill and decode on one KV pool)')
    .option('--model <spec>', `a Hugging Face directory, a .gguf file, or builtin:NAME (default ${DEFAULT_MODEL})`)
    .option('--served-model-name <name>', 'the model name clients pass (default: the --model value)')
    .option('--host <host>', `address to listen on (default ${DEFAULT_HOST})`)
    .option('--port <n>', `port to listen on; 0 picks a free one (default ${DEFAULT_PORT})`)
    .option('--context-length <n>', "largest prompt + max_tokens per request (default: the model's)")
    .option('--kv-pages <n>', 'KV pool size in pages')
    .option(
      '--kv-memory <size>',
      `KV pool size in memory, e.g. 512MiB or 2GiB (default: room for ${DEFAULT_POOL_CONTEXTS} requests of the full context length)`,
    )
    .option('--page-size <n>', `tokens per KV page (default ${DEFAULT_PAGE_SIZE})`)
    .option('--kv-dtype <dtype>', KV_DTYPE_HELP)
    .option(
      '--max-running-requests <n>',
      `most requests prefilling or decoding at once (default ${DEFAULT_MAX_RUNNING_REQUESTS})`,
    )
    .option(
      '--chunked-prefill-size <n>',
      `most tokens in one step; longer prompts are prefilled in chunks (default ${DEFAULT_CHUNKED_PREFILL_SIZE})`,
    )
    .option(
      '--max-step-ms <ms>',
      "time budget of a step with running decodes: prefill is chunked to fit; auto (default: twice the decodes' own step time), off, or ms",
    )
    .option(
      '--kv-disk <dir>',
      'spill evicted prefix-cache pages to files in DIR and load them back (kept across restarts)',
    )
    .option(
      '--kv-disk-size <size>',
      `most bytes the --kv-disk directory holds, least recently used deleted first (default ${DEFAULT_KV_DISK_SIZE})`,
    )
    .option(
      '--spec-max-draft <n>',
      'speculative decoding by prompt lookup: most draft tokens a decode verifies per step, adapted per request ' +
        `to its acceptance; 0 turns it off (default ${DEFAULT_SPEC.maxDraft})`,
    )
    .option(
      '--draft-model <spec>',
      'speculative decoding with a draft model: a smaller model of the same vocabulary (a Hugging Face directory, ' +
        'a .gguf file or builtin:NAME) drafts greedily in its own KV pool instead of prompt lookup (PD: on decode workers)',
    )
    .option(
      '--draft-vocab <n>',
      "the draft model's output head cut to the vocabulary's first n ids (a BPE vocabulary's merge order: its most " +
        'frequent tokens; FR-Spec): cheaper draft passes, drafts only of those tokens; the target still verifies every token',
    )
    .option('--api-keys <file>', 'JSON object mapping each API key to its tenant; requests without a valid key get 401')
    .option('--cors-origin <origin>', 'answer browsers from this origin (CORS; * for any); default: no CORS headers')
    .option(
      '--deterministic',
      "batch-invariant kernels: a greedy request's output does not depend on what runs beside it",
    )
    .option('--kernels <name>', KERNELS_HELP)
    .option('--weights <mode>', WEIGHTS_HELP)
    .option(
      '--role <role>',
      'colocated (default), or prefill / decode: one worker of a disaggregated cluster (see `tessera router`, `tessera up`)',
    )
    .option(
      '--data-host <host>',
      `prefill/decode: the internal listener for the router and peer workers (default ${DEFAULT_DATA_HOST})`,
    )
    .option('--data-port <n>', 'prefill/decode: its port; 0 picks a free one (default 0; /health reports it)')
    .option(
      '--cluster-secret <secret>',
      'prefill/decode: the secret shared by the cluster (default: $TESSERA_CLUSTER_SECRET)',
    )
    .option('--admin-key <key>', ADMIN_KEY_HELP)
    .option(
      '--reasoning-parser <name>',
      'split reasoning into reasoning_content: auto (default: gpt-oss for a gpt-oss model, qwen3 for a template ' +
        `that writes </think>), none, ${REASONING_PARSERS.join(', ')}`,
    )
    .option('--lora <name=path>', LORA_HELP, collect, [])
    .option(
      '--batch-dir <dir>',
      'serve the Batch API (/v1/files, /v1/batches): uploads, batches and answers kept in DIR across restarts',
    )
    .action(
      async (
        flags: ServeFlags &
          PdServeFlags &
          AdminKeyFlags & { reasoningParser?: string; batchDir?: string; lora?: string[] },
      ) => {
        const role = parseRole(flags);
        const config = parseServeConfig(flags, process.env);
        const loras = parseLoraFlags(flags.lora ?? []);
        const adminKey = parseAdminKey(flags, process.env);
        reasoningParserFor(flags.reasoningParser, ''); // an unknown name exits 2 before the model loads
        process.exitCode =
          role === 'colocated'
            ? await serve(config, adminKey, corsOption(flags), flags.reasoningParser, flags.batchDir, loras)
            : await servePd(config, parsePdWorkerConfig(role, flags, process.env), adminKey, loras);
      },
    );
}

/** Runs until a signal (exit code 0) or a fatal worker error (1). */
async function serve(
  config: ServeConfig,
  adminKey: string | null,
  cors: { readonly corsOrigin?: string } = {},
  reasoningFlag?: string,
  batchDir?: string,
  loras: readonly LoraFlag[] = [],
): Promise<number> {
  const log = (line: string): void => void process.stderr.write(`tessera: ${line}\n`);
  if (config.faults.size > 0) log(`FAULT POINTS ARMED (tests only): ${config.faults.names().join(', ')}`);
  const apiKeys = config.apiKeysFile === null ? undefined : await loadApiKeys(config.apiKeysFile);

  const { plan, model, engine, kernels, drafter } = await startEngine(config, log);

  let fatal: (error: unknown) => void = () => undefined;
  const failed = new Promise<number>((resolve) => (fatal = () => resolve(1)));
  const grammar = grammarFor(model, config.faults);
  const kvDisk = openKvDisk(config.kvDisk, engine.fingerprint, config.faults, log);
  // KV events (GET /kv-events): with an admin key, which also keys their hashes.
  const kvEvents = kvEventsFor({
    hashKey: adminKey,
    readKeys: [adminKey],
    node: 'colocated',
    blockSize: plan.pageSize,
    faults: config.faults,
  });
  // The reasoning parser by --reasoning-parser, else by the model's arch or template; harmony's needs the special tokens.
  const reasoningParser = reasoningParserFor(reasoningFlag, model.chatTemplate.text, model.config.arch);
  const worker = new ColocatedWorker({
    ...kvDisk.spill,
    keepSpecialTokens: reasoningParser === 'gpt-oss',
    ...(kvEvents === null ? {} : { kvEvents: kvEvents.ring }),
    grammar,
    modelName: config.servedModelName,
    root: model.source.spec,
    contextLength: plan.contextLength,
    pool: engine.pool,
    runner: engine.runner,
    lora: engine.lora,
    sampler: new Sampler(model.config.vocabSize),
    tokenizer: model.tokenizer,
    eosTokenIds: model.config.eosTokenIds,
    maxRunningRequests: config.maxRunningRequests,
    chunkedPrefillSize: config.chunkedPrefillSize,
    promptLogitRows: PROMPT_LOGIT_ROWS, // start-engine sizes the runner's logits for them
    speculation: config.speculation,
    ...(drafter === undefined ? {} : { drafter }),
    maxStepMs: config.maxStepMs,
    maxWaiting: config.maxWaiting,
    faults: config.faults,
    checkEveryStep: config.checkEveryStep,
    healthDetail: {
      kernels,
      deterministic: config.deterministic,
      kvPages: plan.numPages,
      pageSize: plan.pageSize,
      contextLength: plan.contextLength,
      ...(drafter === undefined ? {} : { draftModel: drafter.name }),
    },
    onFatal: (error) => {
      log(
        `worker stopped on an internal error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
      );
      fatal(error);
    },
  });
  for (const { name, path, tenants } of loras) {
    const ref = await worker.adapters?.load(name, path, 1, tenants);
    log(
      `LoRA adapter ${name} from ${path} (digest ${ref?.digest ?? '?'})${tenants === null ? '' : ` for ${tenants.join(', ')}`}`,
    );
  }
  const codec = promptCodecOf(model.tokenizer, model.chatTemplate);
  const batchStore =
    batchDir === undefined
      ? null
      : new BatchStore(batchDir, {
          answersInMemory: config.faults.has('batch-answers-in-memory'),
          ignoreTenant: config.faults.has('batch-ignore-tenant'),
        });
  const tokenizing = await startPromptTokenizing(model, codec, config.faults);
  const api = createApiServer({
    backend: worker,
    codec,
    tokenizer: tokenizing.tokenizer,
    seed: randomInt(2 ** 31),
    ...(apiKeys === undefined ? {} : { apiKeys }),
    ...withAdminKey(adminKey),
    faults: config.faults,
    metricsHooks: [...kvDisk.metricsHooks, (registry) => kvTierMetrics(registry, () => tiersOf(engine.pool) ?? [])],
    drainTimeoutMs: DRAIN_TIMEOUT_MS,
    httpLimits: httpLimitsFromEnv(process.env),
    dashboard: { adminKey, plan: planLines(config.model, plan, engine.kernels.plan) },
    grammar,
    ...cors,
    ...reasoningOption(reasoningParser),
    ...(batchStore === null ? {} : { batch: { store: batchStore } }),
    // BlockStored's lora_id: the adapter's name, by its digest in the block's KV tenant.
    ...(kvEvents === null ? {} : { kvEvents: { ...kvEvents, adapterName: (d: string) => worker.adapters?.nameOf(d) } }),
  });
  // Signal handlers go in before the address is printed: a supervisor (or a test) may send
  // SIGTERM the moment it reads it, and must get a graceful shutdown, not the default death.
  const stopped = signalled();
  const address = await api.listen(config.port, config.host);
  process.stdout.write(
    `tessera: serving ${config.model} as "${config.servedModelName}" (${kernels}); ${describePool(plan)}\n` +
      `tessera: listening on http://${address.host}:${address.port}${apiKeys === undefined ? '' : ` (${apiKeys.size} API keys)`}\n`,
  );
  log(tokenizing.description);

  const code = await Promise.race([stopped, failed]);
  log(code === 0 ? 'shutting down' : 'shutting down after a fatal error');
  await api.close();
  batchStore?.close();
  await tokenizing.close();
  await worker.close();
  await kvDisk.close(worker.scheduler.prefixCache);
  await engine.dispose();
  await drafter?.engine.dispose();
  log('stopped');
  return code;
}

function describePool(plan: PoolPlan): string {
  return (
    `context ${plan.contextLength} tokens; KV pool ${plan.poolTokens} tokens = ${plan.numPages} pages of ${plan.pageSize} ` +
    `(${formatBytes(plan.poolBytes)}, ${plan.kvDtype} KV)`
  );
}

/** Resolves 0 on the first SIGINT or SIGTERM; a second one exits at once. */
function signalled(): Promise<number> {
  return new Promise((resolve) => {
    const onSignal = (signal: NodeJS.Signals): void => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      process.stderr.write(`tessera: ${signal}\n`);
      process.once('SIGINT', () => process.exit(130));
      process.once('SIGTERM', () => process.exit(143));
      resolve(0);
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  });
}

const reasoningOption = (parser: ReasoningParserName | null): { readonly reasoningParser?: ReasoningParserName } =>
  parser === null ? {} : { reasoningParser: parser };
