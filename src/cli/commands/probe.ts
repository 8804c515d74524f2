// `tessera probe`: audit any OpenAI-compatible endpoint for cross-tenant leaks, with two API keys
// as two tenants (src/probe does the work). Progress bars on stderr, the verdict table on
// stdout, --json (every request and figure) and --html (self-contained report) files.
// Exit 0: nothing found; 1: a leak or a timing signal; 2: a usage or connection error.
import { writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { ConfigError } from '../../core/index.js';
import {
  CHECK_NAMES,
  DEFAULT_CHECKS,
  ProbeConnectionError,
  progressLine,
  renderHtml,
  runProbe,
  verdictTable,
  type CheckName,
} from '../../probe/index.js';
import { parseCount } from '../config-values.js';

interface ProbeFlags {
  readonly baseUrl?: string;
  readonly apiKey: string[];
  readonly model?: string;
  readonly checks?: string;
  readonly budget: string;
  readonly json?: string;
  readonly html?: string;
  readonly seed: string;
  readonly batchInvariant?: boolean;
  readonly extraBodyA?: string;
  readonly extraBodyB?: string;
  readonly timeoutMs: string;
  readonly evictTokens?: string;
  readonly contextLength?: string;
}

const collect = (value: string, previous: string[]): string[] => [...previous, value];

export function registerProbe(program: Command): void {
  program
    .command('probe')
    .description(
      'audit an OpenAI-compatible endpoint for cross-tenant leaks: exit 0 nothing found, 1 a leak or timing ' +
        'signal, 2 usage/connection error',
    )
    .option('--base-url <url>', 'the endpoint, e.g. http://127.0.0.1:8000 (with or without /v1)')
    .option(
      '--api-key <key>',
      'give twice: tenant A, then tenant B (the same key twice for a server without tenants)',
      collect,
      [],
    )
    .option('--model <name>', 'the model to probe (default: the first /v1/models lists)')
    .option(
      '--checks <list>',
      `comma-separated, from ${CHECK_NAMES.join(', ')}, or all (default: ${DEFAULT_CHECKS.join(', ')})`,
    )
    .option('--budget <n>', 'requests each check may send, about (each check sizes its samples to it)', '100')
    .option('--json <file>', 'write every request and every figure as JSON')
    .option('--html <file>', 'write a self-contained HTML report with the evidence and plots')
    .option('--seed <n>', 'seed of every prompt and every random order', '1')
    .option(
      '--batch-invariant',
      'the server promises batch invariance (Tessera --deterministic): any change of a greedy answer is a finding',
    )
    .option(
      '--extra-body-a <json>',
      'JSON merged into every request body of tenant A (vLLM: {"cache_salt": "..."}, SGLang: {"extra_key": "..."})',
    )
    .option('--extra-body-b <json>', 'the same for tenant B')
    .option('--timeout-ms <n>', 'timeout of one request', '120000')
    .option(
      '--context-length <n>',
      'tokens one request may use, for a server that states none (no /v1/models max_model_len, /props n_ctx, ' +
        'Ollama num_ctx, nor an error naming it; llama-server: -c divided by -np); given, it replaces what the ' +
        'server states',
    )
    .option(
      '--evict-tokens <n>',
      "disk-timing: tokens of fresh prompts sent to push A's prompts out of the KV pool (default: 4x the pool " +
        'limit the probe learns, else 16x the context)',
    )
    .action(async (flags: ProbeFlags) => {
      process.exitCode = await probe(flags);
    });
}

function parseExtra(value: string | undefined, flag: string): Record<string, unknown> {
  if (value === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new ConfigError(`${flag} must be a JSON object, got ${value}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new ConfigError(`${flag} must be a JSON object, got ${value}`);
  return parsed as Record<string, unknown>;
}

function parseChecks(value: string | undefined): CheckName[] {
  if (value === undefined) return [...DEFAULT_CHECKS];
  if (value.trim() === 'all') return [...CHECK_NAMES];
  const names = value
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  for (const n of names)
    if (!(CHECK_NAMES as readonly string[]).includes(n))
      throw new ConfigError(`--checks: unknown check "${n}" (known: ${CHECK_NAMES.join(', ')})`);
  if (names.length === 0) throw new ConfigError('--checks must name at least one check');
  // Run in the canonical order whatever order they were given in.
  return CHECK_NAMES.filter((c) => names.includes(c));
}

async function probe(flags: ProbeFlags): Promise<number> {
  if (flags.baseUrl === undefined) throw new ConfigError('--base-url is required');
  if (!/^https?:\/\/[^/]+/.test(flags.baseUrl))
    throw new ConfigError(`--base-url must be an http(s) URL, got ${flags.baseUrl}`);
  if (flags.apiKey.length !== 2)
    throw new ConfigError(`give --api-key exactly twice (tenant A, tenant B), got ${flags.apiKey.length}`);
  const [keyA, keyB] = flags.apiKey as [string, string];
  const options = {
    baseUrl: flags.baseUrl.replace(/\/+$/, '').replace(/\/v1$/, ''),
    keys: { A: keyA, B: keyB },
    model: flags.model,
    checks: parseChecks(flags.checks),
    budget: parseCount(flags.budget, '--budget', 1, 100_000),
    seed: parseCount(flags.seed, '--seed', 0, 2 ** 32 - 1),
    batchInvariant: flags.batchInvariant === true,
    extraBody: { A: parseExtra(flags.extraBodyA, '--extra-body-a'), B: parseExtra(flags.extraBodyB, '--extra-body-b') },
    requestTimeoutMs: parseCount(flags.timeoutMs, '--timeout-ms', 100),
    ...(flags.evictTokens === undefined ? {} : { evictTokens: parseCount(flags.evictTokens, '--evict-tokens', 0) }),
    ...(flags.contextLength === undefined
      ? {}
      : { contextLength: parseCount(flags.contextLength, '--context-length', 2, 10_000_000) }),
  };
  if (keyA === keyB)
    process.stderr.write(
      'tessera probe: the same API key for both tenants: the server is probed as one tenant against itself\n',
    );
  const tty = process.stderr.isTTY === true;
  const shown = new Map<string, number>();
  try {
    const report = await runProbe(options, {
      now: () => performance.now(),
      progress: (check, done, total) => {
        // A bar per check: redrawn in place on a terminal, a line per 25% elsewhere (logs, CI).
        const quarter = Math.floor((4 * done) / Math.max(1, total));
        if (tty) process.stderr.write(`\r${progressLine(check, done, total)}`);
        else if (quarter !== shown.get(check)) process.stderr.write(`${progressLine(check, done, total)}\n`);
        shown.set(check, quarter);
      },
      checkDone: (r) =>
        process.stderr.write(`${tty ? '\r' : ''}${progressLine(r.check, r.numRequests, r.numRequests)} ${r.status}\n`),
    });
    if (flags.json !== undefined) await writeFile(flags.json, `${JSON.stringify(report, null, 2)}\n`);
    if (flags.html !== undefined) await writeFile(flags.html, renderHtml(report));
    process.stdout.write(verdictTable(report));
    return report.exitCode;
  } catch (error) {
    if (error instanceof ProbeConnectionError) {
      process.stderr.write(`tessera probe: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
}
