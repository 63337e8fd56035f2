-- The rules of plans (src/quota/plans.ts), for the scripts that write definitions: a membership names a
-- plan that exists, and a plan that applications are on stays a plan. Definitions are the gateway's
-- JSON, so a membership of plan P holds the text "plan":"P" exactly.

-- The stored text as a table, or nil when it is not JSON.
local function decoded(json)
  if not json then
    return nil
  end
  local ok, value = pcall(cjson.decode, json)
  if ok and type(value) == 'table' then
    return value
  end
  return nil
end

-- Whether a definition can be a plan: APPLICATION, owned by no application, not a well-known quota.
local function is_plan(definition)
  return definition ~= nil and definition.type == 'APPLICATION' and definition.application == nil
    and definition.plan == nil and definition.system == false
end

-- The refusal of a write that would leave `applications` on no plan: 'IN_USE:<how many>:<JSON list of
-- the first ten, by id>' (plans.ts names them, with the way to take each off).
local function in_use(applications)
  table.sort(applications)
  local named = {}
  for i = 1, math.min(#applications, 10) do
    named[i] = applications[i]
  end
  return 'IN_USE:' .. #applications .. ':' .. cjson.encode(named)
end

-- The applications that definitions of the hash put on plan `id`.
local function members(definitions_key, id)
  local needle = '"plan":"' .. id .. '"'
  local applications = {}
  for _, json in ipairs(redis.call('HVALS', definitions_key)) do
    if string.find(json, needle, 1, true) then
      local definition = decoded(json)
      applications[#applications + 1] = (definition and definition.application) or ''
    end
  end
  return applications
end

-- Why writing `json` under `id` (or removing `id`, when `json` is nil) breaks the rules: 'NO_PLAN' when
-- it names a plan that is none, IN_USE (see in_use) when it leaves applications on no plan; nil when not.
local function plan_rule_broken(definitions_key, id, json)
  local written = decoded(json)
  if written and written.plan then
    if not is_plan(decoded(redis.call('HGET', definitions_key, written.plan))) then
      return 'NO_PLAN'
    end
  end
  if written and is_plan(written) then
    return nil
  end
  local applications = members(definitions_key, id)
  if #applications > 0 then
    return in_use(applications)
  end
  return nil
end
