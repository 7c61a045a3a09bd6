-- claimStep: a worker starts running step ARGV[1]; takes a new fence (D3).
-- KEYS[1] task hash
-- ARGV[1] step, ARGV[2] job lock token, ARGV[3] now (ms), ARGV[4] notify channel
-- Returns {'ok', fence, tool, args, state, reruns, mode, caps, owner, attempt, key, response JSON, ...}
--      or {'gone'} | {'terminal', status, owner} | {'cancelled', owner} | {'stale', status}
--      (the owner lets the worker release the task's outstanding slot)
--@include common
local key = KEYS[1]
-- One HMGET: what decides the claim, then what the claim hands the worker (info below).
local cur = redis.call('HMGET', key, 'status', 'step', 'cancelRequested', 'claimedStep', 'owner',
  'tool', 'args', 'state', 'reruns', 'mode', 'caps', 'attempt')
if not cur[1] and redis.call('EXISTS', key) == 0 then return {'gone'} end
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
local reruns = cur[9] or '0'
if cur[4] == ARGV[1] then
  reruns = tostring(redis.call('HINCRBY', key, 'reruns', 1))
  attempt = tonumber(cur[12] or '1') + 1
  -- Status unchanged (still `working`): nothing published; readers see it on their next read.
  redis.call('HSET', key, 'statusMessage', 'Restarted after its worker stopped (attempt ' .. attempt .. ')', 'lastUpdatedAt', ARGV[3])
end
redis.call('HSET', key, 'claimedStep', ARGV[1], 'jobOwner', ARGV[2], 'attempt', attempt)
local out = {'ok', tostring(fence), cur[6] or '', cur[7] or '{}', cur[8] or '', reruns, cur[10] or 'task', cur[11] or '{}', cur[5] or '', tostring(attempt)}
-- The answers to its input requests (resp:<key>), as key, response JSON pairs.
local resp = fieldsMatching(key, 'resp:*')
for i = 1, #resp, 2 do
  out[#out + 1] = string.sub(resp[i], 6)
  out[#out + 1] = resp[i + 1]
end
return out
