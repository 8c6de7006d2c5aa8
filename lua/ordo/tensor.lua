-- ordo.tensor: the Tensor class and the functions that make tensors.
--
-- A Tensor is a Lua table {_c = ordo_tensor*} whose descriptor lives in C
-- (src/ordo_tensor.h) and whose bytes live outside the Lua heap.  Every op
-- is one push of a native kernel onto the engine, inputs as reads and
-- outputs as writes, and returns at once; item/totable/tostring wait for
-- the tensor's storage var.  Shapes are Lua tables and dims count from 1
-- (negative dims count from the end: -1 is the last).  Indices (argmax,
-- gather, index_select, narrow, select) count from 1 too.
--
-- Type promotion (NumPy/Torch rules): the dtypes order uint8 < int32 <
-- int64 < float32 < float64 and an op on two tensors computes in the higher
-- one.  A Lua number, or a tensor with no dims, does not raise a tensor's
-- dtype within its kind (int32 tensor + 2 stays int32; float32 + 0-dim
-- float64 stays float32) but a float number makes an integer tensor
-- float32.  `/`, pow, exp, log, sqrt, tanh, sigmoid, sin, cos, log1p,
-- expm1, rsqrt, reciprocal, the inverse, hyperbolic and error functions
-- (tan, asin ... atanh, erf, erfc, erfinv), softmax and mean make integer inputs float32
-- (floor, ceil, round and trunc leave integers as they are).  sum of
-- integers gives int64.  In-place ops keep their tensor's dtype and refuse
-- a float result on an integer tensor.
local cdef = require "ordo.cdef"
local util = require "ordo.util"
local extra_arg = util.extra_arg -- a further positional argument: an error naming it
local engine = require "ordo.engine"
local format = require "ordo.format"

local ffi, C = cdef.ffi, cdef.C
local fail, fail_c, typename = util.fail, util.fail_c, util.typename
local show = util.show -- values in error messages (a tensor by its shape, not its values)
local floor, huge, max, min = math.floor, math.huge, math.max, math.min
local fmt, concat = string.format, table.concat
local setmetatable, getmetatable, type, tonumber, tostring, select, ipairs, pairs, unpack =
    setmetatable, getmetatable, type, tonumber, tostring, select, ipairs, pairs, unpack

local F32, F64, I32, I64, U8 = cdef.F32, cdef.F64, cdef.I32, cdef.I64, cdef.U8
local BCAST, CROSS, NAMED = cdef.TP_BROADCAST, cdef.TP_CROSS_DEVICE, cdef.TP_NAMED
local GPU, CPU_PINNED, ERR_NOMEM = cdef.GPU, cdef.CPU_PINNED, cdef.ERR_NOMEM
local host_ptr = util.host_ptr -- every host access of tensor bytes goes through it
local CPU0 = util.cpu(0)

local M = {}

local Tensor = {__name = "ordo.Tensor"}
Tensor.__index = Tensor -- until t[i] below makes it a function
M.Tensor = Tensor

-- ---------------------------------------------------------------- dtypes

local DT = {float32 = F32, float64 = F64, int32 = I32, int64 = I64, uint8 = U8,
            float = F32, double = F64, int = I32, long = I64, byte = U8,
            f32 = F32, f64 = F64, i32 = I32, i64 = I64, u8 = U8}
local DT_NAME = {[0] = "float32", "float64", "int32", "int64", "uint8"}
local TYPE_NAME = {[0] = "FloatTensor", "DoubleTensor", "IntTensor", "LongTensor", "ByteTensor"}
local RANK = {[0] = 3, 4, 1, 2, 0} -- uint8 < int32 < int64 < float32 < float64
local ISFLOAT = {[0] = true, true, false, false, false}
local PTR = {[0] = ffi.typeof("float *"), ffi.typeof("double *"), ffi.typeof("int32_t *"),
             ffi.typeof("int64_t *"), ffi.typeof("uint8_t *")}
M.dtypes = {"float32", "float64", "int32", "int64", "uint8"}

local ALL = {[F32] = true, [F64] = true, [I32] = true, [I64] = true, [U8] = true}
local FLOAT = {[F32] = true, [F64] = true}
local SIGNED = {[F32] = true, [F64] = true, [I32] = true, [I64] = true}

local function allowed_str(set)
    local names = {}
    for d = 0, 4 do if set[d] then names[#names + 1] = DT_NAME[d] end end
    if #names == 1 then return names[1] end
    return concat(names, ", ", 1, #names - 1) .. " or " .. names[#names]
end

local function parse_dtype(fname, x)
    if type(x) == "string" and DT[x] then return DT[x] end
    if type(x) == "number" and DT_NAME[x] then return x end
    fail(fmt("%s: unknown dtype %s (expected float32, float64, int32, int64 or uint8)", fname,
             type(x) == "string" and ("'" .. x .. "'") or typename(x)))
end

local function promote(a, b) return RANK[a] >= RANK[b] and a or b end

-- ---------------------------------------------------------------- kernels

local K = {}
for _, name in ipairs({
    "fill", "copy", "arange", "add", "sub", "mul", "div", "pow", "maximum", "minimum",
    "add_scalar", "sub_scalar", "mul_scalar", "div_scalar", "pow_scalar",
    "rsub_scalar", "rdiv_scalar", "rpow_scalar", "fmod", "fmod_scalar",
    "eq", "ne", "lt", "le", "gt", "ge",
    "eq_scalar", "ne_scalar", "lt_scalar", "le_scalar", "gt_scalar", "ge_scalar",
    "neg", "abs", "relu", "exp", "log", "sqrt", "tanh", "sigmoid",
    "sign", "square", "sin", "cos", "log1p", "expm1", "rsqrt", "reciprocal",
    "floor", "ceil", "round", "trunc",
    "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv",
    "where", "masked_fill", "sum", "mean", "max", "min", "argmax", "argmin",
    "softmax", "log_softmax", "cumsum", "cumprod", "cumprod_backward", "sort", "topk", "kthvalue", "matmul", "linalg_lu", "seed", "uniform", "normal", "bernoulli",
    "gather", "index_select", "scatter_add", "scatter", "index_add", "check_range"}) do
    local id = C.ordo_tensor_kernel_id(name)
    assert(id >= 0, name)
    K[name] = id
end
M.kernel_ids = K

-- scratch arrays for pushes (filled right before each call)
local SHAPE = ffi.new("int64_t[8]")
local IN = ffi.new("ordo_tensor *[4]")
local OUT = ffi.new("ordo_tensor *[2]")
local SC = ffi.new("double[8]")
local IP = ffi.new("int64_t[12]")

-- ---------------------------------------------------------------- wrapping

local function is_tensor(x) return getmetatable(x) == Tensor end
-- ordo.is_tensor(x): its own function, the internal one taking no further argument to check
function M.is_tensor(x, extra)
    if extra ~= nil then extra_arg("is_tensor", "(x)", extra) end
    return getmetatable(x) == Tensor
end

local tensor_free = C.ordo_tensor_free

-- A view or alias: shares a storage that is already accounted for.
local function wrap(c)
    if c == nil then fail_c() end
    return setmetatable({_c = ffi.gc(c, tensor_free)}, Tensor)
end

-- LuaJIT does not see the storage bytes: collect once enough of them were
-- allocated since the last collection (ordo_storage_gc_due, src/storage.c),
-- a number that grows with the Lua heap, which each collection walks.
local function gc_check()
    if C.ordo_storage_gc_due() ~= 0 then
        collectgarbage("collect")
        C.ordo_storage_gc_done()
        C.ordo_storage_gc_pace(collectgarbage("count") * 1024)
    end
end
M.gc_check = gc_check

-- ---------------------------------------------------------------- out of GPU memory

local sleep_ts = ffi.new("ordo_timespec", 0, 0)

-- Returns once engine e has nothing pending (polling: a wait in C would
-- report, and so use up, a failure that belongs to the wait of some tensor),
-- or after about a minute.
local function drain(e)
    if util.wait_ready then return util.wait_ready(e, nil) end
    local dt, waited = 1e-5, 0
    while C.ordo_engine_pending(e) > 0 and waited < 60 do
        sleep_ts.tv_sec, sleep_ts.tv_nsec = 0, dt * 1e9
        ffi.C.nanosleep(sleep_ts, nil)
        waited = waited + dt
        dt = min(dt * 2, 0.01)
    end
end

-- A GPU allocation failed: free what Lua no longer references - two full
-- collections (the first runs the finalizers, which release storages; the
-- second frees what only those finalized objects held), then let the engine
-- run the delete ops (they follow the work still pending on the storages),
-- then give the allocator's cached blocks back to the device, so that one
-- retry can use every byte that is not held by a live tensor.
local function gpu_relief(dev_id, e)
    collectgarbage("collect")
    collectgarbage("collect")
    C.ordo_storage_gc_done()
    drain(e ~= nil and e or C.ordo_engine_default())
    C.ordo_gpu_empty_cache(dev_id)
end
M.gpu_relief = gpu_relief

-- A host allocation failed (a memory limit: ulimit -v, a container's,
-- strict overcommit): the same relief for host memory - the collections
-- release what Lua no longer references, the engine runs the frees, and
-- the host caches (pageable and pinned) go back to the system.
local function host_relief(e)
    collectgarbage("collect")
    collectgarbage("collect")
    C.ordo_storage_gc_done()
    drain(e ~= nil and e or C.ordo_engine_default())
    C.ordo_host_empty_cache()
    C.ordo_pinned_empty_cache()
end
M.host_relief = host_relief

-- After a failed C call: whether it failed for lack of memory, so that
-- gpu_relief and a retry may help.  (A shape whose byte size overflows is
-- ERR_INVALID: it fails at once, with no retry.)
local function relief_may_help() return C.ordo_tensor_error_code() == ERR_NOMEM end

-- After a failed C call on tensors (ordo_tensor * cdata, nil allowed): true
-- when it failed for lack of memory, once gpu_relief has run for the GPU of
-- one of them (host_relief when none is on a GPU) - the caller then
-- retries, once.
local function nomem_relieved(...)
    if not relief_may_help() then return false end
    local host
    for i = 1, select("#", ...) do
        local c = select(i, ...)
        if c ~= nil and c.ctx.dev_type == GPU then
            gpu_relief(c.ctx.dev_id, c.storage.engine)
            return true
        end
        if c ~= nil and host == nil then host = c end
    end
    if host == nil then return false end
    host_relief(host.storage.engine)
    return true
end

local OOM_NOTE = " (after freeing unreferenced tensors and emptying the allocator's cache)"

-- Raises the last C error of op fname, noting a GPU out-of-memory that
-- survived the retry.  The message names the op once: the C side names it
-- in most of its messages ("add: expected all tensors on one device..."),
-- but not in an allocation's ("gpu(0): out of memory allocating ...").
local function fail_alloc(fname, retried)
    local msg = ffi.string(C.ordo_tensor_error())
    if retried and C.ordo_tensor_error_code() == ERR_NOMEM then msg = msg .. OOM_NOTE end
    if fname and msg:sub(1, #fname + 2) ~= fname .. ": " then msg = fname .. ": " .. msg end
    fail(msg)
end

local function fill_shape(fname, shape)
    local n = #shape
    if n > 8 then fail(fmt("%s: %d dims (at most 8 supported)", fname, n)) end
    for i = 1, n do
        local v = shape[i]
        -- past int64 the FFI conversion is undefined (2^63 arrived as a
        -- negative size): named here, as the user wrote it
        if v >= 2 ^ 63 or v < -2 ^ 63 then
            fail(fmt("%s: size %s at position %d is too large", fname, show(v), i))
        end
        SHAPE[i - 1] = v
    end
    return n
end

-- An index or start that int64 cannot hold is out of range of any dim
-- (the FFI conversion of such a double is undefined).
local function check_index_range(fname, what, v, d, size)
    if v >= 2 ^ 62 or v <= -2 ^ 62 then
        fail(fmt("%s: %s %s out of range for dim %d of size %d", fname, what, show(v), d, size))
    end
end

-- A new contiguous tensor on engine pointer e (nil = default) and device dev.
local function new_raw(fname, shape, dt, ctx, e)
    gc_check()
    local n = fill_shape(fname, shape)
    local c = C.ordo_tensor_empty_on(e, dt, n, SHAPE, ctx.dev_type, ctx.dev_id)
    if c == nil then
        local retried = false
        if relief_may_help() then
            if ctx.dev_type == GPU then gpu_relief(ctx.dev_id, e) else host_relief(e) end
            n = fill_shape(fname, shape)
            c = C.ordo_tensor_empty_on(e, dt, n, SHAPE, ctx.dev_type, ctx.dev_id)
            retried = true
        end
        if c == nil then fail_alloc(fname, retried) end
    end
    return setmetatable({_c = ffi.gc(c, tensor_free)}, Tensor)
end

-- Where results of ops on a tensor of ctx go: its device, except that the
-- results of ops on pinned tensors are ordinary CPU tensors (pinned memory
-- is for staging copies, and the system has little of it), as in PyTorch.
local function result_ctx(ctx)
    if ctx.dev_type == CPU_PINNED then return util.cpu(ctx.dev_id)._ctx end
    return ctx
end

-- A new tensor on t's engine and device (cpu(n) for a cpu_pinned t).
local function new_on(fname, t, shape, dt)
    local c = t._c
    return new_raw(fname, shape, dt, result_ctx(c.ctx), c.storage.engine)
end

local function empty_like(t, dt, fname)
    gc_check()
    local c = C.ordo_tensor_empty_like(t._c, dt or t._c.dtype)
    if c == nil then
        local retried = nomem_relieved(t._c)
        if retried then c = C.ordo_tensor_empty_like(t._c, dt or t._c.dtype) end
        if c == nil then fail_alloc(fname, retried) end
    end
    return setmetatable({_c = ffi.gc(c, tensor_free)}, Tensor)
end

-- ordo_tensor_binary (a new output of the broadcast shape), retried once
-- when the GPU is out of memory.
local function binary_c(kid, name, a, b, dt)
    gc_check()
    local c = C.ordo_tensor_binary(kid, name, a._c, b._c, dt)
    if c == nil then
        local retried = nomem_relieved(a._c, b._c)
        if retried then c = C.ordo_tensor_binary(kid, name, a._c, b._c, dt) end
        if c == nil then fail_alloc(name, retried) end
    end
    return setmetatable({_c = ffi.gc(c, tensor_free)}, Tensor)
end

-- ---------------------------------------------------------------- shapes and dims

local function shape_of(t)
    local c = t._c
    local s = {}
    for i = 1, c.ndim do s[i] = tonumber(c.shape[i - 1]) end
    return s
end

local function shape_str_tbl(s)
    if #s == 0 then return "scalar" end
    local p = {}
    for i = 1, #s do
        local v = s[i] -- sizes as integers, past 1e14 too (tostring would give 4.6116860184274e+18)
        p[i] = (type(v) == "number" and v == floor(v) and v > -huge and v < huge) and fmt("%.0f", v) or tostring(v)
    end
    return concat(p, "x")
end
M.shape_str = shape_str_tbl

local function shape_str(t) return shape_str_tbl(shape_of(t)) end

local function is_int(x) return type(x) == "number" and x == floor(x) and x > -huge and x < huge end

-- dim counted from 1 (negative from the end) -> 0-based; extra = 1 allows ndim+1 (unsqueeze)
local function norm_dim(fname, t, dim, extra)
    local n = t._c.ndim + (extra or 0)
    if not is_int(dim) then fail(fmt("%s: dim must be an integer, got %s", fname, show(dim))) end
    local d = dim < 0 and dim + n + 1 or dim
    if d < 1 or d > n then
        if n == 0 then
            fail(fmt("%s: dim %s out of range: the tensor has no dims (shape %s)", fname, show(dim), shape_str(t)))
        end
        fail(fmt("%s: dim %s out of range for a %d-d tensor of shape %s (expected 1..%d or -%d..-1)",
                 fname, show(dim), t._c.ndim, shape_str(t), n, n)) -- (%d of 2^63 printed -2^63)
    end
    return d - 1
end

-- Sizes given as a table {2, 3} or as arguments 2, 3; returns shape, next arg.
local function shape_args(fname, a, ...)
    local shape, rest
    if type(a) == "table" and getmetatable(a) == nil then
        util.check_list(fname, "the shape", a)
        shape, rest = a, (...)
        -- after the options: a further argument (zeros({2}, "float32", 9)) was dropped unseen
        for j = 2, select("#", ...) do
            local v = (select(j, ...))
            if v ~= nil then extra_arg(fname, "(shape [, opts])", v) end
        end
    elseif type(a) == "number" then
        shape = {a}
        local n = select("#", ...)
        local i = 1
        while i <= n and type((select(i, ...))) == "number" do
            shape[#shape + 1] = (select(i, ...))
            i = i + 1
        end
        rest = i <= n and (select(i, ...)) or nil
        for j = i + 1, rest ~= nil and n or 0 do
            local v = (select(j, ...))
            if v ~= nil then extra_arg(fname, "(size, ... [, opts])", v) end
        end
        if rest == nil then -- a nil size (zeros(2, nil, 3)) ended the sizes: the ones after it were dropped
            for j = i + 1, n do
                if (select(j, ...)) ~= nil then
                    fail(fmt("%s: size %d is nil (the sizes given as arguments must all be numbers)", fname, i + 1))
                end
            end
        end
    else
        fail(fmt("%s: expected a shape (a table of sizes like {2, 3}, or sizes as arguments), got %s",
                 fname, typename(a)))
    end
    if #shape > 8 then fail(fmt("%s: %d dims (at most 8 supported)", fname, #shape)) end
    for i = 1, #shape do
        local s = shape[i]
        if not is_int(s) or s < 0 then
            fail(fmt("%s: size %s at position %d is invalid (sizes must be integers >= 0)", fname, show(s), i))
        end
    end
    return shape, rest
end

-- ---------------------------------------------------------------- options

local OPT_KEYS = {dtype = true, device = true, engine = true}

-- {dtype=, device=, engine=} -> dtype code, device, engine pointer (nil = default)
-- Options given as just a dtype or a device, as a table; anything else
-- that is not a plain table raises.
local function options_table(fname, opts)
    if type(opts) == "string" then
        if not DT[opts] and not util.parse_device(fname, opts) then
            fail(fmt("%s: unknown dtype or device '%s' (dtypes: float32, float64, int32, int64, uint8; devices: \"cpu\", \"cpu:1\", \"gpu:0\")",
                     fname, opts))
        end
        return DT[opts] and {dtype = opts} or {device = opts}
    end
    if util.is_device(opts) then return {device = opts} end
    if type(opts) ~= "table" or getmetatable(opts) ~= nil then
        fail(fmt("%s: expected options {dtype=, device=, engine=}, a dtype or a device, got %s", fname,
                 typename(opts)))
    end
    return opts
end

-- The float dtype of new tensors when none is given (ordo.tensor of Lua
-- numbers, zeros, ones, rand, arange, linspace..., nn layers' parameters)
-- and of the float results of integer inputs (mean, exp, int + 0.5): Torch's
-- torch.set_default_dtype, per process, for tensors made after the call.
local DEFAULT_FLOAT = F32
function M.set_default_dtype(d, extra)
    if extra ~= nil then extra_arg("set_default_dtype", "(dtype)", extra) end
    local code = type(d) == "string" and DT[d] or nil
    if code ~= F32 and code ~= F64 then
        fail(fmt("set_default_dtype: only float32 or float64 can be the default dtype, got %s",
                 type(d) == "string" and fmt("%q", d) or typename(d)))
    end
    DEFAULT_FLOAT = code
end
function M.get_default_dtype(extra)
    if extra ~= nil then extra_arg("get_default_dtype", "()", extra) end
    return DT_NAME[DEFAULT_FLOAT]
end

local function options(fname, opts, default_dt)
    local dt, dev, e = default_dt or DEFAULT_FLOAT, nil, nil
    if opts ~= nil then
        opts = options_table(fname, opts)
        for k in pairs(opts) do
            if not OPT_KEYS[k] then
                fail(fmt("%s: unknown option '%s' (expected dtype, device or engine)", fname, tostring(k)))
            end
        end
        if opts.dtype ~= nil then dt = parse_dtype(fname, opts.dtype) end
        if opts.device ~= nil then
            dev = util.parse_device(fname, opts.device)
            if not dev then
                fail(fmt("%s: unknown device %s (expected ordo.cpu(n), ordo.gpu(n) or \"cpu\", \"gpu:0\")",
                         fname, show(opts.device)))
            end
        end
        if opts.engine ~= nil then
            if not engine.is_engine(opts.engine) then
                fail(fmt("%s: engine must be an ordo.engine object, got %s", fname, typename(opts.engine)))
            end
            if opts.engine._closed then fail(fname .. ": the engine was closed") end
            e = opts.engine._e
        end
    end
    return dt, dev or util.cpu(0), e
end

-- ---------------------------------------------------------------- pushes

local function check_self(fname, t)
    if not is_tensor(t) then
        fail(fmt("%s: expected a tensor as self, got %s (call it as t:%s(...))", fname, typename(t), fname))
    end
end

-- Raises "fname: expected all tensors on one device, got X and Y" (the
-- push's message) unless the tensors among b, c, d (numbers and nil are
-- skipped) are on ref's device: an op made of other ops checks first, so
-- that a mix names it rather than one of its parts (clamp, not maximum).
local same_device_ctx = util.same_device_ctx
local function device_mix(fname, ref, t)
    if is_tensor(t) and not same_device_ctx(ref._c.ctx, t._c.ctx) then
        fail(fmt("%s: expected all tensors on one device, got %s and %s", fname, tostring(ref:device()),
                 tostring(t:device())))
    end
end
local function check_devices(fname, ref, b, c, d)
    if not is_tensor(ref) then return end
    device_mix(fname, ref, b)
    if c ~= nil then device_mix(fname, ref, c) end
    if d ~= nil then device_mix(fname, ref, d) end
end
-- the same for a list of tensors (other elements skipped)
local function check_devices_list(fname, list)
    local ref
    for i = 1, #list do
        local t = list[i]
        if is_tensor(t) then
            if ref == nil then ref = t else device_mix(fname, ref, t) end
        end
    end
end

-- A push that needs a temporary (an aliasing input, a copy across devices)
-- can run out of GPU memory too: it is retried once after gpu_relief.
local function push1(kid, fname, out, a, s0)
    local ac = a and a._c or nil
    if C.ordo_tensor_op1(kid, fname, out._c, ac, s0 or 0) ~= 0 then
        local retried = nomem_relieved(out._c, ac)
        if not retried or C.ordo_tensor_op1(kid, fname, out._c, ac, s0 or 0) ~= 0 then fail_alloc(fname, retried) end
    end
    return out
end

local function push2(kid, fname, out, a, b)
    if C.ordo_tensor_op2(kid, fname, out._c, a._c, b._c) ~= 0 then
        local retried = nomem_relieved(out._c, a._c, b._c)
        if not retried or C.ordo_tensor_op2(kid, fname, out._c, a._c, b._c) ~= 0 then fail_alloc(fname, retried) end
    end
    return out
end

local function push_once(kid, fname, flags, ins, outs, scalars, iparams)
    local nin, nout, ns, ni = #ins, #outs, scalars and #scalars or 0, iparams and #iparams or 0
    for i = 1, nin do IN[i - 1] = ins[i]._c end
    for i = 1, nout do OUT[i - 1] = outs[i]._c end
    for i = 1, ns do SC[i - 1] = scalars[i] end
    for i = 1, ni do IP[i - 1] = iparams[i] end
    return C.ordo_tensor_push(kid, fname, flags, IN, nin, OUT, nout, SC, ns, IP, ni) == 0
end

-- general push: ins/outs lists of tensors, scalars/iparams lists of numbers
local function push(kid, fname, flags, ins, outs, scalars, iparams)
    if push_once(kid, fname, flags, ins, outs, scalars, iparams) then return end
    local retried = false
    if relief_may_help() then
        for _, list in ipairs({outs, ins}) do
            for _, t in ipairs(list) do
                if not retried and t._c.ctx.dev_type == GPU then
                    gpu_relief(t._c.ctx.dev_id, t._c.storage.engine)
                    retried = true
                end
            end
        end
    end
    if not retried or not push_once(kid, fname, flags, ins, outs, scalars, iparams) then fail_alloc(fname, retried) end
end

-- t converted to dtype dt (t itself when it already is).
local function cast(fname, t, dt)
    if t._c.dtype == dt then return t end
    local out = empty_like(t, dt, fname)
    return push1(K.copy, fname, out, t)
end

local wait_ready = util.wait_ready -- set under the ordo launcher: Ctrl-C can stop the wait

-- Waits for t's storage; raises the op's failure ("div: div: ...", the
-- engine and kernel both naming the op, said once).
local function wait(t)
    if wait_ready then
        local s = t._c.storage
        wait_ready(s.engine, s.var)
    end
    if C.ordo_tensor_wait(t._c) ~= 0 then
        fail(util.op_message(ffi.string(C.ordo_tensor_error())))
    end
end

-- ---------------------------------------------------------------- type promotion

local function category(dt) return ISFLOAT[dt] and 2 or 1 end

local function number_is_float(x) return x ~= floor(x) or x ~= x or x == huge or x == -huge end
local function is_finite(x) return x == x and x ~= huge and x ~= -huge end

-- Integer dtypes' value ranges, [lo, hi): a scalar written into a tensor of
-- that dtype is checked at the call, so the error points at the user's line
-- instead of surfacing at a later wait (the kernels check too).
local INT_RANGE = {[I32] = {-2 ^ 31, 2 ^ 31}, [I64] = {-2 ^ 63, 2 ^ 63}, [U8] = {0, 256}}
local function check_fits(fname, dt, v, why)
    local r = INT_RANGE[dt]
    if r == nil then return end
    local t = v >= 0 and floor(v) or -floor(-v) -- what the kernel stores: v truncated
    if not (t >= r[1] and t < r[2]) then
        -- 2^63 - 1 (int64's largest) is 2^63 as a Lua number: say so
        local hint = (dt == I64 and t == 2 ^ 63) and
            " (2^63; a Lua number near it is a double: 2^63 - 1 rounds to 2^63, the largest below is 2^63 - 1024)" or ""
        fail(fmt("%s: value %s does not fit in %s%s%s", fname, show(v), DT_NAME[dt], why or "", hint))
    end
end

-- The dtype an op on a and b (tensors or numbers) computes in.
local function result_type(a, b)
    local ta, tb = is_tensor(a), is_tensor(b)
    if ta and tb then
        local da, db = a._c.dtype, b._c.dtype
        if da == db then return da end
        local za, zb = a._c.ndim == 0, b._c.ndim == 0
        if za == zb then return promote(da, db) end
        local dim_dt, zero_dt = za and db or da, za and da or db
        if category(zero_dt) > category(dim_dt) then return zero_dt end
        return dim_dt
    end
    local t, n = b, a -- (not `ta and b or a`: a nil b would pick a)
    if ta then t, n = a, b end
    local dt = t._c.dtype
    if not ISFLOAT[dt] and number_is_float(n) then return DEFAULT_FLOAT end
    return dt
end
M.result_type = function(a, b, extra)
    if extra ~= nil then extra_arg("result_type", "(a, b)", extra) end
    if not is_tensor(a) and not is_tensor(b) then fail("result_type: expected at least one tensor") end
    local x = a -- the operand that is not (or need not be) a tensor; b may be nil
    if is_tensor(a) then x = b end
    if not is_tensor(x) and type(x) ~= "number" then
        fail("result_type: expected tensors or numbers, got " .. typename(x))
    end
    return DT_NAME[result_type(a, b)]
end

local function can_cast(from, to) return not (ISFLOAT[from] and not ISFLOAT[to]) end

-- ---------------------------------------------------------------- creation

-- A one-element int64 tensor's value as an exact int64_t cdata where a
-- double cannot hold it (past 2^53): item would drop its low bits, so
-- ordo.tensor({a, b}, "int64") of two such tensors changed their values.
local function exact_value(v)
    local x = v:item()
    if v._c.dtype ~= I64 or (x < 2 ^ 53 and x > -2 ^ 53) then return x end
    local c = v:contiguous()
    if c._c.ctx.dev_type == GPU then c = c:cpu() end
    c:wait()
    return ffi.cast("int64_t *", host_ptr(c))[0]
end

-- A 64-bit integer written as a cdata literal (12LL, 12ULL; Lua numbers are
-- doubles, exact only to 2^53) as an int64_t cdata, or as a number when a
-- uint64_t is past int64's range (which check_fits then names); nil for any
-- other value.
local I64_CT, U64_CT = ffi.typeof("int64_t"), ffi.typeof("uint64_t")
local function int64_literal(v)
    if type(v) ~= "cdata" then return nil end
    if ffi.istype(I64_CT, v) then return v end
    if ffi.istype(U64_CT, v) then
        if v <= 0x7fffffffffffffffULL then return ffi.cast(I64_CT, v) end
        return tonumber(v)
    end
    return nil
end

-- Flattens a nested table of numbers into flat, checking it is rectangular.
-- (An element may be an int64_t cdata: exact_value, int64_literal.)
local function infer(fname, data)
    local shape = {}
    local x = data
    while type(x) == "table" and not is_tensor(x) do
        shape[#shape + 1] = #x
        if #x == 0 then break end
        x = x[1]
    end
    if #shape > 8 then fail(fmt("%s: nested %d deep (at most 8 dims)", fname, #shape)) end
    local flat, n = {}, 0
    local path = {}
    local function walk(v, d)
        if d > #shape then
            local tv = type(v)
            -- a one-element tensor counts as its value (a list of losses, as Torch takes it; it waits)
            if is_tensor(v) and C.ordo_tensor_numel(v._c) == 1 then v, tv = exact_value(v), "number" end
            local lit = int64_literal(v)
            if lit ~= nil then v, tv = lit, "number" end
            if tv == "boolean" then v = v and 1 or 0
            elseif tv ~= "number" then
                if is_tensor(v) then
                    fail(fmt("%s: element [%s] is a tensor of shape %s, expected a number (a one-element tensor " ..
                             "counts as one; ordo.stack joins tensors)", fname, concat(path, "]["), shape_str(v)))
                end
                fail(fmt("%s: element [%s] is %s, expected a number", fname, concat(path, "]["), typename(v)))
            end
            n = n + 1
            flat[n] = v
            return
        end
        if type(v) ~= "table" or is_tensor(v) then
            fail(fmt("%s: ragged nested table: element [%s] is %s, expected a table of %d", fname,
                     concat(path, "]["), typename(v), shape[d]))
        end
        if #v ~= shape[d] then
            fail(fmt("%s: ragged nested table: element [%s] has %d entries, expected %d", fname,
                     concat(path, "]["), #v, shape[d]))
        end
        -- a key past the list's length: a hole ({1, nil, 3}) or a name
        -- ({a = 1}), whose values would otherwise be dropped unseen
        local extra
        if #v == 0 then extra = next(v) else extra = next(v, #v) end
        if extra ~= nil then
            fail(fmt("%s: %s is not a list: it has the key %s beside its entries 1..%d (a nil in the list, or a name)",
                     fname, d == 1 and "the table" or "element [" .. concat(path, "][") .. "]", show(extra), #v))
        end
        for i = 1, #v do
            path[d] = i
            walk(v[i], d + 1)
        end
        path[d] = nil
    end
    walk(data, 1)
    return shape, flat
end

-- A new tensor holding data (a number or a nested table of numbers).
local function from_data(fname, data, dt, ctx, e)
    local shape, flat
    if type(data) == "number" or type(data) == "boolean" then
        shape, flat = {}, {type(data) == "boolean" and (data and 1 or 0) or data}
    elseif int64_literal(data) ~= nil then
        shape, flat = {}, {int64_literal(data)}
    elseif type(data) == "table" and getmetatable(data) == nil then
        shape, flat = infer(fname, data)
    else
        fail(fname .. ": expected a number, a nested table of numbers or a tensor, got " .. typename(data) ..
             (type(data) == "cdata" and " (of 64-bit integers, int64_t and uint64_t are taken: 12LL)" or ""))
    end
    -- the host cannot write GPU memory: fill a CPU tensor, then copy it over
    local on_gpu = ctx.dev_type == GPU
    local t = new_raw(fname, shape, dt, on_gpu and CPU0._ctx or ctx, e)
    -- a fresh storage has no ops: write it directly (the engine is told:
    -- its value exists, as if an op had made it)
    local p = ffi.cast(PTR[dt], host_ptr(t))
    C.ordo_tensor_host_written(t._c)
    for i = 1, #flat do -- an exact int64 (exact_value) goes as it is into int64, as a number elsewhere
        if type(flat[i]) == "cdata" and dt ~= I64 then flat[i] = tonumber(flat[i]) end
    end
    if INT_RANGE[dt] then -- integers: truncated toward zero, and refused when out of range (no silent wrap)
        for i = 1, #flat do
            if type(flat[i]) == "number" then check_fits(fname, dt, flat[i]) end
        end
    end
    for i = 1, #flat do p[i - 1] = flat[i] end
    C.ordo_tensor_numel(t._c)
    if not on_gpu then return t end
    local g = new_raw(fname, shape, dt, ctx, t._c.storage.engine)
    push(K.copy, fname, BCAST + CROSS, {t}, {g})
    return g
end

-- ordo.tensor(data [, opts]): data is a number (a 0-dim tensor), a nested
-- table of numbers, or a tensor (copied).  float32 unless opts.dtype.
function M.tensor(data, opts, extra)
    if extra ~= nil then extra_arg("tensor", "(data, opts)", extra) end
    if is_tensor(data) then
        local dt, dev, e = options("tensor", opts, data._c.dtype)
        local dev_given = util.is_device(opts) or (type(opts) == "string" and not DT[opts]) or
                          (type(opts) == "table" and opts.device ~= nil)
        if not dev_given then dev = util.device_of_ctx(data._c.ctx) end
        local out = new_raw("tensor", shape_of(data), dt, dev._ctx, e or data._c.storage.engine)
        push(K.copy, "tensor", BCAST + CROSS, {data}, {out})
        return out
    end
    local dt, dev, e = options("tensor", opts)
    return from_data("tensor", data, dt, dev._ctx, e)
end

function M.empty(...)
    local shape, opts = shape_args("empty", ...)
    local dt, dev, e = options("empty", opts)
    return new_raw("empty", shape, dt, dev._ctx, e)
end

function M.full(shape, value, opts, extra)
    if extra ~= nil then extra_arg("full", "(shape, value, opts)", extra) end
    if type(shape) ~= "table" or getmetatable(shape) ~= nil then
        fail("full: expected a shape table like {2, 3} first, got " .. typename(shape))
    end
    shape = shape_args("full", shape)
    if type(value) == "boolean" then value = value and 1 or 0 end
    if type(value) ~= "number" then fail("full: expected a number as the fill value, got " .. typename(value)) end
    local dt, dev, e = options("full", opts)
    check_fits("full", dt, value)
    local t = new_raw("full", shape, dt, dev._ctx, e)
    return push1(K.fill, "full", t, nil, value)
end

function M.zeros(...)
    local shape, opts = shape_args("zeros", ...)
    local dt, dev, e = options("zeros", opts)
    return push1(K.fill, "zeros", new_raw("zeros", shape, dt, dev._ctx, e), nil, 0)
end

function M.ones(...)
    local shape, opts = shape_args("ones", ...)
    local dt, dev, e = options("ones", opts)
    return push1(K.fill, "ones", new_raw("ones", shape, dt, dev._ctx, e), nil, 1)
end

-- t's dtype and device, overridden by opts: a table, or just a dtype or a
-- device (as the constructors take them).
local function like_opts(fname, t, opts)
    local o = {dtype = DT_NAME[t._c.dtype], device = util.device_of_ctx(t._c.ctx)}
    if opts ~= nil then
        for k, v in pairs(options_table(fname, opts)) do o[k] = v end
    end
    return o, t._c.storage.engine
end

local function make_like(fname, fn)
    local params = fname == "full_like" and "(t, fill_value, opts)" or "(t, opts)"
    return function(t, a, b, extra)
        if fname ~= "full_like" and b ~= nil then extra_arg(fname, params, b) end
        if extra ~= nil then extra_arg(fname, params, extra) end
        if not is_tensor(t) then fail(fmt("%s: expected a tensor, got %s", fname, typename(t))) end
        local opts_arg = a
        if fname == "full_like" then opts_arg = b end
        local o, e = like_opts(fname, t, opts_arg)
        local dt, dev, eng = options(fname, o)
        local out = new_raw(fname, shape_of(t), dt, dev._ctx, eng or e)
        return fn(out, a)
    end
end
M.empty_like = make_like("empty_like", function(out) return out end)
M.zeros_like = make_like("zeros_like", function(out) return push1(K.fill, "zeros_like", out, nil, 0) end)
M.ones_like = make_like("ones_like", function(out) return push1(K.fill, "ones_like", out, nil, 1) end)
M.full_like = make_like("full_like", function(out, v)
    if type(v) ~= "number" then fail("full_like: expected a number as the fill value, got " .. typename(v)) end
    check_fits("full_like", out._c.dtype, v)
    return push1(K.fill, "full_like", out, nil, v)
end)

-- ordo.arange([start,] stop [, step] [, opts]): start, start+step, ... < stop.
function M.arange(...)
    local n = select("#", ...)
    local args, opts = {}, nil
    for i = 1, n do
        local v = select(i, ...)
        if type(v) == "number" and i <= 3 and opts == nil then
            args[i] = v
        elseif i == n and i > 1 then
            opts = v
        else
            fail("arange: expected arange([start,] stop [, step] [, opts]) with numbers, got " .. typename(v) ..
                 " as argument " .. i)
        end
    end
    if #args == 0 then fail("arange: expected arange([start,] stop [, step] [, opts])") end
    local start, stop, step = 0, args[1], 1
    if #args >= 2 then start, stop = args[1], args[2] end
    if #args >= 3 then step = args[3] end
    if step == 0 then fail("arange: step must not be 0") end
    if start ~= start or stop ~= stop or step ~= step or math.abs(start) == huge or math.abs(stop) == huge then
        fail("arange: start, stop and step must be finite")
    end
    local n = math.ceil((stop - start) / step)
    if n < 0 then n = 0 end
    if n > 2 ^ 53 then -- (a tiny step: the count is no longer an exact integer, or even finite)
        fail(fmt("arange: %s elements from %s to %s by %s are too many", show(n), show(start), show(stop),
                 show(step)))
    end
    local dt, dev, e = options("arange", opts)
    if n > 0 and INT_RANGE[dt] then -- at the call, as ordo.tensor's values (the kernel's check raised at a wait)
        check_fits("arange", dt, start)
        check_fits("arange", dt, start + (n - 1) * step)
    end
    local t = new_raw("arange", {n}, dt, dev._ctx, e)
    push(K.arange, "arange", 0, {}, {t}, {start, step})
    return t
end

-- ---------------------------------------------------------------- random

-- One generator per engine and device: a uint8 tensor of 32 bytes whose
-- var every random op writes, so random ops run in push order.
local generators = {} -- engine key -> device key -> tensor
local default_seed = 5489

engine.on_close(function(p) generators[engine.key(p)] = nil end)

local function generator_for(fname, t)
    local c = t._c
    local ek = engine.key(c.storage.engine)
    local per = generators[ek]
    if not per then
        per = {}
        generators[ek] = per
    end
    local dk = c.ctx.dev_type * 1000 + c.ctx.dev_id
    local g = per[dk]
    if not g then
        g = new_raw(fname, {32}, U8, result_ctx(c.ctx), c.storage.engine)
        push(K.seed, "manual_seed", 0, {}, {g}, nil, {default_seed})
        per[dk] = g
    end
    return g
end

-- ordo.manual_seed(n): every generator (one per engine and device) restarts
-- from n; random results then depend only on n and the order of calls.
-- A seed is a 64-bit integer: -2^63 .. 2^64 - 1 (as Torch: 2^63 and up are
-- taken as unsigned and kept bit for bit).  Past that range the conversion
-- to int64 is undefined: 2^64, 1e300 and -2^63 all seeded alike.
local function check_seed(fname, n)
    if type(n) == "cdata" and (ffi.istype(I64_CT, n) or ffi.istype(U64_CT, n)) then
        -- every 64-bit seed, past 2^53 too (0xFFFFFFFFFFFFFFFFULL, -9007199254740993LL): the same 64 bits
        return ffi.cast(I64_CT, n)
    end
    if not is_int(n) then
        fail(fname .. ": expected an integer seed, got " ..
             (type(n) == "number" and show(n) or typename(n) .. (type(n) == "string" and fmt(" %q", n) or "")) ..
             " (a number, or a 64-bit integer literal: 12LL, 12ULL)")
    end
    if n < -2 ^ 63 or n >= 2 ^ 64 then
        fail(fmt("%s: seed %s out of range (expected an integer from -2^63 to 2^64 - 1)", fname,
                 math.abs(n) < 1e20 and fmt("%.0f", n) or show(n)))
    end
    if n >= 2 ^ 63 then n = n - 2 ^ 64 end -- the same 64 bits, as int64 (exact: both are multiples of 2^11)
    return n
end

function M.manual_seed(n, extra)
    if extra ~= nil then extra_arg("manual_seed", "(n)", extra) end
    n = check_seed("manual_seed", n)
    default_seed = n
    for _, per in pairs(generators) do
        for _, g in pairs(per) do push(K.seed, "manual_seed", 0, {}, {g}, nil, {n}) end
    end
end

-- ordo.get_rng_state([opts]) and ordo.set_rng_state(state [, opts]), as
-- Torch's torch.get_rng_state / set_rng_state (torch.cuda's for a GPU): a
-- copy of one generator -- the device's in opts (a device or {device =,
-- engine =}; cpu(0) of the default engine by default) -- as a uint8 tensor
-- of its 32 bytes on the host, and back.  Saved with a checkpoint and set
-- again on resume, the resumed run draws the dropout masks and shuffles
-- that the run not stopped would have drawn.
local RNG_MAGIC = "ordoPhx1" -- bytes 17..24 of a state (kernels/cpu/random.c)

local function rng_generator(fname, opts)
    if opts ~= nil then
        local o = options_table(fname, opts)
        if o.dtype ~= nil then fail(fname .. ": a generator has no dtype (give a device or {device =, engine =})") end
    end
    local _, dev, e = options(fname, opts)
    -- a probe of no elements on the device and engine finds their generator
    return generator_for(fname, new_raw(fname, {0}, U8, result_ctx(dev._ctx), e))
end

function M.get_rng_state(opts, extra)
    if extra ~= nil then extra_arg("get_rng_state", "(opts)", extra) end
    local g = rng_generator("get_rng_state", opts)
    if g._c.ctx.dev_type == GPU then return g:to(util.cpu(0)) end
    return g:clone()
end

function M.set_rng_state(state, opts, extra)
    if extra ~= nil then extra_arg("set_rng_state", "(state, opts)", extra) end
    local fname = "set_rng_state"
    if not is_tensor(state) or state._c.dtype ~= U8 or state:dim() ~= 1 or state:numel() ~= 32 then
        fail(fmt("%s: expected a generator state, a uint8 tensor of 32 elements (from ordo.get_rng_state), got %s",
                 fname, is_tensor(state) and fmt("%s of shape %s", DT_NAME[state._c.dtype], shape_str(state))
                 or typename(state)))
    end
    local g = rng_generator(fname, opts)
    local bytes = state:totable()
    local ok = true
    for i = 1, 8 do
        if bytes[16 + i] ~= RNG_MAGIC:byte(i) or bytes[24 + i] ~= 0 then ok = false end
    end
    if not ok then
        fail(fname .. ": not a generator state: its bytes 17..32 are not those of ordo.get_rng_state's")
    end
    -- from its bytes: the state may come from another engine or device
    g:copy_(M.tensor(bytes, M.like(g)))
end

-- seeded_state(fname, n): a generator state (as get_rng_state's) seeded
-- with n, for a draw of its own (data.random_split's seed) that leaves
-- every engine generator as it was.
function M.seeded_state(fname, n)
    n = check_seed(fname, n)
    local _, dev, e = options(fname, nil)
    local g = new_raw(fname, {32}, U8, result_ctx(dev._ctx), e)
    push(K.seed, "manual_seed", 0, {}, {g}, nil, {n})
    return g
end

local function random_(fname, kid, allowed, t, s1, s2)
    check_self(fname, t)
    if not allowed[t._c.dtype] then
        fail(fmt("%s: dtype %s not supported (expected %s)", fname, DT_NAME[t._c.dtype], allowed_str(allowed)))
    end
    local g = generator_for(fname, t)
    push(kid, fname, 0, {}, {t, g}, {s1, s2})
    return t
end

local F32_MAX = 3.4028234663852886e38

-- as show writes it, a string quoted and named (a string "0" was shown as 0)
local function shown(x) return type(x) == "string" and fmt("string %q", x) or show(x) end

function Tensor:uniform_(low, high, extra)
    if extra ~= nil then extra_arg("uniform_", "(low, high)", extra) end
    low, high = low or 0, high or 1
    -- finite bounds with a finite width: the kernel draws low + u * (high - low)
    if type(low) ~= "number" or type(high) ~= "number" or not (low <= high) or not is_finite(high - low) then
        fail(fmt("uniform_: expected finite numbers low <= high, got %s and %s", shown(low), shown(high)))
    end
    check_self("uniform_", self)
    -- as Torch: float32 draws stay within its range (values past it came out as its largest)
    if self._c.dtype == F32 and math.max(math.abs(low), math.abs(high), high - low) > F32_MAX then
        fail(fmt("uniform_: the range [%s, %s) does not fit in float32 (its largest value is %s, the range's "
                 .. "width too)", show(low), show(high), show(F32_MAX)))
    end
    return random_("uniform_", K.uniform, FLOAT, self, low, high)
end

function Tensor:normal_(mean, std, extra)
    if extra ~= nil then extra_arg("normal_", "(mean, std)", extra) end
    mean, std = mean or 0, std or 1
    if type(mean) ~= "number" or type(std) ~= "number" or not is_finite(mean) or not (std >= 0 and std < huge) then
        fail(fmt("normal_: expected a finite mean and a finite std >= 0, got %s and %s", shown(mean), shown(std)))
    end
    check_self("normal_", self)
    if self._c.dtype == F32 and math.max(math.abs(mean), std) > F32_MAX then -- (every draw was inf)
        fail(fmt("normal_: mean %s and std %s do not fit in float32 (its largest value is %s)", show(mean), show(std),
                 show(F32_MAX)))
    end
    return random_("normal_", K.normal, FLOAT, self, mean, std)
end

-- t's values checked to lie in [lo, hi], as a new contiguous float tensor
-- (no gradient) that an op reads instead of t: a value outside, or NaN,
-- fails the check at run time, without a host wait, and the op reading the
-- copy is skipped and carries the failure ("fname: check_range: value 1.5
-- at element 3 is outside [0, 1]").  t must be float.
function M.checked_in_range(fname, t, lo, hi)
    local src = t:detach():contiguous()
    local out = new_raw(fname, shape_of(src), src._c.dtype, src._c.ctx, src._c.storage.engine)
    push(K.check_range, fname, NAMED, {src}, {out}, {lo, hi})
    return out
end

-- Per-element probabilities (Torch's bernoulli(p) and t:bernoulli_(p)): a one
-- where a uniform draw in [0, 1) falls below p, so p = 0 never gives one and
-- p = 1 always does.  p broadcasts to self's shape, never the other way.
local function bernoulli_probs_(fname, self, p)
    check_self(fname, self)
    if not FLOAT[p._c.dtype] then
        fail(fmt("%s: expected probabilities of dtype float32 or float64, got %s", fname, DT_NAME[p._c.dtype]))
    end
    device_mix(fname, self, p)
    local ps, ts = shape_of(p), shape_of(self)
    local fits = #ps <= #ts
    for i = 1, #ps do
        local pd, td = ps[#ps + 1 - i], ts[#ts + 1 - i]
        if fits and pd ~= td and pd ~= 1 then fits = false end
    end
    if not fits then
        fail(fmt("%s: probabilities of shape %s do not broadcast to the tensor's shape %s", fname,
                 shape_str_tbl(ps), shape_str_tbl(ts)))
    end
    -- self is written last (by copy_): an expanded self, which copy_ refused
    -- in its own name, is refused here first, before a draw moves the generator
    local st = self:stride()
    for i = 1, #ts do
        if st[i] == 0 and ts[i] > 1 then
            fail(fmt("%s: cannot write into an expanded view (shape %s with a stride of 0): several elements "
                     .. "share one memory location; use contiguous() first", fname, shape_str_tbl(ts)))
        end
    end
    -- a probability outside [0, 1] (or NaN) fails the op at run time (the
    -- check needs no wait), and self is left as it was
    local checked = M.checked_in_range(fname, p, 0, 1)
    local u = new_raw(fname, ts, p._c.dtype, self._c.ctx, self._c.storage.engine)
    random_(fname, K.uniform, FLOAT, u, 0, 1)
    return self:copy_(u:lt(checked))
end

local function bernoulli_(fname, self, p)
    p = p or 0.5
    if is_tensor(p) then return bernoulli_probs_(fname, self, p) end
    if type(p) ~= "number" then -- (tostring of a tensor would print all of it into the message)
        fail(fmt("%s: expected a probability (a number in [0, 1]) or a tensor of them, got %s", fname,
                 typename(p)))
    end
    if not (p >= 0 and p <= 1) then fail(fmt("%s: expected a probability in [0, 1], got %s", fname, show(p))) end
    return random_(fname, K.bernoulli, ALL, self, p, 0)
end
function Tensor:bernoulli_(p, extra)
    if extra ~= nil then extra_arg("bernoulli_", "(p)", extra) end
    return bernoulli_("bernoulli_", self, p)
end
-- t:bernoulli(): ones with the probabilities in t (as ordo.bernoulli(t))
function Tensor:bernoulli(extra)
    if extra ~= nil then extra_arg("bernoulli", "()", extra) end
    check_self("bernoulli", self)
    return M.bernoulli(self)
end

local function random_maker(fname, method, float_only)
    return function(...)
        local shape, opts = shape_args(fname, ...)
        local dt, dev, e = options(fname, opts)
        if float_only and not ISFLOAT[dt] then
            fail(fmt("%s: dtype %s not supported (expected float32 or float64)", fname, DT_NAME[dt]))
        end
        local t = new_raw(fname, shape, dt, dev._ctx, e)
        return method(t)
    end
end
M.rand = random_maker("rand", function(t) return Tensor.uniform_(t, 0, 1) end, true)
M.randn = random_maker("randn", function(t) return Tensor.normal_(t, 0, 1) end, true)

-- ordo.rand_like(t [, opts]), ordo.randn_like(t [, opts]) (Torch's): rand
-- and randn of t's shape, dtype and device, opts overriding the last two.
local function random_like(fname, method)
    return make_like(fname, function(out)
        if not ISFLOAT[out._c.dtype] then
            fail(fmt("%s: dtype %s not supported (expected float32 or float64)", fname, DT_NAME[out._c.dtype]))
        end
        return method(out)
    end)
end
M.rand_like = random_like("rand_like", function(t) return Tensor.uniform_(t, 0, 1) end)
M.randn_like = random_like("randn_like", function(t) return Tensor.normal_(t, 0, 1) end)

-- ordo.bernoulli(shape, p [, opts]): ones with probability p.
-- ordo.bernoulli(p): a tensor like p (Torch's bernoulli(input)), one with
-- probability p[i] at each i.
function M.bernoulli(shape, p, opts, extra)
    if extra ~= nil then extra_arg("bernoulli", "(shape, p, opts)", extra) end
    if is_tensor(shape) then
        if p ~= nil then
            fail("bernoulli: with a tensor of probabilities, expected no other argument, got " .. typename(p))
        end
        local probs = shape
        local out = new_raw("bernoulli", shape_of(probs), probs._c.dtype, probs._c.ctx, probs._c.storage.engine)
        return bernoulli_probs_("bernoulli", out, probs)
    end
    if type(shape) ~= "table" or getmetatable(shape) ~= nil then
        fail("bernoulli: expected a shape table or a tensor of probabilities first, got " .. typename(shape))
    end
    shape = shape_args("bernoulli", shape)
    local dt, dev, e = options("bernoulli", opts)
    if p == nil then p = 0.5 end
    if type(p) ~= "number" then -- (checked before the tensor is made)
        fail(fmt("bernoulli: expected a probability (a number in [0, 1]), got %s", typename(p)))
    end
    if not (p >= 0 and p <= 1) then fail(fmt("bernoulli: expected a probability in [0, 1], got %s", show(p))) end
    return bernoulli_("bernoulli", new_raw("bernoulli", shape, dt, dev._ctx, e), p)
end

-- ---------------------------------------------------------------- information

function Tensor:shape(extra)
    if extra ~= nil then extra_arg("shape", "()", extra) end
    check_self("shape", self)
    return shape_of(self)
end

function Tensor:size(dim, extra)
    if extra ~= nil then extra_arg("size", "(dim)", extra) end
    check_self("size", self)
    if dim == nil then return shape_of(self) end
    return tonumber(self._c.shape[norm_dim("size", self, dim)])
end

function Tensor:stride(dim, extra)
    if extra ~= nil then extra_arg("stride", "(dim)", extra) end
    check_self("stride", self)
    local c = self._c
    if dim == nil then
        local s = {}
        for i = 1, c.ndim do s[i] = tonumber(c.strides[i - 1]) end
        return s
    end
    return tonumber(c.strides[norm_dim("stride", self, dim)])
end

function Tensor:dim(extra)
    if extra ~= nil then extra_arg("dim", "()", extra) end
    check_self("dim", self)
    return self._c.ndim
end
function Tensor:ndim(extra) -- (Torch's other name; its errors name it)
    if extra ~= nil then extra_arg("ndim", "()", extra) end
    check_self("ndim", self)
    return self._c.ndim
end

function Tensor:numel(extra)
    if extra ~= nil then extra_arg("numel", "()", extra) end
    check_self("numel", self)
    return tonumber(C.ordo_tensor_numel(self._c))
end
function Tensor:nelement(extra) -- (Torch's other name; its errors name it)
    if extra ~= nil then extra_arg("nelement", "()", extra) end
    check_self("nelement", self)
    return tonumber(C.ordo_tensor_numel(self._c))
end

function Tensor:dtype(extra)
    if extra ~= nil then extra_arg("dtype", "()", extra) end
    check_self("dtype", self)
    return DT_NAME[self._c.dtype]
end

-- t:type(): the type name ("ordo.FloatTensor"); t:type(name): t converted
-- to that type, as Torch7's (name: "ordo.IntTensor", "torch.IntTensor",
-- "IntTensor" or a dtype such as "int32"), t itself when it has it.
local TYPE_DT = {}
for d, n in pairs(TYPE_NAME) do
    TYPE_DT[n], TYPE_DT["ordo." .. n], TYPE_DT["torch." .. n] = d, d, d
end
function Tensor:type(name, extra)
    if extra ~= nil then extra_arg("type", "(name)", extra) end
    check_self("type", self)
    if name == nil then return "ordo." .. TYPE_NAME[self._c.dtype] end
    local dt = type(name) == "string" and (TYPE_DT[name] or DT[name])
    if not dt then
        fail(fmt("type: unknown type %s (expected a name like \"ordo.IntTensor\" or a dtype like \"int32\")",
                 type(name) == "string" and fmt("%q", name) or typename(name)))
    end
    return self:to(DT_NAME[dt])
end

function Tensor:device(extra)
    if extra ~= nil then extra_arg("device", "()", extra) end
    check_self("device", self)
    return util.device_of_ctx(self._c.ctx)
end

function Tensor:is_contiguous(extra)
    if extra ~= nil then extra_arg("is_contiguous", "()", extra) end
    check_self("is_contiguous", self)
    return C.ordo_tensor_is_contiguous(self._c) ~= 0
end

function Tensor:element_size(extra)
    if extra ~= nil then extra_arg("element_size", "()", extra) end
    check_self("element_size", self)
    return tonumber(C.ordo_dtype_size(self._c.dtype))
end

-- Waits for every op pushed so far that writes this tensor's storage;
-- raises the failure of one of them (once).
function Tensor:wait(extra)
    if extra ~= nil then extra_arg("wait", "()", extra) end
    check_self("wait", self)
    wait(self)
    return self
end

-- ---------------------------------------------------------------- reading values

-- t itself on the host, else a copy of t on cpu(0) (pushed; wait for it
-- before reading).  GPU memory is never read by the host directly.
local function host_copy(fname, t)
    local c = t._c
    if c.ctx.dev_type ~= GPU then return t end
    local out = new_raw(fname, shape_of(t), c.dtype, CPU0._ctx, c.storage.engine)
    push(K.copy, fname, BCAST + CROSS, {t}, {out})
    return out
end
M.host_copy = host_copy

-- Waits for h, the host copy of t (or t itself).  For a GPU tensor it then
-- waits for t too, which costs nothing more (the copy came after t's work)
-- but reports an asynchronous failure of that work, should the backend
-- have tied it to t's event rather than to the copy's.
local function wait_read(t, h)
    wait(h)
    if h ~= t then wait(t) end
end

local function reader(t)
    local c = t._c
    local dt = c.dtype
    local p = ffi.cast(PTR[dt], host_ptr(c))
    if dt == I64 then return function(off) return tonumber(p[off]) end, p end
    return function(off) return p[off] end, p
end

function Tensor:item(extra)
    if extra ~= nil then extra_arg("item", "()", extra) end
    check_self("item", self)
    local n = self:numel()
    if n ~= 1 then
        fail(fmt("item: expected a tensor with one element, got shape %s (%d elements)", shape_str(self), n))
    end
    local h = host_copy("item", self)
    wait_read(self, h)
    local c = h._c
    local v = reader(h)(0)
    C.ordo_tensor_numel(c) -- keeps c (and so its storage) alive until the read is done
    return v
end

function Tensor:totable(extra)
    if extra ~= nil then extra_arg("totable", "()", extra) end
    check_self("totable", self)
    local h = host_copy("totable", self)
    wait_read(self, h)
    local c = h._c
    local nd = c.ndim
    local get = reader(h)
    if nd == 0 then return get(0) end
    local shape, strides = {}, {}
    for i = 1, nd do
        shape[i] = tonumber(c.shape[i - 1])
        strides[i] = tonumber(c.strides[i - 1])
    end
    local function build(d, off)
        local r = {}
        local n, s = shape[d], strides[d]
        if d == nd then
            for i = 1, n do r[i] = get(off + (i - 1) * s) end
        else
            for i = 1, n do r[i] = build(d + 1, off + (i - 1) * s) end
        end
        return r
    end
    local t = build(1, 0)
    -- the reads above use a raw pointer: c must stay alive through them
    -- (a call the JIT cannot drop), or a GC step inside build() could free it
    C.ordo_tensor_numel(c)
    return t
end

-- The shown elements of a GPU tensor too large to print whole, copied to
-- cpu(0) (pushed): in each elided dim the first and last format.edge, one
-- copy per block of them (at most 2^8).  Printing copied the whole tensor
-- to the host: a 1e10-element expand of one value asked for 40 GB.
local function host_copy_shown(fname, t, elided)
    local c = t._c
    local shape = shape_of(t)
    local edge = format.edge
    local cshape = {}
    for d = 1, #shape do cshape[d] = elided[d] and 2 * edge or shape[d] end
    local out = new_raw(fname, cshape, c.dtype, CPU0._ctx, c.storage.engine)
    local function blocks(d, src, dst)
        if d > #shape then
            push(K.copy, fname, BCAST + CROSS, {src}, {dst})
        elseif not elided[d] then
            blocks(d + 1, src, dst)
        else
            blocks(d + 1, src:narrow(d, 1, edge), dst:narrow(d, 1, edge))
            blocks(d + 1, src:narrow(d, shape[d] - edge + 1, edge), dst:narrow(d, edge + 1, edge))
        end
    end
    blocks(1, t, out)
    return out
end

-- What print shows under the values ("ordo.FloatTensor of size 2x3 on
-- cpu(0)"), without reading them: no wait, no copy.  As PyTorch's
-- requires_grad=True and grad_fn=<MulBackward0>, a leaf that requires a
-- gradient adds ", requires_grad" and a result recorded by autograd
-- ", grad_fn = mul" (t:grad_fn()'s name): nothing told a parameter from a
-- plain tensor, nor a result in the graph from a detached one.
local function header(t)
    local shape = shape_of(t)
    local node = rawget(t, "_node")
    local grad = node and ", grad_fn = " .. tostring(node.name) or rawget(t, "_rg") and ", requires_grad" or ""
    return fmt("ordo.%s of size %s on %s%s", TYPE_NAME[t._c.dtype], #shape == 0 and "()" or shape_str_tbl(shape),
               tostring(util.device_of_ctx(t._c.ctx)), grad)
end

-- "[ordo.FloatTensor of size 2x3 on cpu(0)]", print's last line, for a
-- tensor inside a table (the REPL) or on a progress bar: its values are not
-- read, so a tensor whose op failed, or a large GPU one, shows at once.
function M.summary(t) return "[" .. header(t) .. "]" end

Tensor.__tostring = function(self)
    local shape = shape_of(self)
    local elided = self._c.ctx.dev_type == GPU and format.elided(shape)
    local h = elided and host_copy_shown("tostring", self, elided) or host_copy("tostring", self)
    wait_read(self, h)
    local c = h._c
    local strides = {}
    for i = 1, c.ndim do strides[i] = tonumber(c.strides[i - 1]) end
    local dt = c.dtype
    local get
    if C.ordo_tensor_numel(c) > 0 then
        local p = ffi.cast(PTR[dt], host_ptr(c))
        if dt == I64 then
            get = function(off)
                local v = p[off]
                local n = tonumber(v)
                if n >= 2 ^ 53 or n <= -2 ^ 53 then return (tostring(v):gsub("LL$", "")) end
                return n
            end
        else
            get = function(off) return p[off] end
        end
    end
    local s = format.format({
        shape = shape, strides = strides, get = get, isfloat = ISFLOAT[dt], compact = elided and true,
        header = header(self),
    })
    C.ordo_tensor_numel(c) -- keeps c alive through the raw reads (see totable)
    return s
end

-- ---------------------------------------------------------------- views

local function view_args(fname, ...)
    local a = ...
    if type(a) == "table" and select("#", ...) > 1 then -- (a shape and more: expand({3, 4}, 5) dropped the 5)
        for i = 2, select("#", ...) do
            if (select(i, ...)) ~= nil then
                fail(fmt("%s: expected one shape (a table or a tensor) or the sizes as arguments, got %s and then " ..
                         "%s", fname, is_tensor(a) and "a tensor" or "a table", show((select(i, ...)))))
            end
        end
    end
    if is_tensor(a) then return shape_of(a) end
    local shape, n = {}, nil
    if type(a) == "table" and getmetatable(a) == nil then
        util.check_list(fname, "the shape", a)
        shape, n = a, #a
    else
        n = select("#", ...) -- every argument, a nil among them too (# could stop at it)
        for i = 1, n do shape[i] = (select(i, ...)) end
    end
    if n > 8 then fail(fmt("%s: %d dims (at most 8 supported)", fname, n)) end
    for i = 1, n do
        if not is_int(shape[i]) or shape[i] < -1 then
            fail(fmt("%s: size %s at position %d is invalid (sizes must be integers >= 0, or -1 for one inferred size)",
                     fname, show(shape[i]), i))
        end
    end
    return shape
end

function Tensor:view(...)
    check_self("view", self)
    local shape = view_args("view", ...)
    local n = fill_shape("view", shape)
    return wrap(C.ordo_tensor_view("view", self._c, n, SHAPE))
end

function Tensor:reshape(...)
    check_self("reshape", self)
    local shape = view_args("reshape", ...)
    local n = fill_shape("reshape", shape)
    local c = C.ordo_tensor_view("reshape", self._c, n, SHAPE)
    if c == nil then
        if C.ordo_tensor_error_code() ~= cdef.TERR_NOT_VIEWABLE then fail_c() end
        local copy = self:contiguous()
        n = fill_shape("reshape", shape)
        c = C.ordo_tensor_view("reshape", copy._c, n, SHAPE)
    end
    return wrap(c)
end

-- flatten([start_dim = 1 [, end_dim = -1]]): dims start_dim..end_dim
-- merged into one (a view where the strides allow, else a copy).
function Tensor:flatten(start_dim, end_dim, extra)
    if extra ~= nil then extra_arg("flatten", "(start_dim, end_dim)", extra) end
    check_self("flatten", self)
    if start_dim == nil and end_dim == nil or self._c.ndim == 0 then
        if self._c.ndim == 0 and start_dim ~= nil then norm_dim("flatten", self, start_dim, 1) end
        return self:reshape({-1})
    end
    local a = norm_dim("flatten", self, start_dim or 1) + 1
    local b = norm_dim("flatten", self, end_dim or -1) + 1
    if a > b then
        fail(fmt("flatten: start_dim %d comes after end_dim %d in a tensor of shape %s", start_dim, end_dim or -1,
                 shape_str(self)))
    end
    local s, out = shape_of(self), {}
    local merged = 1
    for i = 1, #s do
        if i < a or i > b then out[#out + 1] = s[i]
        else
            merged = merged * s[i]
            if i == b then out[#out + 1] = merged end
        end
    end
    return self:reshape(out)
end

function Tensor:transpose(d1, d2, extra)
    if extra ~= nil then extra_arg("transpose", "(dim0, dim1)", extra) end
    check_self("transpose", self)
    if d1 == nil and d2 == nil and self._c.ndim == 2 then d1, d2 = 1, 2 end
    local a, b = norm_dim("transpose", self, d1), norm_dim("transpose", self, d2)
    return wrap(C.ordo_tensor_transpose("transpose", self._c, a, b))
end

function Tensor:t(extra)
    if extra ~= nil then extra_arg("t", "()", extra) end
    check_self("t", self)
    local n = self._c.ndim
    if n < 2 then return self end
    if n ~= 2 then fail(fmt("t: expected a tensor with at most 2 dims, got shape %s", shape_str(self))) end
    return wrap(C.ordo_tensor_transpose("t", self._c, 0, 1))
end

function Tensor:permute(...)
    check_self("permute", self)
    local perm = (...)
    local n
    if type(perm) ~= "table" then
        perm, n = {...}, select("#", ...)
    else
        util.check_list("permute", "the dims", perm)
        n = #perm
        -- after the table: permute({2, 1}, 5) dropped the 5 unseen
        for j = 2, select("#", ...) do
            local v = (select(j, ...))
            if v ~= nil then extra_arg("permute", "(dims) or (dim, dim, ...)", v) end
        end
    end
    if n ~= self._c.ndim then
        fail(fmt("permute: %d dims given for a %d-d tensor of shape %s", n, self._c.ndim, shape_str(self)))
    end
    for i = 1, n do SHAPE[i - 1] = norm_dim("permute", self, perm[i]) end
    return wrap(C.ordo_tensor_permute("permute", self._c, n, SHAPE))
end

function Tensor:narrow(dim, start, len, extra)
    if extra ~= nil then extra_arg("narrow", "(dim, start, len)", extra) end
    check_self("narrow", self)
    local d = norm_dim("narrow", self, dim)
    if not is_int(start) or not is_int(len) then
        fail(fmt("narrow: start and length must be integers, got %s and %s", show(start), show(len)))
    end
    local size = tonumber(self._c.shape[d])
    check_index_range("narrow", "start", start, d + 1, size)
    check_index_range("narrow", "length", len, d + 1, size)
    if start < 0 then
        if start + size + 1 < 1 then -- (named as given: the C side would say the start it became)
            fail(fmt("narrow: start %d out of range for dim %d of size %d (shape %s; 1..%d, or -%d..-1 from the end)",
                     start, d + 1, size, shape_str(self), size, size))
        end
        start = start + size + 1
    end
    return wrap(C.ordo_tensor_narrow("narrow", self._c, d, start - 1, len))
end

-- unfold(dim, size, step): every window of size elements along dim, step
-- apart, as Torch's: a view whose dim holds the floor((n - size) / step)
-- + 1 windows and whose new last dim the size elements of each.  Windows
-- that overlap (step < size) share memory, as in Torch: read them, or
-- contiguous() them before writing.
local STRIDES = ffi.new("int64_t[8]")
function Tensor:unfold(dim, size, step, extra)
    if extra ~= nil then extra_arg("unfold", "(dim, size, step)", extra) end
    check_self("unfold", self)
    local c = self._c
    local nd = c.ndim
    local d = norm_dim("unfold", self, dim, nd == 0 and 1 or 0) -- (a 0-dim tensor is one element along dim 1)
    if not is_int(size) or size < 0 then fail("unfold: size must be an integer >= 0, got " .. show(size)) end
    if not is_int(step) or step < 1 then fail("unfold: step must be an integer >= 1, got " .. show(step)) end
    local n = nd == 0 and 1 or tonumber(c.shape[d])
    if size > n then
        fail(fmt("unfold: size %s is larger than dim %d of size %d (shape %s)", show(size), d + 1, n, shape_str(self)))
    end
    if nd == 0 then return self:reshape(1):narrow(1, 1, size) end -- (Torch's: the window alone)
    if nd >= 8 then fail(fmt("unfold: a tensor of %d dims has no room for the windows' dim (at most 8)", nd)) end
    for i = 0, nd - 1 do SHAPE[i], STRIDES[i] = c.shape[i], c.strides[i] end
    local nw = floor((n - size) / step) + 1
    -- (one window: its stride is never used, and a step past 2^63 would not fit one)
    SHAPE[d], STRIDES[d] = nw, nw > 1 and c.strides[d] * step or c.strides[d]
    SHAPE[nd], STRIDES[nd] = size, c.strides[d]
    return wrap(C.ordo_tensor_as_strided(c, nd + 1, SHAPE, STRIDES, c.offset))
end

-- diagonal([offset [, dim1 [, dim2]]]): Torch's: a view of the elements
-- (i, i + offset) of dims dim1 and dim2 (default 1 and 2), which go, as a
-- new last dim; offset > 0 above the main diagonal, < 0 below it.
function Tensor:diagonal(offset, dim1, dim2, extra)
    if extra ~= nil then extra_arg("diagonal", "(offset, dim1, dim2)", extra) end
    check_self("diagonal", self)
    if offset == nil then offset = 0 end
    if not is_int(offset) then fail("diagonal: offset must be an integer, got " .. show(offset)) end
    local c = self._c
    local nd = c.ndim
    if nd < 2 then fail(fmt("diagonal: expected a tensor of 2 dims or more, got shape %s", shape_str(self))) end
    local d1 = norm_dim("diagonal", self, dim1 == nil and 1 or dim1)
    local d2 = norm_dim("diagonal", self, dim2 == nil and 2 or dim2)
    if d1 == d2 then fail(fmt("diagonal: dim1 and dim2 are both dim %d (shape %s)", d1 + 1, shape_str(self))) end
    local n1, n2 = tonumber(c.shape[d1]), tonumber(c.shape[d2])
    local len = offset >= 0 and math.min(n1, n2 - offset) or math.min(n1 + offset, n2)
    local off = c.offset
    if len <= 0 then
        len = 0
    elseif offset >= 0 then
        off = off + offset * c.strides[d2]
    else
        off = off - offset * c.strides[d1]
    end
    local k = 0
    for i = 0, nd - 1 do
        if i ~= d1 and i ~= d2 then
            SHAPE[k], STRIDES[k] = c.shape[i], c.strides[i]
            k = k + 1
        end
    end
    SHAPE[k], STRIDES[k] = len, c.strides[d1] + c.strides[d2]
    return wrap(C.ordo_tensor_as_strided(c, nd - 1, SHAPE, STRIDES, off))
end

function Tensor:select(dim, index, extra)
    if extra ~= nil then extra_arg("select", "(dim, index)", extra) end
    check_self("select", self)
    local d = norm_dim("select", self, dim)
    if not is_int(index) then fail("select: index must be an integer, got " .. show(index)) end
    local size = tonumber(self._c.shape[d])
    check_index_range("select", "index", index, d + 1, size)
    if index < 0 then index = index + size + 1 end
    return wrap(C.ordo_tensor_select("select", self._c, d, index - 1))
end

function Tensor:unsqueeze(dim, extra)
    if extra ~= nil then extra_arg("unsqueeze", "(dim)", extra) end
    check_self("unsqueeze", self)
    return wrap(C.ordo_tensor_unsqueeze("unsqueeze", self._c, norm_dim("unsqueeze", self, dim, 1)))
end

-- squeeze([dim]): the dims of size 1 removed (all of them, or dim, or each
-- dim of a list as Torch's squeeze(dims); a listed dim of another size stays).
function Tensor:squeeze(dim, extra)
    if extra ~= nil then extra_arg("squeeze", "(dim)", extra) end
    check_self("squeeze", self)
    if dim == nil then return wrap(C.ordo_tensor_squeeze("squeeze", self._c, -1)) end
    if type(dim) == "table" and getmetatable(dim) == nil then
        util.check_list("squeeze", "the dims", dim, true)
        local ds, seen = {}, {}
        for i = 1, #dim do
            local d = norm_dim("squeeze", self, dim[i])
            if seen[d] then fail(fmt("squeeze: dim %s appears twice in the list", show(dim[i]))) end
            seen[d] = true
            ds[#ds + 1] = d
        end
        table.sort(ds, function(a, b) return a > b end) -- the last first: the others keep their place
        local r = self
        for _, d in ipairs(ds) do r = wrap(C.ordo_tensor_squeeze("squeeze", r._c, d)) end
        return r
    end
    return wrap(C.ordo_tensor_squeeze("squeeze", self._c, norm_dim("squeeze", self, dim)))
end

function Tensor:expand(...)
    check_self("expand", self)
    local shape = view_args("expand", ...)
    local n = fill_shape("expand", shape)
    return wrap(C.ordo_tensor_expand("expand", self._c, n, SHAPE))
end

function Tensor:expand_as(other, extra)
    if extra ~= nil then extra_arg("expand_as", "(other)", extra) end
    check_self("expand_as", self)
    if not is_tensor(other) then fail("expand_as: expected a tensor, got " .. typename(other)) end
    local n = fill_shape("expand_as", shape_of(other))
    return wrap(C.ordo_tensor_expand("expand_as", self._c, n, SHAPE))
end

function Tensor:clone(extra)
    if extra ~= nil then extra_arg("clone", "()", extra) end
    check_self("clone", self)
    local out = empty_like(self, nil, "clone")
    return push1(K.copy, "clone", out, self)
end

function Tensor:contiguous(extra)
    if extra ~= nil then extra_arg("contiguous", "()", extra) end
    check_self("contiguous", self)
    if C.ordo_tensor_is_contiguous(self._c) ~= 0 then return self end
    return push1(K.copy, "contiguous", empty_like(self, nil, "contiguous"), self)
end

-- t:to(dtype), t:to(device), t:to(device, dtype): self when nothing changes.
-- A cast alone of a pinned tensor gives an ordinary cpu(n) tensor, as the
-- results of every other op on it (and as PyTorch's x.pin_memory().double());
-- a pinned result needs the device named: t:to(ordo.cpu_pinned(n), dtype).
function Tensor:to(a, b, extra)
    if extra ~= nil then extra_arg("to", "(device or dtype or tensor, dtype)", extra) end
    check_self("to", self)
    local c = self._c
    local dt, dev = c.dtype, nil
    local got_dt, got_dev = false, false
    if a == nil and b ~= nil then fail("to: the first argument is nil (expected a dtype, a device or a tensor)") end
    if is_tensor(a) and b ~= nil then fail("to: t:to(u) takes nothing after the tensor, got " .. typename(b)) end
    for _, x in ipairs({a, b}) do
        if type(x) == "string" and DT[x] then
            -- to("float64", "int32") used to take the last one without a word
            if got_dt then fail("to: two dtypes given (" .. DT_NAME[dt] .. " and " .. x .. ")") end
            dt, got_dt = DT[x], true
        elseif is_tensor(x) then -- t:to(u): u's dtype and device, as Torch
            dt, dev = x._c.dtype, util.device_of_ctx(x._c.ctx)
        elseif x ~= nil then
            local d = util.parse_device("to", x)
            if not d then
                fail(fmt("to: expected a dtype (float32, float64, int32, int64, uint8), a device (ordo.cpu(n), ordo.cpu_pinned(n), ordo.gpu(n)) or a tensor, got %s",
                         type(x) == "string" and ("'" .. x .. "'") or typename(x)))
            end
            if got_dev then fail(fmt("to: two devices given (%s and %s)", tostring(dev), tostring(d))) end
            dev, got_dev = d, true
        end
    end
    if a == nil then fail("to: expected a dtype or a device") end
    local cur = util.device_of_ctx(c.ctx)
    if dt == c.dtype and (dev == nil or dev == cur) then return self end
    local ctx = dev and dev._ctx or result_ctx(c.ctx)
    local out = new_raw("to", shape_of(self), dt, ctx, c.storage.engine)
    push(K.copy, "to", BCAST + CROSS, {self}, {out})
    return out
end

-- type_as(u): t in u's dtype (t itself when it has it already).
function Tensor:type_as(u, extra)
    if extra ~= nil then extra_arg("type_as", "(other)", extra) end
    check_self("type_as", self)
    if not is_tensor(u) then fail("type_as: expected a tensor, got " .. typename(u)) end
    return self:to(DT_NAME[u._c.dtype])
end

-- t:float(), t:double(), t:int(), t:long(), t:byte(): t:to(that dtype)
for name, dt in pairs({float = "float32", double = "float64", int = "int32", long = "int64", byte = "uint8"}) do
    Tensor[name] = function(self, extra)
        if extra ~= nil then extra_arg(name, "()", extra) end
        check_self(name, self)
        return self:to(dt)
    end
end
-- t:half(), t:bfloat16(): Torch's; ordo has no 16-bit floats, said so
-- (they were "attempt to call method 'half' (a nil value)").
for _, name in ipairs({"half", "bfloat16"}) do
    Tensor[name] = function(self, extra)
        if extra ~= nil then extra_arg(name, "()", extra) end
        check_self(name, self)
        fail(fmt("%s: ordo has no 16-bit float dtype (float32 and float64 only); use t:float() or t:double()", name))
    end
end
function Tensor:cpu(extra)
    if extra ~= nil then extra_arg("cpu", "()", extra) end
    check_self("cpu", self)
    return self:to(util.cpu(0))
end

-- t:pin_memory(): t in page-locked host memory (t itself if it is there
-- already), so that its copies to a GPU run asynchronously, overlapping
-- compute; ops on it run on the CPU as usual.  Needs a CUDA device.
function Tensor:pin_memory(extra)
    if extra ~= nil then extra_arg("pin_memory", "()", extra) end
    check_self("pin_memory", self)
    local c = self._c
    if c.ctx.dev_type == CPU_PINNED then return self end
    if c.ctx.dev_type == GPU then
        fail(fmt("pin_memory: the tensor is on %s; only host tensors can be pinned", show(self:device())))
    end
    -- (without a CUDA device: "pin_memory: cpu_pinned(0): pinned memory
    -- needs a CUDA device ...", not cpu_pinned's message alone)
    return self:to(util.own_errors("pin_memory", pcall(util.cpu_pinned, c.ctx.dev_id)))
end

-- t:is_pinned(): whether t lives in pinned host memory (cpu_pinned(n)).
function Tensor:is_pinned(extra)
    if extra ~= nil then extra_arg("is_pinned", "()", extra) end
    check_self("is_pinned", self)
    return self._c.ctx.dev_type == CPU_PINNED
end

-- ---------------------------------------------------------------- in-place basics

-- value (a one-element tensor) as a 0-dim view when it is an int64 past
-- 2^53 going into an int64 tensor on its device: copied as it is, where
-- item's double would drop its low bits (fill_ and masked_fill put 2^62
-- for 2^62 + 1); else nil.
local function exact_int64_value(self, value)
    local vc, sc = value._c, self._c
    if vc.dtype ~= I64 or sc.dtype ~= I64 or vc.ctx.dev_type ~= sc.ctx.dev_type or vc.ctx.dev_id ~= sc.ctx.dev_id
        or vc.storage.engine ~= sc.storage.engine then
        return nil
    end
    local x = value:item()
    if x < 2 ^ 53 and x > -2 ^ 53 then return nil end
    return value:reshape({})
end

function Tensor:fill_(value, extra)
    if extra ~= nil then extra_arg("fill_", "(value)", extra) end
    check_self("fill_", self)
    if type(value) == "boolean" then value = value and 1 or 0 end
    if is_tensor(value) then
        if value:numel() ~= 1 then
            fail(fmt("fill_: expected a number or a one-element tensor, got a tensor of shape %s", shape_str(value)))
        end
        local v = exact_int64_value(self, value)
        if v then return push1(K.copy, "fill_", self, v) end
        value = value:item()
    end
    if type(value) ~= "number" then fail("fill_: expected a number, got " .. typename(value)) end
    check_fits("fill_", self._c.dtype, value)
    return push1(K.fill, "fill_", self, nil, value)
end

function Tensor:zero_(extra)
    if extra ~= nil then extra_arg("zero_", "()", extra) end
    return Tensor.fill_(self, 0)
end

-- copy_(src): src (a tensor of any dtype and device, broadcast to self's
-- shape, or a nested table) written into self.
function Tensor:copy_(src, extra)
    if extra ~= nil then extra_arg("copy_", "(src)", extra) end
    check_self("copy_", self)
    if type(src) == "table" and getmetatable(src) == nil then
        local c = self._c
        -- built on the host (cpu(0) for a GPU tensor); the push copies it over
        src = from_data("copy_", src, c.dtype, c.ctx.dev_type == GPU and CPU0._ctx or c.ctx, c.storage.engine)
    end
    if not is_tensor(src) then fail("copy_: expected a tensor, got " .. typename(src)) end
    push(K.copy, "copy_", BCAST + CROSS, {src}, {self})
    return self
end

-- ---------------------------------------------------------------- elementwise binary

-- k: tensor-tensor kernel, ks: tensor-number (t op s), kr: number-tensor
-- (s op t); float: integer inputs compute in float32; cmp: result uint8.
local BIN = {
    add = {k = K.add, ks = K.add_scalar, kr = K.add_scalar},
    sub = {k = K.sub, ks = K.sub_scalar, kr = K.rsub_scalar},
    mul = {k = K.mul, ks = K.mul_scalar, kr = K.mul_scalar},
    div = {k = K.div, ks = K.div_scalar, kr = K.rdiv_scalar, float = true},
    pow = {k = K.pow, ks = K.pow_scalar, kr = K.rpow_scalar, float = true},
    maximum = {k = K.maximum, order = true},
    minimum = {k = K.minimum, order = true},
    eq = {k = K.eq, ks = K.eq_scalar, kr = K.eq_scalar, cmp = true},
    ne = {k = K.ne, ks = K.ne_scalar, kr = K.ne_scalar, cmp = true},
    lt = {k = K.lt, ks = K.lt_scalar, kr = K.gt_scalar, cmp = true},
    le = {k = K.le, ks = K.le_scalar, kr = K.ge_scalar, cmp = true},
    gt = {k = K.gt, ks = K.gt_scalar, kr = K.lt_scalar, cmp = true},
    ge = {k = K.ge, ks = K.ge_scalar, kr = K.le_scalar, cmp = true},
}
for name, spec in pairs(BIN) do spec.name = name end

local function scalar_tensor(fname, like, v, dt)
    check_fits(fname, dt, v)
    local t = new_on(fname, like, {}, dt)
    return push1(K.fill, fname, t, nil, v)
end

local function binary(spec, a, b)
    local name = spec.name
    local ta, tb = is_tensor(a), is_tensor(b)
    if type(a) == "boolean" then a = a and 1 or 0 end
    if type(b) == "boolean" then b = b and 1 or 0 end
    if ta and tb then
        local dt = result_type(a, b)
        if spec.float and not ISFLOAT[dt] then dt = DEFAULT_FLOAT end
        if a._c.dtype ~= dt then a = cast(name, a, dt) end
        if b._c.dtype ~= dt then b = cast(name, b, dt) end
        return binary_c(spec.k, name, a, b, spec.cmp and U8 or dt)
    end
    if not (ta or tb) then
        fail(fmt("%s: expected tensors or numbers, got %s and %s", name, typename(a), typename(b)))
    end
    local t, s = b, a -- (not `ta and b or a`: a nil b would pick a, naming the tensor as the bad operand)
    if ta then t, s = a, b end
    if type(s) ~= "number" then
        fail(fmt("%s: expected a tensor or a number, got %s", name, typename(s)))
    end
    local dt = result_type(t, s)
    if spec.float and not ISFLOAT[dt] then dt = DEFAULT_FLOAT end
    if t._c.dtype ~= dt then t = cast(name, t, dt) end
    local kid = ta and spec.ks or spec.kr
    if not kid then -- no scalar kernel: a 0-dim tensor
        local st = scalar_tensor(name, t, s, dt)
        if ta then return binary(spec, t, st) end
        return binary(spec, st, t)
    end
    if not spec.cmp and INT_RANGE[dt] then check_fits(name, dt, s) end
    local out = empty_like(t, spec.cmp and U8 or dt, name)
    return push1(kid, name, out, t, s)
end

local function binary_(spec, self, b)
    local name = spec.iname -- spec.name .. "_", made once (a concatenation per op costs a string lookup)
    check_self(name, self)
    if type(b) == "boolean" then b = b and 1 or 0 end
    local sdt = self._c.dtype
    local rt
    if is_tensor(b) then
        rt = result_type(self, b)
    elseif type(b) == "number" then
        rt = result_type(self, b)
    else
        fail(fmt("%s: expected a tensor or a number, got %s", name, typename(b)))
    end
    if spec.float and not ISFLOAT[rt] then rt = DEFAULT_FLOAT end
    if not can_cast(rt, sdt) then
        fail(fmt("%s: the result type %s can't be cast to the in-place tensor's dtype %s", name, DT_NAME[rt],
                 DT_NAME[sdt]))
    end
    if is_tensor(b) then
        -- maximum_/minimum_ (and clamp_) with a wider integer operand:
        -- compared in the wider dtype, then stored, as Torch.  Cast first,
        -- an operand out of self's range wrapped before the comparison
        -- (uint8 5:maximum_(int32 -1) gave 255, not 5); for add, sub and
        -- mul the two orders give the same bits.
        if spec.order and rt ~= sdt then return push1(K.copy, name, self, binary(spec, self, b)) end
        if b._c.dtype ~= sdt then b = cast(name, b, sdt) end
        return push2(spec.k, name, self, self, b)
    end
    if not spec.ks then return push2(spec.k, name, self, self, scalar_tensor(name, self, b, sdt)) end
    if INT_RANGE[sdt] then check_fits(name, sdt, b) end
    return push1(spec.ks, name, self, self, b)
end

for name, spec in pairs(BIN) do
    spec.iname = name .. "_"
    Tensor[name] = function(self, b, extra)
        if extra ~= nil then extra_arg(name, name == "pow" and "(exponent)" or "(other)", extra) end
        check_self(name, self)
        return binary(spec, self, b)
    end
    if not spec.cmp then
        Tensor[name .. "_"] = function(self, b, extra)
            if extra ~= nil then extra_arg(name .. "_", name == "pow" and "(exponent)" or "(other)", extra) end
            return binary_(spec, self, b)
        end
    end
end

-- the hot path: same dtype, no scalar, no alpha
local K_add, K_sub, K_mul = K.add, K.sub, K.mul
local op2 = C.ordo_tensor_op2
local BIN_add, BIN_sub, BIN_mul = BIN.add, BIN.sub, BIN.mul

-- b * alpha for add/sub's alpha form, b a tensor or a number.
-- A negative alpha turns the op around (returned as flip: add becomes
-- sub), so that an unsigned operand is never multiplied by it (u8:sub(v, -1)
-- failed: v * -1 does not fit uint8); an integer tensor's alpha must fit
-- its dtype, said under fname (the error named mul).
local function scaled(fname, b, alpha)
    if type(alpha) ~= "number" then fail(fname .. ": alpha must be a number, got " .. typename(alpha)) end
    if type(b) ~= "number" and not is_tensor(b) then
        fail(fname .. ": other must be a tensor or a number, got " .. typename(b))
    end
    local flip = false
    if alpha < 0 then alpha, flip = -alpha, true end
    if alpha == 1 then return b, flip end
    if is_tensor(b) and INT_RANGE[b._c.dtype] and is_int(alpha) then check_fits(fname, b._c.dtype, alpha, " (alpha)") end
    return b * alpha, flip
end
-- add and sub turned around by a negative alpha, named as called
local ADD_AS_SUB = setmetatable({name = "add", iname = "add_"}, {__index = BIN.sub})
local SUB_AS_ADD = setmetatable({name = "sub", iname = "sub_"}, {__index = BIN.add})

-- spec and b for add/sub's alpha: b * alpha under spec, or under turned
-- (the op turned around) when alpha is negative.
local function with_alpha(fname, spec, turned, b, alpha)
    if alpha == nil or alpha == 1 then return spec, b end
    local flip
    b, flip = scaled(fname, b, alpha)
    return flip and turned or spec, b
end

-- The in-place fast path: self and b tensors of one dtype, the kernel run
-- now or pushed.  Returns nil when it does not apply.
local function same_dtype_(kid, name, self, b)
    if getmetatable(b) ~= Tensor or getmetatable(self) ~= Tensor then return nil end
    local sc, bc = self._c, b._c
    if sc.dtype ~= bc.dtype then return nil end
    if op2(kid, name, sc, sc, bc) ~= 0 then return push2(kid, name, self, self, b) end
    return self
end

function Tensor:add_(b, alpha, extra)
    if extra ~= nil then extra_arg("add_", "(other, alpha)", extra) end
    if alpha == nil then
        local r = same_dtype_(K_add, "add_", self, b)
        if r then return r end
    end
    local spec
    spec, b = with_alpha("add_", BIN_add, ADD_AS_SUB, b, alpha)
    return binary_(spec, self, b)
end

function Tensor:sub_(b, alpha, extra)
    if extra ~= nil then extra_arg("sub_", "(other, alpha)", extra) end
    if alpha == nil then
        local r = same_dtype_(K_sub, "sub_", self, b)
        if r then return r end
    end
    local spec
    spec, b = with_alpha("sub_", BIN_sub, SUB_AS_ADD, b, alpha)
    return binary_(spec, self, b)
end

function Tensor:mul_(b, extra)
    if extra ~= nil then extra_arg("mul_", "(other)", extra) end
    return same_dtype_(K_mul, "mul_", self, b) or binary_(BIN_mul, self, b)
end

function Tensor:add(b, alpha, extra)
    if extra ~= nil then extra_arg("add", "(other, alpha)", extra) end
    check_self("add", self)
    local spec
    spec, b = with_alpha("add", BIN_add, ADD_AS_SUB, b, alpha)
    return binary(spec, self, b)
end

function Tensor:sub(b, alpha, extra)
    if extra ~= nil then extra_arg("sub", "(other, alpha)", extra) end
    check_self("sub", self)
    local spec
    spec, b = with_alpha("sub", BIN_sub, SUB_AS_ADD, b, alpha)
    return binary(spec, self, b)
end

-- div(u [, "trunc"]): true division (integers give float32); "trunc":
-- integer division rounding toward zero, integer tensors only (derived.lua
-- wraps div and div_ with "floor" and with "trunc" of floats).
local function trunc_div(name, self, b, inplace)
    local dt = self._c.dtype
    if ISFLOAT[dt] then
        fail(fmt("%s: rounding mode 'trunc' is for integer tensors, got %s", name, DT_NAME[dt]))
    end
    if is_tensor(b) then
        local rt = result_type(self, b)
        if ISFLOAT[rt] then fail(fmt("%s: rounding mode 'trunc' needs integer operands, got %s", name, DT_NAME[rt])) end
        if inplace then
            return push2(K.div, name, self, self, cast(name, b, dt))
        end
        local a = cast(name, self, rt)
        b = cast(name, b, rt)
        return binary_c(K.div, name, a, b, rt)
    end
    if type(b) ~= "number" or number_is_float(b) then
        fail(fmt("%s: rounding mode 'trunc' needs an integer divisor, got %s", name, show(b)))
    end
    if b == 0 then fail(name .. ": integer division by zero") end
    check_fits(name, self._c.dtype, b)
    return push1(K.div_scalar, name, inplace and self or empty_like(self, nil, name), self, b)
end

function Tensor:div(b, mode)
    check_self("div", self)
    if mode == "trunc" then return trunc_div("div", self, b, false) end
    if mode ~= nil then fail("div: unknown rounding mode " .. show(mode) .. " (expected nil or \"trunc\")") end
    return binary(BIN.div, self, b)
end

function Tensor:div_(b, mode)
    check_self("div_", self)
    if mode == "trunc" then return trunc_div("div_", self, b, true) end
    if mode ~= nil then fail("div_: unknown rounding mode " .. show(mode) .. " (expected nil or \"trunc\")") end
    return binary_(BIN.div, self, b)
end

Tensor.__add = function(a, b) return binary(BIN_add, a, b) end
Tensor.__sub = function(a, b) return binary(BIN.sub, a, b) end
Tensor.__mul = function(a, b) return binary(BIN_mul, a, b) end
Tensor.__div = function(a, b) return binary(BIN.div, a, b) end
Tensor.__pow = function(a, b) return binary(BIN.pow, a, b) end
-- a < b and a <= b between tensors (LuaJIT calls these only when both are
-- tables; a tensor against a number is Lua's own error): Lua makes the
-- answer one boolean, so say where the elementwise ones are instead of
-- "attempt to compare two table values".  (a > b is b < a.)
Tensor.__lt = function()
    fail("<: Lua turns a comparison into one boolean; compare tensors elementwise with a:lt(b) (le, gt, ge, eq, ne)")
end
Tensor.__le = function()
    fail("<=: Lua turns a comparison into one boolean; compare tensors elementwise with a:le(b) (lt, gt, ge, eq, ne)")
end
-- C's fmod of float operands (exact; the sign of a), no gradient: the
-- engine of derived.lua's fmod and remainder.
-- (Not in BIN, which would make it the methods fmod and fmod_.)
local BIN_fmod = {name = "fmod", k = K.fmod, ks = K.fmod_scalar, float = true}
M.float_fmod = function(a, b) return binary(BIN_fmod, a, b) end

-- One bound of clamp / clamp_ (what: "min" or "max") checked under
-- fname; an integer tensor's number bound is brought into its dtype's
-- range (a uint8 tensor clamped to -5..300 is unchanged, where the bound
-- as a scalar operand would not fit).  (No closure: LuaJIT would not
-- compile clamp.)
local function clamp_bound(fname, self, what, v)
    if v == nil or is_tensor(v) then return v end
    if type(v) ~= "number" then fail(fmt("%s: %s must be a number or a tensor, got %s", fname, what, typename(v))) end
    local r = INT_RANGE[self._c.dtype]
    if not r or not is_int(v) then
        if r and fname == "clamp_" and v == v then
            fail(fmt("%s: %s %s is not an integer, and the in-place tensor is %s (clamp's result would be float)",
                     fname, what, show(v), DT_NAME[self._c.dtype]))
        end
        return v
    end
    -- the largest double below 2^63 is 2^63 - 1024
    return min(max(v, r[1]), r[2] == 2 ^ 63 and 2 ^ 63 - 1024 or r[2] - 1)
end

local function clamp_bounds(fname, self, lo, hi)
    if lo == nil and hi == nil then fail(fname .. ": expected at least one of min and max") end
    return clamp_bound(fname, self, "min", lo), clamp_bound(fname, self, "max", hi)
end

-- maximum and minimum under clamp's names, so that a bad bound is named
-- as the user called it
local CLAMP_LO = setmetatable({name = "clamp", iname = "clamp_"}, {__index = BIN.maximum})
local CLAMP_HI = setmetatable({name = "clamp", iname = "clamp_"}, {__index = BIN.minimum})

-- A tensor bound of clamp_ that the in-place op would refuse, refused
-- before either bound is applied (else a bad max left self clamped to min).
local function check_inplace_bound(self, b)
    if not is_tensor(b) then return end
    local sc, bc = self._c, b._c
    if bc.storage.engine ~= sc.storage.engine then fail("clamp_: the tensors belong to different engines") end
    if bc.ctx.dev_type ~= sc.ctx.dev_type or bc.ctx.dev_id ~= sc.ctx.dev_id then
        fail(fmt("clamp_: expected all tensors on one device, got %s and %s", show(util.device_of_ctx(sc.ctx)),
                 show(util.device_of_ctx(bc.ctx))))
    end
    local rt = result_type(self, b)
    if not can_cast(rt, sc.dtype) then
        fail(fmt("clamp_: the result type %s can't be cast to the in-place tensor's dtype %s", DT_NAME[rt],
                 DT_NAME[sc.dtype]))
    end
    local ok = bc.ndim <= sc.ndim
    for i = 1, bc.ndim do
        if not ok then break end
        local bs, ss = bc.shape[bc.ndim - i], sc.shape[sc.ndim - i]
        if bs ~= ss and bs ~= 1 then ok = false end
    end
    if not ok then fail(fmt("clamp_: shape %s cannot be broadcast to %s", shape_str(b), shape_str(self))) end
end

-- clamp(lo, hi): either may be nil
function Tensor:clamp(lo, hi)
    check_self("clamp", self)
    lo, hi = clamp_bounds("clamp", self, lo, hi)
    check_devices("clamp", self, lo, hi)
    local r = self
    if lo ~= nil then r = binary(CLAMP_LO, r, lo) end
    if hi ~= nil then r = binary(CLAMP_HI, r, hi) end
    return r
end

function Tensor:clamp_(lo, hi, extra)
    if extra ~= nil then extra_arg("clamp_", "(min, max)", extra) end
    check_self("clamp_", self)
    lo, hi = clamp_bounds("clamp_", self, lo, hi)
    check_devices("clamp_", self, lo, hi)
    check_inplace_bound(self, lo)
    check_inplace_bound(self, hi)
    if lo ~= nil then binary_(CLAMP_LO, self, lo) end
    if hi ~= nil then binary_(CLAMP_HI, self, hi) end
    return self
end

-- ---------------------------------------------------------------- elementwise unary

-- allowed: dtypes of the kernel; float: integer inputs compute in float32
-- (out of place); id_u8, id_int: the op is the identity on uint8 (abs,
-- relu), on every integer dtype (floor, round...); u8, u8_: the op on
-- uint8, out of place and in place, from other ops.
local INT = {[I32] = true, [I64] = true, [U8] = true}
local UN = {
    neg = {SIGNED}, abs = {SIGNED, id_u8 = true}, relu = {SIGNED, id_u8 = true},
    exp = {FLOAT, float = true}, log = {FLOAT, float = true}, sqrt = {FLOAT, float = true},
    tanh = {FLOAT, float = true}, sigmoid = {FLOAT, float = true},
    sign = {SIGNED, u8 = function(t) return t:gt(0) end, u8_ = function(t) return t:copy_(t:gt(0)) end},
    square = {SIGNED, u8 = function(t) return t * t end, u8_ = function(t) return t:mul_(t) end},
    sin = {FLOAT, float = true}, cos = {FLOAT, float = true}, log1p = {FLOAT, float = true},
    expm1 = {FLOAT, float = true}, rsqrt = {FLOAT, float = true}, reciprocal = {FLOAT, float = true},
    floor = {FLOAT, id_int = true}, ceil = {FLOAT, id_int = true}, round = {FLOAT, id_int = true},
    trunc = {FLOAT, id_int = true},
    tan = {FLOAT, float = true}, asin = {FLOAT, float = true}, acos = {FLOAT, float = true},
    atan = {FLOAT, float = true}, sinh = {FLOAT, float = true}, cosh = {FLOAT, float = true},
    asinh = {FLOAT, float = true}, acosh = {FLOAT, float = true}, atanh = {FLOAT, float = true},
    erf = {FLOAT, float = true}, erfc = {FLOAT, float = true}, erfinv = {FLOAT, float = true},
}

for name, spec in pairs(UN) do
    local kid, allowed = K[name], spec[1]
    Tensor[name] = function(self)
        check_self(name, self)
        local dt = self._c.dtype
        if not allowed[dt] then
            if (spec.id_u8 and dt == U8) or (spec.id_int and INT[dt]) then return self:clone() end
            if spec.u8 and dt == U8 then return spec.u8(self) end
            if spec.float then
                return push1(kid, name, empty_like(self, DEFAULT_FLOAT, name), cast(name, self, DEFAULT_FLOAT))
            end
            fail(fmt("%s: dtype %s not supported (expected %s)", name, DT_NAME[dt], allowed_str(allowed)))
        end
        return push1(kid, name, empty_like(self, nil, name), self)
    end
    Tensor[name .. "_"] = function(self, extra)
        if extra ~= nil then extra_arg(name .. "_", "()", extra) end
        local iname = name .. "_"
        check_self(iname, self)
        local dt = self._c.dtype
        if not allowed[dt] then
            if (spec.id_u8 and dt == U8) or (spec.id_int and INT[dt]) then return self end
            if spec.u8_ and dt == U8 then return spec.u8_(self) end
            fail(fmt("%s: dtype %s not supported in place (expected %s)", iname, DT_NAME[dt], allowed_str(allowed)))
        end
        return push1(kid, iname, self, self)
    end
end

Tensor.__unm = function(a) return a:neg() end

-- ---------------------------------------------------------------- t[i]

-- Torch's indexing on the first dim: t[i] is t:select(1, i) -- a view -- and
-- on a 1-dim tensor the element's value (a wait, as item); t[i] = x fills
-- that row or element with a number, or copies a tensor (or a table) into
-- it.  i counts from 1, negative from the end.  Any other key is a field:
-- methods come from Tensor, and fields set on a tensor (autograd's) stay
-- the tensor's own.  __index is a function for this, so the REPL's
-- completion reads the methods from __methods.
local function index_row(t, i, op)
    local c = t._c
    if c.ndim == 0 then
        fail(fmt("%s: a 0-dim tensor has no rows to index (t:item() reads its value)", op))
    end
    local size = tonumber(c.shape[0])
    if not is_int(i) then fail(fmt("%s: the index must be an integer, got %s", op, show(i))) end
    local j = i < 0 and i + size + 1 or i
    if j < 1 or j > size then
        fail(fmt("%s: index %s out of range for dim 1 of size %d (shape %s; 1..%d, or -%d..-1 from the end)",
                 op, show(i), size, shape_str(t), size, size))
    end
    return Tensor.select(t, 1, j)
end

-- Torch's indexing of several dims at once, t[{k1, k2, ...}], one entry
-- per leading dim: an integer selects that index (the dim goes), {} keeps
-- the whole dim, {a, b} keeps a..b (inclusive; negative from the end) and
-- {a} keeps a alone (the dim stays, of size 1).  A view, through select and
-- narrow (so gradients flow back); with every dim given an integer, the
-- element's value.
-- Index x (entry i of the key) into a dim of the given size, checked;
-- returns it counted from 1.
local function dim_index(op, t, i, size, x, what)
    if not is_int(x) then
        fail(fmt("%s: %s for dim %d must be an integer, got %s", op, what, i,
                 type(x) == "number" and show(x) or typename(x)))
    end
    local j = x < 0 and x + size + 1 or x
    if j < 1 or j > size then
        fail(fmt("%s: index %s out of range for dim %d of size %d (shape %s; 1..%d, or -%d..-1 from the end)",
                 op, show(x), i, size, shape_str(t), size, size)) -- (%d of 2^63 printed -2^63)
    end
    return j
end

local function index_dims(t, key, op)
    local nd = t._c.ndim
    local n = #key
    for k in pairs(key) do
        if not is_int(k) or k < 1 or k > n then
            fail(fmt("%s: the index must be a list {k1, k2, ...}, got a key %s", op, show(k)))
        end
    end
    if n > nd then
        fail(fmt("%s: %d indices for a tensor of %d dims (shape %s)", op, n, nd, shape_str(t)))
    end
    local v, d, all_ints, adv = t, 1, n == nd, nil
    for i = 1, n do
        local k = key[i]
        local size = tonumber(v._c.shape[d - 1])
        if is_tensor(k) and (k._c.dtype == I64 or k._c.dtype == I32) then
            -- Torch's advanced indexing: the dim stays here, indexed after the basic entries
            device_mix(op, t, k)
            all_ints = false
            adv = adv or {}
            adv[#adv + 1] = {dim = d, idx = k, entry = i}
            d = d + 1
        elseif is_tensor(k) and k._c.dtype == U8 then
            if k._c.ndim == 0 then fail(fmt("%s: entry %d is a 0-dim mask, which indexes no dim", op, i)) end
            -- a mask of the next dims (their shape): its nonzero positions, one index tensor per dim (waits)
            device_mix(op, t, k)
            local kn = k._c.ndim
            local ok = d - 1 + kn <= v._c.ndim
            for j = 0, kn - 1 do
                if ok and tonumber(k._c.shape[j]) ~= tonumber(v._c.shape[d - 1 + j]) then ok = false end
            end
            if not ok then
                fail(fmt("%s: the mask at entry %d, of shape %s, does not match the dims it indexes (from dim %d " ..
                         "of the shape %s)", op, i, shape_str(k), d, shape_str(v)))
            end
            all_ints = false
            adv = adv or {}
            for _, ix in ipairs(k:nonzero({as_tuple = true})) do
                adv[#adv + 1] = {dim = d, idx = ix, entry = i}
                d = d + 1
            end
        elseif type(k) == "number" then
            v = Tensor.select(v, d, dim_index(op, t, i, size, k, "the index"))
        elseif type(k) == "table" and getmetatable(k) == nil then
            all_ints = false
            if k[1] ~= nil or next(k) ~= nil then
                if #k > 3 or k[1] == nil or (k[3] ~= nil and k[2] == nil) then
                    fail(fmt("%s: a range for dim %d is {} or {first} or {first, last} or {first, last, step}, " ..
                             "got a table of %d entries", op, i, #k))
                end
                local a = dim_index(op, t, i, size, k[1], "the first index")
                local b = k[2] == nil and a or dim_index(op, t, i, size, k[2], "the last index")
                if b < a then
                    fail(fmt("%s: range {%d, %d} for dim %d of size %d ends before it starts", op, k[1], k[2], i,
                             size))
                end
                local step = k[3]
                if step ~= nil and not (is_int(step) and step >= 1) then
                    fail(fmt("%s: the step of the range for dim %d must be an integer >= 1, got %s", op, i,
                             type(step) == "number" and show(step) or typename(step)))
                end
                v = Tensor.narrow(v, d, a, b - a + 1)
                -- every step-th of them (Torch's a:b:step), a view: windows of one element, step apart
                if step and step > 1 and b > a then v = Tensor.select(Tensor.unfold(v, d, 1, step), v._c.ndim + 1, 1) end
            end
            d = d + 1
        else
            fail(fmt("%s: entry %d must be an integer, a range table ({}, {a}, {a, b}), an int64 or int32 " ..
                     "tensor of indices or a uint8 mask, got %s", op, i,
                     is_tensor(k) and DT_NAME[k._c.dtype] .. " tensor" or typename(k)))
        end
    end
    return v, all_ints, adv
end

-- Torch's advanced indexing of the view v (the basic entries applied) by
-- the index tensors in adv (each {dim, idx, entry}), broadcast together
-- to B: the layout of the result, as Torch's: B first, then v's other
-- dims, unless the indexed dims are adjacent, when B takes their place.
-- Returns the permutation of v putting the indexed dims first, B, the
-- other dims' sizes, the linear index (from 1) into those dims flattened,
-- and the permutation from (B, rest) to Torch's layout (nil: none).
local function adv_layout(v, adv, op, want_lin)
    local s, k = shape_of(v), #adv
    local shapes, isadv, perm, rest = {}, {}, {}, {}
    for i, a in ipairs(adv) do
        shapes[i] = shape_of(a.idx)
        isadv[a.dim] = true
        perm[i] = a.dim
    end
    for d = 1, #s do
        if not isadv[d] then perm[#perm + 1] = d; rest[#rest + 1] = s[d] end
    end
    local B = M.broadcast_shape(op, shapes)
    -- each index checked against its own dim, named by its entry (when it
    -- runs, no wait; the index_select's dim 1 was not the user's), as int64
    local lin, stride, checked = nil, 1, {}
    for i = k, 1, -1 do
        local a = adv[i]
        local size = s[a.dim]
        local ix = M.checked_in_range(fmt("%s (entry %d)", op, a.entry), -- (a name of 31 bytes at most)
                                      a.idx:to("float64"), 1, size):to("int64")
        checked[i] = ix
        if want_lin then
            local term = (ix - 1):mul_(stride):expand(B)
            lin = lin and lin + term or term
        end
        stride = stride * size
    end
    if lin then lin = lin:reshape(-1) + 1 end
    local order = nil
    local adjacent = true
    for i = 2, k do if adv[i].dim ~= adv[i - 1].dim + 1 then adjacent = false end end
    local before = adv[1].dim - 1 -- the other dims ahead of the indexed ones
    if adjacent and before > 0 then
        local nb = #B
        order = {}
        for i = 1, before do order[#order + 1] = nb + i end
        for i = 1, nb do order[#order + 1] = i end
        for i = before + 1, #rest do order[#order + 1] = nb + i end
    end
    return perm, B, rest, lin, stride, order, checked
end

local function index_adv(v, adv, op)
    local perm, B, rest, lin, count, order = adv_layout(v, adv, op, true)
    local flat = v:permute(perm):reshape({count, unpack(rest)})
    local ok, r = pcall(flat.index_select, flat, 1, lin, op)
    if not ok then error((tostring(r):gsub("index_select: ", op .. ": ", 1)), 0) end
    local rshape = {unpack(B)}
    for _, x in ipairs(rest) do rshape[#rshape + 1] = x end
    r = r:view(rshape)
    if order then r = r:permute(order) end
    return r
end

local function index_adv_put(v, adv, x, op)
    if type(x) == "boolean" then x = x and 1 or 0 end
    if type(x) ~= "number" and not is_tensor(x) then
        fail(fmt("%s: with index tensors x must be a number or a tensor, got %s", op, typename(x)))
    end
    local perm, B, rest, _, _, order, checked = adv_layout(v, adv, op)
    if is_tensor(x) and order then
        -- x broadcasts to the read's (Torch's) layout; index_put_ takes it as (B, rest)
        local rshape = {unpack(B)}
        for _, r in ipairs(rest) do rshape[#rshape + 1] = r end
        local tshape, inv = {}, {}
        for i, o in ipairs(order) do tshape[i] = rshape[o]; inv[o] = i end
        local ok, e = pcall(x.expand, x, tshape)
        if not ok then error((tostring(e):gsub("expand: ", op .. ": ", 1)), 0) end
        x = e:permute(inv)
    end
    v:permute(perm):index_put_(checked, x, nil, op)
end

-- t[mask]'s mask, as Torch's: of t's shape (the elements) or of the shape
-- of t's leading dims (the slices along them); any other shape is refused,
-- not broadcast (a mask of a square matrix's 3 rows picked its columns).
-- Returns the number of leading dims the mask covers.
local function mask_dims(t, k, op)
    device_mix(op, t, k)
    local kn, tn = k._c.ndim, t._c.ndim
    local ok = kn <= tn and (kn >= 1 or tn == 0)
    for i = 0, kn - 1 do
        if ok and tonumber(k._c.shape[i]) ~= tonumber(t._c.shape[i]) then ok = false end
    end
    if not ok then
        fail(fmt("%s: a mask of shape %s does not match the tensor's shape %s (it must be that shape or the " ..
                 "shape of its leading dims; t:masked_select(mask) and t:masked_fill_(mask, v) broadcast it)",
                 op, shape_str(k), shape_str(t)))
    end
    return kn
end

-- Torch's transposing attributes (fields, not methods: t.T): T reverses
-- the dims (a matrix transposed; t itself below 2 dims), mT swaps the last
-- two (a batch of matrices: at least 2 dims); H and mH the same (real
-- tensors, no conjugate).  Views, with gradients.
local function reversed_dims(t)
    local nd = t._c.ndim
    if nd < 2 then return t end
    if nd == 2 then return t:t() end
    local perm = {}
    for i = 1, nd do perm[i] = nd + 1 - i end
    return t:permute(perm)
end
local function matrix_transpose(name)
    return function(t)
        if t._c.ndim < 2 then
            fail(fmt("t.%s: expected a tensor of at least 2 dims (a matrix or a batch of them), got shape %s", name,
                     shape_str(t)))
        end
        return t:transpose(-2, -1)
    end
end
local PROPERTIES = {T = reversed_dims, H = reversed_dims, mT = matrix_transpose("mT"), mH = matrix_transpose("mH")}

Tensor.__methods = Tensor
Tensor.__index = function(t, k)
    local m = Tensor[k]
    if m ~= nil then return m end
    local tk = type(k)
    if tk == "number" then
        local row = index_row(t, k, "t[i]")
        if t._c.ndim == 1 then return row:item() end
        return row
    end
    if tk == "table" and getmetatable(k) == nil then
        local v, element, adv = index_dims(t, k, "t[{...}]")
        if adv then return index_adv(v, adv, "t[{...}]") end
        if element then return v:item() end
        return v
    end
    if tk == "string" then
        local p = PROPERTIES[k]
        if p then return p(t) end
        return nil -- a field not set (t.grad before a backward)
    end
    if is_tensor(k) then
        -- t[mask]: Torch's boolean indexing, the selected elements (a copy)
        if k._c.dtype == U8 then
            local kn = mask_dims(t, k, "t[mask]")
            if kn == t._c.ndim then return t:masked_select(k) end
            -- a mask of the leading dims: the slices it selects, stacked (count, rest...)
            local s, lead = shape_of(t), 1
            for i = 1, kn do lead = lead * s[i] end
            local pos = M.arange(1, lead + 1, M.like(k, "int64")):masked_select(k:reshape(-1))
            return t:reshape({lead, unpack(s, kn + 1)}):index_select(1, pos)
        end
        -- t[index]: Torch's integer-tensor indexing of the first dim (indices from 1)
        if k._c.dtype == I64 or k._c.dtype == I32 then
            if t._c.ndim == 0 then fail("t[index]: a 0-dim tensor has no dim to index") end
            -- (named so, also when a bad index fails the result at the read)
            local ok, r = pcall(t.index_select, t, 1, k._c.ndim > 1 and k:reshape(-1) or k, "t[index]")
            if not ok then error((tostring(r):gsub("index_select: ", "t[index]: ", 1)), 0) end
            -- a 0-dim index selects one row, the dim gone, as Torch's (an int would: t[2])
            if k._c.ndim == 0 then return r:select(1, 1) end
            -- an index of several dims: the rows in its shape, as Torch's (index's shape, then t's other dims)
            if k._c.ndim > 1 then
                local s = shape_of(k)
                for i = 2, t._c.ndim do s[#s + 1] = tonumber(t._c.shape[i - 1]) end
                return r:view(s)
            end
            return r
        end
        fail("t[i]: a tensor index must be a uint8 mask (t[mask], as t:masked_select(mask)) or an " ..
             "int64 or int32 tensor of indices, got " .. DT_NAME[k._c.dtype] .. " of shape " .. shape_str(k))
    end
    fail("t[i]: the index must be an integer or a table of indices and ranges, got " .. typename(k))
end

-- Fills (a number) or copies into (a tensor or a table of values) a view.
local function assign(view, v, op)
    if type(v) == "number" or type(v) == "boolean" then
        if type(v) == "number" then check_fits(op, view._c.dtype, v) end -- (fill_ would name itself)
        -- fill_'s errors (a view of a tensor that requires a gradient) are the assignment's
        local ok, err = pcall(view.fill_, view, v)
        if not ok then error((tostring(err):gsub("fill_: ", op .. ": ", 1)), 0) end
    elseif is_tensor(v) or (type(v) == "table" and getmetatable(v) == nil) then
        if not is_tensor(v) then -- (built as copy_ builds it, so that the rule below holds for tables too)
            local c = view._c
            v = from_data(op, v, c.dtype, c.ctx.dev_type == GPU and CPU0._ctx or c.ctx, c.storage.engine)
        end
        -- leading dims of size 1 beyond the view's go, as Torch's setitem
        -- (t[i] = ordo.tensor({5}) or {5} into an element: shape 1 into a 0-dim view)
        if v._c.ndim > view._c.ndim then
            local s, k = shape_of(v), 1
            while #s - k + 1 > view._c.ndim and s[k] == 1 do k = k + 1 end
            if k > 1 then v = v:reshape({unpack(s, k)}) end
        end
        -- copy_'s errors (a shape that does not fit) are the assignment's
        local ok, err = pcall(view.copy_, view, v)
        if not ok then error((tostring(err):gsub("copy_: ", op .. ": ", 1)), 0) end
    else
        fail(fmt("%s: x must be a number, a boolean, a tensor or a table, got %s", op, typename(v)))
    end
end

Tensor.__newindex = function(t, k, v)
    if type(k) == "table" and getmetatable(k) == nil then
        local view, _, adv = index_dims(t, k, "t[{...}] = x")
        if adv then return index_adv_put(view, adv, v, "t[{...}] = x") end
        return assign(view, v, "t[{...}] = x")
    end
    if type(k) == "string" then
        -- a method's name: Torch's p.requires_grad = false set a field
        -- that hid the method and froze nothing (p still trained)
        if type(rawget(Tensor, k)) == "function" then
            if k == "requires_grad" then
                fail(fmt("t.requires_grad = %s: requires_grad is a method here; call t:requires_grad(%s) " ..
                         "(or m:requires_grad_(%s) for a module's parameters)", tostring(v), tostring(v), tostring(v)))
            end
            fail(fmt("t.%s = x: %s is a tensor method, not a field to set", k, k))
        end
        return rawset(t, k, v)
    end
    if is_tensor(k) then
        -- t[index] = v: the rows at index (Torch's integer-tensor indexing), v broadcast to them
        if k._c.dtype == I64 or k._c.dtype == I32 then
            if t._c.ndim == 0 then fail("t[index] = x: a 0-dim tensor has no dim to index") end
            if type(v) == "boolean" then v = v and 1 or 0 end
            if type(v) ~= "number" and not is_tensor(v) then
                fail("t[index] = x: x must be a number or a tensor, got " .. typename(v))
            end
            -- (named so, also when a bad index fails the write at the next read)
            -- (v broadcast to index's shape then t's other dims, as Torch's)
            t:index_put_({k}, v, nil, "t[index] = x")
            return
        end
        -- t[mask] = v: Torch's boolean index assignment of one value
        if k._c.dtype ~= U8 then
            fail("t[i] = x: a tensor index must be a uint8 mask (t[mask] = v) or an int64 or int32 " ..
                 "tensor of indices, got " .. DT_NAME[k._c.dtype] .. " of shape " .. shape_str(k))
        end
        if type(v) == "boolean" then v = v and 1 or 0 end
        if type(v) ~= "number" and not is_tensor(v) then
            fail("t[mask] = x: x must be a number or a tensor, got " .. typename(v))
        end
        local kn = mask_dims(t, k, "t[mask] = x")
        if is_tensor(v) and v:numel() ~= 1 and kn > 0 then
            -- Torch's x[mask] = values: the selected elements (or slices) in
            -- order, values broadcast to (count, rest...) (waits: the count)
            t:index_put_(k:nonzero({as_tuple = true}), v, nil, "t[mask] = x")
            return
        end
        if kn < t._c.ndim then -- a mask of the leading dims fills the slices it selects
            local s = shape_of(k)
            for i = kn + 1, t._c.ndim do s[i] = 1 end
            k = k:view(s)
        end
        local ok, err = pcall(t.masked_fill_, t, k, v)
        if not ok then error((tostring(err):gsub("masked_fill_: ", "t[mask] = x: ", 1)), 0) end
        return
    end
    if type(k) ~= "number" then
        fail("t[i] = x: the index must be an integer or a table of indices and ranges, got " .. typename(k))
    end
    assign(index_row(t, k, "t[i] = x"), v, "t[i] = x")
end

-- ---------------------------------------------------------------- where, masked_fill

local function broadcast_tbl(fname, shapes)
    local n = 0
    for _, s in ipairs(shapes) do n = max(n, #s) end
    local out = {}
    for i = 1, n do
        local size = 1
        for _, s in ipairs(shapes) do
            local j = i - (n - #s)
            local v = j >= 1 and s[j] or 1
            if v ~= 1 then
                if size ~= 1 and size ~= v then
                    local strs = {}
                    for k, sh in ipairs(shapes) do strs[k] = shape_str_tbl(sh) end
                    fail(fmt("%s: shapes %s cannot be broadcast", fname,
                             concat(strs, ", ", 1, #strs - 1) .. " and " .. strs[#strs]))
                end
                size = v
            end
        end
        out[i] = size
    end
    return out
end

-- a:div(b, "trunc") of integer tensors for the ops made of it (fmod,
-- remainder, floor_divide, derived.lua), pushed under who's name: a divisor
-- of 0 met when it runs then names the op the user called ("remainder:
-- div: integer division by zero"), not div alone.
function M.int_div_as(who, a, b)
    local rt = result_type(a, b)
    a, b = cast(who, a, rt), cast(who, b, rt)
    local out = new_on(who, a, broadcast_tbl(who, {shape_of(a), shape_of(b)}), rt)
    push(K.div, who, BCAST + NAMED, {a, b}, {out})
    return out
end

local function check_mask(fname, m, what)
    if not is_tensor(m) then fail(fmt("%s: %s must be a uint8 tensor, got %s", fname, what, typename(m))) end
    if m._c.dtype ~= U8 then
        fail(fmt("%s: %s must be a uint8 tensor (as comparisons return), got %s", fname, what, DT_NAME[m._c.dtype]))
    end
end

-- ordo.where(cond, x, y): cond ? x : y elementwise, broadcasting all three;
-- x and y may be numbers.
function M.where(cond, x, y)
    -- where(cond): Torch's nonzero(cond, as_tuple = true), a list of the
    -- positions along each dim
    if x == nil and y == nil and is_tensor(cond) then return cond:nonzero({as_tuple = true}) end
    check_mask("where", cond, "the condition")
    if not is_tensor(x) and type(x) ~= "number" then fail("where: x must be a tensor or a number, got " .. typename(x)) end
    if not is_tensor(y) and type(y) ~= "number" then fail("where: y must be a tensor or a number, got " .. typename(y)) end
    local dt
    if is_tensor(x) or is_tensor(y) then
        dt = result_type(x, y)
    else
        dt = (number_is_float(x) or number_is_float(y)) and DEFAULT_FLOAT or I64
    end
    if not is_tensor(x) then x = scalar_tensor("where", cond, x, dt) end
    if not is_tensor(y) then y = scalar_tensor("where", cond, y, dt) end
    x, y = cast("where", x, dt), cast("where", y, dt)
    local shape = broadcast_tbl("where", {shape_of(cond), shape_of(x), shape_of(y)})
    local out = new_on("where", x, shape, dt)
    push(K.where, "where", BCAST, {cond, x, y}, {out})
    return out
end

function Tensor:where(cond, y)
    check_self("where", self)
    return M.where(cond, self, y)
end

local function masked_fill(fname, self, mask, value, out)
    check_self(fname, self)
    check_mask(fname, mask, "the mask")
    if is_tensor(value) then
        if value:numel() ~= 1 then -- (item would raise, naming item)
            fail(fmt("%s: a tensor value must have one element, got shape %s", fname, shape_str(value)))
        end
        local v = exact_int64_value(self, value)
        if v then
            local r = M.where(mask, v, self)
            if out == self then return push1(K.copy, fname, self, r) end
            return r
        end
        value = value:item()
    end
    if type(value) == "boolean" then value = value and 1 or 0 end
    if type(value) ~= "number" then fail(fmt("%s: expected a number as the value, got %s", fname, typename(value))) end
    if not ISFLOAT[self._c.dtype] and number_is_float(value) and value == value then
        if out == self then
            fail(fmt("%s: value %s can't be stored in the in-place tensor's dtype %s", fname, show(value),
                     DT_NAME[self._c.dtype]))
        end
    end
    check_fits(fname, self._c.dtype, value)
    out = out or empty_like(self, nil, fname)
    push(K.masked_fill, fname, BCAST, {self, mask}, {out}, {value})
    return out
end

function Tensor:masked_fill(mask, value) return masked_fill("masked_fill", self, mask, value, nil) end
function Tensor:masked_fill_(mask, value, extra)
    if extra ~= nil then extra_arg("masked_fill_", "(mask, value)", extra) end
    return masked_fill("masked_fill_", self, mask, value, self)
end

-- ---------------------------------------------------------------- reductions

-- out has x's shape with the reduced dim(s) of size 1; keepdim keeps them.
local function reduce(fname, kid, t, dim, keepdim, out_dt, nonempty)
    check_self(fname, t)
    local shape = shape_of(t)
    local d
    if dim == nil then
        d = -1
        if nonempty and t:numel() == 0 then
            fail(fmt("%s: cannot reduce an empty tensor (shape %s) without a dim", fname, shape_str(t)))
        end
        for i = 1, #shape do shape[i] = 1 end
    else
        d = norm_dim(fname, t, dim)
        if nonempty and shape[d + 1] == 0 then
            fail(fmt("%s: cannot reduce dim %d of size 0 (shape %s)", fname, dim, shape_str(t)))
        end
        shape[d + 1] = 1
    end
    local out = new_on(fname, t, shape, out_dt or t._c.dtype)
    push(kid, fname, 0, {t}, {out}, nil, {d})
    if keepdim then return out end
    if dim == nil then return wrap(C.ordo_tensor_view(fname, out._c, 0, SHAPE)) end
    return wrap(C.ordo_tensor_squeeze(fname, out._c, d))
end

function Tensor:sum(dim, keepdim)
    check_self("sum", self)
    -- integers add in 64 bits inside the kernel, straight into an int64
    -- result: no int64 copy of the input (8 times a uint8 tensor's bytes,
    -- and every element of an expanded view)
    return reduce("sum", K.sum, self, dim, keepdim, not ISFLOAT[self._c.dtype] and I64 or nil)
end

function Tensor:mean(dim, keepdim)
    check_self("mean", self)
    local dt = self._c.dtype
    if dt == U8 or dt == I32 then
        -- summed as they are (64-bit integers, exact) into float64, then
        -- divided: a float32 copy of the input cost 4 times a uint8
        -- tensor's bytes (and every element of an expanded view).  (int64
        -- goes through float32 as before: its 64-bit sum could wrap.)
        local n = dim == nil and self:numel() or shape_of(self)[norm_dim("mean", self, dim) + 1]
        local s = reduce("mean", K.sum, self, dim, keepdim, F64)
        return cast("mean", push1(K.div_scalar, "mean", s, s, n), DEFAULT_FLOAT)
    end
    local x = ISFLOAT[dt] and self or cast("mean", self, DEFAULT_FLOAT)
    return reduce("mean", K.mean, x, dim, keepdim)
end

-- indices from 1 (int64)
local function arg_reduce(fname, kid, t, dim, keepdim)
    local idx = reduce(fname, kid, t, dim, keepdim, I64, true)
    return push1(K.add_scalar, fname, idx, idx, 1)
end

-- max(): the largest value (0-dim); max(dim [, keepdim]): values, indices.
function Tensor:max(dim, keepdim)
    check_self("max", self)
    if is_tensor(dim) then
        return binary(BIN.maximum, self, dim)
    end
    local v = reduce("max", K.max, self, dim, keepdim, nil, true)
    if dim == nil then return v end
    return v, arg_reduce("max", K.argmax, self, dim, keepdim)
end

function Tensor:min(dim, keepdim)
    check_self("min", self)
    if is_tensor(dim) then return binary(BIN.minimum, self, dim) end
    local v = reduce("min", K.min, self, dim, keepdim, nil, true)
    if dim == nil then return v end
    return v, arg_reduce("min", K.argmin, self, dim, keepdim)
end

function Tensor:argmax(dim, keepdim)
    check_self("argmax", self)
    return arg_reduce("argmax", K.argmax, self, dim, keepdim)
end

function Tensor:argmin(dim, keepdim)
    check_self("argmin", self)
    return arg_reduce("argmin", K.argmin, self, dim, keepdim)
end

-- softmax(dim): dim defaults to the last one
local function softmax(fname, kid, t, dim)
    check_self(fname, t)
    if t._c.ndim == 0 then -- one line of one element, as Torch's (dim 1 or -1 names it)
        if dim ~= nil and dim ~= 1 and dim ~= -1 then
            fail(fmt("%s: dim %s out of range for a 0-dim tensor (expected 1 or -1)", fname, show(dim)))
        end
        SHAPE[0] = 1
        local line = wrap(C.ordo_tensor_view(fname, t._c, 1, SHAPE)) -- (raw views: autograd records the op itself)
        local r = softmax(fname, kid, line, 1)
        return wrap(C.ordo_tensor_view(fname, r._c, 0, SHAPE))
    end
    local d = norm_dim(fname, t, dim or -1)
    local x = ISFLOAT[t._c.dtype] and t or cast(fname, t, DEFAULT_FLOAT)
    local out = empty_like(x, nil, fname)
    push(kid, fname, 0, {x}, {out}, nil, {d})
    return out
end

function Tensor:softmax(dim) return softmax("softmax", K.softmax, self, dim) end
function Tensor:log_softmax(dim) return softmax("log_softmax", K.log_softmax, self, dim) end

-- ---------------------------------------------------------------- along a dim: cumsum, cumprod, sort

-- The dim of an op along one dim: 0-based; a 0-dim tensor is one line.
local function line_dim(fname, t, dim)
    if t._c.ndim == 0 then return 0 end
    return norm_dim(fname, t, dim)
end

-- A running sum or product along dim (0- and 1-dim tensors need no dim);
-- integers run in int64, as sum adds (wrapping).
local function running(fname, kid, self, dim)
    check_self(fname, self)
    if dim == nil then
        if self._c.ndim > 1 then fail(fmt("%s: expected a dim for a tensor of shape %s", fname, shape_str(self))) end
        dim = 1
    end
    local d = line_dim(fname, self, dim)
    if ISFLOAT[self._c.dtype] or self._c.dtype == I64 then
        local out = empty_like(self, nil, fname)
        push(kid, fname, 0, {self}, {out}, nil, {d})
        return out
    end
    -- a narrower integer: its int64 copy is the result, run over in place
    -- (the kernel reads each element before it writes it; BCAST, of one
    -- shape, only lets the push take the very same view as in and out)
    local out = cast(fname, self, I64)
    push(kid, fname, BCAST, {out}, {out}, nil, {d})
    return out
end

-- cumsum(dim): running sums along dim; cumprod(dim): running products.
function Tensor:cumsum(dim) return running("cumsum", K.cumsum, self, dim) end
function Tensor:cumprod(dim) return running("cumprod", K.cumprod, self, dim) end

-- The gradient of y = x:cumprod(dim) given g (the gradient of y), for
-- autograd: exact where x has zeros (no division; kernels/cpu/lines.c).
function M.cumprod_backward(x, g, dim)
    local d = line_dim("cumprod", x, dim or 1)
    local gx = empty_like(x, nil, "cumprod_backward")
    push(K.cumprod_backward, "cumprod_backward", 0, {x, g}, {gx}, nil, {d})
    return gx
end

-- sort([dim] [, descending]): the values along dim (default the last) in
-- order, and int64 indices (from 1) of where they were; stable, NaN
-- counts as the largest value.
local function sort(fname, self, dim, descending)
    check_self(fname, self)
    if type(dim) == "boolean" then dim, descending = nil, dim end
    if descending ~= nil and type(descending) ~= "boolean" then
        fail(fname .. ": descending must be a boolean, got " .. typename(descending))
    end
    local d = line_dim(fname, self, dim or -1)
    local values, idx = empty_like(self, nil, fname), empty_like(self, I64, fname)
    push(K.sort, fname, 0, {self}, {values, idx}, nil, {d, descending and 1 or 0})
    return values, push1(K.add_scalar, fname, idx, idx, 1)
end

function Tensor:sort(dim, descending) return sort("sort", self, dim, descending) end

-- argsort: sort's indices (no gradient), its errors named argsort
function Tensor:argsort(dim, descending, extra)
    if extra ~= nil then extra_arg("argsort", "(dim, descending)", extra) end
    local _, idx = sort("argsort", self, dim, descending)
    return idx
end

-- topk(k [, dim [, largest]]): the k largest (largest = false: smallest)
-- values along dim (default the last), in order, and their indices.
function Tensor:topk(k, dim, largest, extra)
    if extra ~= nil then extra_arg("topk", "(k, dim, largest)", extra) end
    check_self("topk", self)
    if largest == nil then largest = true end
    if type(largest) ~= "boolean" then fail("topk: largest must be a boolean, got " .. typename(largest)) end
    local d = line_dim("topk", self, dim or -1)
    local n = self._c.ndim == 0 and 1 or tonumber(self._c.shape[d])
    if not is_int(k) or k < 0 or k > n then
        fail(fmt("topk: k must be an integer in 0..%d (dim %d of shape %s), got %s", n, d + 1, shape_str(self),
                 show(k)))
    end
    -- on the CPU, k up to half the line: the topk kernel's selection (n log
    -- k, sort's order exactly) instead of a whole sort and its n indices;
    -- the values are read back through gather when a gradient may flow
    -- (gather's gradient is sort's: g at the indices)
    if self._c.ndim > 0 and k * 2 <= n and self._c.ctx.dev_type ~= GPU then
        local shape = shape_of(self)
        shape[d + 1] = k
        local values, idx = new_on("topk", self, shape, self._c.dtype), new_on("topk", self, shape, I64)
        push(K.topk, "topk", 0, {self}, {values, idx}, nil, {d, k, largest and 1 or 0})
        push1(K.add_scalar, "topk", idx, idx, 1)
        if self._rg then values = self:gather(d + 1, idx) end
        return values, idx
    end
    local values, idx = self:sort(dim or -1, largest)
    if self._c.ndim == 0 or k == n then return values, idx end
    -- contiguous, as Torch's: the first k of each sorted line would be a
    -- strided view that :view refuses
    return values:narrow(d + 1, 1, k):contiguous(), idx:narrow(d + 1, 1, k):contiguous()
end

-- The element at place k (from 1) of sort's ascending order along dim d
-- (1-based) and its index, x's shape with 1 along d, by the CPU's
-- selection kernel (O(n) a line; nil on a GPU, which sorts instead).
-- median: a line holding NaN gives its last NaN, the median's rule.  The
-- values are read back through gather when a gradient may flow.
function M.select_place(x, d, k, median)
    if x._c.ctx.dev_type == GPU or x._c.ndim == 0 then return nil end
    local shape = shape_of(x)
    shape[d] = 1
    local values, idx = new_on("kthvalue", x, shape, x._c.dtype), new_on("kthvalue", x, shape, I64)
    push(K.kthvalue, "kthvalue", 0, {x}, {values, idx}, nil, {d - 1, k - 1, median and 1 or 0})
    push1(K.add_scalar, "kthvalue", idx, idx, 1)
    if x._rg then values = x:gather(d, idx) end
    return values, idx
end

-- ---------------------------------------------------------------- matmul

-- 1-D, 2-D and batched 3-D operands (a 2-D operand broadcasts over the batch).
function M.matmul(a, b)
    if not is_tensor(a) or not is_tensor(b) then
        fail(fmt("matmul: expected two tensors, got %s and %s", typename(a), typename(b)))
    end
    local na, nb = a._c.ndim, b._c.ndim
    if na == 0 or nb == 0 then
        fail(fmt("matmul: expected tensors with at least 1 dim, got shapes %s and %s", shape_str(a), shape_str(b)))
    end
    if na > 3 or nb > 3 then -- (ordo.matmul takes more: autograd's wrapper makes them 3-D first)
        fail(fmt("matmul: the kernel takes 1-D, 2-D or 3-D tensors, got shapes %s and %s", shape_str(a), shape_str(b)))
    end
    local dt = promote(a._c.dtype, b._c.dtype)
    a, b = cast("matmul", a, dt), cast("matmul", b, dt)
    local sa, sb = shape_of(a), shape_of(b)
    local ka = sa[#sa]
    local kb = nb == 1 and sb[1] or sb[#sb - 1]
    if ka ~= kb then
        fail(fmt("matmul: shapes %s and %s cannot be multiplied (inner dimensions %d and %d differ)",
                 shape_str_tbl(sa), shape_str_tbl(sb), ka, kb))
    end
    local A, B = a, b
    if na == 1 then A = a:view({1, ka}) end
    if nb == 1 then B = b:view({kb, 1}) end
    local ma, mb = A._c.ndim, B._c.ndim
    local out_shape
    if ma == 2 and mb == 2 then
        out_shape = {tonumber(A._c.shape[0]), tonumber(B._c.shape[1])}
    else
        local ba = ma == 3 and tonumber(A._c.shape[0]) or 1
        local bb = mb == 3 and tonumber(B._c.shape[0]) or 1
        if ba ~= bb and ba ~= 1 and bb ~= 1 then
            fail(fmt("matmul: batch sizes %d and %d differ (shapes %s and %s)", ba, bb, shape_str_tbl(sa),
                     shape_str_tbl(sb)))
        end
        local bsz = ba == 1 and bb or ba -- a batch of 1 broadcasts, to 0 too (max would give 1)
        local M_, K_, N_ = tonumber(A._c.shape[ma - 2]), ka, tonumber(B._c.shape[mb - 1])
        if ma == 2 or ba ~= bsz then A = A:expand({bsz, M_, K_}) end
        if mb == 2 or bb ~= bsz then B = B:expand({bsz, K_, N_}) end
        out_shape = {bsz, M_, N_}
    end
    local out = new_on("matmul", a, out_shape, dt)
    push(K.matmul, "matmul", 0, {A, B}, {out})
    -- drop the dims added for 1-D operands
    if na == 1 and nb == 1 then return wrap(C.ordo_tensor_view("matmul", out._c, 0, SHAPE)) end
    if na == 1 then return out:squeeze(#out_shape - 1) end
    if nb == 1 then return out:squeeze(#out_shape) end
    return out
end

function Tensor:matmul(u)
    check_self("matmul", self)
    return M.matmul(self, u)
end

-- ---------------------------------------------------------------- indexing

-- index (int64/int32/uint8 tensor or a table of numbers, from 1) -> int64 from 0
-- Every number of a (nested) table of indices is an integer: from_data
-- would truncate 1.5 to 1 and pick a row the user did not name.
local function check_int_entries(fname, list)
    for i = 1, #list do
        local v = list[i]
        if type(v) == "table" and getmetatable(v) == nil then
            check_int_entries(fname, v)
        elseif type(v) == "number" and not is_int(v) then
            fail(fmt("%s: index %s is not an integer", fname, show(v)))
        end
    end
end

local function index_arg(fname, like, index)
    if type(index) == "number" then index = {index} end
    if type(index) == "table" and getmetatable(index) == nil then
        check_int_entries(fname, index)
        local c = like._c
        index = from_data(fname, index, I64, result_ctx(c.ctx), c.storage.engine)
    end
    if not is_tensor(index) then fail(fmt("%s: index must be an integer tensor, got %s", fname, typename(index))) end
    if ISFLOAT[index._c.dtype] then
        fail(fmt("%s: index must be an integer tensor (int64 or int32), got %s", fname, DT_NAME[index._c.dtype]))
    end
    -- a uint8 index is most likely a mask (t:gt(0)), whose 1s would all
    -- pick the first slice without a word: refused, as Torch does
    if index._c.dtype == U8 then
        fail(fmt("%s: index must be an int64 or int32 tensor of indices, got uint8 (a mask? masked_select, "
                 .. "masked_fill or where take masks; :long() makes indices of it)", fname))
    end
    -- as they are: the kernels take indices from 1 (iparam 1 = 1) and name
    -- a bad one as the user wrote it
    return cast(fname, index, I64)
end

-- The internal name (who) that gather, index_select, the scatters and
-- index_put_ take after their own arguments: a user's extra argument there
-- was taken as one, Torch's scatter_(dim, index, src, "add") silently
-- ignoring its reduce (the last source won, not the sum), a number or a
-- table failing inside the FFI.
local REDUCE = {add = true, multiply = true, sum = true, prod = true, mean = true, amax = true, amin = true}
local function check_who(fname, who)
    if who == nil then return end
    if REDUCE[who] or (type(who) == "table" and getmetatable(who) == nil and who.reduce ~= nil) then
        fail(fmt("%s: Torch's reduce argument is not supported (%s; for \"add\" use scatter_add)", fname,
                 type(who) == "string" and fmt("got %q", who) or "got {reduce = ...}"))
    end
    if type(who) ~= "string" then
        fail(fmt("%s: unexpected extra argument %s", fname, type(who) == "table" and typename(who) or show(who)))
    end
end
M.check_who = check_who

-- gather(dim, index): out[i][j] = self[index[i][j]][j] (dim 1), indices from 1.
-- who (internal): the op a gather serves (cross_entropy), which then names
-- an index found out of range when the kernel runs.
function Tensor:gather(dim, index, who)
    check_self("gather", self)
    check_who("gather", who)
    local d = norm_dim("gather", self, dim)
    if not is_tensor(index) then fail("gather: index must be an int64 or int32 tensor, got " .. typename(index)) end
    if index._c.ndim ~= self._c.ndim then
        fail(fmt("gather: index has %d dims (shape %s), expected %d like the input (shape %s)", index._c.ndim,
                 shape_str(index), self._c.ndim, shape_str(self)))
    end
    local si, sx = shape_of(index), shape_of(self)
    for i = 1, #si do
        if i ~= d + 1 and si[i] > sx[i] then
            fail(fmt("gather: index shape %s exceeds the input's shape %s in dim %d", shape_str_tbl(si),
                     shape_str_tbl(sx), i))
        end
    end
    local idx = index_arg("gather", self, index)
    local out = new_on("gather", self, si, self._c.dtype)
    push(K.gather, who or "gather", who and NAMED or 0, {self, idx}, {out}, nil, {d, 1})
    return out
end

-- index_select(dim, index): the slices of dim at index (1-D, from 1).
-- who (internal): as gather's (Embedding), naming a bad index the kernel
-- meets.
function Tensor:index_select(dim, index, who)
    check_self("index_select", self)
    check_who("index_select", who)
    local d = norm_dim("index_select", self, dim)
    local idx = index_arg("index_select", self, index)
    if idx._c.ndim > 1 then
        fail(fmt("index_select: index must be 1-D, got shape %s", shape_str(idx)))
    end
    if idx._c.ndim == 0 then idx = idx:view({1}) end
    local shape = shape_of(self)
    shape[d + 1] = idx:numel()
    local out = new_on("index_select", self, shape, self._c.dtype)
    push(K.index_select, who or "index_select", who and NAMED or 0, {self, idx}, {out}, nil, {d, 1})
    return out
end

-- src is cast to self's dtype, as an in-place op's operand, and a float src
-- into an integer tensor is refused as they refuse a float result (it was
-- truncated: 1 + 2.5 gave 3).
local function check_src_dtype(fname, self, src)
    if not can_cast(src._c.dtype, self._c.dtype) then
        fail(fmt("%s: src is %s but the tensor is %s (its fractions would be dropped; convert one of them with " ..
                 ":to() first)", fname, DT_NAME[src._c.dtype], DT_NAME[self._c.dtype]))
    end
end
M.check_src_dtype = check_src_dtype

-- The rule of the scatter kernels, checked here so that the error comes at
-- the call (the kernel's comes at the next wait): index as many dims as
-- out and src, no longer than src in any dim, nor than out but along dim d
-- (from 0).
local function check_scatter_shapes(fname, self, d, idx, src)
    local ic, sc, yc = idx._c, src._c, self._c
    local ok = ic.ndim == yc.ndim and sc.ndim == yc.ndim
    for k = 0, yc.ndim - 1 do
        if not ok then break end
        if ic.shape[k] > sc.shape[k] or (k ~= d and ic.shape[k] > yc.shape[k]) then ok = false end
    end
    if not ok then
        fail(fmt("%s: shape mismatch: src %s, index %s, out %s (index needs out's dims, no longer than src in "
                 .. "any dim, nor than out except along dim %d)", fname, shape_str(src), shape_str(idx),
                 shape_str(self), d + 1))
    end
end

-- scatter_add_(dim, index, src): self[..index[..i..]..] += src[..i..] along
-- dim (gather's adjoint; repeated indices add up), indices from 1.  who
-- (internal): as gather's, for gather's gradient.
local function scatter_add(fname, self, dim, index, src, who)
    local d = norm_dim(fname, self, dim)
    if not is_tensor(index) then fail(fname .. ": index must be an int64 or int32 tensor, got " .. typename(index)) end
    if not is_tensor(src) then fail(fname .. ": src must be a tensor, got " .. typename(src)) end
    local idx = index_arg(fname, self, index)
    check_scatter_shapes(who or fname, self, d, idx, src)
    check_src_dtype(who or fname, self, src)
    if src._c.dtype ~= self._c.dtype then src = cast(fname, src, self._c.dtype) end
    push(K.scatter_add, who or fname, who and NAMED or 0, {src, idx}, {self}, nil, {d, 1})
    return self
end

function Tensor:scatter_add_(dim, index, src, who)
    check_self("scatter_add_", self)
    check_who("scatter_add_", who)
    return scatter_add("scatter_add_", self, dim, index, src, who)
end

function Tensor:scatter_add(dim, index, src, who)
    check_self("scatter_add", self)
    check_who("scatter_add", who)
    return scatter_add("scatter_add", self:clone(), dim, index, src, who)
end

-- scatter_(dim, index, src): self[..index[..i..]..] = src[..i..] along dim
-- (indices from 1, as gather's); src may be a number.  One kernel writing
-- into self (no temporaries of self's size).  Of an index given twice the
-- last in row-major order wins on the CPU; on a GPU which one is
-- unspecified (as Torch's).  Errors name "scatter" for both forms.  who
-- (internal): as gather's, the op a scatter serves (index_copy, index_put_,
-- max_unpool2d), which then names an index found out of range when the
-- kernel runs ("index_copy: scatter: index 3 out of range ...").
local function scatter(self, dim, index, src, who)
    local fname = "scatter"
    if not is_tensor(index) then fail("scatter: index must be an int64 or int32 tensor, got " .. typename(index)) end
    local idt = index._c.dtype
    if idt ~= I64 and idt ~= I32 then
        fail(fmt("scatter: index must be an int64 or int32 tensor of indices, got %s", DT_NAME[idt]))
    end
    local d = norm_dim(fname, self, dim)
    if type(src) == "number" then
        check_fits(fname, self._c.dtype, src)
        -- one element, expanded over the index (stride 0): no index-sized copy
        local one = push1(K.fill, fname, new_on(fname, self, {}, self._c.dtype), nil, src)
        src = one:expand(shape_of(index))
    end
    if not is_tensor(src) then fail("scatter: src must be a tensor or a number, got " .. typename(src)) end
    local idx = index_arg(fname, self, index)
    check_scatter_shapes(fname, self, d, idx, src)
    check_src_dtype(fname, self, src)
    if src._c.dtype ~= self._c.dtype then src = cast(fname, src, self._c.dtype) end
    push(K.scatter, who or fname, who and NAMED or 0, {src, idx}, {self}, nil, {d, 1})
    return self
end

function Tensor:scatter_(dim, index, src, who)
    check_self("scatter_", self)
    check_who("scatter_", who)
    return scatter(self, dim, index, src, who)
end

-- scatter(dim, index, src): a copy of self with scatter_'s writes
function Tensor:scatter(dim, index, src, who)
    check_self("scatter", self)
    check_who("scatter", who)
    return scatter(self:clone(), dim, index, src, who)
end

-- Torch's alpha of index_add (a number or {alpha = n}, after src): src
-- scaled by it (src itself for 1). The 4th argument of index_add was taken
-- as the internal op name, and alpha failed inside the FFI.
function M.index_add_alpha(fname, src, alpha)
    if type(alpha) == "table" and getmetatable(alpha) == nil then alpha = alpha.alpha end
    if type(alpha) ~= "number" then
        fail(fmt("%s: alpha must be a number (or {alpha = n}), got %s", fname, typename(alpha)))
    end
    if not is_tensor(src) or alpha == 1 then return src end
    if not FLOAT[src._c.dtype] and not is_int(alpha) then
        fail(fmt("%s: alpha %s for an integer src must be an integer, as Torch's", fname, show(alpha)))
    end
    return src * alpha
end

-- index_add_(dim, index, src [, alpha]): self[.., index[j], ..] += alpha *
-- src[.., j, ..] (index_select's adjoint), index 1-D from 1.
local function index_add(fname, self, dim, index, src, who)
    if who ~= nil and type(who) ~= "string" then src, who = M.index_add_alpha(fname, src, who), nil end
    local d = norm_dim(fname, self, dim)
    if not is_tensor(src) then fail(fname .. ": src must be a tensor, got " .. typename(src)) end
    local idx = index_arg(fname, self, index)
    if idx._c.ndim > 1 then fail(fmt("%s: index must be 1-D, got shape %s", fname, shape_str(idx))) end
    if idx._c.ndim == 0 then idx = idx:view({1}) end
    -- the kernel's rule, checked at the call: src is out's shape with
    -- dim d as long as the index
    local sc, yc = src._c, self._c
    local ok = sc.ndim == yc.ndim
    for k = 0, yc.ndim - 1 do
        if not ok then break end
        if sc.shape[k] ~= (k == d and idx._c.shape[0] or yc.shape[k]) then ok = false end
    end
    if not ok then
        fail(fmt("%s: shape mismatch: src %s, index %s, out %s (src must be out's shape with dim %d as long as "
                 .. "the index)", fname, shape_str(src), shape_str(idx), shape_str(self), d + 1))
    end
    check_src_dtype(fname, self, src)
    if src._c.dtype ~= self._c.dtype then src = cast(fname, src, self._c.dtype) end
    push(K.index_add, who or fname, who and NAMED or 0, {src, idx}, {self}, nil, {d, 1})
    return self
end

-- who (internal): the op the failure is named after, as scatter_add_'s
function Tensor:index_add_(dim, index, src, who, extra)
    if extra ~= nil then extra_arg("index_add_", "(dim, index, src, alpha)", extra) end
    check_self("index_add_", self)
    return index_add("index_add_", self, dim, index, src, who)
end

function Tensor:index_add(dim, index, src, who, extra)
    if extra ~= nil then extra_arg("index_add", "(dim, index, src, alpha)", extra) end
    check_self("index_add", self)
    return index_add("index_add", self:clone(), dim, index, src, who)
end

-- ---------------------------------------------------------------- cat, stack

-- Checks that list (a plain table) is a list of tensors 1..#list: a hole
-- ({a, nil, b}) or a named key would otherwise drop tensors unseen.
local function check_tensor_list(fname, list)
    if type(list) ~= "table" or getmetatable(list) ~= nil or #list == 0 then
        fail(fmt("%s: expected a non-empty list of tensors, got %s", fname, typename(list)))
    end
    local n = #list
    for i = 1, n do
        local t = list[i]
        if not is_tensor(t) then fail(fmt("%s: element %d is %s, expected a tensor", fname, i, typename(t))) end
    end
    -- a hole: # may stop before it (no pairs here: LuaJIT would not compile a loop of cats)
    if list[n + 2] ~= nil or list[n + 3] ~= nil or list[n + 4] ~= nil or list[n + 5] ~= nil then
        fail(fmt("%s: element %d is nil, expected a tensor", fname, n + 1))
    end
end

function M.cat(list, dim)
    check_tensor_list("cat", list)
    local first = list[1]
    local nd = first._c.ndim
    if nd == 0 then fail("cat: zero-dimensional tensors cannot be concatenated (use stack)") end
    local d = norm_dim("cat", first, dim or 1)
    local shape = shape_of(first)
    local dt = first._c.dtype
    local total = 0
    for i, t in ipairs(list) do
        local s = shape_of(t)
        if #s ~= nd then
            fail(fmt("cat: tensor %d has %d dims (shape %s), expected %d like tensor 1 (shape %s)", i, #s,
                     shape_str_tbl(s), nd, shape_str_tbl(shape)))
        end
        for j = 1, nd do
            if j ~= d + 1 and s[j] ~= shape[j] then
                fail(fmt("cat: shapes %s and %s differ in dim %d (only dim %d may differ)", shape_str_tbl(shape),
                         shape_str_tbl(s), j, d + 1))
            end
        end
        total = total + s[d + 1]
        dt = promote(dt, t._c.dtype)
    end
    shape[d + 1] = total
    local out = new_on("cat", first, shape, dt)
    local off = 0
    for _, t in ipairs(list) do
        local n = tonumber(t._c.shape[d])
        if n > 0 then
            local v = C.ordo_tensor_narrow("cat", out._c, d, off, n)
            if v == nil then fail_c() end
            local rc = C.ordo_tensor_op1(K.copy, "cat", v, t._c, 0)
            C.ordo_tensor_free(v)
            if rc ~= 0 then fail_c() end
        end
        off = off + n
    end
    return out
end

-- stack's checks (also autograd's stack, which stacks through unsqueeze and
-- cat: their errors would name them); returns the new dim, from 1.
function M.stack_check(list, dim)
    check_tensor_list("stack", list)
    local first = list[1]
    check_devices_list("stack", list)
    if first._c.ndim >= 8 then
        fail(fmt("stack: tensors of shape %s: the result would have %d dims (at most 8 supported)",
                 shape_str(first), first._c.ndim + 1))
    end
    local d = norm_dim("stack", first, dim or 1, 1) + 1
    local s0 = shape_str_tbl(shape_of(first))
    for i = 2, #list do
        local s = shape_str_tbl(shape_of(list[i]))
        if s ~= s0 then fail(fmt("stack: tensor %d has shape %s, expected %s like tensor 1", i, s, s0)) end
    end
    return d
end

function M.stack(list, dim)
    local d = M.stack_check(list, dim)
    local parts = {}
    for i, t in ipairs(list) do parts[i] = t:unsqueeze(d) end
    return M.cat(parts, d)
end

-- ---------------------------------------------------------------- GPU memory

local STATS_FIELDS = {"allocated_bytes", "reserved_bytes", "peak_allocated_bytes", "peak_reserved_bytes",
                      "num_device_allocs", "num_device_frees", "cache_hits", "cache_misses", "oom_retries"}
local stats_buf = ffi.new("ordo_gpu_memory_stats")

-- dev: nil (gpu(0)), a device id, ordo.gpu(n) or "gpu:n" -> the id
local function gpu_id(fname, dev)
    if dev == nil then dev = 0 end
    if type(dev) == "number" then
        if dev ~= floor(dev) or dev < 0 then
            fail(fmt("%s: expected a GPU (ordo.gpu(n) or a device id >= 0), got %s", fname, show(dev)))
        end
        local count = C.ordo_gpu_count()
        if count == 0 then
            fail(fmt("%s: gpu(%d): no CUDA device available%s", fname, dev, util.no_gpu_reason()))
        end
        if dev >= count then
            fail(fmt("%s: gpu(%d) does not exist (%d CUDA device%s)", fname, dev, count, count > 1 and "s" or ""))
        end
        dev = util.gpu(dev)
    end
    local d = util.parse_device(fname, dev)
    if not d or d.dev_type ~= GPU then
        fail(fmt("%s: expected a GPU (ordo.gpu(n) or a device id), got %s", fname,
                 d and show(d) or typename(dev)))
    end
    return d.id
end

-- ordo.cuda.memory_stats([dev]): the caching allocator's counters for a
-- GPU (src/ordo_tensor.h, ordo_gpu_memory_stats) as a table of numbers.
function M.cuda_memory_stats(dev, extra)
    if extra ~= nil then extra_arg("cuda.memory_stats", "(dev)", extra) end
    local id = gpu_id("memory_stats", dev)
    if C.ordo_gpu_get_memory_stats(id, stats_buf) ~= 0 then fail("memory_stats: " .. ffi.string(C.ordo_tensor_error())) end
    local r = {}
    for _, k in ipairs(STATS_FIELDS) do r[k] = tonumber(stats_buf[k]) end
    return r
end

-- ordo.cuda.empty_cache([dev]): the allocator's cached blocks go back to
-- the device (after the work still pending on them); live tensors keep theirs.
function M.cuda_empty_cache(dev, extra)
    if extra ~= nil then extra_arg("cuda.empty_cache", "(dev)", extra) end
    local id = gpu_id("empty_cache", dev)
    if C.ordo_gpu_empty_cache(id) ~= 0 then fail("empty_cache: " .. ffi.string(C.ordo_tensor_error())) end
end

-- t:cuda([dev]): t:to(ordo.gpu(n)), as Torch's (dev = ordo.gpu(n) or n,
-- default gpu(0)); t itself when it is there.  (t:cpu() is t:to(cpu(0)).)
function Tensor:cuda(dev, extra)
    if extra ~= nil then extra_arg("cuda", "(dev)", extra) end
    check_self("cuda", self)
    return self:to(util.gpu(gpu_id("cuda", dev)))
end
M.gpu_id = gpu_id -- (fname, dev): the id of a GPU given as ordo.gpu(n) or n (default 0), or raises

-- ---------------------------------------------------------------- misc

M.Tensor = Tensor
M.DT_NAME = DT_NAME
M.parse_dtype = parse_dtype

-- An op's optional dtype argument (a name, or {dtype = name}) as a dtype's
-- name, nil for none; float: it must be a float dtype.
function M.opt_dtype(name, dtype, float)
    if type(dtype) == "table" and getmetatable(dtype) == nil then
        dtype = util.check_opts(name, dtype, {dtype = true}).dtype
        if dtype == nil then return nil end
    end
    local dt = DT_NAME[parse_dtype(name, dtype)]
    if float and not dt:match("^float") then
        fail(fmt("%s: dtype must be float32 or float64, got %s", name, dt))
    end
    return dt
end
M.shape_of = shape_of
M.broadcast_shape = broadcast_tbl -- (fname, {shape, ...}): the shape they broadcast to, or raises naming fname
M.norm_dim = norm_dim
M.shape_str_of = shape_str -- a tensor's shape as text ("2x3")

-- Raises "fname: what must be a tensor, got ..." unless x is a tensor.
function M.check_tensor(fname, what, x)
    if not is_tensor(x) then fail(fmt("%s: %s must be a tensor, got %s", fname, what, typename(x))) end
end

-- Raises "fname: input must be float32 or float64, got int64" unless x
-- (a layer's input; what: how it is named) has a float dtype.
function M.check_float(fname, what, x)
    local dt = DT_NAME[x._c.dtype]
    if not FLOAT[x._c.dtype] then fail(fmt("%s: %s must be float32 or float64, got %s", fname, what, dt)) end
end

-- Raises "fname: input is float64 but weight is float32 (convert one with
-- :to())" unless t (nil: none given) has x's dtype: a layer's input and
-- its parameters or buffers, which Torch's layers refuse to mix (mixed,
-- the ops would promote: the output in the input's dtype, the parameters'
-- gradients in theirs; an integer input came out float32).  xwhat: how x
-- is named (default "input").
function M.check_same_dtype(fname, x, what, t, xwhat)
    if t ~= nil and t._c.dtype ~= x._c.dtype then
        local xdt, tdt = DT_NAME[x._c.dtype], DT_NAME[t._c.dtype]
        -- (an integer input to float parameters: only the input can be converted)
        local hint = (FLOAT[t._c.dtype] and not FLOAT[x._c.dtype]) and fmt("convert the %s with :to(\"%s\")",
                                                                            xwhat or "input", tdt)
            or "convert one with :to()"
        fail(fmt("%s: %s is %s but %s is %s (%s)", fname, xwhat or "input", xdt, what, tdt, hint))
    end
end

-- Options for a new tensor beside t: t's device and engine, dtype dt (a
-- name) or t's.  (Options naming only t's device would make it on the
-- default engine, which ops then refuse to mix with t's.)
function M.like(t, dt)
    return {dtype = dt or DT_NAME[t._c.dtype], device = t:device(), engine = engine.of_pointer(t._c.storage.engine)}
end
-- for the modules that build ops on this one (derived.lua)
M.is_int, M.check_self = is_int, check_self
M.check_fits = check_fits -- (fname, dtype code, value [, why]): raises unless value, truncated, fits an integer dtype
M.check_devices, M.check_devices_list = check_devices, check_devices_list
M.push = push
M.new_on = new_on

return M
