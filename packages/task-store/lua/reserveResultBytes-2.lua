-- reserveResultBytes: counts a completed task's result against its principal's budget of stored
-- result bytes (MAX_RESULT_BYTES_PER_PRINCIPAL), before the result is written. Results expire
-- with their task without telling anyone, so every member carries its expiry and is forgotten
-- once it has passed.
-- KEYS[1] zset of P's stored results (member taskId, score = the task's expiry, ms)
-- KEYS[2] hash: taskId -> bytes of its result; '~total' = the sum; '~repair' = last repair (ms)
-- ARGV[1] now (ms), ARGV[2] taskId, ARGV[3] bytes, ARGV[4] budget (bytes), ARGV[5] the task's
-- expiry (ms), ARGV[6] least gap between two repairs (ms)
-- Idempotent per task: a task counted before (its step re-run) is counted with its new size.
-- Returns {1, total} when counted, or {0, total, oldest expiry (ms), repairDue} when the result
-- does not fit (nothing is written but the removal of expired members and the repair mark).
local now = tonumber(ARGV[1])
local total = tonumber(redis.call('HGET', KEYS[2], '~total') or '0')
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for i = 1, #gone do
  total = total - tonumber(redis.call('HGET', KEYS[2], gone[i]) or '0')
  redis.call('HDEL', KEYS[2], gone[i])
end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) end
if total < 0 or redis.call('ZCARD', KEYS[1]) == 0 then total = 0 end
local prev = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0')
local after = total - prev + tonumber(ARGV[3])
local function expireWithLast()
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIREAT', KEYS[1], last[2])
    redis.call('PEXPIREAT', KEYS[2], last[2])
  else
    redis.call('DEL', KEYS[1], KEYS[2])
  end
end
if after > tonumber(ARGV[4]) then
  local due = 0
  local last = redis.call('HGET', KEYS[2], '~repair')
  if not last or now - tonumber(last) >= tonumber(ARGV[6]) then
    due = 1
    redis.call('HSET', KEYS[2], '~repair', now)
  end
  if #gone > 0 then redis.call('HSET', KEYS[2], '~total', total) end
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  expireWithLast()
  return {0, total, tonumber(oldest[2] or now), due}
end
redis.call('ZADD', KEYS[1], ARGV[5], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3], '~total', after)
expireWithLast()
return {1, after}
