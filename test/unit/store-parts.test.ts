import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { DeadlineError, withDeadline } from '../../src/stores/redis/deadline.js';
import { failureCause } from '../../src/stores/redis/failure.js';
import { LivenessCache } from '../../src/stores/redis/liveness-cache.js';
import { OutageLog } from '../../src/stores/redis/outage-log.js';
import { readSessionRecord } from '../../src/stores/sessions/session-record.js';
import { hashSlot, SESSION_ID, sessionIdOnItsSlot, sessionPlace, userSessionKey, userTag } from '../../src/stores/sessions/user-index.js';

describe('failureCause', () => {
  it.each([
    [new Error('MOVED 3999 127.0.0.1:7001'), 'MOVED'],
    [new Error('READONLY You can\'t write against a read only replica.'), 'READONLY'],
    [new Error('CLUSTERDOWN The cluster is down'), 'CLUSTERDOWN'],
    [new Error('Too many Cluster redirections. Last error: Error: MOVED 1 127.0.0.1:1'), 'MOVED'],
    [new Error('NOREPLICAS 0 of 1 replicas acknowledged the write'), 'NOREPLICAS'],
    [new Error('Command timed out'), 'timeout'],
    [new DeadlineError(500), 'timeout'],
    [Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' }), 'refused'],
    [new Error('Stream isn\'t writeable and enableOfflineQueue options is false'), 'connection'],
    [new Error('something else'), 'other'],
  ])('%s -> %s', (err, cause) => {
    expect(failureCause(err)).toBe(cause);
  });
});

describe('withDeadline', () => {
  it('rejects a promise that does not settle in time, and passes one that does', async () => {
    await expect(withDeadline(new Promise(() => {}), 20)).rejects.toBeInstanceOf(DeadlineError);
    await expect(withDeadline(Promise.resolve(7), 20)).resolves.toBe(7);
    const failure = new Error('refused');
    await expect(withDeadline(Promise.reject(failure), 20)).rejects.toBe(failure);
  });

  it('leaves no timer behind once the promise settled', async () => {
    const before = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    await Promise.all(Array.from({ length: 50 }, (_, i) => withDeadline(i % 2 ? Promise.resolve(i) : Promise.reject(new Error('x')), 60_000).catch(() => undefined)));
    expect(process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length).toBe(before);
  });
});

describe('OutageLog', () => {
  it('logs one line per outage with its cause, and one when it is over', () => {
    const lines: Array<Record<string, unknown>> = [];
    let now = 0;
    const log = new OutageLog(createLogger('info', (l) => lines.push(JSON.parse(l) as Record<string, unknown>)), 'redis', 'sessions answer 503', () => now);
    log.commandFailed(new Error('refused before the first connection'));
    expect(lines).toEqual([]);
    log.connected();
    log.commandFailed(new Error('MOVED 1 127.0.0.1:1'));
    log.failed(new Error('Command timed out'));
    // A reply still in flight when the outage began does not end it...
    now += 10;
    log.answered();
    // ...nor a reconnect while commands keep failing (a demoted master, a partial Cluster outage)...
    log.connected();
    now += 2000;
    log.commandFailed(new Error('CLUSTERDOWN The cluster is down'));
    now += 999;
    log.answered();
    // ...commands answering a while after the last failure do.
    now += 1;
    log.answered();
    expect(lines.map((l) => [l.level, l.msg, l.cause])).toEqual([
      ['error', 'redis unavailable (MOVED); sessions answer 503', 'MOVED'],
      ['info', 'redis available again', undefined],
    ]);
  });
});

describe('LivenessCache', () => {
  it('answers from memory only while the channel confirmed recently enough', () => {
    const cache = new LivenessCache(10_000, 300);
    cache.activate();
    cache.confirm(1000);
    cache.remember('s', 1000, 60_000, cache.epoch);
    expect(cache.isLive('s', 1299)).toBe(true);
    expect(cache.isLive('s', 1300)).toBe(false);
    cache.confirm(1250);
    expect(cache.isLive('s', 1300)).toBe(true);
    cache.invalidate('s');
    expect(cache.isLive('s', 1300)).toBe(false);
  });

  it('keeps nothing while off, nor an answer that raced a revocation', () => {
    const cache = new LivenessCache(10_000, 300);
    cache.remember('s', 0, 60_000, cache.epoch);
    expect(cache.isLive('s', 0)).toBe(false);
    cache.activate();
    cache.confirm(0);
    const epoch = cache.epoch;
    cache.invalidate('other');
    cache.remember('s', 0, 60_000, epoch);
    expect(cache.isLive('s', 1)).toBe(false);
  });
});

describe('sessionIdOnItsSlot', () => {
  it('makes ids of the usual shape whose own hash tag is on the slot of the user\'s hash of that copy, for any user', () => {
    const seen = new Set<string>();
    for (let n = 0; n < 2000; n++) {
      const user = `user-${n}`;
      const copy = (n % 2) as 0 | 1;
      const sid = sessionIdOnItsSlot(user, copy);
      expect(sid).toMatch(SESSION_ID);
      expect(sid.slice(0, 23)).toBe(`${userTag(user)}${copy}`);
      const hash = userSessionKey(userTag(user), copy);
      expect(hashSlot(sid)).toBe(hashSlot(hash.slice(4, -1)));
      const place = sessionPlace(sid)!;
      expect(place.key).toBe(hash);
      expect(place.legacy).toEqual({ record: `s:{${sid}}`, index: `u:{${hash.slice(4, -1)}}` });
      seen.add(sid);
    }
    // Random still: no two alike, and one user's ids differ in more than the last characters.
    expect(seen.size).toBe(2000);
    const one = new Set(Array.from({ length: 200 }, () => sessionIdOnItsSlot('alice', 0).slice(23, 42)));
    expect(one.size).toBe(200);
  });

  it('finds a suffix for every slot (each of the 16,384 buckets of 3-character suffixes has some)', () => {
    // The id's prefix fixes all but the suffix's share of the CRC: every share must be reachable.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const reached = new Set<number>();
    for (const a of alphabet) for (const b of alphabet) for (const c of alphabet) reached.add(hashSlot(`${a}${b}${c}`));
    expect(reached.size).toBe(16384);
  });

  it('tells an id made without a legacy record from one made with it, by slot (sessionPlace.legacy)', () => {
    let apart = 0;
    for (let n = 0; n < 200; n++) {
      const sid = `${userTag('bob')}0${String(n).padStart(22, 'x')}`;
      if (!sessionPlace(sid)!.legacy) apart++;
    }
    expect(apart).toBeGreaterThan(190);
  });
});

describe('readSessionRecord', () => {
  it('reads creation, last rotation, generation and user, and refuses anything else (an older format too)', () => {
    const sub = Buffer.from('alice');
    const uv = Buffer.from('v1');
    const generation = Buffer.alloc(4);
    generation.writeUInt32BE(7);
    const raw = Buffer.concat([
      Buffer.from([4]), int48(1_700_000_000_000), int48(1_700_000_000_500), generation,
      u16(sub.length), sub, u16(uv.length), uv,
    ]);
    expect(readSessionRecord(raw)).toEqual({ createdAtMs: 1_700_000_000_000, refreshedAtMs: 1_700_000_000_500, generation: 7, sub: 'alice' });
    expect(readSessionRecord(Buffer.concat([Buffer.from([3]), raw.subarray(1)]))).toBeUndefined();
    expect(readSessionRecord(null)).toBeUndefined();
    expect(readSessionRecord(Buffer.from('not a session'))).toBeUndefined();
  });
});

function int48(n: number): Buffer {
  const b = Buffer.alloc(6);
  b.writeUIntBE(n, 0, 6);
  return b;
}

function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n);
  return b;
}
