"""The admission port's Lua scripts (`workers.state.admission.RedisAdmission`): each decision
one script, by the broker's clock. A lane's waiting jobs are keyed by the lane's queue; the
running set and the mean service time by the capability's (see `workers.state.admission`).
"""

from __future__ import annotations

# Lua shared by the admission scripts. `prune`: admitted jobs whose entry expired (a message
# that never reached a worker) leave both the expiry-ordered and the time-ordered set.
# `expected`: seconds until a job with `ahead` jobs before it (every slot busy) finishes.
ADMISSION_LUA = """
local function prune(admitted, queued, now)
  for _, job in ipairs(redis.call('zrangebyscore', admitted, '-inf', now)) do
    redis.call('zrem', admitted, job)
    redis.call('zrem', queued, job)
  end
end
local function expected(ahead, slots, mean)
  return (ahead - slots + 1) * mean / slots + mean
end
"""

# One atomic admission for a key: answered by a done result, joined to the job in flight,
# refused over the lane's high water, else registered (the caller then sends the message).
# The lane's depth is the set of admitted jobs no worker has started yet, scored by expiry,
# so that a burst of submitters cannot all pass a check that only later becomes false; the
# same jobs are kept by admission time too (`keys.queued`), for `FINISH_ESTIMATE`.
# With a wait bound, a new job is refused ('busy', with the expected seconds) when it would
# not start at once and is expected to finish past the bound (`workers.core.wait_estimate`).
# KEYS: result, inflight, job, admitted (the lane's), running, service (the capability's),
# queued (the lane's).  ARGV: job id, ttl, high
# water (0: none), now, result key text, job-key ttl, force (1/0), wait bound (0: none), slots.
ADMIT = (
    ADMISSION_LUA
    + """
if ARGV[7] == '0' then
  local stored = redis.call('get', KEYS[1])
  if stored and cjson.decode(stored)['status'] == 'done' then return {'settled', stored} end
end
local current = redis.call('get', KEYS[2])
if current then return {'joined', current} end
prune(KEYS[4], KEYS[7], ARGV[4])
local high = tonumber(ARGV[3])
if high > 0 then
  local waiting = redis.call('zcard', KEYS[4])
  if waiting >= high then return {'refused', tostring(waiting)} end
end
local bound = tonumber(ARGV[8])
local slots = tonumber(ARGV[9])
local mean = tonumber(redis.call('hget', KEYS[6], 'mean') or '0')
if bound > 0 and slots > 0 and mean > 0 then
  redis.call('zremrangebyscore', KEYS[5], '-inf', ARGV[4])
  local ahead = redis.call('zcard', KEYS[4]) + math.min(redis.call('zcard', KEYS[5]), slots)
  if ahead >= slots then
    local seconds = expected(ahead, slots, mean)
    if seconds > bound then return {'busy', tostring(seconds)} end
  end
end
redis.call('set', KEYS[2], ARGV[1], 'EX', ARGV[2])
redis.call('set', KEYS[3], ARGV[5], 'EX', ARGV[6])
redis.call('zadd', KEYS[4], tonumber(ARGV[4]) + tonumber(ARGV[2]), ARGV[1])
redis.call('zadd', KEYS[7], ARGV[4], ARGV[1])
return {'queued', ARGV[1]}
"""
)
# Seconds until an admitted job that still waits in its queue finishes, from its position
# among the jobs admitted before it, the jobs running and the current mean
# (`workers.core.wait_estimate.expected_finish`); nil once a worker started it (or it is unknown).
# KEYS: admitted, queued, running, service.  ARGV: job id, now, slots.
FINISH_ESTIMATE = (
    ADMISSION_LUA
    + """
prune(KEYS[1], KEYS[2], ARGV[2])
local position = redis.call('zrank', KEYS[2], ARGV[1])
if not position then return false end
redis.call('zremrangebyscore', KEYS[3], '-inf', ARGV[2])
local slots = tonumber(ARGV[3])
local mean = tonumber(redis.call('hget', KEYS[4], 'mean') or '0')
local ahead = position + math.min(redis.call('zcard', KEYS[3]), slots)
if slots > 0 and mean > 0 and ahead >= slots then return tostring(expected(ahead, slots, mean)) end
return tostring(math.max(mean, 0))
"""
)
# A job's result is put: it leaves the running set and, done, its service time (from its
# start in the running set to now: everything its slot spent on it, not only the stage's
# `elapsed_ms`, which is the floor) moves its queue's mean (`workers.core.wait_estimate`).
# KEYS: running, service.  ARGV: job id, elapsed seconds, done (1/0), newest job's least
# weight, running-set ttl, service ttl.
FINISHED = """
local score = redis.call('zscore', KEYS[1], ARGV[1])
redis.call('zrem', KEYS[1], ARGV[1])
if ARGV[3] ~= '1' then return 0 end
local seconds = tonumber(ARGV[2])
if score then
  local t = redis.call('time')
  local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
  seconds = math.max(seconds, now - (tonumber(score) - tonumber(ARGV[5])))
end
if seconds <= 0 then return 0 end
local n = tonumber(redis.call('hget', KEYS[2], 'n') or '0')
local mean = tonumber(redis.call('hget', KEYS[2], 'mean') or '0')
local weight = math.max(1 / (n + 1), tonumber(ARGV[4]))
mean = mean + weight * (seconds - mean)
redis.call('hset', KEYS[2], 'mean', tostring(mean), 'n', tostring(n + 1))
redis.call('expire', KEYS[2], ARGV[6])
return 1
"""
