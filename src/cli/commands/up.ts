// `tessera up`: a whole disaggregated cluster on this machine, on loopback: N prefill and M
// decode workers (`tessera serve --role ...`) and a router in front of them. `npm start` runs it.
//   1. a cluster secret (TESSERA_CLUSTER_SECRET if set, else 32 random bytes), given to every
//      child through its environment (argv is visible in `ps`)
//   2. builtin models generated once, before any child starts
//   3. the workers, in parallel, each on --port 0 / --data-port 0; wait until each listens
//   4. the router with their URLs; wait until its /health says every worker answers
//   5. print where everything listens; forward every child's log lines with a prefix
//   6. Ctrl-C / SIGTERM: the router first (it drains clients), then the workers; exit 0.
//      A worker that dies is reported and the rest go on (the router routes around it); a router
//      that dies stops the cluster (exit 1). Children stop by themselves if `up` dies.
// Every wait has a timeout. It must never serve or relay anything itself.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Command } from 'commander';
import { ConfigError } from '../../core/index.js';
import { isBuiltinSpec, loadModelInfo, packageRoot, resolveBuiltinModel } from '../../model/index.js';
import { ADMIN_KEY_ENV, ADMIN_KEY_HELP, parseAdminKey } from '../config-admin.js';
import { LORA_HELP, parseLoraFlags } from '../config-lora.js';
import { collect } from '../config-pd.js';
import { tesseraHome } from '../config-env.js';
import { checkDraftVocabulary } from '../config-model.js';
import { parseCount } from '../config-values.js';
import {
  DEFAULT_HOST,
  DEFAULT_MODEL,
  DEFAULT_PORT,
  KERNELS_HELP,
  WEIGHTS_HELP,
  parseWeightsMode,
  KV_DTYPE_HELP,
  parseKernelChoice,
  parseKvDtype,
} from '../config.js';
import { delay, stopRequested } from './lifecycle.js';
import { describeExit, SupervisedChild } from '../supervisor.js';
import { parseCpuPins, pinnedCommand } from '../cpu-pinning.js';
import { nextRestartCount, restartDelayMs } from '../restart-policy.js';

const START_TIMEOUT_MS = 180_000;
const READY_TIMEOUT_MS = 60_000;
const STOP_GRACE_MS = 15_000;

interface UpFlags {
  readonly prefill?: string;
  readonly decode?: string;
  readonly host?: string;
  readonly port?: string;
  readonly model?: string;
  readonly servedModelName?: string;
  readonly contextLength?: string;
  readonly kvPages?: string;
  readonly kvMemory?: string;
  readonly prefillKvPages?: string;
  readonly decodeKvPages?: string;
  readonly pageSize?: string;
  readonly kvDtype?: string;
  readonly maxRunningRequests?: string;
  readonly chunkedPrefillSize?: string;
  readonly maxStepMs?: string;
  readonly specMaxDraft?: string;
  readonly draftModel?: string;
  readonly cpus?: string;
  readonly deterministic?: boolean;
  readonly kernels?: string;
  readonly weights?: string;
  readonly apiKeys?: string;
  readonly adminKey?: string;
  readonly kvDisk?: string;
  readonly kvDiskSize?: string;
  readonly batchDir?: string;
  readonly lora?: readonly string[];
}

export function registerUp(program: Command): void {
  program
    .command('up')
    .description(
      'start a local disaggregated cluster: a router and N prefill + M decode workers on loopback (Ctrl-C stops all of it)',
    )
    .option('--prefill <n>', 'prefill workers (default 1)')
    .option('--decode <n>', 'decode workers (default 1)')
    .option('--host <host>', `the router's address (default ${DEFAULT_HOST}); workers always listen on 127.0.0.1`)
    .option('--port <n>', `the router's port; 0 picks a free one (default ${DEFAULT_PORT})`)
    .option('--model <spec>', `a Hugging Face directory, a .gguf file, or builtin:NAME (default ${DEFAULT_MODEL})`)
    .option('--served-model-name <name>', 'the model name clients pass (default: the --model value)')
    .option('--context-length <n>', "largest prompt + max_tokens per request (default: the model's)")
    .option('--kv-pages <n>', 'KV pool size in pages, for every worker')
    .option('--kv-memory <size>', 'KV pool size in memory, for every worker (default: as `tessera serve`)')
    .option(
      '--kv-disk <dir>',
      "each prefill's disk tier under its prefix cache, in DIR/prefill-N (see `tessera serve --kv-disk`)",
    )
    .option('--kv-disk-size <size>', "most bytes of each prefill's --kv-disk directory (default: as `tessera serve`)")
    .option('--prefill-kv-pages <n>', 'KV pool size of the prefill workers (pools may differ)')
    .option('--decode-kv-pages <n>', 'KV pool size of the decode workers')
    .option('--page-size <n>', 'tokens per KV page (the same on every worker)')
    .option('--kv-dtype <dtype>', `${KV_DTYPE_HELP}; the same on every worker`)
    .option('--max-running-requests <n>', 'most requests prefilling or decoding at once, per worker')
    .option('--chunked-prefill-size <n>', 'most tokens in one step, per worker')
    .option('--max-step-ms <ms>', 'time budget of a step with running decodes, per worker (auto, off, or ms)')
    .option(
      '--spec-max-draft <n>',
      'prompt-lookup speculative decoding on the decode workers: most drafted tokens (0: off)',
    )
    .option(
      '--draft-model <spec>',
      'speculative decoding with a draft model of the same vocabulary on the decode workers (refused before any child starts when the vocabularies differ)',
    )
    .option(
      '--cpus <pins>',
      'pin roles to CPUs with taskset, e.g. prefill=0,decode=1,router=0 (CPUS like 0, 2-3 or 0+2)',
    )
    .option('--deterministic', 'batch-invariant kernels on every worker')
    .option('--kernels <name>', `${KERNELS_HELP}; the same on every worker`)
    .option('--weights <mode>', `${WEIGHTS_HELP}; the same on every worker`)
    .option('--api-keys <file>', 'JSON object mapping each API key to its tenant (checked by the router)')
    .option('--admin-key <key>', `${ADMIN_KEY_HELP}; given to every child through its environment`)
    .option('--batch-dir <dir>', "serve the Batch API (/v1/files, /v1/batches) on the router's disk, in DIR")
    .option('--lora <name=path>', `${LORA_HELP}; loaded by every worker, named by the router`, collect, [])
    .action(async (flags: UpFlags) => {
      process.exitCode = await up(flags);
    });
}

async function up(flags: UpFlags): Promise<number> {
  const log = (line: string): void => void process.stderr.write(`tessera up: ${line}\n`);
  const numPrefill = flags.prefill === undefined ? 1 : parseCount(flags.prefill, '--prefill', 1, 64);
  const numDecode = flags.decode === undefined ? 1 : parseCount(flags.decode, '--decode', 1, 64);
  if (flags.kvMemory !== undefined && (flags.kvPages ?? flags.prefillKvPages ?? flags.decodeKvPages) !== undefined) {
    throw new ConfigError(
      'give --kv-memory or page counts (--kv-pages, --prefill-kv-pages, --decode-kv-pages), not both',
    );
  }
  if (flags.kvDtype !== undefined) parseKvDtype(flags.kvDtype); // refused here, before any child starts
  parseKernelChoice(flags.kernels);
  parseWeightsMode(flags.weights);
  if (flags.specMaxDraft !== undefined) parseCount(flags.specMaxDraft, '--spec-max-draft', 0, 16);
  const pins = parseCpuPins(flags.cpus);
  const loras = parseLoraFlags(flags.lora ?? []); // refused here, before any child starts
  const loraArgs = (withTenants: boolean): string[] =>
    loras.flatMap(({ name, path, tenants }) => [
      '--lora',
      `${name}=${path}${withTenants && tenants !== null ? `@${tenants.join(',')}` : ''}`,
    ]);
  const model = flags.model ?? DEFAULT_MODEL;
  const home = tesseraHome(process.env);
  if (isBuiltinSpec(model)) await resolveBuiltinModel(model, { cacheDir: home });
  // before any child starts (a decode worker would refuse it too, and restart)
  if (flags.draftModel !== undefined)
    await checkDraftVocabulary(model, flags.draftModel, await loadModelInfo(model, { cacheDir: home }), home);
  const secret = process.env['TESSERA_CLUSTER_SECRET'] ?? randomBytes(32).toString('hex');
  const adminKey = parseAdminKey(flags, process.env);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    TESSERA_CLUSTER_SECRET: secret,
    TESSERA_SUPERVISED: '1',
    TESSERA_HOME: home,
    ...(adminKey === null ? {} : { [ADMIN_KEY_ENV]: adminKey }),
  };
  const bin = join(packageRoot(), 'bin', 'tessera.js');
  const forward = (line: string): void => void process.stderr.write(`${line}\n`);
  const opt = (name: string, value: string | undefined): string[] => (value === undefined ? [] : [name, value]);
  const common = [
    '--model',
    model,
    ...opt('--served-model-name', flags.servedModelName),
    ...opt('--context-length', flags.contextLength),
    ...opt('--page-size', flags.pageSize),
    ...opt('--kv-dtype', flags.kvDtype),
    ...opt('--max-running-requests', flags.maxRunningRequests),
    ...opt('--chunked-prefill-size', flags.chunkedPrefillSize),
    ...opt('--kv-memory', flags.kvMemory),
    ...opt('--max-step-ms', flags.maxStepMs),
    ...(flags.deterministic === true ? ['--deterministic'] : []),
    ...opt('--kernels', flags.kernels),
    ...opt('--weights', flags.weights),
  ];
  const workerArgs = (role: 'prefill' | 'decode', name: string): string[] => {
    const pages = (role === 'prefill' ? flags.prefillKvPages : flags.decodeKvPages) ?? flags.kvPages;
    // A prefill's disk tier is its own directory: it keeps it across its restarts.
    const kvDisk =
      role === 'prefill' && flags.kvDisk !== undefined
        ? ['--kv-disk', join(flags.kvDisk, name), ...opt('--kv-disk-size', flags.kvDiskSize)]
        : [];
    return [
      'serve',
      '--role',
      role,
      '--host',
      '127.0.0.1',
      '--port',
      '0',
      '--data-port',
      '0',
      ...common,
      ...opt('--kv-pages', pages),
      ...kvDisk,
      ...(role === 'decode' ? opt('--spec-max-draft', flags.specMaxDraft) : []),
      ...(role === 'decode' ? opt('--draft-model', flags.draftModel) : []),
      ...loraArgs(false),
    ];
  };

  const children: SupervisedChild[] = [];
  let stopping = false;
  let ready = false;
  let routerDied: (() => void) | undefined;
  const routerGone = new Promise<number>((resolve) => (routerDied = () => resolve(1)));
  process.once('exit', () => children.forEach((c) => c.killNow()));
  // A worker that dies after start-up is restarted on the same ports (the router knows it by them), with backoff.
  const restartArgs = new Map<string, string[]>();
  const restarts = new Map<string, number>();
  const startChild = (name: string, args: string[]): SupervisedChild => {
    const role = name === 'router' ? 'router' : name.startsWith('prefill') ? 'prefill' : 'decode';
    const pinned = pinnedCommand(pins, role, process.execPath, [bin, ...args]);
    const child = new SupervisedChild(name, pinned.command, pinned.args, env, forward);
    const startedAt = Date.now();
    children.push(child);
    void child.exited.then((e) => {
      if (stopping) return;
      const again = ready && name !== 'router' ? restartArgs.get(name) : undefined;
      const count = nextRestartCount(restarts.get(name) ?? -1, Date.now() - startedAt);
      const wait = restartDelayMs(count);
      const next = !ready
        ? ' during start-up'
        : name === 'router'
          ? ': stopping the cluster'
          : again === undefined
            ? '; the router routes around it'
            : `; restarting it in ${wait} ms (restart ${count + 1} in a row); the router routes around it meanwhile`;
      log(`${name} (pid ${child.pid}) exited (${describeExit(e)})${next}`);
      if (name === 'router') routerDied?.();
      if (again === undefined) return;
      restarts.set(name, count);
      setTimeout(() => {
        if (stopping) return;
        children.splice(children.indexOf(child), 1);
        const fresh = startChild(name, again);
        fresh.waitFor(/listening on (http:\/\/\S+)/, 'its HTTP address', START_TIMEOUT_MS).then(
          (m) => log(`${name} restarted: pid ${fresh.pid}, http: ${m[1]}`),
          () => undefined, // its exit is reported (and restarted) above
        );
      }, wait).unref();
    });
    return child;
  };
  const stopAll = async (): Promise<void> => {
    stopping = true;
    const router = children.find((c) => c.name === 'router');
    if (router !== undefined) await router.stop(STOP_GRACE_MS);
    await Promise.all(children.map((c) => c.stop(STOP_GRACE_MS)));
  };

  const stopped = stopRequested(false, log);
  try {
    const workers = [
      ...Array.from({ length: numPrefill }, (_, i) => ({ name: `prefill-${i + 1}`, role: 'prefill' as const })),
      ...Array.from({ length: numDecode }, (_, i) => ({ name: `decode-${i + 1}`, role: 'decode' as const })),
    ].map((w) => ({ ...w, child: startChild(w.name, workerArgs(w.role, w.name)) }));
    const listening = await Promise.race([
      Promise.all(
        workers.map(async (w) => {
          const url = (
            await w.child.waitFor(/listening on (http:\/\/\S+)/, 'its HTTP address', START_TIMEOUT_MS)
          )[1] as string;
          const cluster = (
            await w.child.waitFor(/cluster listener on (\S+)/, 'its cluster address', 1_000)
          )[1] as string;
          return { ...w, url, cluster };
        }),
      ),
      stopped.then(() => undefined),
    ]);
    if (listening === undefined) return (await stopAll(), 0);
    for (const w of listening) {
      const port = new URL(w.url).port;
      const dataPort = w.cluster.slice(w.cluster.lastIndexOf(':') + 1);
      restartArgs.set(
        w.name,
        workerArgs(w.role, w.name).map((a, i, all) =>
          all[i - 1] === '--port' ? port : all[i - 1] === '--data-port' ? dataPort : a,
        ),
      );
    }
    const routerArgs = [
      'router',
      '--host',
      flags.host ?? DEFAULT_HOST,
      '--port',
      flags.port ?? String(DEFAULT_PORT),
      '--model',
      model,
      ...opt('--served-model-name', flags.servedModelName),
      ...opt('--context-length', flags.contextLength),
      ...opt('--api-keys', flags.apiKeys),
      ...opt('--batch-dir', flags.batchDir),
      ...loraArgs(true),
      ...listening.flatMap((w) => [`--${w.role}`, w.url]),
    ];
    const router = startChild('router', routerArgs);
    const routerUrl = (
      await router.waitFor(/listening on (http:\/\/\S+)/, 'its HTTP address', START_TIMEOUT_MS)
    )[1] as string;
    await waitHealthy(routerUrl, READY_TIMEOUT_MS);
    ready = true;
    const lines = [
      ...listening.map((w) => `${w.name.padEnd(10)} http: ${w.url}  cluster: ${w.cluster}  pid ${w.child.pid}`),
      `${'router'.padEnd(10)} http: ${routerUrl}  pid ${router.pid}`,
      ...(adminKey === null ? [] : [`${'dashboard'.padEnd(10)} ${routerUrl}/dashboard?key=<the admin key>`]),
    ];
    process.stdout.write(
      `${lines.map((l) => `tessera up: ${l}`).join('\n')}\ntessera: listening on ${routerUrl} (OpenAI API at ${routerUrl}/v1; Ctrl-C stops the cluster)\n`,
    );
  } catch (error) {
    log(`start-up failed: ${error instanceof Error ? error.message : String(error)}`);
    await stopAll();
    return 1;
  }
  const code = await Promise.race([stopped, routerGone]);
  log(code === 0 ? 'stopping the cluster' : 'the router died: stopping the cluster');
  await stopAll();
  log('stopped');
  return code;
}

/** Polls the router's /health until it answers 200 and every worker is up. */
async function waitHealthy(url: string, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  let last = 'no answer yet';
  while (Date.now() < until) {
    try {
      const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2_000) });
      const body = (await response.json()) as { workers?: { state?: string }[] };
      if (response.status === 200 && (body.workers ?? []).every((w) => w.state === 'up')) return;
      last = `${response.status}: ${JSON.stringify(body)}`;
    } catch (error) {
      last = error instanceof Error ? error.message : String(error);
    }
    await delay(100);
  }
  throw new Error(`the router at ${url} did not become healthy within ${timeoutMs} ms (last: ${last})`);
}
