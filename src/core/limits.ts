// The limits a request must fit everywhere it travels. One home for them: the API refuses a
// request that breaks one (a 400 naming the field), the wire codec validates frames against the
// same numbers, and the CLI refuses a tenant name that could not cross the wire.
// Must never: differ between the API and the codec (a request the API accepts that the codec
// refuses would make decode close a connection other requests share).

/** Largest value of a u31 wire field (token ids, counts, top-k). */
export const U31 = 0x7fffffff;

export const REQUEST_LIMITS = {
  /** `top_k`: 0 (off) .. U31. */
  maxTopK: U31,
  /** `stop`: at most this many strings (each costs a scan per token). */
  maxStopStrings: 16,
  /** `stop`: at most this many UTF-16 code units per string. */
  maxStopChars: 1024,
  /** `stop_token_ids`: at most this many ids, each a token id (<= U31). */
  maxStopTokenIds: 1024,
  maxTokenId: U31,
  /** A tenant's name (from --api-keys): 1..256 characters, no control characters. */
  maxTenantChars: 256,
} as const;

/** Tenants come from API keys server-side: printable, no control characters. */
export const TENANT_PATTERN = /^[^\u0000-\u001f\u007f]+$/;

/** A UTF-16 surrogate without its pair: UTF-8 (the wire, the tokenizer) would turn it into U+FFFD. */
const LONE_SURROGATE = /\p{Surrogate}/u;

/** A problem with a field of a request: the OpenAI parameter name and what is wrong. */
export interface LimitViolation {
  readonly param: string;
  readonly message: string;
}

/** The fields of a request the wire carries, as the API read them. */
export interface LimitedFields {
  readonly topK: number;
  readonly stop: readonly string[];
  readonly stopTokenIds: readonly number[];
}

/** The first field that breaks a limit, or null. Cheap: linear in the fields' sizes. */
export function requestLimitViolation(fields: LimitedFields): LimitViolation | null {
  const L = REQUEST_LIMITS;
  if (fields.topK > L.maxTopK)
    return { param: 'top_k', message: `\`top_k\` must be at most ${L.maxTopK}, got ${fields.topK}.` };
  if (fields.stop.length > L.maxStopStrings) {
    return {
      param: 'stop',
      message: `\`stop\` holds ${fields.stop.length} strings; at most ${L.maxStopStrings} are supported.`,
    };
  }
  const long = fields.stop.findIndex((s) => s.length > L.maxStopChars);
  if (long >= 0) {
    const length = (fields.stop[long] as string).length;
    return {
      param: 'stop',
      message: `\`stop\` string #${long + 1} has ${length} characters; at most ${L.maxStopChars} are supported.`,
    };
  }
  if (fields.stopTokenIds.length > L.maxStopTokenIds) {
    const count = fields.stopTokenIds.length;
    return {
      param: 'stop_token_ids',
      message: `\`stop_token_ids\` holds ${count} ids; at most ${L.maxStopTokenIds} are supported.`,
    };
  }
  const broken = fields.stop.findIndex((s) => LONE_SURROGATE.test(s));
  if (broken >= 0)
    return {
      param: 'stop',
      message: `\`stop\` string #${broken + 1} holds a lone UTF-16 surrogate, which UTF-8 cannot carry.`,
    };
  const big = fields.stopTokenIds.find((id) => id > L.maxTokenId);
  if (big !== undefined)
    return {
      param: 'stop_token_ids',
      message: `\`stop_token_ids\` holds ${big}; token ids are at most ${L.maxTokenId}.`,
    };
  return null;
}

/** Why `name` cannot be a tenant, or null. */
export function tenantNameProblem(name: string): string | null {
  if (name.length === 0 || name.length > REQUEST_LIMITS.maxTenantChars) {
    return `a tenant's name must have 1..${REQUEST_LIMITS.maxTenantChars} characters, this one has ${name.length}`;
  }
  if (!TENANT_PATTERN.test(name)) return "a tenant's name must not contain control characters";
  if (LONE_SURROGATE.test(name)) return "a tenant's name must not hold a lone UTF-16 surrogate";
  return null;
}
