-- reserve: counts a new task against its principal's MAX_OUTSTANDING_TASKS, atomically, so two
-- replicas can never both pass at limit - 1. A refused reservation writes no member.
-- outstanding: zset of the principal (member taskId, score = the task's expiry, ms)
-- since: reservation times (member taskId, score = when it was reserved, ms), plus the member
--        '~repair' scored with the time of the last repair
-- Members whose expiry has passed (their record is gone) are dropped first. Both zsets expire
-- with their last member (PEXPIREAT = the highest expiry).
-- Returns {1, count} when reserved (count includes this task; an id already reserved counts
-- once), or {0, count, repairDue}: refused at the limit; repairDue = 1 when no repair ran in
-- the last `repairGap` ms (the caller then checks the members' records for lost releases).
local function reserve(outstanding, since, now, taskId, limit, expiry, repairGap)
  local function expireWithLast()
    local last = redis.call('ZRANGE', outstanding, -1, -1, 'WITHSCORES')
    if last[2] then
      redis.call('PEXPIREAT', outstanding, last[2])
      redis.call('PEXPIREAT', since, last[2])
    end
  end
  local gone = redis.call('ZRANGEBYSCORE', outstanding, '-inf', now)
  for i = 1, #gone, 1000 do
    local chunk = {}
    for j = i, math.min(i + 999, #gone) do chunk[#chunk + 1] = gone[j] end
    redis.call('ZREM', outstanding, unpack(chunk))
    redis.call('ZREM', since, unpack(chunk))
  end
  if redis.call('ZSCORE', outstanding, taskId) then return {1, redis.call('ZCARD', outstanding)} end
  local n = redis.call('ZCARD', outstanding)
  if n >= limit then
    local last = redis.call('ZSCORE', since, '~repair')
    if last and now - tonumber(last) < repairGap then return {0, n, 0} end
    redis.call('ZADD', since, now, '~repair')
    expireWithLast()
    return {0, n, 1}
  end
  redis.call('ZADD', outstanding, expiry, taskId)
  redis.call('ZADD', since, now, taskId)
  expireWithLast()
  return {1, n + 1}
end
