-- Creates a quota definition, and links it to its application when it has one, atomically; raises the
-- version of the set and clears a restore's marker (the set now holds a write). A membership must name a
-- plan (plan-rules.lua).
-- KEYS[1] definitions hash (id -> JSON), KEYS[2] applications hash (application -> id), KEYS[3] version hash
-- ARGV[1] id, ARGV[2] JSON, ARGV[3] application or '', ARGV[4] change channel
-- A set that Redis lost must be restored before anything is added to it: a restore never overwrites a
-- set that holds a write, so creating into the void would drop every other definition for good.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 'EMPTY'
end
if ARGV[3] ~= '' and redis.call('HEXISTS', KEYS[2], ARGV[3]) == 1 then
  return 'CONFLICT'
end
local broken = plan_rule_broken(KEYS[1], ARGV[1], ARGV[2])
if broken then
  return broken
end
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then
  return 'CONFLICT'
end
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[1])
end
redis.call('HINCRBY', KEYS[3], 'version', 1)
redis.call('HDEL', KEYS[3], 'restored')
redis.call('PUBLISH', ARGV[4], ARGV[1])
return 'OK'
