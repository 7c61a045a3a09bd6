-- createTask: write a new task record, durable before the handle is returned (T-15, D4).
-- KEYS[1] task hash
-- ARGV[1] expire-at (unix ms; createdAt + ttlMs, T-24)
-- ARGV[2..] field, value pairs
-- Returns 1 on success, 0 when the id is already taken (never overwrites).
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local fields = {}
for i = 2, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('PEXPIREAT', KEYS[1], ARGV[1])
return 1
