// The validator every structured-output property checks against: ajv in strict mode with
// ajv-formats (full mode), as a client such as openai's `parse` or pydantic would check.
import { Ajv, type ValidateFunction } from 'ajv';
import formatsModule from 'ajv-formats';

type AddFormats = (ajv: Ajv) => Ajv;
const addFormats = ((formatsModule as unknown as { default?: AddFormats }).default ??
  (formatsModule as unknown as AddFormats)) as AddFormats;

export function strictAjv(): Ajv {
  return addFormats(new Ajv({ strict: true, allErrors: false }));
}

/** Whether `text` is JSON that `validate` accepts. */
export function validJson(validate: ValidateFunction, text: string): boolean {
  try {
    return validate(JSON.parse(text)) === true;
  } catch {
    return false;
  }
}
