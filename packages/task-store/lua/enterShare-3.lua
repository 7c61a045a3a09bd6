-- enterShare: a worker asks to run a step of principal P while at most ARGV[4] of P's steps run
-- at once across every worker (MAX_RUNNING_STEPS_PER_PRINCIPAL). Checked before the claim, so a
-- step that must wait has changed nothing on its task.
-- KEYS[1] running zset of P (member taskId, score = lease expiry, ms)
-- KEYS[2] hash of P's lease holders (taskId -> run token: the BullMQ job lock token)
-- KEYS[3] waiting zset of P (member jobId, score = when it first had to wait, ms)
-- ARGV[1] now (ms), ARGV[2] taskId, ARGV[3] token, ARGV[4] limit, ARGV[5] lease expiry (ms),
-- ARGV[6] jobId, ARGV[7] lifetime of the waiting zset after its last change (ms)
-- Leases past their expiry (a worker that died without leaving) are dropped first. A task that
-- already holds a lease (a re-run of its step elsewhere) takes it over: one task counts once.
-- Returns {1, running, waited}: admitted (waited = 1 when it had been waiting), or
--         {0, running, rank, first}: over the limit; rank = its place among P's waiting steps
--         (0 = next), first = 1 when it was not waiting before.
local now = tonumber(ARGV[1])
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for i = 1, #gone do redis.call('HDEL', KEYS[2], gone[i]) end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) end
if redis.call('ZSCORE', KEYS[1], ARGV[2]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[4]) then
  local waited = redis.call('ZREM', KEYS[3], ARGV[6])
  redis.call('ZADD', KEYS[1], ARGV[5], ARGV[2])
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', KEYS[1], last[2])
  redis.call('PEXPIREAT', KEYS[2], last[2])
  return {1, redis.call('ZCARD', KEYS[1]), waited}
end
local first = redis.call('ZADD', KEYS[3], 'NX', now, ARGV[6])
redis.call('PEXPIRE', KEYS[3], ARGV[7])
return {0, redis.call('ZCARD', KEYS[1]), redis.call('ZRANK', KEYS[3], ARGV[6]), first}
