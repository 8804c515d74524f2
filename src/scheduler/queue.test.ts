import { describe, expect, it } from 'vitest';
import { asRequestId, asTenantId } from '../core/index.js';
import { TenantQueues, type Queued } from './queue.js';

const q = (rid: string, tenant: string): Queued => ({ rid: asRequestId(rid), tenant: asTenantId(tenant) });
const drain = (queues: TenantQueues<Queued>): string[] => {
  const order: string[] = [];
  while (queues.size > 0) order.push(queues.pop().rid);
  return order;
};

describe('TenantQueues', () => {
  it('serves tenants in turn, and each tenant first come first served', () => {
    const queues = new TenantQueues<Queued>();
    for (const [rid, tenant] of [
      ['a1', 'A'],
      ['a2', 'A'],
      ['a3', 'A'],
      ['b1', 'B'],
      ['c1', 'C'],
      ['b2', 'B'],
    ] as const)
      queues.push(q(rid, tenant));
    expect(queues.toArray().map((x) => x.rid)).toEqual(['a1', 'b1', 'c1', 'a2', 'b2', 'a3']);
    expect(drain(queues)).toEqual(['a1', 'b1', 'c1', 'a2', 'b2', 'a3']);
    queues.checkIntegrity();
  });

  it('a tenant arriving later joins the turns at the back, ahead of nothing already owed', () => {
    const queues = new TenantQueues<Queued>();
    for (let i = 1; i <= 5; i++) queues.push(q(`a${i}`, 'A'));
    expect(queues.pop().rid).toBe('a1');
    queues.push(q('b1', 'B'));
    expect(drain(queues)).toEqual(['a2', 'b1', 'a3', 'a4', 'a5']);
  });

  it('a preempted request goes to the front of its tenant, and its tenant to the front of the turns when it had none', () => {
    const queues = new TenantQueues<Queued>();
    queues.push(q('a2', 'A'));
    queues.push(q('b1', 'B'));
    queues.pushFront(q('a1', 'A'));
    queues.pushFront(q('c0', 'C'));
    expect(drain(queues)).toEqual(['c0', 'a1', 'b1', 'a2']);
  });

  it('removes a request anywhere, dropping the turn of a tenant left with none', () => {
    const queues = new TenantQueues<Queued>();
    for (const [rid, tenant] of [
      ['a1', 'A'],
      ['b1', 'B'],
      ['a2', 'A'],
    ] as const)
      queues.push(q(rid, tenant));
    expect(queues.remove(asRequestId('b1'))).toBe(true);
    expect(queues.remove(asRequestId('b1'))).toBe(false);
    queues.checkIntegrity();
    expect(queues.peek()?.rid).toBe('a1');
    expect(drain(queues)).toEqual(['a1', 'a2']);
    expect(queues.peek()).toBeUndefined();
  });
});
