-- markCancelled: the worker running the step saw its AbortSignal fire for a cancel (or the
-- tool ended the task, e.g. the user declined) -> cancelled. Fenced.
-- KEYS[1] task hash
-- ARGV[1] fence, ARGV[2] now, ARGV[3] statusMessage, ARGV[4] notify channel
--@include common
local key = KEYS[1]
local bad, cur = checkFence(key, ARGV[1], 'cancelReason', unpack(FINISHING))
if bad then return bad end
-- A requested cancel says why (requestCancel stored it); otherwise the worker's message.
finish(key, 'cancelled', ARGV[2], cur[5] or ARGV[3], ARGV[4], tail(cur, 6))
return {'ok'}
