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
local extra_arg = util.extra_arg -- a further positional argument: an error naming it
local engine = require "ordo.engine"
local ffi, C = cdef.ffi, cdef.C
local fail = util.fail
local fmt = string.format

local M = {}

local function eng(fname, e)
    if e == nil then return engine.default()._e end
    if not engine.is_engine(e) then fail(fname .. ": expected an ordo engine, got " .. util.typename(e)) end
    if e._closed then fail(fname .. ": the engine was closed") end
    return e._e
end

-- The C message names its C function ("ordo_profiler_dump: ..."): from
-- Lua, fname names the call instead.
local function c_message(fname)
    return fname .. ": " .. ffi.string(C.ordo_last_error()):gsub("^ordo_[%w_]+: ", "")
end

local function check(fname, rc)
    if rc ~= 0 then fail(c_message(fname)) end
end

function M.start(e, extra)
    if extra ~= nil then extra_arg("profiler.start", "(engine)", extra) end
    check("profiler.start", C.ordo_profiler_start(eng("profiler.start", e)))
end
function M.stop(e, extra)
    if extra ~= nil then extra_arg("profiler.stop", "(engine)", extra) end
    check("profiler.stop", C.ordo_profiler_stop(eng("profiler.stop", e)))
end
function M.clear(e, extra)
    if extra ~= nil then extra_arg("profiler.clear", "(engine)", extra) end
    C.ordo_profiler_clear(eng("profiler.clear", e))
end

-- io's reason for a file that ordo_profiler_dump could not open for
-- writing (its own message says only that it could not): nil when io can.
-- Appending changes no file that exists; a file the probe made is removed.
local function write_reason(path)
    local f, _, code = io.open(path, "rb")
    if f then
        local ok, rerr, rcode = f:read(0)
        f:close()
        if ok == nil and rerr and rcode == 21 then return "it is a directory" end -- EISDIR
    end
    local w, err = io.open(path, "ab")
    if w then
        w:close()
        if not f and code == 2 then os.remove(path) end -- ENOENT before: the probe made it
        return nil
    end
    err = tostring(err)
    if err:sub(1, #path + 2) == path .. ": " then err = err:sub(#path + 3) end -- (io repeats the path)
    return err
end

-- Writes a Chrome trace (JSON) of the recorded ops to path.
function M.dump(path, e, extra)
    if extra ~= nil then extra_arg("profiler.dump", "(path, engine)", extra) end
    if type(path) ~= "string" then fail("profiler.dump: expected a file path, got " .. util.typename(path)) end
    if path == "" then fail("profiler.dump: the file path is empty") end
    -- C takes the path up to its first NUL: the trace would go to another file
    local nul = path:find("\0", 1, true)
    if nul then fail(("profiler.dump: the file path holds a NUL byte (at byte %d)"):format(nul)) end
    if C.ordo_profiler_dump(eng("profiler.dump", e), path) ~= 0 then
        local msg = c_message("profiler.dump")
        -- C says "cannot open 'path' for writing"; io can tell why
        local why = msg:find("cannot open", 1, true) and write_reason(path)
        if why then fail(fmt("profiler.dump: cannot write %s: %s", path, why)) end
        fail(msg)
    end
end

-- The summary table (one line per op name; a second table of GPU-side times
-- when GPU ops were profiled) as a string.
function M.summary(e, extra)
    if extra ~= nil then extra_arg("profiler.summary", "(engine)", extra) end
    local s = C.ordo_tensor_profiler_summary(eng("profiler.summary", e))
    if s == nil then fail("profiler.summary: out of memory") end
    local r = ffi.string(s)
    C.ordo_tensor_free_str(s)
    return r
end

return M
