-- Concurrency counters (a prelude of the scripts that read or write them): a hash of one field per
-- holder (a gateway of the fleet), '<slots held>:<expiry in ms>'. A live gateway writes its entry again
-- at least every heartbeat (slots-hold.lua), so a holder past its expiry has died and its slots are free.

-- The entry of a holder of `held` slots whose entry lives until `expiresAt`.
local function slotEntry(held, expiresAt)
  return string.format('%.0f', held) .. ':' .. string.format('%.0f', expiresAt)
end

-- The slots held under `key` at `now` by live holders, those of `holder` among them, and the fields of
-- the holders past their expiry.
local function liveSlots(key, now, holder)
  local total, own = 0, 0
  local gone = {}
  local fields = redis.call('HGETALL', key)
  for f = 1, #fields, 2 do
    local count, expires = string.match(fields[f + 1], '^(%d+):(%d+)$')
    if count and tonumber(expires) > now then
      total = total + tonumber(count)
      if fields[f] == holder then
        own = tonumber(count)
      end
    else
      gone[#gone + 1] = fields[f]
    end
  end
  return total, own, gone
end
