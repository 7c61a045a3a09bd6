-- saveCheckpoint: the running step stores its checkpoint (D14, R-01), fenced exactly like a
-- result: only the run holding the current fence of the claimed step may write it, so a stale
-- run's checkpoint (another worker took the step over) is refused like its late result.
-- KEYS[1] task hash, KEYS[2] the task's checkpoint key (`<step>:<JSON>`, the record's expiry)
-- ARGV[1] fence, ARGV[2] step, ARGV[3] checkpoint JSON
-- Returns {'ok'} or a fence error.
--@include common
local key = KEYS[1]
local bad, cur = checkFence(key, ARGV[1], 'createdAt', 'ttlMs')
if bad then return bad end
if cur[3] ~= ARGV[2] then return {'stale', 'working'} end
redis.call('SET', KEYS[2], ARGV[2] .. ':' .. ARGV[3], 'PXAT', expiryOf(cur[5], cur[6]))
return {'ok'}
