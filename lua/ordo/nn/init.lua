-- ordo.nn: modules with parameters, built on ordo.autograd.
--
--   local nn = ordo.nn
--   local model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
--   local loss = nn.CrossEntropyLoss()(model(x), y)
--   loss:backward()                     -- fills p.grad for p in model:parameters()
--
-- A module is a Lua object whose class comes from nn.Module:extend(name).
-- Its tensors live in its own fields (self.weight), named in registration
-- order so that parameters(), state_dict() and save files are stable.
-- m(x) calls m:forward(x).  Modules start in training mode; eval() switches
-- Dropout and BatchNorm to inference behaviour.
local util = require "ordo.util"
local extra_arg = util.extra_arg -- a further positional argument: an error naming it
local tensor = require "ordo.tensor"
local autograd = require "ordo.autograd"
local F = require "ordo.nn.functional"
local serialize = require "ordo.serialize"

local fail, typename = util.fail, util.typename
local is_int = util.is_int
local is_tensor, shape_of = tensor.is_tensor, tensor.shape_of
local fmt, concat = string.format, table.concat
local setmetatable, getmetatable, type, ipairs, pairs, tostring, select, next, rawget, rawset =
    setmetatable, getmetatable, type, ipairs, pairs, tostring, select, next, rawget, rawset

local M = {}
M.functional = F

local shape_str = tensor.shape_str_of
local check_tensor = tensor.check_tensor

-- ---------------------------------------------------------------- Module

local Module = {__name = "nn.Module"}
Module.__index = Module
M.Module = Module
-- (an instance's training is its _training, read through __index; this
-- one, the default, is where the REPL's completion finds the name)
Module.training = true

-- m(x, extra) on a module whose forward takes one input raises, as
-- Torch's TypeError, instead of dropping extra unseen.  The inputs a
-- forward takes are its parameters less self (debug.getinfo, once per
-- function: the cache keeps the call a table lookup); a vararg forward
-- (a user's forward(self, ...)) takes any number.  Trailing nils are no
-- inputs (m(x, opts.mask) with no mask is m(x)).
local ARITY = setmetatable({}, {__mode = "k"})

local function arity_of(f)
    local a = math.huge
    if type(f) == "function" then
        local info = debug.getinfo(f, "u")
        if info and info.nparams and not info.isvararg then a = info.nparams > 0 and info.nparams - 1 or 0 end
    end
    ARITY[f] = a
    return a
end

local function too_many(self, a, n, ...)
    while n > a and select(n, ...) == nil do n = n - 1 end
    if n > a then
        fail(fmt("%s: forward takes %d input%s, got %d", self._class_name or "Module", a, a == 1 and "" or "s", n))
    end
end

-- The same for the arguments a class takes (its init's parameters less
-- self): nn.ELU(1, true) (Torch's inplace) or nn.Linear(2, 3, {}, x)
-- dropped the extra one unseen, where Torch raises a TypeError.
local function too_many_args(cls, a, n, ...)
    while n > a and select(n, ...) == nil do n = n - 1 end
    if n > a then
        fail(fmt("%s: takes %d argument%s, got %d", cls._class_name or "Module", a, a == 1 and "" or "s", n))
    end
end

-- Forward hooks (Torch's register_forward_pre_hook / register_forward_hook):
-- lists of {fn} in the module's raw fields _fwd_pre_hooks / _fwd_hooks,
-- run in the order registered, the lists copied first (a hook that removes
-- itself skips none).  pre: fn(m, inputs) (inputs a list {n =, ...});
-- nothing keeps the inputs, a tensor replaces them by that one input, a
-- list by its entries.  post: fn(m, inputs, out1, out2...) (forward's
-- results); values it returns replace them.
local function hooked_call(self, ...)
    local args = {n = select("#", ...), ...}
    local name = self._class_name or "Module"
    local pre = rawget(self, "_fwd_pre_hooks")
    if pre and #pre > 0 then
        local list = {unpack(pre)}
        for i = 1, #list do
            local r = list[i][1](self, args)
            if r ~= nil then
                if is_tensor(r) then
                    args = {n = 1, r}
                elseif type(r) == "table" and getmetatable(r) == nil then
                    local k = r.n or #r
                    args = {n = k, unpack(r, 1, k)}
                else
                    fail(fmt("%s: a forward pre-hook returned %s (expected nothing, a tensor, or a list of the inputs)",
                             name, typename(r)))
                end
            end
        end
    end
    local outs = {n = 0}
    local function keep(...) outs = {n = select("#", ...), ...} end
    keep(self:forward(unpack(args, 1, args.n)))
    local post = rawget(self, "_fwd_hooks")
    if post and #post > 0 then
        local list = {unpack(post)}
        for i = 1, #list do
            local before = outs
            keep(list[i][1](self, args, unpack(before, 1, before.n)))
            if outs.n == 0 or (outs.n == 1 and outs[1] == nil) then outs = before end
        end
    end
    return unpack(outs, 1, outs.n)
end

local function instance_call(self, ...)
    local n = select("#", ...)
    if n > 0 then
        local f = self.forward
        local a = ARITY[f] or arity_of(f)
        if n > a then too_many(self, a, n, ...) end
    end
    if rawget(self, "_fwd_hooks") == nil and rawget(self, "_fwd_pre_hooks") == nil then return self:forward(...) end
    return hooked_call(self, ...)
end

-- Whether v is a module: an instance of a class from Module:extend.
local function is_module(v)
    local mt = type(v) == "table" and getmetatable(v)
    return mt and rawget(mt, "_class_name") ~= nil and type(v.parameters) == "function" or false
end
M.is_module = is_module

-- A registered parameter's, buffer's or child's field holding a value that
-- is none of nil (or false: gone, Torch's None), a tensor (a module, for a
-- parameter or a buffer) or a module: m.weight = 5 on a field that exists
-- is a plain assignment the module does not see, and the parameter
-- dropped out of m:parameters() (an optimiser then never trained it)
-- without a word.  Raised where it is met, as Torch raises at the assignment.
local function check_held(m, what, name, v)
    if v == nil or v == false or is_module(v) or (what ~= "child module" and is_tensor(v)) then return end
    fail(fmt("%s: the %s %s was assigned %s (expected %s, or nil to remove it)", m._class_name or "Module", what,
             name, is_tensor(v) and "a tensor" or typename(v), what == "child module" and "a module" or "a tensor"))
end

-- m.parameters() instead of m:parameters() passes no module: say so
local function check_module_self(fname, m)
    if not is_module(m) then
        fail(fmt("%s: expected a module as self, got %s (call it as m:%s(...))", fname, typename(m), fname))
    end
end

-- A module assigned to a field of a module (self.lstm = nn.LSTM(...) in
-- init) becomes its child, as in Torch: its parameters are the parent's,
-- and it moves, trains and saves with it.  Anything else is a plain
-- field; a tensor becomes a parameter only through register_parameter.
--
-- Children live in the module's own fields, and _module_names keeps their
-- order.  __newindex sees only assignments to absent fields, so the names
-- are brought up to date where they are read (child_names), not only at
-- assignment: a module assigned over a field that held something else
-- (self.extra = false, later self.extra = nn.Linear(...)) is found there
-- and registered, after the children known before it; a child's field set
-- to nil (m.head = nil) or to a non-module is skipped, its name kept in
-- place, so that a module assigned to it again takes its old place (as
-- Torch's m.head = None then m.head = module).

-- A list of the names of m's children, in registration order: the fields
-- that hold a module now.  Modules in fields not registered yet are
-- registered first, after the others (sorted by name when several turn up
-- at once, so that the order is the same on every run).
local function child_names(m)
    local names = m._module_names
    local numbered = m._number_index ~= nil -- (Sequential, ModuleList: children at keys 1..n, named "1".."n")
    local known, found
    for k, v in pairs(m) do
        local kt = type(k)
        if numbered and kt == "number" then k, kt = tostring(k), "string" end
        if (kt == "string" or kt == "number") and is_module(v) then
            if not known then
                known = {}
                for _, n in ipairs(names) do known[n] = true end
            end
            if not known[k] then
                found = found or {}
                found[#found + 1] = k
            end
        end
    end
    if found then
        table.sort(found, function(a, b) return tostring(a) < tostring(b) end)
        for _, n in ipairs(found) do names[#names + 1] = n end
    end
    local r = {}
    for _, n in ipairs(names) do
        local v = rawget(m, n)
        if v == nil and numbered then v = rawget(m, tonumber(n)) end
        check_held(m, "child module", n, v)
        if is_module(v) then r[#r + 1] = n end
    end
    return r
end

-- A container whose parameters sit at integer keys (ParameterList) brings
-- them up to date before they are read by name (see its _sync_params).
local function sync_params(m)
    local f = m._sync_params
    if type(f) == "function" then f(m) end
end

-- A child may not take the name of a method (m.parameters = nn.ReLU() made
-- m:parameters() call the ReLU) nor training.
local function check_child_name(fname, self, name)
    if name == "training" or type(getmetatable(self)[name]) == "function" then
        fail(fmt("%s: %s is the name of a method or field of the module; a child there would hide it, " ..
                 "choose another name", fname, tostring(name)))
    end
end

-- m.training: a boolean, held in the instance's _training; it is no field
-- of the instance's own, so that every assignment to it meets
-- module_newindex, which refuses anything else (m.training = nn.ReLU() or
-- = 0 was taken without a word, and a truthy one trained).
local function check_training(self, v)
    if type(v) ~= "boolean" then
        fail(fmt("%s: training must be a boolean (or use m:train(mode), m:eval()), got %s",
                 self._class_name or "Module", typename(v)))
    end
end

-- A class's __index: m.training from _training, a number from idx when
-- given (seq[i] of Sequential and ModuleList, and of their subclasses),
-- anything else from the class.
local function index_of(cls, idx)
    if idx then
        cls._number_index = idx
        return function(o, k)
            if k == "training" then return rawget(o, "_training") end
            if type(k) == "number" then return idx(o, k) end
            local i = tonumber(k)
            if i and rawget(o, i) ~= nil and tostring(i) == k then return rawget(o, i) end -- (a child's name)
            return cls[k]
        end
    end
    return function(o, k)
        if k == "training" then return rawget(o, "_training") end
        return cls[k]
    end
end

-- Torch's nn.Parameter(t [, requires_grad = true]): t as a leaf that
-- requires a gradient (t itself when it is one already, else a new leaf on
-- its storage), marked so that assigning it to a new field of a module
-- (self.w = nn.Parameter(ordo.randn(3, 4)) in init) registers it, as
-- register_parameter(name, t) would; requires_grad = false: a frozen one.
local MARKED_PARAMETERS = setmetatable({}, {__mode = "k"})
function M.Parameter(t, requires_grad)
    if not is_tensor(t) then fail("nn.Parameter: expected a tensor, got " .. typename(t)) end
    if requires_grad == nil then requires_grad = true end
    if type(requires_grad) ~= "boolean" then
        fail("nn.Parameter: requires_grad must be a boolean, got " .. typename(requires_grad))
    end
    local dt = t:dtype()
    if dt ~= "float32" and dt ~= "float64" then
        fail(fmt("nn.Parameter: only float tensors (float32, float64) can be parameters, got %s", dt))
    end
    local p = (t:is_leaf() and t:needs_grad()) and t or t:detach():requires_grad()
    MARKED_PARAMETERS[p] = requires_grad and "trained" or "frozen"
    if not requires_grad then p:requires_grad(false) end
    return p
end

-- Torch's nn.Buffer(t [, persistent = true]): t, marked so that assigning
-- it to a new field of a module (self.mask = nn.Buffer(t) in init)
-- registers it as a buffer, as register_buffer(name, t, persistent) would.
local MARKED_BUFFERS = setmetatable({}, {__mode = "k"})
function M.Buffer(t, persistent, ...)
    if not is_tensor(t) then fail("nn.Buffer: expected a tensor, got " .. typename(t)) end
    if persistent == nil then persistent = true end
    if type(persistent) ~= "boolean" then
        fail("nn.Buffer: persistent must be a boolean, got " .. typename(persistent))
    end
    if select("#", ...) > 0 then fail(fmt("nn.Buffer: takes (t [, persistent]), got a further %s", typename((...)))) end
    MARKED_BUFFERS[t] = persistent and "persistent" or "nonpersistent"
    return t
end

-- A plain nn.Sequential runs its modules 1..n: a child by another name
-- (Torch's seq.add_module("fc", m), or seq.fc = m) was registered, printed
-- and saved, and never run (an identity network, without a word).  A
-- subclass may hold named children for its own forward.
local function check_sequential_child(fname, self, name)
    if getmetatable(self) ~= M.Sequential or name == "training" then return end
    local i = tonumber(name)
    if not (i and tostring(i) == tostring(name)) then
        fail(fmt("%s: a Sequential runs its modules 1..n in order, a child named %s would never run; " ..
                 "add it with seq:add(m) (or seq:append(m), seq:insert(i, m))", fname, tostring(name)))
    end
end

local function module_newindex(self, name, v)
    if name == "training" then
        check_training(self, v)
        rawset(self, "_training", v)
        return
    end
    if is_module(v) then
        check_sequential_child("Sequential", self, name)
        check_child_name(self._class_name or "Module", self, name)
        -- a child found first keeps its place before this one (add_module, which containers call
        -- in loops, does not look: the scan would make building a long list quadratic)
        child_names(self)
        if not self:_has(self._module_names, name) then self._module_names[#self._module_names + 1] = name end
    end
    local bmark = MARKED_BUFFERS[v]
    if bmark and type(name) == "string" and not self:_has(self._buffer_names, name) then
        self:register_buffer(name, v, bmark == "persistent") -- (its own assignment comes back here, registered)
        return
    end
    local mark = MARKED_PARAMETERS[v]
    if mark and (type(name) == "string") and not self:_has(self._param_names, name) then
        self:register_parameter(name, v) -- (its own assignment comes back here, the name registered by then)
        local p = rawget(self, name)
        if mark == "frozen" then p:requires_grad(false) end
        MARKED_PARAMETERS[p] = mark
        return
    end
    rawset(self, name, v)
end

-- Cls = Base:extend("Name"): a subclass; Cls(...) makes an instance and
-- calls Cls:init(...) on it.
function Module:extend(name)
    if type(name) ~= "string" then fail("extend: expected a class name, got " .. typename(name)) end
    local cls = {__name = "nn." .. name, _class_name = name}
    cls.__index = index_of(cls)
    cls.__methods = cls -- (where the REPL's completion and help() find the methods: __index is a function)
    cls.__call = instance_call
    cls.__newindex = module_newindex
    cls.__tostring = Module.__tostring
    setmetatable(cls, {__index = self, __call = function(c, ...) return c.new(...) end})
    local idx = self._number_index
    if idx then
        -- a subclass of Sequential or ModuleList: seq[i] and seq[i] = m
        -- stay theirs (the methods found in the subclass first)
        cls.__index = index_of(cls, idx)
        cls.__newindex = rawget(self, "__newindex")
    end
    cls.new = function(...)
        local n = select("#", ...)
        if n > 0 then
            local f = cls.init
            local a = ARITY[f] or arity_of(f)
            if n > a then too_many_args(cls, a, n, ...) end
        end
        local o = setmetatable({_param_names = {}, _buffer_names = {}, _module_names = {}, _training = true}, cls)
        o:init(...)
        return o
    end
    return cls
end

function Module:init() end

function Module:forward(...) -- (vararg: m(x) on a module without one says so, not that it takes no input)
    fail(fmt("%s: forward is not defined for this module", self._class_name or "Module"))
end

-- nn.Module(): a module of no class of its own, as Torch's nn.Module(): a
-- holder of children, parameters and buffers (m.enc = nn.Linear(...)),
-- which moves, trains and saves them; it has no forward.  (It was a bare
-- "attempt to call a table value".)
local PlainModule
setmetatable(Module, {__call = function(_, ...)
    if select("#", ...) > 0 then fail("Module: nn.Module() takes no arguments (a class of one's own: " ..
                                     "nn.Module:extend(\"Name\") with init and forward)") end
    PlainModule = PlainModule or Module:extend("Module")
    return PlainModule()
end})

-- Registers t (a float tensor) as a trainable parameter stored in self[name].
-- A name for register_parameter / register_buffer: a string without dots
-- (they join the names of state_dict: "encoder.weight"), not the name of
-- a method or of training (the tensor would shadow it: m.parameters =
-- tensor breaks the module), nor one the module uses for a child or for
-- the other kind (a parameter and a buffer of one name are one field,
-- listed twice in state_dict).
local function check_slot(fname, self, name, other_names, other_kind)
    if type(name) ~= "string" or name == "" or name:find("[%s%.]") then
        fail(fmt("%s: the name must be a non-empty string without white space or dots, got %s", fname,
                 type(name) == "string" and fmt("%q", name) or typename(name)))
    end
    if name == "training" or getmetatable(self)[name] ~= nil then
        fail(fmt("%s: %s is the name of a method or field of the module; choose another", fname, name))
    end
    local i = self._number_index and tonumber(name)
    if i and tostring(i) == name and not rawget(self, "_registering") then
        -- (a Sequential's, ModuleList's or ParameterList's entries sit at keys 1..n, named "1".."n": a
        -- tensor named "1" hid the first module from printing, parameters and state_dict, not from forward)
        fail(fmt("%s: %s is a position of the %s (its entries are named 1..n); choose another name", fname,
                 name, self._class_name or "container"))
    end
    local cur = rawget(self, name)
    if is_module(cur) then fail(fmt("%s: %s is already a child module of this module", fname, name)) end
    if self:_has(other_names, name) then
        if cur ~= nil then fail(fmt("%s: %s is already a %s of this module", fname, name, other_kind)) end
        -- a removed one (m.b = nil): the name now is of this kind only
        for i = #other_names, 1, -1 do if other_names[i] == name then table.remove(other_names, i) end end
    end
end

-- Every tensor registered as a parameter (weak: it does not keep them
-- alive), frozen or not: one assigned to another module's parameter field
-- (tying to a frozen embedding) is a parameter there too.
local PARAMETERS = setmetatable({}, {__mode = "k"})

function Module:register_parameter(name, t, extra)
    if extra ~= nil then extra_arg("register_parameter", "(name, tensor)", extra) end
    check_module_self("register_parameter", self)
    check_slot("register_parameter", self, name, self._buffer_names, "buffer")
    if not is_tensor(t) then fail(fmt("register_parameter: %s must be a tensor, got %s", name, typename(t))) end
    local dt = t:dtype()
    if dt ~= "float32" and dt ~= "float64" then
        fail(fmt("register_parameter: %s must be a float tensor (float32 or float64: it needs a gradient), got %s",
                 name, dt))
    end
    if not self:_has(self._param_names, name) then
        self._param_names[#self._param_names + 1] = name
    end
    -- a parameter already (a leaf that requires a gradient: another
    -- module's weight, shared) stays that very tensor, as Torch's: one
    -- parameter, one gradient; anything else becomes a new leaf on its storage
    local p = (t:is_leaf() and t:needs_grad()) and t or t:detach():requires_grad()
    self[name] = p
    local rec = rawget(self, "_param_tensors")
    if not rec then
        rec = {}
        rawset(self, "_param_tensors", rec)
    end
    rec[name] = p -- (what collect_params checks the field against)
    PARAMETERS[p] = true
    return p
end

-- A tensor of state that is not trained (BatchNorm's running stats):
-- m:register_buffer(name, t [, persistent = true]).  It moves with the
-- module (m:to) and is listed by named_buffers; a persistent one is saved
-- too (state_dict, save), one registered with persistent = false is not
-- (a mask or a table computed from the options), as Torch's.
function Module:register_buffer(name, t, persistent, extra)
    if extra ~= nil then extra_arg("register_buffer", "(name, tensor, persistent)", extra) end
    check_module_self("register_buffer", self)
    check_slot("register_buffer", self, name, self._param_names, "parameter")
    if not is_tensor(t) then fail(fmt("register_buffer: %s must be a tensor, got %s", name, typename(t))) end
    if persistent == nil then persistent = true end
    if type(persistent) ~= "boolean" then
        fail(fmt("register_buffer: persistent must be a boolean, got %s", typename(persistent)))
    end
    if not self:_has(self._buffer_names, name) then self._buffer_names[#self._buffer_names + 1] = name end
    local np = rawget(self, "_nonpersistent")
    if not persistent and not np then
        np = {}
        rawset(self, "_nonpersistent", np)
    end
    if np then np[name] = not persistent or nil end
    self[name] = t
    return t
end

function Module:add_module(name, m, extra)
    if extra ~= nil then extra_arg("add_module", "(name, module)", extra) end
    check_module_self("add_module", self)
    if type(name) ~= "string" or name == "" or name:find(".", 1, true) then
        -- (names join with dots into parameter names: "encoder.weight")
        fail("add_module: the name must be a non-empty string without dots, got " ..
             (type(name) == "string" and ("'" .. name .. "'") or typename(name)))
    end
    if not is_module(m) then
        fail(fmt("add_module: %s must be a module, got %s", tostring(name), typename(m)))
    end
    check_child_name("add_module", self, name)
    check_sequential_child("add_module", self, name)
    local i = self._number_index and tonumber(name)
    if i and tostring(i) == name then
        -- (a ParameterList's positions hold its parameters; a Sequential's or ModuleList's a module of
        -- 1..n, or n + 1, Torch's add_module(str(len(seq)), m), a new one at the end: one beyond was put
        -- at its key with n left as it was, never run nor counted by size)
        local n = rawget(self, "n") or 0
        if self._sync_params ~= nil then
            fail(fmt("add_module: %s is a position of the %s (its parameters); choose another name", name,
                     self._class_name or "ParameterList"))
        end
        if i < 1 or i > n + 1 then
            fail(fmt("add_module: %s is no position of the %s: 1..%d, or %d for a new one at the end " ..
                     "(ordo numbers from 1)", name, self._class_name or "container", n, n + 1))
        end
        if not self:_has(self._module_names, name) then self._module_names[#self._module_names + 1] = name end
        -- Sequential's and ModuleList's children at integer keys: Lua's # and
        -- ipairs see them (for _, l in ipairs(self.layers) ran no times)
        rawset(self, i, m)
        if i == n + 1 then rawset(self, "n", i) end
        return m
    end
    if not self:_has(self._module_names, name) then self._module_names[#self._module_names + 1] = name end
    self[name] = m
    return m
end

function Module:_has(list, name)
    for _, n in ipairs(list) do if n == name then return true end end
    return false
end

-- m:register_forward_pre_hook(fn) / m:register_forward_hook(fn): see
-- hooked_call.  Each returns a handle, handle:remove() takes the hook off.
local function add_forward_hook(fname, self, field, fn, ...)
    check_module_self(fname, self)
    local mt = type(fn) == "table" and getmetatable(fn)
    if type(fn) ~= "function" and not (mt and mt.__call) then
        fail(fmt("%s: expected a function, got %s", fname, typename(fn)))
    end
    if select("#", ...) > 0 and (...) ~= nil then
        -- (Torch's keywords prepend, with_kwargs, always_call: not dropped unseen)
        fail(fmt("%s: takes the hook alone, got a further %s", fname, typename((...))))
    end
    local hooks = rawget(self, field)
    if hooks == nil then
        hooks = {}
        rawset(self, field, hooks)
    end
    local entry = {fn}
    hooks[#hooks + 1] = entry
    return util.hook_handle(hooks, entry)
end
function Module:register_forward_pre_hook(fn, ...)
    return add_forward_hook("register_forward_pre_hook", self, "_fwd_pre_hooks", fn, ...)
end
function Module:register_forward_hook(fn, ...)
    return add_forward_hook("register_forward_hook", self, "_fwd_hooks", fn, ...)
end

-- The direct children as a list of {name, module}.
function Module:children(extra)
    if extra ~= nil then extra_arg("children", "()", extra) end
    check_module_self("children", self)
    local r = {}
    for _, n in ipairs(child_names(self)) do r[#r + 1] = {n, self[n]} end
    return r
end

-- Torch's named_children: the direct children as {name =, module =}, as
-- named_modules lists them (a prefix joined with a dot).
function Module:named_children(prefix, extra)
    if extra ~= nil then extra_arg("named_children", "(prefix)", extra) end
    check_module_self("named_children", self)
    if prefix ~= nil and type(prefix) ~= "string" then
        fail(fmt("named_children: the name prefix must be a string, got %s", typename(prefix)))
    end
    local r = {}
    for _, n in ipairs(child_names(self)) do
        r[#r + 1] = {name = (prefix and prefix ~= "") and (prefix .. "." .. n) or n, module = self[n]}
    end
    return r
end

local function check_prefix(fname, prefix)
    if prefix ~= nil and type(prefix) ~= "string" then
        fail(fmt("%s: the name prefix must be a string, got %s", fname, typename(prefix)))
    end
    return prefix or ""
end

local function collect_modules(m, prefix, out, seen)
    if seen[m] then return out end
    seen[m] = true
    out[#out + 1] = {name = prefix, module = m}
    for _, n in ipairs(child_names(m)) do
        collect_modules(m[n], prefix == "" and n or prefix .. "." .. n, out, seen)
    end
    return out
end

-- {name = "encoder.1", module = m} for this module ("", or prefix) and
-- every module below it, depth first, each once.
function Module:named_modules(prefix, extra)
    if extra ~= nil then extra_arg("named_modules", "(prefix)", extra) end
    check_module_self("named_modules", self)
    return collect_modules(self, check_prefix("named_modules", prefix), {}, {})
end

-- Torch's get_submodule("encoder.1"): the module at that dotted path of
-- child names ("" is the module itself); get_parameter("encoder.1.weight"),
-- get_buffer("bn.running_mean"): the tensor there.  A path that leads
-- nowhere raises, naming the part not found and what is there.
-- register_module(name, m): add_module's Torch alias.
local function submodule(fname, self, target)
    if type(target) ~= "string" then fail(fmt("%s: expected a dotted name (a string), got %s", fname, typename(target))) end
    local m, path = self, ""
    if target == "" then return m end
    for part in (target .. "."):gmatch("([^.]*)%.") do
        local found
        for _, n in ipairs(child_names(m)) do
            if tostring(n) == part then found = m[n] break end
        end
        if not found then
            local have = {}
            for _, n in ipairs(child_names(m)) do have[#have + 1] = tostring(n) end
            fail(fmt("%s: %s has no submodule '%s' (its children: %s)", fname,
                     path == "" and (m._class_name or "the module") or "'" .. path .. "'", part,
                     #have > 0 and table.concat(have, ", ") or "none"))
        end
        m, path = found, path == "" and part or path .. "." .. part
    end
    return m
end
function Module:get_submodule(target, extra)
    if extra ~= nil then extra_arg("get_submodule", "(target)", extra) end
    check_module_self("get_submodule", self)
    return submodule("get_submodule", self, target)
end
local function get_tensor(fname, self, target, list_fname, kind)
    if type(target) ~= "string" or target == "" then
        fail(fmt("%s: expected a dotted name (a non-empty string), got %s", fname, type(target) == "string" and "''"
                 or typename(target)))
    end
    local mod_path, leaf = target:match("^(.*)%.([^.]*)$")
    if not mod_path then mod_path, leaf = "", target end
    local m = submodule(fname, self, mod_path)
    sync_params(m)
    for _, n in ipairs(m[list_fname]) do
        local t = m[n]
        if n == leaf and is_tensor(t) then return t end
    end
    fail(fmt("%s: %s has no %s '%s'", fname, mod_path == "" and (m._class_name or "the module") or "'" .. mod_path .. "'",
             kind, leaf))
end
function Module:get_parameter(target, extra)
    if extra ~= nil then extra_arg("get_parameter", "(target)", extra) end
    check_module_self("get_parameter", self)
    return get_tensor("get_parameter", self, target, "_param_names", "parameter")
end
function Module:get_buffer(target, extra)
    if extra ~= nil then extra_arg("get_buffer", "(target)", extra) end
    check_module_self("get_buffer", self)
    return get_tensor("get_buffer", self, target, "_buffer_names", "buffer")
end
function Module:register_module(name, m, extra)
    if extra ~= nil then extra_arg("register_module", "(name, module)", extra) end
    check_module_self("register_module", self)
    local ok, r = pcall(self.add_module, self, name, m)
    if not ok then error((tostring(r):gsub("add_module: ", "register_module: ", 1)), 0) end
    return r
end

function Module:modules(extra)
    if extra ~= nil then extra_arg("modules", "()", extra) end
    check_module_self("modules", self)
    local r = {}
    for i, e in ipairs(self:named_modules()) do r[i] = e.module end
    return r
end

-- Calls fn(m) on every module below this one and then on this one (as
-- Torch: children first), e.g. to initialise every Linear a certain way;
-- once a module, also one that is a child in several places
-- (nn.Sequential(l, l): an in-place scaling would be applied twice).
local function apply_tree(m, fn, seen)
    if seen[m] then return end
    seen[m] = true
    for _, n in ipairs(child_names(m)) do apply_tree(m[n], fn, seen) end
    fn(m)
end

function Module:apply(fn, extra)
    if extra ~= nil then extra_arg("apply", "(fn)", extra) end
    check_module_self("apply", self)
    if type(fn) ~= "function" then fail("apply: expected a function, got " .. typename(fn)) end
    apply_tree(self, fn, {})
    return self
end

-- Freezes (false) or unfreezes (true, the default) every parameter:
-- frozen ones get no gradient (give an optimiser only the others:
-- m:trainable_parameters()).
function Module:requires_grad_(flag, extra)
    if extra ~= nil then extra_arg("requires_grad_", "(flag)", extra) end
    check_module_self("requires_grad_", self)
    if flag == nil then flag = true end
    if type(flag) ~= "boolean" then fail("requires_grad_: expected a boolean, got " .. typename(flag)) end
    for _, p in ipairs(self:parameters()) do p:requires_grad_(flag) end
    return self
end

-- The parameters that require a gradient (what an optimiser takes when
-- part of the model is frozen).
function Module:trainable_parameters(extra)
    if extra ~= nil then extra_arg("trainable_parameters", "()", extra) end
    check_module_self("trainable_parameters", self)
    local r = {}
    for _, p in ipairs(self:parameters()) do if p:needs_grad() then r[#r + 1] = p end end
    return r
end

-- A parameter's field given a tensor that is not a parameter (m.weight =
-- ordo.randn(...): a plain assignment, which the module does not see)
-- raises here, as Torch's assignment does: it would have been listed, and
-- never trained.  Another parameter assigned there (tied weights: b.weight
-- = a.weight) is taken.
local function checked_param(m, n, t, prefix)
    local rec = rawget(m, "_param_tensors")
    if not rec or rec[n] == t then return end
    if PARAMETERS[t] or (t:is_leaf() and t:needs_grad()) then
        rec[n] = t
        return
    end
    fail(fmt("%s: the parameter %s%s was assigned a tensor that is not a parameter (it needs no gradient: it " ..
             "would never train); register it (m:register_parameter(\"%s\", t)) or copy into it " ..
             "(ordo.no_grad(function() m.%s:copy_(t) end))", m._class_name or "Module", prefix, n, n, n))
end

-- (seen: the tensors and the modules met so far, each listed once: a
-- module met again, shared or in a cycle -- a child holding its parent,
-- child.owner = parent -- is not entered again)
local function collect_params(m, prefix, out, seen, shallow)
    if seen[m] then return out end
    seen[m] = true
    sync_params(m)
    for _, n in ipairs(m._param_names) do
        local t = m[n]
        check_held(m, "parameter", prefix .. n, t)
        if is_tensor(t) then checked_param(m, n, t, prefix) end
        if is_tensor(t) and not seen[t] then -- (a parameter set to nil, or to a module, is gone)
            seen[t] = true
            out[#out + 1] = {name = prefix .. n, tensor = t}
        end
    end
    if shallow then return out end
    for _, n in ipairs(child_names(m)) do collect_params(m[n], prefix .. n .. ".", out, seen) end
    return out
end

-- A prefix for the names of named_parameters and named_buffers: joined
-- with a dot, as named_modules' and Torch's ("net" gives "net.1.weight"),
-- and one that ends in a dot ("net.") as it is.
local function dotted_prefix(fname, prefix)
    prefix = check_prefix(fname, prefix)
    if prefix ~= "" and prefix:sub(-1) ~= "." then prefix = prefix .. "." end
    return prefix
end

-- {name = "layer.1.weight", tensor = t} for every parameter, depth first,
-- each tensor once (names start with prefix when given).
-- recurse = false (Torch's): this module's own, not its children's.
local function check_recurse(fname, recurse)
    if recurse == nil then return true end
    if type(recurse) ~= "boolean" then fail(fmt("%s: recurse must be a boolean, got %s", fname, typename(recurse))) end
    return recurse
end
function Module:named_parameters(prefix, recurse, extra)
    if extra ~= nil then extra_arg("named_parameters", "(prefix, recurse)", extra) end
    check_module_self("named_parameters", self)
    recurse = check_recurse("named_parameters", recurse)
    return collect_params(self, dotted_prefix("named_parameters", prefix), {}, {}, not recurse)
end

-- (an argument to a method that takes none: Torch's m.parameters(False),
-- its recurse = False, or m:eval(false) for training, was dropped unseen)
local function no_args(fname, n, first)
    if n > 0 then fail(fmt("%s: takes no arguments, got %s", fname, typename(first))) end
end

function Module:parameters(recurse, extra)
    if extra ~= nil then extra_arg("parameters", "(recurse)", extra) end
    check_module_self("parameters", self)
    recurse = check_recurse("parameters", recurse)
    local r = {}
    for i, e in ipairs(self:named_parameters(nil, recurse)) do r[i] = e.tensor end
    return r
end

-- (persistent_only: without those registered with persistent = false;
-- seen as collect_params': each buffer once, as each parameter, under its
-- first name -- Sequential(bn, bn) listed bn's under both)
local function collect_buffers(m, prefix, out, persistent_only, seen, shallow)
    if seen[m] then return out end
    seen[m] = true
    local np = persistent_only and rawget(m, "_nonpersistent")
    for _, n in ipairs(m._buffer_names) do
        local t = m[n]
        check_held(m, "buffer", prefix .. n, t)
        if is_tensor(t) and not (np and np[n]) and not seen[t] then
            seen[t] = true
            out[#out + 1] = {name = prefix .. n, tensor = t}
        end
    end
    if shallow then return out end
    for _, n in ipairs(child_names(m)) do collect_buffers(m[n], prefix .. n .. ".", out, persistent_only, seen) end
    return out
end

-- {name = "bn.running_mean", tensor = t} for every buffer, depth first.
function Module:named_buffers(prefix, recurse, extra)
    if extra ~= nil then extra_arg("named_buffers", "(prefix, recurse)", extra) end
    check_module_self("named_buffers", self)
    recurse = check_recurse("named_buffers", recurse)
    return collect_buffers(self, dotted_prefix("named_buffers", prefix), {}, false, {}, not recurse)
end

-- The buffers' tensors, as parameters() the parameters' (Torch's
-- m.buffers(); only named_buffers was there).
function Module:buffers(recurse, extra)
    if extra ~= nil then extra_arg("buffers", "(recurse)", extra) end
    check_module_self("buffers", self)
    recurse = check_recurse("buffers", recurse)
    local r = {}
    for i, e in ipairs(self:named_buffers(nil, recurse)) do r[i] = e.tensor end
    return r
end

-- Number of scalar parameters.
function Module:num_parameters(...)
    check_module_self("num_parameters", self)
    no_args("num_parameters", select("#", ...), ...)
    local n = 0
    for _, p in ipairs(self:parameters()) do n = n + p:numel() end
    return n
end

-- The modules whose train or __tostring is running (a module met again
-- there is its own descendant: a child holding its parent; not entered
-- again, where the recursion would overflow the stack).
local IN_TRAIN = setmetatable({}, {__mode = "k"})
local IN_TOSTRING = setmetatable({}, {__mode = "k"})

-- fn(...) with IN[m] set while it runs, cleared even when it raises.
local function while_in(IN, m, fn, ...)
    IN[m] = true
    local ok, err = pcall(fn, ...)
    IN[m] = nil
    if not ok then error(err, 0) end
    return err
end

-- (each child's own train, which a class may override, as Torch's)
local function train_children(self, mode)
    for _, n in ipairs(child_names(self)) do self[n]:train(mode) end
end

-- m:train([mode = true]): mode a boolean, as Torch's (m:train(0), true
-- in Lua, would otherwise train where eval was meant).
function Module:train(mode, extra)
    if extra ~= nil then extra_arg("train", "(mode)", extra) end
    check_module_self("train", self)
    if mode == nil then mode = true end
    if type(mode) ~= "boolean" then fail("train: mode must be a boolean, got " .. typename(mode)) end
    if IN_TRAIN[self] then return self end
    self.training = mode
    while_in(IN_TRAIN, self, train_children, self, mode)
    return self
end

function Module:eval(...)
    check_module_self("eval", self)
    no_args("eval", select("#", ...), ...)
    return self:train(false)
end

-- m:zero_grad([set_to_none = true]): drops each parameter's gradient
-- (p.grad = nil), or with false fills it with zeros in place, as an
-- optimiser's zero_grad and Torch's.
function Module:zero_grad(set_to_none, extra)
    if extra ~= nil then extra_arg("zero_grad", "(set_to_none)", extra) end
    check_module_self("zero_grad", self)
    if set_to_none == nil then set_to_none = true end
    if type(set_to_none) ~= "boolean" then
        fail("zero_grad: set_to_none must be a boolean, got " .. typename(set_to_none))
    end
    local params = self:parameters()
    if set_to_none then
        for _, p in ipairs(params) do p.grad = nil end
        return
    end
    for _, e in ipairs(self:named_parameters()) do
        local g = e.tensor.grad
        if g ~= nil and not is_tensor(g) then
            fail(fmt("zero_grad: the gradient of %s is %s, expected a tensor", e.name, typename(g)))
        end
    end
    autograd.no_grad(function()
        for _, p in ipairs(params) do
            if p.grad ~= nil then p.grad:zero_() end
        end
    end)
end

-- The moved (or cast) tensor for t, made once per m:to call: moved maps each
-- tensor met so far to its result, so that a tensor held in several places
-- (tied weights: b.weight = a.weight; a module that is a child twice) is
-- still one tensor afterwards.  A parameter keeps its requires_grad flag: a
-- frozen one stays frozen; and its .grad, moved (or cast) too.  One
-- already on the device and of the dtype is kept as it is.
local FLOAT_DTYPES = {float32 = true, float64 = true}
local DTYPE_NAMES = {float32 = true, float64 = true, int32 = true, int64 = true, uint8 = true}
local function DT_DEV(t) return fmt("%s on %s", t:dtype(), tostring(t:device())) end
local function moved_tensor(t, a, b, moved, is_param)
    local r = moved[t]
    if r ~= nil then return r end
    if moved.int_args and not FLOAT_DTYPES[t:dtype()] then
        -- a dtype cast is for floating-point tensors (as Torch's): an
        -- integer buffer (indices, a counter) keeps its dtype, and only
        -- goes to the device, if one was named
        local dev = moved.int_args
        r = dev == true and t or t:to(dev)
        moved[t] = r
        return r
    end
    if is_param then
        local d = t:detach() -- out of the graph: the copy records nothing
        r = d:to(a, b)
        if r == d then
            r = t
        else
            if t:needs_grad() then r:requires_grad() end
            -- its gradient goes along, as Torch's (m:double() between a
            -- backward and a step, or for a gradient check)
            local g = t.grad
            if is_tensor(g) then r.grad = g:detach():to(a, b) end
            -- an optimiser built before m:to still holds t, which no
            -- longer gets gradients: its step says so (optim.lua) -- once
            -- the module holds r (Module:to marks it then)
            moved.replaced[#moved.replaced + 1] = {t, r}
        end
    else
        r = t:to(a, b)
    end
    moved[t] = r
    return r
end

-- (the new tensors are collected in sets, and assigned only once every one
-- was made: a failure leaves the module as it was)
local function move_tree(m, a, b, moved, seen, sets)
    if seen[m] then return end
    seen[m] = true
    sync_params(m)
    for pass = 1, 2 do -- parameters, then buffers
        for _, n in ipairs(pass == 1 and m._param_names or m._buffer_names) do
            local t = m[n]
            if is_tensor(t) then
                local r = moved_tensor(t, a, b, moved, pass == 1)
                if r ~= t then sets[#sets + 1] = {m, n, r} end
            end
        end
    end
    for _, n in ipairs(child_names(m)) do move_tree(m[n], a, b, moved, seen, sets) end
end

-- m:to(device or dtype), m:to(device, dtype), m:to(u): moves (or casts)
-- every parameter and buffer; the module's fields then hold the new
-- tensors, so build optimisers after.  Tensors shared between modules stay
-- shared (see moved_tensor).  The dtype must be a float one (parameters
-- need gradients); integer buffers keep theirs, as in Torch.
function Module:to(a, b, extra)
    if extra ~= nil then extra_arg("to", "(device or dtype, dtype)", extra) end
    check_module_self("to", self)
    local dt, dev
    for _, x in ipairs({a, b}) do
        if type(x) == "string" and DTYPE_NAMES[x] then dt = x
        elseif is_tensor(x) then dt, dev = x:dtype(), x:device()
        else dev = x end
    end
    if dt and not FLOAT_DTYPES[dt] then
        fail(fmt("to: a module's dtype must be float32 or float64 (its parameters need gradients), got %s", dt))
    end
    local moved = {replaced = {}}
    if dt then moved.int_args = dev or true end
    local sets = {}
    move_tree(self, a, b, moved, {}, sets)
    for _, s in ipairs(sets) do
        local m, n, r = s[1], s[2], s[3]
        local rec = rawget(m, "_param_tensors")
        if rec and rec[n] ~= nil and rec[n] == m[n] then -- (a parameter moved is one still)
            rec[n] = r
            PARAMETERS[r] = true
        end
        m[n] = r
    end
    for _, tr in ipairs(moved.replaced) do tr[1]._moved_by_to = DT_DEV(tr[2]) end
    return self
end

-- m:cuda([dev]) and m:cpu(): m:to(ordo.gpu(n)) (dev = ordo.gpu(n) or n,
-- default gpu(0)) and m:to(ordo.cpu(0)), as Torch's.
function Module:cuda(dev, extra)
    if extra ~= nil then extra_arg("cuda", "(dev)", extra) end
    check_module_self("cuda", self)
    return self:to(util.gpu(tensor.gpu_id("cuda", dev)))
end

function Module:cpu(extra)
    if extra ~= nil then extra_arg("cpu", "()", extra) end
    check_module_self("cpu", self)
    return self:to(util.cpu(0))
end

-- m:double() and m:float(): m:to("float64") and m:to("float32"), as
-- Torch's (and as a tensor's t:double() and t:float()).
function Module:double(extra)
    if extra ~= nil then extra_arg("double", "()", extra) end
    check_module_self("double", self)
    return self:to("float64")
end

function Module:float(extra)
    if extra ~= nil then extra_arg("float", "()", extra) end
    check_module_self("float", self)
    return self:to("float32")
end

-- m:type(dtype): Torch's Module.type, m:to(dtype).  m:half() and
-- m:bfloat16() (Torch's) say that ordo has no 16-bit floats (they were
-- "attempt to call method 'half' (a nil value)").
function Module:type(dtype, extra)
    if extra ~= nil then extra_arg("type", "(dtype)", extra) end
    check_module_self("type", self)
    if type(dtype) ~= "string" then
        fail(fmt("type: expected a dtype (\"float32\" or \"float64\"), got %s", typename(dtype)))
    end
    return self:to(dtype)
end
for _, name in ipairs({"half", "bfloat16"}) do
    Module[name] = function(self, extra)
        if extra ~= nil then extra_arg(name, "()", extra) end
        check_module_self(name, self)
        fail(fmt("%s: ordo has no 16-bit float dtype (float32 and float64 only); use m:float() or m:double()", name))
    end
end

-- Every parameter and (persistent) buffer by its dotted name, in a
-- stable order; m:state_dict(prefix) puts prefix before each name, as
-- named_parameters' ("encoder" gives "encoder.1.weight"; the argument
-- was ignored).
function Module:state_dict(prefix, extra)
    if extra ~= nil then extra_arg("state_dict", "(prefix)", extra) end
    check_module_self("state_dict", self)
    prefix = dotted_prefix("state_dict", prefix)
    local list = self:named_parameters(prefix)
    for _, e in ipairs(collect_buffers(self, prefix, {}, true, {})) do list[#list + 1] = e end
    return list
end

local function describe_tree(self)
    local lines = {self:_describe()}
    for _, c in ipairs(self:children()) do
        local sub = IN_TOSTRING[c[2]] and c[2]:_describe() .. " (a module above this one)"
            or tostring(c[2]):gsub("\n", "\n  ")
        lines[#lines + 1] = "  (" .. c[1] .. "): " .. sub
    end
    return concat(lines, "\n")
end

function Module:__tostring()
    if IN_TOSTRING[self] then return self:_describe() end
    return while_in(IN_TOSTRING, self, describe_tree, self)
end

-- The class name, with extra_repr's text in parentheses: a user's
-- extra_repr that gives nil or "" shows none, one that gives neither a
-- string nor a number says so (it was a bare "attempt to concatenate").
function Module:_describe()
    local name = self._class_name or "Module"
    if not self.extra_repr then return name end
    local s = self:extra_repr()
    if s == nil or s == "" then return name end
    if type(s) ~= "string" and type(s) ~= "number" then
        fail(fmt("%s: extra_repr must return a string, got %s", name, typename(s)))
    end
    return name .. "(" .. s .. ")"
end

-- ---------------------------------------------------------------- save / load

-- The other names of the tensors state_dict lists, which it leaves out
-- (each tensor once) and Torch's state_dict gives too: those of a module
-- that is a child twice (nn.Sequential(l, l): "2.weight" is "1.weight")
-- or of a tied weight (b.weight = a.weight).  {alias = {name, tensor}}.
local function alias_names(self)
    local primary, r = {}, {}
    for _, e in ipairs(self:state_dict()) do primary[e.tensor] = primary[e.tensor] or e.name end
    local function walk(m, prefix, path)
        if path[m] then return end
        path[m] = true
        sync_params(m)
        local np = rawget(m, "_nonpersistent")
        for pass = 1, 2 do
            for _, n in ipairs(pass == 1 and m._param_names or m._buffer_names) do
                local t = m[n]
                local p = is_tensor(t) and not (pass == 2 and np and np[n]) and primary[t]
                if p and p ~= prefix .. n then r[prefix .. n] = {p, t} end
            end
        end
        for _, n in ipairs(child_names(m)) do walk(m[n], prefix .. n .. ".", path) end
        path[m] = nil
    end
    walk(self, "", {})
    return r
end

-- The names of a state dict given to load or load_state_dict brought to
-- those of state_dict.  Older names: a class whose state had other names
-- (RNN, LSTM, GRU: "cell1.weight_ih", now "weight_ih_l0", Torch's) has a
-- method _old_state_names giving {old = new}, relative to the module.
-- Other names of one tensor (alias_names): the first given is read as
-- the tensor's, the others only checked for its shape.  given (name =
-- tensor) is changed in place; order (a list of its names, or nil)
-- follows.  Returns a function of a name that adds to it the name it was
-- read under, for errors, and the set of the names a state dict may lack
-- (a class's _optional_state_names, relative to the module, {name =
-- true}: BatchNorm's num_batches_tracked, which older ordo did not keep).
local function canonical_names(self, fname, given, order)
    local renamed, was, optional = {}, {}, {}
    local function rename(o, n, why)
        given[n], given[o] = given[o], nil
        renamed[o], was[n] = n, fmt("%s (read as %s, %s)", n, o, why)
    end
    for _, e in ipairs(self:named_modules()) do
        local olds, opt = e.module._old_state_names, e.module._optional_state_names
        local pre = e.name == "" and "" or e.name .. "."
        if opt then
            for n in pairs(opt(e.module)) do optional[pre .. n] = true end
        end
        if olds then
            for old, new in pairs(olds(e.module)) do
                local o, n = pre .. old, pre .. new
                if given[o] ~= nil and given[n] == nil then rename(o, n, "its older name") end
            end
        end
    end
    local aliases, names = alias_names(self), {}
    for a in pairs(aliases) do if given[a] ~= nil then names[#names + 1] = a end end
    table.sort(names)
    for _, a in ipairs(names) do
        local n, t = aliases[a][1], aliases[a][2]
        if given[n] == nil then
            rename(a, n, "another name of the same tensor")
        else
            if shape_str(given[a]) ~= shape_str(t) then
                fail(fmt("%s: %s (another name of %s) is of shape %s in the state dict, the module's is of shape %s",
                         fname, a, n, shape_str(given[a]), shape_str(t)))
            end
            given[a], renamed[a] = nil, false
        end
    end
    if order then
        local k = 0
        for _, name in ipairs(order) do
            local to = renamed[name]
            if to == nil then to = name end
            if to then
                k = k + 1
                order[k] = to
            end
        end
        for i = #order, k + 1, -1 do order[i] = nil end
    end
    return function(name) return was[name] or name end, optional
end

-- Writes the module's parameters and buffers to path (ordo.serialize: the
-- file is replaced only once it is whole).
function Module:save(path, extra)
    if extra ~= nil then extra_arg("save", "(path)", extra) end
    check_module_self("save", self)
    serialize.write("save", path, self:state_dict())
    return self
end

-- Reads a file written by save into the module's tensors (same names,
-- shapes and dtypes; the device may differ).  Raises on any mismatch and
-- then leaves every tensor unchanged.
function Module:load(path, extra)
    if extra ~= nil then extra_arg("load", "(path)", extra) end
    check_module_self("load", self)
    local entries = {}
    for _, e in ipairs(serialize.read("load", path)) do entries[e.name] = e.tensor end
    local named, optional = canonical_names(self, "load", entries)
    local own = self:state_dict()
    for _, e in ipairs(own) do
        local t = entries[e.name]
        if not t and not optional[e.name] then fail(fmt("load: %s has no tensor named %s", path, e.name)) end
        if t and (t:dtype() ~= e.tensor:dtype() or shape_str(t) ~= shape_str(e.tensor)) then
            local same_shape = shape_str(t) == shape_str(e.tensor)
            fail(fmt("load: %s in %s is %s of shape %s, the module's is %s of shape %s%s", named(e.name), path,
                     t:dtype(), shape_str(t), e.tensor:dtype(), shape_str(e.tensor), same_shape and
                     fmt(" (saved from a %s model: m:to(\"%s\") first, or m:load_state_dict(ordo.load(path)), which " ..
                         "casts to the module's dtypes)", t:dtype(), t:dtype()) or ""))
        end
        entries[e.name] = nil
        e.loaded = t
    end
    local extra = next(entries)
    if extra then fail(fmt("load: %s has a tensor %s that the module does not have", path, extra)) end
    autograd.no_grad(function()
        for _, e in ipairs(own) do
            if e.loaded then e.tensor:copy_(e.loaded) end
        end
    end)
    return self
end

-- m:load_state_dict(sd [, {strict = true}]): copies the tensors of sd --
-- a list of {name =, tensor =} (what m:state_dict() gives) or a table of
-- name = tensor -- into the module's parameters and buffers of the same
-- names (another model's weights: target:load_state_dict(model:state_dict())).
-- Shapes must match; the dtype and device are the module's (the values are
-- converted, as Torch's copy).  strict (the default): sd must have every
-- name of the module and no other.  strict = false copies the names both
-- have.  Returns the module's names sd lacks and sd's names the module
-- lacks, two lists (empty when strict).  Everything is checked before
-- anything changes: on an error no tensor has been touched.
local LOAD_SD_OPTS = {strict = true}
function Module:load_state_dict(sd, opts, extra)
    if extra ~= nil then extra_arg("load_state_dict", "(state_dict, opts)", extra) end
    check_module_self("load_state_dict", self)
    local fname = "load_state_dict"
    if type(opts) == "boolean" then opts = {strict = opts} end -- (Torch's load_state_dict(sd, strict))
    opts = util.check_opts(fname, opts, LOAD_SD_OPTS)
    local strict = opts.strict
    if strict == nil then strict = true end
    if type(strict) ~= "boolean" then fail(fmt("%s: strict must be a boolean, got %s", fname, typename(strict))) end
    if type(sd) ~= "table" or is_tensor(sd) or is_module(sd) then
        fail(fmt("%s: expected a state dict (m:state_dict(), or a table of name = tensor), got %s", fname,
                 typename(sd)))
    end
    local given, order = {}, {}
    local function add(name, t, where)
        if type(name) ~= "string" then fail(fmt("%s: %s has a name that is %s, expected a string", fname, where,
                                                 typename(name))) end
        if not is_tensor(t) then fail(fmt("%s: %s is %s, expected a tensor", fname, where, typename(t))) end
        if given[name] ~= nil and not rawequal(given[name], t) then
            fail(fmt("%s: the state dict has two tensors named %s", fname, name))
        end
        if given[name] == nil then order[#order + 1] = name end
        given[name] = t
    end
    local n = #sd
    for i = 1, n do
        local e = sd[i]
        if type(e) ~= "table" or is_tensor(e) then
            fail(fmt("%s: entry %d is %s, expected {name =, tensor =} (from m:state_dict())", fname, i, typename(e)))
        end
        add(e.name, e.tensor, fmt("entry %d", i))
    end
    local keys = {} -- (in sorted order: the unexpected names come out the same every run)
    for k in pairs(sd) do
        if not (type(k) == "number" and k >= 1 and k <= n and k == math.floor(k)) then keys[#keys + 1] = k end
    end
    table.sort(keys, function(a, b)
        if type(a) ~= type(b) then return type(a) < type(b) end
        if type(a) == "string" or type(a) == "number" then return a < b end
        return tostring(a) < tostring(b)
    end)
    for _, k in ipairs(keys) do add(k, sd[k], "entry " .. tostring(k)) end
    local named, optional = canonical_names(self, fname, given, order)
    local own, missing, pairs_ = self:state_dict(), {}, {}
    local known = {}
    for _, e in ipairs(own) do known[e.name] = true end
    -- a name with a part "0" (Torch's "0.weight", "layers.0.bias") the
    -- module lacks is most likely one of a Torch container, numbered from 0
    -- (said with a shape mismatch too: Torch's "1.weight" is ordo's "2.weight")
    local from0 = false
    for _, name in ipairs(order) do
        if not known[name] and ("." .. name .. "."):find(".0.", 1, true) then from0 = true end
    end
    local hint = from0 and "; Torch numbers the entries of a Sequential, ModuleList or ParameterList from 0, ordo from 1" or ""
    for _, e in ipairs(own) do
        local t = given[e.name]
        if t == nil then
            if not optional[e.name] then missing[#missing + 1] = e.name end
        elseif shape_str(t) ~= shape_str(e.tensor) then
            fail(fmt("%s: %s is of shape %s in the state dict, the module's is of shape %s%s", fname, named(e.name),
                     shape_str(t), shape_str(e.tensor), hint))
        else
            pairs_[#pairs_ + 1] = {e.tensor, t}
        end
    end
    local unexpected = {}
    for _, name in ipairs(order) do if not known[name] then unexpected[#unexpected + 1] = name end end
    if strict and #missing > 0 then
        fail(fmt("%s: the state dict has no tensor named %s%s%s (strict = false loads the rest)%s", fname,
                 missing[1], #missing > 1 and fmt(" (and %d more missing)", #missing - 1) or "",
                 #unexpected > 0 and fmt(", and has %s that the module does not have%s", unexpected[1],
                                         #unexpected > 1 and fmt(" (and %d more)", #unexpected - 1) or "") or "",
                 hint))
    end
    if strict and #unexpected > 0 then
        fail(fmt("%s: the state dict has a tensor %s that the module does not have%s (strict = false skips it)%s",
                 fname, unexpected[1], #unexpected > 1 and fmt(" (and %d more)", #unexpected - 1) or "", hint))
    end
    autograd.no_grad(function()
        for _, p in ipairs(pairs_) do
            if not rawequal(p[1], p[2]) then p[1]:copy_(p[2]) end
        end
    end)
    return missing, unexpected
end

local function check_module(fname, m)
    if not is_module(m) then fail(fmt("%s: expected a module, got %s", fname, typename(m))) end
end
function M.save(module, path, extra)
    if extra ~= nil then extra_arg("nn.save", "(module, path)", extra) end
    check_module("nn.save", module)
    return module:save(path)
end
function M.load(module, path, extra)
    if extra ~= nil then extra_arg("nn.load", "(module, path)", extra) end
    check_module("nn.load", module)
    return module:load(path)
end

-- ---------------------------------------------------------------- init

local init = {}
M.init = init

-- fan_in, fan_out of a weight (out, in, k...) as Torch computes them:
-- in · k... and out · k... (a conv weight out × in/groups × kh × kw gives
-- in/groups · kh · kw); fname names the caller in the error of a tensor
-- of fewer than 2 dims, whose fans Torch cannot compute either.
local function fan_in_out(t, fname)
    fname = fname or "init.fan_in_out"
    check_tensor(fname, "the tensor", t)
    local s = shape_of(t)
    if #s < 2 then
        fail(fmt("%s: fan in and fan out need a tensor of at least 2 dims, got shape %s", fname, shape_str(t)))
    end
    local field = 1
    for i = 3, #s do field = field * s[i] end
    return s[2] * field, s[1] * field
end
init.fan_in_out = fan_in_out

local function in_no_grad(fn) return autograd.no_grad(fn) end

-- (the tensor method's errors named after the initialiser called, as the
-- others: "init.constant_: fill_: expected a number", not "fill_: ...")
local own_errors = util.own_errors
function init.uniform_(t, a, b, extra)
    if extra ~= nil then extra_arg("init.uniform_", "(tensor, a, b)", extra) end
    check_tensor("init.uniform_", "the tensor", t)
    return own_errors("init.uniform_", pcall(in_no_grad, function() return t:uniform_(a or 0, b or 1) end))
end
function init.normal_(t, mean, std, extra)
    if extra ~= nil then extra_arg("init.normal_", "(tensor, mean, std)", extra) end
    check_tensor("init.normal_", "the tensor", t)
    return own_errors("init.normal_", pcall(in_no_grad, function() return t:normal_(mean or 0, std or 1) end))
end
local function constant(fname, t, v)
    check_tensor(fname, "the tensor", t)
    return own_errors(fname, pcall(in_no_grad, function() return t:fill_(v) end))
end
function init.constant_(t, v, extra)
    if extra ~= nil then extra_arg("init.constant_", "(tensor, val)", extra) end
    return constant("init.constant_", t, v)
end
function init.zeros_(t, extra)
    if extra ~= nil then extra_arg("init.zeros_", "(tensor)", extra) end
    return constant("init.zeros_", t, 0)
end
function init.ones_(t, extra)
    if extra ~= nil then extra_arg("init.ones_", "(tensor)", extra) end
    return constant("init.ones_", t, 1)
end

-- Torch's calculate_gain(nonlinearity [, param]): the gain that keeps the
-- variance of activations through the nonlinearity -- 1 for "linear",
-- the conv names and "sigmoid", 5/3 for "tanh", sqrt 2 for "relu",
-- sqrt(2 / (1 + slope^2)) for "leaky_relu" (param the negative slope,
-- 0.01 by default), 3/4 for "selu".
local UNIT_GAIN = {linear = true, conv1d = true, conv2d = true, conv3d = true, conv_transpose1d = true,
                   conv_transpose2d = true, conv_transpose3d = true, sigmoid = true}
local function gain_of(fname, nonlinearity, param)
    if UNIT_GAIN[nonlinearity] then return 1 end
    if nonlinearity == "tanh" then return 5 / 3 end
    if nonlinearity == "relu" then return math.sqrt(2) end
    if nonlinearity == "selu" then return 3 / 4 end
    if nonlinearity == "leaky_relu" then
        if param == nil then param = 0.01 end
        if type(param) ~= "number" or param ~= param then
            fail(fmt("%s: the negative slope must be a number, got %s", fname,
                     type(param) == "number" and "nan" or typename(param)))
        end
        return math.sqrt(2 / (1 + param ^ 2))
    end
    fail(fmt("%s: unsupported nonlinearity %s (expected linear, conv1d..3d, conv_transpose1d..3d, sigmoid, "
             .. "tanh, relu, leaky_relu or selu)", fname,
             type(nonlinearity) == "string" and fmt("%q", nonlinearity) or typename(nonlinearity)))
end
function init.calculate_gain(nonlinearity, param, extra)
    if extra ~= nil then extra_arg("init.calculate_gain", "(nonlinearity, param)", extra) end
    return gain_of("init.calculate_gain", nonlinearity, param)
end

-- He et al.'s gain over the fan of mode ("fan_in", the default, or
-- "fan_out"), Torch's kaiming_*_(t, a, mode, nonlinearity): the gain is
-- calculate_gain(nonlinearity, a), nonlinearity "leaky_relu" by default,
-- so sqrt(2 / (1 + a^2)) (a: the negative slope of the leaky ReLU after
-- the layer, 0 for ReLU).  A tensor of no elements is left as it is.
local function kaiming_std(fname, t, a, mode, nonlinearity)
    local fan_in, fan_out = fan_in_out(t, fname)
    if a ~= nil and (type(a) ~= "number" or a ~= a) then
        fail(fname .. ": a must be a number, got " .. (type(a) == "number" and "nan" or typename(a)))
    end
    if mode ~= nil and mode ~= "fan_in" and mode ~= "fan_out" then
        fail(fmt("%s: mode must be \"fan_in\" or \"fan_out\", got %s", fname, tostring(mode)))
    end
    local gain = gain_of(fname, nonlinearity or "leaky_relu", a or 0)
    local fan = mode == "fan_out" and fan_out or fan_in
    return gain / math.sqrt(fan)
end

-- He et al.: U(-b, b) with b = sqrt(3) * gain / sqrt(fan).
function init.kaiming_uniform_(t, a, mode, nonlinearity, extra)
    if extra ~= nil then extra_arg("init.kaiming_uniform_", "(tensor, a, mode, nonlinearity)", extra) end
    local bound = math.sqrt(3) * kaiming_std("init.kaiming_uniform_", t, a, mode, nonlinearity)
    if t:numel() == 0 then return t end
    return init.uniform_(t, -bound, bound)
end

-- He et al.: N(0, std^2) with std = gain / sqrt(fan).
function init.kaiming_normal_(t, a, mode, nonlinearity, extra)
    if extra ~= nil then extra_arg("init.kaiming_normal_", "(tensor, a, mode, nonlinearity)", extra) end
    local std = kaiming_std("init.kaiming_normal_", t, a, mode, nonlinearity)
    if t:numel() == 0 then return t end
    return init.normal_(t, 0, std)
end

local function xavier_std(fname, t, gain)
    local fi, fo = fan_in_out(t, fname)
    if gain ~= nil and (type(gain) ~= "number" or gain ~= gain or math.abs(gain) == math.huge) then
        fail(fname .. ": gain must be a finite number, got " .. (type(gain) == "number" and tostring(gain)
             or typename(gain)))
    end
    return (gain or 1) * math.sqrt(2 / (fi + fo))
end

-- Glorot: U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)).
function init.xavier_uniform_(t, gain, extra)
    if extra ~= nil then extra_arg("init.xavier_uniform_", "(tensor, gain)", extra) end
    local bound = math.sqrt(3) * xavier_std("init.xavier_uniform_", t, gain)
    if t:numel() == 0 then return t end
    return init.uniform_(t, -bound, bound)
end

-- Glorot: N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)).
function init.xavier_normal_(t, gain, extra)
    if extra ~= nil then extra_arg("init.xavier_normal_", "(tensor, gain)", extra) end
    local std = xavier_std("init.xavier_normal_", t, gain)
    if t:numel() == 0 then return t end
    return init.normal_(t, 0, std)
end

-- erfc(x) for a Lua number (Numerical Recipes' erfcc: relative error
-- below 1.2e-7, in the tails too) and the standard normal's CDF from it.
local function erfc(x)
    local z = math.abs(x)
    local t = 1 / (1 + 0.5 * z)
    local r = t * math.exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
        t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 +
        t * 0.17087277)))))))))
    return x >= 0 and r or 2 - r
end
local function norm_cdf(z) return 0.5 * erfc(-z / math.sqrt(2)) end

-- Torch's trunc_normal_(t [, mean = 0, std = 1, a = -2, b = 2]): N(mean,
-- std^2) kept to [a, b] (a and b in t's units, not in stds), drawn as
-- Torch draws it: a uniform draw between the normal CDF at a and at b,
-- mapped back through the inverse CDF, then clamped to [a, b].
function init.trunc_normal_(t, mean, std, a, b, extra)
    if extra ~= nil then extra_arg("init.trunc_normal_", "(tensor, mean, std, a, b)", extra) end
    local fname = "init.trunc_normal_"
    check_tensor(fname, "the tensor", t)
    mean, std, a, b = mean or 0, std or 1, a or -2, b or 2
    for _, v in ipairs({{"mean", mean}, {"std", std}, {"a", a}, {"b", b}}) do
        if type(v[2]) ~= "number" or v[2] ~= v[2] or math.abs(v[2]) == math.huge then
            fail(fmt("%s: %s must be a finite number, got %s", fname, v[1],
                     type(v[2]) == "number" and tostring(v[2]) or typename(v[2])))
        end
    end
    if not (std > 0) then fail(fmt("%s: std must be > 0, got %s", fname, tostring(std))) end
    if not (a < b) then fail(fmt("%s: expected a < b, got a = %s and b = %s", fname, tostring(a), tostring(b))) end
    if t:dtype() ~= "float32" and t:dtype() ~= "float64" then
        fail(fmt("%s: dtype %s not supported (expected float32 or float64)", fname, t:dtype()))
    end
    if t:numel() == 0 then return t end
    local l, u = 2 * norm_cdf((a - mean) / std) - 1, 2 * norm_cdf((b - mean) / std) - 1
    return autograd.no_grad(function()
        -- in float64, kept inside (-1, 1): erfinv(+-1) is infinite
        local x = tensor.empty_like(t, "float64"):uniform_(l, u):clamp_(-1 + 2 ^ -53, 1 - 2 ^ -53)
        t:copy_(x:erfinv() * (std * math.sqrt(2)) + mean) -- (the kernel: one push, not ~40)
        return t:clamp_(a, b)
    end)
end

-- Torch's eye_(t): a 2-dim t made the identity (ones on its diagonal,
-- zeros elsewhere; a non-square t too).
function init.eye_(t, extra)
    if extra ~= nil then extra_arg("init.eye_", "(tensor)", extra) end
    check_tensor("init.eye_", "the tensor", t)
    if t:dim() ~= 2 then fail("init.eye_: expected a 2-dim tensor, got shape " .. shape_str(t)) end
    local eye = require("ordo.derived").eye(t:size(1), t:size(2), tensor.like(t))
    return autograd.no_grad(function() return t:copy_(eye) end)
end

-- Torch's dirac_(t [, groups = 1]): a convolution weight (3, 4 or 5 dims,
-- out x in x k...) that passes its input through: in each of the groups,
-- output channel d takes input channel d at the kernel's centre (k // 2,
-- from 0), for d up to the smaller of out / groups and in; zeros elsewhere.
function init.dirac_(t, groups, extra)
    if extra ~= nil then extra_arg("init.dirac_", "(tensor, groups)", extra) end
    local fname = "init.dirac_"
    check_tensor(fname, "the tensor", t)
    if t:dim() < 3 or t:dim() > 5 then
        fail(fmt("%s: expected a 3, 4 or 5-dim convolution weight, got shape %s", fname, shape_str(t)))
    end
    groups = groups or 1
    if not is_int(groups) or groups < 1 or t:size(1) % groups ~= 0 then
        fail(fmt("%s: groups must be an integer >= 1 that divides the %d output channels, got %s", fname, t:size(1),
                 type(groups) == "number" and tostring(groups) or typename(groups)))
    end
    local per = t:size(1) / groups
    return autograd.no_grad(function()
        t:zero_()
        for g = 0, groups - 1 do
            for d = 1, math.min(per, t:size(2)) do
                local v = t:narrow(1, g * per + d, 1):narrow(2, d, 1)
                for k = 3, t:dim() do v = v:narrow(k, math.floor(t:size(k) / 2) + 1, 1) end
                v:fill_(1)
            end
        end
        return t
    end)
end

-- Torch's sparse_(t, sparsity [, std = 0.01]): a 2-dim t drawn N(0, std²),
-- then in each column ceil(sparsity · rows) elements, at random rows, set
-- to 0 (the sparse initialisation of Martens, 2010).
function init.sparse_(t, sparsity, std, extra)
    local fname = "init.sparse_"
    if extra ~= nil then extra_arg(fname, "(tensor, sparsity, std)", extra) end
    check_tensor(fname, "the tensor", t)
    if t:dim() ~= 2 then fail(fmt("%s: only 2-dim tensors are supported, got shape %s", fname, shape_str(t))) end
    if t:dtype() ~= "float32" and t:dtype() ~= "float64" then
        fail(fmt("%s: dtype %s not supported (expected float32 or float64)", fname, t:dtype()))
    end
    if type(sparsity) ~= "number" or not (sparsity >= 0 and sparsity <= 1) then
        fail(fmt("%s: sparsity must be a number in [0, 1], got %s", fname,
                 type(sparsity) == "number" and tostring(sparsity) or typename(sparsity)))
    end
    if std == nil then std = 0.01 end
    if type(std) ~= "number" or not (std >= 0) or std == math.huge then
        fail(fmt("%s: std must be a finite number >= 0, got %s", fname,
                 type(std) == "number" and tostring(std) or typename(std)))
    end
    local rows, cols = t:size(1), t:size(2)
    local nzero = math.ceil(sparsity * rows)
    return autograd.no_grad(function()
        t:normal_(0, std)
        if nzero > 0 and cols > 0 then
            -- each column's rows in a random order: the first nzero of that order zeroed
            local rank = tensor.rand({rows, cols}, {device = t:device()}):argsort(1):argsort(1) -- 1-based ranks
            t:masked_fill_(rank:le(nzero), 0)
        end
        return t
    end)
end

-- Torch's orthogonal_(t [, gain = 1]): t seen as rows x cols (its first
-- dim by the rest) made (semi-)orthogonal, times gain -- orthonormal
-- columns when rows >= cols, orthonormal rows otherwise -- drawn as Torch
-- draws it: the Q of a normal matrix's QR with R's diagonal made positive
-- (Haar-distributed), here computed by Gram-Schmidt, each column
-- orthogonalised twice (the same Q, which that sign fixes), in float64.
function init.orthogonal_(t, gain, extra)
    if extra ~= nil then extra_arg("init.orthogonal_", "(tensor, gain)", extra) end
    local fname = "init.orthogonal_"
    check_tensor(fname, "the tensor", t)
    if t:dim() < 2 then fail(fmt("%s: expected a tensor of at least 2 dims, got shape %s", fname, shape_str(t))) end
    if t:dtype() ~= "float32" and t:dtype() ~= "float64" then
        fail(fmt("%s: dtype %s not supported (expected float32 or float64)", fname, t:dtype()))
    end
    if gain ~= nil and (type(gain) ~= "number" or gain ~= gain) then
        fail(fmt("%s: gain must be a number, got %s", fname, type(gain) == "number" and "nan" or typename(gain)))
    end
    if t:numel() == 0 then return t end
    local rows = t:size(1)
    local cols = t:numel() / rows
    return autograd.no_grad(function()
        local a = tensor.empty_like(t, "float64"):normal_(0, 1):reshape(rows, cols)
        if rows < cols then a = a:t() end
        local n, k = a:size(1), a:size(2)
        local q = tensor.zeros({n, k}, tensor.like(a))
        for j = 1, k do
            local v = a:narrow(2, j, 1)
            if j > 1 then
                local Q = q:narrow(2, 1, j - 1)
                for _ = 1, 2 do v = v - Q:matmul(Q:t():matmul(v)) end
            end
            q:narrow(2, j, 1):copy_(v / v:norm())
        end
        if rows < cols then q = q:t() end
        t:copy_((q * (gain or 1)):reshape(t:shape()))
        return t
    end)
end

-- Torch's keyword arguments as an options table, the last argument:
-- init.kaiming_normal_(w, {mode = "fan_out", nonlinearity = "relu"}) (a
-- table there was refused as "a must be a number"), positional values
-- before it filling the first names; an unknown name, a name given both
-- ways or an argument past the function's own raises (one past them was
-- dropped unseen: init.normal_(w, 0, 0.02, 1) drew N(0, 0.02^2)).
local INIT_ARGS = {
    uniform_ = {"a", "b"}, normal_ = {"mean", "std"}, constant_ = {"val"}, zeros_ = {}, ones_ = {},
    kaiming_uniform_ = {"a", "mode", "nonlinearity"}, kaiming_normal_ = {"a", "mode", "nonlinearity"},
    xavier_uniform_ = {"gain"}, xavier_normal_ = {"gain"}, trunc_normal_ = {"mean", "std", "a", "b"},
    eye_ = {}, dirac_ = {"groups"}, orthogonal_ = {"gain"}, sparse_ = {"sparsity", "std"},
}
local function init_args(fname, names, ...)
    local n = select("#", ...)
    while n > 0 and select(n, ...) == nil do n = n - 1 end
    local args = {...}
    local last = args[n]
    if n > 0 and type(last) == "table" and getmetatable(last) == nil then
        args[n] = nil
        n = n - 1
        local pos = {}
        for i, k in ipairs(names) do pos[k] = i end
        for k, v in pairs(last) do
            local i = pos[k]
            if not i then
                fail(fmt("%s: unknown option '%s' (expected %s)", fname, tostring(k),
                         #names > 0 and table.concat(names, ", ") or "none"))
            end
            if i <= n and args[i] ~= nil then fail(fmt("%s: %s given twice (by position and by name)", fname, k)) end
            args[i] = v
        end
    end
    if n > #names then
        extra_arg(fname, #names > 0 and "(tensor, " .. table.concat(names, ", ") .. ")" or "(tensor)", args[#names + 1])
    end
    return unpack(args, 1, #names)
end
for name, names in pairs(INIT_ARGS) do
    local fn, fname = init[name], "init." .. name
    init[name] = function(t, ...) return fn(t, init_args(fname, names, ...)) end
end

-- ---------------------------------------------------------------- layers

local check_int, opts_of = util.check_positive_int, util.check_opts

-- Linear(in, out [, {bias = true, dtype = "float32", device}]): y = x W^T
-- + b, initialised like Torch (kaiming uniform with a = sqrt 5:
-- U(±1/sqrt(in))).
local Linear = Module:extend("Linear")
M.Linear = Linear

local LINEAR_OPTS = {bias = true, dtype = true, device = true}
function Linear:init(nin, nout, opts)
    check_int("Linear", "in_features", nin)
    check_int("Linear", "out_features", nout)
    opts = opts_of("Linear", opts, LINEAR_OPTS) -- a misspelt option (bais = false) is an error, not ignored
    if opts.bias ~= nil and type(opts.bias) ~= "boolean" then
        fail("Linear: option bias must be a boolean, got " .. typename(opts.bias))
    end
    self.in_features, self.out_features = nin, nout
    local topts = util.param_opts(opts, self)
    local w = tensor.empty({nout, nin}, topts)
    init.kaiming_uniform_(w, math.sqrt(5))
    self:register_parameter("weight", w)
    if opts.bias ~= false then
        local bound = 1 / math.sqrt(nin)
        self:register_parameter("bias", init.uniform_(tensor.empty({nout}, topts), -bound, bound))
    end
end

function Linear:forward(x) return F.linear(x, self.weight, self.bias, "Linear") end

-- Bilinear(in1, in2, out [, {bias = true, dtype, device}]): Torch's,
-- y = x1^T A x2 + b, weight out × in1 × in2 and bias drawn
-- U(-1/sqrt(in1), 1/sqrt(in1)); forward(x1, x2).
local Bilinear = Module:extend("Bilinear")
M.Bilinear = Bilinear
function Bilinear:init(n1, n2, nout, opts)
    check_int("Bilinear", "in1_features", n1)
    check_int("Bilinear", "in2_features", n2)
    check_int("Bilinear", "out_features", nout)
    opts = opts_of("Bilinear", opts, LINEAR_OPTS)
    if opts.bias ~= nil and type(opts.bias) ~= "boolean" then
        fail("Bilinear: option bias must be a boolean, got " .. typename(opts.bias))
    end
    self.in1_features, self.in2_features, self.out_features = n1, n2, nout
    local topts = util.param_opts(opts, self)
    local bound = 1 / math.sqrt(n1)
    self:register_parameter("weight", init.uniform_(tensor.empty({nout, n1, n2}, topts), -bound, bound))
    if opts.bias ~= false then
        self:register_parameter("bias", init.uniform_(tensor.empty({nout}, topts), -bound, bound))
    end
end
function Bilinear:forward(x1, x2) return F.bilinear(x1, x2, self.weight, self.bias, "Bilinear") end
function Bilinear:extra_repr()
    return fmt("in1_features = %d, in2_features = %d, out_features = %d%s", self.in1_features, self.in2_features,
               self.out_features, self.bias and "" or ", bias = false")
end
function Linear:extra_repr()
    return fmt("%d -> %d%s", self.in_features, self.out_features, self.bias and "" or ", no bias")
end

-- An activation without options: an argument (Torch's inplace = True,
-- a Softplus beta) would otherwise be dropped unseen.
-- (fn(x, inplace, who), or fn(x, who) when plain: Softsign, LogSigmoid,
-- whose functional forms take no inplace, as Torch's)
local function activation(name, fn, plain)
    local cls = Module:extend(name)
    cls.init = function(_, ...)
        if select("#", ...) > 0 then
            fail(fmt("%s: takes no options, got %s", name, typename((...))))
        end
    end
    if plain then
        cls.forward = function(_, x) return fn(x, name) end
    else
        cls.forward = function(_, x) return fn(x, nil, name) end
    end
    M[name] = cls
    return cls
end
activation("ReLU", F.relu)
activation("Tanh", F.tanh)
activation("Sigmoid", F.sigmoid)
activation("SiLU", F.silu)
-- GELU([approximate]) or GELU({approximate = "none" | "tanh"}): the exact
-- erf form by default, as Torch's; "tanh" is the tanh approximation.
local GELU = Module:extend("GELU")
M.GELU = GELU
function GELU:init(a)
    if type(a) == "table" and getmetatable(a) == nil then
        a = opts_of("GELU", a, {approximate = true}).approximate
    end
    if a ~= nil and a ~= "tanh" and a ~= "none" then
        fail(fmt("GELU: approximate must be \"tanh\" or \"none\", got %s", type(a) == "string" and fmt("%q", a)
                 or typename(a)))
    end
    self.approximate = a or "none"
end
function GELU:forward(x) return F.gelu(x, self.approximate, "GELU") end
function GELU:extra_repr() return "approximate = " .. self.approximate end
-- Softplus(beta = 1, threshold = 20), or Softplus({beta =, threshold =}):
-- log(1 + exp(beta x)) / beta, x itself where beta x > threshold (Torch's).
local Softplus = Module:extend("Softplus")
M.Softplus = Softplus
function Softplus:init(beta, threshold)
    if type(beta) == "table" and getmetatable(beta) == nil then
        if threshold ~= nil then fail("Softplus: expected an options table or numbers, got a table and more") end
        local o = opts_of("Softplus", beta, {beta = true, threshold = true})
        beta, threshold = o.beta, o.threshold
    end
    beta, threshold = beta or 1, threshold or 20
    if type(beta) ~= "number" or beta ~= beta or beta == 0 or math.abs(beta) == math.huge then
        fail("Softplus: beta must be a finite nonzero number, got " .. util.show(beta))
    end
    if type(threshold) ~= "number" or threshold ~= threshold then
        fail("Softplus: threshold must be a number, got " .. util.show(threshold))
    end
    self.beta, self.threshold = beta, threshold
end
function Softplus:forward(x) return F.softplus(x, self.beta, self.threshold, "Softplus") end
function Softplus:extra_repr() return fmt("beta = %g, threshold = %g", self.beta, self.threshold) end
activation("SELU", F.selu)
activation("ReLU6", F.relu6)
activation("Hardsigmoid", F.hardsigmoid)
activation("Hardswish", F.hardswish)
activation("Mish", F.mish)
activation("Softsign", F.softsign, true)
activation("LogSigmoid", F.logsigmoid, true)

-- A module of fn(x, v) with one number option v (field, default),
-- checked when the module is made.
local function activation_with(name, field, default, fn)
    local cls = Module:extend(name)
    cls.init = function(self, v)
        if v == nil then v = default end
        if type(v) ~= "number" then fail(fmt("%s: %s must be a number, got %s", name, field, typename(v))) end
        self[field] = v
    end
    cls.forward = function(self, x) return fn(x, self[field], nil, name) end
    cls.extra_repr = function(self) return fmt("%s = %g", field, self[field]) end
    M[name] = cls
    return cls
end
-- LeakyReLU(slope = 0.01): x where x > 0, slope * x elsewhere.
activation_with("LeakyReLU", "slope", 0.01, F.leaky_relu)
-- ELU(alpha = 1): x where x > 0, alpha (e^x - 1) elsewhere.
activation_with("ELU", "alpha", 1, F.elu)
-- CELU(alpha = 1), Softshrink(lambd = 0.5), Hardshrink(lambd = 0.5), Torch's
-- (their options checked when the module is made, as F checks them)
do
    local cls = activation_with("CELU", "alpha", 1, F.celu)
    local init = cls.init
    cls.init = function(self, v)
        init(self, v)
        F.celu(tensor.zeros({1}), self.alpha, nil, "CELU") -- (alpha checked at construction: 0 is refused)
    end
end
local function shrink_module(name, fn)
    local cls = activation_with(name, "lambd", 0.5, function(x, v, _, who) return fn(x, v, who) end)
    local init = cls.init
    cls.init = function(self, v)
        init(self, v)
        fn(tensor.zeros({1}), self.lambd, name) -- (the function's own checks of lambd, at construction)
    end
    return cls
end
shrink_module("Softshrink", F.softshrink)
shrink_module("Hardshrink", F.hardshrink)
activation("Tanhshrink", F.tanhshrink, true)
-- Threshold(threshold, value): x where x > threshold, value elsewhere.
local Threshold = Module:extend("Threshold")
M.Threshold = Threshold
function Threshold:init(threshold, value)
    if type(threshold) ~= "number" or type(value) ~= "number" then
        fail(fmt("Threshold: expected numbers threshold and value, got %s and %s", util.show(threshold),
                 util.show(value)))
    end
    self.threshold, self.value = threshold, value
end
function Threshold:forward(x) return F.threshold(x, self.threshold, self.value, nil, "Threshold") end
function Threshold:extra_repr() return fmt("threshold = %g, value = %g", self.threshold, self.value) end
-- GLU(dim = -1): the first half of dim gated by the sigmoid of the second.
local GLU = Module:extend("GLU")
M.GLU = GLU
function GLU:init(dim)
    dim = dim == nil and -1 or dim
    if type(dim) ~= "number" or dim ~= math.floor(dim) then
        fail("GLU: dim must be an integer, got " .. util.show(dim))
    end
    self.dim = dim
end
function GLU:forward(x) return F.glu(x, self.dim, "GLU") end
function GLU:extra_repr() return "dim = " .. self.dim end

-- Hardtanh(min_val = -1, max_val = 1)
local Hardtanh = Module:extend("Hardtanh")
M.Hardtanh = Hardtanh
function Hardtanh:init(min_val, max_val)
    min_val, max_val = min_val or -1, max_val or 1
    if type(min_val) ~= "number" or type(max_val) ~= "number" or min_val > max_val then
        fail(fmt("Hardtanh: expected numbers min_val <= max_val, got %s and %s", tostring(min_val), tostring(max_val)))
    end
    self.min_val, self.max_val = min_val, max_val
end
function Hardtanh:forward(x) return F.hardtanh(x, self.min_val, self.max_val, nil, "Hardtanh") end
function Hardtanh:extra_repr() return fmt("%g, %g", self.min_val, self.max_val) end

-- PReLU(num_parameters = 1 [, {init = 0.25, dtype =, device =}]): a learned
-- slope for x < 0, one for all channels or one per channel.
local PReLU = Module:extend("PReLU")
M.PReLU = PReLU
function PReLU:init(n, opts)
    n = n or 1
    check_int("PReLU", "num_parameters", n)
    opts = opts_of("PReLU", opts, {init = true, dtype = true, device = true})
    local init_v = opts.init or 0.25
    if type(init_v) ~= "number" then fail("PReLU: init must be a number, got " .. typename(init_v)) end
    self.num_parameters = n
    self:register_parameter("weight", tensor.full({n}, init_v, util.param_opts(opts, self)))
end
function PReLU:forward(x) return F.prelu(x, self.weight, "PReLU") end
function PReLU:extra_repr() return fmt("%d", self.num_parameters) end

-- LayerNorm(shape [, {eps = 1e-5, affine = true, bias = true, dtype =,
-- device =}]): normalises the last dims (shape: a size or a table of
-- sizes), then scales and shifts by learned weight (ones) and bias
-- (zeros); bias = false keeps the scale alone.  elementwise_affine is
-- Torch's name for affine.
local LayerNorm = Module:extend("LayerNorm")
M.LayerNorm = LayerNorm
local LAYERNORM_OPTS = {eps = true, affine = true, elementwise_affine = true, bias = true, dtype = true,
                        device = true}
function LayerNorm:init(shape, opts)
    if type(shape) == "number" then shape = {shape} end
    if type(shape) ~= "table" or #shape == 0 then
        fail("LayerNorm: expected the normalized shape (a size or a table of sizes), got " .. typename(shape))
    end
    for i, n in ipairs(shape) do check_int("LayerNorm", "size " .. i, n) end
    opts = opts_of("LayerNorm", opts, LAYERNORM_OPTS)
    for _, k in ipairs({"affine", "elementwise_affine", "bias"}) do
        if opts[k] ~= nil and type(opts[k]) ~= "boolean" then
            fail(fmt("LayerNorm: option %s must be a boolean, got %s", k, typename(opts[k])))
        end
    end
    if opts.eps ~= nil and (type(opts.eps) ~= "number" or not (opts.eps >= 0)) then
        fail("LayerNorm: option eps must be a non-negative number, got " .. util.show(opts.eps))
    end
    local affine = opts.affine
    if opts.elementwise_affine ~= nil then
        if affine ~= nil and affine ~= opts.elementwise_affine then
            fail("LayerNorm: affine and elementwise_affine (its Torch name) disagree")
        end
        affine = opts.elementwise_affine
    end
    self.normalized_shape, self.eps = shape, opts.eps or 1e-5
    if affine ~= false then
        local topts = util.param_opts(opts, self)
        self:register_parameter("weight", tensor.ones(shape, topts))
        if opts.bias ~= false then self:register_parameter("bias", tensor.zeros(shape, topts)) end
    end
end
function LayerNorm:forward(x)
    return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps, "LayerNorm")
end
function LayerNorm:extra_repr()
    return fmt("%s, eps = %g%s", tensor.shape_str(self.normalized_shape), self.eps,
               self.weight == nil and ", no affine" or self.bias == nil and ", no bias" or "")
end

-- RMSNorm(shape [, {eps, elementwise_affine = true, dtype =, device =}])
-- (Torch's): rms_norm over the last dims, scaled by a learned weight
-- (ones); eps nil: the input dtype's machine epsilon.
local RMSNorm = Module:extend("RMSNorm")
M.RMSNorm = RMSNorm
function RMSNorm:init(shape, opts)
    if type(shape) == "number" then shape = {shape} end
    if type(shape) ~= "table" or #shape == 0 then
        fail("RMSNorm: expected the normalized shape (a size or a table of sizes), got " .. typename(shape))
    end
    for i, n in ipairs(shape) do check_int("RMSNorm", "size " .. i, n) end
    opts = opts_of("RMSNorm", opts, {eps = true, elementwise_affine = true, dtype = true, device = true})
    if opts.elementwise_affine ~= nil and type(opts.elementwise_affine) ~= "boolean" then
        fail("RMSNorm: option elementwise_affine must be a boolean, got " .. typename(opts.elementwise_affine))
    end
    if opts.eps ~= nil and (type(opts.eps) ~= "number" or not (opts.eps >= 0)) then
        fail("RMSNorm: option eps must be a non-negative number, got " .. util.show(opts.eps))
    end
    self.normalized_shape, self.eps = shape, opts.eps
    if opts.elementwise_affine ~= false then
        self:register_parameter("weight", tensor.ones(shape, util.param_opts(opts, self)))
    end
end
function RMSNorm:forward(x) return F.rms_norm(x, self.normalized_shape, self.weight, self.eps, "RMSNorm") end
function RMSNorm:extra_repr()
    return fmt("%s, eps = %s%s", tensor.shape_str(self.normalized_shape), self.eps and fmt("%g", self.eps) or "None",
               self.weight == nil and ", no affine" or "")
end

-- GroupNorm(num_groups, num_channels [, {eps = 1e-5, affine = true,
-- dtype =, device =}]): group_norm with a learned weight (ones) and bias
-- (zeros) per channel.
local GroupNorm = Module:extend("GroupNorm")
M.GroupNorm = GroupNorm
function GroupNorm:init(groups, channels, opts)
    check_int("GroupNorm", "num_groups", groups)
    check_int("GroupNorm", "num_channels", channels)
    if channels % groups ~= 0 then
        fail(fmt("GroupNorm: num_groups %d must divide num_channels %d", groups, channels))
    end
    opts = opts_of("GroupNorm", opts, {eps = true, affine = true, dtype = true, device = true})
    if opts.eps ~= nil and (type(opts.eps) ~= "number" or not (opts.eps >= 0)) then
        fail("GroupNorm: option eps must be a non-negative number, got " .. util.show(opts.eps))
    end
    if opts.affine ~= nil and type(opts.affine) ~= "boolean" then
        fail("GroupNorm: option affine must be a boolean, got " .. typename(opts.affine))
    end
    self.num_groups, self.num_channels, self.eps = groups, channels, opts.eps or 1e-5
    if opts.affine ~= false then
        local topts = util.param_opts(opts, self)
        self:register_parameter("weight", tensor.ones({channels}, topts))
        self:register_parameter("bias", tensor.zeros({channels}, topts))
    end
end
function GroupNorm:forward(x)
    if is_tensor(x) and (x:dim() < 2 or x:size(2) ~= self.num_channels) then
        fail(fmt("GroupNorm: expected an input of shape N x %d x ..., got %s", self.num_channels, shape_str(x)))
    end
    return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps, "GroupNorm")
end
function GroupNorm:extra_repr()
    return fmt("%d groups, %d channels, eps = %g%s", self.num_groups, self.num_channels, self.eps,
               self.weight == nil and ", no affine" or "")
end

-- Padding layers (F.pad as modules): ZeroPad2d(p), ConstantPad2d(p, value),
-- ReflectionPad2d(p), ReplicationPad2d(p) and the 1d ones, p a size for
-- every side or {left, right [, top, bottom]} as F.pad takes it.
local function pad_class(name, mode, sides, with_value)
    local cls = Module:extend(name)
    M[name] = cls
    function cls:init(p, value)
        if type(p) == "number" then
            local t = {}
            for i = 1, sides do t[i] = p end
            p = t
        end
        if type(p) ~= "table" or #p ~= sides then
            fail(fmt("%s: expected a padding size or %d of them, got %s", name, sides,
                     type(p) == "table" and #p .. " of them" or typename(p)))
        end
        for i = 1, sides do
            if not is_int(p[i]) then
                fail(fmt("%s: paddings must be integers, got %s", name, tostring(p[i])))
            end
        end
        if with_value and type(value) ~= "number" then
            fail(fmt("%s: expected the value to pad with, got %s", name, typename(value)))
        end
        if not with_value and value ~= nil then fail(fmt("%s: takes 1 argument, got 2", name)) end
        self.padding, self.value = p, with_value and value or 0
    end
    function cls:forward(x) return F.pad(x, self.padding, {mode = mode, value = self.value}, name) end
    function cls:extra_repr()
        local s = table.concat(self.padding, ", ")
        return with_value and fmt("%s, value = %g", s, self.value) or s
    end
end
pad_class("ZeroPad1d", "constant", 2)
pad_class("ZeroPad2d", "constant", 4)
pad_class("ConstantPad1d", "constant", 2, true)
pad_class("ConstantPad2d", "constant", 4, true)
pad_class("ReflectionPad1d", "reflect", 2)
pad_class("ReflectionPad2d", "reflect", 4)
pad_class("ReplicationPad1d", "replicate", 2)
pad_class("ReplicationPad2d", "replicate", 4)
pad_class("ZeroPad3d", "constant", 6)
pad_class("ConstantPad3d", "constant", 6, true)
pad_class("ReflectionPad3d", "reflect", 6)
pad_class("ReplicationPad3d", "replicate", 6)
pad_class("CircularPad1d", "circular", 2)
pad_class("CircularPad2d", "circular", 4)
pad_class("CircularPad3d", "circular", 6)

-- PixelShuffle(r) / PixelUnshuffle(r): F.pixel_shuffle / pixel_unshuffle.
local function factor_class(name, fn)
    local cls = Module:extend(name)
    M[name] = cls
    function cls:init(r)
        check_int(name, "factor", r)
        self.factor = r
    end
    function cls:forward(x) return fn(x, self.factor, name) end
    function cls:extra_repr() return tostring(self.factor) end
end
factor_class("PixelShuffle", F.pixel_shuffle)
factor_class("PixelUnshuffle", F.pixel_unshuffle)

-- LocalResponseNorm(size [, alpha = 1e-4, beta = 0.75, k = 1]) (or
-- (size, {alpha =, beta =, k =})): F.local_response_norm, as Torch's.
local LocalResponseNorm = Module:extend("LocalResponseNorm")
M.LocalResponseNorm = LocalResponseNorm
function LocalResponseNorm:init(size, alpha, beta, k)
    if type(alpha) == "table" and getmetatable(alpha) == nil then
        if beta ~= nil or k ~= nil then
            fail("LocalResponseNorm: give alpha, beta and k as numbers or in one options table, not both")
        end
        local o = opts_of("LocalResponseNorm", alpha, {alpha = true, beta = true, k = true})
        alpha, beta, k = o.alpha, o.beta, o.k
    end
    self.size, self.alpha = size, alpha == nil and 1e-4 or alpha
    self.beta, self.k = beta == nil and 0.75 or beta, k == nil and 1 or k
    -- checked now, on a small input (the errors of a bad option at construction, not the first forward)
    F.local_response_norm(tensor.zeros({1, 1, 1}), self.size, self.alpha, self.beta, self.k, "LocalResponseNorm")
end
function LocalResponseNorm:forward(x)
    return F.local_response_norm(x, self.size, self.alpha, self.beta, self.k, "LocalResponseNorm")
end
function LocalResponseNorm:extra_repr()
    return fmt("%d, alpha = %g, beta = %g, k = %g", self.size, self.alpha, self.beta, self.k)
end

-- ChannelShuffle(groups): F.channel_shuffle, as Torch's.
local ChannelShuffle = Module:extend("ChannelShuffle")
M.ChannelShuffle = ChannelShuffle
function ChannelShuffle:init(groups)
    check_int("ChannelShuffle", "groups", groups)
    self.groups = groups
end
function ChannelShuffle:forward(x) return F.channel_shuffle(x, self.groups, "ChannelShuffle") end
function ChannelShuffle:extra_repr() return "groups = " .. self.groups end

-- Unflatten(dim, sizes): dim of the input split into sizes (Flatten's inverse).
local Unflatten = Module:extend("Unflatten")
M.Unflatten = Unflatten
function Unflatten:init(dim, sizes)
    if not is_int(dim) then fail("Unflatten: dim must be an integer, got " .. tostring(dim)) end
    if type(sizes) ~= "table" or #sizes == 0 then fail("Unflatten: expected a table of sizes, got " .. typename(sizes)) end
    local inferred = 0
    for i, n in ipairs(sizes) do
        if not is_int(n) or n < -1 then
            fail(fmt("Unflatten: size %d must be an integer >= 0 (or -1: inferred), got %s", i, tostring(n)))
        end
        if n == -1 then inferred = inferred + 1 end
    end
    if inferred > 1 then fail("Unflatten: at most one size may be -1 (inferred), got " .. inferred) end
    self.dim, self.sizes = dim, {unpack(sizes)}
end
function Unflatten:extra_repr() return self.dim .. ", " .. table.concat(self.sizes, "x") end
function Unflatten:forward(x)
    check_tensor("Unflatten", "input", x)
    local s = shape_of(x)
    local d = self.dim < 0 and #s + self.dim + 1 or self.dim
    if d < 1 or d > #s then fail(fmt("Unflatten: dim %d out of range for input %s", self.dim, shape_str(x))) end
    -- checked here, so that a mismatch names Unflatten (reshape's error would name reshape)
    local known, inferred = 1, false
    for _, n in ipairs(self.sizes) do
        if n == -1 then inferred = true else known = known * n end
    end
    if (inferred and (known == 0 or s[d] % known ~= 0)) or (not inferred and known ~= s[d]) then
        fail(fmt("Unflatten: sizes %s do not fit dim %d of size %d (input %s)", tensor.shape_str(self.sizes), d,
                 s[d], shape_str(x)))
    end
    local out = {}
    for i = 1, d - 1 do out[#out + 1] = s[i] end
    for _, n in ipairs(self.sizes) do out[#out + 1] = n end
    for i = d + 1, #s do out[#out + 1] = s[i] end
    return x:reshape(out)
end

-- Identity(): returns its input (a placeholder in a Sequential).
local Identity = Module:extend("Identity")
M.Identity = Identity
-- (Torch's Identity(*args, **kwargs): any arguments, unused, so that it
-- can stand in for a layer made with them)
function Identity:init(...) end
function Identity:forward(x) return x end

-- Embedding(num, dim [, {dtype =, device =}]): a learned table of num rows
-- of dim, initialised N(0, 1) as Torch; forward(indices) gives the rows at
-- the indices (from 1).
local Embedding = Module:extend("Embedding")
M.Embedding = Embedding
function Embedding:init(num, dim, opts)
    check_int("Embedding", "num_embeddings", num)
    check_int("Embedding", "embedding_dim", dim)
    opts = opts_of("Embedding", opts, {padding_idx = true, dtype = true, device = true})
    local pad = opts.padding_idx
    -- (negative from the end, as Torch's padding_idx = -1 and ordo's t[-1]: kept as the row it names)
    if is_int(pad) and pad < 0 and pad >= -num then pad = num + 1 + pad end
    if pad ~= nil and (not is_int(pad) or pad < 1 or pad > num) then
        fail(fmt("Embedding: padding_idx must be an index in 1..%d (or -%d..-1 from the end), got %s", num, num,
                 tostring(opts.padding_idx)))
    end
    self.num_embeddings, self.embedding_dim, self.padding_idx = num, dim, pad
    local w = tensor.randn({num, dim}, util.param_opts(opts, self))
    if pad then w[pad] = 0 end -- its row starts at zeros and, getting no gradient, stays there
    self:register_parameter("weight", w)
end
function Embedding:forward(indices) return F.embedding(indices, self.weight, self.padding_idx, "Embedding") end

-- Embedding.from_pretrained(weight [, {freeze = true, padding_idx}]): an
-- Embedding whose table is (a copy of) weight, frozen unless freeze = false.
function Embedding.from_pretrained(weight, opts)
    if not is_tensor(weight) or weight:dim() ~= 2 then
        fail("Embedding.from_pretrained: expected a 2-D tensor of rows, got " ..
             (is_tensor(weight) and shape_str(weight) or typename(weight)))
    end
    opts = opts_of("Embedding.from_pretrained", opts, {freeze = true, padding_idx = true})
    if opts.freeze ~= nil and type(opts.freeze) ~= "boolean" then -- (freeze = 0 froze it)
        fail("Embedding.from_pretrained: freeze must be a boolean, got " .. typename(opts.freeze))
    end
    local e = Embedding(weight:size(1), weight:size(2), {padding_idx = opts.padding_idx, dtype = weight:dtype(),
                                                         device = weight:device()})
    autograd.no_grad(function() e.weight:copy_(weight) end)
    if opts.freeze ~= false then e.weight:requires_grad_(false) end
    return e
end
function Embedding:extra_repr()
    local s = fmt("%d, %d", self.num_embeddings, self.embedding_dim)
    return self.padding_idx ~= nil and fmt("%s, padding_idx = %d", s, self.padding_idx) or s
end

-- EmbeddingBag(num, dim [, {mode = "mean", include_last_offset = false,
-- dtype, device}]): Torch's: a learned table of num rows drawn N(0, 1);
-- forward(input [, offsets [, per_sample_weights]]) is F.embedding_bag.
local EmbeddingBag = Module:extend("EmbeddingBag")
M.EmbeddingBag = EmbeddingBag
function EmbeddingBag:init(num, dim, opts)
    check_int("EmbeddingBag", "num_embeddings", num)
    check_int("EmbeddingBag", "embedding_dim", dim)
    opts = opts_of("EmbeddingBag", opts, {mode = true, include_last_offset = true, dtype = true, device = true})
    self.num_embeddings, self.embedding_dim = num, dim
    self.mode = opts.mode == nil and "mean" or opts.mode
    self.include_last_offset = opts.include_last_offset == true
    if opts.include_last_offset ~= nil and type(opts.include_last_offset) ~= "boolean" then
        fail("EmbeddingBag: include_last_offset must be a boolean, got " .. typename(opts.include_last_offset))
    end
    if self.mode ~= "sum" and self.mode ~= "mean" and self.mode ~= "max" then
        fail(fmt("EmbeddingBag: mode must be \"sum\", \"mean\" or \"max\", got %s", util.show(self.mode)))
    end
    self:register_parameter("weight", tensor.randn({num, dim}, util.param_opts(opts, self)))
end
function EmbeddingBag:forward(input, offsets, per_sample_weights)
    return F.embedding_bag(input, self.weight, offsets, {mode = self.mode, per_sample_weights = per_sample_weights,
                           include_last_offset = self.include_last_offset}, "EmbeddingBag")
end
function EmbeddingBag:extra_repr()
    return fmt("%d, %d, mode = %s%s", self.num_embeddings, self.embedding_dim, self.mode,
               self.include_last_offset and ", include_last_offset" or "")
end

local Softmax = Module:extend("Softmax")
M.Softmax = Softmax
local function softmax_dim(name, dim)
    if dim ~= nil and not is_int(dim) then fail(fmt("%s: dim must be an integer, got %s", name, util.show(dim))) end
    return dim or -1
end
function Softmax:init(dim) self.dim = softmax_dim("Softmax", dim) end
function Softmax:extra_repr() return "dim = " .. self.dim end
function Softmax:forward(x)
    check_tensor("Softmax", "input", x) -- (x:softmax on nil or a number: a bare Lua error)
    tensor.norm_dim("Softmax", x, self.dim) -- (a dim out of range named the class, not softmax)
    return x:softmax(self.dim)
end

-- Softmin(dim): softmax of -x, as Torch's
local Softmin = Module:extend("Softmin")
M.Softmin = Softmin
function Softmin:init(dim) self.dim = softmax_dim("Softmin", dim) end
function Softmin:extra_repr() return "dim = " .. self.dim end
function Softmin:forward(x)
    check_tensor("Softmin", "input", x)
    tensor.norm_dim("Softmin", x, self.dim)
    return F.softmin(x, self.dim)
end

-- Softmax2d(): softmax over the channels (dim -3) of N×C×H×W or C×H×W, as Torch's.
local Softmax2d = Module:extend("Softmax2d")
M.Softmax2d = Softmax2d
function Softmax2d:forward(x)
    check_tensor("Softmax2d", "input", x)
    if x:dim() ~= 3 and x:dim() ~= 4 then
        fail(fmt("Softmax2d: expected a 4-D input (N, C, H, W) or a 3-D one (C, H, W), got shape %s", shape_str(x)))
    end
    return x:softmax(-3)
end

local LogSoftmax = Module:extend("LogSoftmax")
M.LogSoftmax = LogSoftmax
function LogSoftmax:init(dim) self.dim = softmax_dim("LogSoftmax", dim) end
function LogSoftmax:extra_repr() return "dim = " .. self.dim end
function LogSoftmax:forward(x)
    check_tensor("LogSoftmax", "input", x) -- (x:log_softmax on nil or a number: a bare Lua error)
    tensor.norm_dim("LogSoftmax", x, self.dim)
    return x:log_softmax(self.dim)
end

-- Dropout(p) zeroes elements with probability p, Dropout2d(p) whole
-- channels, in training mode only.
local function dropout_class(name, fn)
    local cls = Module:extend(name)
    M[name] = cls
    function cls:init(p, ...)
        if select("#", ...) > 0 then -- (Torch's inplace = True was dropped unseen: x kept its values)
            fail(fmt("%s: takes only p, got %s too (in-place dropout is not supported: use the output)", name,
                     typename((...))))
        end
        p = p or 0.5
        if type(p) ~= "number" or not (p >= 0 and p <= 1) then -- (NaN too; 1 drops all, as Torch)
            fail(fmt("%s: p must be a number in [0, 1], got %s", name, tostring(p)))
        end
        self.p = p
    end
    function cls:forward(x) return fn(x, self.p, self.training, nil, name) end
    function cls:extra_repr() return fmt("p = %g", self.p) end
end
dropout_class("Dropout", F.dropout)
dropout_class("Dropout2d", F.dropout2d)
dropout_class("Dropout1d", F.dropout1d)
dropout_class("Dropout3d", F.dropout3d)
dropout_class("AlphaDropout", F.alpha_dropout)
dropout_class("FeatureAlphaDropout", F.feature_alpha_dropout)

-- Flatten([start_dim = 2 [, end_dim = -1]]): N×d2×d3… -> N×(d2·d3…),
-- dims start_dim..end_dim merged into one (t:flatten's dims).
local Flatten = Module:extend("Flatten")
M.Flatten = Flatten
function Flatten:init(start_dim, end_dim)
    start_dim, end_dim = start_dim or 2, end_dim or -1
    for _, d in ipairs({start_dim, end_dim}) do
        if not is_int(d) then fail("Flatten: dims must be integers, got " .. tostring(d)) end
    end
    self.start_dim, self.end_dim = start_dim, end_dim
end
function Flatten:forward(x)
    check_tensor("Flatten", "input", x)
    -- its dims checked under its own name (they were flatten's: "flatten: dim 3 out of range")
    if x:dim() == 0 then
        tensor.norm_dim("Flatten", x, self.start_dim, 1)
    elseif tensor.norm_dim("Flatten", x, self.start_dim) > tensor.norm_dim("Flatten", x, self.end_dim) then
        fail(fmt("Flatten: start_dim %d comes after end_dim %d in a tensor of shape %s", self.start_dim, self.end_dim,
                 shape_str(x)))
    end
    return x:flatten(self.start_dim, self.end_dim)
end
function Flatten:extra_repr() return self.start_dim .. ", " .. self.end_dim end

-- Sequential(m1, m2, ...): calls each module on the previous one's output.
local Sequential = Module:extend("Sequential")
M.Sequential = Sequential
-- The modules of a container's list, in order: every key an integer
-- 1..n.  ipairs stopped at the first hole and skipped names, so
-- Sequential({conv = ..., act = ...}) (Torch's OrderedDict) was an empty
-- model, the identity, and {m1, nil, m3} dropped m3, without a word.
local function module_list(name, list)
    local n, top = 0, 0
    for k in pairs(list) do
        if type(k) ~= "number" or not is_int(k) or k < 1 then
            fail(fmt("%s: the table holds the key %s: give the modules as a list {m1, m2, ...}, in order (a Lua " ..
                     "table of names has no order%s)", name, type(k) == "string" and ("'" .. k .. "'") or tostring(k),
                     name == "Sequential" and "; for modules by name, nn.ModuleDict" or "; by name, nn.ModuleDict"))
        end
        n = n + 1
        if k > top then top = k end
    end
    if top ~= n then
        for i = 1, top do
            if list[i] == nil then fail(fmt("%s: module %d must be a module, got nil (a hole in the list)", name, i)) end
        end
    end
    return list, n
end

function Sequential:init(...)
    self.n = 0
    local list = ...
    if select("#", ...) == 1 and type(list) == "table" and getmetatable(list) == nil then
        local l, n = module_list("Sequential", list)
        for i = 1, n do self:add(l[i]) end
    else
        for i = 1, select("#", ...) do self:add((select(i, ...))) end
    end
end
function Sequential:add(m, extra)
    if extra ~= nil then extra_arg("add", "(module)", extra) end
    if not is_module(m) then fail(fmt("Sequential: module %d must be a module, got %s", self.n + 1, typename(m))) end
    self.n = self.n + 1
    self:add_module(tostring(self.n), m)
    return self
end
Sequential.append = Sequential.add -- PyTorch's name (seq:add is Torch7's)
-- The i-th child of a container of n (negative i counts from the end, as
-- Torch's m[-1]); anything else raises (a nil would fail later, unnamed).
local function container_index(name, i, n)
    local k = i
    if type(k) == "number" and is_int(k) and k < 0 then k = n + 1 + k end
    if type(k) ~= "number" or k < 1 or k > n or not is_int(k) then
        fail(fmt("%s: index %s out of range 1..%d (or -%d..-1 from the end)", name,
                 type(i) == "string" and fmt("%q", i) or tostring(i), n, n))
    end
    return k
end
function Sequential:get(i, extra)
    if extra ~= nil then extra_arg("get", "(i)", extra) end
    return rawget(self, container_index("Sequential", i, self.n))
end
function Sequential:size(extra)
    if extra ~= nil then extra_arg("size", "()", extra) end
    return self.n
end
-- The i-th module of a Sequential or ModuleList (name): seq[i] = v for a
-- module already in place is a plain assignment (Lua calls no metamethod
-- for a key that exists), so a value that is not a module (list[1] = nil
-- left a hole that get gave as nil, and ipairs stopped at) is caught here,
-- at the forward or read that would use it.
local function container_module(name, self, i)
    local m = rawget(self, i)
    if not is_module(m) then
        fail(fmt("%s: module %d is %s, not a module (%s[%d] = ... takes a module)", name, i, typename(m),
                 name == "Sequential" and "seq" or "list", i))
    end
    return m
end
local function sequential_module(self, i) return container_module("Sequential", self, i) end
-- Every output of a module goes on to the next, and the last module's
-- outputs are the Sequential's, as Torch's passes a tuple along (an
-- encoder's mu, logvar into a reparameterisation): only the first went on,
-- the others were dropped unseen.
local function sequential_from(self, i, n, ...)
    if i > n then return ... end
    return sequential_from(self, i + 1, n, sequential_module(self, i)(...))
end
-- (false and the output, or true and a list of all of them when there are several)
local function one_or_list(...)
    if select("#", ...) <= 1 then return false, (...) end
    return true, {n = select("#", ...), ...}
end
function Sequential:forward(x)
    local n = self.n
    for i = 1, n do
        -- one output, the usual case, in a loop that LuaJIT compiles; several go on through the vararg walk
        local several, y = one_or_list(sequential_module(self, i)(x))
        if several then return sequential_from(self, i + 1, n, unpack(y, 1, y.n)) end
        x = y
    end
    return x
end

-- ModuleList({m1, m2, ...}): modules held as children (their parameters
-- are the owner's) and called however the owner's forward likes:
-- list:get(i), list:size(), list:append(m), `for i, m in list:ipairs()`.
local ModuleList = Module:extend("ModuleList")
M.ModuleList = ModuleList
function ModuleList:init(list)
    self.n = 0
    if list ~= nil and (type(list) ~= "table" or getmetatable(list) ~= nil) then
        fail("ModuleList: expected a table of modules, got " .. typename(list))
    end
    local l, n = module_list("ModuleList", list or {})
    for i = 1, n do self:append(l[i]) end
end
function ModuleList:append(m, extra)
    if extra ~= nil then extra_arg("append", "(module)", extra) end
    if not is_module(m) then fail(fmt("ModuleList: module %d must be a module, got %s", self.n + 1, typename(m))) end
    self.n = self.n + 1
    self:add_module(tostring(self.n), m)
    return self
end
local function modulelist_module(self, i) return container_module("ModuleList", self, i) end
function ModuleList:get(i, extra)
    if extra ~= nil then extra_arg("get", "(i)", extra) end
    return modulelist_module(self, container_index("ModuleList", i, self.n))
end
function ModuleList:size(extra)
    if extra ~= nil then extra_arg("size", "()", extra) end
    return self.n
end
function ModuleList:ipairs(extra)
    if extra ~= nil then extra_arg("ipairs", "()", extra) end
    local i = 0
    return function()
        i = i + 1
        if i <= self.n then return i, modulelist_module(self, i) end
    end
end
function ModuleList:forward(...) -- (vararg: list(x) gets this message, not an arity one)
    fail("ModuleList: it has no forward of its own; call its modules (list:get(i)) from the owner's forward")
end

-- seq[i] and list[i] are seq:get(i) (Torch's model[0], from 1 here; an
-- index out of range raises), and seq[i] = m replaces the i-th module in
-- its place (Torch's model[0] = ...).  They were nil (and then "attempt to
-- index a nil value"), and seq[1] = m added a child named 1 after the others.
for _, cls in ipairs({Sequential, ModuleList}) do
    local name = cls._class_name
    cls.__index = index_of(cls, function(self, k) return cls.get(self, k) end)
    cls.__newindex = function(self, k, v)
        -- seq["2"] = m is seq[2] = m (it made a second child "2" beside the one at key 2: printed and
        -- saved, while forward ran the other)
        local i = type(k) == "string" and tonumber(k)
        if i and tostring(i) == k then k = i end
        if type(k) ~= "number" then return module_newindex(self, k, v) end
        k = container_index(name, k, rawget(self, "n"))
        if not is_module(v) then fail(fmt("%s: [%d] = %s: expected a module", name, k, typename(v))) end
        self:add_module(tostring(k), v)
    end
end

-- seq:extend({m1, m2, ...}) and list:extend(...) (Torch's: each added at
-- the end; all checked first; a Sequential or ModuleList given adds its
-- modules), seq:insert(i, m) (m at i, those from i on moved up one; i may
-- be n + 1, the end, or negative from the end) and seq:pop([i]) (the i-th,
-- the last by default, taken out and returned, those after it moved down).
-- Cls:extend("Name") on the class still makes a subclass.  (list:extend
-- was Module:extend, the class maker: "expected a class name, got table".)
for _, cls in ipairs({Sequential, ModuleList}) do
    local name = cls._class_name
    -- (each checked before any is moved: seq[i] = 5 on a module in place is
    -- a plain assignment no metamethod sees, and insert then renumbered
    -- half the modules before add_module refused it)
    local function modules_of(self)
        local r = {}
        for i = 1, rawget(self, "n") do
            local m = rawget(self, i)
            if not is_module(m) then
                fail(fmt("%s: module %d is %s, not a module (%s[%d] = ... takes a module)", self._class_name or name,
                         i, typename(m), self._class_name == "ModuleList" and "list" or "seq", i))
            end
            r[i] = m
        end
        return r
    end
    local function renumber(self, mods, old_n)
        for i = 1, #mods do self:add_module(tostring(i), mods[i]) end
        for i = #mods + 1, old_n do rawset(self, i, nil) end
        rawset(self, "n", #mods)
    end
    cls.extend = function(self, list, extra)
        if extra ~= nil then extra_arg(name .. ": extend", "(list)", extra) end
        if type(list) == "string" or not is_module(self) or rawget(self, "_module_names") == nil then
            return Module.extend(self, list) -- (a subclass)
        end
        local l, n
        if is_module(list) and type(rawget(list, "n")) == "number" and getmetatable(list)._number_index then
            l, n = modules_of(list), rawget(list, "n")
        elseif type(list) ~= "table" or getmetatable(list) ~= nil then
            fail(fmt("%s: extend: expected a list of modules {m1, m2, ...}, got %s", name, typename(list)))
        else
            l, n = module_list(name, list)
        end
        for i = 1, n do
            if not is_module(l[i]) then
                fail(fmt("%s: extend: module %d must be a module, got %s", name, i, typename(l[i])))
            end
        end
        for i = 1, n do self:append(l[i]) end
        return self
    end
    cls.insert = function(self, i, m, extra)
        if extra ~= nil then extra_arg(name .. ": insert", "(i, m)", extra) end
        if not is_module(self) then fail(fmt("%s: insert: call it with a colon, x:insert(i, m)", name)) end
        local n = rawget(self, "n")
        local k = i
        if type(k) == "number" and is_int(k) and k < 0 then k = n + 1 + k end
        if type(k) ~= "number" or not is_int(k) or k < 1 or k > n + 1 then
            fail(fmt("%s: insert: index %s out of range 1..%d (or -%d..-1 from the end)", name,
                     type(i) == "number" and tostring(i) or typename(i), n + 1, n))
        end
        if not is_module(m) then fail(fmt("%s: insert: expected a module, got %s", name, typename(m))) end
        local mods = modules_of(self)
        table.insert(mods, k, m)
        renumber(self, mods, n)
        return self
    end
    cls.pop = function(self, i, extra)
        if extra ~= nil then extra_arg(name .. ": pop", "([i])", extra) end
        if not is_module(self) then fail(fmt("%s: pop: call it with a colon, x:pop([i])", name)) end
        local n = rawget(self, "n")
        if n == 0 then fail(fmt("%s: pop: it is empty", name)) end
        local k = container_index(name, i == nil and n or i, n)
        local mods = modules_of(self)
        local m = table.remove(mods, k)
        renumber(self, mods, n)
        return m
    end
end

-- ModuleDict({name = m, ...}): modules by name, held as children (in the
-- names' sorted order, so parameters come out the same every run):
-- dict:get(name), dict:set(name, m), dict:keys(), `for name, m in
-- dict:pairs()`.
local ModuleDict = Module:extend("ModuleDict")
M.ModuleDict = ModuleDict
function ModuleDict:init(modules)
    if modules ~= nil and (type(modules) ~= "table" or getmetatable(modules) ~= nil) then
        fail("ModuleDict: expected a table of modules by name, got " .. typename(modules))
    end
    local names = {}
    for k in pairs(modules or {}) do
        if type(k) ~= "string" or k:find("[%s%.]") or k == "" then
            fail(fmt("ModuleDict: names must be strings without white space or dots, got %s", tostring(k)))
        end
        names[#names + 1] = k
    end
    table.sort(names)
    for _, k in ipairs(names) do self:set(k, modules[k]) end
end
function ModuleDict:set(name, m, extra)
    if extra ~= nil then extra_arg("set", "(name, module)", extra) end
    -- not a method's name, nor a field of the module's own (training...)
    if type(name) ~= "string" or name:find("[%s%.]") or name == "" or name == "training" or ModuleDict[name] ~= nil or
        (rawget(self, name) ~= nil and not self:_has(self._module_names, name)) then
        fail(fmt("ModuleDict: cannot use %s as a name", tostring(name)))
    end
    self:add_module(name, m)
    return self
end
function ModuleDict:get(name, extra)
    if extra ~= nil then extra_arg("get", "(name)", extra) end
    local names = child_names(self)
    if not self:_has(names, name) then
        fail(fmt("ModuleDict: no module named %s (it has %s)", tostring(name), table.concat(names, ", ")))
    end
    return self[name]
end
function ModuleDict:keys(extra)
    if extra ~= nil then extra_arg("keys", "()", extra) end
    return child_names(self)
end
function ModuleDict:pairs(extra)
    if extra ~= nil then extra_arg("pairs", "()", extra) end
    local names, i = child_names(self), 0
    return function()
        i = i + 1
        local n = names[i]
        if n then return n, self[n] end
    end
end
-- dict:update({name = m, ...}) (all checked, then set in sorted order),
-- dict:pop(name) (taken out and returned), dict:values(), dict:items()
-- ({name, module} pairs) and dict:size(): Torch's.
function ModuleDict:update(modules, extra)
    if extra ~= nil then extra_arg("ModuleDict: update", "(modules)", extra) end
    if not is_module(self) then fail("ModuleDict: update: call it with a colon, dict:update({...})") end
    if type(modules) ~= "table" or getmetatable(modules) ~= nil then
        fail("ModuleDict: update: expected a table of modules by name, got " .. typename(modules))
    end
    local names = {}
    for k, m in pairs(modules) do
        if type(k) ~= "string" or k:find("[%s%.]") or k == "" or k == "training" or ModuleDict[k] ~= nil then
            fail(fmt("ModuleDict: cannot use %s as a name", tostring(k)))
        end
        if not is_module(m) then fail(fmt("ModuleDict: update: %s must be a module, got %s", k, typename(m))) end
        names[#names + 1] = k
    end
    table.sort(names)
    for _, k in ipairs(names) do self:set(k, modules[k]) end
    return self
end
function ModuleDict:pop(name, extra)
    if extra ~= nil then extra_arg("ModuleDict: pop", "(name)", extra) end
    local m = self:get(name)
    rawset(self, name, nil)
    return m
end
function ModuleDict:values(extra)
    if extra ~= nil then extra_arg("ModuleDict: values", "()", extra) end
    local r = {}
    for _, n in ipairs(child_names(self)) do r[#r + 1] = self[n] end
    return r
end
function ModuleDict:items(extra)
    if extra ~= nil then extra_arg("ModuleDict: items", "()", extra) end
    local r = {}
    for _, n in ipairs(child_names(self)) do r[#r + 1] = {n, self[n]} end
    return r
end
function ModuleDict:size(extra)
    if extra ~= nil then extra_arg("ModuleDict: size", "()", extra) end
    return #child_names(self)
end
function ModuleDict:forward(...) -- (vararg: as ModuleList's)
    fail("ModuleDict: it has no forward of its own; call its modules (dict:get(name)) from the owner's forward")
end

-- A tensor registered as a container's parameter: t itself when it is a
-- parameter already (shared, one gradient), else a new leaf on its storage;
-- one made with nn.Parameter(t, false) stays frozen.
local function add_param(self, fname, name, t, what)
    if not is_tensor(t) then fail(fmt("%s: %s must be a tensor, got %s", fname, what, typename(t))) end
    local dt = t:dtype()
    if dt ~= "float32" and dt ~= "float64" then
        fail(fmt("%s: %s must be a float tensor (float32 or float64: it needs a gradient), got %s", fname, what, dt))
    end
    local frozen = MARKED_PARAMETERS[t] == "frozen"
    rawset(self, "_registering", true) -- (register_parameter's own self[name] = p: a plain field)
    local ok, p = pcall(self.register_parameter, self, name, t)
    rawset(self, "_registering", nil)
    if not ok then error(p, 0) end
    if frozen then
        p:requires_grad(false)
        MARKED_PARAMETERS[p] = "frozen"
    end
    return p
end

-- Torch's ParameterList({t1, t2, ...}): tensors held as parameters of the
-- owner (named 1, 2, ... as ModuleList's children: "plist.1"), for the
-- owner's forward: plist:get(i) or plist[i] (negative i from the end),
-- plist[i] = p, plist:size(), plist:append(t), plist:extend({...}),
-- `for i, p in plist:ipairs()`, and #plist, `for i, p in ipairs(plist)`.
local ParameterList = Module:extend("ParameterList")
M.ParameterList = ParameterList
function ParameterList:init(list)
    rawset(self, "n", 0)
    if list ~= nil and (type(list) ~= "table" or getmetatable(list) ~= nil) then
        fail("ParameterList: expected a table of tensors, got " .. typename(list))
    end
    self:extend(list or {})
end
function ParameterList:append(t, extra)
    if extra ~= nil then extra_arg("append", "(tensor)", extra) end
    if not is_module(self) then fail("ParameterList: append: call it with a colon, plist:append(t)") end
    add_param(self, "ParameterList", tostring(self.n + 1), t, fmt("parameter %d", self.n + 1))
    rawset(self, "n", self.n + 1)
    return self
end
function ParameterList:extend(list)
    if type(list) == "string" or not is_module(self) or rawget(self, "_param_names") == nil then
        return Module.extend(self, list) -- (ParameterList:extend("Name"): a subclass)
    end
    if type(list) ~= "table" or getmetatable(list) ~= nil then
        if getmetatable(list) == ParameterList then
            local l = {}
            for i, p in list:ipairs() do l[i] = p end
            list = l
        else
            fail("ParameterList: extend: expected a table of tensors, got " .. typename(list))
        end
    end
    local n = 0
    for k in pairs(list) do
        if not (is_int(k) and k >= 1) then
            fail(fmt("ParameterList: expected a list of tensors (keys 1..n), got the key %s", tostring(k)))
        end
        if k > n then n = k end
    end
    for i = 1, n do
        if list[i] == nil then fail(fmt("ParameterList: the list has a hole at %d (of %d)", i, n)) end
    end
    -- every one checked before any is added: a bad one leaves the list as it was
    for i = 1, n do
        local t = list[i]
        if not is_tensor(t) then
            fail(fmt("ParameterList: parameter %d must be a tensor, got %s", self.n + i, typename(t)))
        end
        if t:dtype() ~= "float32" and t:dtype() ~= "float64" then
            fail(fmt("ParameterList: parameter %d must be a float tensor (float32 or float64: it needs a gradient), " ..
                     "got %s", self.n + i, t:dtype()))
        end
    end
    for i = 1, n do self:append(list[i]) end
    return self
end
function ParameterList:get(i, extra)
    if extra ~= nil then extra_arg("get", "(i)", extra) end
    i = container_index("ParameterList", i, self.n)
    self:_sync_params()
    return rawget(self, i)
end
function ParameterList:size(extra)
    if extra ~= nil then extra_arg("size", "()", extra) end
    return self.n
end
function ParameterList:ipairs(extra)
    if extra ~= nil then extra_arg("ipairs", "()", extra) end
    self:_sync_params()
    local i = 0
    return function()
        i = i + 1
        if i <= self.n then return i, rawget(self, i) end
    end
end
function ParameterList:extra_repr() return fmt("%d parameters", self.n) end
function ParameterList:forward(...)
    fail("ParameterList: it has no forward of its own; use its tensors (plist:get(i)) in the owner's forward")
end
ParameterList.__index = index_of(ParameterList, function(self, k) return ParameterList.get(self, k) end)
-- The parameters sit at keys 1..n (named "1".."n"), so that Lua's # and
-- ipairs see them (#plist was 0, `for i, p in ipairs(plist)` ran no times).
-- A write by a parameter's name (m["2"] = t: m:to's, register_parameter's)
-- goes to its integer key.
ParameterList.__newindex = function(self, k, v)
    if type(k) == "string" then
        local i = tonumber(k)
        if i and tostring(i) == k then
            if rawget(self, "_registering") or rawget(self, i) ~= nil then
                if not rawget(self, "_registering") and not is_tensor(v) then
                    fail(fmt("ParameterList: [%d] = %s: expected a parameter (nn.Parameter(t))", i, typename(v)))
                end
                rawset(self, i, v)
                return
            end
            k = i -- (plist["3"] = t is plist[3] = t)
        else
            return module_newindex(self, k, v)
        end
    end
    if type(k) ~= "number" then return module_newindex(self, k, v) end
    k = container_index("ParameterList", k, rawget(self, "n"))
    if not is_tensor(v) then
        fail(fmt("ParameterList: [%d] = %s: expected a float tensor", k, typename(v)))
    end
    add_param(self, "ParameterList", tostring(k), v, fmt("[%d]", k))
end
-- plist[i] = v over a parameter in place is a plain assignment (Lua calls no
-- metamethod for a key that exists), so it is checked where the list is
-- next read through a method (get, ipairs, parameters, state_dict, to, ...),
-- as a module's parameter field is (see checked_param): a parameter (another
-- module's, shared, or nn.Parameter(t)) is taken as it is; a tensor that is
-- no parameter raises, since plist[i] would go on giving that tensor, which
-- is never trained, and anything else raises too.
function ParameterList:_sync_params()
    local rec = rawget(self, "_param_tensors")
    if not rec then
        rec = {}
        rawset(self, "_param_tensors", rec)
    end
    for i = 1, rawget(self, "n") do
        local v, name = rawget(self, i), tostring(i)
        if v == nil or v ~= rec[name] then
            if not is_tensor(v) then
                fail(fmt("ParameterList: parameter %d is %s, not a tensor (plist[%d] = ... takes a parameter: " ..
                         "nn.Parameter(t))", i, typename(v), i))
            end
            if not (PARAMETERS[v] or MARKED_PARAMETERS[v] or (v:is_leaf() and v:needs_grad())) then
                fail(fmt("ParameterList: parameter %d was assigned a tensor that is not a parameter (it needs no " ..
                         "gradient: it would never train); assign plist[%d] = nn.Parameter(t), or copy into it " ..
                         "(ordo.no_grad(function() plist[%d]:copy_(t) end))", i, i, i))
            end
            rec[name] = v
            PARAMETERS[v] = true
        end
    end
end

-- Torch's ParameterDict({name = t, ...}): tensors by name held as
-- parameters of the owner (in the names' sorted order, "pdict.name" in
-- state_dict): pdict:get(name) or pdict.name, pdict:set(name, t),
-- pdict:update({...}), pdict:keys(), `for name, p in pdict:pairs()`,
-- pdict:size().
local ParameterDict = Module:extend("ParameterDict")
M.ParameterDict = ParameterDict
local function pdict_check_name(self, name)
    if type(name) ~= "string" or name:find("[%s%.]") or name == "" or name == "training" or
        ParameterDict[name] ~= nil or
        (rawget(self, name) ~= nil and not self:_has(self._param_names, name)) then
        fail(fmt("ParameterDict: cannot use %s as a name (a non-empty string without white space or dots, " ..
                 "not a method's name)", type(name) == "string" and fmt("%q", name) or typename(name)))
    end
end
function ParameterDict:init(params)
    if params ~= nil and (type(params) ~= "table" or getmetatable(params) ~= nil) then
        fail("ParameterDict: expected a table of tensors by name, got " .. typename(params))
    end
    self:update(params or {})
end
function ParameterDict:update(params, extra)
    if extra ~= nil then extra_arg("update", "(params)", extra) end
    if not is_module(self) then fail("ParameterDict: update: call it with a colon, pdict:update({...})") end
    if type(params) ~= "table" or getmetatable(params) ~= nil then
        fail("ParameterDict: update: expected a table of tensors by name, got " .. typename(params))
    end
    local names = {}
    for k, t in pairs(params) do
        pdict_check_name(self, k)
        if not is_tensor(t) then fail(fmt("ParameterDict: %s must be a tensor, got %s", k, typename(t))) end
        if t:dtype() ~= "float32" and t:dtype() ~= "float64" then
            fail(fmt("ParameterDict: %s must be a float tensor (float32 or float64: it needs a gradient), got %s",
                     k, t:dtype()))
        end
        names[#names + 1] = k
    end
    table.sort(names)
    for _, k in ipairs(names) do self:set(k, params[k]) end
    return self
end
function ParameterDict:set(name, t, extra)
    if extra ~= nil then extra_arg("set", "(name, tensor)", extra) end
    if not is_module(self) then fail("ParameterDict: set: call it with a colon, pdict:set(name, t)") end
    pdict_check_name(self, name)
    add_param(self, "ParameterDict", name, t, name)
    return self
end
function ParameterDict:get(name, extra)
    if extra ~= nil then extra_arg("get", "(name)", extra) end
    local names = self:keys()
    if type(name) ~= "string" or not self:_has(names, name) then
        fail(fmt("ParameterDict: no parameter named %s (it has %s)", tostring(name),
                 #names > 0 and table.concat(names, ", ") or "none"))
    end
    return rawget(self, name)
end
function ParameterDict:keys(extra)
    if extra ~= nil then extra_arg("keys", "()", extra) end
    local r = {}
    for _, n in ipairs(self._param_names) do if is_tensor(rawget(self, n)) then r[#r + 1] = n end end
    return r
end
-- Torch's values() and items(), as ModuleDict's: the tensors, and {name, t} pairs, in keys' order
function ParameterDict:values(extra)
    if extra ~= nil then extra_arg("values", "()", extra) end
    local r = {}
    for _, n in ipairs(self:keys()) do r[#r + 1] = rawget(self, n) end
    return r
end
function ParameterDict:items(extra)
    if extra ~= nil then extra_arg("items", "()", extra) end
    local r = {}
    for _, n in ipairs(self:keys()) do r[#r + 1] = {n, rawget(self, n)} end
    return r
end
function ParameterDict:size(extra)
    if extra ~= nil then extra_arg("size", "()", extra) end
    return #self:keys()
end
function ParameterDict:pairs(extra)
    if extra ~= nil then extra_arg("pairs", "()", extra) end
    local names, i = self:keys(), 0
    return function()
        i = i + 1
        local n = names[i]
        if n then return n, rawget(self, n) end
    end
end
function ParameterDict:pop(name, extra)
    if extra ~= nil then extra_arg("pop", "(name)", extra) end
    local p = self:get(name)
    rawset(self, name, nil)
    for i = #self._param_names, 1, -1 do
        if self._param_names[i] == name then table.remove(self._param_names, i) end
    end
    local rec = rawget(self, "_param_tensors")
    if rec then rec[name] = nil end
    return p
end
-- pdict.name = t (Torch's pdict["name"] = t): set(name, t); it was a
-- plain field, never registered nor trained.  pdict.name = nil: pop.
ParameterDict.__newindex = function(self, k, v)
    if is_tensor(v) and k ~= "training" and not rawget(self, "_registering") then
        return ParameterDict.set(self, k, v)
    end
    if v == nil and type(k) == "string" and self:_has(self._param_names, k) and is_tensor(rawget(self, k)) then
        ParameterDict.pop(self, k)
        return
    end
    return module_newindex(self, k, v)
end
function ParameterDict:extra_repr() return table.concat(self:keys(), ", ") end
function ParameterDict:forward(...)
    fail("ParameterDict: it has no forward of its own; use its tensors (pdict:get(name)) in the owner's forward")
end

-- ---------------------------------------------------------------- losses

-- A loss module: its options (reduction: "mean", the default, "sum" or
-- "none"; and the names in extra) handed to its functional form
-- fn(input, target, opts).
-- The reduction is checked when the loss is made (a typo such as "avg"
-- used to wait for the first call to be named).
local function check_reduction(name, r)
    if r == nil or r == "mean" or r == "sum" or r == "none" or (r == "batchmean" and name == "KLDivLoss") then return end
    fail(fmt("%s: reduction must be 'mean', 'sum' or 'none'%s, got %s", name,
             name == "KLDivLoss" and " (or 'batchmean')" or "", type(r) == "string" and r or typename(r)))
end

-- The tensor options (weight, pos_weight) are the module's buffers, as
-- Torch's: m.weight, moved and cast with the module (m:to(gpu), m:float();
-- held only in the options, a criterion moved to the GPU kept its weight on
-- the CPU and every call failed "expected all tensors on one device"), and
-- saved in its state_dict.
local LOSS_TENSOR_OPTS = {"weight", "pos_weight"}

-- The options a loss calls with, its reduction the module's field (as
-- Torch's: loss.reduction = "sum" after it is made; it was left in the
-- options made at init, and the assignment silently changed nothing).
local function loss_options(self, name)
    local o, r = self.options, self.reduction
    if r ~= o.reduction then
        check_reduction(name, r)
        o.reduction = r
    end
    return o
end

local function loss(name, fn, extra)
    local cls = Module:extend(name)
    local allowed = {reduction = true}
    for _, k in ipairs(extra or {}) do allowed[k] = true end
    cls.init = function(self, opts)
        if is_tensor(opts) and allowed.weight then -- Torch's positional CrossEntropyLoss(weight)
            fail(fmt("%s: options must be a table, got %s (a class weight goes in the options: %s({weight = w}))", name,
                     typename(opts), name))
        end
        opts = opts_of(name, opts, allowed)
        check_reduction(name, opts.reduction)
        self.options = {}
        for k, v in pairs(opts) do self.options[k] = v end
        for _, k in ipairs(LOSS_TENSOR_OPTS) do
            local v = opts[k]
            if v ~= nil then
                if not is_tensor(v) then fail(fmt("%s: option %s must be a tensor, got %s", name, k, typename(v))) end
                self:register_buffer(k, v)
            end
        end
        self.reduction = opts.reduction or "mean"
        self.options.reduction = self.reduction
    end
    cls.forward = function(self, input, target)
        local o = loss_options(self, name)
        for _, k in ipairs(LOSS_TENSOR_OPTS) do
            if allowed[k] then o[k] = self[k] end
        end
        return fn(input, target, o, name)
    end
    M[name] = cls
    return cls
end
loss("CrossEntropyLoss", F.cross_entropy, {"label_smoothing", "weight", "ignore_index"}) -- logits, classes from 1
loss("NLLLoss", F.nll_loss, {"weight", "ignore_index"}) -- log-probabilities, class indices
loss("MSELoss", F.mse_loss)
loss("L1Loss", F.l1_loss)
loss("SmoothL1Loss", F.smooth_l1_loss, {"beta"})
loss("HuberLoss", F.huber_loss, {"delta"})
loss("BCELoss", F.binary_cross_entropy, {"weight"})     -- probabilities, targets in [0, 1]
loss("BCEWithLogitsLoss", F.binary_cross_entropy_with_logits, {"weight", "pos_weight"}) -- logits, targets in [0, 1]
loss("KLDivLoss", F.kl_div, {"log_target"}) -- log-probabilities, target probabilities (or log-probabilities)
loss("PoissonNLLLoss", F.poisson_nll_loss, {"log_input", "full", "eps"}) -- log-rates (or rates), counts
loss("HingeEmbeddingLoss", F.hinge_embedding_loss, {"margin"}) -- distances, targets 1 or -1
loss("SoftMarginLoss", F.soft_margin_loss) -- scores, targets 1 or -1
loss("MultiLabelSoftMarginLoss", F.multilabel_soft_margin_loss, {"weight"}) -- logits, 0/1 targets of their shape
loss("MultiMarginLoss", F.multi_margin_loss, {"p", "margin", "weight"}) -- scores, class indices from 1
loss("MultiLabelMarginLoss", F.multilabel_margin_loss) -- scores, class indices from 1 ended by 0

-- The losses of three operands: input1, input2 (or anchor, positive,
-- negative; input, target, var) and their options.
local function loss3(name, fn, allowed)
    local cls = Module:extend(name)
    M[name] = cls
    cls.init = function(self, opts)
        opts = opts_of(name, opts, allowed)
        check_reduction(name, opts.reduction)
        self.options = {}
        for k, v in pairs(opts) do self.options[k] = v end
        self.reduction = opts.reduction or "mean"
        self.options.reduction = self.reduction
    end
    cls.forward = function(self, a, b, c) return fn(a, b, c, loss_options(self, name), name) end
    return cls
end
loss3("MarginRankingLoss", F.margin_ranking_loss, {margin = true, reduction = true})
loss3("CosineEmbeddingLoss", F.cosine_embedding_loss, {margin = true, reduction = true})
loss3("TripletMarginLoss", F.triplet_margin_loss, {margin = true, p = true, eps = true, swap = true, reduction = true})
loss3("GaussianNLLLoss", F.gaussian_nll_loss, {full = true, eps = true, reduction = true})
loss3("TripletMarginWithDistanceLoss", F.triplet_margin_with_distance_loss,
      {distance_function = true, margin = true, swap = true, reduction = true})

-- ---------------------------------------------------------------- distances

-- PairwiseDistance([{p = 2, eps = 1e-6, keepdim = false}]) and
-- CosineSimilarity([{dim = -1, eps = 1e-8}]): F.pairwise_distance and
-- F.cosine_similarity as modules, as Torch's (e.g. a distance_function for
-- TripletMarginWithDistanceLoss).  The options are checked when the
-- module is made.
local PairwiseDistance = Module:extend("PairwiseDistance")
M.PairwiseDistance = PairwiseDistance
function PairwiseDistance:init(opts)
    opts = opts_of("PairwiseDistance", opts, {p = true, eps = true, keepdim = true})
    self.p, self.eps, self.keepdim = opts.p or 2, opts.eps or 1e-6, opts.keepdim or false
    if type(self.p) ~= "number" or not (self.p >= 0) then
        fail(fmt("PairwiseDistance: p must be a number >= 0, got %s", util.show(self.p)))
    end
    if type(self.eps) ~= "number" or self.eps ~= self.eps then
        fail(fmt("PairwiseDistance: eps must be a number, got %s", util.show(self.eps)))
    end
    if type(self.keepdim) ~= "boolean" then
        fail(fmt("PairwiseDistance: keepdim must be true or false, got %s", util.show(self.keepdim)))
    end
end
function PairwiseDistance:extra_repr() return fmt("p = %s, eps = %s, keepdim = %s", self.p, self.eps, self.keepdim) end
function PairwiseDistance:forward(a, b)
    return F.pairwise_distance(a, b, {p = self.p, eps = self.eps, keepdim = self.keepdim}, "PairwiseDistance")
end

local CosineSimilarity = Module:extend("CosineSimilarity")
M.CosineSimilarity = CosineSimilarity
function CosineSimilarity:init(opts)
    opts = opts_of("CosineSimilarity", opts, {dim = true, eps = true})
    self.dim, self.eps = opts.dim or -1, opts.eps or 1e-8
    if not is_int(self.dim) then fail(fmt("CosineSimilarity: dim must be an integer, got %s", util.show(self.dim))) end
    if type(self.eps) ~= "number" or not (self.eps >= 0) then
        fail(fmt("CosineSimilarity: eps must be a number >= 0, got %s", util.show(self.eps)))
    end
end
function CosineSimilarity:extra_repr() return fmt("dim = %s, eps = %s", self.dim, self.eps) end
function CosineSimilarity:forward(a, b)
    return F.cosine_similarity(a, b, {dim = self.dim, eps = self.eps}, "CosineSimilarity")
end

-- Conv2d, MaxPool2d, BatchNorm1d/2d and their functional forms
-- ---------------------------------------------------------------- evaluation

-- nn.accuracy(model, x, y [, {batch_size = 1000}]): the fraction of rows of
-- x whose largest output is at the class index y (from 1), computed in eval
-- mode without gradients, batch by batch, with one wait at the end; the
-- model's mode is restored.
function M.accuracy(model, x, y, opts, extra)
    if extra ~= nil then extra_arg("accuracy", "(model, x, y, opts)", extra) end
    if not is_module(model) then fail(fmt("accuracy: expected a module first, got %s", typename(model))) end
    if not is_tensor(x) or not is_tensor(y) then
        fail(fmt("accuracy: expected tensors of inputs and labels, got %s and %s", typename(x), typename(y)))
    end
    opts = util.check_opts("accuracy", opts, {batch_size = true})
    if x:dim() < 1 then fail("accuracy: the inputs have no dims: the first dim counts the examples") end
    local n = x:size(1)
    -- one class index per input: labels N x 1 would broadcast against the
    -- predictions (N) and count N x N matches
    local ydt = y:dtype()
    if y:dim() ~= 1 or (ydt ~= "int64" and ydt ~= "int32") then
        fail(fmt("accuracy: expected labels of shape %d (class indices, int64), got %s of shape %s", n, ydt,
                 shape_str(y)))
    end
    if y:size(1) ~= n then fail(fmt("accuracy: %d inputs but %d labels", n, y:size(1))) end
    local bs = opts.batch_size or 1000
    util.check_positive_int("accuracy", "batch_size", bs) -- (a step of 0 would loop for ever)
    local was_training = model.training
    model:eval()
    local ok, correct = pcall(autograd.no_grad, function()
        local total = tensor.zeros({}, tensor.like(y, "int64"))
        for start = 1, n, bs do
            local len = math.min(bs, n - start + 1)
            local out = model(x:narrow(1, start, len))
            total = total + out:argmax(2):eq(y:narrow(1, start, len)):sum()
        end
        return total:item()
    end)
    model:train(was_training)
    if not ok then error(correct, 0) end
    return n > 0 and correct / n or 0
end

require("ordo.nn.conv").install(M)
-- RNNCell, LSTMCell, GRUCell, RNN, LSTM, GRU
require("ordo.nn.recurrent").install(M)
require("ordo.nn.resample").install(M)
require("ordo.nn.attention").install(M)

-- nn.utils.clip_grad_norm_, clip_grad_value_
M.utils = require "ordo.nn.utils"

return M
