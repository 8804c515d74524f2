// The conformance checker between src/transfer and the model (spec/tessera.pml): its API.
export { checkTrace, type CheckOptions, type CheckResult } from './check.js';
export { modelTrace, modelWriterOf, parseModelLine, nodeName, ridName } from './model-trace.js';
export { EDGES, MESSAGES, PAGE_ACTIONS, PAGE_STATES, ROLES, SENDS, STATES, TERMINAL, isEdge } from './tables.js';
