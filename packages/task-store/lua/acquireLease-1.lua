-- acquireLease: takes (or renews) one of at most ARGV[3] leases of a principal, for what lives
-- on one gateway process but is limited per principal across all of them (task listen streams,
-- MAX_LISTEN_STREAMS_PER_PRINCIPAL). A lease ends when released or when it is not renewed by
-- its expiry (its gateway died). A refusal writes nothing but the removal of expired leases.
-- KEYS[1] zset of leases (member = lease id, score = expiry, ms)
-- ARGV[1] now (ms), ARGV[2] lease id, ARGV[3] limit, ARGV[4] expiry of this lease (ms)
-- Returns the number of leases held (this one included); when refused, minus the ms until the
-- earliest lease ends unless renewed (at least 1), the client's Retry-After.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if not redis.call('ZSCORE', KEYS[1], ARGV[2]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if not first[2] then
    return -1
  end
  return -math.max(1, tonumber(first[2]) - tonumber(ARGV[1]))
end
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[2])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return redis.call('ZCARD', KEYS[1])
