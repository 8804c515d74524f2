// The Responses API's output items follow the response's status: an answer cut by the length
// limit is an "incomplete" response whose items are "incomplete" too (issue 33: a cut forced
// call came back as an output_text item marked "completed" inside an incomplete response).
import { describe, expect, it } from 'vitest';
import { outputItems, ResponseEvents, responseStatus } from './responses-shapes.js';

const itemStatuses = (items: readonly object[]) => items.map((i) => (i as { status: string }).status);

describe('Responses output items and the response status', () => {
  it('a whole answer cut by the length limit has only incomplete items; a finished one completed items', () => {
    expect(responseStatus('length')).toBe('incomplete');
    expect(itemStatuses(outputItems({ content: 'It was', calls: [], finishReason: 'length' }))).toEqual(['incomplete']);
    expect(outputItems({ content: null, calls: [], finishReason: 'length' })).toEqual([]);
    const call = { id: 'call_1', name: 'weather', arguments: '{"ci' };
    expect(itemStatuses(outputItems({ content: null, calls: [call], finishReason: 'length' }))).toEqual(['incomplete']);
    expect(itemStatuses(outputItems({ content: 'Hi', calls: [], finishReason: 'stop' }))).toEqual(['completed']);
  });

  it('streamed: finish("incomplete") closes the open item as incomplete, and adds no empty message', () => {
    const cut = new ResponseEvents();
    cut.delta({ tool_calls: [{ index: 0, id: 'call_1', function: { name: 'weather', arguments: '{"ci' } }] });
    cut.finish('incomplete');
    expect(itemStatuses(cut.items)).toEqual(['incomplete']);
    const empty = new ResponseEvents();
    expect(empty.finish('incomplete')).toEqual([]);
    expect(empty.items).toEqual([]);
    const done = new ResponseEvents();
    done.finish('completed');
    expect(itemStatuses(done.items)).toEqual(['completed']);
  });
});
