-- Writes how many slots of a concurrency counter (slot-entries.lua) one holder holds, as that holder
-- counts them, and for how long its entry lives unless written again: at each release, and every
-- heartbeat, so that the slots of a gateway that dies are free once its entry expires.
-- KEYS[1]: the concurrency counter. ARGV[1]: the holder. ARGV[2]: slots it holds. ARGV[3]: time to live
-- in ms. ARGV[4]: '' for the Redis server's clock, or a time in ms that tests set.
local now = timeOf(ARGV[4])
local held = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
if held <= 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], slotEntry(held, now + ttl))
redis.call('PEXPIRE', KEYS[1], ttl * 2)
return held
