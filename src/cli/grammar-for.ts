// The agent-facing options of a front end: the structured-output engine of one loaded model (its tokenizer's vocabulary, its logits'
// width): built at start-up, compiled lazily on the first constrained request.
import { ConfigError, NO_FAULTS, type FaultSet } from '../core/index.js';
import { GrammarEngine, grammarVocab } from '../grammar/index.js';
import type { LoadedModel } from '../model/index.js';

export function grammarFor(
  model: Pick<LoadedModel, 'tokenizer' | 'config'>,
  faults: FaultSet = NO_FAULTS,
): GrammarEngine {
  return new GrammarEngine(grammarVocab(model.tokenizer, model.config.vocabSize), { faults });
}

/** --cors-origin, when given (a non-empty origin or *). */
export function corsOption(flags: object): { readonly corsOrigin?: string } {
  const origin = (flags as { readonly corsOrigin?: unknown }).corsOrigin;
  if (origin === undefined) return {};
  if (typeof origin !== 'string' || origin.trim() === '' || /[\r\n]/.test(origin))
    throw new ConfigError('--cors-origin must be an origin such as https://app.example or *');
  return { corsOrigin: origin };
}
