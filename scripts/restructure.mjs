#!/usr/bin/env node
// Issue 31's folder moves, as a rerunnable script: src/model splits into formats/, tokenizer/,
// gen/, model/ and engine/ (with the step loop from src/worker), src/api into api/http/,
// api/openai/ and api/ops/. For every file a rule places elsewhere it runs `git mv`, then
// rewrites every relative specifier that names a moved file (imports, export-from, import(),
// new URL(...), in src, test, bench, scripts, spec, tools, bin and the configs) by resolving it
// against the importer's OLD location and re-relativising between the NEW ones; an import that
// the split made cross a module boundary goes through that module's index.ts, whose barrel this
// script writes (exactly the names used outside the module). Path mentions in docs and comments
// (`src/model/engine.ts`, `model/engine.ts`, `dist/model/x.js`) follow their file.
//
// Idempotent: a second run moves nothing and changes nothing. A file no rule knows is reported
// and left where it is (add a rule and rerun). It must never edit a file outside git's view,
// nor touch node_modules, dist, build or bench/results.
//
//   node scripts/restructure.mjs            apply (then: prettier on the files it changed)
//   node scripts/restructure.mjs --dry-run  print the moves and unknown files, change nothing
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { posix } from 'node:path';
import * as prettier from 'prettier';
import ts from 'typescript';

const DRY = process.argv.includes('--dry-run');
const root = execFileSync('git', ['rev-parse', '--show-toplevel'], { encoding: 'utf8' }).trim();
process.chdir(root);
const { dirname, join, normalize, relative, basename } = posix;

// ---------------------------------------------------------------------------------------------
// The rule table. Each rule: the old folder, a test on the file's stem (name without .ts), and
// the new path (relative to src/). First match wins. Tests (*.test.ts) follow their subject:
// the source in the same old folder whose stem is the longest prefix of the test's stem (cut
// at '.' or '-'), unless TEST_RENAMES names them.
// ---------------------------------------------------------------------------------------------
const FORMATS_STEMS = [
  'config',
  'tensor-names',
  'fused',
  'permute',
  'json-fields',
  'host-tensor',
  'files',
  'rope',
  'safetensors',
];
const TOKENIZER_STEMS = ['word-cache', 'gguf-tokenizer'];
const GEN_STEMS = ['presets', 'random-model'];
const ENGINE_STEMS = ['activations', 'row-stack', 'dense-split', 'generate'];
const MODEL_STEMS = ['load', 'builtin', 'fingerprint', 'package-root', 'index'];
// The step loop and what it calls, out of src/worker (the roles stay there).
const WORKER_TO_ENGINE = ['engine-loop', 'step-results', 'spec-verify', 'sampling', 'embeddings', 'prompt-logprobs'];

const WORKER_STAYS = [
  'index',
  'colocated',
  'constraints',
  'decode-worker',
  'prefill-worker',
  'disk-tier',
  'health',
  'hooked-runner',
  'lora-registry',
  'page-map',
  'pd-common',
  'pd-role',
  'prefix-report',
  'scheduler-for',
  'tier-views',
];
const API_HTTP = [
  'server',
  'routes',
  'http-connections',
  'http-extras',
  'http-guard',
  'http-io',
  'errors',
  'sse',
  'client-abort',
  'clock',
  'auth',
  'rate-limit',
  'request-ids',
];
const API_OPS = ['dashboard-page', 'dashboard-route', 'kv-events-route'];
const API_ROOT = ['index', 'backend'];

const RULES = [
  // src/model
  // a draft model's fit to its target (draft-vocab) is about loaded models
  { from: 'src/model', test: (s) => MODEL_STEMS.includes(s) || /^draft-/.test(s), to: (s) => `model/${s}` },
  {
    from: 'src/model',
    test: (s) => s === 'gguf-tokenizer' || TOKENIZER_STEMS.includes(s),
    to: (s) => `tokenizer/${s}`,
  },
  { from: 'src/model', test: (s) => /^(tokenizer|chat-template|tool-prompt)/.test(s), to: (s) => `tokenizer/${s}` },
  { from: 'src/model', test: (s) => /^(gguf-|hf-|safetensors)/.test(s), to: (s) => `formats/${s}` },
  { from: 'src/model', test: (s) => FORMATS_STEMS.includes(s) || /-config$/.test(s), to: (s) => `formats/${s}` },
  {
    from: 'src/model',
    // gen-model and the vocabularies it ships (named after the model family they come from)
    test: (s) => /^gen-/.test(s) || /^(llama|qwen|gemma|mistral|phi)\d*-vocab$/.test(s) || GEN_STEMS.includes(s),
    to: (s) => `gen/${s}`,
  },
  // one forward file per architecture: forward.ts is the Llama family's and the shared contract
  { from: 'src/model', test: (s) => s === 'forward', to: () => 'engine/forward/llama' },
  { from: 'src/model', test: (s) => /^forward-/.test(s), to: (s) => `engine/forward/${s.slice('forward-'.length)}` },
  {
    from: 'src/model',
    test: (s) =>
      ENGINE_STEMS.includes(s) ||
      /^(engine|runner|sampler|weights-|lora|adapter|moe|pooling|embed)/.test(s) ||
      /^kernel-/.test(s),
    to: (s) => `engine/${s}`,
  },
  // src/worker: the step loop moves to engine/, roles stay
  // the step loop calls a draft model and speculation's verifier: they move with it
  {
    from: 'src/worker',
    test: (s) => WORKER_TO_ENGINE.includes(s) || /^(draft|spec-)/.test(s),
    to: (s) => `engine/${s}`,
  },
  { from: 'src/worker', test: (s) => WORKER_STAYS.includes(s), to: (s) => `worker/${s}` },
  // worker's test helpers stay (the fake engine needs a worker type; the spec loop and idWorker build roles' parts)
  {
    from: 'src/worker/testing',
    test: (s) => ['fake-engine', 'spec-loop', 'id-worker'].includes(s),
    to: (s) => `worker/testing/${s}`,
  },
  // src/api
  { from: 'src/api', test: (s) => API_ROOT.includes(s), to: (s) => `api/${s}` },
  { from: 'src/api', test: (s) => API_HTTP.includes(s), to: (s) => `api/http/${s}` },
  {
    from: 'src/api',
    test: (s) => API_OPS.includes(s) || /^metrics/.test(s) || /^health/.test(s),
    to: (s) => `api/ops/${s}`,
  },
  {
    from: 'src/api',
    test: (s) =>
      /-route$|-routes$|-shapes$|-input$|^validate|^prompt|^tool|^batch|^responses|^embedding|^files/.test(s) ||
      [
        'params',
        'shapes',
        'echo',
        'run-generate',
        'reasoning',
        'response-format',
        'constraint-check',
        'adapter-model',
      ].includes(s),
    to: (s) => `api/openai/${s}`,
  },
];

// Tests named after no source file, renamed to their subject (old path -> new stem, same folder;
// the subject rule above then places them).
const TEST_RENAMES = {
  'src/api/agents-routes.test.ts': 'extra-routes',
  'src/api/bad-input.test.ts': 'generate-route-bad-input',
  'src/api/choices.test.ts': 'run-generate-choices',
  'src/api/dashboard-tiers.test.ts': 'dashboard-page-tiers',
  'src/api/dashboard-speculation.test.ts': 'dashboard-page-speculation',
  'src/api/failures.test.ts': 'run-generate-failures',
  'src/api/logprobs.test.ts': 'shapes-logprobs',
  'src/api/openai-sdk.test.ts': 'generate-route',
  'src/api/openai-types.test.ts': 'shapes-openai-types',
  'src/api/prompt-scope.test.ts': 'prompt-tokenizer-scope',
  'src/api/real-codec.test.ts': 'backend-real-codec',
  'src/api/token-ids.test.ts': 'shapes-token-ids',
  'src/api/validate.test.ts': 'validate-chat-completion',
  'src/api/wire-limits.property.test.ts': 'prompt-wire-limits.property',
  'src/model/gguf.test.ts': 'gguf-reader-writer',
  'src/model/gguf-moe.test.ts': 'moe-config-gguf',
  'src/model/austen-reference.test.ts': 'generate-austen-reference',
  'src/model/llama-cpp.test.ts': 'load-llama-cpp',
  'src/worker/spec-decode.test.ts': 'engine-loop-spec-decode',
  'src/worker/spec-rollback.test.ts': 'spec-verify-rollback',
};
// Tests whose subject is not a prefix of their (new) stem.
const TEST_SUBJECTS = {
  'src/api/validate.test.ts': 'validate-chat',
  'src/model/gguf.test.ts': 'gguf-reader',
  'src/model/austen-reference.test.ts': 'generate',
  'src/model/llama-cpp.test.ts': 'load',
};

// What each generated barrel says (index.ts of a module whose barrel this script writes).
const BARREL_HEADERS = {
  formats:
    '// Model file formats: Hugging Face config.json and safetensors, GGUF (read and write), the\n' +
    '// normalized ModelConfig, canonical tensor names and the RoPE tables a config implies. Pure\n' +
    '// parsing and checking; see README.md. Names used outside the module only.',
  tokenizer:
    '// Text <-> token ids: the Tokenizer, chat templates, tool prompts, the tenant-scoped word caches\n' +
    '// and the tokenizer threads. See README.md. Names used outside the module only.',
  gen: "// Test and benchmark models: gen-model's presets, random weights and the vocabularies it ships.\n// See README.md. Names used outside the module only.",
  model:
    '// What the user named -> a loaded model (config, weights, tokenizer, template), the built-in\n' +
    "// models and the model's fingerprint. See README.md. Names used outside the module only.",
  engine:
    '// Running a loaded model: kernel choice, weights prepared once, the forward passes, the runner\n' +
    '// with its page checks, the sampler, the engine thread and the step loop. See README.md.\n' +
    '// Names used outside the module only.',
};
const GENERATED_BARRELS = Object.keys(BARREL_HEADERS);
// Modules some of whose files leave: their barrels are read to resolve each imported name.
const SPLIT_MODULES = ['model', 'worker', 'api'];

const CODE_EXT = /\.(ts|mts|cts|js|mjs|cjs)$/;
const SCOPE =
  /^(src|test|bench|scripts|spec|tools|bin)\/|^(vitest\.config\.ts|\.dependency-cruiser\.cjs|eslint\.config\.mjs)$/;
const SKIP = /^(node_modules|dist|build|bench\/results)\/|^src\/kernels\/wasm\/assembly\//;
const TEXT_EXT = /\.(md|ts|mts|js|mjs|cjs|json|sh|yml|yaml|pml|txt)$|(^|\/)(Dockerfile|run)$/;

// ---------------------------------------------------------------------------------------------
const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { encoding: 'utf8' })
  .split('\n')
  .filter((f) => f !== '' && !SKIP.test(f) && existsSync(f));
const known = new Set(files);
const knownDirs = new Set(
  files.flatMap((f) =>
    f
      .split('/')
      .slice(0, -1)
      .map((_, i, a) => a.slice(0, i + 1).join('/')),
  ),
);

const stemOf = (f) => basename(f).replace(/\.ts$/, '');
const moduleOf = (f) => (f.startsWith('src/') ? f.split('/')[1] : null);
const isTest = (f) => /\.test\.ts$/.test(f);

function ruleFor(oldFolder, stem) {
  for (const r of RULES) if (r.from === oldFolder && r.test(stem)) return `src/${r.to(stem)}.ts`;
  return null;
}

// --- the moves -----------------------------------------------------------------------------
const moves = new Map(); // old -> new
const unknown = [];
const ruleFolders = new Set(RULES.map((r) => r.from));
for (const f of files) {
  const folder = dirname(f);
  if (!ruleFolders.has(folder) || !f.endsWith('.ts') || isTest(f)) continue;
  const to = ruleFor(folder, stemOf(f));
  if (to === null) unknown.push(f);
  else if (to !== f) moves.set(f, to);
}
for (const f of files) {
  const folder = dirname(f);
  if (!ruleFolders.has(folder) || !isTest(f)) continue;
  const testStem = basename(f).replace(/\.test\.ts$/, '');
  const newStem = TEST_RENAMES[f] ?? testStem;
  let subject = TEST_SUBJECTS[f] ?? null;
  if (subject === null) {
    const sources = files.filter((g) => dirname(g) === folder && g.endsWith('.ts') && !isTest(g)).map(stemOf);
    for (const s of sources) {
      const fits = newStem === s || newStem.startsWith(`${s}-`) || newStem.startsWith(`${s}.`);
      if (fits && (subject === null || s.length > subject.length)) subject = s;
    }
  }
  if (subject === null) {
    unknown.push(f);
    continue;
  }
  const subjectNew = moves.get(`${folder}/${subject}.ts`) ?? `${folder}/${subject}.ts`;
  // a test named after its subject follows the subject's new stem (forward-gemma3 -> gemma3)
  const rest = newStem.startsWith(subject) && TEST_SUBJECTS[f] === undefined ? newStem.slice(subject.length) : null;
  const stem = rest !== null ? stemOf(subjectNew) + rest : newStem;
  const to = `${dirname(subjectNew)}/${stem}.test.ts`;
  if (to !== f) moves.set(f, to);
}
for (const [from, to] of moves) {
  if (known.has(to)) throw new Error(`restructure: ${from} -> ${to}, but ${to} exists`);
}
const newPath = (f) => moves.get(f) ?? f;

// --- exports: what each file exports, and where a barrel's names come from -----------------
const sourceCache = new Map();
function parse(file, text = readFileSync(file, 'utf8')) {
  const kind = /\.(m|c)?js$/.test(file) ? ts.ScriptKind.JS : ts.ScriptKind.TS;
  return ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, kind);
}
function sourceOf(file) {
  if (!sourceCache.has(file)) sourceCache.set(file, parse(file));
  return sourceCache.get(file);
}
function resolveSpec(fromFile, spec) {
  if (!spec.startsWith('.')) return null;
  let p = normalize(join(dirname(fromFile), spec));
  let dist = false;
  if (p.startsWith('dist/')) {
    p = `src/${p.slice('dist/'.length)}`;
    dist = true;
  }
  const candidates = [p, p.replace(/\.js$/, '.ts'), p.replace(/\.mjs$/, '.mts')];
  for (const c of candidates) if (known.has(c)) return { file: c, dist, dir: false };
  if (!dist && knownDirs.has(p.replace(/\/$/, ''))) return { file: p.replace(/\/$/, ''), dist, dir: true };
  return null;
}
const hasExportMod = (n) =>
  ts.canHaveModifiers(n) && (ts.getModifiers(n) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);

/** Where `name` exported by `file` is defined (through index.ts re-exports) and whether it is a type. */
function origin(file, name, depth = 0) {
  if (depth > 8) return null;
  const sf = sourceOf(file);
  for (const st of sf.statements) {
    if (ts.isExportDeclaration(st) && st.exportClause && ts.isNamedExports(st.exportClause)) {
      for (const el of st.exportClause.elements) {
        if (el.name.text !== name) continue;
        const local = el.propertyName?.text ?? el.name.text;
        const typeOnly = st.isTypeOnly || el.isTypeOnly;
        if (st.moduleSpecifier) {
          const r = resolveSpec(file, st.moduleSpecifier.text);
          if (r === null) return null;
          if (basename(r.file) === 'index.ts') return origin(r.file, local, depth + 1);
          const o = origin(r.file, local, depth + 1);
          return { file: r.file, type: typeOnly || (o?.type ?? false) };
        }
        return { file, type: typeOnly || localKind(sf, local) === 'type' };
      }
    }
    if (hasExportMod(st)) {
      if ((ts.isInterfaceDeclaration(st) || ts.isTypeAliasDeclaration(st)) && st.name.text === name)
        return { file, type: true };
      if (
        (ts.isFunctionDeclaration(st) || ts.isClassDeclaration(st) || ts.isEnumDeclaration(st)) &&
        st.name?.text === name
      )
        return { file, type: false };
      if (ts.isVariableStatement(st) && st.declarationList.declarations.some((d) => d.name.getText() === name))
        return { file, type: false };
    }
  }
  return null;
}
function localKind(sf, name) {
  for (const st of sf.statements) {
    if ((ts.isInterfaceDeclaration(st) || ts.isTypeAliasDeclaration(st)) && st.name.text === name) return 'type';
    if (
      ts.isImportDeclaration(st) &&
      st.importClause?.namedBindings &&
      ts.isNamedImports(st.importClause.namedBindings)
    ) {
      for (const el of st.importClause.namedBindings.elements)
        if (el.name.text === name && (st.importClause.isTypeOnly || el.isTypeOnly)) return 'type';
    }
  }
  return 'value';
}

// --- rewriting specifiers ------------------------------------------------------------------
const needs = new Map(); // module -> Map<originNewPath, Map<name, isType>>
function need(mod, file, name, type) {
  if (!needs.has(mod)) needs.set(mod, new Map());
  const m = needs.get(mod);
  if (!m.has(file)) m.set(file, new Map());
  const prev = m.get(file).get(name);
  m.get(file).set(name, prev === undefined ? type : prev && type);
}
function relSpec(fromNew, toNew, { dist, js, dir }) {
  let target = toNew;
  if (dist) target = `dist/${toNew.slice('src/'.length)}`.replace(/\.ts$/, '.js');
  else if (js && !dir) target = toNew.replace(/\.ts$/, '.js');
  let r = relative(dirname(fromNew), target);
  if (!r.startsWith('.')) r = `./${r}`;
  return r;
}
const indexOf = (mod) => `src/${mod}/index.ts`;
/** The specifier an importer (now at fromNew) uses for a name defined in originNew. */
function specForName(fromOld, fromNew, originNew, name, type, dist) {
  const mod = moduleOf(originNew);
  const viaIndex =
    fromNew.startsWith('src/') && moduleOf(fromNew) !== mod && !/\/testing\//.test(originNew) ? true : false;
  const outsideSrcViaBarrel = !fromNew.startsWith('src/');
  if (viaIndex || outsideSrcViaBarrel) {
    if (GENERATED_BARRELS.includes(mod) || SPLIT_MODULES.includes(mod)) need(mod, originNew, name, type);
    return relSpec(fromNew, indexOf(mod), { dist, js: true });
  }
  return relSpec(fromNew, originNew, { dist, js: true });
}

const edits = new Map(); // file(old path) -> new text
const touched = new Set();
for (const f of files) {
  if (!SCOPE.test(f) || !CODE_EXT.test(f)) continue;
  // a generated barrel is written whole below, from what its importers use
  if (GENERATED_BARRELS.some((m) => f === indexOf(m))) continue;
  const ownBarrel = basename(f) === 'index.ts' && dirname(f) === `src/${moduleOf(f)}`;
  const text = readFileSync(f, 'utf8');
  const sf = parse(f, text);
  const fromNew = newPath(f);
  const reps = []; // [start, end, replacement]
  const visit = (node) => {
    let lit = null;
    let decl = null;
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      lit = node.moduleSpecifier;
      decl = node;
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteralLike(node.arguments[0])
    ) {
      lit = node.arguments[0];
    } else if (
      ts.isNewExpression(node) &&
      node.expression.getText() === 'URL' &&
      node.arguments?.[0] &&
      ts.isStringLiteralLike(node.arguments[0]) &&
      node.arguments.length === 2
    ) {
      lit = node.arguments[0];
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    ) {
      lit = node.argument.literal;
    }
    if (lit !== null) handle(lit, decl);
    ts.forEachChild(node, visit);
  };
  const handle = (lit, decl) => {
    const spec = lit.text;
    const r = resolveSpec(f, spec);
    if (r === null) return;
    const js = /\.js$/.test(spec);
    const targetNew = r.dir ? r.file : newPath(r.file);
    const targetMod = moduleOf(r.file);
    const barrelOfSplit =
      !r.dir &&
      basename(r.file) === 'index.ts' &&
      dirname(r.file) === `src/${targetMod}` &&
      (SPLIT_MODULES.includes(targetMod) || GENERATED_BARRELS.includes(targetMod));
    const named =
      decl !== null &&
      ((ts.isImportDeclaration(decl) &&
        decl.importClause &&
        !decl.importClause.name &&
        decl.importClause.namedBindings &&
        ts.isNamedImports(decl.importClause.namedBindings)) ||
        (ts.isExportDeclaration(decl) && decl.exportClause && ts.isNamedExports(decl.exportClause)));
    if (barrelOfSplit && named && !(f === r.file)) {
      // split by where each name now lives
      const isImport = ts.isImportDeclaration(decl);
      const typeOnly = isImport ? decl.importClause.isTypeOnly : decl.isTypeOnly;
      const els = isImport ? decl.importClause.namedBindings.elements : decl.exportClause.elements;
      const groups = new Map();
      for (const el of els) {
        const name = el.propertyName?.text ?? el.name.text;
        const o = origin(r.file, name);
        let spec2;
        if (o === null) spec2 = relSpec(fromNew, newPath(r.file), { dist: r.dist, js: true });
        else spec2 = specForName(f, fromNew, newPath(o.file), name, typeOnly || el.isTypeOnly || o.type, r.dist);
        if (!groups.has(spec2)) groups.set(spec2, []);
        groups.get(spec2).push(el.getText());
      }
      const kw = isImport ? 'import' : 'export';
      const out = [...groups]
        .map(([s, list]) => `${kw} ${typeOnly ? 'type ' : ''}{ ${list.join(', ')} } from '${s}';`)
        .join('\n');
      if (out !== decl.getText()) reps.push([decl.getStart(), decl.getEnd(), out]);
      return;
    }
    let next;
    const crossed =
      !r.dir &&
      fromNew.startsWith('src/') &&
      targetNew.startsWith('src/') &&
      moduleOf(f) === targetMod &&
      moduleOf(fromNew) !== moduleOf(targetNew) &&
      basename(targetNew) !== 'index.ts' &&
      !/\/testing\//.test(targetNew) &&
      named &&
      !r.dist;
    if (crossed) {
      // the split made this import cross a module boundary: through the module's index
      const isImport = ts.isImportDeclaration(decl);
      const els = isImport ? decl.importClause.namedBindings.elements : decl.exportClause.elements;
      const typeOnly = isImport ? decl.importClause.isTypeOnly : decl.isTypeOnly;
      for (const el of els) {
        const name = el.propertyName?.text ?? el.name.text;
        const o = origin(r.file, name);
        const defNew = o === null ? targetNew : newPath(o.file);
        // a split module's own re-export of a file that left is dropped (trimBarrel), not needed
        if (!ownBarrel) need(moduleOf(defNew), defNew, name, typeOnly || el.isTypeOnly || (o?.type ?? false));
      }
      next = relSpec(fromNew, indexOf(moduleOf(targetNew)), { dist: false, js: true });
    } else {
      next = relSpec(fromNew, targetNew, { dist: r.dist, js, dir: r.dir });
      if (!js && !r.dir && !r.dist && !/\.(ts|mjs|cjs|json)$/.test(spec)) return;
      if (/\.ts$/.test(spec)) next = next.replace(/\.js$/, '.ts');
    }
    if (r.dir && spec.endsWith('/')) next += '/';
    if (next !== spec) reps.push([lit.getStart() + 1, lit.getEnd() - 1, next]);
  };
  visit(sf);
  if (reps.length === 0) continue;
  reps.sort((a, b) => b[0] - a[0]);
  let out = text;
  for (const [s, e, t] of reps) out = out.slice(0, s) + t + out.slice(e);
  edits.set(f, mergeImports(f, out));
  touched.add(f);
}

/** Named imports of one specifier (same type-onlyness) merged into the first one. */
function mergeImports(f, text) {
  const sf = parse(f, text);
  const seen = new Map();
  const reps = [];
  for (const st of sf.statements) {
    if (!ts.isImportDeclaration(st) || !st.importClause || st.importClause.name) continue;
    const nb = st.importClause.namedBindings;
    if (!nb || !ts.isNamedImports(nb)) continue;
    const key = `${st.importClause.isTypeOnly}|${st.moduleSpecifier.text}`;
    if (!seen.has(key)) {
      seen.set(key, { st, els: nb.elements.map((e) => e.getText()) });
      continue;
    }
    const first = seen.get(key);
    for (const e of nb.elements) if (!first.els.includes(e.getText())) first.els.push(e.getText());
    first.changed = true;
    let end = st.getEnd();
    if (text[end] === '\n') end += 1;
    reps.push([st.getFullStart() + (text.slice(st.getFullStart(), st.getStart()).lastIndexOf('\n') + 1), end, '']);
  }
  for (const { st, els, changed } of seen.values()) {
    if (!changed) continue;
    const kw = st.importClause.isTypeOnly ? 'import type' : 'import';
    reps.push([st.getStart(), st.getEnd(), `${kw} { ${els.join(', ')} } from '${st.moduleSpecifier.text}';`]);
  }
  reps.sort((a, b) => b[0] - a[0]);
  let out = text;
  for (const [s, e, t] of reps) out = out.slice(0, s) + t + out.slice(e);
  return out;
}

// --- barrels -------------------------------------------------------------------------------
function barrelText(mod) {
  const byFile = needs.get(mod) ?? new Map();
  const lines = [BARREL_HEADERS[mod]];
  for (const file of [...byFile.keys()].sort()) {
    const names = [...byFile.get(file)].sort(([a, ta], [b, tb]) => Number(ta) - Number(tb) || a.localeCompare(b));
    const list = names.map(([n, type]) => (type ? `type ${n}` : n)).join(', ');
    lines.push(`export { ${list} } from '${relSpec(indexOf(mod), file, { js: true })}';`);
  }
  return `${lines.join('\n')}\n`;
}
/** A split module's own barrel (not generated): its re-exports of files that left are dropped,
 * and names the module must now export are added. */
function trimBarrel(mod, text) {
  const f = indexOf(mod);
  const sf = parse(f, text);
  const reps = [];
  const have = new Set();
  for (const st of sf.statements) {
    if (!ts.isExportDeclaration(st) || !st.moduleSpecifier) continue;
    const spec = st.moduleSpecifier.text;
    const target = normalize(join(`src/${mod}`, spec)).replace(/\.js$/, '.ts');
    if (moduleOf(target) !== mod) {
      let start = st.getFullStart();
      const lead = text.slice(start, st.getStart());
      start += lead.lastIndexOf('\n') + 1;
      let end = st.getEnd();
      if (text[end] === '\n') end += 1;
      reps.push([start, end, '']);
    } else if (st.exportClause && ts.isNamedExports(st.exportClause)) {
      for (const el of st.exportClause.elements) have.add(el.name.text);
    }
  }
  reps.sort((a, b) => b[0] - a[0]);
  let out = text;
  for (const [s, e, t] of reps) out = out.slice(0, s) + t + out.slice(e);
  const byFile = needs.get(mod) ?? new Map();
  for (const file of [...byFile.keys()].sort()) {
    const names = [...byFile.get(file)].filter(([n]) => !have.has(n)).sort(([a], [b]) => a.localeCompare(b));
    if (names.length === 0) continue;
    const list = names.map(([n, type]) => (type ? `type ${n}` : n)).join(', ');
    out += `export { ${list} } from '${relSpec(indexOf(mod), file, { js: true })}';\n`;
  }
  return out;
}

// --- path mentions in text (docs, comments, strings) ----------------------------------------
const MENTION =
  /(?<![\w@.-])((?:\.\.\/)*(?:src|dist)\/|\/)?(model|api|worker)\/([\w-]+(?:\/[\w-]+)*(?:\.test|\.property\.test)?)\.(ts|js)\b/g;
function mentionTarget(oldSrc) {
  if (moves.has(oldSrc)) return moves.get(oldSrc);
  if (known.has(oldSrc)) return null;
  // a stale mention (its file moved in an earlier run): the rule's home, when that file exists
  const to = isTest(oldSrc) ? null : ruleFor(dirname(oldSrc), stemOf(oldSrc));
  if (to !== null && to !== oldSrc && (known.has(to) || [...moves.values()].includes(to))) return to;
  return null;
}
function rewriteMentions(text) {
  return text.replace(MENTION, (all, prefix = '', dir, rest, ext) => {
    if (prefix === '/') return all;
    const isDist = prefix.includes('dist/');
    if (isDist && ext !== 'js') return all;
    const to = mentionTarget(`src/${dir}/${rest}.ts`);
    if (to === null) return all;
    const relToSrc = to.slice('src/'.length).replace(/\.ts$/, '');
    return `${prefix}${relToSrc}.${ext}`;
  });
}
// bare mentions of a file whose own name changed (forward.ts -> forward/llama.ts), when unique
const renamed = [...moves].filter(
  ([from, to]) =>
    !isTest(from) &&
    basename(from) !== basename(to) &&
    files.filter((g) => basename(g) === basename(from)).length === 1,
);
function rewriteBare(text, file) {
  let out = text;
  for (const [from, to] of renamed) {
    const mod = moduleOf(to);
    const within = to.slice(`src/${mod}/`.length);
    const re = new RegExp(`(?<![\\w/.-])${basename(from).replace(/\./g, '\\.')}\\b`, 'g');
    const fileMod = moduleOf(newPath(file));
    out = out.replace(re, fileMod === mod ? within : `${mod}/${within}`);
  }
  return out;
}

// `src/model's Tokenizer`, `src/model's engine.ts`: the module that now holds that name or file.
const SPLIT_HOMES = ['formats', 'tokenizer', 'gen', 'model', 'engine', 'worker'];
const exportHome = new Map(); // exported name -> module (null when two modules export it)
for (const f of files) {
  if (
    !/^src\/(model|worker|formats|tokenizer|gen|engine)\/[^/]+(\/[^/]+)?\.ts$/.test(f) ||
    isTest(f) ||
    /\/index\.ts$/.test(f)
  )
    continue;
  const mod = moduleOf(newPath(f));
  for (const st of sourceOf(f).statements) {
    if (!hasExportMod(st)) continue;
    const names = ts.isVariableStatement(st)
      ? st.declarationList.declarations.map((d) => d.name.getText())
      : [st.name?.text];
    for (const n of names) {
      if (n === undefined) continue;
      exportHome.set(n, exportHome.has(n) && exportHome.get(n) !== mod ? null : mod);
    }
  }
}
const POSSESSIVE = /\bsrc\/(model|worker)'s (`?)([\w.-]+)/g;
function rewritePossessive(text) {
  return text.replace(POSSESSIVE, (all, dir, tick, name) => {
    let mod = null;
    if (name.endsWith('.ts')) {
      const to = mentionTarget(`src/${dir}/${name}`) ?? (known.has(`src/${dir}/${name}`) ? `src/${dir}/${name}` : null);
      if (to !== null && basename(to) === name) mod = moduleOf(to);
    } else if (SPLIT_HOMES.includes(exportHome.get(name) ?? '')) mod = exportHome.get(name);
    return mod === null || mod === dir ? all : `src/${mod}${mod.endsWith('s') ? "'" : "'s"} ${tick}${name}`;
  });
}

// docs/ARCHITECTURE.md's "## Modules": each module line (`- \`engine/runner.ts\` — ...`) goes to
// the section of the module its first path names, new sections made where needed, headings'
// layer numbers as the new layers have them. Lines stay in their order; other text stays put.
const NEW_SECTIONS = {
  formats: [
    '### formats (layer 2, pure parsing)',
    '*Owns model files: Hugging Face config.json and safetensors, GGUF (read and write), the normalized ' +
      '`ModelConfig`, canonical tensor names, RoPE tables. Never runs a model; never guesses a value a file did not give.*',
  ],
  tokenizer: [
    '### tokenizer (layer 3)',
    '*Owns text <-> token ids: the Tokenizer, chat templates, tool prompts, tenant-scoped word caches, ' +
      'the tokenizer threads. Never treats user text as control tokens; never shares a word cache across tenants.*',
  ],
  gen: [
    '### gen (layer 3)',
    "*Owns test and benchmark models: gen-model's presets, deterministic random weights, the vocabularies it ships. Never used to serve a user's model.*",
  ],
  engine: [
    '### engine (layer 5)',
    '*Owns running a loaded model step by step: kernel choice, weights prepared once, one forward pass ' +
      'per architecture, the runner with its page checks and stamps, the sampler, the engine thread, the step loop and step results. Never decides who owns a page (it checks, through pages); never speaks HTTP or the cluster protocol.*',
  ],
};
const SECTION_TEXT = {
  ['*Owns what the user named -> a runnable model: formats and loaders, tokenizers and templates, ' +
  'gen-model, the forward passes, the runner, the engine thread and the sampler. Never decides who owns a page (it checks, through pages).*']:
    '*Owns what the user named -> a loaded model: `builtin:NAME`, a Hugging Face directory or a GGUF ' +
    'file -> config, checked weights, tokenizer and template; the built-in models; the fingerprint. Never runs a model (engine does).*',
  "*Owns each role's step loop and what a role wires around it (health, disk tier, PD sends). Imports no HTTP module: `api` faces the clients.*":
    "*Owns each role (co-located, prefill, decode) and what a role wires around the engine's step loop " +
    '(health, disk tier, PD sends). Imports no HTTP module: `api` faces the clients.*',
};
const LAYER_NUMBERS = { model: 4, engine: 5, worker: 6, router: 6, api: 7, probe: 7, cli: 8 };
const API_ORDER = ['api/backend', 'api/index', 'api/http/', 'api/openai/', 'api/ops/', 'api/testing/'];
function regroupArchitecture(text) {
  const lines = text.split('\n');
  const start = lines.indexOf('## Modules');
  if (start < 0) return text;
  let end = lines.findIndex((l, i) => i > start && /^## /.test(l));
  if (end < 0) end = lines.length;
  const sections = []; // { mod, head: string[], bullets: string[], tail: string[] }
  const pre = [];
  for (const l of lines.slice(start, end)) {
    const h = /^### (\S+)/.exec(l);
    if (h) sections.push({ mod: h[1], head: [l], bullets: [], tail: [] });
    else if (sections.length === 0) pre.push(l);
    else {
      const sec = sections[sections.length - 1];
      if (/^- /.test(l)) sec.bullets.push(l);
      else if (sec.bullets.length === 0) sec.head.push(l);
      else sec.tail.push(l);
    }
  }
  const byMod = new Map(sections.map((sec) => [sec.mod, sec]));
  const make = (mod) => {
    const sec = { mod, head: [...NEW_SECTIONS[mod]], bullets: [], tail: [''] };
    const at =
      mod === 'engine' ? sections.findIndex((x) => x.mod === 'worker') : sections.findIndex((x) => x.mod === 'model');
    sections.splice(at < 0 ? sections.length : at, 0, sec);
    byMod.set(mod, sec);
    return sec;
  };
  for (const mod of ['formats', 'tokenizer', 'gen']) if (!byMod.has(mod) && byMod.has('model')) make(mod);
  if (!byMod.has('engine') && byMod.has('worker')) make('engine');
  for (const sec of [...sections]) {
    const keep = [];
    for (const b of sec.bullets) {
      const m = /^- `(?:src\/)?([\w-]+)\//.exec(b);
      const home = m && byMod.has(m[1]) ? m[1] : sec.mod;
      if (home === sec.mod) keep.push(b);
      else byMod.get(home).bullets.push(b);
    }
    sec.bullets = keep;
  }
  const api = byMod.get('api');
  if (api) {
    const rank = (b) => {
      const i = API_ORDER.findIndex((p) => b.startsWith(`- \`${p}`));
      return i < 0 ? API_ORDER.length : i;
    };
    api.bullets = api.bullets
      .map((b, i) => [b, i])
      .sort(([a, i], [b, j]) => rank(a) - rank(b) || i - j)
      .map(([b]) => b);
  }
  for (const sec of sections) {
    sec.head = sec.head.map((l) => SECTION_TEXT[l] ?? l);
    const n = LAYER_NUMBERS[sec.mod];
    if (n !== undefined) sec.head[0] = sec.head[0].replace(/^(### \S+ \(layer )\d+/, `$1${n}`);
  }
  const body = [...pre, ...sections.flatMap((sec) => [...sec.head, ...sec.bullets, ...sec.tail])];
  return [...lines.slice(0, start), ...body, ...lines.slice(end)].join('\n');
}

const textEdits = new Map();
for (const f of files) {
  if (!TEXT_EXT.test(f) || f === 'package-lock.json' || f === 'scripts/restructure.mjs') continue;
  const before = edits.get(f) ?? readFileSync(f, 'utf8');
  let after = rewritePossessive(rewriteBare(rewriteMentions(before), f));
  if (f === 'docs/ARCHITECTURE.md') after = regroupArchitecture(after);
  if (after !== before) {
    textEdits.set(f, after);
    touched.add(f);
  }
}

// --- report and apply -----------------------------------------------------------------------
const byFolder = new Map();
for (const [from, to] of moves) {
  const k = `${dirname(from)} -> ${dirname(to)}`;
  byFolder.set(k, (byFolder.get(k) ?? 0) + 1);
}
console.log(`restructure: ${moves.size} files to move`);
for (const [k, n] of [...byFolder].sort()) console.log(`  ${k}: ${n}`);
if (unknown.length > 0) {
  console.log(`restructure: ${unknown.length} files no rule knows (left where they are; add a rule and rerun):`);
  for (const f of unknown) console.log(`  ${f}`);
}
if (DRY) {
  for (const [from, to] of moves) console.log(`  mv ${from} ${to}`);
  console.log(`restructure: ${touched.size} files would be edited (dry run, nothing changed)`);
  process.exit(0);
}

// Every code file this script writes is formatted first (prettier, the repository's config), and
// written only when it differs: so a rerun writes nothing.
const PRETTIER_SCOPE =
  /^(src|test|bench|scripts|spec\/scripts|bin|tools)\/|^(vitest\.config\.ts|eslint\.config\.mjs|\.dependency-cruiser\.cjs)$/;
async function pretty(file, text) {
  if (!PRETTIER_SCOPE.test(file) || !CODE_EXT.test(file)) return text;
  const info = await prettier.getFileInfo(file, { ignorePath: '.prettierignore' });
  if (info.ignored) return text;
  const options = (await prettier.resolveConfig(file)) ?? {};
  return prettier.format(text, { ...options, filepath: file });
}
const changed = new Set();
async function write(file, text) {
  const out = await pretty(file, text);
  if (existsSync(file) && readFileSync(file, 'utf8') === out) return;
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, out);
  changed.add(file);
}

for (const [from, to] of moves) {
  mkdirSync(dirname(to), { recursive: true });
  execFileSync('git', ['mv', from, to]);
}
for (const f of new Set([...edits.keys(), ...textEdits.keys()]))
  await write(newPath(f), textEdits.get(f) ?? edits.get(f));
for (const mod of GENERATED_BARRELS) {
  const f = indexOf(mod);
  await write(f, barrelText(mod));
  execFileSync('git', ['add', f]);
}
for (const mod of SPLIT_MODULES.filter((m) => !GENERATED_BARRELS.includes(m))) {
  const f = indexOf(mod);
  await write(f, trimBarrel(mod, readFileSync(f, 'utf8')));
}
console.log(`restructure: moved ${moves.size} files, wrote ${changed.size}`);
for (const f of [...changed].sort()) console.log(`  wrote ${f}`);
