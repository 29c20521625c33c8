-- One server only (never a cluster: the keys span slots). KEYS: lease keys;
-- ARGV[1] ttl ms, ARGV[1 + i] the value KEYS[i] is expected to hold.
-- Returns, for each key, what renew.lua would: 1 renewed, 0 gone, 2 foreign.
local ttl = ARGV[1]
local out = {}
for i, key in ipairs(KEYS) do
  local current = redis.call('GET', key)
  if not current then
    out[i] = 0
  elseif current ~= ARGV[i + 1] then
    out[i] = 2
  else
    redis.call('PEXPIRE', key, ttl)
    out[i] = 1
  end
end
return out
