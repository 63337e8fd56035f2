-- Deletes a quota definition if it is still the version the caller read and no application is on it as
-- a plan (plan-rules.lua), and unlinks its application; raises the version of the set and clears a
-- restore's marker.
-- KEYS[1] definitions hash, KEYS[2] applications hash, KEYS[3] version hash
-- ARGV[1] id, ARGV[2] expected ETag, ARGV[3] application or '', ARGV[4] change channel
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current then
  return 'NOT_FOUND'
end
if redis.sha1hex(current) ~= ARGV[2] then
  return 'PRECONDITION'
end
local broken = plan_rule_broken(KEYS[1], ARGV[1], nil)
if broken then
  return broken
end
redis.call('HDEL', KEYS[1], ARGV[1])
if ARGV[3] ~= '' and redis.call('HGET', KEYS[2], ARGV[3]) == ARGV[1] then
  redis.call('HDEL', KEYS[2], ARGV[3])
end
redis.call('HINCRBY', KEYS[3], 'version', 1)
redis.call('HDEL', KEYS[3], 'restored')
redis.call('PUBLISH', ARGV[4], ARGV[1])
return 'OK'
