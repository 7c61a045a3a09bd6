-- reserveBytes: counts a completed task's result against its principal's budget of stored
-- result bytes (MAX_RESULT_BYTES_PER_PRINCIPAL), before the result is written. Results expire
-- with their task without telling anyone, so every member carries its expiry and is forgotten
-- once it has passed.
-- members: zset of P's stored results (member taskId, score = the task's expiry, ms)
-- sizes: hash taskId -> bytes of its result; '~total' = the sum; '~repair' = last repair (ms)
-- now (ms, number), taskId, bytes (number), budget (bytes, number), expiry (the task's, ms),
-- repairGap (least gap between two repairs, ms, number)
-- Idempotent per task: a task counted before (its step re-run) is counted with its new size.
-- Returns {1, total} when counted, or {0, total, oldest expiry (ms), repairDue} when the result
-- does not fit (nothing is written but the removal of expired members and the repair mark).
local function reserveBytes(members, sizes, now, taskId, bytes, budget, expiry, repairGap)
  local total = tonumber(redis.call('HGET', sizes, '~total') or '0')
  local gone = redis.call('ZRANGEBYSCORE', members, '-inf', now)
  for i = 1, #gone do
    total = total - tonumber(redis.call('HGET', sizes, gone[i]) or '0')
    redis.call('HDEL', sizes, gone[i])
  end
  if #gone > 0 then redis.call('ZREMRANGEBYSCORE', members, '-inf', now) end
  if total < 0 or redis.call('ZCARD', members) == 0 then total = 0 end
  local prev = tonumber(redis.call('HGET', sizes, taskId) or '0')
  local after = total - prev + bytes
  local function expireWithLast()
    local last = redis.call('ZRANGE', members, -1, -1, 'WITHSCORES')
    if last[2] then
      redis.call('PEXPIREAT', members, last[2])
      redis.call('PEXPIREAT', sizes, last[2])
    else
      redis.call('DEL', members, sizes)
    end
  end
  if after > budget then
    local due = 0
    local last = redis.call('HGET', sizes, '~repair')
    if not last or now - tonumber(last) >= repairGap then
      due = 1
      redis.call('HSET', sizes, '~repair', now)
    end
    if #gone > 0 then redis.call('HSET', sizes, '~total', total) end
    local oldest = redis.call('ZRANGE', members, 0, 0, 'WITHSCORES')
    expireWithLast()
    return {0, total, tonumber(oldest[2] or now), due}
  end
  redis.call('ZADD', members, expiry, taskId)
  redis.call('HSET', sizes, taskId, bytes, '~total', after)
  expireWithLast()
  return {1, after}
end
