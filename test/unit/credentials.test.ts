import { hashSync } from '../../src/credentials/bcrypt.js';
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { ConfigError } from '../../src/config/config-error.js';
import { Credentials } from '../../src/credentials/credentials.js';
import { parseHtpasswd } from '../../src/credentials/htpasswd.js';
import { Lockout, PAIR_RECHECK_MS } from '../../src/credentials/lockout.js';
import { PasswordCheck } from '../../src/credentials/password-check.js';
import { PasswordVerifier } from '../../src/credentials/password-verifier.js';
import { MemoryCounters } from '../../src/stores/counters/memory-counters.js';
import type { CounterKey, CounterStore } from '../../src/stores/counters/counter-store.js';
import { silentLogger } from '../../src/log.js';
import { htpasswd, TEST_COST } from '../support/fixtures.js';
import { waitUntil } from '../support/poll.js';

const hash = (pw: string, cost = TEST_COST) => hashSync(pw, { cost });

describe('htpasswd', () => {
  it('reads bcrypt entries of every accepted prefix, skipping comments and blank lines', () => {
    const h = hash('pw');
    const text = `# users\n\nalice:${h}\nbob:${h.replace('$2b$', '$2y$')}\ncarol:${h.replace('$2b$', '$2a$')}\n`;
    expect([...parseHtpasswd(text, 'users').keys()]).toEqual(['alice', 'bob', 'carol']);
  });

  it.each([
    ['MD5 (apr1)', 'alice:$apr1$abc$0123456789abcdefghijkl'],
    ['SHA1', 'alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g='],
    ['crypt', 'alice:rl0P3fMjzg2hw'],
    ['plain text', 'alice:password'],
    ['no colon', 'alice'],
  ])('refuses %s at start-up, naming the line', (_name, line) => {
    expect(() => parseHtpasswd(`# header\n${line}\n`, 'users.htpasswd')).toThrowError(ConfigError);
    try {
      parseHtpasswd(`# header\n${line}\n`, 'users.htpasswd');
    } catch (err) {
      expect((err as ConfigError).problems[0]).toMatch(/^users\.htpasswd:2 /);
    }
  });
});

describe('PasswordVerifier', () => {
  const users = new Map([['alice', hash('alice-pw')]]);

  it('accepts the right password, refuses a wrong one and an unknown user', async () => {
    const v = new PasswordVerifier(users, 60_000, new ManualClock());
    expect(await v.verify('alice', 'alice-pw')).toBe(true);
    expect(await v.verify('alice', 'nope')).toBe(false);
    expect(await v.verify('mallory', 'alice-pw')).toBe(false);
  });

  it('refuses passwords over 72 bytes instead of checking a prefix', async () => {
    const long = 'a'.repeat(72);
    const v = new PasswordVerifier(new Map([['alice', hash(long)]]), 0, new ManualClock());
    expect(await v.verify('alice', long)).toBe(true);
    // bcrypt would accept this (it reads 72 bytes); the gateway must not.
    expect(await v.verify('alice', `${long}b`)).toBe(false);
    // 71 ASCII + a two-byte character = 73 bytes.
    const multibyte = `${'a'.repeat(71)}ä`;
    expect(await v.verify('alice', multibyte)).toBe(false);
  });

  it('refuses passwords with NUL bytes', async () => {
    const v = new PasswordVerifier(new Map([['alice', hash('abc')]]), 0, new ManualClock());
    expect(await v.verify('alice', 'abc\0def')).toBe(false);
  });

  it('caches a success for the TTL and forgets it after', async () => {
    const clock = new ManualClock();
    const v = new PasswordVerifier(users, 1000, clock);
    expect(v.isCached('alice', 'alice-pw')).toBe(false);
    await v.verify('alice', 'alice-pw');
    expect(v.isCached('alice', 'alice-pw')).toBe(true);
    expect(v.isCached('alice', 'other')).toBe(false);
    clock.advance(1001);
    expect(v.isCached('alice', 'alice-pw')).toBe(false);
  });

  it('drops cached successes when the users change, and a changed password no longer passes', async () => {
    const v = new PasswordVerifier(users, 60_000, new ManualClock());
    await v.verify('alice', 'alice-pw');
    v.replaceUsers(new Map([['alice', hash('new-pw')]]));
    expect(v.isCached('alice', 'alice-pw')).toBe(false);
    expect(await v.verify('alice', 'alice-pw')).toBe(false);
    expect(await v.verify('alice', 'new-pw')).toBe(true);
  });

  it('spends about the same time on an unknown user as on a wrong password (dummy hash; tolerance 3x)', async () => {
    const cost = 8;
    const v = new PasswordVerifier(new Map([['alice', hash('alice-pw', cost)]]), 0, new ManualClock());
    const time = async (user: string) => {
      const t = process.hrtime.bigint();
      await v.verify(user, 'wrong');
      return Number(process.hrtime.bigint() - t);
    };
    const wrong: number[] = [];
    const unknown: number[] = [];
    await time('alice');
    // Interleaved, so load from other processes falls on both alike.
    for (let i = 0; i < 11; i++) {
      wrong.push(await time('alice'));
      unknown.push(await time('nobody'));
    }
    const median = (xs: number[]) => xs.sort((a, b) => a - b)[5]!;
    const ratio = median(unknown) / median(wrong);
    // Without the dummy hash an unknown user answers ~100x faster; the tolerance is wide on purpose.
    expect(ratio).toBeGreaterThan(1 / 3);
    expect(ratio).toBeLessThan(3);
  });
});

describe('bcrypt back-pressure', () => {
  it('answers 503 past maxPending bcrypt checks in flight, and recovers when they finish', async () => {
    const v = new PasswordVerifier(new Map([['alice', hash('alice-pw', 8)]]), 0, new ManualClock(), 2);
    const first = [v.verify('alice', 'wrong1'), v.verify('nobody', 'wrong2')];
    await expect(v.verify('alice', 'wrong3')).rejects.toMatchObject({ code: 'verifications_busy', retryAfterSeconds: 1 });
    expect(await Promise.all(first)).toEqual([false, false]);
    expect(await v.verify('alice', 'alice-pw')).toBe(true);
  });
});

describe('Credentials file watch', () => {
  it('takes a changed htpasswd file into effect without a restart, and keeps the old users when it breaks', async () => {
    const u = htpasswd({ alice: 'old-pw' });
    const creds = new Credentials({ htpasswd: u.file, cacheTtlSeconds: 60, watch: true, maxPendingVerifications: 64, store: false }, new ManualClock(), silentLogger);
    try {
      expect(await creds.verifier.verify('alice', 'old-pw')).toBe(true);
      u.write({ alice: 'new-pw', dave: 'dave-pw' });
      await waitUntil(async () => (await creds.verifier.verify('dave', 'dave-pw')) === true);
      expect(await creds.verifier.verify('alice', 'old-pw')).toBe(false);
      expect(await creds.verifier.verify('alice', 'new-pw')).toBe(true);
      expect(creds.reload()).toBe(true);
      writeFileSync(u.file, 'alice:plaintext\n');
      expect(creds.reload()).toBe(false);
      expect(await creds.verifier.verify('alice', 'new-pw')).toBe(true);
    } finally {
      creds.close();
      u.remove();
    }
  });
});


describe('bcrypt hash prefixes', () => {
  it.each(['$2a$', '$2b$', '$2y$'])('verifies %s hashes (htpasswd -B writes $2y$)', async (prefix) => {
    const h = `${prefix}${hash('pw').slice(4)}`;
    const v = new PasswordVerifier(new Map([['alice', h]]), 0, new ManualClock());
    expect(await v.verify('alice', 'pw')).toBe(true);
    expect(await v.verify('alice', 'other')).toBe(false);
  });
});

describe('PasswordCheck and the lockout on the hot path', () => {
  const policy = { maxFailuresPerUser: 3, maxFailuresPerAccount: 100, windowSeconds: 900, addressBurst: 10, addressFailuresPerMinute: 30 };

  /** The real memory counters, with the peeks counted and, while `held` is set, answered only once it is released. */
  function countedCounters(clock: ManualClock) {
    const inner = new MemoryCounters(clock);
    const seen = { peeks: 0, held: undefined as Promise<void> | undefined };
    const counters: CounterStore = Object.assign(Object.create(inner) as CounterStore, {
      peek: async (key: CounterKey) => {
        seen.peeks++;
        if (seen.held) await seen.held;
        return inner.peek(key);
      },
    });
    return { counters, seen, close: () => inner.close() };
  }

  it('200 identical attempts from one address join the first from their arrival, while its lock check waits on the store', async () => {
    const clock = new ManualClock();
    const { counters, seen, close } = countedCounters(clock);
    const verifier = new PasswordVerifier(new Map([['alice', hash('alice-pw')]]), 60_000, clock);
    const check = new PasswordCheck(verifier, new Lockout(counters, policy, silentLogger, () => clock.now()), { addressBurst: 10, narrowForMs: 2000 });
    let release!: () => void;
    seen.held = new Promise<void>((r) => (release = r));
    const attempts = Array.from({ length: 200 }, () =>
      Promise.resolve(check.check({ user: 'alice', password: 'alice-pw', address: '198.51.100.7' }, { trustCache: true })).then(() => 'ok', (err: { status?: number }) => err.status));
    await new Promise((r) => setTimeout(r, 20));
    seen.held = undefined;
    release();
    expect(new Set(await Promise.all(attempts))).toEqual(new Set(['ok']));
    // One lock check (three counters) for the 200.
    expect(seen.peeks).toBe(3);
    await close();
  });

  it('a cached Basic password reads the pair lock from the store only after a failure of the pair here, or once PAIR_RECHECK_MS passed', async () => {
    const clock = new ManualClock();
    const { counters, seen, close } = countedCounters(clock);
    const lockout = new Lockout(counters, policy, silentLogger, () => clock.now());
    await lockout.check('alice', '198.51.100.7');
    const afterCheck = seen.peeks;
    for (let i = 0; i < 50; i++) await lockout.checkPair('alice', '198.51.100.7');
    expect(seen.peeks).toBe(afterCheck);
    // Another address of the same user was never read: one read, then none.
    await lockout.checkPair('alice', '192.0.2.1');
    await lockout.checkPair('alice', '192.0.2.1');
    expect(seen.peeks).toBe(afterCheck + 1);
    // A failure of the pair on this instance: the next cached attempt reads the store.
    await lockout.fail('alice', '198.51.100.7');
    await lockout.checkPair('alice', '198.51.100.7');
    expect(seen.peeks).toBe(afterCheck + 2);
    await lockout.checkPair('alice', '198.51.100.7');
    expect(seen.peeks).toBe(afterCheck + 2);
    // Failures counted elsewhere (another instance on the same counters) are seen within PAIR_RECHECK_MS.
    const other = new Lockout(counters, policy, silentLogger, () => clock.now());
    await other.fail('alice', '198.51.100.7');
    await other.fail('alice', '198.51.100.7');
    await lockout.checkPair('alice', '198.51.100.7');
    clock.advance(PAIR_RECHECK_MS);
    await expect(lockout.checkPair('alice', '198.51.100.7')).rejects.toMatchObject({ code: 'too_many_attempts' });
    // While locked, every attempt reads the store (an operator's clear holds at once).
    const locked = seen.peeks;
    await expect(lockout.checkPair('alice', '198.51.100.7')).rejects.toMatchObject({ code: 'too_many_attempts' });
    expect(seen.peeks).toBe(locked + 1);
    await other.clear({ user: 'alice' });
    await lockout.checkPair('alice', '198.51.100.7');
    await close();
  });

  it('keeps the note of each pair apart: user names that run into the address, and names too long to note as they are', async () => {
    const clock = new ManualClock();
    const { counters, seen, close } = countedCounters(clock);
    const lockout = new Lockout(counters, policy, silentLogger, () => clock.now());
    const long = 'u'.repeat(500);
    for (const [user, address] of [['a1', '2.3.4.5'], ['a', '12.3.4.5'], [long, '198.51.100.7'], [`${long}x`, '198.51.100.7']] as const) {
      const before = seen.peeks;
      await lockout.checkPair(user, address);
      // A pair not noted yet is read from the store; then it is noted, and not read again.
      expect(seen.peeks).toBe(before + 1);
      await lockout.checkPair(user, address);
      expect(seen.peeks).toBe(before + 1);
    }
    // A failure of one pair is that pair's: the others stay noted.
    await lockout.fail('a1', '2.3.4.5');
    const before = seen.peeks;
    await lockout.checkPair('a', '12.3.4.5');
    await lockout.checkPair(long, '198.51.100.7');
    expect(seen.peeks).toBe(before);
    await lockout.checkPair('a1', '2.3.4.5');
    expect(seen.peeks).toBe(before + 1);
    await close();
  });
});
