-- Append an event: KEYS[1] the stream, KEYS[2] the session's hash of
-- births; ARGV[1] the stream's name, ARGV[2] the data, ARGV[3] the count
-- to keep (about), ARGV[4] the age to keep in ms (and the time to live).
-- Returns the event's cursor: <birth>:<ms>-<ordinal>.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local birth = redis.call('HGET', KEYS[2], ARGV[1])
local lms, lseq
if birth and redis.call('EXISTS', KEYS[1]) == 1 then
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then
      local dash = string.find(info[i + 1], '-', 1, true)
      lms = tonumber(string.sub(info[i + 1], 1, dash - 1))
      lseq = tonumber(string.sub(info[i + 1], dash + 1))
    end
  end
else
  -- Expired or never opened: born anew, so that no older cursor matches.
  birth = string.format('%.0f', now)
  lms, lseq = now, 0
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[2], ARGV[1], birth)
end
local id = string.format('%.0f-%.0f', math.max(now, lms), lseq + 1)
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], id, 'd', ARGV[2])
redis.call('XTRIM', KEYS[1], 'MINID', '~', string.format('%.0f', now - tonumber(ARGV[4])))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return birth .. ':' .. id
