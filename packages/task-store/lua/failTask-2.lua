-- failTask: -> failed with a JSON-RPC error object (T-14: only for JSON-RPC errors).
-- Used by the running step (fenced) and by the system (reconciler, input timeout), which
-- passes an expected status and step instead of a fence.
-- KEYS[1] task hash, KEYS[2] the task's result key (the error JSON, same expiry as the record)
-- ARGV[1] fence ('' = system), ARGV[2] expected status ('' = any non-terminal),
-- ARGV[3] expected step ('' = any), ARGV[4] now, ARGV[5] error JSON, ARGV[6] statusMessage,
-- ARGV[7] notify channel
-- Returns {'ok'} | {'gone'} | {'terminal', status} | {'fenced', status} | {'stale', status}
--@include common
local key = KEYS[1]
if ARGV[1] ~= '' then
  local bad = checkFence(key, ARGV[1])
  if bad then return bad end
else
  if redis.call('EXISTS', key) == 0 then return {'gone'} end
  local cur = redis.call('HMGET', key, 'status', 'step')
  if isTerminal(cur[1]) then return {'terminal', cur[1]} end
  if ARGV[2] ~= '' and cur[1] ~= ARGV[2] then return {'stale', cur[1]} end
  if ARGV[3] ~= '' and cur[2] ~= ARGV[3] then return {'stale', cur[1]} end
end
writeOutcome(key, KEYS[2], ARGV[5])
finish(key, 'failed', ARGV[4], ARGV[6], ARGV[7])
return {'ok'}
