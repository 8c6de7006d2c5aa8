-- ordo.util: errors raised at the caller's line, devices, small checks.
-- Internal to the package (ordo.* modules share it).
local cdef = require "ordo.cdef"
local ffi, C = cdef.ffi, cdef.C

local M = {}

-- The chunk names of this package's files all start with this prefix
-- ("@lua/ordo/" or "@/abs/path/lua/ordo/"): error positions skip them.
local own_prefix = debug.getinfo(1, "S").source:match("^(@.*[/\\])") or "@"

local getinfo, error, sub = debug.getinfo, error, string.sub

-- Raises msg at the first frame outside the ordo package (and outside C
-- functions such as pcall), so "file:line:" names the user's call.
local function fail(msg)
    local level = 2
    while true do
        local info = getinfo(level, "S")
        if not info then
            level = 1
            break
        end
        if info.what ~= "C" and sub(info.source, 1, #own_prefix) ~= own_prefix then break end
        level = level + 1
    end
    error(msg, level)
end
M.fail = fail

-- A failure's message with the op named once: the engine prefixes the op's
-- name and kernels name themselves too ("div: div: ...").
function M.op_message(msg)
    return (msg:gsub("^([%w_]+): %1: ", "%1: "))
end

-- Raises the message of the last failed C tensor call.
function M.fail_c()
    fail(ffi.string(C.ordo_tensor_error()))
end

function M.typename(x)
    local t = type(x)
    if t == "table" then
        local mt = getmetatable(x)
        if mt and mt.__name then return mt.__name end
    end
    return t
end

-- ---------------------------------------------------------------- devices

local Device = {__name = "ordo.Device"}
Device.__index = Device
Device.__tostring = function(d) return d.type .. "(" .. d.id .. ")" end
M.Device = Device

local interned = {}

local function device(kind, dev_type, id)
    local key = dev_type * 1000 + id
    local d = interned[key]
    if not d then
        d = setmetatable({type = kind, id = id, dev_type = dev_type,
                          _ctx = ffi.new("ordo_ctx", dev_type, id)}, Device)
        interned[key] = d
    end
    return d
end

local function check_id(fname, n)
    if n == nil then return 0 end
    if type(n) ~= "number" or n ~= math.floor(n) or n < 0 or n >= 64 then
        fail(("%s: device id must be an integer in 0..63, got %s"):format(fname, tostring(n)))
    end
    return n
end

function M.cpu(n)
    return device("cpu", cdef.CPU, check_id("cpu", n))
end

function M.gpu(n)
    n = check_id("gpu", n)
    local count = C.ordo_gpu_count()
    if count == 0 then fail(("gpu(%d): no CUDA device available"):format(n)) end
    if n >= count then
        fail(("gpu(%d): no such CUDA device (%d device%s present)"):format(n, count, count > 1 and "s" or ""))
    end
    return device("gpu", cdef.GPU, n)
end

function M.is_device(x) return getmetatable(x) == Device end

-- The device of a ctx read from a descriptor.
function M.device_of_ctx(ctx)
    local t, id = ctx.dev_type, ctx.dev_id
    if t == cdef.GPU then return device("gpu", t, id) end
    if t == cdef.CPU_PINNED then return device("cpu_pinned", t, id) end
    return device("cpu", cdef.CPU, id)
end

-- A device from a Device, "cpu", "cpu:1", "cpu(1)", "gpu", "gpu:0", "cuda:0"; nil if x is none of them.
function M.parse_device(fname, x)
    if getmetatable(x) == Device then return x end
    if type(x) ~= "string" then return nil end
    local kind, id = x:match("^(%a+)[:%(]?(%d*)%)?$")
    if not kind then return nil end
    id = id ~= "" and tonumber(id) or 0
    if kind == "cpu" then return M.cpu(id) end
    if kind == "gpu" or kind == "cuda" then
        local count = C.ordo_gpu_count()
        if count == 0 then fail(("%s: %s(%d): no CUDA device available"):format(fname, kind, id)) end
        return M.gpu(id)
    end
    return nil
end

return M
