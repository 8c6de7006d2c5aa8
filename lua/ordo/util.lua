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
-- functions such as pcall), so "file:line:" names the user's call; with no
-- such frame (a value the REPL prints) the message goes without a position.
local function fail(msg)
    local level = 2
    while true do
        local info = getinfo(level, "S")
        if not info then
            level = 0
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

-- The results of pcall(f, ...) passed on, or its error under fname: an op
-- made of others names itself when one of them fails at the call (out of
-- memory above all): "repeat_interleave: clone: out of memory ...", not
-- "clone: ...".  The message keeps the caller's position; one already
-- naming fname is left alone.  (Call it as own_errors(fname, pcall(f,
-- ...)): no closure.)
function M.own_errors(fname, ok, ...)
    if ok then return ... end
    local msg = tostring((...))
    local at, rest = msg:match("^(.-:%d+: )(.*)$")
    if not at then at, rest = "", msg end
    if rest:sub(1, #fname + 2) ~= fname .. ": " then msg = at .. fname .. ": " .. rest end
    error(msg, 0)
end

-- Raises the message of the last failed C tensor call.
function M.fail_c()
    fail(ffi.string(C.ordo_tensor_error()))
end

-- ---------------------------------------------------------------- host access

-- The host address of element 0 of tensor t (an ordo.Tensor or a raw
-- ordo_tensor *), for the few places that read or write tensor bytes from
-- Lua.  GPU memory cannot be touched by the host (the simulated GPU's can,
-- which would hide the mistake), so those callers copy through a CPU tensor
-- first; this guard makes sure none of them forgets.
local GPU = cdef.GPU
function M.host_ptr(t)
    local c = type(t) == "table" and t._c or t
    if c.ctx.dev_type == GPU then
        error(("internal: host access to a gpu tensor (gpu(%d)): copy it to the cpu first"):format(c.ctx.dev_id), 2)
    end
    return C.ordo_tensor_data(c)
end

-- A string quoted as the REPL shows it inside a table (repl.lua's quote,
-- which cannot load this module): %q, a newline written \n.
local function quote(s) return (string.format("%q", s):gsub("\\\n", "\\n")) end
M.quote = quote

-- A value as an error message shows it: a tensor by its type and shape
-- (tostring would wait for its values and print every one of them into
-- the message), a string quoted (the string "1" is not the number 1),
-- anything else as tostring gives it.
function M.show(v)
    if type(v) == "string" then return quote(v) end
    local mt = type(v) == "table" and getmetatable(v)
    if mt and mt.__name == "ordo.Tensor" then
        local s = v:shape()
        return "a tensor of shape " .. (#s == 0 and "scalar" or table.concat(s, "x"))
    end
    local s = tostring(v)
    -- a value that prints over several lines (a module: its whole tree went
    -- into the message, "view: size Sequential\n  (1): Linear...") by its type
    if mt and s:find("\n", 1, true) then return M.typename(v) end
    return s
end

-- A further positional argument that fname does not take (x:exp(3),
-- x:transpose(1, 2, 3), x:clamp(0, 1, 2), ordo.cat({x, x}, 1, 5)): it was
-- dropped unseen, where Torch raises a TypeError, and a Torch habit in that
-- place (an alpha, an out=) gave another result without a word.  params:
-- fname's parameters as the message names them, "(dim0, dim1)" ("()" for
-- none).  Called as `if extra ~= nil then extra_arg(...) end` after a
-- function's own parameters: nothing on the hot path but that test.
function M.extra_arg(fname, params, v)
    fail(string.format("%s: takes %s, got a further argument %s", fname,
                       params == "()" and "no arguments" or params,
                       type(v) == "table" and getmetatable(v) == nil and "(a table)" or M.show(v)))
end
local extra_arg = M.extra_arg

-- A handle on one entry of a list of hooks (a tensor's register_hook, a
-- module's forward hooks, as Torch's RemovableHandle): handle:remove()
-- takes the entry off; again, it does nothing.
local HookHandle = {}
HookHandle.__index = HookHandle
function HookHandle:remove(extra)
    if extra ~= nil then extra_arg("remove", "()", extra) end
    local hooks = self._hooks
    for i = #hooks, 1, -1 do
        if hooks[i] == self._entry then
            table.remove(hooks, i)
            break
        end
    end
end
function M.hook_handle(hooks, entry) return setmetatable({_hooks = hooks, _entry = entry}, HookHandle) end

-- Raises unless the table t (what: "the shape", "the dims"...) is a list
-- 1..#t: a nil among its entries ({2, nil, 3}: # may stop at the hole)
-- would otherwise drop the entries after it unseen, and a shape {batch,
-- hidden} with hidden nil would make a tensor of another shape.  Made for
-- the hot paths (zeros, view, permute, cat...): no pairs, which LuaJIT does
-- not compile (a user's loop through it would stay in the interpreter), so
-- it looks for entries up to 8 places past the border # found; strict
-- (non-hot callers) also refuses any other key (a name: {2, x = 3}).
function M.check_list(fname, what, t, strict)
    if type(t) ~= "table" or getmetatable(t) ~= nil then -- (a tensor's fields are no entries)
        fail(("%s: %s must be a plain table (a list), got %s"):format(fname, what, M.typename(t)))
    end
    local n = #t
    -- (unrolled: a loop here kept LuaJIT from compiling a user's loop of zeros; the entries 1..n, which #
    -- may also reach past a hole, are checked by the callers, each as it reads them)
    if t[n + 2] ~= nil or t[n + 3] ~= nil or t[n + 4] ~= nil or t[n + 5] ~= nil or t[n + 6] ~= nil or
       t[n + 7] ~= nil or t[n + 8] ~= nil or t[n + 9] ~= nil then
        fail(("%s: entry %d of %s is nil"):format(fname, n + 1, what))
    end
    if strict then
        for i = 1, n do
            if t[i] == nil then fail(("%s: entry %d of %s is nil"):format(fname, i, what)) end
        end
        for k in pairs(t) do
            if not (type(k) == "number" and k >= 1 and k <= n and k == math.floor(k)) then
                fail(("%s: %s has the key %s beside its entries 1..%d (a nil in the list, or a name)"):format(
                    fname, what, tostring(k), n))
            end
        end
    end
end

-- An options table (nil: none), checked: a plain table, and when allowed
-- (a set of names) is given, no key outside it.
function M.check_opts(fname, opts, allowed)
    if opts == nil then return {} end
    if type(opts) ~= "table" or getmetatable(opts) ~= nil then
        fail(("%s: options must be a table, got %s"):format(fname, M.typename(opts)))
    end
    if allowed then
        for k in pairs(opts) do
            if not allowed[k] then
                local names = {}
                for n in pairs(allowed) do names[#names + 1] = n end
                table.sort(names)
                fail(("%s: unknown option '%s' (expected %s)"):format(fname, tostring(k), table.concat(names, ", ")))
            end
        end
    end
    return opts
end

-- Whether v is a finite integral number (math.floor alone lets inf and
-- -inf through, and a size or a count of inf becomes an endless loop).
local function is_int(v) return type(v) == "number" and v == math.floor(v) and v > -math.huge and v < math.huge end
M.is_int = is_int

-- Raises unless v is an integer >= 1 (a size, a count).
function M.check_positive_int(fname, what, v)
    if type(v) ~= "number" or v < 1 or not is_int(v) then
        fail(("%s: %s must be a positive integer, got %s"):format(fname, what, tostring(v)))
    end
end

-- The tensor options a module's parameters are made with, from the
-- module's own options (the default dtype unless it says otherwise). A dtype that is
-- not a float one is refused naming the module (owner: the module being
-- made), not the init function that would meet it ("uniform_: dtype ...").
local FLOAT_DTYPES = {float32 = true, float64 = true, float = true, double = true, f32 = true, f64 = true}
function M.param_opts(opts, owner)
    local dt = opts.dtype
    if dt ~= nil and not FLOAT_DTYPES[dt] then
        local who = type(owner) == "table" and owner._class_name or "module"
        M.fail(("%s: option dtype must be \"float32\" or \"float64\" (parameters need gradients), got %s"):format(
            who, type(dt) == "string" and ("%q"):format(dt) or M.typename(dt)))
    end
    return {dtype = dt, device = opts.device} -- (nil: the default dtype, ordo.get_default_dtype())
end

function M.typename(x)
    local t = type(x)
    if t == "table" or t == "userdata" then -- (a loader or dataset is a userdata: it said "userdata")
        local mt = getmetatable(x)
        if type(mt) == "table" and type(mt.__name) == "string" then return mt.__name end
    end
    return t
end

-- ---------------------------------------------------------------- interruptible waits

-- Under the ordo launcher (src/launcher/main.c), Ctrl-C must be able to stop
-- a wait, but a wait blocks inside C where Lua's interrupt hook never runs.
-- So there every wait first pushes a marker op that reads the var (a
-- launcher function that posts a semaphore; ASYNC: it runs in the thread
-- that finished the var's last write, NO_SKIP: it runs after a failure
-- too) and sleeps on the semaphore, which Ctrl-C posts as well; on Ctrl-C
-- it raises "interrupted" and leaves the marker and the ops before it to
-- finish in the background.  Once the marker ran, the real wait returns at
-- once and reports the failure if there is one.  Plain luajit: nil, and
-- waits go straight to C.
--
-- wait_ready(engine, var): returns once var's earlier writes are done
-- (var nil: once nothing is pending on the engine), or raises "interrupted".
local host = package.loaded["ordo.launcher"]
if host and host.token_mark then
    -- the launcher's functions, called through the FFI so that loops
    -- waiting on tensors stay compiled
    local mark = ffi.cast("ordo_sync_fn", host.token_mark)
    local token_new = ffi.cast("void *(*)(void)", host.token_new)
    local token_wait = ffi.cast("int (*)(void *)", host.token_wait)
    local token_release = ffi.cast("void (*)(void *)", host.token_release)
    local ctx = ffi.new("ordo_ctx", cdef.CPU, 0)
    local vars = ffi.new("ordo_var *[1]")
    local prop = cdef.PROP_ASYNC + cdef.PROP_NO_SKIP
    local sleep, min = host.sleep, math.min

    function M.wait_ready(e, v)
        -- nothing pending on the engine: the wait in C returns at once
        if C.ordo_engine_pending(e) == 0 then return end
        if v == nil then
            local dt = 1e-4
            while C.ordo_engine_pending(e) > 0 do
                if not sleep(dt) then fail("interrupted") end
                dt = min(dt * 2, 0.01)
            end
            return
        end
        local tok = token_new()
        if tok == nil then return end -- out of memory: wait in C
        vars[0] = v
        if C.ordo_push_sync(e, mark, tok, token_release, ctx, vars, 1, nil, 0, prop, 0, "launcher_wait") ~= 0 then
            -- a deleted var, say: the real wait reports it
            token_release(tok)
            token_release(tok)
            return
        end
        local done = token_wait(tok)
        token_release(tok)
        if done == 0 then fail("interrupted") end
    end
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
    if not is_int(n) or n < 0 or n >= 64 then
        fail(("%s: device id must be an integer in 0..63, got %s"):format(fname, tostring(n)))
    end
    return n
end

function M.cpu(n, extra)
    if extra ~= nil then extra_arg("cpu", "(n)", extra) end
    return device("cpu", cdef.CPU, check_id("cpu", n))
end

-- Why there is no GPU, when a bad ORDO_SIMULATED_GPUS is the reason: a
-- valid nonzero value would have given simulated devices (src/device.c);
-- the engine's creation names the variable the same way.
function M.no_gpu_reason()
    local v = os.getenv("ORDO_SIMULATED_GPUS")
    if v == nil or v == "" or (v:match("^%d+$") and tonumber(v) == 0) then return "" end
    return (" (ORDO_SIMULATED_GPUS=%s: expected an integer from 0 to 16)"):format(v)
end

function M.gpu(n, extra)
    if extra ~= nil then extra_arg("gpu", "(n)", extra) end
    n = check_id("gpu", n)
    local count = C.ordo_gpu_count()
    if count == 0 then fail(("gpu(%d): no CUDA device available%s"):format(n, M.no_gpu_reason())) end
    if n >= count then
        fail(("gpu(%d) does not exist (%d CUDA device%s)"):format(n, count, count > 1 and "s" or ""))
    end
    return device("gpu", cdef.GPU, n)
end

-- Page-locked host memory beside cpu(n): tensors there are CPU tensors
-- (their ops run on cpu(n)) whose copies to and from a GPU run
-- asynchronously, on the GPU's copy streams.  Needs a CUDA device.
function M.cpu_pinned(n, extra)
    if extra ~= nil then extra_arg("cpu_pinned", "(n)", extra) end
    n = check_id("cpu_pinned", n)
    if C.ordo_gpu_count() == 0 then
        fail(("cpu_pinned(%d): pinned memory needs a CUDA device (none available)%s"):format(n, M.no_gpu_reason()))
    end
    return device("cpu_pinned", cdef.CPU_PINNED, n)
end

function M.is_device(x) return getmetatable(x) == Device end

-- Whether two ctxs read from descriptors are one device for ops: a
-- pinned tensor runs on cpu(n), as the tensor layer's check has it.
function M.same_device_ctx(a, b)
    local ta, tb = a.dev_type, b.dev_type
    if ta == cdef.CPU_PINNED then ta = cdef.CPU end
    if tb == cdef.CPU_PINNED then tb = cdef.CPU end
    return ta == tb and a.dev_id == b.dev_id
end

-- The device of a ctx read from a descriptor.
function M.device_of_ctx(ctx)
    local t, id = ctx.dev_type, ctx.dev_id
    if t == cdef.GPU then return device("gpu", t, id) end
    if t == cdef.CPU_PINNED then return device("cpu_pinned", t, id) end
    return device("cpu", cdef.CPU, id)
end

-- A device from a Device, "cpu", "cpu:1", "cpu(1)", "cpu_pinned", "gpu", "gpu:0", "cuda:0"; nil if x is
-- none of them.
function M.parse_device(fname, x)
    if getmetatable(x) == Device then return x end
    if type(x) ~= "string" then return nil end
    -- exactly "kind", "kind:N" or "kind(N)" ("cpu1" or "cpu(1" were taken as cpu(1))
    local kind, id = x:match("^([%a_]+)$"), ""
    if not kind then kind, id = x:match("^([%a_]+):(%d+)$") end
    if not kind then kind, id = x:match("^([%a_]+)%((%d+)%)$") end
    if not kind then return nil end
    id = id ~= "" and tonumber(id) or 0
    if kind == "cpu" then return M.cpu(id) end
    if kind == "cpu_pinned" then
        -- named after the call, as gpu(n) below (it said only "cpu_pinned(0): ...")
        if C.ordo_gpu_count() == 0 then
            fail(("%s: cpu_pinned(%d): pinned memory needs a CUDA device (none available)%s"):format(fname, id,
                                                                                                 M.no_gpu_reason()))
        end
        return M.cpu_pinned(id)
    end
    if kind == "gpu" or kind == "cuda" then
        local count = C.ordo_gpu_count()
        -- named gpu(n) whatever the spelling ("cuda:0" too), as everywhere else
        if count == 0 then fail(("%s: gpu(%d): no CUDA device available%s"):format(fname, id, M.no_gpu_reason())) end
        return M.gpu(id)
    end
    return nil
end

return M
