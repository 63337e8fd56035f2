-- Units a sliding-window counter holds now, and ms until its oldest units leave the window, without
-- changing it (see consume.lua for the layout and the reset it answers).
-- KEYS[1]: the counter. ARGV[1]: N, ARGV[2]: bucket ms, ARGV[3]: '' for the Redis clock, or a time in ms.
-- Returns {used, reset ms}.
local N = tonumber(ARGV[1])
local bucketMs = tonumber(ARGV[2])
local now = timeOf(ARGV[3])
local oldestKept = math.floor(now / bucketMs) - N
local fields = redis.call('HGETALL', KEYS[1])
local used = 0
local oldest = nil
for i = 1, #fields, 2 do
  local bucket = tonumber(fields[i])
  local units = tonumber(fields[i + 1])
  if bucket and bucket >= oldestKept and units > 0 then
    used = used + units
    if not oldest or bucket < oldest then
      oldest = bucket
    end
  end
end
local reset = 0
if oldest then
  reset = (oldest + N + 1) * bucketMs - now
end
return { used, reset }
