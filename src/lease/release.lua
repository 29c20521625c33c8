-- KEYS[1] lease key; ARGV[1] expected "owner|fence". Compare-and-delete:
-- a lease that is no longer ours is left alone. The fence counter is never
-- deleted.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
