// The engine thread (a worker_thread; see engine-thread.ts for the other side and the ownership
// rule). It owns the weights, the kernels and the activations, and runs one forward pass at a
// time on the batch it is sent, over KV storage in its wasm memory, which it shares with the
// main thread at start-up. It must never check, stamp or allocate a page (the main thread's
// ledger and stamps decide, before it is sent a step), touch a page outside the step's page
// tables, or start a step before the previous one returned.
//
//   main -> thread   { kind: 'step', numTokens, seqs, logitRows } (token ids and positions are in
//                    workerData's shared stepInput, written before the message)
//   thread -> main   { kind: 'ready', kv, kvByteOffset, kvLength (elements), logits (shared), ... }
//                    once, then per step { kind: 'done' } (the logits written into the shared
//                    buffer first) | { kind: 'failed', message }
import { parentPort, workerData } from 'node:worker_threads';
import { assert } from '../core/index.js';
import { allocateActivations } from './activations.js';
import { createKernels, nativeLoraRows, releaseMappedPages } from '../kernels/index.js';
import { allocKvView, engineKernels } from './engine.js';
import {
  stepInputViews,
  type EngineThreadData,
  type EngineThreadReply,
  type EngineThreadStep,
  type LoraCommand,
} from './engine-thread.js';
import { modelFingerprint, loadModel } from '../model/index.js';
import type { ForwardModel } from './forward/llama.js';
import { forwardFor } from './forward/arch.js';
import { LoraBank } from './lora.js';
import { loadLoraInto } from './lora-control.js';
import { ropeTable } from '../formats/index.js';
import { denseOutputAlloc } from './runner.js';
import { prepareWeights } from './weights-prepared.js';
import { restrictHead } from './draft-head.js';

async function main(): Promise<void> {
  const port = parentPort;
  assert(port !== null, 'engine-thread-main.ts runs as a worker thread');
  const data = workerData as EngineThreadData;
  const started = performance.now();
  // Mapped here, in the thread that reads the weights: a mapping's ArrayBuffer cannot be transferred.
  const model = await loadModel(data.spec, { cacheDir: data.cacheDir, weights: data.weights });
  const { config } = model;
  const { dense, ops } = await createKernels(data.kernels, data.threads);
  // A draft model's head cut to some tokens (draft-head.ts): only those rows of the output matrix.
  const served = data.headTokens === undefined ? model : restrictHead(model, data.headTokens).model;
  const weights = await prepareWeights(served.config, served.tensors, dense, ops);
  const fingerprint = modelFingerprint(model);
  // Mapped: every other matrix now lives repacked in the kernels' memory; the file's pages leave
  // this process's RSS (they stay in the page cache; an embedding row or an expert used in place,
  // kernels/native/experts.c, read later faults back in).
  for (const buffer of model.mappedBuffers) releaseMappedPages(buffer);
  const shape = {
    numPages: data.kvPages,
    pageSize: data.pageSize,
    numLayers: config.numLayers,
    numKvHeads: config.numKvHeads,
    headDim: config.headDim,
    dtype: data.kvDtype,
  };
  const kvView = allocKvView(ops, shape);
  const kv = kvView.data;
  assert(
    kv.buffer instanceof SharedArrayBuffer,
    'the engine thread needs KV storage in shared memory (the wasm op kernels)',
  );
  const act = allocateActivations(config, data.maxStepTokens, data.maxStepLogits, denseOutputAlloc(dense, ops), (n) =>
    ops.allocF32(n),
  );
  const logits = new SharedArrayBuffer(data.maxStepLogits * config.vocabSize * Float32Array.BYTES_PER_ELEMENT);
  const sharedLogits = new Float32Array(logits);
  const stepInput = stepInputViews(data);
  const lora = new LoraBank(config, dense.name === 'native' ? nativeLoraRows() : null);
  const fm: ForwardModel = { config, weights, rope: ropeTable(config), dense, ops, kv: kvView, lora };
  /** Unloads wait for the step in flight (a step may read the adapter until it returns). */
  let stepInFlight = false;
  const unloads: string[] = [];
  const answer = (reply: EngineThreadReply): void => port.postMessage(reply);
  const ready: EngineThreadReply = {
    kind: 'ready',
    kv: kv.buffer,
    kvByteOffset: kv.byteOffset,
    kvLength: kv.length,
    config,
    fingerprint,
    kernels: engineKernels(data.kernels, dense, ops, data.threads),
    prepareMs: performance.now() - started,
    weightBytesPerToken: weights.bytesPerToken,
    weightBytes: weights.bytes,
    weightsFile: { how: model.source.weights, fellBack: model.source.weightsFellBack },
    logits,
  };
  port.postMessage(ready);
  // One step at a time: the main thread sends the next only after this one's reply.
  port.on('message', (m: EngineThreadStep | LoraCommand | { kind: 'close' }) => {
    if (m.kind === 'close') {
      void dense.dispose().then(() => port.close());
      return;
    }
    if (m.kind === 'lora-load') {
      loadLoraInto(lora, config, m.name, m.path, m.scale).then(
        (digest) => answer({ kind: 'lora', digest }),
        (error: unknown) => answer({ kind: 'lora', error: error instanceof Error ? error.message : String(error) }),
      );
      return;
    }
    if (m.kind === 'lora-unload') {
      if (stepInFlight) unloads.push(m.name);
      else lora.delete(m.name);
      answer({ kind: 'lora' });
      return;
    }
    stepInFlight = true;
    const stepEnded = (): void => {
      stepInFlight = false;
      for (const name of unloads.splice(0)) lora.delete(name);
    };
    act.tokens.set(stepInput.tokens.subarray(0, m.numTokens));
    act.positions.set(stepInput.positions.subarray(0, m.numTokens));
    if (data.testStepDelayMs > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, data.testStepDelayMs);
    const hidden = m.hiddenRows === undefined ? {} : { hiddenRows: m.hiddenRows };
    forwardFor(config)(fm, { numTokens: m.numTokens, seqs: m.seqs, logitRows: m.logitRows, ...hidden }, act).then(
      (out) => {
        stepEnded();
        sharedLogits.set(out.subarray(0, m.logitRows.length * config.vocabSize));
        port.postMessage({ kind: 'done' } satisfies EngineThreadReply);
      },
      (error: unknown) => {
        stepEnded();
        port.postMessage({
          kind: 'failed',
          message: error instanceof Error ? (error.stack ?? error.message) : String(error),
        } satisfies EngineThreadReply);
      },
    );
  });
}

void main().catch((error: unknown) => {
  parentPort?.postMessage({
    kind: 'failed',
    message: error instanceof Error ? (error.stack ?? error.message) : String(error),
  } satisfies EngineThreadReply);
});
