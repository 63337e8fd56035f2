-- The slots held under a concurrency counter (slot-entries.lua) by holders whose entry has not expired,
-- read without writing.
-- KEYS[1]: the concurrency counter. ARGV[1]: '' for the Redis server's clock, or a time in ms that
-- tests set.
-- Returns the slots held.
local now = timeOf(ARGV[1])
local total = liveSlots(KEYS[1], now, '')
return total
