-- leaveShare: a step of principal P stopped running on this worker (ended, parked for input,
-- released on shutdown, aborted). Drops its lease when this run still holds it, and names the
-- waiting steps to wake: the first `limit - running` of P's waiting zset.
-- KEYS[1] running zset of P, KEYS[2] hash of P's lease holders, KEYS[3] waiting zset of P
-- ARGV[1] now (ms), ARGV[2] taskId, ARGV[3] token, ARGV[4] limit
-- Returns the job ids to wake (possibly none). A woken step stays in the waiting zset until it
-- is admitted, so a wake that is lost leaves it first in line for the next one.
local now = tonumber(ARGV[1])
if redis.call('HGET', KEYS[2], ARGV[2]) == ARGV[3] then
  redis.call('ZREM', KEYS[1], ARGV[2])
  redis.call('HDEL', KEYS[2], ARGV[2])
end
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for i = 1, #gone do redis.call('HDEL', KEYS[2], gone[i]) end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) end
local free = tonumber(ARGV[4]) - redis.call('ZCARD', KEYS[1])
if free <= 0 then return {} end
return redis.call('ZRANGE', KEYS[3], 0, free - 1)
