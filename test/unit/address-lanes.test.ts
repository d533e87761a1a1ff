import { describe, expect, it } from 'vitest';
import { AddressLanes, MAX_WAITING } from '../../src/credentials/address-lanes.js';

/** Work that runs until released; records how many ran at once. */
function harness() {
  let running = 0;
  let peak = 0;
  const releases: Array<() => void> = [];
  const work = () => new Promise<void>((resolve) => {
    running++;
    peak = Math.max(peak, running);
    releases.push(() => {
      running--;
      resolve();
    });
  });
  const tick = () => new Promise((r) => setImmediate(r));
  return { work, releases, tick, running: () => running, peak: () => peak };
}

describe('AddressLanes', () => {
  it('lets a clean address run up to its width at once, and queues the rest', async () => {
    const lanes = new AddressLanes(3, 1000);
    const h = harness();
    const all = Array.from({ length: 5 }, () => lanes.run('10.0.0.1', h.work));
    await h.tick();
    expect(h.running()).toBe(3);
    h.releases.shift()!();
    await h.tick();
    expect(h.running()).toBe(3);
    while (h.releases.length > 0) {
      h.releases.shift()!();
      await h.tick();
    }
    await Promise.all(all);
    expect(h.peak()).toBe(3);
  });

  it('runs a failing address one at a time until the failure is narrowForMs old, other addresses unaffected', async () => {
    let now = 0;
    const lanes = new AddressLanes(3, 1000, () => now);
    const h = harness();
    const first = lanes.run('10.0.0.1', h.work);
    await h.tick();
    lanes.failed('10.0.0.1');
    h.releases.shift()!();
    await first;
    const queued = Array.from({ length: 3 }, () => lanes.run('10.0.0.1', h.work));
    const other = Array.from({ length: 2 }, () => lanes.run('10.0.0.2', h.work));
    await h.tick();
    // One for the failing address, two for the clean one.
    expect(h.running()).toBe(3);
    now = 1001;
    while (h.releases.length > 0) {
      h.releases.shift()!();
      await h.tick();
    }
    await Promise.all([...queued, ...other]);
    // Past narrowForMs the address is clean again.
    const again = Array.from({ length: 3 }, () => lanes.run('10.0.0.1', h.work));
    await h.tick();
    expect(h.running()).toBe(3);
    for (const release of h.releases.splice(0)) release();
    await Promise.all(again);
  });

  it('passes a failure of the work on and frees its place', async () => {
    const lanes = new AddressLanes(1, 1000);
    await expect(lanes.run('10.0.0.1', () => Promise.reject(new Error('wrong password')))).rejects.toThrow('wrong password');
    await expect(lanes.run('10.0.0.1', async () => 'next')).resolves.toBe('next');
  });
});

describe('AddressLanes limits', () => {
  it('refuses with 429 once MAX_WAITING checks of one address wait, without queueing them', async () => {
    const lanes = new AddressLanes(1, 1000);
    let release!: () => void;
    const first = lanes.run('10.0.0.9', () => new Promise<void>((r) => (release = r)));
    const waiting = Array.from({ length: MAX_WAITING }, () => lanes.run('10.0.0.9', async () => 'ran'));
    await expect(lanes.run('10.0.0.9', async () => 'ran')).rejects.toMatchObject({ code: 'too_many_attempts', retryAfterSeconds: 1 });
    release();
    await first;
    expect(await Promise.all(waiting)).toEqual(Array(MAX_WAITING).fill('ran'));
  });
});
