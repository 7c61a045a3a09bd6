-- reportProgress: the running step updates statusMessage / progress (task progress is
-- statusMessage on tasks/get, T-41). Fenced. On a synchronous call the event is also appended
-- to the task's progress stream (capped at ~64; expires keepMs after its last event, never
-- after the record) and announced on the
-- task's channel, for the gateway holding the request to relay as notifications/progress (D5).
-- KEYS[1] task hash, KEYS[2] progress stream
-- ARGV[1] fence, ARGV[2] now, ARGV[3] statusMessage ('' = keep), ARGV[4] progress JSON ('' = keep),
-- ARGV[5] progress event JSON ('' = none), ARGV[6] notify channel, ARGV[7] keepMs
-- Returns {'ok', cancelRequested} or a fence error.
--@include common
local key = KEYS[1]
local bad, cur = checkFence(key, ARGV[1], 'mode', 'cancelRequested', 'createdAt', 'ttlMs')
if bad then return bad end
local fields = {'lastUpdatedAt', ARGV[2]}
if ARGV[3] ~= '' then fields[#fields + 1] = 'statusMessage'; fields[#fields + 1] = ARGV[3] end
if ARGV[4] ~= '' then fields[#fields + 1] = 'progress'; fields[#fields + 1] = ARGV[4] end
redis.call('HSET', key, unpack(fields))
if ARGV[5] ~= '' and cur[5] == 'sync' then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', 64, '*', 'e', ARGV[5])
  redis.call('PEXPIREAT', KEYS[2], math.min(expiryOf(cur[7], cur[8]), tonumber(ARGV[2]) + tonumber(ARGV[7] or '300000')))
  notify(ARGV[6], 'progress')
end
return {'ok', cur[6] or '0'}
