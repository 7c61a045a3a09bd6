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

-- The fields of hash `key` whose names match `pattern` (a Redis glob, e.g. 'resp:*'), as
-- name, value, name, value... HSCAN filters inside Redis, so only the matches cross into Lua
-- (an HGETALL of a running task's record converted some 60 strings to find none).
local function fieldsMatching(key, pattern)
  local out = {}
  local cursor = '0'
  repeat
    local page = redis.call('HSCAN', key, cursor, 'MATCH', pattern, 'COUNT', 100)
    cursor = page[1]
    for i = 1, #page[2] do out[#out + 1] = page[2][i] end
  until cursor == '0'
  return out
end

-- Deletes every field whose name starts with `prefix` (e.g. 'req:'; no glob characters).
local function delPrefixed(key, prefix)
  local found = fieldsMatching(key, prefix .. '*')
  -- HDEL in chunks of 1000 names (unpack's stack bounds one call's arguments).
  for i = 1, #found, 2000 do
    local names = {}
    for j = i, math.min(i + 1999, #found), 2 do names[#names + 1] = found[j] end
    redis.call('HDEL', key, unpack(names))
  end
end

-- Checks that the caller holds the current fence and that the task is working, in one HMGET
-- of the record's status, fence, step and claimed step, followed by the fields named in `...`
-- (a caller's own reads ride along: FINISHING for a write that ends the task).
-- Returns an error reply table when the write may not go ahead, else nil and the HMGET's
-- values (cur[5] onwards = the fields of `...`, false when absent).
-- The fence only counts for the step it was taken on: after a resume (step + 1) the previous
-- step's fence is stale until the new step is claimed with a new fence.
local function checkFence(key, fence, ...)
  local cur = redis.call('HMGET', key, 'status', 'fence', 'step', 'claimedStep', ...)
  -- Every record has a status; without one, EXISTS tells a missing record from a stray hash.
  if not cur[1] and redis.call('EXISTS', key) == 0 then return {'gone'} end
  if isTerminal(cur[1]) then return {'terminal', cur[1]} end
  if cur[2] ~= fence then return {'fenced', cur[1]} end
  if cur[1] ~= 'working' or cur[3] ~= cur[4] then return {'stale', cur[1]} end
  return nil, cur
end

-- The values of `t` from index `from` on (checkFence's extra fields).
local function tail(t, from)
  local out = {}
  for i = from, #t do out[#out + 1] = t[i] end
  return out
end

-- The record's expiry (unix ms): createdAt + ttlMs, as createTask set it (T-24).
local function expiryOf(createdAt, ttlMs)
  return tonumber(createdAt) + tonumber(ttlMs)
end

-- Fields a terminal record keeps (Redis memory per finished task). Everything else
-- (args over 64 bytes, caps, state, fence, claimedStep, jobOwner, holderAt, progress, cancelRequested,
-- cancelReason, pending, tracestate, req:/resp:/used: fields) only served the running task.
-- Each kept value is short (ids, numbers, a status, a capped statusMessage), so the rewritten
-- hash stays a listpack (values under hash-max-listpack-value, 64 bytes by default).
local KEPT = {'owner', 'tool', 'mode', 'createdAt', 'ttlMs', 'pollIntervalMs', 'step', 'reruns', 'traceparent', 'webhookQueuedAt'}

-- What `finish` reads of the record: KEPT, then its statusMessage and args. A caller that read
-- them already (checkFence(key, fence, unpack(FINISHING))) hands them over: one HMGET for both.
local FINISHING = {unpack(KEPT)}
FINISHING[#FINISHING + 1] = 'statusMessage'
FINISHING[#FINISHING + 1] = 'args'

-- The record's expiry from FINISHING values (createdAt and ttlMs are KEPT's 4th and 5th).
local function finishingExpiry(vals)
  return expiryOf(vals[4], vals[5])
end

-- Moves the task to a terminal status: the record is rewritten compactly (DEL + HSET, so a
-- hash that had grown into a hashtable becomes a listpack again) with the same expiry.
-- The outcome payload (a completed task's result, a failed one's error) is not in the record:
-- the caller writes it to the task's result key first (`writeOutcome`). `vals` = the record's
-- FINISHING fields when the caller read them already (else read here, one HMGET); the expiry
-- comes from them.
local function finish(key, status, now, message, channel, vals)
  vals = vals or redis.call('HMGET', key, unpack(FINISHING))
  -- The expiry before any write: a record that cannot have one fails the script untouched.
  local at = finishingExpiry(vals)
  local n = #KEPT
  if not message or message == '' then message = vals[n + 1] end
  local fields = {'status', status, 'lastUpdatedAt', now}
  for i, f in ipairs(KEPT) do
    if vals[i] then
      fields[#fields + 1] = f
      fields[#fields + 1] = vals[i]
    end
  end
  -- Short arguments stay (they still fit a listpack value): logs and operators can tell tasks apart.
  local args = vals[n + 2]
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
-- the record's expiry `at` (unix ms, `finishingExpiry`; `<prefix>:{t:<taskId>}:result`, same
-- hash tag).
local function writeOutcome(outcomeKey, payload, at)
  redis.call('SET', outcomeKey, payload, 'PXAT', at)
end
