// --api-keys FILE: a JSON object mapping each API key to its tenant's name,
//   { "sk-alice-1": "alice", "sk-alice-2": "alice", "sk-bob": "bob" }
// Read once at start-up. A bad file is a ConfigError naming the file and the problem (exit 2).
// Must never echo a key back in a message (they are secrets; the position names it instead).
import { readFile } from 'node:fs/promises';
import { asTenantId, ConfigError, tenantNameProblem, type TenantId } from '../core/index.js';

export async function loadApiKeys(file: string): Promise<ReadonlyMap<string, TenantId>> {
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

export function parseApiKeys(text: string, file: string): ReadonlyMap<string, TenantId> {
  const bad = (why: string): ConfigError =>
    new ConfigError(
      `--api-keys ${file}: ${why}; expected a JSON object mapping each API key to its tenant, e.g. {"sk-1": "alice"}`,
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
  const keys = new Map<string, TenantId>();
  entries.forEach(([key, tenant], index) => {
    if (key === '' || /\s/.test(key)) throw bad(`key #${index + 1} is empty or contains whitespace`);
    if (typeof tenant !== 'string' || tenant.trim() === '')
      throw bad(`the tenant of key #${index + 1} is not a non-empty string`);
    const unfit = tenantNameProblem(tenant);
    if (unfit !== null) throw bad(`the tenant of key #${index + 1}: ${unfit}`);
    keys.set(key, asTenantId(tenant));
  });
  return keys;
}
