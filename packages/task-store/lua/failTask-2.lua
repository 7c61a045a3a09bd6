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
local vals
if ARGV[1] ~= '' then
  local bad, cur = checkFence(key, ARGV[1], unpack(FINISHING))
  if bad then return bad end
  vals = tail(cur, 5)
else
  local cur = redis.call('HMGET', key, 'status', 'step', unpack(FINISHING))
  if not cur[1] and redis.call('EXISTS', key) == 0 then return {'gone'} end
  if isTerminal(cur[1]) then return {'terminal', cur[1]} end
  if ARGV[2] ~= '' and cur[1] ~= ARGV[2] then return {'stale', cur[1]} end
  if ARGV[3] ~= '' and cur[2] ~= ARGV[3] then return {'stale', cur[1]} end
  vals = tail(cur, 3)
end
writeOutcome(KEYS[2], ARGV[5], finishingExpiry(vals))
finish(key, 'failed', ARGV[4], ARGV[6], ARGV[7], vals)
return {'ok'}
