-- Sliding-window counters: add the units measured since the last call, then check every counter and,
-- only if all have room, charge all of them.
-- Each counter is a hash: 't' running total, 'o' oldest bucket that may hold units, and one field per
-- bucket index (bucket = window / N). A counter admits when total + need <= limit over the last N + 1
-- buckets, so no interval of one window ever holds more than the limit.
-- KEYS: the counters to check, then the counters to add to.
-- ARGV[1]: N. ARGV[2]: '' for the Redis server's clock (one clock for the whole fleet), or a time in ms
-- that tests set. ARGV[3]: how many counters to check. Then four per checked counter: limit, bucket ms,
-- cost, need; then two per added counter: bucket ms, units.
-- Returns {allowed (1|0), retry-after ms, used_1, reset-ms_1, used_2, reset-ms_2, ...} for the checked ones.
local N = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
if not now then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end
local checked = tonumber(ARGV[3])

local function int(n)
  return string.format('%.0f', n)
end

-- The counter's total and oldest non-empty bucket, after dropping the buckets that left the window.
local function load(key, bucketMs)
  local index = math.floor(now / bucketMs)
  local oldestKept = index - N
  local state = redis.call('HMGET', key, 't', 'o')
  local total = tonumber(state[1]) or 0
  local oldest = tonumber(state[2]) or oldestKept
  local changed = false
  if oldestKept - oldest > N + 1 then
    -- Idle for longer than a window: everything in it has expired.
    total = 0
    oldest = oldestKept
    changed = true
  end
  while oldest < oldestKept do
    local units = redis.call('HGET', key, int(oldest))
    if units then
      total = total - tonumber(units)
      redis.call('HDEL', key, int(oldest))
    end
    oldest = oldest + 1
    changed = true
  end
  while total > 0 and oldest < index and redis.call('HEXISTS', key, int(oldest)) == 0 do
    oldest = oldest + 1
    changed = true
  end
  if changed then
    if total <= 0 then
      total = 0
      redis.call('DEL', key)
    else
      redis.call('HSET', key, 't', int(total), 'o', int(oldest))
    end
  end
  return total, oldest, index
end

local function charge(key, bucketMs, total, oldest, index, units)
  if total == 0 then
    oldest = index
  end
  redis.call('HINCRBY', key, int(index), units)
  total = total + tonumber(units)
  redis.call('HSET', key, 't', int(total), 'o', int(oldest))
  redis.call('PEXPIRE', key, (N + 1) * bucketMs)
  return total, oldest
end

local addBase = 3 + checked * 4
for i = checked + 1, #KEYS do
  local base = addBase + (i - checked - 1) * 2
  local bucketMs = tonumber(ARGV[base + 1])
  local total, oldest, index = load(KEYS[i], bucketMs)
  charge(KEYS[i], bucketMs, total, oldest, index, ARGV[base + 2])
end

local totals, oldests, indexes, buckets = {}, {}, {}, {}
local allowed = 1
for i = 1, checked do
  local base = 3 + (i - 1) * 4
  local limit = tonumber(ARGV[base + 1])
  local bucketMs = tonumber(ARGV[base + 2])
  local need = tonumber(ARGV[base + 4])
  totals[i], oldests[i], indexes[i] = load(KEYS[i], bucketMs)
  buckets[i] = bucketMs
  if totals[i] + need > limit then
    allowed = 0
  end
end

local retryAfter = 0
if allowed == 1 then
  for i = 1, checked do
    local base = 3 + (i - 1) * 4
    if tonumber(ARGV[base + 3]) > 0 then
      totals[i], oldests[i] = charge(KEYS[i], buckets[i], totals[i], oldests[i], indexes[i], ARGV[base + 3])
    end
  end
else
  -- How long until enough of the oldest buckets leave the window for every full counter.
  for i = 1, checked do
    local base = 3 + (i - 1) * 4
    local limit = tonumber(ARGV[base + 1])
    local need = tonumber(ARGV[base + 4])
    local excess = totals[i] + need - limit
    if excess > 0 then
      local wait = (N + 1) * buckets[i]
      if need <= limit then
        for bucket = oldests[i], indexes[i] do
          local units = redis.call('HGET', KEYS[i], int(bucket))
          if units then
            excess = excess - tonumber(units)
            if excess <= 0 then
              wait = (bucket + N + 1) * buckets[i] - now
              break
            end
          end
        end
      end
      if wait > retryAfter then
        retryAfter = wait
      end
    end
  end
end

local reply = { allowed, retryAfter }
for i = 1, checked do
  local reset = 0
  if totals[i] > 0 then
    reset = (oldests[i] + N + 1) * buckets[i] - now
  end
  reply[#reply + 1] = totals[i]
  reply[#reply + 1] = reset
end
return reply
