-- noteStepStatus: a system writer (the lost-worker check, R-03) sets the statusMessage of a task
-- still `working` on step ARGV[1], without a fence: it only says what is happening to the step.
-- KEYS[1] task hash
-- ARGV[1] step, ARGV[2] statusMessage, ARGV[3] now
-- Returns 1 when written, 0 when the task is no longer working on that step (or gone).
local cur = redis.call('HMGET', KEYS[1], 'status', 'step')
if cur[1] ~= 'working' or cur[2] ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'statusMessage', ARGV[2], 'lastUpdatedAt', ARGV[3])
return 1
