import { describe, expect, it } from 'vitest';
import { RateLanes, type TakeMany } from '../../src/stores/counters/rate-lanes.js';
import type { RateDecision } from '../../src/stores/counters/counter-store.js';

/** A store that answers when told to: each command's n and a way to settle it. */
function store() {
  const sent: Array<{ key: string; limit: number; n: number; answer(): void; fail(err: Error): void }> = [];
  const send: TakeMany = (key, limit, _window, n) => new Promise<RateDecision[]>((resolve, reject) => {
    sent.push({
      key,
      limit,
      n,
      answer: () => resolve(Array.from({ length: n }, (_, i) => ({ allowed: true, remaining: i, resetSeconds: 1, retryAfterSeconds: 0 }))),
      fail: reject,
    });
  });
  return { sent, send };
}

const turn = () => new Promise((r) => setImmediate(r));

describe('RateLanes', () => {
  it('sends a take of an idle bucket at once and the takes that came meanwhile as one command, in order', async () => {
    const s = store();
    const lanes = new RateLanes(s.send);
    const first = lanes.take('a', 10, 60);
    const rest = [lanes.take('a', 10, 60), lanes.take('a', 10, 60), lanes.take('a', 10, 60)];
    expect(s.sent.map((c) => c.n)).toEqual([1]);
    s.sent[0]!.answer();
    expect((await first).remaining).toBe(0);
    await turn();
    expect(s.sent.map((c) => c.n)).toEqual([1, 3]);
    s.sent[1]!.answer();
    expect((await Promise.all(rest)).map((d) => d.remaining)).toEqual([0, 1, 2]);
    await turn();
    expect(lanes.busy).toBe(0);
  });

  it('keeps buckets apart', async () => {
    const s = store();
    const lanes = new RateLanes(s.send);
    const taken = [lanes.take('a', 10, 60), lanes.take('b', 10, 60), lanes.take('a', 10, 60)];
    expect(s.sent.map((c) => [c.key, c.n])).toEqual([['a', 1], ['b', 1]]);
    for (const c of s.sent.slice()) c.answer();
    await turn();
    expect(s.sent.map((c) => [c.key, c.n])).toEqual([['a', 1], ['b', 1], ['a', 1]]);
    s.sent[2]!.answer();
    await Promise.all(taken);
    await turn();
    expect(lanes.busy).toBe(0);
  });

  it('sends every take that waited in the next command, however many (the script does the same work for any number)', async () => {
    const s = store();
    const lanes = new RateLanes(s.send);
    const taken = [lanes.take('a', 1000, 60)];
    for (let i = 0; i < 1000; i++) taken.push(lanes.take('a', 1000, 60));
    s.sent[0]!.answer();
    await turn();
    s.sent[1]!.answer();
    expect(s.sent.map((c) => c.n)).toEqual([1, 1000]);
    expect(await Promise.all(taken)).toHaveLength(1001);
  });

  it('fails the takes waiting behind a failed command at once, without sending them', async () => {
    const s = store();
    const lanes = new RateLanes(s.send);
    const taken = [lanes.take('a', 10, 60), lanes.take('a', 10, 60), lanes.take('a', 10, 60)].map((p) => p.then(() => 'ok', (e: Error) => e.message));
    s.sent[0]!.fail(new Error('down'));
    expect(await Promise.all(taken)).toEqual(['down', 'down', 'down']);
    expect(s.sent).toHaveLength(1);
    expect(lanes.busy).toBe(0);
    // The bucket opens again with the next take.
    const again = lanes.take('a', 10, 60);
    expect(s.sent).toHaveLength(2);
    s.sent[1]!.answer();
    expect((await again).allowed).toBe(true);
  });

  it('fails a batch whose own command failed, and the takes that came after it', async () => {
    const s = store();
    const lanes = new RateLanes(s.send);
    const first = lanes.take('a', 10, 60);
    const second = lanes.take('a', 10, 60).catch((e: Error) => e.message);
    s.sent[0]!.answer();
    await first;
    await turn();
    const third = lanes.take('a', 10, 60).catch((e: Error) => e.message);
    s.sent[1]!.fail(new Error('down'));
    expect([await second, await third]).toEqual(['down', 'down']);
    expect(s.sent).toHaveLength(2);
    expect(lanes.busy).toBe(0);
  });

  it('sends a take whose rule differs from the waiting ones (a reload) on its own', async () => {
    const s = store();
    const lanes = new RateLanes(s.send);
    const taken = [lanes.take('a', 10, 60), lanes.take('a', 20, 60), lanes.take('a', 10, 60)];
    expect(s.sent.map((c) => [c.limit, c.n])).toEqual([[10, 1], [20, 1]]);
    for (const c of s.sent.slice()) c.answer();
    await turn();
    // The one that matched the lane's rule waited for the lane's command, and goes under that rule.
    expect(s.sent.map((c) => [c.limit, c.n])).toEqual([[10, 1], [20, 1], [10, 1]]);
    s.sent[2]!.answer();
    await Promise.all(taken);
    await turn();
    expect(lanes.busy).toBe(0);
  });
});
