-- KEYS[1] lease key; ARGV[1] expected "owner|fence"; ARGV[2] ttl ms
-- Returns 1 renewed, 0 gone, 2 foreign (held by someone else, or by an
-- older/newer acquire of this same owner id).
local current = redis.call('GET', KEYS[1])
if not current then
  return 0
end
if current ~= ARGV[1] then
  return 2
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
