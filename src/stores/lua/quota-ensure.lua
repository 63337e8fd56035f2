-- Creates the well-known quotas a set lacks, as their defaults. A missing well-known quota already means
-- its default to every gateway, so this changes neither the version nor a restore's marker.
-- KEYS[1] definitions hash; ARGV[1] change channel, ARGV[2 ..] id, JSON pairs
-- Returns 'OK', or 'EMPTY' when the set is absent (it must be restored first, never started from these).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 'EMPTY'
end
local created = 0
for i = 2, #ARGV, 2 do
  created = created + redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1])
end
if created > 0 then
  redis.call('PUBLISH', ARGV[1], '*')
end
return 'OK'
