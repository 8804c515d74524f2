// The import rule of docs/ARCHITECTURE.md, enforced in `npm test`:
// a module imports only from lower layers, only through that module's index.ts, with no cycles;
// I/O modules (node:net, node:http, timers) appear only at the edges.
const layers = {
  core: [],
  pages: ['core'],
  kernels: ['core'],
  // formats: model files read and written (HF config and safetensors, GGUF, tensor names, RoPE tables).
  formats: ['core', 'kernels'],
  // tokenizer: text <-> ids, chat templates, tool prompts, the tokenizer threads.
  tokenizer: ['core', 'formats'],
  // gen: gen-model's random-weight models, presets and the vocabularies they ship.
  gen: ['core', 'kernels', 'formats'],
  // model: what the user named -> a loaded model (src/model before issue 31 held all five).
  model: ['core', 'kernels', 'formats', 'tokenizer', 'gen'],
  scheduler: ['core', 'pages'],
  transfer: ['core', 'pages'],
  grammar: ['core'],
  // batch: the Batch API's durable store (files, batches, answers) on its own write-ahead log.
  batch: ['core'],
  // engine: a loaded model run step by step: kernel choice, forward passes, runner, sampler, the step loop.
  engine: ['core', 'pages', 'kernels', 'formats', 'model', 'scheduler'],
  worker: ['core', 'pages', 'kernels', 'formats', 'tokenizer', 'model', 'engine', 'scheduler', 'transfer', 'grammar'],
  router: ['core', 'pages', 'formats', 'tokenizer', 'model', 'scheduler', 'transfer', 'grammar'],
  api: [
    'core',
    'pages',
    'kernels',
    'formats',
    'tokenizer',
    'model',
    'engine',
    'scheduler',
    'transfer',
    'worker',
    'router',
    'grammar',
    'batch',
  ],
  // probe: an HTTP client of any OpenAI-compatible endpoint, beside api; it knows nothing of the server's insides.
  probe: ['core'],
  cli: [
    'core',
    'pages',
    'kernels',
    'formats',
    'tokenizer',
    'gen',
    'model',
    'engine',
    'scheduler',
    'transfer',
    'worker',
    'router',
    'api',
    'probe',
    'grammar',
    'batch',
  ],
};
const modules = Object.keys(layers);

const layerRules = modules.map((from) => ({
  name: `layer-${from}`,
  comment: `src/${from} may import only from: ${layers[from].join(', ') || '(nothing)'}`,
  severity: 'error',
  // a unit test may import any module's index (its fixtures: gen's models, a loaded model)
  from: { path: `^src/${from}/`, pathNot: '\\.test\\.ts$' },
  to: {
    path: `^src/(${modules.filter((m) => m !== from && !layers[from].includes(m)).join('|') || 'NONE'})/`,
  },
}));

module.exports = {
  forbidden: [
    ...layerRules,
    {
      name: 'no-cycles',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'through-index-only',
      comment: 'another module is imported through its index.ts only',
      severity: 'error',
      from: { path: '^src/([^/]+)/', pathNot: '\\.test\\.ts$' },
      to: { path: '^src/([^/]+)/.+', pathNot: ['^src/$1/', '^src/[^/]+/index\\.ts$'] },
    },
    {
      name: 'through-index-only-tests',
      comment: "a unit test imports another module through its index.ts, or that module's testing/ helpers",
      severity: 'error',
      from: { path: '^src/([^/]+)/.+\\.test\\.ts$' },
      to: { path: '^src/([^/]+)/.+', pathNot: ['^src/$1/', '^src/[^/]+/index\\.ts$', '^src/[^/]+/testing/'] },
    },
    {
      name: 'io-at-the-edges',
      comment:
        "sockets, HTTP and timers only in transfer/transports, engine's step loop, worker, router, api, cli, probe",
      severity: 'error',
      from: {
        path: '^src/',
        pathNot: ['^src/(worker|router|api|cli|probe)/', '^src/transfer/transports/', '^src/engine/engine-loop\\.ts$'],
      },
      to: {
        path: '^(node:)?(net|http|https|http2|dgram|timers|timers/promises|child_process)$',
        dependencyTypes: ['core'],
      },
    },
    {
      name: 'no-test-code-in-src',
      severity: 'error',
      from: { path: '^src/', pathNot: '\\.test\\.ts$' },
      to: { path: '(^test/|\\.test\\.ts$|vitest|fast-check)' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^src/kernels/wasm/assembly/)' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default'],
      extensions: ['.ts', '.js', '.mjs', '.cjs', '.json'],
    },
  },
};
