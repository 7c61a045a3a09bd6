-- markWebhookQueued: records that a finished task's completion webhook was enqueued, so
-- the reconciler never enqueues it again once BullMQ has dropped the delivery job.
-- Only on an existing terminal record: never creates a key (which would have no expiry).
-- KEYS[1] task hash
-- ARGV[1] now (ms)
-- Returns 1 when written, 0 when the record is gone or not terminal.
--@include common
local st = redis.call('HGET', KEYS[1], 'status')
if not st or not isTerminal(st) then return 0 end
redis.call('HSET', KEYS[1], 'webhookQueuedAt', ARGV[1])
return 1
