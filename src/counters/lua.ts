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
 * GCRA. KEYS[1] = bucket (holds the theoretical arrival time, ms). ARGV: limit, windowMs, n (takes decided
 * in order at one instant; a busy bucket's requests come in one command). Time is Redis's own (TIME), so
 * instances with skewed clocks agree. Returns {allowed 1, remaining, resetMs, 0} for each take allowed,
 * then, when one is refused, {0, 0, resetMs, retryAfterMs} once: every take after it is refused alike
 * (the bucket does not change at one instant).
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
local out = {}
local taken = 0
for i = 1, n do
  local nextTat = tat + interval
  if nextTat - now > period then
    out[#out + 1] = 0
    out[#out + 1] = 0
    out[#out + 1] = math.ceil(tat - now)
    out[#out + 1] = math.ceil(nextTat - period - now)
    break
  end
  tat = nextTat
  taken = taken + 1
  out[#out + 1] = 1
  out[#out + 1] = math.floor((period - (tat - now)) / interval)
  out[#out + 1] = math.ceil(tat - now)
  out[#out + 1] = 0
end
if taken > 0 then redis.call('SET', KEYS[1], string.format('%.3f', tat), 'PX', math.ceil(tat - now)) end
return out
`;
