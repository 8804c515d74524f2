// The KV pool's size from the flags and the model's shape, and the start-up check that it holds
// the context length: the incident's first fault (a 1,048,576-token context on a pool of
// 681,280 tokens) refused before a model is loaded. `tessera plan` prints the same numbers.
// Owns the pool arithmetic's inputs and the check's message; the sums are src/pages'.
// Must never round in the pool's favour (pages that fit in memory round down) nor let a node
// start whose context length needs more pages than its pool has.
import { ConfigError, kvBytesPerElement, type KvDtype } from '../core/index.js';
import {
  kvBytesPerPage,
  kvBytesPerToken,
  kvBytesPerTokenPerLayer,
  pagesFor,
  pagesInBytes,
  tokensIn,
  type KvElementShape,
} from '../pages/index.js';
import { formatBytes, mibAtLeast } from './config-values.js';

/** How the pool was sized: --kv-pages, --kv-memory, or the default. */
export type PoolSize =
  | { readonly kind: 'pages'; readonly numPages: number }
  | { readonly kind: 'memory'; readonly bytes: number }
  /** No flag: room for DEFAULT_POOL_CONTEXTS full-length requests. */
  | { readonly kind: 'default' };

/**
 * The default pool holds this many requests of the full context length: twice the incident
 * report's remedy (a pool of about twice the context), so a long request never waits alone.
 */
export const DEFAULT_POOL_CONTEXTS = 4;

/** What a model's config says about its KV (a subset of src/formats' ModelConfig). */
export interface KvModelShape {
  readonly numLayers: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly maxPositionEmbeddings: number;
  /** Mistral's attention window: Tessera runs such a model only within it. */
  readonly slidingWindow: number | null;
}

export interface PoolPlan {
  readonly shape: KvElementShape;
  /** How the pool stores K and V (--kv-dtype): every byte count below is in it. */
  readonly kvDtype: KvDtype;
  readonly pageSize: number;
  readonly bytesPerTokenPerLayer: number;
  readonly bytesPerToken: number;
  readonly bytesPerPage: number;
  readonly size: PoolSize;
  readonly numPages: number;
  readonly poolTokens: number;
  readonly poolBytes: number;
  readonly contextLength: number;
  /** Where contextLength came from. */
  readonly contextFrom: 'flag' | 'model';
  readonly contextPages: number;
}

export interface PoolFlags {
  readonly size: PoolSize;
  readonly pageSize: number;
  /** --kv-dtype: f32, f16 or q8_0 elements in every page, stamp-covered slot and transfer. */
  readonly kvDtype: KvDtype;
  /** null: the model's maxPositionEmbeddings. */
  readonly contextLength: number | null;
}

/** The pool's numbers. Throws a ConfigError for a context longer than the model was built for. */
export function planPool(model: KvModelShape, flags: PoolFlags): PoolPlan {
  const shape: KvElementShape = {
    numLayers: model.numLayers,
    numKvHeads: model.numKvHeads,
    headDim: model.headDim,
    // q8_0: an f16 scale per block of 32 values, 34 / 32 = 1.0625 B (a head's cut last block adds more).
    bytesPerElement: kvBytesPerElement(flags.kvDtype, model.headDim),
  };
  const { pageSize } = flags;
  const window = model.slidingWindow ?? Infinity;
  const maxContext = Math.min(model.maxPositionEmbeddings, window);
  if (flags.contextLength !== null && flags.contextLength > maxContext) {
    const limit =
      window < model.maxPositionEmbeddings
        ? `sliding window (${window} tokens), the longest context Tessera runs it at`
        : `max_position_embeddings (${maxContext})`;
    throw new ConfigError(
      `--context-length ${flags.contextLength} exceeds the model's ${limit}; use at most ${maxContext}`,
    );
  }
  const contextLength = flags.contextLength ?? maxContext;
  const contextPages = pagesFor(contextLength, pageSize);
  const bytesPerPage = kvBytesPerPage(shape, pageSize);
  const numPages = pagesOf(flags.size, bytesPerPage, contextPages);
  if (numPages < 1) {
    throw new ConfigError(
      `the KV pool would hold no page: one page of ${pageSize} tokens takes ${formatBytes(bytesPerPage)} (${bytesPerPage} bytes); ` +
        `raise --kv-memory to at least ${mibAtLeast(contextPages * bytesPerPage)} for a context of ${contextLength} tokens`,
    );
  }
  return {
    shape,
    kvDtype: flags.kvDtype,
    pageSize,
    bytesPerTokenPerLayer: kvBytesPerTokenPerLayer(shape),
    bytesPerToken: kvBytesPerToken(shape),
    bytesPerPage,
    size: flags.size,
    numPages,
    poolTokens: tokensIn(numPages, pageSize),
    poolBytes: numPages * bytesPerPage,
    contextLength,
    contextFrom: flags.contextLength === null ? 'model' : 'flag',
    contextPages,
  };
}

function pagesOf(size: PoolSize, bytesPerPage: number, contextPages: number): number {
  switch (size.kind) {
    case 'pages':
      return size.numPages;
    case 'memory':
      return pagesInBytes(size.bytes, bytesPerPage);
    case 'default':
      return DEFAULT_POOL_CONTEXTS * contextPages;
  }
}

/**
 * The start-up check: undefined when the pool holds one request of the full context length,
 * else the error a node refuses to start with (both numbers in tokens, and the fix).
 */
export function startupCheckError(plan: PoolPlan): ConfigError | undefined {
  if (plan.contextPages <= plan.numPages) return undefined;
  const raise =
    plan.size.kind === 'pages'
      ? `--kv-pages to at least ${plan.contextPages}`
      : `--kv-memory to at least ${mibAtLeast(plan.contextPages * plan.bytesPerPage)}`;
  return new ConfigError(
    `context length ${plan.contextLength} tokens does not fit the KV pool: ${plan.poolTokens} tokens ` +
      `(${plan.numPages} pages of ${plan.pageSize}). Raise ${raise} or lower --context-length to at most ${plan.poolTokens}.`,
  );
}
