-- wrk script of the ingest benchmarks. Configured by environment variables (set by bench/run.mjs):
--   BENCH_KIND       single | batch
--   BENCH_FILE       batch: the body template; single: reading tails, one a line (scripts/lib/readings.mjs)
--   BENCH_API_KEY    the gateway's API key
--   BENCH_RATE       requests per second for all threads together; 0 or unset sends as fast as answered
--   BENCH_THREADS    wrk's -t, to share the rate among the threads
-- Every reading gets a unique time: the wall clock's millisecond, then a digit for the thread, then
-- a per-millisecond sequence, so deduplication in QuestDB hides nothing.
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clk_id, bench_timespec *tp);
]]
local CLOCK_REALTIME, CLOCK_MONOTONIC = 0, 1
local ts = ffi.new("bench_timespec")

local function clock_ms(clock)
  ffi.C.clock_gettime(clock, ts)
  return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end

local kind = os.getenv("BENCH_KIND") or "single"
local rate = tonumber(os.getenv("BENCH_RATE") or "0") or 0
local threads = tonumber(os.getenv("BENCH_THREADS") or "1") or 1

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-API-Key"] = os.getenv("BENCH_API_KEY")

local next_id = 0
function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
end

local template, tails = nil, {}
local f = assert(io.open(assert(os.getenv("BENCH_FILE"), "BENCH_FILE is not set"), "r"))
if kind == "batch" then
  template = f:read("*a")
else
  for line in f:lines() do tails[#tails + 1] = line end
end
f:close()

-- Seconds change rarely: format the date part once per second.
local cached_second, cached_date = -1, ""
local function date_prefix(ms)
  local second = math.floor(ms / 1000)
  if second ~= cached_second then
    cached_second = second
    cached_date = os.date("!%Y-%m-%dT%H:%M:%S.", second)
  end
  return cached_date .. string.format("%03d", ms % 1000)
end

local last_ms, seq, count = 0, 0, 0

-- Moves to the clock's millisecond, or counts on within the last one; past max_seq requests in a
-- millisecond the times run ahead of the clock.
local function advance(max_seq)
  local ms = math.floor(clock_ms(CLOCK_REALTIME))
  if ms > last_ms then
    last_ms, seq = ms, 0
  else
    seq = seq + 1
    if seq > max_seq then last_ms, seq = last_ms + 1, 0 end
  end
end

if kind == "batch" then
  -- Ten requests per millisecond and thread: one digit of the time.
  request = function()
    advance(9)
    local body = template:gsub("@T@", date_prefix(last_ms) .. id .. seq)
    return wrk.format(nil, nil, nil, body)
  end
else
  request = function()
    advance(99999)
    count = count + 1
    local body = '{"time":"' .. date_prefix(last_ms) .. id .. string.format("%05d", seq) .. 'Z",' .. tails[count % #tails + 1]
    return wrk.format(nil, nil, nil, body)
  end
end

if rate > 0 then
  -- Open-loop pacing: request k of a thread is due at start + k * interval, whatever the answers
  -- took, so the offered rate holds while the gateway keeps up and falls short when it does not.
  local interval = threads * 1000 / rate
  local started, sent = nil, 0
  delay = function()
    local now = clock_ms(CLOCK_MONOTONIC)
    if started == nil then started = now + id * interval / threads end
    local wait = started + sent * interval - now
    sent = sent + 1
    if wait <= 0 then return 0 end
    return math.floor(wait)
  end
end

function done(summary, latency, requests)
  io.write(string.format(
    'BENCH_RESULT {"durationUs":%d,"requests":%d,"bytes":%d,"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latencyUs":{"p50":%d,"p90":%d,"p99":%d,"max":%d,"mean":%.1f}}\n',
    summary.duration, summary.requests, summary.bytes,
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.status, summary.errors.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
