// The docs checker: README.md and docs/*.md against the code they describe. Pure over what it is
// given (the pages' text, the CLI's options, the repository's files, package.json's scripts, the
// source text), so docs.test.ts can run it on the real pages and on pages made wrong on purpose.
// What it reports, per page:
//   - a `--flag` that no `tessera` command has (or, after `tessera <command>` in a code span or a
//     code block's command line, one that command does not have), unless a benchmark or script
//     takes it as a literal, or it is another tool's flag named on the same line (FOREIGN_FLAGS);
//   - a relative link or image whose file does not exist, or whose #anchor is no heading there;
//   - `npm run X` where package.json has no script X;
//   - a repository path (src/, test/, bench/, spec/, scripts/, deploy/, models/, tools/, docs/, bin/;
//     or a code span that is a module path such as `pages/pool.ts`, under src/) that does not exist;
//   - a `tessera_*` metric or a `TESSERA_*` variable that no source file names.
// Must never read the file system or start a process itself: the caller passes what it checks against.

export interface DocsFacts {
  /** Each `tessera` command's long options (`--name`), e.g. serve -> {--model, --port, ...}. */
  readonly commandFlags: ReadonlyMap<string, ReadonlySet<string>>;
  /** `--flags` that benchmark and script sources take (string literals in bench/ and scripts/). */
  readonly scriptFlags: ReadonlySet<string>;
  /** package.json's script names. */
  readonly npmScripts: ReadonlySet<string>;
  /** Whether a repository-relative path (file or directory) exists. */
  readonly exists: (repoPath: string) => boolean;
  /** Another page's text by repository-relative path (for #anchors), or undefined. */
  readonly pageText: (repoPath: string) => string | undefined;
  /** Every source text that may name a metric or an environment variable. */
  readonly sourceText: string;
}

/** Other tools' flags the pages cite, each with a word that must stand on the same line. */
export const FOREIGN_FLAGS: ReadonlyMap<string, string> = new Map([
  ['--rm', 'docker'],
  ['--from-literal', 'kubectl'],
  ['--enable-cache-report', 'SGLang'],
  ['--write', 'prettier'],
  ['--no-install-recommends', 'apt-get'],
  ['--import', 'node'],
]);

const ROOTS = ['src', 'test', 'bench', 'spec', 'scripts', 'deploy', 'models', 'tools', 'docs', 'bin'];
const MODULES = ['core', 'pages', 'kernels', 'model', 'scheduler', 'transfer', 'grammar', 'worker', 'router', 'api'];
const MODULE_ROOTS = [...MODULES, 'probe', 'cli'];
/** Paths the build or a benchmark writes: cited, but not in a fresh clone. */
const GENERATED = ['bench/results'];

const FLAG = /(?<![\w-])--[a-z][a-z0-9-]*/g;
const PATH = new RegExp(`(?<![\\w./-])(?:${ROOTS.join('|')})/[\\w./-]*`, 'g');
const MODULE_PATH = new RegExp(`^(?:${MODULE_ROOTS.join('|')})/[\\w./-]*$`);
const COMMAND = /\btessera (serve|up|router|run|plan|gen-model|probe)\b/g;

/** GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

export function anchorsOf(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const { text, code } of linesOf(markdown)) {
    const m = code ? null : /^#{1,6}\s+(.*)$/.exec(text);
    if (m === null) continue;
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

interface Line {
  readonly text: string;
  readonly code: boolean;
  readonly no: number;
}

/** The page's lines, each marked inside a fenced code block or not (continued lines joined). */
function linesOf(markdown: string): Line[] {
  const out: Line[] = [];
  let code = false;
  const raw = markdown.split('\n');
  for (let i = 0; i < raw.length; i++) {
    let text = raw[i]!;
    const no = i + 1;
    if (/^\s*```/.test(text)) {
      code = !code;
      continue;
    }
    while (code && text.endsWith('\\') && i + 1 < raw.length) text = `${text.slice(0, -1)} ${raw[++i]!}`;
    out.push({ text, code, no });
  }
  return out;
}

/** The stretches of a line that are commands: inline code spans, or the whole line in a code block. */
function commandTexts(line: Line): string[] {
  if (line.code) return [line.text];
  return [...line.text.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
}

export function checkPage(page: string, markdown: string, facts: DocsFacts): string[] {
  const problems: string[] = [];
  const dir = page.includes('/') ? page.slice(0, page.lastIndexOf('/')) : '';
  const anyCommand = new Set([...facts.commandFlags.values()].flatMap((s) => [...s]));
  const say = (line: Line, what: string): void => void problems.push(`${page}:${line.no}: ${what}`);

  for (const line of linesOf(markdown)) {
    const text = line.text;
    for (const m of text.matchAll(FLAG)) {
      const flag = m[0];
      if (anyCommand.has(flag) || flag === '--help' || facts.scriptFlags.has(flag)) continue;
      const tool = FOREIGN_FLAGS.get(flag);
      if (tool !== undefined && text.includes(tool)) continue;
      say(line, `${flag}: no tessera command, benchmark or script takes it`);
    }
    for (const span of commandTexts(line)) {
      for (const c of span.matchAll(COMMAND)) {
        const flags = facts.commandFlags.get(c[1]!)!;
        const rest = span.slice(c.index + c[0].length).split(/\s(?:#|&&|;|\|)\s|\s&\s*$/)[0]!;
        for (const f of rest.matchAll(FLAG))
          if (!flags.has(f[0]) && f[0] !== '--help') say(line, `${f[0]}: not an option of \`tessera ${c[1]}\``);
      }
    }
    for (const m of text.matchAll(/!?\[[^\]]*\]\(([^)\s]+)\)/g)) {
      const target = m[1]!;
      if (/^[a-z]+:/.test(target)) continue;
      const [file, anchor] = target.split('#') as [string, string | undefined];
      const repoPath = file === '' ? page : normalize(dir === '' ? file : `${dir}/${file}`);
      if (repoPath === undefined || !facts.exists(repoPath)) {
        say(line, `link ${target}: no such file`);
        continue;
      }
      if (anchor === undefined || !repoPath.endsWith('.md')) continue;
      const other = repoPath === page ? markdown : facts.pageText(repoPath);
      if (other === undefined || !anchorsOf(other).has(anchor)) say(line, `link ${target}: no heading #${anchor}`);
    }
    for (const m of text.matchAll(/\bnpm run ([\w:*-]+)/g))
      if (!m[1]!.includes('*') && !facts.npmScripts.has(m[1]!))
        say(line, `npm run ${m[1]}: no such script in package.json`);
    const paths = [...text.matchAll(PATH)].map((m) => m[0]);
    for (const span of text.matchAll(/`([^`\s]+)`/g)) if (MODULE_PATH.test(span[1]!)) paths.push(`src/${span[1]}`);
    for (const raw of paths) {
      const path = raw.replace(/[.,:;]+$/, '').replace(/\/$/, '');
      if (path.includes('*') || GENERATED.some((g) => path === g || path.startsWith(`${g}/`))) continue;
      if (!facts.exists(path)) say(line, `${path}: no such file or directory`);
    }
    for (const m of text.matchAll(/\btessera_[a-z0-9_]*[a-z0-9]\b|\bTESSERA_[A-Z0-9_]*[A-Z0-9]\b/g))
      if (!facts.sourceText.includes(m[0])) say(line, `${m[0]}: no source file names it`);
  }
  return problems;
}

/** a/b/../c -> a/c; undefined when it climbs out of the repository. */
function normalize(path: string): string | undefined {
  const parts: string[] = [];
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (parts.length === 0) return undefined;
      parts.pop();
    } else parts.push(part);
  }
  return parts.join('/');
}
