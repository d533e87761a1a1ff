/**
 * The scripts that must be atomic, and nothing else. Every key is passed in KEYS (never built inside
 * a script), and each script touches one key or keys of one hash tag, so it runs on one slot of a Redis
 * Cluster. Revoking scripts PUBLISH the session id on the revocation channel (ARGV) from inside the
 * script, so the message leaves the node that holds the session, in the same step as the delete.
 *
 * A session is ONE string key, `s:{sid}`, laid out to stay in a 384-byte allocation at any age:
 *   byte 1        format (3)
 *   bytes 2-7     created at, ms (Redis's clock)
 *   bytes 8-13    last rotation at, ms (the gateway's clock; = created at until the first one)
 *   bytes 14-19   base, ms (the gateway's clock, like rotation times): rotated-away entries count from it
 *   bytes 20-31   the current refresh token's digest (12 bytes, see session-record.ts)
 *   2 bytes       length of sub, then sub
 *   2 bytes       length of uv (credential version), then uv
 *   the rest      up to ROTATED_KEPT rotated-away refresh tokens, oldest first, 9 bytes each: the first
 *                 5 bytes of its digest, then when it was rotated away (ms after base, 4 bytes)
 * A rotation only appends an entry (and drops the oldest past ROTATED_KEPT). When an offset no longer
 * fits in 4 bytes (after ~49 days), the base moves to ~24.8 days before now and entries older than that
 * count as rotated away then: "at least 24.8 days ago", which no grace period reaches.
 */

/** How many rotated-away refresh hashes a session remembers for reuse detection. */
export const ROTATED_KEPT = 32;
export const FORMAT = 3;
export const CURRENT_DIGEST_BYTES = 12;
export const ROTATED_DIGEST_BYTES = 5;
const ENTRY = ROTATED_DIGEST_BYTES + 4;
const OFFSET_MAX = 2 ** 32 - 1;
const REBASE_BACK = 2 ** 31;

/** Big-endian integers (exact in Lua's doubles for any ms timestamp), and the layout's offsets. */
const CODEC = `
local function uint(s, i, n)
  local v = 0
  for k = i, i + n - 1 do v = v * 256 + string.byte(s, k) end
  return v
end
local function pack(v, n)
  local t = {}
  for k = n, 1, -1 do t[k] = string.char(v % 256); v = math.floor(v / 256) end
  return table.concat(t)
end
-- sub, uv, and where the rotated-away entries start.
local function layout(s)
  local subLen = uint(s, 32, 2)
  local uvAt = 34 + subLen
  local uvLen = uint(s, uvAt, 2)
  return string.sub(s, 34, 33 + subLen), string.sub(s, uvAt + 2, uvAt + 1 + uvLen), uvAt + 2 + uvLen
end
-- When the entry with this short digest was rotated away (ms), or nil.
local function rotatedAt(s, from, short)
  local base = uint(s, 14, 6)
  for i = string.len(s) - ${ENTRY - 1}, from, -${ENTRY} do
    if string.sub(s, i, i + ${ROTATED_DIGEST_BYTES - 1}) == short then return base + uint(s, i + ${ROTATED_DIGEST_BYTES}, 4) end
  end
  return nil
end
`;

/** KEYS[1] = session. ARGV: digest, ttlSeconds, sub, uv. */
export const CREATE_SESSION = `${CODEC}
local t = redis.call('TIME')
local now = pack(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), 6)
redis.call('SET', KEYS[1], string.char(${FORMAT}) .. now .. now .. now .. ARGV[1] .. pack(string.len(ARGV[3]), 2) .. ARGV[3] .. pack(string.len(ARGV[4]), 2) .. ARGV[4], 'EX', ARGV[2])
return 1
`;

/**
 * KEYS[1] = session. ARGV: presentedDigest, nextDigest, ttlSeconds, graceMs, nowMs, channel, sid.
 * Returns {1, sub, uv} rotated | {0} unknown | {2} grace | {3} reused (session deleted, sid published).
 */
export const ROTATE_REFRESH = `${CODEC}
local s = redis.call('GET', KEYS[1])
if not s then return {0} end
local sub, uv, rotatedFrom = layout(s)
local now = tonumber(ARGV[5])
if string.sub(s, 20, 31) == ARGV[1] then
  local base = uint(s, 14, 6)
  local entries = string.sub(s, rotatedFrom)
  -- The base is the caller's clock from the first rotation on; it moves back for a caller whose clock
  -- is behind it (skew between gateways), and forward when an offset would not fit.
  local newBase = base
  if string.len(entries) == 0 or now < base then newBase = now
  elseif now - base > ${OFFSET_MAX} then newBase = now - ${REBASE_BACK} end
  if newBase ~= base and string.len(entries) > 0 then
    local moved = {}
    for i = 1, string.len(entries) - ${ENTRY - 1}, ${ENTRY} do
      local offset = math.min(${OFFSET_MAX}, math.max(0, base + uint(entries, i + ${ROTATED_DIGEST_BYTES}, 4) - newBase))
      moved[#moved + 1] = string.sub(entries, i, i + ${ROTATED_DIGEST_BYTES - 1}) .. pack(offset, 4)
    end
    entries = table.concat(moved)
  end
  base = newBase
  entries = entries .. string.sub(ARGV[1], 1, ${ROTATED_DIGEST_BYTES}) .. pack(math.max(0, now - base), 4)
  if string.len(entries) > ${ROTATED_KEPT * ENTRY} then entries = string.sub(entries, -${ROTATED_KEPT * ENTRY}) end
  redis.call('SET', KEYS[1], string.sub(s, 1, 7) .. pack(now, 6) .. pack(base, 6) .. ARGV[2] .. string.sub(s, 32, rotatedFrom - 1) .. entries, 'EX', ARGV[3])
  return {1, sub, uv}
end
local at = rotatedAt(s, rotatedFrom, string.sub(ARGV[1], 1, ${ROTATED_DIGEST_BYTES}))
if not at then return {0} end
if now - at < tonumber(ARGV[4]) then return {2} end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[6], ARGV[7])
return {3}
`;

/** KEYS[1] = session. ARGV: channel, sid. Returns 1 when there was a session to delete (its id published). */
export const REVOKE = `
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 1
`;

/**
 * KEYS[1] = session. ARGV: digest, channel, sid. Returns 1 when the session was deleted (and its id
 * published), 0 when the hash is not one of its own, -1 when there is no such session.
 */
export const REVOKE_BY_REFRESH = `${CODEC}
local s = redis.call('GET', KEYS[1])
if not s then return -1 end
local _, _, rotatedFrom = layout(s)
if string.sub(s, 20, 31) == ARGV[1] or rotatedAt(s, rotatedFrom, string.sub(ARGV[1], 1, ${ROTATED_DIGEST_BYTES})) then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[3])
  return 1
end
return 0
`;

/**
 * The per-user index: KEYS[1] = `u:{<digest of the user>}`, a sorted set of session ids scored by
 * creation (ms). It lives in another slot than the sessions, so it is kept apart from them and may
 * hold ids of sessions already gone; readers check, and pruning removes those.
 * ARGV: sid, createdAtMs, ttlSeconds. The key lives at least as long as its newest session could;
 * returns how many ids it holds.
 */
export const INDEX_ADD = `
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
if redis.call('TTL', KEYS[1]) < tonumber(ARGV[3]) then redis.call('EXPIRE', KEYS[1], ARGV[3]) end
return redis.call('ZCARD', KEYS[1])
`;

/** KEYS[1] = user index. ARGV: ttlSeconds. A rotation extends its session, so the index lives as long. */
export const INDEX_TOUCH = `
local ttl = redis.call('TTL', KEYS[1])
if ttl >= 0 and ttl < tonumber(ARGV[1]) then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return 1
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
