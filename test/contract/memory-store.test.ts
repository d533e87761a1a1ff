import { afterAll } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { MemoryCounters } from '../../src/stores/counters/memory-counters.js';
import { MemorySessionStore } from '../../src/stores/sessions/memory-session-store.js';
import { counterStoreContract } from './counter-store.js';
import { sessionStoreContract } from './session-store.js';

const clock = new ManualClock();
const store = new MemorySessionStore(clock);
const counters = new MemoryCounters(clock);
afterAll(async () => {
  await store.close();
  await counters.close();
});

const harness = { fastForward: async (ms: number) => clock.advance(ms), now: () => clock.now() };
sessionStoreContract('memory', { ...harness, store: () => store });
counterStoreContract('memory', { ...harness, store: () => counters });
