-- detachSync: a synchronous call ran out of its budget; the work goes on as a task bound to
-- the same owner, which the caller follows with `task_status` (design D1). Holders and the
-- reconciler's orphan rule no longer apply (they are for synchronous calls only).
-- KEYS[1] task hash
-- ARGV[1] now (ms)
-- Returns {'ok', status, statusMessage}, {'terminal', status}, {'gone'} or
-- {'not_sync', status, statusMessage} (statusMessage nil when there is none).
--@include common
local cur = redis.call('HMGET', KEYS[1], 'status', 'mode', 'statusMessage')
if not cur[1] then return {'gone'} end
if isTerminal(cur[1]) then return {'terminal', cur[1]} end
if cur[2] ~= 'sync' then return {'not_sync', cur[1], cur[3]} end
redis.call('HSET', KEYS[1], 'mode', 'task', 'lastUpdatedAt', ARGV[1])
redis.call('HDEL', KEYS[1], 'holders', 'holderAt')
return {'ok', cur[1], cur[3]}
