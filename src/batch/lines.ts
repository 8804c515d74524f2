// A batch input file (JSONL) -> its request lines, each checked alone: OpenAI's line shape
// {"custom_id", "method": "POST", "url", "body"}, custom_id unique in the file, url one of the
// endpoints batches serve. A bad line is an error of that line (its 1-based number), never of
// the whole file. Pure: no I/O.

export const BATCH_ENDPOINTS = ['/v1/chat/completions', '/v1/completions'] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

/** Most lines one input file may hold (OpenAI's limit is 50,000 requests). */
export const MAX_BATCH_LINES = 50_000;

export interface RequestLine {
  /** 0-based index among the file's non-blank lines. */
  readonly index: number;
  /** 1-based line number in the file. */
  readonly line: number;
  readonly customId: string;
  readonly url: string;
  readonly body: Readonly<Record<string, unknown>>;
}

export interface LineError {
  readonly index: number;
  readonly line: number;
  /** null when the line had none (or was not JSON). */
  readonly customId: string | null;
  readonly code: string;
  readonly message: string;
  readonly param: string | null;
}

export interface ParsedLines {
  readonly lines: readonly RequestLine[];
  readonly errors: readonly LineError[];
  /** Non-blank lines, good and bad. */
  readonly total: number;
}

export function parseBatchLines(text: string): ParsedLines {
  const lines: RequestLine[] = [];
  const errors: LineError[] = [];
  const seen = new Set<string>();
  let index = 0;
  text.split('\n').forEach((raw, i) => {
    if (raw.trim() === '') return;
    const at = { index: index++, line: i + 1 };
    const bad = (code: string, message: string, param: string | null, customId: string | null = null): void =>
      void errors.push({ ...at, customId, code, message, param });
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch {
      return bad('invalid_json', `Line ${at.line} is not valid JSON.`, null);
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value))
      return bad('invalid_request', `Line ${at.line} must be a JSON object.`, null);
    const v = value as Record<string, unknown>;
    const customId = typeof v['custom_id'] === 'string' ? v['custom_id'] : null;
    if (customId === null || customId === '')
      return bad('missing_required_parameter', `Line ${at.line} has no string custom_id.`, 'custom_id');
    if (seen.has(customId))
      return bad(
        'duplicate_custom_id',
        `The custom_id ${JSON.stringify(customId)} is used twice.`,
        'custom_id',
        customId,
      );
    seen.add(customId);
    if (v['method'] !== 'POST')
      return bad('invalid_request', `Line ${at.line}: method must be "POST".`, 'method', customId);
    const url = v['url'];
    if (typeof url !== 'string' || !(BATCH_ENDPOINTS as readonly string[]).includes(url))
      return bad('invalid_url', `Line ${at.line}: url must be one of ${BATCH_ENDPOINTS.join(', ')}.`, 'url', customId);
    const body = v['body'];
    if (typeof body !== 'object' || body === null || Array.isArray(body))
      return bad('invalid_request', `Line ${at.line}: body must be a JSON object.`, 'body', customId);
    if ((body as Record<string, unknown>)['stream'] === true)
      return bad('invalid_request', `Line ${at.line}: a batch request cannot stream.`, 'body.stream', customId);
    lines.push({ ...at, customId, url, body: body as Record<string, unknown> });
  });
  return { lines, errors, total: index };
}
