// README.md and docs/*.md checked against the code (docs-check.ts says what is checked): the
// flags come from the CLI's own commander definitions (src/cli/commands, registered in-process,
// no build and no process), the scripts from package.json, paths from the file system, metric
// and variable names from the sources; ARCHITECTURE's import table against .dependency-cruiser.cjs.
// Then the negative controls: a page citing a missing flag,
// a flag of the wrong command, a missing link, anchor, script, path, module path or metric must be
// reported. Cheap: a few hundred milliseconds after the CLI's import.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { COMMANDS } from '../../src/cli/commands/index.js';
import { anchorsOf, checkPage, slug, type DocsFacts } from './docs-check.js';

const ROOT = join(import.meta.dirname, '..', '..');

function commandFlags(): Map<string, Set<string>> {
  const program = new Command('tessera');
  for (const register of COMMANDS) register(program);
  return new Map(program.commands.map((c) => [c.name(), new Set(c.options.map((o) => o.long ?? ''))]));
}

function filesUnder(dir: string, keep: (name: string) => boolean): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(join(ROOT, dir), { withFileTypes: true })) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) out.push(...filesUnder(path, keep));
    else if (keep(entry.name)) out.push(path);
  }
  return out;
}

const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');
const scriptSources = [
  ...filesUnder('bench', (n) => /\.(ts|mjs)$/.test(n)),
  ...filesUnder('scripts', (n) => n.endsWith('.mjs')),
];
const sources = [
  ...filesUnder('src', (n) => n.endsWith('.ts') && !n.endsWith('.test.ts')),
  ...scriptSources,
  ...filesUnder('spec/scripts', (n) => n.endsWith('.mjs')),
  'bin/tessera.js',
];

const facts: DocsFacts = {
  commandFlags: commandFlags(),
  scriptFlags: new Set(
    scriptSources.flatMap((f) => [...read(f).matchAll(/['"](--[a-z][a-z0-9-]*)['"]/g)].map((m) => m[1]!)),
  ),
  npmScripts: new Set(Object.keys((JSON.parse(read('package.json')) as { scripts: object }).scripts)),
  exists: (path) => existsSync(join(ROOT, path)),
  pageText: (path) => (existsSync(join(ROOT, path)) && statSync(join(ROOT, path)).isFile() ? read(path) : undefined),
  sourceText: sources.map(read).join('\n'),
};

const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((n) => n.endsWith('.md'))
    .map((n) => `docs/${n}`),
];

describe('README.md and docs/ against the code', () => {
  it('finds every command of the CLI (the check has something to check against)', () => {
    expect([...facts.commandFlags.keys()].sort()).toEqual([
      'gen-lora',
      'gen-model',
      'plan',
      'probe',
      'router',
      'run',
      'serve',
      'up',
    ]);
    expect(facts.commandFlags.get('serve')).toContain('--kv-dtype');
    expect(PAGES.length).toBeGreaterThanOrEqual(10);
  });

  it.each(PAGES)('%s cites only flags, links, scripts, paths and metrics that exist', (page) => {
    expect(checkPage(page, read(page), facts)).toEqual([]);
  });

  it("ARCHITECTURE's import table is the rule .dependency-cruiser.cjs enforces", () => {
    const config = createRequire(import.meta.url)(join(ROOT, '.dependency-cruiser.cjs')) as {
      forbidden: { name: string; comment?: string }[];
    };
    const rule = new Map(
      config.forbidden
        .filter((r) => r.name.startsWith('layer-'))
        .map((r) => [r.name.slice('layer-'.length), /may import only from: (.*)$/.exec(r.comment ?? '')![1]!]),
    );
    const table = new Map<string, string>();
    for (const m of read('docs/ARCHITECTURE.md').matchAll(
      /^\| ([a-z, ]+) \| ([a-z, ]+|nothing|everything above) \|$/gm,
    ))
      for (const module of m[1]!.split(', ')) table.set(module, m[2]!);
    const everything = [...rule.keys()].filter((m) => m !== 'cli').sort();
    const written = (module: string): string[] => {
      const cell = table.get(module);
      if (cell === 'nothing') return [];
      if (cell === 'everything above') return everything;
      return (cell ?? '?').split(', ').sort();
    };
    for (const [module, allowed] of rule)
      expect(written(module), module).toEqual(allowed === '(nothing)' ? [] : allowed.split(', ').sort());
  });

  it('keeps the README a front door: under 130 lines, with the two commands CI relies on', () => {
    const readme = read('README.md');
    expect(readme.split('\n').length).toBeLessThan(130);
    expect(readme).toContain('npm install && npm start');
    expect(readme).toMatch(/^npm test\s/m);
    expect(read('.ci/run')).toMatch(/^npm test$/m);
  });
});

describe('the docs checker (negative controls)', () => {
  const page = 'docs/example.md';
  const wrong = (text: string): string[] => checkPage(page, text, facts);

  it('reports a flag no command has, and a flag of another command after `tessera <command>`', () => {
    expect(wrong('Run with `--no-such-flag`.')).toEqual([
      `${page}:1: --no-such-flag: no tessera command, benchmark or script takes it`,
    ]);
    expect(wrong('`tessera plan --api-keys keys.json`')).toEqual([
      `${page}:1: --api-keys: not an option of \`tessera plan\``,
    ]);
    expect(wrong('```sh\nnpx tessera run --prompt hi \\\n  --routing load\n```')).toEqual([
      `${page}:2: --routing: not an option of \`tessera run\``,
    ]);
    expect(wrong('`tessera serve --kv-dtype f16`, `tessera router --routing load`')).toEqual([]);
  });

  it("accepts another tool's flag only with that tool named on the line", () => {
    expect(wrong('`docker run --rm tessera`')).toEqual([]);
    expect(wrong('`run --rm tessera`')).toHaveLength(1);
  });

  it('reports a missing link target and a missing anchor', () => {
    expect(wrong('[a](nowhere.md)')).toEqual([`${page}:1: link nowhere.md: no such file`]);
    expect(wrong('[a](serving.md#no-such-heading)')).toEqual([
      `${page}:1: link serving.md#no-such-heading: no heading #no-such-heading`,
    ]);
    expect(wrong('[a](serving.md#connection-limits) [b](../README.md) [c](https://example.com/x)')).toEqual([]);
  });

  it('reports a missing npm script, path, module path and metric', () => {
    expect(wrong('`npm run bench:nothing`')).toEqual([
      `${page}:1: npm run bench:nothing: no such script in package.json`,
    ]);
    expect(wrong('see src/pages/nothing.ts')).toEqual([`${page}:1: src/pages/nothing.ts: no such file or directory`]);
    expect(wrong('`pages/nothing.ts` holds it')).toEqual([
      `${page}:1: src/pages/nothing.ts: no such file or directory`,
    ]);
    expect(wrong('`tessera_no_such_total` and `TESSERA_NO_SUCH`')).toHaveLength(2);
    expect(wrong('`pages/pool.ts`, test/e2e/pd/, `tessera_kv_pages{state}`, `TESSERA_HOME`')).toEqual([]);
  });

  it('makes anchors as GitHub does', () => {
    expect(slug("Sizing pools per node: the incident's lesson")).toBe('sizing-pools-per-node-the-incidents-lesson');
    expect(slug('Life of a request (disaggregated: `tessera up`)')).toBe('life-of-a-request-disaggregated-tessera-up');
    expect([...anchorsOf('# A\n## B\n```\n# not a heading\n```\n## B\n')]).toEqual(['a', 'b', 'b-1']);
  });
});
