-- One gateway's heartbeat: marks it alive now, forgets gateways silent for longer than the time to
-- live, and returns the ids of the live ones (sorted: every gateway ranks them alike).
-- KEYS[1]: the fleet's sorted set. ARGV[1]: this gateway's id. ARGV[2]: time to live in ms.
-- ARGV[3]: '' for the Redis server's clock, or a time in ms that tests set.
local now = timeOf(ARGV[3])
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. string.format('%.0f', now - ttl))
redis.call('PEXPIRE', KEYS[1], ttl * 2)
local live = redis.call('ZRANGE', KEYS[1], 0, -1)
table.sort(live)
return live
