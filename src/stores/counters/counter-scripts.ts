/** The counters' scripts: each touches one key, so it runs on one slot of a Redis Cluster. */

/**
 * A counter is `<count>:<first hit, ms>` under KEYS[1]; KEYS[2] is its group's "cleared at" marker
 * (same hash tag, so one slot): a counter whose first hit is not after the marker counts as gone. That
 * is how an operator lifts every counter of a group (all of a user's address locks) with one write.
 */
const READ = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local count, started = 0, now
local v = redis.call('GET', KEYS[1])
if v then
  local sep = string.find(v, ':', 1, true)
  count = tonumber(string.sub(v, 1, sep - 1))
  started = tonumber(string.sub(v, sep + 1))
  local cleared = redis.call('GET', KEYS[2])
  if cleared and tonumber(cleared) >= started then count = 0; started = now end
end
`;

/** KEYS: counter, group marker. ARGV: windowSeconds. Returns {count, secondsToReset}. */
export const HIT_COUNTER = `${READ}
local ttl = redis.call('PTTL', KEYS[1])
if count == 0 or ttl < 0 then ttl = tonumber(ARGV[1]) * 1000 end
count = count + 1
redis.call('SET', KEYS[1], count .. ':' .. started, 'PX', ttl)
return {count, math.ceil(ttl / 1000)}
`;

/** KEYS: counter, group marker. Returns {count, secondsToReset}. */
export const PEEK_COUNTER = `${READ}
if count == 0 then return {0, 0} end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then ttl = 0 end
return {count, math.ceil(ttl / 1000)}
`;

/** KEYS[1] = group marker. ARGV: windowSeconds (no counter of the group outlives it). */
export const CLEAR_GROUP = `
local t = redis.call('TIME')
redis.call('SET', KEYS[1], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), 'PX', tonumber(ARGV[1]) * 1000)
return 1
`;

/**
 * GCRA (src/stores/counters/gcra.ts). KEYS[1] = bucket (holds the theoretical arrival time, ms). ARGV: limit,
 * windowMs, n: a batch of takes decided in order at one instant (a busy bucket's requests come in one
 * command). Time is Redis's own (TIME), so instances with skewed clocks agree. Constant work whatever n:
 * it counts the takes that fit and moves the bucket past them. Returns {allowed, ahead}: how many of the
 * n were allowed (the first ones), and how far (ms, "%.3f") the bucket was ahead of now before them,
 * from which each take's RateLimit figures follow (decisionOf).
 */
export const TAKE_RATES = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local interval = period / limit
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local ahead = tat - now
local allowed = math.floor((period - ahead) / interval + 1e-6)
if allowed > n then allowed = n end
if allowed < 0 then allowed = 0 end
if allowed > 0 then
  local after = ahead + allowed * interval
  redis.call('SET', KEYS[1], string.format('%.3f', now + after), 'PX', math.ceil(after))
end
return {allowed, string.format('%.3f', ahead)}
`;
