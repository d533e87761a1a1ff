import { describe, expect, it } from 'vitest';
import type { CounterStore } from '../../src/stores/counters/counter-store.js';
import type { StoreHarness } from './session-store.js';

let n = 0;
const id = () => `key${String(++n).padStart(12, '0')}-${Math.random().toString(36).slice(2, 8)}`;

/** One contract, every counter store (memory; Redis on one node, Sentinel and Cluster). */
export function counterStoreContract(name: string, h: StoreHarness<CounterStore>): void {
  describe(`CounterStore contract: ${name}`, () => {
    it('counts hits in a window, peeks, resets and expires counters', async () => {
      const key = `k:${id()}`;
      expect(await h.store().peek(key)).toEqual({ count: 0, resetSeconds: 0 });
      expect((await h.store().hit(key, 60)).count).toBe(1);
      const second = await h.store().hit(key, 60);
      expect(second.count).toBe(2);
      expect(second.resetSeconds).toBeGreaterThan(55);
      expect(second.resetSeconds).toBeLessThanOrEqual(60);
      expect((await h.store().peek(key)).count).toBe(2);
      await h.store().reset(key);
      expect((await h.store().peek(key)).count).toBe(0);
      await h.store().hit(key, 1);
      await h.fastForward(1100);
      expect((await h.store().peek(key)).count).toBe(0);
    });

    it('resets several counters at once, in any slot', async () => {
      const keys = [`k:${id()}`, `k:${id()}`, `k:${id()}`];
      for (const key of keys) await h.store().hit(key, 60);
      await h.store().reset(...keys);
      for (const key of keys) expect((await h.store().peek(key)).count).toBe(0);
    });

    it('clears every counter of a group at once, also ones it was never told the name of; not other groups; counting starts again', async () => {
      const group = `g:${id()}`;
      const other = `g:${id()}`;
      const members = [{ group, key: 'a' }, { group, key: 'b' }];
      for (const key of members) {
        await h.store().hit(key, 60);
        await h.store().hit(key, 60);
      }
      await h.store().hit({ group: other, key: 'a' }, 60);
      await h.fastForward(2);
      await h.store().resetGroup(group, 60);
      for (const key of members) expect(await h.store().peek(key)).toEqual({ count: 0, resetSeconds: 0 });
      expect((await h.store().peek({ group: other, key: 'a' })).count).toBe(1);
      await h.fastForward(2);
      const again = await h.store().hit(members[0]!, 60);
      expect(again.count).toBe(1);
      expect(again.resetSeconds).toBeGreaterThan(55);
      expect((await h.store().hit(members[0]!, 60)).count).toBe(2);
      // A single reset of a group member works too.
      await h.store().reset(members[0]!);
      expect((await h.store().peek(members[0]!)).count).toBe(0);
    });

    it('rate-limits with GCRA: a burst of limit, then refusals with Retry-After, then refill', async () => {
      const key = `r:${id()}`;
      const taken = [];
      for (let i = 0; i < 4; i++) taken.push(await h.store().take(key, 3, 60));
      expect(taken.map((d) => d.allowed)).toEqual([true, true, true, false]);
      expect(taken.map((d) => d.remaining)).toEqual([2, 1, 0, 0]);
      expect(taken[3]!.retryAfterSeconds).toBeGreaterThanOrEqual(19);
      expect(taken[3]!.retryAfterSeconds).toBeLessThanOrEqual(20);
      expect(taken[2]!.resetSeconds).toBe(60);

      const fast = `r:${id()}`;
      expect((await h.store().take(fast, 2, 1)).allowed).toBe(true);
      expect((await h.store().take(fast, 2, 1)).allowed).toBe(true);
      expect((await h.store().take(fast, 2, 1)).allowed).toBe(false);
      await h.fastForward(600);
      expect((await h.store().take(fast, 2, 1)).allowed).toBe(true);
    });

    it('never lets concurrent takes exceed the limit', async () => {
      const key = `r:${id()}`;
      const decisions = await Promise.all(Array.from({ length: 12 }, () => h.store().take(key, 5, 60)));
      expect(decisions.filter((d) => d.allowed)).toHaveLength(5);
    });

    it('answers concurrent takes as it would one at a time, in the order they were asked', async () => {
      const key = `r:${id()}`;
      const decisions = await Promise.all(Array.from({ length: 9 }, () => h.store().take(key, 6, 60)));
      expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, true, true, true, false, false, false]);
      expect(decisions.map((d) => d.remaining)).toEqual([5, 4, 3, 2, 1, 0, 0, 0, 0]);
      expect(decisions.slice(0, 6).map((d) => d.retryAfterSeconds)).toEqual([0, 0, 0, 0, 0, 0]);
      for (const refused of decisions.slice(6)) {
        expect(refused.retryAfterSeconds).toBeGreaterThanOrEqual(9);
        expect(refused.retryAfterSeconds).toBeLessThanOrEqual(10);
        expect(refused.resetSeconds).toBe(60);
      }
      // The bucket stays as the sixth take left it.
      expect((await h.store().take(key, 6, 60)).allowed).toBe(false);
    });

    it('lets exactly the limit through when the limit does not divide the window (7 in 60 s), concurrent or not', async () => {
      const key = `r:${id()}`;
      const decisions = await Promise.all(Array.from({ length: 9 }, () => h.store().take(key, 7, 60)));
      expect(decisions.map((d) => d.allowed)).toEqual([true, true, true, true, true, true, true, false, false]);
      expect(decisions.map((d) => d.remaining)).toEqual([6, 5, 4, 3, 2, 1, 0, 0, 0]);
      expect(decisions[6]!.resetSeconds).toBe(60);
      for (const refused of decisions.slice(7)) expect(refused.retryAfterSeconds).toBeGreaterThanOrEqual(1);
      const alone = `r:${id()}`;
      const oneByOne = [];
      for (let i = 0; i < 8; i++) oneByOne.push((await h.store().take(alone, 7, 60)).allowed);
      expect(oneByOne).toEqual([true, true, true, true, true, true, true, false]);
    });

    it('never tells a refused take to retry in 0 s, also when the bucket frees within the second', async () => {
      const key = `r:${id()}`;
      for (let i = 0; i < 40; i++) {
        const d = await h.store().take(key, 30, 1);
        if (!d.allowed) expect(d.retryAfterSeconds).toBeGreaterThanOrEqual(1);
      }
    });

    it('forgets a rate bucket with reset, as it forgets a counter of the same name', async () => {
      const key = `lock:a:${id()}`;
      expect((await h.store().take(key, 2, 60)).allowed).toBe(true);
      expect((await h.store().take(key, 2, 60)).allowed).toBe(true);
      expect((await h.store().take(key, 2, 60)).allowed).toBe(false);
      await h.store().reset(key);
      expect((await h.store().take(key, 2, 60)).remaining).toBe(1);
    });
  });
}
