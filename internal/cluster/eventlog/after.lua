-- Replay: KEYS[1] the stream, KEYS[2] the session's hash of births;
-- ARGV[1] the stream's name, ARGV[2] the cursor's birth, ARGV[3] its
-- entry id <ms>-<ordinal>. Returns {1, id, data, id, data...} with every
-- event after the cursor (its entry id and data), or {} when one of them
-- is gone or the cursor is foreign: never a partial replay.
local birth = redis.call('HGET', KEYS[2], ARGV[1])
if not birth or birth ~= ARGV[2] or redis.call('EXISTS', KEYS[1]) == 0 then
  return {}
end
local n = tonumber(string.sub(ARGV[3], string.find(ARGV[3], '-', 1, true) + 1))
local last
local info = redis.call('XINFO', 'STREAM', KEYS[1])
for i = 1, #info, 2 do
  if info[i] == 'last-generated-id' then
    last = tonumber(string.sub(info[i + 1], string.find(info[i + 1], '-', 1, true) + 1))
  end
end
if n > last then
  return {} -- a cursor this stream never gave
end
local entries = redis.call('XRANGE', KEYS[1], '(' .. ARGV[3], '+')
-- Events n+1 … last must all be there: ordinals have no gaps, and
-- trimming removes only the oldest.
if #entries ~= last - n then
  return {}
end
if #entries > 0 then
  local first = entries[1][1]
  if tonumber(string.sub(first, string.find(first, '-', 1, true) + 1)) ~= n + 1 then
    return {}
  end
end
local out = {1}
for i = 1, #entries do
  local f = entries[i][2]
  for j = 1, #f, 2 do
    if f[j] == 'd' then
      out[#out + 1] = entries[i][1]
      out[#out + 1] = f[j + 1]
    end
  end
end
return out
