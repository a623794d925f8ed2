-- Append a batch to one session, atomically: check that it continues the
-- head and the epoch, refuse it if any event id is already in the log,
-- add the events with their cursors as stream ids, keep the newest
-- checkpoint, trim by count and age (never past the checkpoint), update the
-- meta and publish the new head to the nodes listening, and the change
-- (`<node>\n<created|updated>\n<session>`) to every node's session index.
--
-- Turns: a node refused several times in a row asks for the next turn
-- (ARGV claim > 0); while its turn lasts (at most claim ms) the other
-- nodes' appends are refused, so a node can be outrun but not starved.
--
-- KEYS: meta, log, ids, checkpoint, turn (one hash tag: one slot)
-- ARGV: epoch, expected head, n, status ('' = keep), max events, trim
--       received before ms (0 = no age limit), checkpoint cursor (0 = none),
--       checkpoint bytes, channel, node id, claim ms (0 = no claim), index
--       channel, session id, then n x (event id, received ms, fact, frame)
-- Returns {'ok', first, updated, previous updated, was deleted, status, base}
--      or {'conflict', epoch, head} or {'duplicate', event id}.
local meta, log, ids, cpk, turn = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local m = redis.call('HMGET', meta, 'epoch', 'head', 'first', 'updated', 'cp', 'deleted', 'status', 'base')
local head = tonumber(m[2] or '0')
local holder = redis.call('GET', turn)
if holder and holder ~= ARGV[10] then
  return {'conflict', m[1] or '', m[2] or '0'}
end
if m[1] ~= ARGV[1] or head ~= tonumber(ARGV[2]) then
  if tonumber(ARGV[11]) > 0 then
    redis.call('SET', turn, ARGV[10], 'PX', ARGV[11], 'NX')
  end
  return {'conflict', m[1] or '', m[2] or '0'}
end
local n = tonumber(ARGV[3])
local base = 14
for i = 0, n - 1 do
  if redis.call('HEXISTS', ids, ARGV[base + i * 4]) == 1 then
    return {'duplicate', ARGV[base + i * 4]}
  end
end
local prev_updated = tonumber(m[4] or '0')
-- Until the first append, 'updated' is the opening time.
local updated = prev_updated
if head == 0 then updated = 0 end
for i = 0, n - 1 do
  local k = base + i * 4
  local c = string.format('%d', head + 1 + i)
  redis.call('XADD', log, c .. '-0', 'e', ARGV[k], 'r', ARGV[k + 1], 'f', ARGV[k + 2], 'j', ARGV[k + 3])
  redis.call('HSET', ids, ARGV[k], c)
  local r = tonumber(ARGV[k + 1])
  if r > updated then updated = r end
end
local newhead = head + n
local first = tonumber(m[3] or '1')
local cp = tonumber(m[5] or '0')
local cpc = tonumber(ARGV[7])
if cpc > cp then
  redis.call('SET', cpk, ARGV[8])
  cp = cpc
end
-- Retention: by count, then by age; both only behind the checkpoint.
local upto = 0
if cp > 0 then
  local limit = math.min(cp + 1, newhead - tonumber(ARGV[5]) + 1)
  if limit > first then upto = limit - 1 end
  local before = tonumber(ARGV[6])
  if before > 0 then
    local from = math.max(first, upto + 1)
    local scanned = 0
    while from <= cp and scanned < 1024 do
      local es = redis.call('XRANGE', log, string.format('%d-0', from), string.format('%d-0', cp), 'COUNT', 128)
      local stop = #es < 128
      for _, e in ipairs(es) do
        local f = e[2]
        local received = nil
        for j = 1, #f, 2 do
          if f[j] == 'r' then received = tonumber(f[j + 1]) end
        end
        if received == nil or received >= before then
          stop = true
          break
        end
        upto = tonumber(string.match(e[1], '^(%d+)'))
      end
      scanned = scanned + #es
      if stop then break end
      from = upto + 1
    end
  end
end
if upto >= first then
  local es = redis.call('XRANGE', log, '-', string.format('%d-0', upto))
  for _, e in ipairs(es) do
    local f = e[2]
    for j = 1, #f, 2 do
      if f[j] == 'e' then redis.call('HDEL', ids, f[j + 1]) end
    end
  end
  redis.call('XTRIM', log, 'MINID', string.format('%d-0', upto + 1))
  first = upto + 1
end
local status = m[7] or ''
if ARGV[4] ~= '' then status = ARGV[4] end
redis.call('HSET', meta, 'head', string.format('%d', newhead), 'first', string.format('%d', first),
  'updated', string.format('%d', updated), 'cp', string.format('%d', cp), 'deleted', '0', 'status', status)
if holder then redis.call('DEL', turn) end
redis.call('PUBLISH', ARGV[9], ARGV[1] .. ':' .. string.format('%d', newhead))
-- The first append of an incarnation (nothing after its base) creates it.
local change = 'updated'
if head == tonumber(m[8] or '0') then change = 'created' end
redis.call('PUBLISH', ARGV[12], ARGV[10] .. '\n' .. change .. '\n' .. ARGV[13])
return {'ok', string.format('%d', first), string.format('%d', updated), string.format('%d', prev_updated),
  m[6] or '0', status, m[8] or '0'}
