import { afterAll } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { MemoryTokenStore } from '../../src/tokens/store/memory.js';
import { tokenStoreContract } from './token-store.js';

const clock = new ManualClock();
const store = new MemoryTokenStore(clock);
afterAll(() => store.close());

tokenStoreContract('memory', {
  store: () => store,
  fastForward: async (ms) => clock.advance(ms),
  now: () => clock.now(),
});
