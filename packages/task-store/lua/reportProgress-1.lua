-- reportProgress: the running step updates statusMessage / progress (task progress is
-- statusMessage on tasks/get, T-41). Fenced.
-- KEYS[1] task hash
-- ARGV[1] fence, ARGV[2] now, ARGV[3] statusMessage ('' = keep), ARGV[4] progress JSON ('' = keep)
-- Returns {'ok', cancelRequested} or a fence error.
--@include common
local key = KEYS[1]
local bad = checkFence(key, ARGV[1])
if bad then return bad end
if ARGV[3] ~= '' then redis.call('HSET', key, 'statusMessage', ARGV[3]) end
if ARGV[4] ~= '' then redis.call('HSET', key, 'progress', ARGV[4]) end
redis.call('HSET', key, 'lastUpdatedAt', ARGV[2])
return {'ok', redis.call('HGET', key, 'cancelRequested') or '0'}
