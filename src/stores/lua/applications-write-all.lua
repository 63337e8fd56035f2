-- Writes a batch of applications as one write, all or none: only when each is still as its writer read
-- it, and tells every gateway.
-- KEYS[1] applications hash (id -> JSON)
-- ARGV[1] change channel, then for each application: id, its text as read ('' when absent), its new text
-- Returns 1 when written, 0 when one had changed (nothing written).
for i = 2, #ARGV, 3 do
  if (redis.call('HGET', KEYS[1], ARGV[i]) or '') ~= ARGV[i + 1] then
    return 0
  end
end
for i = 2, #ARGV, 3 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 2])
end
redis.call('PUBLISH', ARGV[1], '*')
return 1
