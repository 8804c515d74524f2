// What a reasoning parser gives for each piece of answer text, and the streamed splitter's
// interface: the `<think>` parsers (reasoning.ts) and harmony's (reasoning-harmony.ts) implement it.
// Types only.

/**
 * What one piece of answer text became. Content may hold Hermes `<tool_call>` blocks (the harmony
 * parser writes its tool calls so), which the request's ToolPlan turns into calls (tool-output.ts).
 */
export interface ReasoningPiece {
  readonly reasoning: string;
  readonly content: string;
}

/** One answer's splitter, streamed: the `<think>` parsers' or harmony's. */
export interface AnswerSplitter {
  readonly sawReasoning: boolean;
  push(text: string): ReasoningPiece;
  end(): ReasoningPiece;
}
