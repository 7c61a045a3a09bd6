-- completeCounted: working -> completed (completeTask-2.lua) with what the worker used to send
-- around it, in one script and one round trip: the result counted against the principal's
-- budget of stored result bytes (reserveResultBytes), the task's outstanding slot released
-- (releaseOutstanding), its step's checkpoint deleted and, when ARGV[9] = '1' (no completion
-- webhooks: nothing left for the reconciler to make sure of), its reconciler index entry
-- dropped. Its keys are in different Cluster slots (the task's, the principal's, the index), so
-- the worker uses it only on a single Redis or Sentinel, never under Cluster.
-- KEYS[1] task hash, KEYS[2] the task's result key, KEYS[3] its checkpoint key,
-- KEYS[4] zset of the principal's stored results, KEYS[5] their sizes hash,
-- KEYS[6] outstanding zset of the principal, KEYS[7] its reservation times,
-- KEYS[8] the reconciler index
-- ARGV[1] fence, ARGV[2] now (ms), ARGV[3] result JSON, ARGV[4] statusMessage,
-- ARGV[5] notify channel, ARGV[6] taskId, ARGV[7] bytes of the result, ARGV[8] the principal's
-- budget (bytes), ARGV[9] '1' = drop the index entry, ARGV[10] least gap between two budget
-- repairs (ms)
-- Returns {'ok'}; a fence error (a stale or cancelled worker's write is refused, T-13) with
-- nothing written; or {'over_budget', total, oldest expiry (ms), repairDue}: the result does
-- not fit, the task is untouched (only what reserveBytes writes when it refuses).
--@include common
--@include budget
local key = KEYS[1]
local bad, cur = checkFence(key, ARGV[1], unpack(FINISHING))
if bad then return bad end
local vals = tail(cur, 5)
local now = tonumber(ARGV[2])
local taskId = ARGV[6]
local at = finishingExpiry(vals)
local counted = reserveBytes(KEYS[4], KEYS[5], now, taskId, tonumber(ARGV[7]), tonumber(ARGV[8]), at,
  tonumber(ARGV[10]))
if counted[1] ~= 1 then return {'over_budget', counted[2], counted[3], counted[4]} end
writeOutcome(KEYS[2], ARGV[3], at)
finish(key, 'completed', ARGV[2], ARGV[4], ARGV[5], vals)
redis.call('ZREM', KEYS[6], taskId)
redis.call('ZREM', KEYS[7], taskId)
redis.call('DEL', KEYS[3])
if ARGV[9] == '1' then redis.call('ZREM', KEYS[8], taskId) end
return {'ok'}
