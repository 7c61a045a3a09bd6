-- reserveOutstanding: counts a new task against its principal's MAX_OUTSTANDING_TASKS (issue 10
-- §4), atomically, so two replicas can never both pass at limit - 1. Called before the task
-- record is written. A refused request creates no key.
-- KEYS[1] outstanding zset of the principal (member taskId, score = the task's expiry, ms)
-- KEYS[2] reservation times (member taskId, score = when it was reserved, ms), plus the member
--         '~repair' scored with the time of the last repair
-- ARGV[1] now (ms), ARGV[2] taskId, ARGV[3] limit, ARGV[4] the task's expiry (ms),
-- ARGV[5] least gap between two repairs (ms)
-- Members whose expiry has passed (their record is gone) are dropped first. Both zsets expire
-- with their last member (PEXPIREAT = the highest expiry).
-- Returns {1, count} when reserved (count includes this task; an id already reserved counts
-- once), or {0, count, repairDue}: refused at the limit; repairDue = 1 when no repair ran in
-- the last ARGV[5] ms (the caller then checks the members' records for lost releases).
local now = tonumber(ARGV[1])
local function expireWithLast()
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if last[2] then
    redis.call('PEXPIREAT', KEYS[1], last[2])
    redis.call('PEXPIREAT', KEYS[2], last[2])
  end
end
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for i = 1, #gone, 1000 do
  local chunk = {}
  for j = i, math.min(i + 999, #gone) do chunk[#chunk + 1] = gone[j] end
  redis.call('ZREM', KEYS[1], unpack(chunk))
  redis.call('ZREM', KEYS[2], unpack(chunk))
end
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then return {1, redis.call('ZCARD', KEYS[1])} end
local n = redis.call('ZCARD', KEYS[1])
if n >= tonumber(ARGV[3]) then
  local last = redis.call('ZSCORE', KEYS[2], '~repair')
  if last and now - tonumber(last) < tonumber(ARGV[5]) then return {0, n, 0} end
  redis.call('ZADD', KEYS[2], now, '~repair')
  expireWithLast()
  return {0, n, 1}
end
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[1], ARGV[2])
expireWithLast()
return {1, n + 1}
