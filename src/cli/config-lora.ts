// --lora NAME=PATH[@TENANT,TENANT...] (repeatable) -> the adapters a serving engine loads at start.
// With tenants, only those tenants (as the --api-keys file names them) see and use the adapter.
// Must never: accept a name a request could not address (`model` is `<served>:<name>` or `<name>`).
import { ConfigError } from '../core/index.js';

export interface LoraFlag {
  readonly name: string;
  readonly path: string;
  /** null: every tenant. */
  readonly tenants: readonly string[] | null;
}

export const LORA_HELP =
  'a LoRA adapter (GGUF in llama.cpp layout, or a PEFT directory) served as model "<served>:NAME" or "NAME"; @TENANT,... restricts it ' +
  'to those tenants of --api-keys (repeat for more)';

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export function parseLoraFlags(values: readonly string[]): LoraFlag[] {
  const out: LoraFlag[] = [];
  for (const value of values) {
    const eq = value.indexOf('=');
    const name = value.slice(0, Math.max(eq, 0));
    if (eq <= 0 || !NAME.test(name))
      throw new ConfigError(`--lora must be NAME=PATH[@TENANT,...] with NAME of [A-Za-z0-9._-], got "${value}"`);
    const rest = value.slice(eq + 1);
    const at = rest.lastIndexOf('@');
    const path = at < 0 ? rest : rest.slice(0, at);
    const tenants =
      at < 0
        ? null
        : rest
            .slice(at + 1)
            .split(',')
            .filter((t) => t.length > 0);
    if (path.length === 0 || (tenants !== null && tenants.length === 0))
      throw new ConfigError(`--lora ${name}: a path is needed, and @ needs at least one tenant, got "${value}"`);
    if (out.some((f) => f.name === name)) throw new ConfigError(`--lora ${name} is given twice`);
    out.push({ name, path, tenants });
  }
  return out;
}
