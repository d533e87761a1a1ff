import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { LoginFlow } from '../../../src/auth/login.js';
import { systemClock } from '../../../src/clock.js';
import { checkConfig } from '../../../src/config/validate.js';
import { silentLogger, type Logger } from '../../../src/log.js';
import { MemorySessionStore } from '../../../src/stores/sessions/memory-session-store.js';
import { MAX_NOTED_USER_AGENT, type SessionDevice } from '../../../src/stores/sessions/session-store.js';
import { StoreUnavailableError } from '../../../src/stores/store-contracts.js';

const base = {
  users: { htpasswd: 'u' },
  tokens: { signing: { alg: 'HS256', secret: 'x'.repeat(40) } },
  upstreams: { up: { url: 'http://127.0.0.1:1' } },
  routes: [{ path: '/app', upstream: 'up', login: true }],
};

function flowWith(store: MemorySessionStore, log: Logger = silentLogger): LoginFlow {
  const checked = checkConfig({ ...base, login: { local: true } }, '', '/tmp');
  expect(checked.problems).toEqual([]);
  return new LoginFlow(checked.config.login!, [], store, randomBytes(32), systemClock, log);
}

/** A store whose device notes are unreachable (the sessions themselves answer). */
class NotesDown extends MemorySessionStore {
  override async noteSessionDevice(): Promise<void> {
    throw new StoreUnavailableError(new Error('down'));
  }

  override async sessionDevices(): Promise<Map<string, SessionDevice>> {
    throw new StoreUnavailableError(new Error('down'));
  }
}

describe('the device a browser session was signed in from', () => {
  it('is noted at sign-in (the User-Agent cut to its limit) and listed with the user\'s sessions; a token session has none', async () => {
    const store = new MemorySessionStore(systemClock);
    const flow = flowWith(store);
    await flow.signInLocal('ann', 'v1', { address: '192.0.2.1', userAgent: `Mozilla/5.0 ${'x'.repeat(1000)}` });
    await flow.signInLocal('ann', 'v1', { address: '192.0.2.2', userAgent: undefined });
    const token = await store.createSession({ sub: 'ann', uv: 'v1' }, 60);
    const listed = await flow.sessionsOf('ann');
    expect(listed.map((s) => s.device)).toEqual([
      { address: '192.0.2.1', userAgent: `Mozilla/5.0 ${'x'.repeat(1000)}`.slice(0, MAX_NOTED_USER_AGENT) },
      { address: '192.0.2.2', userAgent: '' },
      undefined,
    ]);
    expect(listed[2]!.sid).toBe(token);
    await store.close();
  });

  it('fails no sign-in when the note cannot be written, nor the list when notes cannot be read (logged at debug)', async () => {
    const store = new NotesDown(systemClock);
    const debug: string[] = [];
    const flow = flowWith(store, { ...silentLogger, debug: (msg) => debug.push(msg) });
    const cookie = await flow.signInLocal('ann', 'v1', { address: '192.0.2.1', userAgent: 'curl/8' });
    expect(cookie).not.toBe('');
    const listed = await flow.sessionsOf('ann');
    expect(listed).toHaveLength(1);
    expect(listed[0]!.device).toBeUndefined();
    expect(debug).toEqual([expect.stringContaining('not noted'), expect.stringContaining('not read')]);
    await store.close();
  });
});
