// The import rule of docs/ARCHITECTURE.md, enforced in `npm test`:
// a module imports only from lower layers, only through that module's index.ts, with no cycles;
// I/O modules (node:net, node:http, timers) appear only at the edges.
const layers = {
  core: [],
  pages: ['core'],
  kernels: ['core'],
  model: ['core', 'pages', 'kernels'],
  scheduler: ['core', 'pages'],
  transfer: ['core', 'pages'],
  grammar: ['core'],
  // batch: the Batch API's durable store (files, batches, answers) on its own write-ahead log.
  batch: ['core'],
  worker: ['core', 'pages', 'kernels', 'model', 'scheduler', 'transfer', 'grammar'],
  router: ['core', 'pages', 'model', 'scheduler', 'transfer', 'grammar'],
  api: ['core', 'pages', 'kernels', 'model', 'scheduler', 'transfer', 'worker', 'router', 'grammar', 'batch'],
  // probe: an HTTP client of any OpenAI-compatible endpoint, beside api; it knows nothing of the server's insides.
  probe: ['core'],
  cli: [
    'core',
    'pages',
    'kernels',
    'model',
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
  from: { path: `^src/${from}/` },
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
      from: { path: '^src/([^/]+)/' },
      to: { path: '^src/([^/]+)/.+', pathNot: ['^src/$1/', '^src/[^/]+/index\\.ts$'] },
    },
    {
      name: 'io-at-the-edges',
      comment: 'sockets, HTTP and timers only in transfer/transports, worker, router, api, cli, probe',
      severity: 'error',
      from: {
        path: '^src/',
        pathNot: ['^src/(worker|router|api|cli|probe)/', '^src/transfer/transports/'],
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
