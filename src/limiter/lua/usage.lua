-- Units a sliding-window counter holds now, without changing it (see consume.lua for the layout).
-- KEYS[1]: the counter. ARGV[1]: N, ARGV[2]: bucket ms, ARGV[3]: '' for the Redis clock, or a time in ms.
local N = tonumber(ARGV[1])
local bucketMs = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
if not now then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
local oldestKept = math.floor(now / bucketMs) - N
local fields = redis.call('HGETALL', KEYS[1])
local used = 0
for i = 1, #fields, 2 do
  local bucket = tonumber(fields[i])
  if bucket and bucket >= oldestKept then
    used = used + tonumber(fields[i + 1])
  end
end
return used
