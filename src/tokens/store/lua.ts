/**
 * The scripts that must be atomic, and nothing else. Every key is passed in KEYS (never built inside
 * a script), and each script touches one key, so it runs on one slot of a Redis Cluster. Revoking
 * scripts PUBLISH the session id on the revocation channel (ARGV) from inside the script, so the message
 * leaves the node that holds the session, in the same step as the delete.
 *
 * A session is ONE string key, `s:{sid}`, holding no token and no digest of one (refresh tokens are
 * derived from the refresh key and the generation, see refresh-token.ts):
 *   byte 1        format (4)
 *   bytes 2-7     created at, ms (Redis's clock)
 *   bytes 8-13    last rotation at, ms (the gateway's clock; = created at until the first one)
 *   bytes 14-17   the current refresh generation
 *   2 bytes       length of sub, then sub
 *   2 bytes       length of uv (credential version), then uv
 */

export const FORMAT = 4;

/** Big-endian integers (exact in Lua's doubles for any ms timestamp). */
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
local function fields(s)
  local subLen = uint(s, 18, 2)
  local uvAt = 20 + subLen
  return string.sub(s, 20, 19 + subLen), string.sub(s, uvAt + 2, uvAt + 1 + uint(s, uvAt, 2))
end
`;

/** KEYS[1] = session. ARGV: ttlSeconds, sub, uv. */
export const CREATE_SESSION = `${CODEC}
local t = redis.call('TIME')
local now = pack(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), 6)
redis.call('SET', KEYS[1], string.char(${FORMAT}) .. now .. now .. pack(0, 4) .. pack(string.len(ARGV[2]), 2) .. ARGV[2] .. pack(string.len(ARGV[3]), 2) .. ARGV[3], 'EX', ARGV[1])
return 1
`;

/**
 * A sign-in waiting for its replicas (store.waitForReplicas) is written as `p:{sid}` (pending) with a
 * TTL of at most PENDING_TTL_SECONDS: no session command reads that key, so its tokens work nowhere.
 * Once the replicas have it, ACTIVATE moves it to `s:{sid}` with the session's TTL (same slot: the hash
 * tag is the id). A sign-in answered with an error leaves at most a pending key that expires by itself.
 * KEYS[1] = pending, KEYS[2] = session. ARGV: ttlSeconds. Returns 1, or 0 when the pending key is gone.
 */
export const ACTIVATE = `
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
redis.call('SET', KEYS[2], v, 'EX', ARGV[1])
redis.call('DEL', KEYS[1])
return 1
`;
export const PENDING_TTL_SECONDS = 60;

/**
 * KEYS[1] = session. ARGV: presented generation, ttlSeconds, graceMs, nowMs, channel, sid.
 * Returns {1, sub, uv, successor generation, retry 0|1, created at} | {0} unknown | {3} reused (deleted, published).
 * - the current generation: rotates to the next one;
 * - a generation ahead of the current one (only the gateway can mint it: a rotation lost in a
 *   failover): rotates past it, as if that rotation had been kept;
 * - the generation before the current one (graceMs > 0): a retry, answered with the current generation,
 *   however long after the rotation: its successor was never presented (or the current one would have
 *   moved on), so whoever holds it has done nothing wrong (a client whose answer was lost to a 503);
 * - any other earlier generation (its successor was presented), or with graceMs 0 any earlier one:
 *   reuse (RFC 9700 section 4.14), the session ends.
 */
export const ROTATE_REFRESH = `${CODEC}
local s = redis.call('GET', KEYS[1])
if not s or string.byte(s, 1) ~= ${FORMAT} then return {0} end
local sub, uv = fields(s)
local current = uint(s, 14, 4)
local presented = tonumber(ARGV[1])
local now = tonumber(ARGV[4])
if presented >= current then
  redis.call('SET', KEYS[1], string.sub(s, 1, 7) .. pack(now, 6) .. pack(presented + 1, 4) .. string.sub(s, 18), 'EX', ARGV[2])
  return {1, sub, uv, presented + 1, 0, uint(s, 2, 6)}
end
if presented == current - 1 and tonumber(ARGV[3]) > 0 then
  return {1, sub, uv, current, 1, uint(s, 2, 6)}
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[5], ARGV[6])
return {3}
`;

/**
 * KEYS[1] = session. ARGV: channel, sid. When there was a session: deletes it, publishes its id and returns
 * its user (for the audit line; '' for a value of another format); else returns false (nil).
 */
export const REVOKE = `${CODEC}
local s = redis.call('GET', KEYS[1])
if not s then return false end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[1], ARGV[2])
if string.byte(s, 1) ~= ${FORMAT} then return '' end
local sub = fields(s)
return sub
`;

/**
 * A copy of the per-user index: KEYS[1] = `u:{<tag>}`, a sorted set of session ids scored by creation
 * (ms). Each user has two copies on slots half the cluster apart (see user-index.ts), apart from the
 * sessions, so they may hold ids of sessions already gone; readers check, and pruning removes those.
 * ARGV: sid, createdAtMs, ttlSeconds. The key lives at least as long as its newest session could;
 * returns how many ids it holds.
 */
export const INDEX_ADD = `
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
if redis.call('TTL', KEYS[1]) < tonumber(ARGV[3]) then redis.call('EXPIRE', KEYS[1], ARGV[3]) end
return redis.call('ZCARD', KEYS[1])
`;
