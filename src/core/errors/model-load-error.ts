import { TesseraError } from './tessera-error.js';

/** A model file is missing, truncated, corrupt or inconsistent with its config. Names the file. */
export class ModelLoadError extends TesseraError {
  override name = 'ModelLoadError' as const;
  readonly file: string;
  constructor(file: string, problem: string, cause?: unknown) {
    super('model_load_failed', `${file}: ${problem}`, { cause });
    this.file = file;
  }
}

export const isModelLoadError = (e: unknown): e is ModelLoadError => e instanceof ModelLoadError;
