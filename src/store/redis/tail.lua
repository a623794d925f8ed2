-- Read where a session stands, the events after a cursor and the cursors
-- of some event ids, in one atomic step.
--
-- KEYS: meta, log, ids
-- ARGV: after, limit, then event ids
-- Returns {meta fields, events, cursors} or {} when the session is unknown.
local m = redis.call('HMGET', KEYS[1], 'epoch', 'head', 'first', 'status', 'updated', 'deleted', 'base')
if not m[1] then return {} end
local es = {}
if tonumber(ARGV[2]) > 0 then
  es = redis.call('XRANGE', KEYS[2], string.format('%d-0', tonumber(ARGV[1]) + 1), '+', 'COUNT', ARGV[2])
end
-- In slices: unpack has a stack limit far below the largest batch.
local known = {}
local i = 3
while i <= #ARGV do
  local j = math.min(i + 999, #ARGV)
  local part = redis.call('HMGET', KEYS[3], unpack(ARGV, i, j))
  for _, v in ipairs(part) do known[#known + 1] = v end
  i = j + 1
end
return {m, es, known}
