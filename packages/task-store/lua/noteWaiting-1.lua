-- noteWaiting: the statusMessage of a step that waits for its principal's share of the workers
-- (or starts after waiting), written only while that step is still unclaimed: a task that has
-- moved on (claimed, ended, parked for input) keeps its own message.
-- KEYS[1] task hash
-- ARGV[1] step, ARGV[2] statusMessage, ARGV[3] now (ms)
-- Returns 1 when written, else 0.
local cur = redis.call('HMGET', KEYS[1], 'status', 'step', 'claimedStep')
if cur[1] ~= 'working' or cur[2] ~= ARGV[1] or cur[3] == ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'statusMessage', ARGV[2], 'lastUpdatedAt', ARGV[3])
return 1
