-- The order record of the two-phase protocol (an order whose lines are in
-- other slots than its record KEYS[1]): the one authority on where the
-- order stands. Its lines follow it (orders_line.lua).
--
-- Fields: s state, k kind ("T" take, "H" hold, "R" restock), c line count,
-- "=<sku>" each line's qty, n the attempt's nonce ("<begin us>.<random>"),
-- w the pending deadline and d the hold's deadline (us), v how many times a
-- reader disarmed a Return (absent: none; see disarm). States:
--   p  pending: lines being taken under n; committed only before w
--   u  undoing: the attempt failed or was abandoned; its lines go back,
--      then the record is deleted (nothing recorded)
--   h  held until d;  t  taken;  r  returned;  e  expired (units go back)
-- A pending take or hold past w becomes u, and a hold past d becomes e, as
-- soon as any op reads the record: the deadline is kept by this server's
-- clock alone, and a Confirm racing an expiry is decided here, once.
--
-- A record's absence tells its lines that their units go back (never
-- committed, expired, returned): so a record taken (t) is kept with no
-- expiry until it is sealed (z = 1), which a client does once every line
-- has heard that it is taken (finalize); only then does its retention
-- start. A committed take is final whatever becomes of the steps after it.
--
-- ARGV[1] op, [2] retention (ms), then per op:
--   begin   [3] kind [4] random [5] hold ttl (us) [6] pending window (us),
--           [7] the attempt's fence point and [8] expiry (us, its client's
--           clock), (sku, qty) from [9] on: records a pending
--           attempt unless the id is recorded; {now, "mismatch"} if it is,
--           settled, with other lines or kind; {now, "stale"} past its
--           expiry, {now, "fenced", "x", R} fenced by the refusal at R (see
--           late in orders_lib.lua), nothing changed; otherwise as view
--   view    reads;  commit [3] nonce: p -> h or t;  abort [3] nonce: p -> u;
--   confirm h -> t;  drop [3] nonce [4] tombstone ttl (ms): deletes a u
--           record, leaving the tombstone of a refusal now
--   return  [3] v as the Return read it before it armed the lines: h or t
--           -> r, unless a reader has disarmed since (flag "disarmed")
--   disarm  h or t: counts v up. A reader does so before it takes back out
--           of the holds a line a Return armed and did not decide in its
--           grace: that Return may be slow rather than dead, and must not
--           decide "returned" once a line no longer waits for the decision
--   seal    [3] nonce: a t record's lines all know it; its retention starts
--   arming  view for a Return about to arm the lines: a t record is unsealed
--           (no expiry, flag "arming"), since an armed line with no record
--           would be given back; the Return's decision gives it its
--           retention, or a reader that takes the lines back seals it again
-- Every op returns {now, flag, field, value, ...} (no fields: no record);
-- flag is "new" for a record begun now, "expired" when this op made it e,
-- "disarmed" for a return refused as above, "arming" (see arming).
local rec, op, retention = KEYS[1], ARGV[1], tonumber(ARGV[2])
local now = now_us()
local flag = ''

local function get(f)
  return call('HGET', rec, f)
end

local function set(s, ttl)
  call('HSET', rec, 's', s)
  if ttl then
    call('PEXPIRE', rec, int(ttl))
  end
end

local s = get('s')
if op == 'begin' then
  local stop = late(now, not s and get(X), ARGV[7], ARGV[8])
  if stop then
    if stop[1] == -16 then
      return {now, 'stale'}
    end
    return {now, 'fenced', X, int(stop[2])}
  end
end
if op == 'begin' and not s then
  local n = (#ARGV - 8) / 2
  local kind, ttl, window = ARGV[3], tonumber(ARGV[5]), tonumber(ARGV[6])
  local d = 0
  if kind == 'H' then
    d = now + ttl
  end
  call('DEL', rec) -- a tombstone this attempt was sent after, if any
  call('HSET', rec, unpack(record_fields('p', kind, argv_lines(9, n),
    'n', int(now) .. '.' .. ARGV[4], 'w', int(now + window), 'd', int(d))))
  call('PEXPIRE', rec, int(math.ceil((window + ttl) / 1000) + retention))
  flag = 'new'
  s = 'p'
elseif s == 'p' and get('k') ~= 'R' and now >= tonumber(get('w')) then
  -- Abandoned (a restock is never undone: its one line only adds).
  s = 'u'
  set(s)
elseif s == 'h' and now >= tonumber(get('d')) then
  s = 'e'
  set(s, retention)
  flag = 'expired'
end

-- Only a settled order can be compared: one pending may yet be undone, and
-- then nothing was applied under its id.
if op == 'begin' and flag ~= 'new' and s ~= 'p' and s ~= 'u' and not same_lines(rec, ARGV[3], argv_lines(9, (#ARGV - 8) / 2)) then
  return {now, 'mismatch'}
end

-- taken keeps the record until it is sealed (see above).
local function taken()
  set('t')
  call('PERSIST', rec)
end

if op == 'commit' and s == 'p' and get('n') == ARGV[3] then
  local k = get('k')
  if k == 'H' then
    set('h', math.ceil((tonumber(get('d')) - now) / 1000) + retention)
  elseif k == 'T' then
    taken()
  else
    -- A restock's line adds units and is never given back: sealed at once.
    call('HSET', rec, 'z', '1')
    set('t', retention)
  end
elseif op == 'abort' and s == 'p' and get('n') == ARGV[3] then
  set('u')
elseif op == 'confirm' and s == 'h' then
  taken()
elseif op == 'seal' and s == 't' and get('n') == ARGV[3] and get('z') ~= '1' then
  call('HSET', rec, 'z', '1')
  call('PEXPIRE', rec, int(retention))
elseif op == 'return' and (s == 'h' or s == 't') then
  if (get('v') or '0') == ARGV[3] then
    set('r', retention)
  else
    flag = 'disarmed'
  end
elseif op == 'arming' and s == 't' and get('k') ~= 'R' then
  call('HDEL', rec, 'z')
  call('PERSIST', rec)
  flag = 'arming'
elseif op == 'disarm' and (s == 'h' or s == 't') then
  call('HINCRBY', rec, 'v', 1)
elseif op == 'drop' and s == 'u' and get('n') == ARGV[3] then
  call('DEL', rec)
  refuse(rec, now, ARGV[4])
end

local out = call('HGETALL', rec)
table.insert(out, 1, flag)
table.insert(out, 1, now)
return out
