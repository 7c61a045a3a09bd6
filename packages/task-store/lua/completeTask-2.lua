-- completeTask: working -> completed with the tool's CallToolResult (isError results too, T-14).
-- KEYS[1] task hash, KEYS[2] the task's result key (the result JSON, same expiry as the record)
-- ARGV[1] fence, ARGV[2] now, ARGV[3] result JSON, ARGV[4] statusMessage, ARGV[5] notify channel
-- Returns {'ok'} or a fence error (a stale or cancelled worker's write is refused, T-13).
--@include common
local key = KEYS[1]
local bad, cur = checkFence(key, ARGV[1], unpack(FINISHING))
if bad then return bad end
local vals = tail(cur, 5)
writeOutcome(KEYS[2], ARGV[3], finishingExpiry(vals))
finish(key, 'completed', ARGV[2], ARGV[4], ARGV[5], vals)
return {'ok'}
