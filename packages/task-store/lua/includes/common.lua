-- Shared helpers for every task transition script.
-- Task hash fields: status, owner, tool, args, mode, createdAt, lastUpdatedAt (ms),
-- ttlMs, pollIntervalMs, step, fence, claimedStep, statusMessage, progress, pending,
-- req:<key> (outstanding input request JSON), resp:<key> (answer JSON), used:<key>,
-- state, result, error, cancelRequested, cancelReason, jobOwner, reruns, attempt (runs of the
-- claimed step), traceparent, tracestate, holderAt, webhookQueuedAt, polledAt (a client looked at
-- it while input_required), slotReleasedStep (its outstanding slot was released while it waited
-- at that step). A terminal record keeps only
-- KEPT (see finish); its result or error is in the task's result key (records finished before
-- that change may still hold `result`/`error`).

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

-- The record's expiry (unix ms): createdAt + ttlMs, as createTask set it (T-24).
local function expiresAt(key)
  local t = redis.call('HMGET', key, 'createdAt', 'ttlMs')
  return tonumber(t[1]) + tonumber(t[2])
end

-- Fields a terminal record keeps (Redis memory per finished task). Everything else
-- (args over 64 bytes, caps, state, fence, claimedStep, jobOwner, holderAt, progress, cancelRequested,
-- cancelReason, pending, tracestate, req:/resp:/used: fields) only served the running task.
-- Each kept value is short (ids, numbers, a status, a capped statusMessage), so the rewritten
-- hash stays a listpack (values under hash-max-listpack-value, 64 bytes by default).
local KEPT = {'owner', 'tool', 'mode', 'createdAt', 'ttlMs', 'pollIntervalMs', 'step', 'reruns', 'traceparent', 'webhookQueuedAt'}

-- Moves the task to a terminal status: the record is rewritten compactly (DEL + HSET, so a
-- hash that had grown into a hashtable becomes a listpack again) with the same expiry.
-- The outcome payload (a completed task's result, a failed one's error) is not in the record:
-- the caller writes it to the task's result key first (`writeOutcome`). `at` = the record's
-- expiry when the caller has it already (else read).
local function finish(key, status, now, message, channel, at)
  at = at or expiresAt(key)
  local vals = redis.call('HMGET', key, unpack(KEPT))
  if not message or message == '' then message = redis.call('HGET', key, 'statusMessage') end
  local fields = {'status', status, 'lastUpdatedAt', now}
  for i, f in ipairs(KEPT) do
    if vals[i] then
      fields[#fields + 1] = f
      fields[#fields + 1] = vals[i]
    end
  end
  -- Short arguments stay (they still fit a listpack value): logs and operators can tell tasks apart.
  local args = redis.call('HGET', key, 'args')
  if args and string.len(args) <= 64 then
    fields[#fields + 1] = 'args'
    fields[#fields + 1] = args
  end
  if message and message ~= '' then
    fields[#fields + 1] = 'statusMessage'
    fields[#fields + 1] = message
  end
  redis.call('DEL', key)
  redis.call('HSET', key, unpack(fields))
  redis.call('PEXPIREAT', key, at)
  notify(channel, status)
end

-- Writes a terminal task's outcome payload (result or error JSON) to its own key, with exactly
-- the record's expiry (`<prefix>:{t:<taskId>}:result`, same hash tag); `at` as in `finish`.
local function writeOutcome(key, outcomeKey, payload, at)
  redis.call('SET', outcomeKey, payload, 'PXAT', at or expiresAt(key))
end
