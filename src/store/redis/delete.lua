-- Delete a session: drop its log, ids and checkpoint; leave a tombstone
-- meta with a new epoch whose cursors continue after the old head; tell the
-- nodes listening.
--
-- With ARGV idle before > 0 (the retention sweep), only a live session
-- whose last append is older than that goes; otherwise nothing changes.
--
-- KEYS: meta, log, ids, checkpoint
-- ARGV: new epoch, now ms, channel, idle before ms (0 = always), index
--       channel, node id, session id (the index hears
--       `<node>\ndeleted\n<session>`)
-- Returns the tombstone's meta fields, or {} when nothing was deleted.
local before = tonumber(ARGV[4])
if before > 0 then
  local m = redis.call('HMGET', KEYS[1], 'updated', 'deleted')
  if not m[1] or m[2] == '1' or tonumber(m[1]) >= before then
    return {}
  end
end
local head = tonumber(redis.call('HGET', KEYS[1], 'head') or '0')
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'head', string.format('%d', head),
  'first', string.format('%d', head + 1), 'updated', ARGV[2], 'cp', '0', 'deleted', '1', 'status', '',
  'base', string.format('%d', head))
redis.call('PUBLISH', ARGV[3], ARGV[1] .. ':' .. string.format('%d', head))
redis.call('PUBLISH', ARGV[5], ARGV[6] .. '\ndeleted\n' .. ARGV[7])
return redis.call('HMGET', KEYS[1], 'epoch', 'head', 'first', 'status', 'updated', 'deleted', 'base')
