-- Sliding-window counters, one trip of a gateway: give back unused units of leases, add the units
-- measured since, then check every counter and, only if all have room, charge all of them (with the
-- lease each gateway asked for, when there is room for it).
-- Each counter is a hash: 't' running total, 'o' oldest bucket that may hold units, and one field per
-- bucket index (bucket = window / N). A counter admits when total + need <= limit over the last N + 1
-- buckets, so no interval of one window ever holds more than the limit.
-- The cost of a call is bounded whatever the idle gap: expired buckets are found among the fields
-- present (at most N + 3), never by stepping through bucket indices.
-- Concurrency counters (slot-entries.lua) are checked in the same step, one slot each.
-- KEYS: the counters to check, then the counters to add to, then the counters to give back to, then the
-- concurrency counters to take a slot of.
-- ARGV[1]: N. ARGV[2]: '' for the Redis server's clock (one clock for the whole fleet), or a time in ms
-- that tests set. ARGV[3], ARGV[4]: how many counters to check and to add to. ARGV[5]: live gateways.
-- ARGV[6]: how many concurrency counters. ARGV[7]: the holder taking their slots. ARGV[8]: how long its
-- entry lives unless written again, in ms.
-- Then five per checked counter: limit, bucket ms, cost, need, units the gateway would lease over a
-- whole bucket; two per added counter: bucket ms, units; three per given-back counter: bucket ms,
-- bucket index, units; one per concurrency counter: its limit.
-- Returns {allowed (1|0), retry-after ms, then per checked counter: used, reset ms, units leased beyond
-- the cost, bucket index charged, ms left in that bucket, ms until it has room (0 when it has), then
-- the same six per concurrency counter: slots held, 1000 when full else 0, 0, 0, 0, 1000 when it
-- refused else 0}.
local N = tonumber(ARGV[1])
local now = timeOf(ARGV[2])
local checked = tonumber(ARGV[3])
local added = tonumber(ARGV[4])
local live = math.max(1, tonumber(ARGV[5]))
local slotted = tonumber(ARGV[6])
local holder = ARGV[7]
local slotTtl = tonumber(ARGV[8])
-- ARGV before the counters' own.
local H = 8
-- A full concurrency counter's wait: a slot frees when any request ends, which no clock predicts.
local slotRetry = 1000

local function int(n)
  return string.format('%.0f', n)
end

-- The counter's total and oldest bucket, after dropping the buckets that left the window.
local function load(key, bucketMs)
  local index = math.floor(now / bucketMs)
  local oldestKept = index - N
  local state = redis.call('HMGET', key, 't', 'o')
  local total = tonumber(state[1])
  local oldest = tonumber(state[2])
  if not total then
    return 0, index, index
  end
  if oldest and oldest >= oldestKept then
    return total, oldest, index
  end
  total = 0
  oldest = nil
  local expired = {}
  local fields = redis.call('HGETALL', key)
  for i = 1, #fields, 2 do
    local bucket = tonumber(fields[i])
    if bucket then
      if bucket < oldestKept then
        expired[#expired + 1] = fields[i]
      else
        total = total + tonumber(fields[i + 1])
        if not oldest or bucket < oldest then
          oldest = bucket
        end
      end
    end
  end
  if total <= 0 then
    redis.call('DEL', key)
    return 0, index, index
  end
  if #expired > 0 then
    redis.call('HDEL', key, unpack(expired))
  end
  redis.call('HSET', key, 't', int(total), 'o', int(oldest))
  return total, oldest, index
end

local function charge(key, bucketMs, total, oldest, index, units)
  if total == 0 then
    oldest = index
  end
  redis.call('HINCRBY', key, int(index), int(units))
  total = total + units
  redis.call('HSET', key, 't', int(total), 'o', int(oldest))
  redis.call('PEXPIRE', key, (N + 1) * bucketMs)
  return total, oldest
end

-- Units of a lease that were never spent leave the bucket they were charged to, if it is still counted.
local function giveBack(key, bucketMs, bucket, units)
  if bucket < math.floor(now / bucketMs) - N then
    return
  end
  local held = tonumber(redis.call('HGET', key, int(bucket)))
  if not held then
    return
  end
  local back = math.min(held, units)
  if back == held then
    redis.call('HDEL', key, int(bucket))
  else
    redis.call('HINCRBY', key, int(bucket), int(-back))
  end
  local total = (tonumber(redis.call('HGET', key, 't')) or 0) - back
  if total <= 0 then
    redis.call('DEL', key)
  else
    redis.call('HSET', key, 't', int(total))
  end
end

local givenBack = #KEYS - checked - added - slotted
local givenBackBase = H + checked * 5 + added * 2
for i = checked + added + 1, checked + added + givenBack do
  local base = givenBackBase + (i - checked - added - 1) * 3
  giveBack(KEYS[i], tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3]))
end

local addBase = H + checked * 5
for i = checked + 1, checked + added do
  local base = addBase + (i - checked - 1) * 2
  local bucketMs = tonumber(ARGV[base + 1])
  local total, oldest, index = load(KEYS[i], bucketMs)
  charge(KEYS[i], bucketMs, total, oldest, index, tonumber(ARGV[base + 2]))
end

local totals, oldests, indexes, buckets, leased, waits = {}, {}, {}, {}, {}, {}
local allowed = 1
for i = 1, checked do
  local base = H + (i - 1) * 5
  local limit = tonumber(ARGV[base + 1])
  local bucketMs = tonumber(ARGV[base + 2])
  local need = tonumber(ARGV[base + 4])
  totals[i], oldests[i], indexes[i] = load(KEYS[i], bucketMs)
  buckets[i] = bucketMs
  leased[i] = 0
  waits[i] = 0
  if totals[i] + need > limit then
    allowed = 0
  end
end

-- The slots held under a concurrency counter by live holders, and the holder's own; the entries of
-- holders past their expiry are dropped.
local function loadSlots(key)
  local total, own, gone = liveSlots(key, now, holder)
  if #gone > 0 then
    redis.call('HDEL', key, unpack(gone))
  end
  return total, own
end

local slotBase = givenBackBase + givenBack * 3
local slotTotals, slotOwn = {}, {}
for s = 1, slotted do
  slotTotals[s], slotOwn[s] = loadSlots(KEYS[checked + added + givenBack + s])
  if slotTotals[s] + 1 > tonumber(ARGV[slotBase + s]) then
    allowed = 0
  end
end

-- Units of counter i that must leave the window before `need` more fit: the wait, from the fields.
local function waitFor(i, excess)
  local oldestKept = indexes[i] - N
  local counted = {}
  local fields = redis.call('HGETALL', KEYS[i])
  for f = 1, #fields, 2 do
    local bucket = tonumber(fields[f])
    if bucket and bucket >= oldestKept then
      counted[#counted + 1] = { bucket, tonumber(fields[f + 1]) }
    end
  end
  table.sort(counted, function(a, b)
    return a[1] < b[1]
  end)
  for _, entry in ipairs(counted) do
    excess = excess - entry[2]
    if excess <= 0 then
      return (entry[1] + N + 1) * buckets[i] - now
    end
  end
  return (N + 1) * buckets[i]
end

local retryAfter = 0
if allowed == 1 then
  for i = 1, checked do
    local base = H + (i - 1) * 5
    local limit = tonumber(ARGV[base + 1])
    local cost = tonumber(ARGV[base + 3])
    local wanted = tonumber(ARGV[base + 5])
    if wanted > 0 then
      -- The lease lasts what is left of this bucket, and never takes more than this gateway's part of
      -- one bucket's steady rate or of the room left, so small limits stay one unit per trip.
      local bucketLeft = (indexes[i] + 1) * buckets[i] - now
      local wantedNow = math.floor(wanted * bucketLeft / buckets[i])
      local fair = math.floor(math.min(limit / (N * live), (limit - totals[i] - cost) / live))
      leased[i] = math.max(0, math.min(wantedNow, fair))
    end
    if cost + leased[i] > 0 then
      totals[i], oldests[i] = charge(KEYS[i], buckets[i], totals[i], oldests[i], indexes[i], cost + leased[i])
    end
  end
  for s = 1, slotted do
    local key = KEYS[checked + added + givenBack + s]
    redis.call('HSET', key, holder, slotEntry(slotOwn[s] + 1, now + slotTtl))
    redis.call('PEXPIRE', key, slotTtl * 2)
    slotTotals[s] = slotTotals[s] + 1
  end
else
  -- How long until enough of the oldest buckets leave the window for every full counter.
  for i = 1, checked do
    local base = H + (i - 1) * 5
    local limit = tonumber(ARGV[base + 1])
    local need = tonumber(ARGV[base + 4])
    local excess = totals[i] + need - limit
    if excess > 0 then
      local wait = (N + 1) * buckets[i]
      if need <= limit then
        wait = waitFor(i, excess)
      end
      waits[i] = wait
      if wait > retryAfter then
        retryAfter = wait
      end
    end
  end
  for s = 1, slotted do
    if slotTotals[s] + 1 > tonumber(ARGV[slotBase + s]) and slotRetry > retryAfter then
      retryAfter = slotRetry
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
  reply[#reply + 1] = leased[i]
  reply[#reply + 1] = indexes[i]
  reply[#reply + 1] = (indexes[i] + 1) * buckets[i] - now
  reply[#reply + 1] = waits[i]
end
for s = 1, slotted do
  local limit = tonumber(ARGV[slotBase + s])
  local full, refused = 0, 0
  if slotTotals[s] >= limit then
    full = slotRetry
  end
  if allowed == 0 and slotTotals[s] + 1 > limit then
    refused = slotRetry
  end
  reply[#reply + 1] = slotTotals[s]
  reply[#reply + 1] = full
  reply[#reply + 1] = 0
  reply[#reply + 1] = 0
  reply[#reply + 1] = 0
  reply[#reply + 1] = refused
end
return reply
