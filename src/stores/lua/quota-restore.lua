-- Puts back a whole set that a gateway held, when Redis has lost the definitions: only when the
-- definitions hash is absent, or when the current set is itself a restore (marked 'restored') of an older
-- version that no write has touched since. So gateways that race to restore end with the newest set they
-- held, and a set that anyone has written to since is never overwritten.
-- KEYS[1] definitions hash, KEYS[2] applications hash, KEYS[3] version hash
-- ARGV[1] version of the set, ARGV[2] change channel, ARGV[3] number of definitions n,
-- ARGV[4 .. 3+2n] id, JSON pairs, then application, id pairs to the end
-- Returns 'RESTORED' or 'KEPT'.
if redis.call('EXISTS', KEYS[1]) == 1 then
  local restored = redis.call('HEXISTS', KEYS[3], 'restored') == 1
  local current = tonumber(redis.call('HGET', KEYS[3], 'version') or '0')
  if not restored or current >= tonumber(ARGV[1]) then
    return 'KEPT'
  end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
local links = 4 + 2 * tonumber(ARGV[3])
for i = 4, links - 1, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
for i = links, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
redis.call('HSET', KEYS[3], 'version', ARGV[1], 'restored', '1')
redis.call('PUBLISH', ARGV[2], '*')
return 'RESTORED'
