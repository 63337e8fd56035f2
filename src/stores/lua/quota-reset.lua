-- Raises by one the reset generation of an application's counters under each of the restriction counters
-- named, and tells every gateway (as a quota change does), which then moves to the fresh counters. The
-- version of the set is left alone: a reset is no definition, and a restore never puts resets back (see
-- redis-definitions.ts).
-- KEYS[1] resets hash (application -> JSON object of restriction counter -> generation)
-- ARGV[1] application, ARGV[2] change channel, ARGV[3 ..] restriction counters (key bases)
-- Returns the application's generations as stored now (JSON).
local stored = redis.call('HGET', KEYS[1], ARGV[1])
local generations = {}
if stored then
  local ok, value = pcall(cjson.decode, stored)
  if ok and type(value) == 'table' then
    generations = value
  end
end
for i = 3, #ARGV do
  generations[ARGV[i]] = (tonumber(generations[ARGV[i]]) or 0) + 1
end
local json = cjson.encode(generations)
redis.call('HSET', KEYS[1], ARGV[1], json)
redis.call('PUBLISH', ARGV[2], '*')
return json
