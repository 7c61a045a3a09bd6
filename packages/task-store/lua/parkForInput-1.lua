-- parkForInput: working -> input_required. The step ends; no worker slot is held (D2).
-- Keys are unique for the task's whole life (T-29): a reused key is refused.
-- KEYS[1] task hash
-- ARGV[1] fence, ARGV[2] now, ARGV[3] statusMessage, ARGV[4] state JSON, ARGV[5] notify channel,
-- ARGV[6..] key, request JSON pairs
-- Returns {'ok'} | {'key_reused', key} | {'cancelled'} | fence error.
--@include common
local key = KEYS[1]
local bad, cur = checkFence(key, ARGV[1], 'cancelRequested')
if bad then return bad end
if cur[5] == '1' then
  finish(key, 'cancelled', ARGV[2], 'Cancelled by client request', ARGV[5])
  return {'cancelled'}
end
for i = 6, #ARGV, 2 do
  if redis.call('HEXISTS', key, 'used:' .. ARGV[i]) == 1 then return {'key_reused', ARGV[i]} end
end
delPrefixed(key, 'resp:')
local n = 0
for i = 6, #ARGV, 2 do
  redis.call('HSET', key, 'req:' .. ARGV[i], ARGV[i + 1], 'used:' .. ARGV[i], '1')
  n = n + 1
end
redis.call('HSET', key, 'status', 'input_required', 'pending', n, 'state', ARGV[4],
  'statusMessage', ARGV[3], 'lastUpdatedAt', ARGV[2])
notify(ARGV[5], 'input_required')
return {'ok'}
