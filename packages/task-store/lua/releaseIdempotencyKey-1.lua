-- releaseIdempotencyKey: frees a key claimed for a task that was never created (its creation
-- failed, or the request ended first), so a retry can create it. Only while the key still names
-- that task: a key taken over since is left alone.
-- KEYS[1] the key's hash; ARGV[1] taskId
-- Returns 1 when deleted, 0 otherwise.
if redis.call('HGET', KEYS[1], 'taskId') == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
