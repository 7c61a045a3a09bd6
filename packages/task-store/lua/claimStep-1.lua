-- claimStep: a worker starts running step ARGV[1]; takes a new fence (D3).
-- KEYS[1] task hash
-- ARGV[1] step, ARGV[2] job lock token, ARGV[3] now (ms), ARGV[4] notify channel
-- Returns {'ok', fence, tool, args, state, reruns, mode, caps, owner, attempt, key, response JSON, ...}
--      or {'gone'} | {'terminal', status, owner} | {'cancelled', owner} | {'stale', status}
--      (the owner lets the worker release the task's outstanding slot)
--@include common
local key = KEYS[1]
if redis.call('EXISTS', key) == 0 then return {'gone'} end
local cur = redis.call('HMGET', key, 'status', 'step', 'cancelRequested', 'claimedStep', 'owner')
if isTerminal(cur[1]) then return {'terminal', cur[1], cur[5] or ''} end
if cur[3] == '1' then
  finish(key, 'cancelled', ARGV[3], redis.call('HGET', key, 'cancelReason') or 'Cancelled before it started', ARGV[4])
  return {'cancelled', cur[5] or ''}
end
if cur[1] ~= 'working' or cur[2] ~= ARGV[1] then return {'stale', cur[1] or ''} end
local fence = redis.call('HINCRBY', key, 'fence', 1)
-- The step was claimed before (its worker died, stopped or lost its lock): a re-run. `attempt`
-- counts this step's runs (1 = first); the client sees the restart in statusMessage.
local attempt = 1
if cur[4] == ARGV[1] then
  redis.call('HINCRBY', key, 'reruns', 1)
  attempt = tonumber(redis.call('HGET', key, 'attempt') or '1') + 1
  -- Status unchanged (still `working`): nothing published; readers see it on their next read.
  redis.call('HSET', key, 'statusMessage', 'Restarted after its worker stopped (attempt ' .. attempt .. ')', 'lastUpdatedAt', ARGV[3])
end
redis.call('HSET', key, 'claimedStep', ARGV[1], 'jobOwner', ARGV[2], 'attempt', attempt)
local info = redis.call('HMGET', key, 'tool', 'args', 'state', 'reruns', 'mode', 'caps', 'owner')
local out = {'ok', tostring(fence), info[1] or '', info[2] or '{}', info[3] or '', info[4] or '0', info[5] or 'task', info[6] or '{}', info[7] or '', tostring(attempt)}
local all = redis.call('HGETALL', key)
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 5) == 'resp:' then
    out[#out + 1] = string.sub(all[i], 6)
    out[#out + 1] = all[i + 1]
  end
end
return out
