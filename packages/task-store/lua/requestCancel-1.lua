-- requestCancel: tasks/cancel (T-36) or a disconnected synchronous caller (C-01).
-- input_required, or working with no worker on the step yet -> cancelled at once.
-- working with a worker on it -> cancelRequested = 1 and PUBLISH the job id on the cancel
-- channel; the worker running it aborts the job's AbortSignal and records `cancelled`.
-- Terminal -> unchanged (the caller still acks).
-- A client request passes its principal and mode: another principal's task, or one of another
-- mode, is 'gone' like an unknown id, and nothing is written or published (T-44, N-01).
-- KEYS[1] task hash
-- ARGV[1] now, ARGV[2] cancel channel, ARGV[3] job id prefix ('t.<taskId>.'),
-- ARGV[4] statusMessage, ARGV[5] notify channel, ARGV[6] owner ('' = system caller),
-- ARGV[7] mode ('' = any)
-- Returns {'gone'} | {'terminal', status} | {'cancelled'} | {'requested', jobId}
--@include common
local key = KEYS[1]
local cur = redis.call('HMGET', key, 'status', 'step', 'claimedStep', 'owner', 'mode')
if not cur[1] or foreign(cur[4], cur[5], ARGV[6], ARGV[7]) then return {'gone'} end
if isTerminal(cur[1]) then return {'terminal', cur[1]} end
if cur[1] == 'input_required' or cur[3] ~= cur[2] then
  finish(key, 'cancelled', ARGV[1], ARGV[4], ARGV[5])
  return {'cancelled'}
end
redis.call('HSET', key, 'cancelRequested', '1', 'cancelReason', ARGV[4])
local jobId = ARGV[3] .. cur[2]
redis.call('PUBLISH', ARGV[2], jobId)
return {'requested', jobId}
