-- ordo.engine: the dependency engine from Lua.
--
--   local engine = require "ordo.engine"      -- also ordo.engine
--   engine.wait_for_all()                     -- the default (process-wide) engine
--   engine.kind(), engine.config()            -- "perdevice", {cpu_workers = 2, ...}
--   local v = engine.new_variable()           -- a bare var (ffi.gc deletes it)
--   engine.wait_for_var(t_or_v)               -- raises the op failure it meets
--   engine.push("add", {a, b}, {c})           -- a registered kernel on tensors
--   engine.shell("cc -c a.c", {reads = {src}, writes = {obj}, name = "a.o"})
--                                             -- a shell command as an async op
--   engine.set_bulk_size(16)                  -- small ops go to the engine 16 at a time
--                                             -- (this thread; 0 = off; ORDO_BULK_SIZE)
--   engine.flush()                            -- hand this thread's collected ops over now
--   local e = engine.new{kind = "naive"}      -- another engine (same methods)
--   local t = ordo.zeros({4}, {engine = e})   -- tensors on it; ops follow their inputs
--
-- Lua never runs on worker threads: pushes carry native kernels only, and a
-- wait blocks the calling Lua thread inside C.
local cdef = require "ordo.cdef"
local util = require "ordo.util"
local extra_arg = util.extra_arg -- a further positional argument: an error naming it
local ffi, C = cdef.ffi, cdef.C
local fail = util.fail
local is_int = util.is_int

local M = {}

local Engine = {__name = "ordo.Engine"}
Engine.__index = Engine
M.Engine = Engine

local Var = {__name = "ordo.Var"}
Var.__index = Var
M.Var = Var

local INT_MAX = 2^31 - 1 -- the config's fields are C ints
local KINDS = {naive = 1, pooled = 2, perdevice = 3, per_device = 3}
local CFG_FIELDS = {"kind", "cpu_workers", "cpu_priority_workers", "gpu_workers", "gpu_copy_workers",
                    "max_inflight", "spin_us", "profiler_autostart", "push_inline_after",
                    "bulk_op_max_ns", "run_now_max_elements"}

local function last_error() return util.op_message(ffi.string(C.ordo_last_error())) end

local default
local function default_engine()
    if not default then
        local e = C.ordo_engine_default()
        if e == nil then fail("ordo.engine: cannot start the default engine: " .. last_error()) end
        default = setmetatable({_e = e, _default = true}, Engine)
    end
    return default
end
M.default = default_engine

-- The default engine, or nil when it cannot start (a bad ORDO_* setting,
-- reported to whatever needed it): for a caller that only needs it if it
-- runs, as the REPL's wait at exit -- nothing is pending on an engine that
-- never started.  (Tensors made without an engine start it from C, so
-- whether it was ever asked for is not known here.)
function M.default_if_running()
    if not default and C.ordo_engine_default() == nil then return nil end
    return default_engine()
end

local function is_engine(x) return getmetatable(x) == Engine end
M.is_engine = is_engine

-- The engine an ordo_engine pointer is (a tensor's), as the handle the
-- options {engine = } take; it does not own the engine.
function M.of_pointer(p)
    local d = default_engine()
    if p == d._e then return d end
    return setmetatable({_e = p}, Engine)
end

-- An engine method called with a dot (n.kind(), n.push(...)) gets no
-- engine as self: say so rather than index nil.
local function check_self(fname, e)
    if not is_engine(e) then
        local m = fname:match("[%w_]+$")
        fail(("%s: expected an engine as self, got %s (call it as e:%s(...))"):format(fname, util.typename(e), m))
    end
end

local function live(fname, e)
    check_self(fname, e)
    if e._closed then fail(fname .. ": the engine was closed") end
    return e._e
end

-- An engine lives until its handle is closed (by close(), or by the GC
-- once dropped) and its last tensor is collected; the GC sees only small
-- handles and tensors, not the engine's threads (workers and their stacks):
-- a loop that made engines and dropped them, or closed them with a small
-- tensor left for the GC, piled up hundreds of threads (and GBs of stack
-- address space) before a collection came.  So a new engine runs a
-- collection first once the live engines have doubled since the last one
-- (16 at least).
local collect_at = 16

-- engine.new{kind = "pooled", cpu_workers = 2, ...}: a zero/absent field
-- takes the environment's value (ORDO_*), then the built-in default.
function M.new(cfg, extra)
    if extra ~= nil then extra_arg("engine.new", "(config)", extra) end
    cfg = cfg or {}
    if type(cfg) ~= "table" then fail("engine.new: expected a table of settings, got " .. util.typename(cfg)) end
    local c = ffi.new("ordo_engine_config")
    local known = {}
    for _, k in ipairs(CFG_FIELDS) do known[k] = true end
    for k, v in pairs(cfg) do
        if not known[k] then
            fail(("engine.new: unknown setting '%s' (expected one of %s)"):format(tostring(k), table.concat(CFG_FIELDS, ", ")))
        end
        if k == "kind" then
            if KINDS[v] then v = KINDS[v] end
            if v ~= 1 and v ~= 2 and v ~= 3 then
                fail("engine.new: kind must be \"naive\", \"pooled\" or \"perdevice\", got " .. tostring(v))
            end
        elseif k == "profiler_autostart" and type(v) == "boolean" then
            v = v and 1 or 0
        elseif k == "push_inline_after" or k == "bulk_op_max_ns" or k == "run_now_max_elements" then
            -- negative: never / always bulked / never (ordo.h)
            if not is_int(v) or math.abs(v) > INT_MAX then
                fail(("engine.new: %s must be an integer, got %s"):format(k, tostring(v)))
            end
        elseif not is_int(v) or v < 0 or v > INT_MAX then
            fail(("engine.new: %s must be an integer >= 0, got %s"):format(k, tostring(v)))
        end
        c[k] = v
    end
    if C.ordo_tensor_engines_live() >= collect_at then
        collectgarbage("collect")
        collect_at = math.max(16, 2 * C.ordo_tensor_engines_live())
    end
    local e = C.ordo_tensor_engine_create(c)
    if e == nil then fail(ffi.string(C.ordo_tensor_error())) end
    -- Shared with the finalizers of the engine's bare vars: when Lua shuts
    -- down (lua_close) every finalizer runs, in no set order, so a var's may
    -- come after the engine's; the engine may then be gone, and it deleted
    -- its vars itself (rule 11).  (A table of its own, not the handle: a
    -- finalizer that referenced its own cdata's owner would keep it alive.)
    local state = {closed = false}
    return setmetatable({_e = ffi.gc(e, function(p)
        state.closed = true
        M.run_close_hooks(p)
        C.ordo_tensor_engine_close(p)
    end), _state = state}, Engine)
end

-- Functions called with an engine pointer when its handle closes (the
-- tensor module drops the random generators it keeps on that engine, so
-- the engine can go once the user's tensors do).
local close_hooks = {}
function M.on_close(fn) close_hooks[#close_hooks + 1] = fn end
function M.run_close_hooks(p)
    for _, fn in ipairs(close_hooks) do fn(p) end
end
function M.key(p) return tonumber(ffi.cast("uintptr_t", p)) end

-- Closes the handle; the engine finishes its ops and is destroyed once no
-- tensor on it is left.
function Engine:close()
    check_self("engine:close", self)
    if self._default then fail("engine:close: the default engine cannot be closed") end
    if not self._closed then
        self._closed = true
        self._state.closed = true
        local e = self._e
        ffi.gc(e, nil)
        M.run_close_hooks(e)
        C.ordo_tensor_engine_close(e)
    end
end

-- (fname: the method the user called, for its errors: e:kind() of a
-- closed engine said "engine:config: the engine was closed")
local function config_of(fname, self)
    local c = ffi.new("ordo_engine_config")
    C.ordo_engine_get_config(live(fname, self), c)
    local t = {}
    for _, k in ipairs(CFG_FIELDS) do t[k] = c[k] end
    t.kind = ffi.string(C.ordo_engine_kind_name(c.kind))
    return t
end

function Engine:config(extra)
    if extra ~= nil then extra_arg("engine:config", "()", extra) end
    return config_of("engine:config", self)
end
function Engine:kind(extra)
    if extra ~= nil then extra_arg("engine:kind", "()", extra) end
    return config_of("engine:kind", self).kind
end
function Engine:cpu_workers(extra)
    if extra ~= nil then extra_arg("engine:cpu_workers", "()", extra) end
    return config_of("engine:cpu_workers", self).cpu_workers
end
function Engine:gpu_workers(extra)
    if extra ~= nil then extra_arg("engine:gpu_workers", "()", extra) end
    return config_of("engine:gpu_workers", self).gpu_workers
end
function Engine:pending(extra)
    if extra ~= nil then extra_arg("engine:pending", "()", extra) end
    return tonumber(C.ordo_engine_pending(live("engine:pending", self)))
end

-- set under the ordo launcher: Ctrl-C can stop a wait (lua/ordo/util.lua)
local wait_ready = util.wait_ready

function Engine:wait_for_all(extra)
    if extra ~= nil then extra_arg("engine:wait_for_all", "()", extra) end
    local e = live("wait_for_all", self)
    if wait_ready then wait_ready(e, nil) end
    if C.ordo_wait_for_all(e) ~= 0 then fail(last_error()) end
end

Engine.__tostring = function(e)
    if e._closed then return "ordo.Engine(closed)" end
    local c = e:config()
    return ("ordo.Engine(%s, %d cpu workers%s)"):format(c.kind, c.cpu_workers, e._default and ", default" or "")
end

-- ---------------------------------------------------------------- variables

function Engine:new_variable(extra)
    if extra ~= nil then extra_arg("engine:new_variable", "()", extra) end
    local e = live("new_variable", self)
    local v = C.ordo_new_variable(e)
    if v == nil then fail("new_variable: " .. last_error()) end
    local ctx = ffi.new("ordo_ctx", cdef.CPU, 0)
    local keep = self -- the engine handle outlives its vars (but see engine.new)
    local state = self._state -- nil for the default engine, which outlives Lua
    return setmetatable({_v = ffi.gc(v, function(p)
        if not (state and state.closed) then C.ordo_delete_variable(keep._e, nil, nil, ctx, p) end
    end), _engine = self}, Var)
end

-- (a var goes with its engine: once the engine is closed it may be freed,
-- so nothing reads it then)
function Var:version()
    live("var:version", self._engine)
    return tonumber(C.ordo_var_version(self._v))
end
Var.__tostring = function(v)
    if v._engine._closed then return "ordo.Var(engine closed)" end
    return ("ordo.Var(version %d)"):format(v:version())
end

-- The (engine pointer, var) a wait is about: a Var or a Tensor.
local function var_of(fname, x)
    if getmetatable(x) == Var then return live(fname, x._engine), x._v end
    if type(x) == "table" and x._c ~= nil and type(x._c) == "cdata" then
        local s = x._c.storage
        return s.engine, s.var
    end
    fail(("%s: expected a tensor or an engine variable, got %s"):format(fname, util.typename(x)))
end

function Engine:wait_for_var(x)
    check_self("wait_for_var", self)
    local e, v = var_of("wait_for_var", x)
    if wait_ready then wait_ready(e, v) end
    if C.ordo_wait_for_var(e, v) ~= 0 then fail(last_error()) end
end

-- (interruptible until the writes are done; the readers after them are not waited for in slices)
function Engine:wait_to_write(x)
    check_self("wait_to_write", self)
    local e, v = var_of("wait_to_write", x)
    if wait_ready then wait_ready(e, v) end
    if C.ordo_wait_to_write(e, v) ~= 0 then fail(last_error()) end
end

-- ---------------------------------------------------------------- kernels

-- engine.push(name, inputs, outputs, scalars, iparams [, opts]): pushes the
-- registered kernel `name` (KERNELS.md) with tensors as its views.  iparams
-- go to the kernel as they are (dims count from 0 there).  opts.broadcast:
-- broadcast the inputs to outputs[1]'s shape (elementwise kernels).
local TENSOR_PTRS = ffi.typeof("ordo_tensor *[?]")
local DOUBLES = ffi.typeof("double[?]")
local INT64S = ffi.typeof("int64_t[?]")

local function tensors_arg(fname, what, list, max)
    if list == nil then return nil, 0 end
    if type(list) ~= "table" or getmetatable(list) ~= nil then
        fail(("%s: %s must be a list of tensors, got %s"):format(fname, what, util.typename(list)))
    end
    local n = #list
    if n > max then fail(("%s: at most %d %s, got %d"):format(fname, max, what, n)) end
    local arr = TENSOR_PTRS(math.max(n, 1))
    for i = 1, n do
        local t = list[i]
        if type(t) ~= "table" or type(t._c) ~= "cdata" then
            fail(("%s: %s[%d] is not a tensor (%s)"):format(fname, what, i, util.typename(t)))
        end
        arr[i - 1] = t._c
    end
    return arr, n, list
end

-- (integers: iparams, which the kernel takes as int64_t; a fraction or a
-- number past 2^53 would be cut or undefined in the conversion)
local INT_EXACT = 2^53
local function numbers_arg(fname, what, list, max, ctype, integers)
    if list == nil then return nil, 0 end
    if type(list) == "number" then list = {list} end
    if type(list) ~= "table" then fail(("%s: %s must be a list of numbers"):format(fname, what)) end
    local n = #list
    if n > max then fail(("%s: at most %d %s, got %d"):format(fname, max, what, n)) end
    local arr = ctype(math.max(n, 1))
    for i = 1, n do
        if type(list[i]) ~= "number" then
            fail(("%s: %s[%d] is not a number (%s)"):format(fname, what, i, util.typename(list[i])))
        end
        if integers and (not is_int(list[i]) or math.abs(list[i]) > INT_EXACT) then
            fail(("%s: %s[%d] must be an integer from -2^53 to 2^53, got %s"):format(fname, what, i, tostring(list[i])))
        end
        arr[i - 1] = list[i]
    end
    return arr, n
end

local PUSH_OPTS = {broadcast = true}

-- Whether the registry has a kernel named name for any device.
local function registered(name)
    return C.ordo_kernel_lookup(name, cdef.CPU) ~= nil or C.ordo_kernel_lookup(name, cdef.GPU) ~= nil
end

function Engine:push(name, inputs, outputs, scalars, iparams, opts)
    local fname = "push"
    local e = live(fname, self)
    if type(name) ~= "string" then fail("push: expected a kernel name, got " .. util.typename(name)) end
    -- a name no device has a kernel for is refused before it is interned:
    -- the table of kernel ids is small and never shrinks
    if not registered(name) then fail(("push: no kernel '%s' registered (for cpu or gpu)"):format(name)) end
    local kid = C.ordo_tensor_kernel_id(name)
    if kid < 0 then fail("push: " .. ffi.string(C.ordo_tensor_error())) end
    local ins, nin, il = tensors_arg(fname, "inputs", inputs, 4)
    local outs, nout, ol = tensors_arg(fname, "outputs", outputs, 2)
    if nin + nout == 0 then fail("push: " .. name .. ": expected at least one tensor") end
    local sc, ns = numbers_arg(fname, "scalars", scalars, 4, DOUBLES)
    local ip, ni = numbers_arg(fname, "iparams", iparams, 8, INT64S, true)
    if opts ~= nil then
        if type(opts) ~= "table" then
            fail("push: opts must be a table ({broadcast = true}), got " .. util.typename(opts))
        end
        for k in pairs(opts) do
            if not PUSH_OPTS[k] then fail(("push: unknown option '%s' (expected broadcast)"):format(tostring(k))) end
        end
    end
    for _, list in ipairs({il or {}, ol or {}}) do
        for _, t in ipairs(list) do
            if t._c.storage.engine ~= e then fail("push: " .. name .. ": a tensor belongs to another engine") end
        end
    end
    local flags = (opts and opts.broadcast) and cdef.TP_BROADCAST or 0
    if C.ordo_tensor_push(kid, name, flags, ins, nin, outs, nout, sc, ns, ip, ni) ~= 0 then
        fail(ffi.string(C.ordo_tensor_error()))
    end
    return outputs and outputs[1]
end

-- 1 if the registry has kernel `name` for "cpu" (default) or "gpu".
function M.has_kernel(name, device)
    if type(name) ~= "string" then fail("has_kernel: expected a kernel name, got " .. util.typename(name)) end
    if device ~= nil and device ~= "cpu" and device ~= "gpu" then
        fail(("has_kernel: device must be \"cpu\" or \"gpu\", got %s"):format(util.typename(device) == "string" and ("%q"):format(device) or util.typename(device)))
    end
    if not registered(name) then return false end -- asked without interning the name (a 512-id table)
    local kid = C.ordo_tensor_kernel_id(name)
    if kid < 0 then return false end
    return C.ordo_tensor_kernel_available(kid, device == "gpu" and cdef.GPU or cdef.CPU) ~= 0
end
-- (the registry is the process's: every engine has the same kernels)
function Engine:has_kernel(name, device)
    check_self("has_kernel", self)
    return M.has_kernel(name, device)
end

-- ---------------------------------------------------------------- shell commands

-- engine.shell(cmd, {reads = {...}, writes = {...}, name = "link"}): runs
-- `/bin/sh -c cmd` as an async op that reads and writes the given vars
-- (engine variables or tensors), so commands are ordered like any other op
-- (a Makefile-like graph: a var per file, see examples/build_graph.lua).
-- Returns at once.  The command runs in a child process started from C and
-- waited for by a reaper thread: it holds no worker, and independent
-- commands run in parallel.  A nonzero exit status fails the op: dependent
-- ops are skipped, and the wait that meets the failure raises "name:
-- command failed with exit status N: cmd" (once).  stdout and stderr are
-- the process's own.
local VAR_PTRS = ffi.typeof("ordo_var *[?]")

local function vars_arg(fname, e, what, list)
    if list == nil then return nil, 0 end
    if type(list) ~= "table" or getmetatable(list) ~= nil then
        fail(("%s: %s must be a list of engine variables or tensors, got %s"):format(fname, what, util.typename(list)))
    end
    local n = #list
    local arr = VAR_PTRS(math.max(n, 1))
    for i = 1, n do
        local x = list[i]
        local ep, v
        if getmetatable(x) == Var then
            ep, v = live(fname, x._engine), x._v
        elseif type(x) == "table" and type(x._c) == "cdata" then
            ep, v = x._c.storage.engine, x._c.storage.var
        else
            fail(("%s: %s[%d] is not an engine variable or a tensor (%s)"):format(fname, what, i, util.typename(x)))
        end
        if ep ~= e then fail(("%s: %s[%d] belongs to another engine"):format(fname, what, i)) end
        arr[i - 1] = v
    end
    return arr, n
end

local SHELL_OPTS = {reads = true, writes = true, name = true}

function Engine:shell(cmd, opts)
    local fname = "shell"
    local e = live(fname, self)
    if type(cmd) ~= "string" then fail("shell: expected a command string, got " .. util.typename(cmd)) end
    opts = opts or {}
    if type(opts) ~= "table" then fail("shell: expected a table of options, got " .. util.typename(opts)) end
    for k in pairs(opts) do
        if not SHELL_OPTS[k] then
            fail(("shell: unknown option '%s' (expected reads, writes or name)"):format(tostring(k)))
        end
    end
    if opts.name ~= nil and type(opts.name) ~= "string" then
        fail("shell: name must be a string, got " .. util.typename(opts.name))
    end
    -- C takes both up to their first NUL: the rest would be dropped unseen
    for _, x in ipairs({{"the command", cmd}, {"the name", opts.name}}) do
        local at = x[2] and x[2]:find("\0", 1, true)
        if at then fail(("shell: %s holds a NUL byte (at byte %d); C would drop what follows it"):format(x[1], at)) end
    end
    local reads, nr = vars_arg(fname, e, "reads", opts.reads)
    local writes, nw = vars_arg(fname, e, "writes", opts.writes)
    if C.ordo_push_shell(e, cmd, reads, nr, writes, nw, opts.name) ~= 0 then
        fail("shell: " .. ffi.string(C.ordo_last_error()))
    end
end

-- Commands started by shell() (any engine) that have not exited yet.
function M.shell_running() return tonumber(C.ordo_shell_running()) end

-- ---------------------------------------------------------------- bulking

-- Small CPU ops pushed from this Lua thread (under 16,384 elements over
-- all their operands) are handed to the engine in bulks of up to n ops: one
-- push and one hand-off to a worker per bulk (src/bulk.c).  Nothing else
-- changes for this thread: every wait, print, read, larger op or delete
-- hands the bulk over first, and a failing op in a bulk fails (and skips)
-- exactly what it would alone.  0 turns it off; the default is
-- ORDO_BULK_SIZE, else 16.  Returns the previous size.
local BULK_MAX = 64
function M.set_bulk_size(n, extra)
    if extra ~= nil then extra_arg("engine.set_bulk_size", "(n)", extra) end
    if not is_int(n) or n < 0 or n > BULK_MAX then
        fail(("engine.set_bulk_size: expected an integer from 0 (off) to %d, got %s"):format(BULK_MAX, tostring(n)))
    end
    return tonumber(C.ordo_set_bulk_size(n))
end
function M.bulk_size(extra)
    if extra ~= nil then extra_arg("engine.bulk_size", "()", extra) end
    return tonumber(C.ordo_get_bulk_size())
end
-- Hands this thread's collected ops to the engine now (other threads, say
-- a C library sharing the tensors, see them from then on).
function M.flush(extra)
    if extra ~= nil then extra_arg("engine.flush", "()", extra) end
    if C.ordo_bulk_flush() ~= 0 then fail("engine.flush: " .. last_error()) end
end

do
    local env = os.getenv("ORDO_BULK_SIZE")
    local n = 16
    if env and env ~= "" then
        n = tonumber(env)
        if not n or not is_int(n) or n < 0 or n > BULK_MAX then
            fail(("ORDO_BULK_SIZE=%s: expected an integer from 0 (off) to %d"):format(env, BULK_MAX))
        end
    end
    C.ordo_set_bulk_size(n)
end

-- ---------------------------------------------------------------- module level = default engine

for _, k in ipairs({"config", "kind", "cpu_workers", "gpu_workers", "pending", "wait_for_all", "new_variable"}) do
    M[k] = function(...) return Engine[k](default_engine(), ...) end
end
-- waits follow the engine of what they wait for
function M.wait_for_var(x, extra)
    if extra ~= nil then extra_arg("engine.wait_for_var", "(x)", extra) end
    return Engine.wait_for_var(default_engine(), x)
end
function M.wait_to_write(x, extra)
    if extra ~= nil then extra_arg("engine.wait_to_write", "(x)", extra) end
    return Engine.wait_to_write(default_engine(), x)
end
-- shell follows the engine of its first var (the default one without vars)
function M.shell(cmd, opts, extra)
    if extra ~= nil then extra_arg("engine.shell", "(cmd, opts)", extra) end
    local e = default_engine()
    local first = type(opts) == "table" and ((type(opts.reads) == "table" and opts.reads[1]) or
                                             (type(opts.writes) == "table" and opts.writes[1]))
    if getmetatable(first) == Var then
        e = first._engine
    elseif type(first) == "table" and type(first._c) == "cdata" and first._c.storage.engine ~= e._e then
        e = setmetatable({_e = first._c.storage.engine}, Engine)
    end
    return Engine.shell(e, cmd, opts)
end
function M.push(name, inputs, outputs, scalars, iparams, opts)
    local e = default_engine()
    local first = (type(outputs) == "table" and outputs[1]) or (type(inputs) == "table" and inputs[1])
    if type(first) == "table" and type(first._c) == "cdata" then
        local ep = first._c.storage.engine
        if ep ~= e._e then e = {_e = ep} setmetatable(e, Engine) end
    end
    return Engine.push(e, name, inputs, outputs, scalars, iparams, opts)
end

return M
