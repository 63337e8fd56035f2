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

-- How many definitions of the hash put an application on plan `id`.
local function members(definitions_key, id)
  local needle = '"plan":"' .. id .. '"'
  local count = 0
  for _, json in ipairs(redis.call('HVALS', definitions_key)) do
    if string.find(json, needle, 1, true) then
      count = count + 1
    end
  end
  return count
end

-- Why writing `json` under `id` (or removing `id`, when `json` is nil) breaks the rules: 'NO_PLAN' when
-- it names a plan that is none, 'IN_USE:<members>' when it leaves applications on no plan; nil when not.
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
  local count = members(definitions_key, id)
  if count > 0 then
    return 'IN_USE:' .. count
  end
  return nil
end
