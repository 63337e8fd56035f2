-- Adds one gateway's rejections of one restriction to the fleet's line: a hash of bucket → count.
-- KEYS[1]: the line. ARGV[1]: the oldest bucket kept, ARGV[2]: the line's lifetime in ms,
-- then pairs of bucket and count. Buckets older than the kept span are dropped, so a line that keeps
-- being refreshed never holds more than the span.
local oldest = tonumber(ARGV[1])
for i = 3, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], ARGV[i], ARGV[i + 1])
end
local buckets = redis.call('HKEYS', KEYS[1])
for _, bucket in ipairs(buckets) do
  if tonumber(bucket) < oldest then
    redis.call('HDEL', KEYS[1], bucket)
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
