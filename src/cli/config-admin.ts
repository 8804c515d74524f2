// The admin key: `--admin-key KEY`, else TESSERA_ADMIN_KEY (preferred: argv is visible in `ps`).
// It opens the operator's /dashboard (which shows which tenant owns which page) and /health's
// detail on a server with --api-keys (workers' internal addresses, loads, pages; anyone else
// learns only up or down). Without one the dashboard is off (404). It is never an API key:
// ordinary API keys get 401 there. Pure apart from its `env` argument. Must never accept a key
// too short to guess at, nor echo the key in a message.
import { ConfigError } from '../core/index.js';
import type { Env } from './config-env.js';

export const ADMIN_KEY_ENV = 'TESSERA_ADMIN_KEY';
export const MIN_ADMIN_KEY_CHARS = 16;

/** The flag's description, the same on serve, router and up. */
export const ADMIN_KEY_HELP = `the admin key that opens /dashboard and /health's detail (default: $${ADMIN_KEY_ENV}; none: /dashboard is off)`;

export interface AdminKeyFlags {
  readonly adminKey?: string;
}

/** The admin key, or null when none is set (the dashboard is off). */
export function parseAdminKey(flags: AdminKeyFlags, env: Env): string | null {
  const key = flags.adminKey ?? env[ADMIN_KEY_ENV];
  if (key === undefined || key === '') return null;
  if (key.length < MIN_ADMIN_KEY_CHARS || /\s/.test(key)) {
    throw new ConfigError(
      `the admin key (--admin-key or ${ADMIN_KEY_ENV}) must be at least ${MIN_ADMIN_KEY_CHARS} characters without spaces`,
    );
  }
  return key;
}

/** The admin key as ApiServerOptions' spread: absent when none was given. */
export function withAdminKey(key: string | null): { readonly adminKey?: string } {
  return key === null ? {} : { adminKey: key };
}
