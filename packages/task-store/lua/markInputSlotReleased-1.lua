-- markInputSlotReleased: the reconciler released the outstanding slot of a `task`-mode task that
-- has waited in input_required, unpolled and unanswered, for TASK_INPUT_SLOT_RELEASE_MS; the task
-- itself keeps waiting. Recorded per step (`slotReleasedStep`), so the answer knows to take the
-- slot back and a later question of the same task can release it again.
-- KEYS[1] task hash
-- ARGV[1] step (the step that asked), ARGV[2] now (ms), ARGV[3] idle ms
-- Returns 1 when recorded, 0 when the task changed meanwhile (answered, polled, ended) or is gone.
--@include common
local cur = redis.call('HMGET', KEYS[1], 'status', 'step', 'mode', 'lastUpdatedAt', 'polledAt', 'slotReleasedStep')
if cur[1] ~= 'input_required' or cur[2] ~= ARGV[1] or cur[3] ~= 'task' then return 0 end
if cur[6] == ARGV[1] then return 0 end
local seen = math.max(tonumber(cur[4] or '0'), tonumber(cur[5] or '0'))
if tonumber(ARGV[2]) - seen < tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], 'slotReleasedStep', ARGV[1])
return 1
