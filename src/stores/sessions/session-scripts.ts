/**
 * The scripts that must be atomic, and nothing else. Every key is passed in KEYS (never built inside
 * a script), and all the keys of a script share one hash tag slot, so it runs on one slot of a Redis
 * Cluster. Revoking scripts PUBLISH the session id on the revocation channel (ARGV) from inside the
 * script, so the message leaves the node that holds the session, in the same step as the delete.
 *
 * Sessions (format 5) live in their user's hash, `ss:{<user tag>}` (see user-index.ts), one field per
 * session: the random part of its id. The field `u` holds the user name, once per hash. A session's
 * value holds no token and no digest of one (refresh tokens are derived from the refresh key and the
 * generation, see refresh-token.ts), fixed-width fields first:
 *   byte 1        state: 5 live, 6 pending (a create waiting for its replicas: no command but ACTIVATE
 *                 takes it, and it expires within PENDING_TTL_SECONDS)
 *   bytes 2-7     created at, ms (Redis's clock)
 *   bytes 8-13    last rotation at, ms (the gateway's clock; = created at until the first one)
 *   bytes 14-17   the current refresh generation
 *   bytes 18-21   expires at, s (Redis's clock): fields have no TTL of their own; the hash lives as
 *                 long as its longest-lived session, and expired fields are dropped by creates (a few
 *                 sampled), listings and revocations, and read as absent by everything else
 *   2 bytes       length of uv (credential version), then uv
 *   4 bytes       (only with a legacy record, below) until when the legacy record is kept, s (Redis's
 *                 clock); releases that do not know it keep it (they copy everything after the expiry)
 * 22 + uv bytes (38 with a 16-byte uv; 42 with the legacy mark): well inside hash-max-listpack-value
 * (64), so a user's hash of up to hash-max-listpack-entries (128) sessions stays a listpack.
 *
 * Format 4 (before): one string key `s:{sid}` per session and a per-user index of sorted sets
 * `u:{<tag>}`; sessions of 22-character ids are still read, rotated and revoked there (LEGACY_*) until
 * they expire.
 *
 * The legacy record (store.writeLegacySessions): beside a session of format 5, its record in format 4,
 * `s:{sid}` (the user, the times, generation 0 or the current one, an empty uv), and its id in the user's
 * format-4 index `u:{<tag of its hash>}`: what a release of format 4 (c247b92 and earlier) reads to
 * revoke a session, by token or by user. The session's id is chosen so that both are on its hash's slot
 * (sessionIdOnItsSlot), so the scripts below take them as KEYS[2] and KEYS[3] and keep them in the same
 * step as the session: written with it, renewed with its rotations, deleted with it. Such a release
 * revokes by deleting the record: a session whose mark is not past and whose record is gone is revoked
 * (legacyGone), and the first script that sees it deletes the field. Without KEYS[2] (a session made
 * without a record) none of this applies.
 */

export const LIVE = 5;
const PENDING = 6;
export const PENDING_TTL_SECONDS = 60;
/** Format 4: the layout of `s:{sid}` (no session is created in it any more; legacy records are written in it). */
export const FORMAT = 4;

/** Big-endian integers (exact in Lua's doubles for any ms timestamp), for both layouts. */
const INTEGERS = `
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
`;

/** The integers, the clock, a hash's lifetime, and the legacy record (KEYS[2], KEYS[3]). */
const CODEC5 = `${INTEGERS}
local t = redis.call('TIME')
local nowS = tonumber(t[1])
local nowMs = nowS * 1000 + math.floor(tonumber(t[2]) / 1000)
local function live(r) return r and string.byte(r, 1) == ${LIVE} and uint(r, 18, 4) > nowS end
local function current(r) return r and uint(r, 18, 4) > nowS end
local function uvOf(r) return string.sub(r, 24, 23 + uint(r, 22, 2)) end
local function extend(key, seconds)
  local ttl = redis.call('TTL', key)
  if ttl >= 0 and ttl < seconds then redis.call('EXPIRE', key, seconds) end
end
-- The value up to its uv (byte 22 on), and what follows it (the legacy mark, or nothing).
local function uvPart(r) return string.sub(r, 22, 23 + uint(r, 22, 2)) end
local function tail(r) return string.sub(r, 24 + uint(r, 22, 2)) end
local function legacyUntil(r)
  local at = 24 + uint(r, 22, 2)
  if string.len(r) < at + 3 then return 0 end
  return uint(r, at, 4)
end
-- Revoked by a release of format 4: the record it deletes is gone while the mark says it is kept.
local function legacyGone(r)
  return KEYS[2] ~= nil and legacyUntil(r) > nowS and redis.call('EXISTS', KEYS[2]) == 0
end
local function legacyRecord(createdMs, refreshedMs, generation, sub)
  return string.char(${FORMAT}) .. pack(createdMs, 6) .. pack(refreshedMs, 6) .. pack(generation, 4) .. pack(string.len(sub), 2) .. sub .. pack(0, 2)
end
-- The record and the index entry for \`seconds\` more; answers the mark.
local function keepLegacy(record, sid, seconds)
  redis.call('SET', KEYS[2], record, 'EX', seconds)
  redis.call('ZADD', KEYS[3], nowMs, sid)
  if redis.call('TTL', KEYS[3]) < seconds then redis.call('EXPIRE', KEYS[3], seconds) end
  return pack(nowS + seconds, 4)
end
local function dropLegacy(sid)
  if KEYS[2] then
    redis.call('DEL', KEYS[2])
    redis.call('ZREM', KEYS[3], sid)
  end
end
`;

/**
 * KEYS[1] = the user's hash; KEYS[2], KEYS[3] = the legacy record and index, to write them too.
 * ARGV: field, ttlSeconds, sub, uv, pendingSeconds (0: live at once), sid. Refuses (error) a hash of
 * another user (a 132-bit digest collision). Drops a few expired fields, sampled, past 8 of them.
 */
export const CREATE5 = `${CODEC5}
local owner = redis.call('HGET', KEYS[1], 'u')
if owner and owner ~= ARGV[3] then return redis.error_reply('ERR session hash of another user') end
if redis.call('HLEN', KEYS[1]) > 9 then
  for _, f in ipairs(redis.call('HRANDFIELD', KEYS[1], 4)) do
    if f ~= 'u' and not current(redis.call('HGET', KEYS[1], f)) then redis.call('HDEL', KEYS[1], f) end
  end
end
local pending = tonumber(ARGV[5]) > 0
local life = pending and tonumber(ARGV[5]) or tonumber(ARGV[2])
local mark = ''
if KEYS[2] then mark = keepLegacy(legacyRecord(nowMs, nowMs, 0, ARGV[3]), ARGV[6], life) end
local fresh = redis.call('EXISTS', KEYS[1]) == 0
redis.call('HSET', KEYS[1], 'u', ARGV[3], ARGV[1], string.char(pending and ${PENDING} or ${LIVE}) .. pack(nowMs, 6) .. pack(nowMs, 6) .. pack(0, 4) .. pack(nowS + life, 4) .. pack(string.len(ARGV[4]), 2) .. ARGV[4] .. mark)
if fresh then redis.call('EXPIRE', KEYS[1], life) else extend(KEYS[1], life) end
return 1
`;

/**
 * KEYS[1] = the user's hash (KEYS[2], KEYS[3]: the legacy record and index). ARGV: field, ttlSeconds.
 * A pending session made live (its legacy record kept as long); 0 when it is gone.
 */
export const ACTIVATE5 = `${CODEC5}
local r = redis.call('HGET', KEYS[1], ARGV[1])
if not r or string.byte(r, 1) ~= ${PENDING} or uint(r, 18, 4) <= nowS then return 0 end
if legacyGone(r) then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 0
end
local ttl = tonumber(ARGV[2])
local mark = tail(r)
if KEYS[2] and legacyUntil(r) > nowS then
  redis.call('EXPIRE', KEYS[2], ttl)
  redis.call('EXPIRE', KEYS[3], math.max(ttl, redis.call('TTL', KEYS[3])))
  mark = pack(nowS + ttl, 4)
end
redis.call('HSET', KEYS[1], ARGV[1], string.char(${LIVE}) .. string.sub(r, 2, 17) .. pack(nowS + ttl, 4) .. uvPart(r) .. mark)
extend(KEYS[1], ttl)
return 1
`;

/**
 * KEYS[1] = the user's hash (KEYS[2]: the legacy record). ARGV: field. The ms the session has left, or
 * -2 when it is not live (a session revoked through its legacy record is deleted here).
 */
export const LIVE5 = `${CODEC5}
local r = redis.call('HGET', KEYS[1], ARGV[1])
if not live(r) then return -2 end
if legacyGone(r) then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return -2
end
return uint(r, 18, 4) * 1000 - nowMs
`;

/**
 * KEYS[1] = the user's hash (KEYS[2], KEYS[3]: the legacy record and index). ARGV: field, presented
 * generation, ttlSeconds, graceMs, nowMs, channel, sid, 1 to renew the legacy record (0: it lapses at
 * its mark). Returns as ROTATE_REFRESH (the same rules); a session revoked through its legacy record is
 * unknown (and deleted).
 */
export const ROTATE5 = `${CODEC5}
local r = redis.call('HGET', KEYS[1], ARGV[1])
if not live(r) then return {0} end
if legacyGone(r) then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return {0}
end
local sub = redis.call('HGET', KEYS[1], 'u')
local current = uint(r, 14, 4)
local presented = tonumber(ARGV[2])
if presented >= current then
  local ttl = tonumber(ARGV[3])
  local mark = tail(r)
  if KEYS[2] and ARGV[8] == '1' and legacyUntil(r) > nowS then
    mark = keepLegacy(legacyRecord(uint(r, 2, 6), tonumber(ARGV[5]), presented + 1, sub), ARGV[7], ttl)
  end
  redis.call('HSET', KEYS[1], ARGV[1], string.sub(r, 1, 7) .. pack(tonumber(ARGV[5]), 6) .. pack(presented + 1, 4) .. pack(nowS + ttl, 4) .. uvPart(r) .. mark)
  extend(KEYS[1], ttl)
  return {1, sub, uvOf(r), presented + 1, 0, uint(r, 2, 6)}
end
if presented == current - 1 and tonumber(ARGV[4]) > 0 then
  return {1, sub, uvOf(r), current, 1, uint(r, 2, 6)}
end
redis.call('HDEL', KEYS[1], ARGV[1])
dropLegacy(ARGV[7])
redis.call('PUBLISH', ARGV[6], ARGV[7])
return {3}
`;

/**
 * KEYS[1] = the user's hash (KEYS[2], KEYS[3]: the legacy record and index, deleted too). ARGV: field,
 * channel, sid. Deletes the field (also a pending or expired one), publishes the id and returns the user
 * when the session was live; else false (nil).
 */
export const REVOKE5 = `${CODEC5}
local r = redis.call('HGET', KEYS[1], ARGV[1])
local gone = r and legacyGone(r)
dropLegacy(ARGV[3])
if not r then return false end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('PUBLISH', ARGV[2], ARGV[3])
if gone or not live(r) then return false end
return redis.call('HGET', KEYS[1], 'u')
`;

/**
 * KEYS[1] = the user's hash. ARGV: sub, channel, id prefix (user tag and copy). Deletes the hash when
 * it is the user's, publishing every id in it; returns {live sessions ended, ids...}. (Legacy records
 * are deleted through the user's legacy index, as format-4 sessions are.)
 */
export const REVOKE_USER5 = `${CODEC5}
if redis.call('HGET', KEYS[1], 'u') ~= ARGV[1] then return {0} end
local all = redis.call('HGETALL', KEYS[1])
local out = {0}
for i = 1, #all, 2 do
  if all[i] ~= 'u' then
    if live(all[i + 1]) then out[1] = out[1] + 1 end
    table.insert(out, ARGV[3] .. all[i])
    redis.call('PUBLISH', ARGV[2], ARGV[3] .. all[i])
  end
end
redis.call('DEL', KEYS[1])
return out
`;

/**
 * KEYS[1] = the user's hash. ARGV: sub. Its live sessions {field, value, ...} (pending ones left out),
 * after dropping the expired ones; {} for a hash of another user. (A session revoked through its legacy
 * record is still here: the caller checks those with a mark, see LIVE5.)
 */
export const LIST5 = `${CODEC5}
if redis.call('HGET', KEYS[1], 'u') ~= ARGV[1] then return {} end
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  if all[i] ~= 'u' then
    if live(all[i + 1]) then
      table.insert(out, all[i]); table.insert(out, all[i + 1])
    elseif not current(all[i + 1]) then
      redis.call('HDEL', KEYS[1], all[i])
    end
  end
end
return out
`;

/** The integers, and a format-4 record's fields. */
const CODEC = `${INTEGERS}
local function fields(s)
  local subLen = uint(s, 18, 2)
  local uvAt = 20 + subLen
  return string.sub(s, 20, 19 + subLen), string.sub(s, uvAt + 2, uvAt + 1 + uint(s, uvAt, 2))
end
`;

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
export const LEGACY_ROTATE = `${CODEC}
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
export const LEGACY_REVOKE = `${CODEC}
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

/**
 * Files a session under a tag (back-channel logout: a provider's session or user): KEYS[1] the tag's
 * sorted set; ARGV sid, when the filing lapses (ms), now (ms), the lifetime (ms). Lapsed entries are
 * dropped; the set lives as long as its longest entry.
 */
export const TAG_ADD = `
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[4]) then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
return 1
`;

/**
 * A session's device note: KEYS[1] the user's hash of notes, ARGV[1] the session id, ARGV[2] the note
 * (JSON with \`e\`, when it lapses, ms), ARGV[3] now (ms), ARGV[4] its lifetime (ms). Notes lapsed are
 * dropped here (a user's hash holds a few), and the hash lives as long as its longest note.
 */
export const DEVICE_NOTE = `
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  local ok, note = pcall(cjson.decode, redis.call('HGET', KEYS[1], field))
  if not ok or type(note) ~= 'table' or type(note.e) ~= 'number' or note.e <= tonumber(ARGV[3]) then redis.call('HDEL', KEYS[1], field) end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[4]) then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
return 1
`;
