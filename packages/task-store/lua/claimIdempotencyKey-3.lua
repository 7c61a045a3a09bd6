-- claimIdempotencyKey: a `tools/call` carrying an Idempotency-Key that names no task yet claims
-- the key for the task it is about to create and reserves that task's outstanding slot, in one
-- step, so two identical requests on two gateways make one task. Nothing is written when the
-- key is taken or the principal is at its limit.
-- KEYS[1], KEYS[2] the principal's outstanding zsets (as reserveOutstanding-2.lua)
-- KEYS[3] the key's hash (fields taskId, fp = fingerprint of tool and arguments, at = claim
--         time, ms), in the principal's slot; PEXPIREAT = the task's expiry
-- ARGV[1] now (ms), ARGV[2] taskId, ARGV[3] limit, ARGV[4] the task's expiry (ms),
-- ARGV[5] least gap between two repairs (ms), ARGV[6] fingerprint,
-- ARGV[7] the task id of a dead claim to take over ('' when none): a claim whose record was
--         never written (the caller checked) and that is older than the creation grace
-- Returns {'ok', count}, {'full', count, repairDue} (as `reserve`), or
-- {'taken', taskId, fp, at}: another request holds the key (nothing written).
--@include outstanding
local cur = redis.call('HMGET', KEYS[3], 'taskId', 'fp', 'at')
if cur[1] and cur[1] ~= ARGV[7] then return {'taken', cur[1], cur[2], cur[3]} end
local r = reserve(KEYS[1], KEYS[2], tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5]))
if r[1] == 0 then return {'full', r[2], r[3]} end
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], 'taskId', ARGV[2], 'fp', ARGV[6], 'at', ARGV[1])
redis.call('PEXPIREAT', KEYS[3], ARGV[4])
return {'ok', r[2]}
