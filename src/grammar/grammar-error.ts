// GrammarError: a structured output that failed after its request was accepted (its grammar
// thread stopped, or a token the grammar refuses). The request's own failure, never a 400.
import { TesseraError } from '../core/index.js';

export class GrammarError extends TesseraError {
  override name = 'GrammarError' as const;
  constructor(message: string, cause?: unknown) {
    super('internal', `structured output: ${message}`, { cause });
  }
}
