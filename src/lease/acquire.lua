-- KEYS[1] lease key, KEYS[2] fence counter key
-- ARGV[1] owner id, ARGV[2] ttl ms, ARGV[3] fence floor (highest token Postgres has seen)
-- Returns {1, fence} when taken, {0, owner, pttl} when another owner holds it.
local current = redis.call('GET', KEYS[1])
if current then
  local bar = string.find(current, '|', 1, true)
  local owner = current
  if bar then owner = string.sub(current, 1, bar - 1) end
  if owner ~= ARGV[1] then
    return {0, owner, redis.call('PTTL', KEYS[1])}
  end
end
-- Lua numbers are doubles, exact only up to 2^53, so the comparison is
-- done on the decimal strings and the increment by Redis (64-bit exact).
local function greater(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end
-- The floor keeps a Redis that lost its counter from reissuing a used token.
local counter = redis.call('GET', KEYS[2]) or '0'
if greater(ARGV[3], counter) then
  redis.call('SET', KEYS[2], ARGV[3])
end
redis.call('INCR', KEYS[2])
local fence = redis.call('GET', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. fence, 'PX', ARGV[2])
return {1, fence}
