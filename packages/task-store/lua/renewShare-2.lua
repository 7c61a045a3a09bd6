-- renewShare: the worker running a step of principal P extends its lease (enterShare-3.lua).
-- KEYS[1] running zset of P, KEYS[2] hash of P's lease holders
-- ARGV[1] taskId, ARGV[2] token, ARGV[3] new lease expiry (ms)
-- A lease that lapsed (Redis was unreachable longer than a lease) is taken again: the step is
-- running, so it counts. A lease another run holds (the step was re-run elsewhere) is left alone.
-- Returns 1 when renewed, 0 when another run holds it (stop renewing).
local holder = redis.call('HGET', KEYS[2], ARGV[1])
if holder and holder ~= ARGV[2] then return 0 end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
redis.call('PEXPIREAT', KEYS[2], last[2])
return 1
