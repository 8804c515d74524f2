import { TesseraError } from './tessera-error.js';

/** Bad flags or configuration. The CLI prints the message and exits non-zero. */
export class ConfigError extends TesseraError {
  override name = 'ConfigError' as const;
  constructor(message: string, cause?: unknown) {
    super('config_invalid', message, { cause });
  }
}

export const isConfigError = (e: unknown): e is ConfigError => e instanceof ConfigError;
