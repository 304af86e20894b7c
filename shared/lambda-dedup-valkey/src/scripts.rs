//! The server-side scripts: each decision and its writes in one script, which Valkey runs
//! atomically (no other command runs in between). Every script reads first and writes only
//! once nothing can fail any more: Valkey does not roll a script back.
//!
//! A mark is a hash of the fields `s` (status), `o` (owner), `l` (lease end, epoch ms), `e`
//! (expiry, epoch s), `f` (fingerprint), `r` (result), `a` (first attempt, epoch ms) and `c`
//! (completion, epoch ms); every script that writes one sets the key's own expiry (`PEXPIRE`)
//! to the mark's, so Valkey deletes it when the retention is over. Expiry is also judged at
//! read by the store's clock (`e`), so a mark the server has not yet deleted counts as absent.

/// The fields of a mark, in the order every script returns them.
pub(crate) const FIELDS: [&str; 8] = ["s", "o", "l", "e", "f", "r", "a", "c"];

/// What every script shares: the field list, and whether a mark stands in the way of a new
/// write (`ARGV[1]` now in ms, `ARGV[2]` now in s, `fp` the offered fingerprint or '').
const PRELUDE: &str = r#"
local F = {'s', 'o', 'l', 'e', 'f', 'r', 'a', 'c'}
local function blocks(m, now_ms, now_s, fp)
  if not m[1] or tonumber(m[4]) <= now_s then return false end
  local free = m[1] == 'IN_PROGRESS' and tonumber(m[3] or '0') <= now_ms
    and (fp == '' or not m[5] or m[5] == fp)
  return not free
end
"#;

/// Claim: `KEYS[1]` the mark; `ARGV`: now ms, now s, owner, lease end ms, expiry s, expiry in
/// ms from now, fingerprint or ''. Returns `{'claimed', first}` or `{'seen', fields…}`.
const CLAIM: &str = r#"
local m = redis.call('HMGET', KEYS[1], unpack(F))
local now_ms, now_s = tonumber(ARGV[1]), tonumber(ARGV[2])
if blocks(m, now_ms, now_s, ARGV[7]) then return {'seen', unpack(m)} end
local first = ARGV[1]
if m[1] and tonumber(m[4]) > now_s then first = m[7] end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 's', 'IN_PROGRESS', 'o', ARGV[3], 'l', ARGV[4], 'e', ARGV[5], 'a', first)
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'f', ARGV[7]) end
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return {'claimed', first}
"#;

/// Commit: `KEYS[1]` the mark, `KEYS[2..]` the effects' keys; `ARGV`: now ms, now s, expiry s,
/// expiry in ms from now, fingerprint or '', '1' when a result follows, the result, the number
/// of effects, then per effect its guard count, op count and 4 slots per guard and op (kind,
/// key index, two arguments). Returns `{'applied'}`, `{'seen', fields…}`, `{'rejected',
/// index}` or `{'refused', index, code}`.
const COMMIT: &str = r#"
local LIMIT = 9007199254740992
local function int(v)
  if not v then return 0 end
  if v ~= '0' and not string.match(v, '^%-?[1-9]%d*$') then return nil end
  if #v > 17 then return nil end
  return tonumber(v)
end
local function kind_of(key) return redis.call('TYPE', key)['ok'] end
local function guard(kind, key, a, b)
  if kind == 'ex' then return redis.call('EXISTS', key) == 1 end
  if kind == 'ab' then return redis.call('EXISTS', key) == 0 end
  if kind_of(key) ~= 'hash' then return false end
  local v = redis.call('HGET', key, a)
  if kind == 'eq' then return v == b end
  if not v then return false end
  local n = int(v)
  return n ~= nil and n >= tonumber(b)
end
local function check(kind, key, a, b)
  if kind == 'set' or kind == 'del' then return nil end
  local t = kind_of(key)
  local want = 'hash'
  if kind == 'incr' then want = 'string' end
  if t ~= 'none' and t ~= want then return 'WRONGTYPE' end
  if kind == 'hset' then return nil end
  local v, by
  if kind == 'incr' then v, by = redis.call('GET', key), tonumber(a)
  else v, by = redis.call('HGET', key, a), tonumber(b) end
  local n = int(v)
  if n == nil then return 'NOT_AN_INTEGER' end
  if math.abs(n) > LIMIT or math.abs(n + by) > LIMIT then return 'OVERFLOW' end
  return nil
end
local m = redis.call('HMGET', KEYS[1], unpack(F))
if blocks(m, tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[5]) then return {'seen', unpack(m)} end
local pos, ops = 9, {}
for i = 1, tonumber(ARGV[8]) do
  local ng, no = tonumber(ARGV[pos]), tonumber(ARGV[pos + 1])
  pos = pos + 2
  for _ = 1, ng do
    if not guard(ARGV[pos], KEYS[tonumber(ARGV[pos + 1])], ARGV[pos + 2], ARGV[pos + 3]) then
      return {'rejected', tostring(i - 1)}
    end
    pos = pos + 4
  end
  for _ = 1, no do
    local op = {ARGV[pos], KEYS[tonumber(ARGV[pos + 1])], ARGV[pos + 2], ARGV[pos + 3]}
    local code = check(op[1], op[2], op[3], op[4])
    if code then return {'refused', tostring(i - 1), code} end
    ops[#ops + 1] = op
    pos = pos + 4
  end
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 's', 'COMPLETED', 'e', ARGV[3], 'a', ARGV[1], 'c', ARGV[1])
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'f', ARGV[5]) end
if ARGV[6] == '1' then redis.call('HSET', KEYS[1], 'r', ARGV[7]) end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
for _, op in ipairs(ops) do
  local kind, key, a, b = op[1], op[2], op[3], op[4]
  if kind == 'set' then
    if b == '' then redis.call('SET', key, a) else redis.call('SET', key, a, 'PX', b) end
  elseif kind == 'hset' then redis.call('HSET', key, a, b)
  elseif kind == 'hincr' then redis.call('HINCRBY', key, a, b)
  elseif kind == 'incr' then redis.call('INCRBY', key, a)
  elseif kind == 'del' then redis.call('DEL', key) end
end
return {'applied'}
"#;

/// Complete, fenced on the owner: `KEYS[1]` the mark; `ARGV`: now ms, owner, '1' when a
/// result follows, the result. Returns `{'done'}` or `{'fenced', fields…}`.
const COMPLETE: &str = r#"
local m = redis.call('HMGET', KEYS[1], unpack(F))
if m[1] == 'IN_PROGRESS' and m[2] == ARGV[2] then
  redis.call('HSET', KEYS[1], 's', 'COMPLETED', 'c', ARGV[1])
  redis.call('HDEL', KEYS[1], 'l')
  if ARGV[3] == '1' then redis.call('HSET', KEYS[1], 'r', ARGV[4]) end
  return {'done'}
end
if m[1] == 'COMPLETED' and m[2] == ARGV[2] then return {'done'} end
return {'fenced', unpack(m)}
"#;

/// Release, fenced on the owner: `KEYS[1]` the mark; `ARGV`: now ms, owner. The lease ends
/// at once and the owner becomes `released-<owner>`, so a second release is harmless and the
/// released lease can fence nothing else. Returns `{'done'}` or `{'fenced', fields…}`.
const RELEASE: &str = r#"
local m = redis.call('HMGET', KEYS[1], unpack(F))
local released = 'released-' .. ARGV[2]
if m[1] == 'IN_PROGRESS' and (m[2] == ARGV[2] or m[2] == released) then
  redis.call('HSET', KEYS[1], 'l', '0', 'o', released)
  return {'done'}
end
if not m[1] then return {'done'} end
return {'fenced', unpack(m)}
"#;

/// The scripts, loaded once per store (`EVALSHA`, with `SCRIPT LOAD` again after a restart).
#[derive(Debug)]
pub(crate) struct Scripts {
    pub(crate) claim: redis::Script,
    pub(crate) commit: redis::Script,
    pub(crate) complete: redis::Script,
    pub(crate) release: redis::Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        // `#!lua` (no flags): a script that may write, so a server out of memory refuses it
        // before it runs rather than at its first write.
        let script = |body: &str| redis::Script::new(&format!("#!lua\n{PRELUDE}{body}"));
        Self {
            claim: script(CLAIM),
            commit: script(COMMIT),
            complete: script(COMPLETE),
            release: script(RELEASE),
        }
    }
}
