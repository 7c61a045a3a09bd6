-- notePoll: a client looked at a task that waits for its answer (tasks/get, task_status), so it
-- still holds its principal's outstanding slot (TASK_INPUT_SLOT_RELEASE_MS counts from the later
-- of this and the last change). Only on an input_required record: never creates a key.
-- KEYS[1] task hash
-- ARGV[1] now (ms)
-- Returns 1 when written, 0 otherwise.
--@include common
local st = redis.call('HGET', KEYS[1], 'status')
if st ~= 'input_required' then return 0 end
redis.call('HSET', KEYS[1], 'polledAt', ARGV[1])
return 1
