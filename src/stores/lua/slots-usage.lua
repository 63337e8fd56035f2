-- The slots held under a concurrency counter (slot-entries.lua) by holders whose entry has not expired,
-- read without writing.
-- KEYS[1]: the concurrency counter. ARGV[1]: '' for the Redis server's clock, or a time in ms that
-- tests set.
-- Returns the slots held.
local now = tonumber(ARGV[1])
if not now then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
local total = liveSlots(KEYS[1], now, '')
return total
