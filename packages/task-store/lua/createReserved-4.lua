-- createReserved: a new task's slot among its principal's outstanding tasks (reserveOutstanding),
-- its record (createTask) and its reconciler index entry (scheduleReconcile), in one script and
-- one round trip. Its keys are in different Cluster slots (a principal's, a task's, the index),
-- so the store uses it only on a single Redis or Sentinel, never under Cluster.
-- KEYS[1] task hash, KEYS[2] outstanding zset of the principal, KEYS[3] its reservation times,
-- KEYS[4] the reconciler index
-- ARGV[1] now (ms), ARGV[2] taskId, ARGV[3] limit, ARGV[4] the task's expiry (unix ms),
-- ARGV[5] least gap between two repairs (ms), ARGV[6] the index score (when to look, ms),
-- ARGV[7] the index's TTL (ms), ARGV[8..] field, value pairs of the record
-- Returns {1, count} when created; {0, count, repairDue} when refused at the limit (nothing
-- written but the repair time, as reserveOutstanding); {-1} when the id is taken (nothing kept).
--@include outstanding
local now = tonumber(ARGV[1])
local taskId = ARGV[2]
if redis.call('EXISTS', KEYS[1]) == 1 then return {-1} end
local r = reserve(KEYS[2], KEYS[3], now, taskId, tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5]))
if r[1] ~= 1 then return r end
local fields = {}
for i = 8, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('PEXPIREAT', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[4], ARGV[6], taskId)
redis.call('PEXPIRE', KEYS[4], ARGV[7])
return r
