-- Writes a batch of quota definitions as one write, all or none: each creation must find its id free
-- (and its application without a quota), each replacement the ETag its writer read, and the set as the
-- batch leaves it must keep the rules of plans (plan-rules.lua); only then is anything written. The
-- batch raises the version of the set once, clears a restore's marker and publishes one change.
-- KEYS[1] definitions hash, KEYS[2] applications hash, KEYS[3] version hash
-- ARGV[1] change channel, then for each write: id, JSON, expected ETag ('' to create), application or ''
-- Returns {'OK', ''}, or {reason, id} for the first write refused and nothing written: reason is EMPTY
-- (the set is lost and must be restored first), PRECONDITION (the id was taken, changed or removed since
-- it was read), CONFLICT (the application has a quota already), NO_PLAN or IN_USE (see plan-rules.lua).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { 'EMPTY', '' }
end
local definitions = {}
local stored = redis.call('HGETALL', KEYS[1])
for i = 1, #stored, 2 do
  definitions[stored[i]] = stored[i + 1]
end

local written = {}
local linked = {}
for i = 2, #ARGV, 4 do
  local id, json, expected, application = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local current = definitions[id]
  if expected == '' then
    if current then
      return { 'PRECONDITION', id }
    end
    if application ~= '' then
      if linked[application] or redis.call('HEXISTS', KEYS[2], application) == 1 then
        return { 'CONFLICT', id }
      end
      linked[application] = true
    end
  elseif not current or redis.sha1hex(current) ~= expected then
    return { 'PRECONDITION', id }
  end
  definitions[id] = json
  written[#written + 1] = id
end

-- The applications each plan has as the batch leaves the set: one pass, however many writes ask.
local members = {}
for _, json in pairs(definitions) do
  if string.find(json, '"plan":"', 1, true) then
    local definition = decoded(json)
    if definition and type(definition.plan) == 'string' then
      local applications = members[definition.plan] or {}
      applications[#applications + 1] = definition.application or ''
      members[definition.plan] = applications
    end
  end
end
for _, id in ipairs(written) do
  local definition = decoded(definitions[id])
  if definition and definition.plan and not is_plan(decoded(definitions[definition.plan])) then
    return { 'NO_PLAN', id }
  end
  if not (definition and is_plan(definition)) and members[id] then
    return { in_use(members[id]), id }
  end
end

for i = 2, #ARGV, 4 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  if ARGV[i + 2] == '' and ARGV[i + 3] ~= '' then
    redis.call('HSET', KEYS[2], ARGV[i + 3], ARGV[i])
  end
end
if #written > 0 then
  redis.call('HINCRBY', KEYS[3], 'version', 1)
  redis.call('HDEL', KEYS[3], 'restored')
  redis.call('PUBLISH', ARGV[1], '*')
end
return { 'OK', '' }
