-- Reads the whole set at one moment: the definitions, the application links, the version, whether the
-- set is a restore that no write has touched since, and the reset generations of applications' counters.
-- KEYS[1] definitions hash, KEYS[2] applications hash, KEYS[3] version hash, KEYS[4] resets hash
-- Returns {definitions as HGETALL gives them, applications likewise, version or '' (a set stored before
-- versions existed, or none at all), '1' for a restore or '', resets as HGETALL gives them}.
return {
  redis.call('HGETALL', KEYS[1]),
  redis.call('HGETALL', KEYS[2]),
  redis.call('HGET', KEYS[3], 'version') or '',
  redis.call('HGET', KEYS[3], 'restored') or '',
  redis.call('HGETALL', KEYS[4]),
}
