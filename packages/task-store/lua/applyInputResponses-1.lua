-- applyInputResponses: tasks/update stores answers to outstanding keys, atomically, before
-- the ack (read-your-writes). Unknown keys are ignored (T-31); a partial set keeps the task
-- input_required (T-32); the last answer moves it to working, step + 1.
-- A key answered already (its resp: field is still there) is compared with the new answer:
-- the same answer is ignored (two identical concurrent updates are both acked, applied once,
-- case B-05); a different one refuses the whole request, nothing written ('conflict', the key):
-- of two different answers sent at once, the first applied wins and the other is told so.
-- A client request passes its principal and mode: another principal's task, or one of another
-- mode, is 'gone' like an unknown id, and nothing is written (T-44, N-01).
-- KEYS[1] task hash
-- ARGV[1] now, ARGV[2] notify channel, ARGV[3] owner ('' = system caller),
-- ARGV[4] mode ('' = any), ARGV[5..] key, response JSON pairs (keys outstanding or answered
-- only: the caller filters, so a request with 100k keys never reaches Redis as 200k
-- arguments; answers are canonical JSON, sorted keys, so equal answers are equal strings)
-- Returns {'gone'} | {'conflict', key} | {'ignored', status} | {'partial', applied}
--       | {'resumed', step, applied}
--@include common
local key = KEYS[1]
local cur = redis.call('HMGET', key, 'status', 'owner', 'mode')
if not cur[1] or foreign(cur[2], cur[3], ARGV[3], ARGV[4]) then return {'gone'} end
for i = 5, #ARGV, 2 do
  if redis.call('HEXISTS', key, 'req:' .. ARGV[i]) == 0 then
    local prev = redis.call('HGET', key, 'resp:' .. ARGV[i])
    if prev and prev ~= ARGV[i + 1] then return {'conflict', ARGV[i]} end
  end
end
local st = cur[1]
if st ~= 'input_required' then return {'ignored', st} end
local applied = 0
for i = 5, #ARGV, 2 do
  local f = 'req:' .. ARGV[i]
  if redis.call('HEXISTS', key, f) == 1 then
    redis.call('HDEL', key, f)
    redis.call('HSET', key, 'resp:' .. ARGV[i], ARGV[i + 1])
    applied = applied + 1
  end
end
if applied == 0 then return {'ignored', st} end
local pending = redis.call('HINCRBY', key, 'pending', -applied)
redis.call('HSET', key, 'lastUpdatedAt', ARGV[1])
if pending > 0 then return {'partial', tostring(applied)} end
local step = redis.call('HINCRBY', key, 'step', 1)
redis.call('HSET', key, 'status', 'working', 'pending', 0, 'statusMessage', 'Resuming with your answer')
notify(ARGV[2], 'working')
return {'resumed', tostring(step), tostring(applied)}
