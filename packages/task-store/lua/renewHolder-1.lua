-- renewHolder: the gateway holding a synchronous call says it is still there (holderAt = now).
-- The reconciler cancels a synchronous task whose holder stopped renewing (a killed gateway
-- closed the client's stream, which is a cancellation, C-01).
-- KEYS[1] task hash
-- ARGV[1] now (ms)
-- Returns 1 when renewed, 0 when the task is gone, terminal or not synchronous.
--@include common
local cur = redis.call('HMGET', KEYS[1], 'status', 'mode')
if not cur[1] or isTerminal(cur[1]) or cur[2] ~= 'sync' then return 0 end
redis.call('HSET', KEYS[1], 'holderAt', ARGV[1])
return 1
