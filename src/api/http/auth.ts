// API key -> tenant. The tenant of a request comes only from here: from its bearer key when
// the server has API keys, else DEFAULT_TENANT. Must never read a tenant from the request body
// or query, and never compare keys in a way whose time depends on how much of a key matched.
import { createHash } from 'node:crypto';
import { DEFAULT_TENANT, type TenantId } from '../../core/index.js';
import { problem, type Problem } from './errors.js';
import { specOf, type ApiKeys } from './rate-limit.js';

export type AuthResult =
  { readonly kind: 'ok'; readonly tenant: TenantId } | { readonly kind: 'refused'; readonly problem: Problem };

export class TenantAuth {
  /** sha256(key) -> tenant: a lookup by digest reveals nothing about near-miss keys. */
  readonly #tenants: ReadonlyMap<string, TenantId> | null;
  /** sha256 of the admin key (--admin-key), if any. */
  readonly #admin: string | undefined;

  /**
   * `apiKeys` undefined: an open server (every request is DEFAULT_TENANT). `adminKey`: who sees
   * /health's detail. A key's limits are enforced by rate-limit.ts, per tenant.
   */
  constructor(apiKeys: ApiKeys | undefined, adminKey?: string) {
    this.#tenants =
      apiKeys === undefined ? null : new Map([...apiKeys].map(([key, entry]) => [digest(key), specOf(entry).tenant]));
    this.#admin = adminKey === undefined ? undefined : digest(adminKey);
  }

  /**
   * Whether the caller may see a node's internals (/health's workers, addresses, loads): anyone
   * on an open server; with API keys, only the holder of the admin key. A tenant's key is not enough.
   */
  seesDetail(authorization: string | undefined): boolean {
    if (this.#tenants === null) return true;
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    return match !== null && this.#admin !== undefined && digest(match[1] as string) === this.#admin;
  }

  get enabled(): boolean {
    return this.#tenants !== null;
  }

  /** `authorization`: the raw Authorization header, if any. */
  tenantOf(authorization: string | undefined): AuthResult {
    if (this.#tenants === null) return { kind: 'ok', tenant: DEFAULT_TENANT };
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    if (match === null) {
      return {
        kind: 'refused',
        problem: problem('unauthorized', 'Missing API key: send it as `Authorization: Bearer KEY`.'),
      };
    }
    const tenant = this.#tenants.get(digest(match[1] as string));
    if (tenant === undefined) return { kind: 'refused', problem: problem('unauthorized', 'Invalid API key.') };
    return { kind: 'ok', tenant };
  }
}

function digest(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}
