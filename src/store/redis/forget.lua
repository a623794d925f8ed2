-- Forget a session that was opened but never appended to, if it was opened
-- before ARGV[1]: its keys go and no tombstone stays (none of its cursors
-- was ever handed out). A node still holding its epoch finds it gone at its
-- next read and starts over with `reset` + `snapshot`.
--
-- KEYS: meta, log, ids, checkpoint, turn
-- ARGV: opened before ms
-- Returns 1 when the session went, else 0.
local m = redis.call('HMGET', KEYS[1], 'head', 'deleted', 'updated')
if m[1] ~= '0' or m[2] == '1' or tonumber(m[3] or '0') >= tonumber(ARGV[1]) then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
return 1
