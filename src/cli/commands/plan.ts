// `tessera plan`: the KV arithmetic of a node, before it runs: bytes per token per layer, per
// token, per page; pages, tokens and bytes in the pool; the context length in pages; and whether
// the pool holds one request of the full context length. Exits 2 (with the start-up check's
// message) when it does not: the same check, on the same numbers, as `tessera serve`. Then the
// kernel table: which backend runs which op on this machine (kernels' planKernels, as serve).
// Then the memory: weights (repacked + what stays of the file, by --weights), KV pool and
// activations against the machine's memory; exits 2 when they do not fit, as `serve` refuses to
// start (config-memory.ts). It reads the model's config and tensor sizes only, never its weights.
import type { Command } from 'commander';
import { detectKernelSupport, formatKernelPlan, planKernels, type KernelPlan } from '../../kernels/index.js';
import { readModelConfig } from '../config-model.js';
import { planPool, startupCheckError, type PoolPlan } from '../config-pool.js';
import { memoryCheckError, memoryLines, planMemory, readWeightsOnDisk, type MemoryPlan } from '../config-memory.js';
import { PROMPT_LOGIT_ROWS } from '../../core/index.js';
import { formatBytes, formatCount } from '../config-values.js';
import {
  DEFAULT_MODEL,
  DEFAULT_PAGE_SIZE,
  KERNELS_HELP,
  KV_DTYPE_HELP,
  WEIGHTS_HELP,
  DEFAULT_CHUNKED_PREFILL_SIZE,
  DEFAULT_MAX_RUNNING_REQUESTS,
  parseWeightsMode,
  parseKernelChoice,
  parsePoolFlags,
  type ServeFlags,
} from '../config.js';
import { tesseraHome } from '../config-env.js';

type PlanFlags = Pick<
  ServeFlags,
  'model' | 'kvPages' | 'kvMemory' | 'pageSize' | 'kvDtype' | 'contextLength' | 'kernels' | 'deterministic' | 'weights'
>;

export function registerPlan(program: Command): void {
  program
    .command('plan')
    .description(
      'print the KV pool arithmetic for a model and pool size; exit 2 when the context length does not fit the pool',
    )
    .option('--model <spec>', `a Hugging Face directory, a .gguf file, or builtin:NAME (default ${DEFAULT_MODEL})`)
    .option('--kv-pages <n>', 'KV pool size in pages')
    .option('--kv-memory <size>', 'KV pool size in memory, e.g. 512MiB or 2GiB (default: as `tessera serve`)')
    .option('--page-size <n>', `tokens per KV page (default ${DEFAULT_PAGE_SIZE})`)
    .option('--kv-dtype <dtype>', KV_DTYPE_HELP)
    .option('--context-length <n>', "largest prompt + max_tokens per request (default: the model's)")
    .option('--kernels <name>', KERNELS_HELP)
    .option('--weights <mode>', WEIGHTS_HELP)
    .option('--deterministic', 'as `tessera serve --deterministic`: demand batch-invariant kernels')
    .action(async (flags: PlanFlags) => {
      const spec = flags.model ?? DEFAULT_MODEL;
      const pool = parsePoolFlags(flags);
      const kernels = planKernels(
        parseKernelChoice(flags.kernels),
        flags.deterministic === true,
        detectKernelSupport(),
      );
      const config = await readModelConfig(spec, tesseraHome(process.env));
      const plan = planPool(config, pool);
      const weights = await readWeightsOnDisk(
        spec,
        tesseraHome(process.env),
        parseWeightsMode(flags.weights),
        kernels.backend === 'native',
      );
      const memory = planMemory(config, weights, plan, {
        maxStepTokens: DEFAULT_CHUNKED_PREFILL_SIZE,
        maxStepLogits: DEFAULT_MAX_RUNNING_REQUESTS + PROMPT_LOGIT_ROWS,
      });
      process.stdout.write(`${planLines(spec, plan, kernels, memory).join('\n')}\n`);
      const refusal = startupCheckError(plan) ?? memoryCheckError(memory);
      if (refusal !== undefined) throw refusal;
    });
}

/** What `tessera plan` prints (and the dashboard's "tessera plan" panel shows): the pool, then the kernels. */
export function planLines(spec: string, plan: PoolPlan, kernels: KernelPlan, memory?: MemoryPlan): string[] {
  const rows = memory === undefined ? [] : memoryLines(memory);
  const width = Math.max('KV per token per layer'.length, ...rows.map(([k]) => k.length)); // renderPlan's widest key
  return [
    ...renderPlan(spec, plan).trimEnd().split('\n'),
    ...rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`),
    ...formatKernelPlan(kernels).split('\n'),
  ];
}

export function renderPlan(spec: string, plan: PoolPlan): string {
  const { shape } = plan;
  const b = (n: number): string => `${formatCount(n)} B${n >= 1024 ? ` (${formatBytes(n)})` : ''}`;
  const sizedBy =
    plan.size.kind === 'pages'
      ? `--kv-pages ${plan.size.numPages}`
      : plan.size.kind === 'memory'
        ? `--kv-memory ${formatBytes(plan.size.bytes)} / ${b(plan.bytesPerPage)} per page, rounded down`
        : `default: room for ${plan.numPages / plan.contextPages} requests of the full context length`;
  const rows: [string, string][] = [
    [
      'model',
      `${spec}: ${shape.numLayers} layers, ${shape.numKvHeads} KV heads x ${shape.headDim} head dim, KV stored as ${plan.kvDtype} (${shape.bytesPerElement} B)`,
    ],
    [
      'KV per token per layer',
      `${b(plan.bytesPerTokenPerLayer)} = 2 (K and V) x ${shape.numKvHeads} heads x ${shape.headDim} x ${shape.bytesPerElement} B`,
    ],
    [
      'KV per token',
      `${b(plan.bytesPerToken)} = ${formatCount(plan.bytesPerTokenPerLayer)} B x ${shape.numLayers} layers`,
    ],
    ['KV per page', `${b(plan.bytesPerPage)} = ${formatCount(plan.bytesPerToken)} B x ${plan.pageSize} tokens`],
    [
      'pool',
      `${formatCount(plan.numPages)} pages = ${formatCount(plan.poolTokens)} tokens = ${b(plan.poolBytes)}  (${sizedBy})`,
    ],
    [
      'context length',
      `${formatCount(plan.contextLength)} tokens (${plan.contextFrom === 'flag' ? '--context-length' : "the model's"}) = ${formatCount(plan.contextPages)} pages`,
    ],
    ['fits', fitLine(plan)],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  return rows.map(([k, v]) => `${k.padEnd(width)}  ${v}\n`).join('');
}

function fitLine(plan: PoolPlan): string {
  if (plan.contextPages > plan.numPages) {
    return `NO: the context needs ${formatCount(plan.contextPages)} pages, the pool has ${formatCount(plan.numPages)}`;
  }
  const full = Math.floor(plan.numPages / plan.contextPages);
  return `yes: the pool holds ${full} request${full === 1 ? '' : 's'} of the full context length`;
}
