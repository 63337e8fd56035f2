-- Creates a quota definition, and links it to its application when it has one, atomically.
-- KEYS[1] definitions hash (id -> JSON), KEYS[2] applications hash (application -> id)
-- ARGV[1] id, ARGV[2] JSON, ARGV[3] application or '', ARGV[4] change channel
if ARGV[3] ~= '' and redis.call('HEXISTS', KEYS[2], ARGV[3]) == 1 then
  return 'CONFLICT'
end
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then
  return 'CONFLICT'
end
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[1])
end
redis.call('PUBLISH', ARGV[4], ARGV[1])
return 'OK'
