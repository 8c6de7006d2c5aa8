-- ordo: tensors on a dependency engine, from LuaJIT.
--
--   local ordo = require "ordo"
--   local a = ordo.tensor({{1, 2}, {3, 4}})          -- float32 on cpu(0)
--   local b = ordo.randn({2, 2})
--   local c = (a + b):relu():sum()                  -- pushes, returns at once
--   print(c:item())                                 -- waits for c
--   ordo.engine.wait_for_all()
--
-- Modules: ordo.engine (the engine), ordo.profiler, ordo.data (datasets,
-- batches), ordo.progress (progress bars); tensors are
-- ordo.Tensor (lua/ordo/tensor.lua documents the rules: dims from 1, type
-- promotion, waits).  See README.md ("Tensors from Lua") for the whole API.
local ffi = require "ffi"
local cdef = require "ordo.cdef"
local util = require "ordo.util"
local extra_arg = util.extra_arg -- a further positional argument: an error naming it
local tensor = require "ordo.tensor"
local autograd = require "ordo.autograd" -- wraps the tensor ops: before they are copied below
local derived = require "ordo.derived"   -- var, std, norm, logsumexp, chunk, split...: ops made of ops

local C = cdef.C

local M = {}

M.engine = require "ordo.engine"
M.profiler = require "ordo.profiler"
M.data = require "ordo.data"         -- IDX files, Fashion-MNIST, DataLoader
M.progress = require "ordo.progress" -- progress bars for training loops
M.autograd = autograd
M.no_grad, M.enable_grad = autograd.no_grad, autograd.enable_grad
M.set_grad_enabled, M.is_grad_enabled = autograd.set_enabled, autograd.is_enabled -- (Torch's names)
M.nn = require "ordo.nn"
M.optim = require "ordo.optim"
M.linalg = require "ordo.linalg" -- solve, inv, det, slogdet
M.Tensor = tensor.Tensor

-- Torch's requires_grad = true (or false) among a creation function's
-- options: the tensor made without it, then t:requires_grad(); only float
-- dtypes may require a gradient, refused before anything is made where the
-- options name the dtype (randint and randperm make int64 unless told).
local FLOAT_NAMES = {float32 = true, float64 = true}
local INT_MAKERS = {randint = true, randperm = true}
local function with_requires_grad(fname, fn)
    local function refuse(dt)
        util.fail(("%s: only float tensors (float32, float64) can require a gradient, got %s (requires_grad = true)")
                  :format(fname, dt))
    end
    return function(...)
        local n = select("#", ...)
        local last = n > 0 and select(n, ...) or nil
        if type(last) ~= "table" or getmetatable(last) ~= nil or rawget(last, "requires_grad") == nil then
            return fn(...)
        end
        local rg = last.requires_grad
        if type(rg) ~= "boolean" then
            util.fail(("%s: requires_grad must be a boolean, got %s"):format(fname, util.typename(rg)))
        end
        local o = {}
        for k, v in pairs(last) do
            if k ~= "requires_grad" then o[k] = v end
        end
        if rg then
            if o.dtype ~= nil then
                local dt = tensor.DT_NAME[tensor.parse_dtype(fname, o.dtype)]
                if not FLOAT_NAMES[dt] then refuse(dt) end
            elseif INT_MAKERS[fname] then
                refuse("int64")
            end
        end
        local args = {...}
        args[n] = o
        local t = fn(unpack(args, 1, n)) -- (LuaJIT's unpack)
        if rg then
            if not FLOAT_NAMES[t:dtype()] then refuse(t:dtype()) end
            t:requires_grad(true)
        end
        return t
    end
end
for _, k in ipairs({"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"}) do
    tensor.Tensor[k] = with_requires_grad(k, tensor.Tensor[k])
end

for _, k in ipairs({"tensor", "empty", "zeros", "ones", "full", "arange", "rand", "randn", "bernoulli",
                    "manual_seed", "get_rng_state", "set_rng_state", "matmul", "cat", "stack", "where", "empty_like", "zeros_like",
                    "ones_like", "full_like", "rand_like", "randn_like", "is_tensor", "result_type",
                    "set_default_dtype", "get_default_dtype"}) do
    M[k] = tensor[k]
end
-- Torch's other names for cat: cat's errors renamed to them.
local function cat_as(fname)
    local function result(ok, ...)
        if not ok then error((tostring((...)):gsub("cat: ", fname .. ": ", 1)), 0) end
        return ...
    end
    return function(tensors, dim, extra) return result(pcall(tensor.cat, tensors, dim, extra)) end
end
M.concat, M.concatenate = cat_as("concat"), cat_as("concatenate")

for _, k in ipairs({"eye", "linspace", "logspace", "meshgrid", "einsum", "tensordot", "allclose", "isclose", "kron", "cross", "cdist", "broadcast_tensors", "atan2", "hypot", "logaddexp", "xlogy", "tril_indices", "triu_indices", "isin", "searchsorted", "bucketize", "equal", "randint", "randperm",
                    "atleast_1d", "atleast_2d", "hstack", "vstack", "randint_like", "normal"}) do
    M[k] = derived[k]
end
for _, k in ipairs({"tensor", "empty", "zeros", "ones", "full", "arange", "rand", "randn", "empty_like", "zeros_like",
                    "ones_like", "full_like", "rand_like", "randn_like", "eye", "linspace", "logspace", "randint",
                    "randperm", "randint_like", "normal"}) do
    M[k] = with_requires_grad(k, M[k])
end
-- how tensors print: ordo.set_printoptions{precision =, threshold =, edgeitems =, linewidth =, sci_mode =, profile =}
M.set_printoptions = require("ordo.format").set_printoptions
local serialize = require "ordo.serialize"
M.save, M.load = serialize.save, serialize.load -- tensors, or tables of them, to and from a file

-- ordo.exp(t), ordo.sum(t, dim), ordo.add(a, b)...: the methods as functions.
for name, fn in pairs(tensor.Tensor) do
    if type(fn) == "function" and not name:match("^__") and M[name] == nil then
        M[name] = fn
    end
end

M.cpu, M.gpu, M.cpu_pinned = util.cpu, util.gpu, util.cpu_pinned
M.Device = util.Device
M.cuda = {
    is_available = function(extra)
        if extra ~= nil then extra_arg("cuda.is_available", "()", extra) end
        return C.ordo_gpu_count() > 0
    end,
    device_count = function(extra)
        if extra ~= nil then extra_arg("cuda.device_count", "()", extra) end
        return C.ordo_gpu_count()
    end,
    -- the caching device allocator: counters ({allocated_bytes =, reserved_bytes =, ...})
    -- and giving cached blocks back; dev = ordo.gpu(n) or n, default gpu(0)
    memory_stats = tensor.cuda_memory_stats,
    empty_cache = tensor.cuda_empty_cache,
    -- pinned host memory (cpu_pinned tensors): bytes in live tensors, bytes
    -- cached for reuse, and giving the cache back to the system
    pinned_memory = function(extra)
        if extra ~= nil then extra_arg("cuda.pinned_memory", "()", extra) end
        return {live_bytes = tonumber(C.ordo_pinned_live_bytes()),
                cached_bytes = tonumber(C.ordo_pinned_cached_bytes())}
    end,
    empty_pinned_cache = function(extra)
        if extra ~= nil then extra_arg("cuda.empty_pinned_cache", "()", extra) end
        C.ordo_pinned_empty_cache()
    end,
    -- synchronize([dev]): waits until the default engine's pushed work is
    -- done (that on every device: engine.wait_for_all), raising its errors
    synchronize = function(dev, extra)
        if extra ~= nil then extra_arg("cuda.synchronize", "(dev)", extra) end
        tensor.gpu_id("synchronize", dev)
        M.engine.wait_for_all()
    end,
}

M.float32, M.float64, M.int32, M.int64, M.uint8 = "float32", "float64", "int32", "int64", "uint8"
M.float, M.double, M.int, M.long, M.byte = "float32", "float64", "int32", "int64", "uint8"

-- Storage memory outside the Lua heap (all engines).
M.memory = {
    live_bytes = function(extra)
        if extra ~= nil then extra_arg("memory.live_bytes", "()", extra) end
        return tonumber(C.ordo_storage_live_bytes())
    end,
    live_count = function(extra)
        if extra ~= nil then extra_arg("memory.live_count", "()", extra) end
        return tonumber(C.ordo_storage_live_count())
    end,
    total_bytes = function(extra)
        if extra ~= nil then extra_arg("memory.total_bytes", "()", extra) end
        return tonumber(C.ordo_storage_total_bytes())
    end,
    -- freed host blocks kept for reuse (ORDO_HOST_CACHE_MB), and giving them back
    cached_bytes = function(extra)
        if extra ~= nil then extra_arg("memory.cached_bytes", "()", extra) end
        return tonumber(C.ordo_host_cached_bytes())
    end,
    empty_cache = function(extra)
        if extra ~= nil then extra_arg("memory.empty_cache", "()", extra) end
        C.ordo_host_empty_cache()
    end,
    -- bytes allocated between two forced collections (at least); default 64 MiB
    -- (ORDO_GC_THRESHOLD_MB).  0 or a fraction used to be taken as 1 byte or
    -- cut: a collection at every allocation, without a word.
    set_gc_threshold = function(bytes, extra)
        if extra ~= nil then extra_arg("memory.set_gc_threshold", "(bytes)", extra) end
        if type(bytes) ~= "number" or bytes ~= bytes or bytes < 1 or bytes > 2^53 or bytes % 1 ~= 0 then
            util.fail(("memory.set_gc_threshold: expected a number of bytes, an integer from 1 to 2^53, got %s")
                      :format(type(bytes) == "number" and tostring(bytes) or util.typename(bytes)))
        end
        C.ordo_storage_set_gc_threshold(bytes)
    end,
}

-- ordo.file_kind(path): what is at path, without opening it (a FIFO's open
-- waits for its other end, and a read check would take its first bytes):
-- "file", "directory", "other" (a FIFO, device or socket) or "none"
-- (nothing there); nil and the reason when it cannot be looked at.  A
-- symbolic link is followed.  For command lines that check a path before
-- a long run (examples/cli.lua).
local FILE_KINDS = {[0] = "none", "file", "directory", "other"}
function M.file_kind(path, extra)
    if extra ~= nil then extra_arg("file_kind", "(path)", extra) end
    if type(path) ~= "string" then
        util.fail("file_kind: expected a path (a string), got " .. util.typename(path))
    end
    if path == "" then return "none" end
    local k = C.ordo_file_kind(path, nil)
    if k < 0 then return nil, ffi.string(C.ordo_last_error()) end
    return FILE_KINDS[k]
end

M.lib_path = cdef.lib_path

return M
