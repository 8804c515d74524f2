// Test support: a ColocatedWorker over a test's own pool and runner, with the settings the engine's
// unit tests share (context 64, prefill chunks of 8, 16 waiting, integrity checked after every
// step, ids detokenized as `<id>`, no EOS). Must never be wired into a server.
import { NO_FAULTS } from '../../core/index.js';
import { Sampler } from '../../engine/index.js';
import { ColocatedWorker, type ColocatedWorkerOptions } from '../colocated.js';

export function idWorker(
  parts: Pick<ColocatedWorkerOptions, 'pool' | 'runner'> & { readonly vocabSize: number },
  options: Partial<ColocatedWorkerOptions> = {},
): ColocatedWorker {
  return new ColocatedWorker({
    modelName: 'tiny',
    root: 'tiny',
    contextLength: 64,
    pool: parts.pool,
    runner: parts.runner,
    sampler: new Sampler(parts.vocabSize),
    tokenizer: { createDetokenizer: () => ({ push: (id: number) => `<${id}>`, flush: () => '' }) },
    eosTokenIds: [],
    maxRunningRequests: 4,
    chunkedPrefillSize: 8,
    maxWaiting: 16,
    faults: NO_FAULTS,
    checkEveryStep: true,
    ...options,
  });
}
