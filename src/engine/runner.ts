// ModelRunner: executes one scheduler step (BatchItem[]) over the paged KV pool, with the page
// checks before anything is read or written and the stamps after.
//
// The life of one step:
//   1. for every item: checkWrite(owner, pages receiving new slots) and checkRead(owner, page
//      table, startPos); an item that fails is dropped with its PageCheckError, the rest run
//   2. the surviving items become rows of one batch (tokens, positions, page tables)
//   3. forward(): K/V written into the items' pages, attention, logits for wantLogits items; the
//      pages of every item's page table are lent to the forward pass for its duration
//      (pool.lend/unlend), which runs here (LocalForward) or on the engine thread
//      (engine-thread.ts); the ledger and the stamps stay with the caller's thread either way
//   4. stamp every page written: (its epoch, slots filled from slot 0)
//   5. one result per item, in item order
//
// It must never read or write a page before both checks passed for its item, run two steps at
// once (the activations are shared), or hand out logits that outlive the next step (they are
// views into the runner's buffers: sample before stepping again).
import {
  assert,
  isPageCheckError,
  type BatchItem,
  type PageCheckError,
  type RequestId,
  type Tag,
} from '../core/index.js';
import type { DenseKernels, OpKernels } from '../kernels/index.js';
import type { PagePool } from '../pages/index.js';
import { allocateActivations, type Activations } from './activations.js';
import type { ModelConfig } from '../formats/index.js';
import type { ForwardBatch, ForwardModel, ForwardSeq } from './forward/llama.js';
import { forwardFor } from './forward/arch.js';
import type { LoraBank } from './lora.js';
import { ropeDependsOnLength, ropeTable } from '../formats/index.js';
import type { PreparedWeights } from './weights-prepared.js';

export type ItemResult =
  /**
   * K/V written and stamped; `logits` [rows x vocab] (rows = the item's logitCount, default 1;
   * row r is the logits after its token tokens.length - rows + r) are a view valid until the next step.
   */
  | { readonly kind: 'logits'; readonly rid: RequestId; readonly logits: Float32Array; readonly rows: number }
  /** K/V written and stamped; no logits were wanted (a prefill chunk before the last). */
  | { readonly kind: 'computed'; readonly rid: RequestId }
  /** A page check failed: nothing of this item was read or written. */
  | { readonly kind: 'failed'; readonly rid: RequestId; readonly error: PageCheckError };

interface RunnerShape {
  readonly config: ModelConfig;
  /** Its KV storage must be what the forward pass reads (ops.allocF32, or the engine thread's memory). */
  readonly pool: PagePool;
  /** Most tokens in one step, over all items (a prefill chunk counts all its tokens). */
  readonly maxStepTokens: number;
  /** Most items wanting logits in one step. */
  readonly maxStepLogits: number;
  /** Logits per row: the vocabulary (default), or a draft model's restricted head's rows (draft-head.ts). */
  readonly logitWidth?: number;
}

/** A runner whose forward pass runs on this thread, with these kernels and weights. */
export interface ModelRunnerOptions extends RunnerShape {
  readonly weights: PreparedWeights;
  readonly dense: DenseKernels;
  readonly ops: OpKernels;
  /** LoRA adapters the forward pass may apply (lora.ts). */
  readonly lora?: LoraBank;
}

/** A runner whose forward pass runs wherever `exec` runs it (the engine thread). */
export interface ExecRunnerOptions extends RunnerShape {
  readonly exec: ForwardExec;
}

/**
 * Where the forward pass runs. The runner fills tokens[0, T) and positions[0, T), then calls
 * run(); the logits it resolves to stay valid until the next run().
 */
export interface ForwardExec {
  readonly tokens: Int32Array;
  readonly positions: Int32Array;
  run(batch: ForwardBatch): Promise<Float32Array>;
}

/** The forward pass on this thread. */
export class LocalForward implements ForwardExec {
  readonly tokens: Int32Array;
  readonly positions: Int32Array;
  readonly #model: ForwardModel;
  readonly #act: Activations;

  constructor(model: ForwardModel, act: Activations) {
    this.#model = model;
    this.#act = act;
    this.tokens = act.tokens;
    this.positions = act.positions;
  }

  run(batch: ForwardBatch): Promise<Float32Array> {
    return forwardFor(this.#model.config)(this.#model, batch, this.#act);
  }
}

/** A local forward pass's model and activations, sized for steps of maxStepTokens / maxStepLogits. */
export function localForward(o: ModelRunnerOptions): LocalForward {
  const model: ForwardModel = {
    config: o.config,
    weights: o.weights,
    rope: ropeTable(o.config),
    dense: o.dense,
    ops: o.ops,
    kv: o.pool.kv,
    ...(o.lora === undefined ? {} : { lora: o.lora }),
  };
  return new LocalForward(
    model,
    allocateActivations(o.config, o.maxStepTokens, o.maxStepLogits, denseOutputAlloc(o.dense, o.ops), (n) =>
      o.ops.allocF32(n),
    ),
  );
}

/**
 * Where dense outputs live: the native kernels write ordinary memory (plain ArrayBuffers); the
 * wasm dense kernels want views of their own memory (the ref kernels take either).
 */
export function denseOutputAlloc(dense: DenseKernels, ops: OpKernels): (n: number) => Float32Array {
  return dense.name === 'native' ? (n) => new Float32Array(n) : (n) => ops.allocF32(n);
}

export interface RunnerStats {
  readonly numSteps: number;
  readonly numTokens: number;
  /** Items dropped because a page check failed (the metric behind kv_page_check_failures). */
  readonly numPageCheckFailures: number;
}

export class ModelRunner {
  readonly config: ModelConfig;
  readonly pool: PagePool;
  /** Most positions a sequence may reach: the context length, or Mistral's sliding window. */
  readonly maxPositions: number;
  readonly maxStepTokens: number;
  readonly maxStepLogits: number;
  readonly #exec: ForwardExec;
  /** Logits per row (RunnerShape.logitWidth). */
  readonly #logitWidth: number;
  /** Page tables of the step's items, one after the other; grown (rarely) when a step needs more. */
  #pageTables: Int32Array;
  #busy = false;
  #numSteps = 0;
  #numTokens = 0;
  #numPageCheckFailures = 0;

  constructor(o: ModelRunnerOptions | ExecRunnerOptions) {
    const { config, pool } = o;
    const kv = pool.kv;
    assert(
      kv.numLayers === config.numLayers && kv.numKvHeads === config.numKvHeads && kv.headDim === config.headDim,
      () =>
        `the KV pool's shape (${kv.numLayers} layers x ${kv.numKvHeads} heads x ${kv.headDim}) does not fit the model`,
    );
    assert(
      Number.isInteger(o.maxStepTokens) && o.maxStepTokens > 0,
      () => `maxStepTokens must be a positive integer, got ${o.maxStepTokens}`,
    );
    assert(
      Number.isInteger(o.maxStepLogits) && o.maxStepLogits > 0,
      () => `maxStepLogits must be a positive integer, got ${o.maxStepLogits}`,
    );
    this.config = config;
    this.pool = pool;
    // Attention has no window: a Mistral model with one runs only within it, where it is exact.
    this.maxPositions = Math.min(config.maxPositionEmbeddings, config.slidingWindow ?? Infinity);
    this.maxStepTokens = o.maxStepTokens;
    this.maxStepLogits = o.maxStepLogits;
    this.#exec = 'exec' in o ? o.exec : localForward(o);
    this.#logitWidth = o.logitWidth ?? ('weights' in o ? o.weights.lmHead.rows : config.vocabSize);
    this.#pageTables = new Int32Array(pool.kv.numPages + o.maxStepTokens);
  }

  get stats(): RunnerStats {
    return { numSteps: this.#numSteps, numTokens: this.#numTokens, numPageCheckFailures: this.#numPageCheckFailures };
  }

  /** Runs one step; one result per item, in order. Broken contracts (a short page table, a token outside the vocabulary) throw. */
  async step(items: readonly BatchItem[]): Promise<ItemResult[]> {
    assert(!this.#busy, 'ModelRunner.step: a step is already running');
    this.#busy = true;
    try {
      return await this.#step(items);
    } finally {
      this.#busy = false;
    }
  }

  async #step(items: readonly BatchItem[]): Promise<ItemResult[]> {
    const { pool, config } = this;
    const pageSize = pool.pageSize;
    const exec = this.#exec;
    const results: (ItemResult | undefined)[] = new Array(items.length);
    const seqs: ForwardSeq[] = [];
    const logitRows: number[] = [];
    /** Indexes into logitRows of embedding items' rows (BatchItem.hiddenOut). */
    const hiddenRows: number[] = [];
    /** Per item wanting logits: its index and its number of rows, in logitRows' order. */
    const logitItems: { readonly i: number; readonly rows: number }[] = [];
    let numTokens = 0;
    let numTablePages = 0;
    assert(new Set(items.map((item) => item.rid)).size === items.length, 'a step with two items of one request');
    const tablePages = items.reduce((sum, item) => sum + Math.ceil((item.startPos + item.tokens.length) / pageSize), 0);
    if (tablePages > this.#pageTables.length) this.#pageTables = new Int32Array(2 * tablePages);

    // 1-2. Check every item, then lay the survivors out as rows of one batch.
    for (let i = 0; i < items.length; i++) {
      const item = items[i]!;
      const n = item.tokens.length;
      const end = item.startPos + n;
      assert(
        n > 0 && Number.isInteger(item.startPos) && item.startPos >= 0,
        () => `${item.rid}: an item needs tokens and a start position >= 0`,
      );
      assert(
        end <= this.maxPositions,
        () => `${item.rid}: position ${end - 1} is beyond the model's ${this.maxPositions} positions`,
      );
      assert(
        item.tags.length * pageSize >= end,
        () => `${item.rid}: ${item.tags.length} pages cannot hold ${end} positions`,
      );
      const failure = this.#check(item, end);
      if (failure !== undefined) {
        results[i] = { kind: 'failed', rid: item.rid, error: failure };
        continue;
      }
      assert(numTokens + n <= this.maxStepTokens, () => `a step of more than ${this.maxStepTokens} tokens`);
      const numPages = Math.ceil(end / pageSize);
      const pageTable = this.#pageTables.subarray(numTablePages, numTablePages + numPages);
      for (let p = 0; p < numPages; p++) pageTable[p] = item.tags[p]!.page;
      numTablePages += numPages;
      for (let t = 0; t < n; t++) {
        const token = item.tokens[t]!;
        assert(
          Number.isInteger(token) && token >= 0 && token < config.vocabSize,
          () => `${item.rid}: token ${token} is outside the vocabulary`,
        );
        exec.tokens[numTokens + t] = token;
        exec.positions[numTokens + t] = item.startPos + t;
      }
      const rope = ropeDependsOnLength(config) ? ropeTable(config, end) : null;
      const adapter = item.adapter === undefined ? {} : { adapter: item.adapter };
      seqs.push({ row: numTokens, numTokens: n, startPos: item.startPos, pageTable, rope, ...adapter });
      if (item.wantLogits) {
        const rows = item.logitCount ?? 1;
        assert(
          Number.isInteger(rows) && rows >= 1 && rows <= n,
          () => `${item.rid}: logitCount ${rows} is not within 1..${n} (its tokens)`,
        );
        assert(
          logitRows.length + rows <= this.maxStepLogits,
          () => `a step of more than ${this.maxStepLogits} rows wanting logits`,
        );
        for (let r = rows; r >= 1; r--) logitRows.push(numTokens + n - r);
        if (item.hiddenOut === true) hiddenRows.push(logitRows.length - 1);
        logitItems.push({ i, rows });
      }
      numTokens += n;
    }
    if (seqs.length > 0) {
      // 3. The forward pass, with the page tables' pages lent to it (a cached prefix page may be
      // in several tables: lending counts).
      const lent = this.#pageTables.subarray(0, numTablePages);
      pool.lend(lent);
      let logits: Float32Array;
      try {
        logits = await exec.run({ numTokens, seqs, logitRows, ...(hiddenRows.length > 0 ? { hiddenRows } : {}) });
      } finally {
        pool.unlend(lent);
      }
      // 4. Stamp what was written.
      for (let i = 0; i < items.length; i++) if (results[i] === undefined) this.#stampWritten(items[i]!);
      // 5. Results.
      const V = this.#logitWidth;
      let row = 0;
      for (const { i, rows } of logitItems) {
        // An embedding item's row holds its hidden state in the first hiddenSize floats (forward/llama.ts).
        const width = items[i]!.hiddenOut === true ? config.hiddenSize : rows * V;
        results[i] = { kind: 'logits', rid: items[i]!.rid, logits: logits.subarray(row * V, row * V + width), rows };
        row += rows;
      }
      for (let i = 0; i < items.length; i++) results[i] ??= { kind: 'computed', rid: items[i]!.rid };
    }
    this.#numSteps++;
    this.#numTokens += numTokens;
    return results as ItemResult[];
  }

  /** The page checks of one item; the PageCheckError when one fails. */
  #check(item: BatchItem, end: number): PageCheckError | undefined {
    const who = { rid: item.rid, tenant: item.tenant };
    const pageSize = this.pool.pageSize;
    try {
      this.pool.checkWrite(who, item.tags.slice(Math.floor(item.startPos / pageSize), Math.ceil(end / pageSize)));
      this.pool.checkRead(who, item.tags, item.startPos);
      return undefined;
    } catch (error) {
      if (!isPageCheckError(error)) throw error;
      this.#numPageCheckFailures++;
      return error;
    }
  }

  /** Stamps each page that received slots: filled from slot 0 up to the item's end. */
  #stampWritten(item: BatchItem): void {
    const pageSize = this.pool.pageSize;
    const end = item.startPos + item.tokens.length;
    for (let p = Math.floor(item.startPos / pageSize); p * pageSize < end; p++) {
      this.pool.stamp(item.tags[p] as Tag, Math.min(pageSize, end - p * pageSize));
    }
  }
}
