/**
 * The scripts that must be atomic, and nothing else. Every key is passed in KEYS (never built inside
 * a script) and the keys of one session share the hash tag `{sid}`, so each script runs on one slot
 * of a Redis Cluster.
 *
 * Session keys: KEYS[1] = `{sid}:s` (hash: sub, uv, rh = current refresh hash),
 *               KEYS[2] = `{sid}:p` (sorted set: the last ROTATED_KEPT rotated-away refresh hashes,
 *               scored by rotation time in ms; older ones are forgotten, so a session's state stays small).
 */

/** How many rotated-away refresh hashes a session remembers for reuse detection. */
export const ROTATED_KEPT = 32;

/** ARGV: sub, refreshHash, ttlSeconds, uv (credential version). */
export const CREATE_SESSION = `
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'sub', ARGV[1], 'rh', ARGV[2], 'uv', ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1
`;

/**
 * ARGV: presentedHash, nextHash, ttlSeconds, graceMs, nowMs, channel, sid.
 * Returns {1, sub, uv} rotated | {0} unknown | {2} grace | {3} reused (session deleted, sid published).
 */
export const ROTATE_REFRESH = `
local current = redis.call('HGET', KEYS[1], 'rh')
if not current then return {0} end
if current == ARGV[1] then
  redis.call('HSET', KEYS[1], 'rh', ARGV[2])
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[1])
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, -${ROTATED_KEPT + 1})
  redis.call('EXPIRE', KEYS[1], ARGV[3])
  redis.call('EXPIRE', KEYS[2], ARGV[3])
  local fields = redis.call('HMGET', KEYS[1], 'sub', 'uv')
  return {1, fields[1], fields[2]}
end
local rotatedAt = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not rotatedAt then return {0} end
if tonumber(ARGV[5]) - tonumber(rotatedAt) < tonumber(ARGV[4]) then return {2} end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('PUBLISH', ARGV[6], ARGV[7])
return {3}
`;

/** ARGV: channel, sid. Deletes the session and publishes its id to every instance's liveness cache. */
export const REVOKE = `
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
`;

/** ARGV: refreshHash, channel, sid. Returns 1 when the session was deleted (and its id published). */
export const REVOKE_BY_REFRESH = `
local current = redis.call('HGET', KEYS[1], 'rh')
if not current then return 0 end
if current == ARGV[1] or redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
`;

/** KEYS[1] = counter. ARGV: windowSeconds. Returns {count, secondsToReset}. */
export const HIT_COUNTER = `
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('TTL', KEYS[1])
if ttl < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}
`;

/** KEYS[1] = counter. Returns {count, secondsToReset}. */
export const PEEK_COUNTER = `
local count = redis.call('GET', KEYS[1])
if not count then return {0, 0} end
local ttl = redis.call('TTL', KEYS[1])
if ttl < 0 then ttl = 0 end
return {tonumber(count), ttl}
`;

/**
 * GCRA. KEYS[1] = bucket (holds the theoretical arrival time, ms). ARGV: limit, windowMs.
 * Time is Redis's own (TIME), so instances with skewed clocks agree.
 * Returns {allowed 0|1, remaining, resetMs, retryAfterMs}.
 */
export const TAKE_RATE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local interval = period / limit
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local nextTat = tat + interval
if nextTat - now > period then
  return {0, 0, math.ceil(tat - now), math.ceil(nextTat - period - now)}
end
redis.call('SET', KEYS[1], string.format('%.3f', nextTat), 'PX', math.ceil(nextTat - now))
return {1, math.floor((period - (nextTat - now)) / interval), math.ceil(nextTat - now), 0}
`;
