// What a request's output must be, when it asks for structured output: plain data that travels
// from the API through the router and the transfer protocol to whichever node samples, which
// builds its own matcher from it (src/grammar). Validated at the API edge.

/** The longest JSON schema (as canonical JSON text) a request may carry. */
export const MAX_SCHEMA_CHARS = 64 * 1024;

export type ConstraintSpec =
  /** Any JSON object (OpenAI's `response_format: {type: "json_object"}`). */
  | { readonly kind: 'json_object' }
  /** JSON valid against this schema (JSON text). Enforced strictly: no properties the schema does not name. */
  | { readonly kind: 'json_schema'; readonly schema: string };

/** One stable string per spec: the compile-cache key. */
export function constraintKey(spec: ConstraintSpec): string {
  switch (spec.kind) {
    case 'json_object':
      return 'json_object';
    case 'json_schema':
      return `json_schema:${spec.schema}`;
  }
}
