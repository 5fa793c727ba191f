-- Open a stream: KEYS[1] the stream, KEYS[2] the session's hash of births;
-- ARGV[1] the stream's name, ARGV[2] the time to live in ms.
-- Returns the cursor of the stream's end: <birth>:<last entry id>.
local birth = redis.call('HGET', KEYS[2], ARGV[1])
local last
if birth and redis.call('EXISTS', KEYS[1]) == 1 then
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then last = info[i + 1] end
  end
else
  -- A new stream: an empty Redis Stream whose last id is <now>-0 (the
  -- ordinal 0, before the first event), born now.
  local t = redis.call('TIME')
  birth = string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  last = birth .. '-0'
  redis.call('DEL', KEYS[1])
  redis.call('XADD', KEYS[1], 'MAXLEN', '0', last, 'o', '')
  redis.call('HSET', KEYS[2], ARGV[1], birth)
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return birth .. ':' .. last
