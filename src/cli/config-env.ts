// The environment variables Tessera reads, each in one place, from an `env` argument (the
// caller passes process.env) so tests can give their own:
//   TESSERA_HOME              model cache (default $XDG_CACHE_HOME/tessera or ~/.cache/tessera)
//   TESSERA_ALLOW_FAULTS=1    arms fault points; without it TESSERA_FAULT is refused
//   TESSERA_FAULT=a[,b]       fault points to switch on (names from src/core's FAULT_NAMES)
//   TESSERA_FORCED_TOKENS     with the forced-answer fault point: [[ids...], ...], the output of seed 0, 1, ...
//   TESSERA_CHECK_EVERY_STEP=1  the worker checks ledger integrity after every step (tests)
// Must never arm a fault point without TESSERA_ALLOW_FAULTS=1, nor ignore an unknown name.
import { homedir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, FAULT_NAMES, FaultSet, isFaultName, NO_FAULTS, type FaultName } from '../core/index.js';

export type Env = Readonly<Record<string, string | undefined>>;

export function tesseraHome(env: Env, home: string = homedir()): string {
  const explicit = env['TESSERA_HOME'];
  if (explicit !== undefined && explicit !== '') return explicit;
  const cache = env['XDG_CACHE_HOME'];
  return join(cache !== undefined && cache !== '' ? cache : join(home, '.cache'), 'tessera');
}

/** The armed fault points; NO_FAULTS unless both variables say otherwise. */
export function faultsFromEnv(env: Env): FaultSet {
  const requested = (env['TESSERA_FAULT'] ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (requested.length === 0) return NO_FAULTS;
  if (env['TESSERA_ALLOW_FAULTS'] !== '1') {
    throw new ConfigError(
      `TESSERA_FAULT=${env['TESSERA_FAULT'] ?? ''} is set but fault points are not armed: they switch defences off and are for ` +
        'tests only. Set TESSERA_ALLOW_FAULTS=1 as well to use them, or unset TESSERA_FAULT.',
    );
  }
  const names: FaultName[] = [];
  for (const name of requested) {
    if (!isFaultName(name))
      throw new ConfigError(`TESSERA_FAULT: unknown fault point "${name}" (known: ${FAULT_NAMES.join(', ')})`);
    names.push(name);
  }
  return new FaultSet(names, names.includes('forced-answer') ? forcedTokensFromEnv(env) : []);
}

/** TESSERA_FORCED_TOKENS (with the `forced-answer` fault point): a JSON array of token-id arrays, a request's seed picks one. */
function forcedTokensFromEnv(env: Env): number[][] {
  const text = env['TESSERA_FORCED_TOKENS'] ?? '';
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  const ok =
    Array.isArray(value) &&
    value.every((s) => Array.isArray(s) && s.every((id) => Number.isInteger(id) && (id as number) >= 0));
  if (!ok)
    throw new ConfigError(
      `TESSERA_FAULT=forced-answer needs TESSERA_FORCED_TOKENS: a JSON array of arrays of token ids, got ${JSON.stringify(text.slice(0, 80))}`,
    );
  return value as number[][];
}

export function checkEveryStepFromEnv(env: Env): boolean {
  return env['TESSERA_CHECK_EVERY_STEP'] === '1';
}
