// TESSERA_HTTP_LIMITS="idleMs=..,headersMs=..,requestMs=..,maxConnections=..": overrides of
// src/api's DEFAULT_HTTP_LIMITS (timeouts and the connection cap of every HTTP listener), for
// deployments with other descriptor limits and for tests that cannot wait 30 s for an idle cut.
import { ConfigError } from '../core/index.js';
import { DEFAULT_HTTP_LIMITS, type HttpLimits } from '../api/index.js';
import { parseCount } from './config-values.js';

export function httpLimitsFromEnv(env: Readonly<Record<string, string | undefined>>): Partial<HttpLimits> {
  const text = env['TESSERA_HTTP_LIMITS'] ?? '';
  const limits: Record<string, number> = {};
  for (const part of text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')) {
    const [name, value] = part.split('=', 2).map((s) => s.trim());
    if (name === undefined || !(name in DEFAULT_HTTP_LIMITS)) {
      throw new ConfigError(
        `TESSERA_HTTP_LIMITS: unknown limit "${name ?? part}" (known: ${Object.keys(DEFAULT_HTTP_LIMITS).join(', ')})`,
      );
    }
    limits[name] = parseCount(value ?? '', `TESSERA_HTTP_LIMITS ${name}`, 1);
  }
  return limits as Partial<HttpLimits>;
}
