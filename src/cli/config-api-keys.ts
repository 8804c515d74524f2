// --api-keys FILE: a JSON object mapping each API key to its tenant's name,
//   { "sk-alice-1": "alice", "sk-alice-2": "alice", "sk-bob": "bob" }
// or to an object with the tenant and its limits (each optional, a positive integer; 429 past them,
// src/api/http/rate-limit.ts), the two forms mixed freely:
//   { "sk-a": { "tenant": "alice", "requests_per_minute": 60, "tokens_per_minute": 100000,
//               "max_concurrent_requests": 8 }, "sk-b": "bob" }
// Limits are the tenant's: all keys of a tenant share them, so its keys must not disagree (a key
// without limits beside one with them is an error too: the file would say two things).
// Read once at start-up. A bad file is a ConfigError naming the file and the problem (exit 2).
// Must never echo a key back in a message (they are secrets; the position names it instead).
import { readFile } from 'node:fs/promises';
import type { ApiKeys, KeyLimits } from '../api/index.js';
import { asTenantId, ConfigError, tenantNameProblem, type TenantId } from '../core/index.js';

export async function loadApiKeys(file: string): Promise<ApiKeys> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new ConfigError(
      `--api-keys ${file}: cannot read the file (${error instanceof Error ? error.message : String(error)})`,
      error,
    );
  }
  return parseApiKeys(text, file);
}

const LIMIT_FIELDS = {
  requests_per_minute: 'requestsPerMinute',
  tokens_per_minute: 'tokensPerMinute',
  max_concurrent_requests: 'maxConcurrentRequests',
} as const satisfies Record<string, keyof KeyLimits>;

export function parseApiKeys(text: string, file: string): ApiKeys {
  const bad = (why: string): ConfigError =>
    new ConfigError(
      `--api-keys ${file}: ${why}; expected a JSON object mapping each API key to its tenant, e.g. {"sk-1": "alice"}, ` +
        'or to {"tenant": "alice", "requests_per_minute": 60, "tokens_per_minute": 100000, "max_concurrent_requests": 8}',
    );
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw bad(`not valid JSON (${error instanceof Error ? error.message : String(error)})`);
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw bad('not a JSON object');
  const entries = Object.entries(json as Record<string, unknown>);
  if (entries.length === 0) throw bad('no keys: a server with --api-keys and no key would refuse every request');
  const keys = new Map<string, TenantId | { readonly tenant: TenantId; readonly limits: KeyLimits }>();
  /** Each tenant's limits as the first of its keys gave them (JSON, to compare), and that key's number. */
  const tenantLimits = new Map<TenantId, { readonly json: string; readonly index: number }>();
  entries.forEach(([key, value], index) => {
    const where = `key #${index + 1}`;
    if (key === '' || /\s/.test(key)) throw bad(`${where} is empty or contains whitespace`);
    const isObject = typeof value === 'object' && value !== null && !Array.isArray(value);
    const name = isObject ? (value as Record<string, unknown>)['tenant'] : value;
    if (typeof name !== 'string' || name.trim() === '') throw bad(`the tenant of ${where} is not a non-empty string`);
    const unfit = tenantNameProblem(name);
    if (unfit !== null) throw bad(`the tenant of ${where}: ${unfit}`);
    const tenant = asTenantId(name);
    const limits = isObject ? limitsOf(value as Record<string, unknown>, where, bad) : {};
    const seen = tenantLimits.get(tenant);
    const limitsJson = JSON.stringify(limits);
    if (seen !== undefined && seen.json !== limitsJson) {
      throw bad(
        `${where} gives tenant "${name}" other limits than key #${seen.index + 1} (${limitsJson} vs ${seen.json}); a tenant's keys share one set of limits`,
      );
    }
    tenantLimits.set(tenant, { json: limitsJson, index });
    keys.set(key, isObject ? { tenant, limits } : tenant);
  });
  return keys;
}

function limitsOf(value: Record<string, unknown>, where: string, bad: (why: string) => ConfigError): KeyLimits {
  const limits: { -readonly [K in keyof KeyLimits]: number } = {};
  for (const [field, raw] of Object.entries(value)) {
    if (field === 'tenant') continue;
    if (!(field in LIMIT_FIELDS)) {
      throw bad(`${where} has an unknown field "${field}" (known: tenant, ${Object.keys(LIMIT_FIELDS).join(', ')})`);
    }
    if (typeof raw !== 'number' || !Number.isSafeInteger(raw) || raw < 1) {
      throw bad(`${where}: ${field} must be a positive integer, got ${JSON.stringify(raw)}`);
    }
    limits[LIMIT_FIELDS[field as keyof typeof LIMIT_FIELDS]] = raw;
  }
  return limits;
}
