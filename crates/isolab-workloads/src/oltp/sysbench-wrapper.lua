-- isolab: sysbench 1.0.20's @script@ (Debian's /usr/share/sysbench), with
-- * deterministic rows written by prepare (below);
-- * the table size of the data set (@workdir@/sysbench/table-size, written by the
--   data load) as the default of --table-size;
-- * the cumulative report as JSON (sysbench.report_json) instead of prose;
-- * every event's latency (µs, CLOCK_MONOTONIC) written by each thread when it
--   ends to @workdir@/sysbench/latency.THREAD, one a line: sysbench's JSON has a
--   single percentile, rounded to 10 µs, and no mean.
dofile("/usr/share/sysbench/@script@.lua")

local sized = io.open("@workdir@/sysbench/table-size")
if sized then
  sysbench.cmdline.options.table_size[2] = tonumber(sized:read("*l"))
  sized:close()
end

-- Deterministic rows: sysbench 1.0.20's --rand-seed does not fix the strings its
-- prepare writes, so prepare draws `k`, `c` and `pad` from a fixed linear
-- congruential generator instead (`sb_rand` is the alias oltp_common.lua uses) (the measured run keeps sysbench's own).
if sysbench.cmdline.command == "prepare" then
  local state = 1
  -- The high 23 of its 31 bits (the low bits of such a generator repeat quickly).
  local function draw()
    state = (state * 1103515245 + 12345) % 2147483648
    return math.floor(state / 256)
  end
  sysbench.rand.default = function(low, high)
    return low + (draw() * 8388608 + draw()) % (high - low + 1)
  end
  sysbench.rand.string = function(template)
    return (template:gsub("#", function()
      return tostring(draw() % 10)
    end))
  end
  sb_rand = sysbench.rand.default
  sysbench.rand.string = function(template)
    return (template:gsub("#", function()
      return tostring(draw() % 10)
    end))
  end
end

sysbench.hooks.report_cumulative = sysbench.report_json

local ffi = require("ffi")
ffi.cdef[[
typedef struct { long sec; long nsec; } isolab_timespec;
int clock_gettime(int clock, isolab_timespec *t);
]]
local ts = ffi.new("isolab_timespec")
local function now_us()
  ffi.C.clock_gettime(1, ts)
  return tonumber(ts.sec) * 1000000 + tonumber(ts.nsec) / 1000
end

local measured_event, measured_done = event, thread_done
local latencies = {}
function event(...)
  local t0 = now_us()
  measured_event(...)
  latencies[#latencies + 1] = string.format("%.1f", now_us() - t0)
end
function thread_done(...)
  if #latencies > 0 then
    local f = assert(io.open("@workdir@/sysbench/latency." .. sysbench.tid, "w"))
    f:write(table.concat(latencies, "\n"), "\n")
    f:close()
  end
  if measured_done then
    return measured_done(...)
  end
end
