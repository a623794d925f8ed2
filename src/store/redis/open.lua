-- Open a session: create its meta with a new epoch if it has none. Keys
-- left without a meta (only a misconfigured Redis evicts one key of a
-- session) are orphans of a log nobody can continue: they go.
--
-- KEYS: meta, log, ids, checkpoint
-- ARGV: new epoch, now ms (its idle age until the first append)
-- Returns {created (0/1), meta fields}.
local created = 0
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2], KEYS[3], KEYS[4])
  redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'head', '0', 'first', '1', 'updated', ARGV[2],
    'cp', '0', 'deleted', '0', 'status', '')
  created = 1
end
return {created, redis.call('HMGET', KEYS[1], 'epoch', 'head', 'first', 'status', 'updated', 'deleted', 'base')}
