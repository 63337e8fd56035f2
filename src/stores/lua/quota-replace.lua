-- Replaces a quota definition if it is still the version the caller read (compare and set on its ETag,
-- the SHA-1 of its JSON) and the rules of plans hold (plan-rules.lua); raises the version of the set and
-- clears a restore's marker.
-- KEYS[1] definitions hash, KEYS[2] version hash
-- ARGV[1] id, ARGV[2] new JSON, ARGV[3] expected ETag, ARGV[4] change channel
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then
  return 'NOT_FOUND'
end
if redis.sha1hex(current) ~= ARGV[3] then
  return 'PRECONDITION'
end
local broken = plan_rule_broken(KEYS[1], ARGV[1], ARGV[2])
if broken then
  return broken
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[2], 'version', 1)
redis.call('HDEL', KEYS[2], 'restored')
redis.call('PUBLISH', ARGV[4], ARGV[1])
return 'OK'
