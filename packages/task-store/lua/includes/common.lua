-- Shared helpers for every task transition script.
-- Task hash fields: status, owner, tool, args, mode, createdAt, lastUpdatedAt (ms),
-- ttlMs, pollIntervalMs, step, fence, claimedStep, statusMessage, progress, pending,
-- req:<key> (outstanding input request JSON), resp:<key> (answer JSON), used:<key>,
-- state, result, error, cancelRequested, jobOwner, reruns, attempt (runs of the claimed step),
-- webhookQueuedAt.

-- T-44 (cases N-01, B-14): a client request acts only on a task of its own principal and of the mode
-- its method serves (`task` for tasks/*, `sync` for a synchronous call's retry). Any other task
-- is answered exactly like an unknown id ('gone'), before anything is read or written.
-- `wantOwner` / `wantMode` = '' for system callers (reconciler, a synchronous call's disconnect).
local function foreign(owner, mode, wantOwner, wantMode)
  return (wantOwner ~= '' and owner ~= wantOwner) or (wantMode ~= '' and mode ~= wantMode)
end

local function isTerminal(st)
  return st == 'completed' or st == 'failed' or st == 'cancelled'
end

-- Publishes the new status on the task's notification channel (a hint; the hash is the truth).
local function notify(channel, status)
  if channel and channel ~= '' then
    redis.call('PUBLISH', channel, status)
  end
end

-- Deletes every field whose name starts with `prefix` (e.g. 'req:').
local function delPrefixed(key, prefix)
  local fields = redis.call('HKEYS', key)
  local n = string.len(prefix)
  for _, f in ipairs(fields) do
    if string.sub(f, 1, n) == prefix then redis.call('HDEL', key, f) end
  end
end

-- Checks that the caller holds the current fence and that the task is working.
-- Returns nil when the write may go ahead, else an error reply table.
-- The fence only counts for the step it was taken on: after a resume (step + 1) the previous
-- step's fence is stale until the new step is claimed with a new fence.
local function checkFence(key, fence)
  if redis.call('EXISTS', key) == 0 then return {'gone'} end
  local cur = redis.call('HMGET', key, 'status', 'fence', 'step', 'claimedStep')
  if isTerminal(cur[1]) then return {'terminal', cur[1]} end
  if cur[2] ~= fence then return {'fenced', cur[1]} end
  if cur[1] ~= 'working' or cur[3] ~= cur[4] then return {'stale', cur[1]} end
  return nil
end

-- Moves the task to a terminal status. Clears input bookkeeping.
local function finish(key, status, now, message, channel)
  delPrefixed(key, 'req:')
  delPrefixed(key, 'resp:')
  redis.call('HSET', key, 'status', status, 'lastUpdatedAt', now, 'pending', 0)
  if message and message ~= '' then
    redis.call('HSET', key, 'statusMessage', message)
  end
  notify(channel, status)
end
