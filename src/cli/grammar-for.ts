// The structured-output engine of one loaded model (its tokenizer's vocabulary, its logits'
// width): built at start-up, compiled lazily on the first constrained request.
import { GrammarEngine, grammarVocab } from '../grammar/index.js';
import type { LoadedModel } from '../model/index.js';

export function grammarFor(model: Pick<LoadedModel, 'tokenizer' | 'config'>): GrammarEngine {
  return new GrammarEngine(grammarVocab(model.tokenizer, model.config.vocabSize));
}
