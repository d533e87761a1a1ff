import { describe, expect, it, vi } from 'vitest';
import type { IncomingMessage } from 'node:http';
import { basicAuthenticator } from '../../../src/auth/basic.js';
import { ManualClock } from '../../../src/clock.js';
import { hashSync } from '../../../src/credentials/bcrypt.js';
import { DirectoryUsers } from '../../../src/credentials/directory-users.js';
import { Lockout, type PairNoteMemo } from '../../../src/credentials/lockout.js';
import { PasswordCheck } from '../../../src/credentials/password-check.js';
import { PasswordVerifier } from '../../../src/credentials/password-verifier.js';
import { UserSources } from '../../../src/credentials/user-sources.js';
import { MemoryCounters } from '../../../src/stores/counters/memory-counters.js';
import type { Exchange } from '../../../src/core/exchange.js';
import type { Principal } from '../../../src/core/principal.js';
import { silentLogger } from '../../../src/log.js';
import { TEST_COST } from '../../support/fixtures.js';

const policy = { maxFailuresPerUser: 3, maxFailuresPerAccount: 100, windowSeconds: 900, addressBurst: 10, addressFailuresPerMinute: 30 };
const hash = (pw: string) => hashSync(pw, { cost: TEST_COST });
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

/** A request on `connection` (its socket), as the authenticator reads it. */
function request(connection: object, authorization: string): IncomingMessage {
  return { headers: { authorization }, socket: connection, httpVersionMajor: 1 } as unknown as IncomingMessage;
}

/** An HTTP/2 request: each stream's `socket` is an object of its own, the session is the connection's. */
function streamRequest(session: object, authorization: string): IncomingMessage {
  return { headers: { authorization }, socket: {}, stream: { session }, httpVersionMajor: 2 } as unknown as IncomingMessage;
}

function exchange(address = '198.51.100.7'): Exchange {
  return { address, triedUser: undefined } as unknown as Exchange;
}

function setup() {
  const clock = new ManualClock();
  const counters = new MemoryCounters(clock);
  const verifier = new PasswordVerifier(new Map([['alice', hash('alice-pw')]]), 60_000, clock);
  const passwords = new PasswordCheck(verifier, new Lockout(counters, policy, silentLogger, () => clock.now()), { addressBurst: 10, narrowForMs: 2000 });
  const keys = vi.spyOn(verifier, 'attemptKey');
  const authenticator = basicAuthenticator(passwords, (user) => verifier.credentialVersion(user));
  /** parse + verify, as the authenticate step runs them; the principal, and whether it came without waiting. */
  const authenticate = async (req: IncomingMessage, ex = exchange()) => {
    const verified = authenticator.verify(authenticator.parse(req)!, ex);
    return { principal: await verified, waited: verified instanceof Promise };
  };
  return { clock, counters, verifier, keys, authenticator, authenticate };
}

describe('the Basic authenticator on a keep-alive connection', () => {
  it('decodes and hashes a header once per connection: the next request with it is a synchronous cache hit', async () => {
    const { keys, authenticator, authenticate, counters } = setup();
    const socket = {};
    const header = basic('alice', 'alice-pw');
    // The first: decoded, hashed, bcrypt.
    expect(await authenticate(request(socket, header))).toMatchObject({ principal: { user: 'alice', via: 'basic' }, waited: true });
    expect(keys).toHaveBeenCalledTimes(1);
    // The same header again on that connection: the same reading, no key made, no promise.
    expect(authenticator.parse(request(socket, header))).toBe(authenticator.parse(request(socket, header)));
    for (let i = 0; i < 20; i++) {
      expect(await authenticate(request(socket, header))).toMatchObject({ principal: { user: 'alice' }, waited: false });
    }
    expect(keys).toHaveBeenCalledTimes(1);
    // Another connection reads (and hashes) the header for itself; the pair is verified already.
    expect(await authenticate(request({}, header))).toMatchObject({ waited: false });
    expect(keys).toHaveBeenCalledTimes(2);
    await counters.close();
  });

  it('keeps only the last header of each connection: another header is read and checked for itself', async () => {
    const { authenticator, authenticate, counters } = setup();
    const socket = {};
    expect(await authenticate(request(socket, basic('alice', 'alice-pw')))).toMatchObject({ principal: { user: 'alice' } });
    await expect(authenticate(request(socket, basic('alice', 'wrong')))).rejects.toMatchObject({ code: 'invalid_credentials' });
    expect((authenticator.parse(request(socket, basic('alice', 'wrong'))) as { password: string }).password).toBe('wrong');
    // Back to the right password on that connection: right again, cached (after the failure, the pair's
    // lock is read from the store once).
    expect(await authenticate(request(socket, basic('alice', 'alice-pw')))).toMatchObject({ principal: { user: 'alice' }, waited: true });
    expect(await authenticate(request(socket, basic('alice', 'alice-pw')))).toMatchObject({ principal: { user: 'alice' }, waited: false });
    await counters.close();
  });

  it('makes the key again once the users table changed: a password the file no longer has fails on the connection that used it', async () => {
    const { verifier, keys, authenticate, counters } = setup();
    const socket = {};
    const header = basic('alice', 'alice-pw');
    await authenticate(request(socket, header));
    await authenticate(request(socket, header));
    expect(keys).toHaveBeenCalledTimes(1);
    verifier.replaceUsers(new Map([['alice', hash('new-pw')]]));
    await expect(authenticate(request(socket, header))).rejects.toMatchObject({ code: 'invalid_credentials' });
    expect(keys).toHaveBeenCalledTimes(2);
    expect(await authenticate(request(socket, basic('alice', 'new-pw')))).toMatchObject({ principal: { user: 'alice' } });
    await counters.close();
  });

  it('knows an HTTP/2 connection by its session, whose streams each have a socket object of their own', async () => {
    const { keys, authenticate, counters } = setup();
    const session = {};
    const header = basic('alice', 'alice-pw');
    await authenticate(streamRequest(session, header));
    for (let i = 0; i < 5; i++) expect(await authenticate(streamRequest(session, header))).toMatchObject({ waited: false });
    expect(keys).toHaveBeenCalledTimes(1);
    await counters.close();
  });

  it('holds the lock of the pair from each address a connection carries (behind a trusted proxy): the note follows the address', async () => {
    const { clock, counters } = setup();
    const lockout = new Lockout(counters, policy, silentLogger, () => clock.now());
    const memo: PairNoteMemo = { note: undefined, noteAddress: undefined };
    await lockout.check('alice', '192.0.2.1');
    await lockout.check('alice', '192.0.2.2');
    expect(lockout.checkPair('alice', '192.0.2.1', memo)).toBeUndefined();
    for (let i = 0; i < policy.maxFailuresPerUser; i++) await lockout.fail('alice', '192.0.2.2');
    await expect(lockout.checkPair('alice', '192.0.2.2', memo)).rejects.toMatchObject({ code: 'too_many_attempts' });
    expect(lockout.checkPair('alice', '192.0.2.1', memo)).toBeUndefined();
    await counters.close();
  });

  it('gives every request a principal of its own, with the credential version of the file in force', async () => {
    const { verifier, authenticate, counters } = setup();
    const socket = {};
    const header = basic('alice', 'alice-pw');
    const first: Principal = (await authenticate(request(socket, header))).principal;
    const second: Principal = (await authenticate(request(socket, header))).principal;
    expect(second).not.toBe(first);
    expect(second.proof).toBe(verifier.credentialVersion('alice'));
    await counters.close();
  });
});

describe('attempt key epochs', () => {
  it('a users file source changes its epoch with its table; beside a directory, the file decides the epoch', () => {
    const clock = new ManualClock();
    const file = new PasswordVerifier(new Map([['alice', hash('pw')]]), 60_000, clock);
    const directory = new DirectoryUsers({
      url: 'ldap://127.0.0.1:1', startTls: false, caFile: undefined, userDn: 'uid={user},ou=people,dc=example,dc=com', searchBase: undefined,
      searchFilter: undefined, bindDn: undefined, bindPassword: undefined, groupsBase: undefined, groupsFilter: '(member={dn})', cacheSeconds: 300,
    }, clock, silentLogger);
    const sources = new UserSources(file, directory);
    const before = sources.keyEpoch;
    expect(sources.keyEpoch).toBe(before);
    expect(directory.keyEpoch).toBe(directory.keyEpoch);
    // A name that was the directory's becomes the file's: its key is another source's key now.
    expect(sources.inDirectory('bob')).toBe(true);
    file.replaceUsers(new Map([['alice', hash('pw')], ['bob', hash('pw')]]));
    expect(sources.inDirectory('bob')).toBe(false);
    expect(sources.keyEpoch).not.toBe(before);
  });
});
