-- ordo.profiler: the engine's profiler from Lua.
--
--   ordo.profiler.start()               -- or ORDO_PROFILER_AUTOSTART=1
--   ... push work ...
--   ordo.engine.wait_for_all()
--   ordo.profiler.stop()
--   ordo.profiler.dump("trace.json")    -- chrome://tracing or ui.perfetto.dev
--   print(ordo.profiler.summary())      -- per op name: count, total, min, max, mean, queue wait;
--                                       -- then, if GPU ops ran, their GPU-side times (from events)
--
-- Every function takes an optional engine (ordo.engine.new{...}) last;
-- the default engine otherwise.  Tensor ops appear under their kernel's name.
local cdef = require "ordo.cdef"
local util = require "ordo.util"
local engine = require "ordo.engine"
local ffi, C = cdef.ffi, cdef.C
local fail = util.fail

local M = {}

local function eng(fname, e)
    if e == nil then return engine.default()._e end
    if not engine.is_engine(e) then fail(fname .. ": expected an ordo engine, got " .. util.typename(e)) end
    if e._closed then fail(fname .. ": the engine was closed") end
    return e._e
end

local function check(fname, rc)
    if rc ~= 0 then fail(fname .. ": " .. ffi.string(C.ordo_last_error())) end
end

function M.start(e) check("profiler.start", C.ordo_profiler_start(eng("profiler.start", e))) end
function M.stop(e) check("profiler.stop", C.ordo_profiler_stop(eng("profiler.stop", e))) end
function M.clear(e) C.ordo_profiler_clear(eng("profiler.clear", e)) end

-- Writes a Chrome trace (JSON) of the recorded ops to path.
function M.dump(path, e)
    if type(path) ~= "string" or path == "" then
        fail("profiler.dump: expected a file path, got " .. util.typename(path))
    end
    check("profiler.dump", C.ordo_profiler_dump(eng("profiler.dump", e), path))
end

-- The summary table (one line per op name; a second table of GPU-side times
-- when GPU ops were profiled) as a string.
function M.summary(e)
    local s = C.ordo_tensor_profiler_summary(eng("profiler.summary", e))
    if s == nil then fail("profiler.summary: out of memory") end
    local r = ffi.string(s)
    C.ordo_tensor_free_str(s)
    return r
end

return M
