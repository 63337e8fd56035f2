-- Replaces a quota definition if it is still the version the caller read (compare and set on its ETag,
-- the SHA-1 of its JSON).
-- KEYS[1] definitions hash; ARGV[1] id, ARGV[2] new JSON, ARGV[3] expected ETag, ARGV[4] change channel
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then
  return 'NOT_FOUND'
end
if redis.sha1hex(current) ~= ARGV[3] then
  return 'PRECONDITION'
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PUBLISH', ARGV[4], ARGV[1])
return 'OK'
