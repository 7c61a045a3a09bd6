-- renewHolder: a gateway request holding a synchronous call joins (+1), renews (0) or leaves
-- (-1). `holderAt` = now on join and renew; `holders` counts the open requests (a retry may be
-- sent twice, to two gateways). The reconciler cancels a synchronous task whose holders all
-- stopped renewing (a killed gateway closed its client's stream, C-01); a request that closes
-- cancels only when it was the last holder.
-- KEYS[1] task hash
-- ARGV[1] now (ms), ARGV[2] delta (-1, 0, +1)
-- Returns the number of holders left, or -1 when the task is gone, terminal or not synchronous.
--@include common
local cur = redis.call('HMGET', KEYS[1], 'status', 'mode')
if not cur[1] or isTerminal(cur[1]) or cur[2] ~= 'sync' then return -1 end
local n = redis.call('HINCRBY', KEYS[1], 'holders', tonumber(ARGV[2]))
if n < 0 then
  redis.call('HSET', KEYS[1], 'holders', 0)
  n = 0
end
if tonumber(ARGV[2]) >= 0 then redis.call('HSET', KEYS[1], 'holderAt', ARGV[1]) end
return n
