-- The time a script decides at (a prelude): `given` in ms when a test sets one, else the Redis server's
-- clock, one clock for the whole fleet.
local function timeOf(given)
  local now = tonumber(given)
  if now then
    return now
  end
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
