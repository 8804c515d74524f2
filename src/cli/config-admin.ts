// --admin-key KEY (or TESSERA_ADMIN_KEY): the bearer key that sees /health's detail on a server
// with --api-keys (workers' internal addresses, loads, pages); anyone else learns only up or down.
// Must never echo the key in a message.
import { ConfigError } from '../core/index.js';

export function adminKeyFrom(flag: string | undefined, env: Readonly<Record<string, string | undefined>>): string | undefined {
  const key = flag ?? env['TESSERA_ADMIN_KEY'];
  if (key === undefined || key === '') return undefined;
  if (/\s/.test(key) || key.length < 16) throw new ConfigError('--admin-key / TESSERA_ADMIN_KEY: the admin key must be at least 16 characters, without whitespace');
  return key;
}

export const ADMIN_KEY_HELP = "bearer key that sees /health's detail when --api-keys is set (default: TESSERA_ADMIN_KEY)";

/** The admin key as ApiServerOptions' spread: absent when none was given. */
export function withAdminKey(key: string | undefined): { readonly adminKey?: string } {
  return key === undefined ? {} : { adminKey: key };
}
