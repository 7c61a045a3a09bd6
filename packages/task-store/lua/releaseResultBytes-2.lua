-- releaseResultBytes: stops counting task ARGV[1]'s result against its principal's budget
-- (reserveResultBytes-2.lua): its result was not written after all (the task had ended or its
-- fence was taken), or a repair found that it never was. Idempotent.
-- KEYS[1] zset of P's stored results, KEYS[2] hash of their sizes and the total
-- ARGV[1] taskId
-- Returns the total left (bytes).
local bytes = redis.call('HGET', KEYS[2], ARGV[1])
if not bytes then return tonumber(redis.call('HGET', KEYS[2], '~total') or '0') end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
local total = math.max(0, tonumber(redis.call('HGET', KEYS[2], '~total') or '0') - tonumber(bytes))
if redis.call('ZCARD', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[1], KEYS[2])
  return 0
end
redis.call('HSET', KEYS[2], '~total', total)
return total
