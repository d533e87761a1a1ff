import { hashSync } from '../../src/credentials/bcrypt.js';
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/clock.js';
import { ConfigError } from '../../src/config/errors.js';
import { Credentials } from '../../src/credentials/credentials.js';
import { parseHtpasswd } from '../../src/credentials/htpasswd.js';
import { PasswordVerifier } from '../../src/credentials/password-verifier.js';
import { silentLogger } from '../../src/log.js';
import { htpasswd, TEST_COST } from '../support/fixtures.js';

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
    await expect(v.verify('alice', 'wrong3')).rejects.toMatchObject({ status: 503, code: 'service_unavailable', headers: { 'Retry-After': '1' } });
    expect(await Promise.all(first)).toEqual([false, false]);
    expect(await v.verify('alice', 'alice-pw')).toBe(true);
  });
});

describe('Credentials file watch', () => {
  it('takes a changed htpasswd file into effect without a restart, and keeps the old users when it breaks', async () => {
    const u = htpasswd({ alice: 'old-pw' });
    const creds = new Credentials({ htpasswd: u.file, cacheTtlSeconds: 60, watch: true, maxPendingVerifications: 64 }, new ManualClock(), silentLogger);
    try {
      expect(await creds.verifier.verify('alice', 'old-pw')).toBe(true);
      u.write({ alice: 'new-pw', dave: 'dave-pw' });
      await waitFor(async () => (await creds.verifier.verify('dave', 'dave-pw')) === true);
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

async function waitFor(check: () => Promise<boolean>, timeoutMs = 3000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('condition not met in time');
}

describe('bcrypt hash prefixes', () => {
  it.each(['$2a$', '$2b$', '$2y$'])('verifies %s hashes (htpasswd -B writes $2y$)', async (prefix) => {
    const h = `${prefix}${hash('pw').slice(4)}`;
    const v = new PasswordVerifier(new Map([['alice', h]]), 0, new ManualClock());
    expect(await v.verify('alice', 'pw')).toBe(true);
    expect(await v.verify('alice', 'other')).toBe(false);
  });
});
