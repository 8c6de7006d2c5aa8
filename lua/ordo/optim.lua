-- ordo.optim: optimisers that update parameters in place.
--
--   local opt = ordo.optim.Adam(model:parameters(), {lr = 1e-3})
--   opt:zero_grad(); loss:backward(); opt:step()
--
-- step() pushes its updates (in-place tensor ops under ordo.no_grad) and
-- returns at once: the next batch's forward pass queues behind them on the
-- parameters' vars, so no wait is needed between steps.  Options are plain
-- fields (opt.lr = 0.01 changes the learning rate from the next step).
local cdef = require "ordo.cdef"
local util = require "ordo.util"
local extra_arg = util.extra_arg -- a further positional argument: an error naming it
local tensor = require "ordo.tensor"
local autograd = require "ordo.autograd"

local C = cdef.C

local fail, typename = util.fail, util.typename
local is_tensor = tensor.is_tensor
local fmt = string.format
local ipairs, pairs, next, type, setmetatable, getmetatable, tostring, tonumber, unpack =
    ipairs, pairs, next, type, setmetatable, getmetatable, tostring, tonumber, unpack

local M = {}

local FLOAT = {float32 = true, float64 = true}

-- Raises at the first hole of a list: ipairs (and #) stop at a nil, so
-- {w1, nil, w2} (a list made by hand holding the .bias of a layer made
-- with bias = false) was taken without w2, which then never trained.
local function check_no_hole(fname, what, list, expected)
    if type(list) ~= "table" or getmetatable(list) ~= nil then return end
    local top, n = 0, 0
    for k in pairs(list) do
        if type(k) == "number" and k >= 1 and k % 1 == 0 then
            n = n + 1
            if k > top then top = k end
        end
    end
    if top == n then return end
    for i = 1, top do
        if list[i] == nil then
            fail(fmt("%s: %s %d is nil, expected %s (a hole in the list: the entries after it would be " ..
                     "left out)", fname, what, i, expected or "a tensor"))
        end
    end
end
M._check_no_hole = check_no_hole

local function check_params(fname, params)
    check_no_hole(fname, "parameter", params)
    if type(params) ~= "table" or getmetatable(params) ~= nil or #params == 0 then
        fail(fmt("%s: expected a non-empty list of parameters (model:parameters()), got %s", fname,
                 typename(params)))
    end
    local seen = {}
    for i, p in ipairs(params) do
        if not is_tensor(p) then
            fail(fmt("%s: parameter %d is %s, expected a tensor%s", fname, i, typename(p),
                     type(p) == "table" and p.params ~= nil and " (give a list of tensors or a list of groups, not both)"
                     or ""))
        end
        if not FLOAT[p:dtype()] then
            fail(fmt("%s: parameter %d is %s, expected a float32 or float64 tensor", fname, i, p:dtype()))
        end
        -- a parameter that does not require a gradient (a frozen one,
        -- m:requires_grad_(false)) is taken and skipped while it has no
        -- .grad, as Torch's: unfrozen later, it is updated from then on
        -- a tensor computed from one (w = randn(n):requires_grad() * 0.01)
        -- never gets a .grad: it would be given and never trained (Torch's rule)
        if not p:is_leaf() then
            fail(fmt("%s: parameter %d is not a leaf (it was computed by %s): it gets no gradient; make the " ..
                     "parameter itself require a gradient, e.g. (randn(n) * 0.01):requires_grad()", fname, i,
                     tostring(p:grad_fn())))
        end
        -- a tensor given twice would take two updates per step (tied
        -- weights: m:parameters() lists each tensor once)
        if seen[p] then
            fail(fmt("%s: parameter %d is the same tensor as parameter %d (give each parameter once)", fname, i,
                     seen[p]))
        end
        seen[p] = i
    end
end

-- opts checked against defaults: unknown keys and bad values raise.
local function options(fname, opts, defaults)
    opts = opts or {}
    if type(opts) ~= "table" or getmetatable(opts) ~= nil then
        fail(fmt("%s: options must be a table, got %s", fname, typename(opts)))
    end
    local r = {}
    for k, v in pairs(defaults) do r[k] = v end
    for k, v in pairs(opts) do
        if defaults[k] == nil then
            fail(fmt("%s: unknown option '%s'%s", fname, tostring(k),
                     k == "betas" and defaults.beta1 ~= nil
                     and " (give beta1 and beta2, e.g. {beta1 = 0.9, beta2 = 0.999})" or ""))
        end
        if type(v) ~= type(defaults[k]) then
            fail(fmt("%s: option %s must be a %s, got %s", fname, k, type(defaults[k]), typename(v)))
        end
        r[k] = v
    end
    for k, v in pairs(r) do -- NaN or inf would turn every parameter into NaN at the first step
        if type(v) == "number" and not (v > -math.huge and v < math.huge) then
            fail(fmt("%s: option %s must be a finite number, got %s", fname, k, tostring(v)))
        end
    end
    for _, k in ipairs({"lr", "momentum", "weight_decay", "eps", "beta1", "beta2"}) do
        if type(r[k]) == "number" and r[k] < 0 then fail(fmt("%s: %s must be >= 0, got %g", fname, k, r[k])) end
    end
    return r
end

-- Parameter groups (Torch's): params is a list of tensors, or a list of
-- groups {params = {...}, lr = ..., <option> = ...} whose options override
-- the optimiser's (opts, then the defaults) for their parameters -- a lower
-- lr for a pretrained body, no weight decay on biases.  The parameters of
-- all groups, in order, are opt.params (indices of state and checkpoints);
-- opt.param_groups[k] holds group k's params and its own options, which
-- may change between steps.  opt.lr stays the optimiser's lr: a scheduler
-- sets it, and a group with an lr of its own follows it in proportion
-- (group lr times opt.lr / the lr the optimiser was made with), as each
-- group's lr follows the schedule in Torch.  validate(fname, o) checks a
-- set of options (each group's too).  Returns the optimiser's fields.
-- An optimiser made with a plain list of parameters has one group, as in
-- Torch: opt.param_groups[1] reads and writes the optimiser's own options
-- (a Torch loop's g.lr = ... sets opt.lr; its params are opt.params).  The
-- list is marked in SINGLE, so the steps treat the optimiser as ungrouped.
local SINGLE = setmetatable({}, {__mode = "k"})
local SINGLE_GROUP = {
    __index = function(g, k)
        local o = rawget(g, "_opt")
        if k == "params" then return o.params end
        return o[k]
    end,
    __newindex = function(g, k, v)
        if k == "params" then
            fail("param_groups[1].params: the parameters are the optimiser's (make a new optimiser to change them)")
        end
        rawget(g, "_opt")[k] = v
    end,
}

-- A group of an optimiser made with groups reads an option it does not set
-- itself through to the optimiser's (Torch's groups hold every option, and
-- its loop `for g in param_groups: g.lr = g.lr * 0.1` raised a Lua error on
-- nil here).  Its lr, unset, reads as the lr the optimiser was made with:
-- a group's lr is the one the schedule's proportion (opt.lr / that lr)
-- applies to, so g.lr = g.lr * 0.1 cuts the group's rate by 10 either way
-- (made with lr = 0: opt.lr, which the group then takes as it is).
-- Setting an option gives the group its own.
local function group_reader(o, defaults)
    return {__index = function(_, k)
        if k == "lr" then
            local base = rawget(o, "_base_lr")
            if type(base) == "number" and base ~= 0 then return base end
            return o.lr
        end
        if defaults[k] ~= nil then return o[k] end
    end}
end

local function make(fname, params, opts, defaults, validate)
    local o = options(fname, opts, defaults)
    validate(fname, o)
    check_no_hole(fname, "entry", params, "a parameter or a group {params = {...}}")
    local is_groups = type(params) == "table" and getmetatable(params) == nil and #params > 0
    if is_groups then
        for _, e in ipairs(params) do
            if is_tensor(e) then is_groups = false break end
        end
    end
    -- kept to check the options again at each step (they are plain fields)
    o._defaults, o._validate = defaults, validate
    if not is_groups then
        check_params(fname, params)
        local single = {setmetatable({_opt = o}, SINGLE_GROUP)}
        SINGLE[single] = true
        o.params, o.param_groups, o._base_lr = params, single, o.lr
        return o
    end
    local flat, groups = {}, {}
    for k, grp in ipairs(params) do
        local gname = fmt("%s: group %d", fname, k)
        if type(grp) ~= "table" or getmetatable(grp) ~= nil then
            fail(fmt("%s is %s, expected a tensor or a group {params = {...}, lr = ...} (not both kinds)", gname,
                     typename(grp)))
        end
        local ps, own = grp.params, {}
        if is_tensor(ps) then ps = {ps} end -- (Torch's: one tensor for a list of one)
        check_no_hole(gname, "parameter", ps)
        if type(ps) ~= "table" or getmetatable(ps) ~= nil or #ps == 0 then
            fail(fmt("%s needs params, a non-empty list of tensors, got %s", gname, typename(ps)))
        end
        for key, v in pairs(grp) do if key ~= "params" then own[key] = v end end
        local merged = {}
        for key in pairs(defaults) do merged[key] = o[key] end
        for key, v in pairs(own) do merged[key] = v end
        validate(gname, options(gname, merged, defaults))
        local g = {params = ps}
        for key, v in pairs(own) do g[key] = v end
        groups[k] = g
        for _, p in ipairs(ps) do flat[#flat + 1] = p end
    end
    check_params(fname, flat)
    o.params, o.param_groups, o._base_lr = flat, groups, o.lr
    o._group_mt = group_reader(o, defaults)
    for _, g in ipairs(groups) do setmetatable(g, o._group_mt) end
    return o
end

-- The options as they are at a step: opt.momentum = -1, opt.beta1 = 1, a
-- NaN weight decay or a group's option set to a string after the optimiser
-- was made would otherwise write NaN into every parameter without a word,
-- or fail inside a tensor op with a message naming no option.  Each group
-- must still hold the parameters it was made with: the options of each
-- parameter are found by position.
local function check_options(self)
    local defaults, validate = self._defaults, self._validate
    if not defaults then return end
    local cur = {}
    for k, d in pairs(defaults) do
        local v = self[k]
        if type(v) ~= type(d) then
            fail(fmt("step: opt.%s must be a %s, got %s", k, type(d), typename(v)))
        end
        cur[k] = v
    end
    validate("step", options("step", cur, defaults))
    local groups = self.param_groups
    if not groups or SINGLE[groups] then return end
    local i = 0
    for k, grp in ipairs(groups) do
        local gname = fmt("step: param_groups[%d]", k)
        if type(grp) ~= "table" or type(grp.params) ~= "table" then
            fail(fmt("%s is %s, expected a group {params = {...}, ...}", gname, typename(grp)))
        end
        for _, p in ipairs(grp.params) do
            i = i + 1
            if not rawequal(self.params[i], p) then
                fail(fmt("%s.params is not the list of parameters the group was made with " ..
                         "(make a new optimiser to change them)", gname))
            end
        end
        local merged = {}
        for key in pairs(defaults) do merged[key] = cur[key] end
        for key, v in pairs(grp) do if key ~= "params" then merged[key] = v end end
        validate(gname, options(gname, merged, defaults))
    end
    if i ~= #self.params then
        fail("step: opt.param_groups is not the list of groups the optimiser was made with " ..
             "(make a new optimiser to change them)")
    end
end

-- The options seen by the update of each parameter: the optimiser itself,
-- or for a parameter of a group a table of the group's own options that
-- reads everything else (state, counts, the other options) through to it.
local function option_views(self)
    local groups = self.param_groups
    if not groups or SINGLE[groups] then return nil end
    local base = self._base_lr
    local ratio = base ~= 0 and self.lr / base or 1
    local views, i = {}, 0
    for _, g in ipairs(groups) do
        local v = setmetatable({}, {__index = self})
        for key, val in pairs(g) do if key ~= "params" then v[key] = val end end
        if rawget(g, "lr") ~= nil then v.lr = g.lr * ratio end
        for _ = 1, #g.params do
            i = i + 1
            views[i] = v
        end
    end
    return views
end

-- The fused update kernels (kernels/cpu/optim.c): one op per parameter.
-- Used when the parameter's device has them and every operand is
-- contiguous; the elementwise forms below compute the same thing otherwise.
local K_ADAM, K_SGD = C.ordo_tensor_kernel_id("adam_step"), C.ordo_tensor_kernel_id("sgd_step")

local function fusable(kid, p, g, state)
    return C.ordo_tensor_kernel_available(kid, p._c.ctx.dev_type) ~= 0 and p:is_contiguous()
        and g:is_contiguous() and state:is_contiguous() and FLOAT[p:dtype()] and g:dtype() == p:dtype()
end

local Optimizer = {}
Optimizer.__index = Optimizer

-- opt.step() instead of opt:step() passes no optimiser: say so
local function check_opt_self(fname, o)
    if type(o) ~= "table" or type(o.params) ~= "table" or type(o.update) ~= "function" then
        fail(fmt("%s: expected an optimiser as self, got %s (call it as opt:%s(...))", fname, typename(o), fname))
    end
end

-- add_param_group({params = {...}, <option> = ...}) (Torch's): adds a
-- group, its options overriding the optimiser's as a group's made with it
-- (its lr following opt.lr in proportion); its parameters come after the
-- others in opt.params (their state starts at their first update).  An
-- optimiser made with a plain list becomes one of two groups, the first
-- its parameters with no options of their own.  A bad group, or a
-- parameter the optimiser already has, raises and changes nothing.
function Optimizer:add_param_group(group, extra)
    if extra ~= nil then extra_arg("add_param_group", "(group)", extra) end
    check_opt_self("add_param_group", self)
    local fname = "add_param_group"
    if type(group) ~= "table" or getmetatable(group) ~= nil then
        fail(fmt("%s: expected a group {params = {...}, lr = ...}, got %s", fname, typename(group)))
    end
    local ps = group.params
    if is_tensor(ps) then ps = {ps} end -- (Torch's: one tensor for a list of one)
    if type(ps) ~= "table" or getmetatable(ps) ~= nil or #ps == 0 then
        fail(fmt("%s: the group needs params, a non-empty list of tensors, got %s", fname,
                 type(ps) == "table" and getmetatable(ps) == nil and "an empty list" or typename(group.params)))
    end
    local have = {}
    for i, p in ipairs(self.params) do have[p] = i end
    for i, p in ipairs(ps) do
        if have[p] then
            fail(fmt("%s: parameter %d of the group is already in the optimiser (opt.params[%d]): a parameter " ..
                     "may be in one group only", fname, i, have[p]))
        end
    end
    local defaults, validate = self._defaults, self._validate
    local own, merged = {}, {}
    for key, v in pairs(group) do if key ~= "params" then own[key] = v end end
    for key in pairs(defaults) do merged[key] = self[key] end
    for key, v in pairs(own) do merged[key] = v end
    local gname = fmt("%s: group %d", fname, #self.param_groups + 1)
    validate(gname, options(gname, merged, defaults))
    local flat = {}
    for i, p in ipairs(self.params) do flat[i] = p end
    for _, p in ipairs(ps) do flat[#flat + 1] = p end
    check_params(fname, flat)
    local groups = self.param_groups
    local mt = rawget(self, "_group_mt") or group_reader(self, defaults)
    if SINGLE[groups] then groups = {setmetatable({params = self.params}, mt)} end
    local g = setmetatable({params = ps}, mt)
    for key, v in pairs(own) do g[key] = v end
    groups[#groups + 1] = g
    self._group_mt = mt
    self.params, self.param_groups = flat, groups
    return self
end

-- zero_grad([set_to_none = true]): drops each gradient (p.grad = nil), or
-- with false fills it with zeros in place (Torch's set_to_none).
function Optimizer:zero_grad(set_to_none, extra)
    if extra ~= nil then extra_arg("zero_grad", "(set_to_none)", extra) end
    check_opt_self("zero_grad", self)
    if set_to_none == nil then set_to_none = true end
    if type(set_to_none) ~= "boolean" then
        fail(fmt("zero_grad: set_to_none must be a boolean, got %s", typename(set_to_none)))
    end
    if set_to_none then
        for _, p in ipairs(self.params) do p.grad = nil end
        return
    end
    for i, p in ipairs(self.params) do
        local g = p.grad
        if g ~= nil and not is_tensor(g) then
            fail(fmt("zero_grad: the gradient of parameter %d is %s, expected a tensor", i, typename(g)))
        end
    end
    autograd.no_grad(function()
        for _, p in ipairs(self.params) do
            if p.grad ~= nil then p.grad:zero_() end
        end
    end)
end

-- What step() checks before any update: opt.lr (a field the user or a
-- scheduler sets) and each gradient (p.grad may be assigned by hand): a
-- wrong one would otherwise fail inside a pushed kernel, reported at some
-- later wait, or be used silently (a 6-element gradient for a 2 x 3
-- parameter, a broadcast one).
local function check_step(self)
    local lr = self.lr
    if type(lr) ~= "number" or not (lr >= 0 and lr < math.huge) then
        fail(fmt("step: opt.lr must be a finite number >= 0, got %s", type(lr) == "number" and tostring(lr)
                 or typename(lr)))
    end
    local groups = self.param_groups
    for k, grp in ipairs(SINGLE[groups] and {} or groups or {}) do
        local glr = grp.lr
        if glr ~= nil and (type(glr) ~= "number" or not (glr >= 0 and glr < math.huge)) then
            fail(fmt("step: param_groups[%d].lr must be a finite number >= 0, got %s", k,
                     type(glr) == "number" and tostring(glr) or typename(glr)))
        end
    end
    check_options(self)
    for i, p in ipairs(self.params) do
        local g = p.grad
        if g == nil and p._moved_by_to then
            fail(fmt("step: parameter %d has no gradient: Module:to moved it (the module now holds a copy, %s); " ..
                     "build the optimiser after m:to(...)", i, p._moved_by_to))
        end
        if g ~= nil then
            if not is_tensor(g) then
                fail(fmt("step: the gradient of parameter %d is %s, expected a tensor", i, typename(g)))
            end
            local pc, gc = p._c, g._c
            local same = pc.ndim == gc.ndim
            if same then
                for d = 0, pc.ndim - 1 do
                    if pc.shape[d] ~= gc.shape[d] then same = false break end
                end
            end
            if not same then
                fail(fmt("step: the gradient of parameter %d has shape %s, the parameter %s", i,
                         tensor.shape_str(g:shape()), tensor.shape_str(p:shape())))
            end
            if not FLOAT[g:dtype()] then
                fail(fmt("step: the gradient of parameter %d is %s, expected float32 or float64", i, g:dtype()))
            end
            if not util.same_device_ctx(pc.ctx, gc.ctx) then
                fail(fmt("step: the gradient of parameter %d is on %s, the parameter on %s", i,
                         tostring(g:device()), tostring(p:device())))
            end
        end
    end
end

-- self.t counts the optimiser's steps, self.steps[i] the updates of
-- parameter i (Torch's state["step"]): a parameter that first gets a
-- gradient at step 3 takes its first update as such (Adam's bias
-- correction, Adagrad's lr_decay), not as the third.
--
-- step([closure]): Torch's form: closure() (run with grad mode on) clears
-- the gradients, computes the loss, calls backward and returns the loss,
-- which step returns after its update.
function Optimizer:step(closure, extra)
    if extra ~= nil then extra_arg("step", "(closure)", extra) end
    check_opt_self("step", self)
    local loss
    if closure ~= nil then
        if type(closure) ~= "function" then
            fail(fmt("step: expected no argument or a closure (a function that computes the loss and calls " ..
                     "backward), got %s", typename(closure)))
        end
        loss = autograd.enable_grad(closure)
    end
    check_step(self)
    autograd.no_grad(function()
        local steps = self.steps
        local views = option_views(self)
        -- every parameter's new state (first moments...) before any update:
        -- a device out of memory for one then leaves every parameter, count
        -- and state as it was, instead of some stepped and counted
        -- A parameter updated before that has no gradient now (frozen, or
        -- unused this step) still has its state follow the options: one
        -- switched on adds its part (from zeros, as it would start at the
        -- parameter's next update), one switched off drops it, so that a
        -- checkpoint taken now holds what these options keep and resumes
        -- exactly (idle_state / keep_state).
        local fresh = {}
        for i, p in ipairs(self.params) do
            local v = views and views[i] or self
            if p.grad ~= nil then
                if v.new_state then fresh[i] = v:new_state(i, p) end
            elseif (steps[i] or 0) > 0 and v.idle_state then
                fresh[i] = v:idle_state(i, p)
            end
        end
        self.t = self.t + 1
        for i, p in ipairs(self.params) do
            local v = views and views[i] or self
            if p.grad ~= nil then
                steps[i] = (steps[i] or 0) + 1
                local g = p.grad
                if v.maximize then g = g:neg() end -- (ascends the objective: Torch's maximize)
                v:update(i, p, g, fresh[i])
            elseif (steps[i] or 0) > 0 and v.keep_state then
                v:keep_state(i, p, fresh[i])
            end
        end
    end)
    -- without a closure, no value: the REPL printed "nil" after every opt:step()
    if closure ~= nil then return loss end
end

-- ---------------------------------------------------------------- checkpoints

-- opt:save(path) writes what a resumed run needs beside the parameters
-- (m:save): the optimiser's kind, step count, lr (a scheduler changes it),
-- each parameter's shape and update count and its state (momentum
-- buffers, Adam's moments...), in the ordo tensor file format.
-- opt:load(path) reads it into an optimiser of the same kind over
-- parameters of the same shapes (made with the same options): it checks
-- everything first, and on any mismatch raises and changes nothing.  Each
-- class names its state field, the state it keeps for a parameter once
-- updated (state_keys(self): "" for a lone tensor) and the shape of each
-- state tensor of parameter p (state_shape(self, p, key); key nil for a
-- lone tensor).
local serialize -- required on first use: ordo.serialize requires ordo.tensor

local function state_entries(self)
    local out = {}
    local field = self.state_field
    for i = 1, #self.params do
        local st = self[field][i]
        if is_tensor(st) then
            out[#out + 1] = {name = fmt("%s.%d", field, i), tensor = st}
        elseif type(st) == "table" then
            local keys = {}
            for k in pairs(st) do keys[#keys + 1] = k end
            table.sort(keys)
            for _, k in ipairs(keys) do out[#out + 1] = {name = fmt("%s.%d.%s", field, i, k), tensor = st[k]} end
        end
    end
    return out
end

local function scalar(v, dt) return tensor.tensor(v, {dtype = dt}) end

-- The entries of a checkpoint ({name =, tensor =}, the live state tensors).
local function checkpoint_entries(self)
    if self.pack_state then self:pack_state() end -- (LBFGS: its history as tensors)
    local kind = self.__name or "optimiser"
    local steps = {}
    for i = 1, #self.params do steps[i] = self.steps[i] or 0 end
    local entries = {
        {name = "kind", tensor = tensor.tensor({kind:byte(1, -1)}, {dtype = "uint8"})},
        {name = "params", tensor = scalar(#self.params, "int64")},
        {name = "step", tensor = scalar(self.t, "int64")},
        {name = "lr", tensor = scalar(self.lr, "float64")},
        {name = "steps", tensor = tensor.tensor(steps, {dtype = "int64"})},
    }
    -- the param groups and the lr of each that has one of its own (it may
    -- change between steps, as opt.lr: a Torch loop's g.lr = g.lr * 0.1,
    -- ReduceLROnPlateau), restored by load; none for a plain list's group
    local groups = self.param_groups
    if type(groups) == "table" then
        entries[#entries + 1] = {name = "groups", tensor = scalar(#groups, "int64")}
        if not SINGLE[groups] then
            local sizes = {}
            for k, g in ipairs(groups) do sizes[k] = #g.params end
            entries[#entries + 1] = {name = "group_sizes", tensor = tensor.tensor(sizes, {dtype = "int64"})}
            for k, g in ipairs(groups) do
                if type(rawget(g, "lr")) == "number" then
                    entries[#entries + 1] = {name = "group_lr." .. k, tensor = scalar(g.lr, "float64")}
                end
            end
        end
    end
    -- the parameters' shapes: state of numel elements fits any shape of as many
    for i, p in ipairs(self.params) do
        local s = p:shape()
        entries[#entries + 1] = {name = "shape." .. i,
                                 tensor = #s > 0 and tensor.tensor(s, {dtype = "int64"})
                                     or tensor.zeros({0}, {dtype = "int64"})}
    end
    for _, e in ipairs(state_entries(self)) do entries[#entries + 1] = e end
    return entries
end

function Optimizer:save(path, extra)
    if extra ~= nil then extra_arg("save", "(path)", extra) end
    check_opt_self("save", self)
    serialize = serialize or require "ordo.serialize"
    serialize.write("optimizer save", path, checkpoint_entries(self))
    return self
end

-- opt:state_dict(): what opt:save writes, in memory: a list of {name =,
-- tensor =}, the tensors copies (a snapshot: later steps do not change it).
-- opt:load_state_dict(sd) puts one back, with opt:load's checks (and copies
-- its tensors: the optimiser never shares state with sd).
function Optimizer:state_dict(extra)
    if extra ~= nil then extra_arg("state_dict", "()", extra) end
    check_opt_self("state_dict", self)
    local r = {}
    for i, e in ipairs(checkpoint_entries(self)) do r[i] = {name = e.name, tensor = e.tensor:clone()} end
    return r
end

local function shape_str(s) return tensor.shape_str(s) end

-- Reads checkpoint entries (from a file, or a state dict: path names where
-- they come from; copy: the tensors are the caller's and must be copied).
local function load_entries(self, fname, path, list, copy)
    local got = {}
    for _, e in ipairs(list) do got[e.name] = e.tensor end
    local kind = self.__name or "optimiser"
    local k = got.kind
    if k == nil then
        -- (a module's m:save file, a lone tensor: said as such, not "the state of ?")
        fail(fmt("%s: %s holds no optimiser state (no 'kind': not written by opt:save / opt:state_dict)", fname, path))
    end
    if k:dtype() ~= "uint8" or k:dim() ~= 1 or k:numel() == 0 or k:numel() > 64 then
        fail(fmt("%s: %s has a damaged 'kind' (%s of shape %s, expected the uint8 bytes of a name)", fname, path,
                 k:dtype(), shape_str(k:shape())))
    end
    local file_kind = string.char(unpack(k:totable()))
    if file_kind ~= kind then
        fail(fmt("%s: %s holds the state of %s, not %s", fname, path, file_kind, kind))
    end
    -- one element each: params and step whole numbers >= 0 (int64), lr a
    -- finite number >= 0 (a damaged file must not set a nan lr or a step of 2.5)
    local function scalar_of(name, dt)
        local t = got[name]
        if not t or t:numel() ~= 1 then fail(fmt("%s: %s has no %s", fname, path, name)) end
        local v = t:item()
        if t:dtype() ~= dt or not (v >= 0 and v < math.huge) then
            fail(fmt("%s: %s has a damaged %s (%s %s, expected %s >= 0)", fname, path, name, t:dtype(), tostring(v),
                     dt == "int64" and "a whole number" or "a finite number"))
        end
        return v
    end
    local function int_of(name) return scalar_of(name, "int64") end
    if int_of("params") ~= #self.params then
        fail(fmt("%s: %s is for %d parameters, this optimiser has %d", fname, path, int_of("params"), #self.params))
    end
    local step, lr = int_of("step"), scalar_of("lr", "float64")
    local n = #self.params
    -- per-parameter update counts; a file from before them has none: each
    -- parameter with state then counts the optimiser's steps (set below)
    local steps, counted = {}, got.steps ~= nil
    if counted then
        local t = got.steps
        if t:dtype() ~= "int64" or t:dim() ~= 1 or t:numel() ~= n then
            fail(fmt("%s: steps in %s is %s of shape %s, expected int64 of shape %d", fname, path, t:dtype(),
                     shape_str(t:shape()), n))
        end
        for i, v in ipairs(t:totable()) do
            if v < 0 or v > step then
                fail(fmt("%s: %s counts %d updates of parameter %d in %d steps", fname, path, v, i, step))
            end
            steps[i] = v
        end
    end
    -- the parameters' shapes (files from before them have none)
    for i, p in ipairs(self.params) do
        local t = got["shape." .. i]
        if t then
            local saved = t:numel() > 0 and t:totable() or {}
            if t:dtype() ~= "int64" or t:dim() ~= 1 or shape_str(saved) ~= shape_str(p:shape()) then
                fail(fmt("%s: %s was saved for a parameter %d of shape %s, this optimiser's is %s", fname, path, i,
                         t:dtype() == "int64" and t:dim() == 1 and shape_str(saved) or "?", shape_str(p:shape())))
            end
            got["shape." .. i] = nil
        elseif counted then
            fail(fmt("%s: %s has no shape for parameter %d", fname, path, i))
        end
    end
    -- the groups' own lrs (files from before them have none: the groups keep theirs)
    local groups, group_lrs = self.param_groups, nil
    -- the groups' sizes (saved for an optimiser made with groups): groups of
    -- other sizes over parameters of the same shapes would load each
    -- group's lr and state into the wrong parameters
    local sizes_t = got.group_sizes
    if sizes_t ~= nil then
        local grouped = type(groups) == "table" and not SINGLE[groups]
        local mine = {}
        if grouped then
            for k, g in ipairs(groups) do mine[k] = #g.params end
        else
            mine[1] = #self.params
        end
        if sizes_t:dtype() ~= "int64" or sizes_t:dim() ~= 1 or sizes_t:numel() == 0 then
            fail(fmt("%s: %s has a damaged group_sizes entry", fname, path))
        end
        local saved = sizes_t:totable()
        if shape_str(saved) ~= shape_str(mine) then
            fail(fmt("%s: %s was saved for %d parameter group%s of %s parameters, this optimiser has %s of %s " ..
                     "(make it with the same groups)", fname, path, #saved, #saved == 1 and "" or "s",
                     table.concat(saved, ", "), grouped and fmt("%d group%s", #mine, #mine == 1 and "" or "s")
                     or "a plain list", table.concat(mine, ", ")))
        end
        got.group_sizes = nil
    end
    if got.groups ~= nil then
        local ng = int_of("groups")
        local mine = type(groups) == "table" and #groups or 1
        if ng ~= mine then
            fail(fmt("%s: %s was saved from an optimiser with %d param group%s, this one has %d", fname, path, ng,
                     ng == 1 and "" or "s", mine))
        end
        group_lrs = {}
        for k = 1, ng do
            local name = "group_lr." .. k
            if got[name] ~= nil then
                if SINGLE[groups] then
                    fail(fmt("%s: %s was saved from an optimiser whose param group 1 has an lr of its own, this " ..
                             "one was made with a plain list of parameters", fname, path))
                end
                group_lrs[k] = scalar_of(name, "float64")
                got[name] = nil
            end
        end
        got.groups = nil
    end
    got.kind, got.params, got.step, got.lr, got.steps = nil, nil, nil, nil, nil
    local field, new = self.state_field, {}
    local views = option_views(self) -- a group's options decide the state its parameters keep
    local names = {}
    for name in pairs(got) do names[#names + 1] = name end
    table.sort(names) -- (the first mismatch named is the same every time)
    for _, name in ipairs(names) do
        local t = got[name]
        local f, i, key = name:match("^(%a+)%.(%d+)%.?(.*)$")
        i = tonumber(i)
        local p = f == field and i and self.params[i]
        if not p then fail(fmt("%s: %s has a tensor %s that this optimiser does not have", fname, path, name)) end
        key = key ~= "" and key or nil
        -- (want_dt: a host scalar of that dtype, NAdam's mu_product, not a tensor like p)
        local want, want_dt = (views and views[i] or self):state_shape(p, key, t)
        if not want then fail(fmt("%s: %s has a tensor %s that this optimiser does not have", fname, path, name)) end
        if t:dtype() ~= (want_dt or p:dtype()) or shape_str(t:shape()) ~= shape_str(want) then
            fail(fmt("%s: %s in %s is %s of shape %s, this optimiser's is %s of shape %s", fname, name, path,
                     t:dtype(), shape_str(t:shape()), want_dt or p:dtype(), shape_str(want)))
        end
        local moved = want_dt and t or t:to(p:device())
        t = (copy and rawequal(moved, t)) and t:clone() or moved
        if key then
            new[i] = new[i] or {}
            new[i][key] = t
        else
            new[i] = t
        end
    end
    -- every parameter updated has all the state this optimiser keeps: state
    -- saved with other options (RMSprop without momentum loaded into one
    -- with) would otherwise leave the missing part nil for good
    for i = 1, n do
        local keys = (views and views[i] or self):state_keys(i)
        local st = new[i]
        if not counted then steps[i] = st ~= nil and step or 0 end
        if st ~= nil or steps[i] > 0 then
            for _, k in ipairs(keys) do
                local have
                if k == "" then have = is_tensor(st) else have = type(st) == "table" and st[k] ~= nil end
                if not have then
                    fail(fmt("%s: %s has no %s.%d%s, which this optimiser keeps (made with other options?)", fname,
                             path, field, i, k == "" and "" or "." .. k))
                end
            end
        end
    end
    if self.check_loaded then self:check_loaded(new, fname, path) end
    self[field], self.t, self.lr, self.steps = new, step, lr, steps
    if group_lrs and not SINGLE[groups] then
        for k, g in ipairs(groups) do g.lr = group_lrs[k] end
    end
    return self
end

function Optimizer:load(path, extra)
    if extra ~= nil then extra_arg("load", "(path)", extra) end
    check_opt_self("load", self)
    serialize = serialize or require "ordo.serialize"
    local fname = "optimizer load"
    return load_entries(self, fname, path, serialize.read(fname, path), false)
end

function Optimizer:load_state_dict(sd, extra)
    if extra ~= nil then extra_arg("load_state_dict", "(state_dict)", extra) end
    check_opt_self("load_state_dict", self)
    local fname = "load_state_dict"
    if type(sd) ~= "table" or is_tensor(sd) then
        fail(fmt("%s: expected a state dict (opt:state_dict()), got %s", fname, typename(sd)))
    end
    if sd[1] == nil and next(sd) ~= nil then
        -- name = tensor: what ordo.load gives for ordo.save(opt:state_dict(), path)
        local list = {}
        for k, v in pairs(sd) do
            if type(k) ~= "string" or not is_tensor(v) then
                fail(fmt("%s: expected a state dict (opt:state_dict(), or a table of name = tensor), got an entry %s = %s",
                         fname, tostring(k), typename(v)))
            end
            list[#list + 1] = {name = k, tensor = v}
        end
        sd = list
    end
    for i, e in ipairs(sd) do
        if type(e) ~= "table" or type(e.name) ~= "string" or not is_tensor(e.tensor) then
            fail(fmt("%s: entry %d is not {name =, tensor =} (from opt:state_dict())", fname, i))
        end
    end
    return load_entries(self, fname, "the state dict", sd, true)
end

-- print(opt) (Torch's shows each group's options): "optim.SGD(2
-- parameters, lr = 0.1, dampening = 0, ...)", the options as the next
-- step uses them (lr first), then a line per group with the options it
-- sets itself ("  group 1: 1 parameter, lr = 0.01").  It printed as
-- "table: 0x...", and the REPL showed the internals (_defaults' lr, not
-- the one in use).
local function option_text(keys, get)
    local parts = {}
    for _, k in ipairs(keys) do
        local v = get(k)
        local text
        if type(v) == "number" then
            text = fmt("%g", v)
        elseif type(v) == "table" and getmetatable(v) == nil then -- (Rprop's etas = {0.5, 1.2})
            local items = {}
            for j, x in ipairs(v) do items[j] = type(x) == "number" and fmt("%g", x) or tostring(x) end
            text = "{" .. table.concat(items, ", ") .. "}"
        else
            text = tostring(v)
        end
        parts[#parts + 1] = k .. " = " .. text
    end
    return table.concat(parts, ", ")
end
local function sorted_keys(t, skip)
    local keys = {}
    for k in pairs(t) do if type(k) == "string" and k ~= skip and k ~= "lr" then keys[#keys + 1] = k end end
    table.sort(keys)
    if rawget(t, "lr") ~= nil and skip ~= "lr" then table.insert(keys, 1, "lr") end
    return keys
end
local function plural(n) return fmt("%d parameter%s", n, n == 1 and "" or "s") end
local function optimizer_tostring(self)
    local params, defaults = rawget(self, "params"), rawget(self, "_defaults")
    local head = (self.__name or "optim") .. "(" .. plural(type(params) == "table" and #params or 0)
    if type(defaults) == "table" then
        head = head .. ", " .. option_text(sorted_keys(defaults), function(k) return self[k] end)
    end
    local lines = {head .. ")"}
    local groups = rawget(self, "param_groups")
    if type(groups) == "table" and not SINGLE[groups] then
        -- a group's lr as the step uses it: following opt.lr in proportion
        local base, lr = rawget(self, "_base_lr"), self.lr
        local ratio = type(base) == "number" and base ~= 0 and type(lr) == "number" and lr / base or 1
        for k, g in ipairs(groups) do
            local own = option_text(sorted_keys(g, "params"), function(key)
                local v = g[key]
                if key == "lr" and type(v) == "number" then return v * ratio end
                return v
            end)
            lines[#lines + 1] = fmt("  group %d: %s%s", k, plural(type(g.params) == "table" and #g.params or 0),
                                    own ~= "" and ", " .. own or "")
        end
    end
    return table.concat(lines, "\n")
end

local function class(name)
    local cls = setmetatable({__name = "optim." .. name}, {__index = Optimizer})
    cls.__index = cls
    cls.__tostring = optimizer_tostring
    return cls
end

local function check_betas(fname, o)
    if o.beta1 >= 1 or o.beta2 >= 1 then fail(fname .. ": beta1 and beta2 must be < 1") end
end

-- SGD(params, {lr = 0.01, momentum = 0, dampening = 0, weight_decay = 0,
-- nesterov = false}): with momentum, buf = momentum * buf + (1 - dampening)
-- g (g on the first step) and the step follows buf (Torch's form).
local SGD = class("SGD")
M.SGD = SGD

function M.SGD.new(params, opts, extra)
    if extra ~= nil then extra_arg("SGD", "(params, opts)", extra) end
    local o = make("SGD", params, opts, {lr = 0.01, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false,
                                     maximize = false},
                   function(f, g)
        if g.nesterov and g.momentum == 0 then fail(f .. ": nesterov needs a momentum > 0") end
        if not (g.dampening >= 0 and g.dampening <= 1) then fail(fmt("%s: dampening must be in [0, 1], got %g", f, g.dampening)) end
        if g.nesterov and g.dampening ~= 0 then fail(f .. ": nesterov needs a dampening of 0 (Torch's rule)") end
    end)
    o.t, o.steps, o.buf = 0, {}, {}
    return setmetatable(o, SGD)
end
setmetatable(SGD, {__index = Optimizer, __call = function(_, ...) return SGD.new(...) end})

SGD.state_field = "buf"
-- (none required: a parameter's momentum buffer starts at its first
-- gradient after momentum is set, so one updated before may have none yet)
function SGD:state_keys() return {} end
function SGD:state_shape(p, key)
    if key == nil and self.momentum ~= 0 then return p:shape() end
end

-- A parameter's state to be, made before any update (nil: none needed);
-- update(i, p, g, fresh) takes it in.
function SGD:new_state(i, p)
    if self.momentum ~= 0 and self.buf[i] == nil then return tensor.empty_like(p) end
end

-- A parameter without a gradient at a step: momentum set to 0 drops its
-- buffer (a checkpoint then holds the state an SGD without momentum keeps,
-- and loads into one).  Momentum set on makes no buffer before the
-- parameter's next gradient, which starts it (the gradient itself).
function SGD:keep_state(i)
    if self.momentum == 0 then self.buf[i] = nil end
end

function SGD:update(i, p, g, fresh)
    local mom = self.momentum
    local buf = self.buf[i]
    if mom == 0 and buf ~= nil then
        self.buf[i], buf = nil, nil
    end
    local first = buf == nil
    if mom ~= 0 and first then
        buf = fresh or tensor.empty_like(p)
        self.buf[i] = buf
    end
    local damp = self.dampening
    if damp == 0 and fusable(K_SGD, p, g, buf or p) then
        local sc = {self.lr, mom, self.weight_decay, self.nesterov and 1 or 0, first and 1 or 0}
        tensor.push(K_SGD, "sgd_step", 0, {g}, buf and {p, buf} or {p}, sc)
        return
    end
    if self.weight_decay ~= 0 then g = g + p * self.weight_decay end
    if mom ~= 0 then
        -- (dampening scales the new gradient in the buffer, not the first one: Torch's)
        if first then buf:copy_(g) else buf:mul_(mom):add_(damp == 0 and g or g * (1 - damp)) end
        g = self.nesterov and g + buf * mom or buf
    end
    p:sub_(g * self.lr)
end

-- Adam(params, {lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
-- weight_decay = 0}) with bias-corrected moments (Kingma & Ba).
-- Adam and AdamW: one set of options, weight decay defaulting to wd.
local function adam_class(name, wd)
    local cls = class(name)
    M[name] = cls
    function cls.new(params, opts, extra)
        if extra ~= nil then extra_arg(name, "(params, opts)", extra) end
        local o = make(name, params, opts, {lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = wd,
                                                  amsgrad = false, maximize = false},
                       check_betas)
        o.t, o.steps, o.state = 0, {}, {}
        return setmetatable(o, cls)
    end
    setmetatable(cls, {__index = Optimizer, __call = function(_, ...) return cls.new(...) end})
    cls.state_field = "state"
    function cls:state_keys() return {""} end
    function cls:state_shape(p, key) -- the moments, one row each (amsgrad: and the largest v)
        if key == nil then return {self.amsgrad and 3 or 2, p:numel()} end
    end
    -- m and v in one 2 x n tensor: the fused kernel writes both (an op has at most two outputs);
    -- made like p, so that it lives on p's engine, device and dtype.  amsgrad keeps a third
    -- row, the largest v so far (opt.amsgrad set after some steps: the row is added then,
    -- from zeros as Torch starts it, and dropped when it is unset)
    function cls:new_state(i, p)
        local st = self.state[i]
        if st == nil or self.amsgrad and st:size(1) == 2 then
            return tensor.zeros_like(p:flatten():expand(self.amsgrad and 3 or 2, p:numel()))
        end
    end
    -- an idle parameter (no gradient at this step): amsgrad set grows its
    -- state (the moments kept, the largest v from zeros), amsgrad unset drops the row
    function cls:idle_state(i, p)
        if self.state[i] ~= nil then return self:new_state(i, p) end
    end
    function cls:keep_state(i, _, fresh)
        local st = self.state[i]
        if st == nil then return end
        if fresh ~= nil then
            fresh:narrow(1, 1, 2):copy_(st:narrow(1, 1, 2))
            self.state[i] = fresh
        elseif not self.amsgrad and st:size(1) == 3 then
            self.state[i] = st:narrow(1, 1, 2)
        end
    end
    return cls
end

local Adam = adam_class("Adam", 0)

-- Adam's update with weight decay wd added to the gradient (Adam's L2
-- form; AdamW passes 0 and decays the parameter itself).
local function adam_update(self, i, p, g, wd, fresh)
    local st = self.state[i]
    local ams = self.amsgrad
    if st ~= nil and fresh ~= nil then -- amsgrad turned on: the moments go on in the grown state
        fresh:narrow(1, 1, 2):copy_(st:narrow(1, 1, 2))
        st = nil
    end
    if st == nil then
        st = fresh or self:new_state(i, p)
        self.state[i] = st
    elseif not ams and st:size(1) == 3 then -- amsgrad turned off: the fused kernel takes 2 rows
        st = st:narrow(1, 1, 2)
        self.state[i] = st
    end
    local b1, b2 = self.beta1, self.beta2
    local t = self.steps[i] -- this parameter's updates, this one included (both paths below)
    local c1, c2 = 1 - b1 ^ t, 1 - b2 ^ t
    if not ams and fusable(K_ADAM, p, g, st) then
        tensor.push(K_ADAM, "adam_step", 0, {g}, {p, st},
                    {self.lr / c1, b1, b2, self.eps, wd, 1 / c2})
        return
    end
    if wd ~= 0 then g = g + p * wd end
    local m, v = st:select(1, 1):view(p:shape()), st:select(1, 2):view(p:shape())
    m:mul_(b1):add_(g * (1 - b1))
    v:mul_(b2):add_(g * g * (1 - b2))
    if ams then
        local vmax = st:select(1, 3):view(p:shape())
        vmax:copy_(vmax:maximum(v))
        v = vmax
    end
    local denom = (v * (1 / c2)):sqrt():add_(self.eps)
    p:sub_(m / denom * (self.lr / c1))
end

function Adam:update(i, p, g, fresh) adam_update(self, i, p, g, self.weight_decay, fresh) end

-- AdamW(params, {lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
-- weight_decay = 0.01}): Adam with decoupled weight decay (Loshchilov &
-- Hutter): p = p (1 - lr wd) before the Adam step, instead of adding wd p
-- to the gradient, so the decay is not scaled by the moments.
local AdamW = adam_class("AdamW", 0.01)

function AdamW:update(i, p, g, fresh)
    if self.weight_decay ~= 0 then p:mul_(1 - self.lr * self.weight_decay) end
    adam_update(self, i, p, g, 0, fresh)
end

-- RMSprop(params, {lr = 0.01, alpha = 0.99, eps = 1e-8, weight_decay = 0,
-- momentum = 0, centered = false}), Torch's form: v = alpha v + (1 -
-- alpha) g^2; the step is g / (sqrt(v) + eps) (centered: v less the square
-- of the running mean of g), through a momentum buffer when momentum > 0.
-- Adagrad(params, {lr = 0.01, lr_decay = 0, weight_decay = 0,
-- initial_accumulator_value = 0, eps = 1e-10}): each element's step is
-- divided by the root of the sum of its squared gradients so far (Torch's
-- update).
local Adagrad = class("Adagrad")
M.Adagrad = Adagrad

function M.Adagrad.new(params, opts, extra)
    if extra ~= nil then extra_arg("Adagrad", "(params, opts)", extra) end
    local o = make("Adagrad", params, opts, {lr = 0.01, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0,
                                             eps = 1e-10, maximize = false}, function(f, g)
        if g.lr_decay < 0 or g.initial_accumulator_value < 0 then
            fail(f .. ": lr_decay and initial_accumulator_value must be >= 0")
        end
    end)
    o.t, o.steps, o.state = 0, {}, {}
    return setmetatable(o, Adagrad)
end
setmetatable(Adagrad, {__index = Optimizer, __call = function(_, ...) return Adagrad.new(...) end})

Adagrad.state_field = "state"
function Adagrad:state_keys() return {""} end
function Adagrad:state_shape(p, key)
    if key == nil then return p:shape() end
end

function Adagrad:new_state(i, p)
    if self.state[i] == nil then return tensor.full_like(p, self.initial_accumulator_value) end
end

function Adagrad:update(i, p, g, fresh)
    local sum = self.state[i]
    if sum == nil then
        sum = fresh or self:new_state(i, p)
        self.state[i] = sum
    end
    if self.weight_decay ~= 0 then g = g + p * self.weight_decay end
    sum:add_(g * g)
    local clr = self.lr / (1 + (self.steps[i] - 1) * self.lr_decay) -- this parameter's count, as Torch
    p:sub_(g / sum:sqrt():add_(self.eps) * clr)
end

local RMSprop = class("RMSprop")
M.RMSprop = RMSprop

function M.RMSprop.new(params, opts, extra)
    if extra ~= nil then extra_arg("RMSprop", "(params, opts)", extra) end
    local o = make("RMSprop", params, opts, {lr = 0.01, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0,
                                             centered = false, maximize = false}, function(f, g)
        if g.alpha < 0 or g.alpha >= 1 then fail(fmt("%s: alpha must be in [0, 1), got %g", f, g.alpha)) end
    end)
    o.t, o.steps, o.state = 0, {}, {}
    return setmetatable(o, RMSprop)
end
setmetatable(RMSprop, {__index = Optimizer, __call = function(_, ...) return RMSprop.new(...) end})

RMSprop.state_field = "state"
function RMSprop:state_keys()
    local r = {"v"}
    if self.centered then r[#r + 1] = "mean" end
    if self.momentum ~= 0 then r[#r + 1] = "buf" end
    return r
end
function RMSprop:state_shape(p, key)
    if key == "v" or key == "mean" and self.centered or key == "buf" and self.momentum ~= 0 then return p:shape() end
end

-- The state parameter i lacks (nil: none): all of it at its first update,
-- and the running mean or the momentum buffer when centered or momentum
-- is set between steps (from zeros, as Torch starts them).
function RMSprop:new_state(i, p)
    local st, new = self.state[i], {}
    if st == nil then new.v = tensor.zeros_like(p) end
    if self.centered and (st == nil or st.mean == nil) then new.mean = tensor.zeros_like(p) end
    if self.momentum ~= 0 and (st == nil or st.buf == nil) then new.buf = tensor.zeros_like(p) end
    if next(new) ~= nil then return new end
end

-- The state of parameter i as the options are now: fresh parts added,
-- centered or momentum unset between steps: their state goes (what these
-- options keep, as a checkpoint of them must hold).  Also for a parameter
-- without a gradient at a step (idle_state, keep_state).
function RMSprop:keep_state(i, _, fresh)
    local st = self.state[i]
    if st == nil then
        if fresh == nil then return nil end
        st = {}
        self.state[i] = st
    end
    for k, t in pairs(fresh or {}) do st[k] = t end
    if not self.centered then st.mean = nil end
    if self.momentum == 0 then st.buf = nil end
    return st
end

function RMSprop:idle_state(i, p)
    if self.state[i] ~= nil then return self:new_state(i, p) end
end

function RMSprop:update(i, p, g, fresh)
    local st = self:keep_state(i, p, fresh or self:new_state(i, p))
    local a = self.alpha
    if self.weight_decay ~= 0 then g = g + p * self.weight_decay end
    st.v:mul_(a):add_(g * g * (1 - a))
    local var = st.v
    if st.mean then
        st.mean:mul_(a):add_(g * (1 - a))
        var = st.v - st.mean * st.mean
    end
    local step = g / var:sqrt():add_(self.eps)
    if st.buf then
        st.buf:mul_(self.momentum):add_(step)
        step = st.buf
    end
    p:sub_(step * self.lr)
end

-- Optimisers whose state is a table of tensors like the parameter, named
-- by keys (all made at a parameter's first update, Torch's state): the
-- class's init(self, p) returns that table.  Options per make().
local function keyed_class(name, keys, defaults, validate, init)
    local cls = class(name)
    M[name] = cls
    function cls.new(params, opts, extra)
        if extra ~= nil then extra_arg(name, "(params, opts)", extra) end
        local d = {}
        for k, v in pairs(defaults) do
            if type(v) == "table" then v = {unpack(v)} end -- (each optimiser its own etas table)
            d[k] = v
        end
        local o = make(name, params, opts, d, validate)
        o.t, o.steps, o.state = 0, {}, {}
        return setmetatable(o, cls)
    end
    setmetatable(cls, {__index = Optimizer, __call = function(_, ...) return cls.new(...) end})
    cls.state_field = "state"
    local has = {}
    for _, k in ipairs(keys) do has[k] = true end
    function cls:state_keys() return keys end
    function cls:state_shape(p, key)
        if has[key] then return p:shape() end
    end
    function cls:new_state(i, p)
        if self.state[i] == nil then return init(self, p) end
    end
    -- the state of parameter i for this update (made at its first)
    function cls:state_of(i, p, fresh)
        local st = self.state[i]
        if st == nil then
            st = fresh or init(self, p)
            self.state[i] = st
        end
        return st
    end
    return cls
end

local function zeros_init(keys)
    return function(_, p)
        local st = {}
        for _, k in ipairs(keys) do st[k] = tensor.zeros_like(p) end
        return st
    end
end

-- Torch's weight decay: added to the gradient (L2), or with decoupled
-- (NAdam's and RAdam's decoupled_weight_decay, AdamW's form) the
-- parameter shrinks by lr wd before the step.
local function decay(self, p, g)
    local wd = self.weight_decay
    if wd == 0 then return g end
    if self.decoupled_weight_decay then
        p:mul_(1 - self.lr * wd)
        return g
    end
    return g + p * wd
end

-- Adamax(params, {lr = 2e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
-- weight_decay = 0}): Adam with the infinity norm (Torch's form):
-- m = b1 m + (1 - b1) g, u = max(b2 u, |g| + eps), p -= lr / (1 - b1^t) m / u.
local Adamax = keyed_class("Adamax", {"exp_avg", "exp_inf"},
                           {lr = 2e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0, maximize = false},
                           check_betas, zeros_init({"exp_avg", "exp_inf"}))

function Adamax:update(i, p, g, fresh)
    local st = self:state_of(i, p, fresh)
    local b1, b2 = self.beta1, self.beta2
    g = decay(self, p, g)
    st.exp_avg:mul_(b1):add_(g * (1 - b1))
    st.exp_inf:copy_((st.exp_inf * b2):maximum(g:abs():add_(self.eps)))
    p:sub_(st.exp_avg / st.exp_inf * (self.lr / (1 - b1 ^ self.steps[i])))
end

-- NAdam(params, {lr = 2e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
-- weight_decay = 0, momentum_decay = 4e-3, decoupled_weight_decay =
-- false}): Adam with Nesterov momentum (Dozat), Torch's form step by step:
-- mu_t = b1 (1 - 0.5 * 0.96^(t momentum_decay)), their running product
-- kept per parameter (state mu_product, a float64 host scalar).
local NADAM_KEYS = {"exp_avg", "exp_avg_sq", "mu_product"}
local NAdam = keyed_class("NAdam", NADAM_KEYS,
                          {lr = 2e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0,
                           momentum_decay = 4e-3, decoupled_weight_decay = false, maximize = false},
                          check_betas, function(_, p)
    return {exp_avg = tensor.zeros_like(p), exp_avg_sq = tensor.zeros_like(p),
            mu_product = scalar(1, "float64")}
end)

function NAdam:state_shape(p, key)
    if key == "mu_product" then return {}, "float64" end
    if key == "exp_avg" or key == "exp_avg_sq" then return p:shape() end
end

-- the value of each mu_product tensor this process made (no wait on the
-- engine to read it back at each step; a loaded one is read once)
local MU_VALUE = setmetatable({}, {__mode = "k"})

function NAdam:update(i, p, g, fresh)
    local st = self:state_of(i, p, fresh)
    local b1, b2, t, md, lr = self.beta1, self.beta2, self.steps[i], self.momentum_decay, self.lr
    g = decay(self, p, g)
    local mu = b1 * (1 - 0.5 * 0.96 ^ (t * md))
    local mu_next = b1 * (1 - 0.5 * 0.96 ^ ((t + 1) * md))
    local mu_product = (MU_VALUE[st.mu_product] or st.mu_product:item()) * mu
    st.mu_product = scalar(mu_product, "float64")
    MU_VALUE[st.mu_product] = mu_product
    st.exp_avg:mul_(b1):add_(g * (1 - b1))
    st.exp_avg_sq:mul_(b2):add_(g * g * (1 - b2))
    local denom = (st.exp_avg_sq * (1 / (1 - b2 ^ t))):sqrt():add_(self.eps)
    p:sub_(g / denom * (lr * (1 - mu) / (1 - mu_product)))
    p:sub_(st.exp_avg / denom * (lr * mu_next / (1 - mu_product * mu_next)))
end

-- RAdam(params, {lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
-- weight_decay = 0, decoupled_weight_decay = false}): Adam with the
-- variance rectified (Liu et al.), Torch's form: while rho_t <= 5 the step
-- is the bias-corrected first moment alone.
local RAdam = keyed_class("RAdam", {"exp_avg", "exp_avg_sq"},
                          {lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0,
                           decoupled_weight_decay = false, maximize = false},
                          check_betas, zeros_init({"exp_avg", "exp_avg_sq"}))

function RAdam:update(i, p, g, fresh)
    local st = self:state_of(i, p, fresh)
    local b1, b2, t, lr = self.beta1, self.beta2, self.steps[i], self.lr
    g = decay(self, p, g)
    st.exp_avg:mul_(b1):add_(g * (1 - b1))
    st.exp_avg_sq:mul_(b2):add_(g * g * (1 - b2))
    local c1, c2 = 1 - b1 ^ t, 1 - b2 ^ t
    local rho_inf = 2 / (1 - b2) - 1
    local rho_t = rho_inf - 2 * t * b2 ^ t / c2
    if rho_t > 5 then
        local rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
        p:sub_(st.exp_avg / st.exp_avg_sq:sqrt():add_(self.eps) * (lr / c1 * math.sqrt(c2) * rect))
    else
        p:sub_(st.exp_avg * (lr / c1))
    end
end

-- Adadelta(params, {lr = 1.0, rho = 0.9, eps = 1e-6, weight_decay = 0})
-- (Zeiler), Torch's form: v = rho v + (1 - rho) g^2, delta = sqrt(u + eps)
-- / sqrt(v + eps) g, u = rho u + (1 - rho) delta^2, p -= lr delta.
local Adadelta = keyed_class("Adadelta", {"square_avg", "acc_delta"},
                             {lr = 1.0, rho = 0.9, eps = 1e-6, weight_decay = 0, maximize = false},
                             function(f, g)
    if not (g.rho >= 0 and g.rho <= 1) then fail(fmt("%s: rho must be in [0, 1], got %g", f, g.rho)) end
end, zeros_init({"square_avg", "acc_delta"}))

function Adadelta:update(i, p, g, fresh)
    local st = self:state_of(i, p, fresh)
    local rho, eps = self.rho, self.eps
    g = decay(self, p, g)
    st.square_avg:mul_(rho):add_(g * g * (1 - rho))
    local delta = (st.acc_delta + eps):sqrt():div_((st.square_avg + eps):sqrt()):mul_(g)
    st.acc_delta:mul_(rho):add_(delta * delta * (1 - rho))
    p:sub_(delta * self.lr)
end

-- Rprop(params, {lr = 1e-2, etas = {0.5, 1.2}, step_sizes = {1e-6, 50}})
-- (Riedmiller & Braun), Torch's form: each element's step size (lr at
-- first) grows by etas[2] while its gradient keeps its sign and shrinks by
-- etas[1] (that step then skipped) when it flips, within step_sizes; the
-- parameter moves by the step size against the gradient's sign.
local function check_pair(f, o, key, lo_name, hi_name)
    local v = o[key]
    if #v ~= 2 or type(v[1]) ~= "number" or type(v[2]) ~= "number" or next(v, 2) ~= nil
        or not (v[1] > -math.huge and v[1] < math.huge and v[2] > -math.huge and v[2] < math.huge) then
        fail(fmt("%s: %s must be a list of two finite numbers {%s, %s}", f, key, lo_name, hi_name))
    end
    return v[1], v[2]
end
local Rprop = keyed_class("Rprop", {"prev", "step_size"},
                          {lr = 1e-2, etas = {0.5, 1.2}, step_sizes = {1e-6, 50}, maximize = false},
                          function(f, o)
    local minus, plus = check_pair(f, o, "etas", "etaminus", "etaplus")
    if not (minus > 0 and minus < 1 and plus > 1) then
        fail(fmt("%s: etas must be {etaminus, etaplus} with 0 < etaminus < 1 < etaplus, got {%g, %g}", f, minus, plus))
    end
    local lo, hi = check_pair(f, o, "step_sizes", "min", "max")
    if not (lo >= 0 and lo <= hi) then
        fail(fmt("%s: step_sizes must be {min, max} with 0 <= min <= max, got {%g, %g}", f, lo, hi))
    end
end, function(self, p)
    return {prev = tensor.zeros_like(p), step_size = tensor.full_like(p, self.lr)}
end)

function Rprop:update(i, p, g, fresh)
    local st = self:state_of(i, p, fresh)
    local minus, plus = self.etas[1], self.etas[2]
    local s = (g * st.prev):sign()
    local up, down = s:gt(0), s:lt(0)
    local factor = tensor.ones_like(p):masked_fill(up, plus):masked_fill(down, minus)
    st.step_size:mul_(factor):clamp_(self.step_sizes[1], self.step_sizes[2])
    g = g:masked_fill(down, 0)
    p:sub_(g:sign() * st.step_size)
    st.prev:copy_(g)
end

-- LBFGS(params, {lr = 1, max_iter = 20, max_eval = max_iter * 5 / 4 (floored),
-- tolerance_grad = 1e-7, tolerance_change = 1e-9, history_size = 100,
-- line_search_fn = "none" or "strong_wolfe"}): Torch's limited-memory BFGS,
-- step by step (its two-loop recursion, its strong Wolfe line search).
-- step(closure) is required: closure() clears the gradients, computes the
-- loss, calls backward and returns the loss (a number or a one-element
-- tensor), and runs up to max_eval times per step.  One group only (Torch's
-- rule); every parameter of one dtype and device.  Its state (the search
-- direction, the history of steps and gradient changes) is one flat
-- vector of all the parameters' elements, kept as parameter 1's state.
local LBFGS = class("LBFGS")
M.LBFGS = LBFGS
local LBFGS_KEYS = {"d", "prev_flat_grad", "old_dirs", "old_stps", "ro", "scalars"}

local function whole(f, o, key, min)
    local v = o[key]
    if v % 1 ~= 0 or v < min then fail(fmt("%s: %s must be a whole number >= %d, got %g", f, key, min, v)) end
end

function M.LBFGS.new(params, opts, extra)
    if extra ~= nil then extra_arg("LBFGS", "(params, opts)", extra) end
    if type(opts) == "table" and getmetatable(opts) == nil and opts.max_eval == nil then
        local mi = opts.max_iter == nil and 20 or opts.max_iter
        local copy = {}
        for k, v in pairs(opts) do copy[k] = v end
        if type(mi) == "number" and mi > -math.huge and mi < math.huge then copy.max_eval = math.floor(mi * 5 / 4) end
        opts = copy
    end
    local o = make("LBFGS", params, opts, {lr = 1, max_iter = 20, max_eval = 25, tolerance_grad = 1e-7,
                                           tolerance_change = 1e-9, history_size = 100, line_search_fn = "none"},
                   function(f, g)
        whole(f, g, "max_iter", 1)
        whole(f, g, "max_eval", 1)
        whole(f, g, "history_size", 1)
        if g.tolerance_grad < 0 or g.tolerance_change < 0 then
            fail(fmt("%s: tolerance_grad and tolerance_change must be >= 0", f))
        end
        if g.line_search_fn ~= "none" and g.line_search_fn ~= "strong_wolfe" then
            fail(fmt("%s: line_search_fn must be \"strong_wolfe\" or \"none\" (or left out), got '%s'", f,
                     g.line_search_fn))
        end
    end)
    if not SINGLE[o.param_groups] then
        fail("LBFGS: does not take param groups (Torch's rule): give a plain list of parameters")
    end
    local p1, n = o.params[1], 0
    for i, p in ipairs(o.params) do
        if p:dtype() ~= p1:dtype() or not util.same_device_ctx(p._c.ctx, p1._c.ctx) then
            fail(fmt("LBFGS: parameter %d is %s on %s, parameter 1 %s on %s: every parameter must have one dtype " ..
                     "and device (the state is one flat vector)", i, p:dtype(), tostring(p:device()), p1:dtype(),
                     tostring(p1:device())))
        end
        n = n + p:numel()
    end
    o.t, o.steps, o.state, o._numel = 0, {}, {}, n
    o._state_tbl = o.state
    return setmetatable(o, LBFGS)
end
setmetatable(LBFGS, {__index = Optimizer, __call = function(_, ...) return LBFGS.new(...) end})

LBFGS.state_field = "state"
-- (its steps are all in step(closure): no update of one parameter at a time)
function LBFGS:update() fail("LBFGS: update is not a per-parameter step; call opt:step(closure)") end
function LBFGS:add_param_group(_, extra)
    if extra ~= nil then extra_arg("add_param_group", "(group)", extra) end
    fail("add_param_group: LBFGS does not take param groups (Torch's rule)")
end
function LBFGS:state_keys(i) return i == 1 and LBFGS_KEYS or {} end
function LBFGS:state_shape(_, key, t)
    local n = self._numel
    if key == "d" or key == "prev_flat_grad" then return {n} end
    if key == "scalars" then return {5}, "float64" end
    if (key == "old_dirs" or key == "old_stps") and t and t:dim() == 2 and t:size(1) <= self.history_size then
        return {t:size(1), n}
    end
    if key == "ro" and t and t:dim() == 1 and t:size(1) <= self.history_size then return {t:size(1)}, "float64" end
end
function LBFGS:check_loaded(new, fname, path)
    for i = 2, #self.params do
        if new[i] ~= nil then fail(fmt("%s: %s has state for parameter %d, LBFGS keeps it for parameter 1", fname,
                                       path, i)) end
    end
    local st = new[1]
    if st == nil then return end
    local k = st.ro:numel()
    if st.old_dirs:size(1) ~= k or st.old_stps:size(1) ~= k then
        fail(fmt("%s: %s has a damaged LBFGS history (%d directions, %d steps, %d ro)", fname, path,
                 st.old_dirs:size(1), st.old_stps:size(1), k))
    end
end

-- the history as tensors, for a checkpoint (made at save / state_dict)
function LBFGS:pack_state()
    local L = self._lb
    if rawget(self, "state") ~= self._state_tbl or L == nil then return end
    local n = self._numel
    local function flat(t)
        if t then return t:clone() end -- (prev_flat_grad changes in place at the next step)
        local parts = {}
        for i, p in ipairs(self.params) do parts[i] = tensor.zeros_like(p):reshape({p:numel()}) end
        return #parts == 1 and parts[1] or tensor.cat(parts, 1)
    end
    local function hist(list)
        if #list == 0 then return flat(nil):reshape({1, n}):narrow(1, 1, 0):contiguous() end
        return tensor.stack(list, 1)
    end
    local st = {d = flat(L.d), prev_flat_grad = flat(L.prev_flat_grad), old_dirs = hist(L.old_dirs),
                old_stps = hist(L.old_stps),
                ro = #L.ro > 0 and tensor.tensor(L.ro, {dtype = "float64"}) or tensor.zeros({0}, {dtype = "float64"}),
                scalars = tensor.tensor({L.t or 0, L.H_diag or 1, L.prev_loss or 0, L.n_iter, L.func_evals},
                                        {dtype = "float64"})}
    self.state = {st}
    self._state_tbl = self.state
end

-- the history from the state (loaded, or none yet)
local function lbfgs_unpack(self)
    local st = self.state[1]
    self._state_tbl = rawget(self, "state")
    if st == nil then
        self._lb = nil
        return
    end
    local sc = st.scalars:totable()
    local L = {n_iter = sc[4], func_evals = sc[5], old_dirs = {}, old_stps = {}, ro = st.ro:totable()}
    if L.n_iter > 0 then
        L.d, L.prev_flat_grad, L.t, L.H_diag, L.prev_loss = st.d:clone(), st.prev_flat_grad:clone(), sc[1], sc[2], sc[3]
    end
    for j = 1, #L.ro do
        L.old_dirs[j] = st.old_dirs:select(1, j):clone()
        L.old_stps[j] = st.old_stps:select(1, j):clone()
    end
    self._lb = L
end

local function dot(a, b) return (a * b):sum():item() end
local function absmax(a) return a:abs():max():item() end

local function cubic_interpolate(x1, f1, g1, x2, f2, g2, lo, hi)
    local xmin_bound, xmax_bound = lo, hi
    if lo == nil then
        if x1 <= x2 then xmin_bound, xmax_bound = x1, x2 else xmin_bound, xmax_bound = x2, x1 end
    end
    local d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    local d2_square = d1 * d1 - g1 * g2
    if d2_square >= 0 then
        local d2 = math.sqrt(d2_square)
        local min_pos
        if x1 <= x2 then
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        end
        return math.min(math.max(min_pos, xmin_bound), xmax_bound)
    end
    return (xmin_bound + xmax_bound) / 2
end

-- Torch's _strong_wolfe (c1 = 1e-4, c2 = 0.9, tolerance_change 1e-9, 25 evaluations at most)
local function strong_wolfe(obj_func, x, t, d, f, g, gtd)
    local c1, c2, tolerance_change, max_ls = 1e-4, 0.9, 1e-9, 25
    local d_norm = absmax(d)
    g = g:clone()
    local f_new, g_new = obj_func(x, t, d)
    local ls_func_evals = 1
    local gtd_new = dot(g_new, d)
    local t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    local done, ls_iter = false, 0
    local bracket, bracket_f, bracket_g, bracket_gtd
    while ls_iter < max_ls do
        if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev) then
            bracket, bracket_f, bracket_g = {t_prev, t}, {f_prev, f_new}, {g_prev, g_new:clone()}
            bracket_gtd = {gtd_prev, gtd_new}
            break
        end
        if math.abs(gtd_new) <= -c2 * gtd then
            bracket, bracket_f, bracket_g, done = {t}, {f_new}, {g_new}, true
            break
        end
        if gtd_new >= 0 then
            bracket, bracket_f, bracket_g = {t_prev, t}, {f_prev, f_new}, {g_prev, g_new:clone()}
            bracket_gtd = {gtd_prev, gtd_new}
            break
        end
        local min_step, max_step = t + 0.01 * (t - t_prev), t * 10
        local tmp = t
        t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, min_step, max_step)
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new:clone(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals = ls_func_evals + 1
        gtd_new = dot(g_new, d)
        ls_iter = ls_iter + 1
    end
    if ls_iter == max_ls then
        bracket, bracket_f, bracket_g = {0, t}, {f, f_new}, {g, g_new}
    end
    -- zoom (bracket has 2 points unless done)
    local insuf_progress = false
    local low_pos, high_pos = 1, 2
    if not (bracket_f[1] <= bracket_f[#bracket_f]) then low_pos, high_pos = 2, 1 end
    while not done and ls_iter < max_ls do
        if math.abs(bracket[2] - bracket[1]) * d_norm < tolerance_change then break end
        t = cubic_interpolate(bracket[1], bracket_f[1], bracket_gtd[1], bracket[2], bracket_f[2], bracket_gtd[2])
        local bmax, bmin = math.max(bracket[1], bracket[2]), math.min(bracket[1], bracket[2])
        local eps = 0.1 * (bmax - bmin)
        if math.min(bmax - t, t - bmin) < eps then
            if insuf_progress or t >= bmax or t <= bmin then
                if math.abs(t - bmax) < math.abs(t - bmin) then t = bmax - eps else t = bmin + eps end
                insuf_progress = false
            else
                insuf_progress = true
            end
        else
            insuf_progress = false
        end
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals = ls_func_evals + 1
        gtd_new = dot(g_new, d)
        ls_iter = ls_iter + 1
        if f_new > f + c1 * t * gtd or f_new >= bracket_f[low_pos] then
            bracket[high_pos], bracket_f[high_pos], bracket_g[high_pos], bracket_gtd[high_pos] =
                t, f_new, g_new:clone(), gtd_new
            if bracket_f[1] <= bracket_f[2] then low_pos, high_pos = 1, 2 else low_pos, high_pos = 2, 1 end
        else
            if math.abs(gtd_new) <= -c2 * gtd then
                done = true
            elseif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0 then
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos], bracket_gtd[high_pos] = bracket_g[low_pos], bracket_gtd[low_pos]
            end
            bracket[low_pos], bracket_f[low_pos], bracket_g[low_pos], bracket_gtd[low_pos] =
                t, f_new, g_new:clone(), gtd_new
        end
    end
    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals
end

function LBFGS:step(closure, extra)
    check_opt_self("step", self)
    if extra ~= nil then extra_arg("step", "(closure)", extra) end
    if type(closure) ~= "function" then
        fail(fmt("step: LBFGS needs a closure (a function that clears the gradients, computes the loss, calls " ..
                 "backward and returns the loss), got %s", typename(closure)))
    end
    check_options(self)
    if rawget(self, "state") ~= self._state_tbl then lbfgs_unpack(self) end
    local lr, max_iter, max_eval = self.lr, self.max_iter, self.max_eval
    local tolerance_grad, tolerance_change, history_size = self.tolerance_grad, self.tolerance_change,
        self.history_size
    local params, n = self.params, self._numel
    local function evaluate()
        local loss = autograd.enable_grad(closure)
        local v = loss
        if is_tensor(loss) then
            if loss:numel() ~= 1 then
                fail(fmt("step: the closure returned a tensor of shape %s, expected the loss (one element)",
                         tensor.shape_str(loss:shape())))
            end
            v = loss:item()
        elseif type(loss) ~= "number" then
            fail(fmt("step: the closure must return the loss (a number or a one-element tensor), got %s",
                     typename(loss)))
        end
        check_step(self)
        return loss, v
    end
    local function gather()
        local parts = {}
        for i, p in ipairs(params) do
            local g = p.grad
            parts[i] = (g ~= nil and g or tensor.zeros_like(p)):reshape({p:numel()})
        end
        return #parts == 1 and parts[1]:clone() or tensor.cat(parts, 1)
    end
    local function add_grad(step_size, update)
        local off = 0
        for _, p in ipairs(params) do
            local k = p:numel()
            p:add_(update:narrow(1, off + 1, k):view(p:shape()) * step_size)
            off = off + k
        end
    end
    local orig_loss, loss = evaluate()
    autograd.no_grad(function()
        local L = self._lb
        if L == nil then
            L = {n_iter = 0, func_evals = 0, old_dirs = {}, old_stps = {}, ro = {}}
            self._lb = L
        end
        self.t = self.t + 1
        for i = 1, #params do self.steps[i] = self.t end
        local current_evals = 1
        L.func_evals = L.func_evals + 1
        local flat_grad = gather()
        if absmax(flat_grad) <= tolerance_grad then return end
        -- the state is written back at the end only (a closure raising
        -- midway leaves the history as it was, consistent): copies of the lists
        local d, t = L.d, L.t
        local old_dirs, old_stps, ro, H_diag = {unpack(L.old_dirs)}, {unpack(L.old_stps)}, {unpack(L.ro)}, L.H_diag
        local prev_flat_grad, prev_loss = L.prev_flat_grad, L.prev_loss
        local n_iter, total_iter, func_evals = 0, L.n_iter, L.func_evals
        while n_iter < max_iter do
            n_iter = n_iter + 1
            total_iter = total_iter + 1
            if total_iter == 1 then
                d = flat_grad:neg()
                old_dirs, old_stps, ro, H_diag = {}, {}, {}, 1
            else
                local y = flat_grad - prev_flat_grad
                local s = d * t
                local ys = dot(y, s)
                if ys > 1e-10 then
                    if #old_dirs == history_size then
                        table.remove(old_dirs, 1)
                        table.remove(old_stps, 1)
                        table.remove(ro, 1)
                    end
                    old_dirs[#old_dirs + 1], old_stps[#old_stps + 1], ro[#ro + 1] = y, s, 1 / ys
                    H_diag = ys / dot(y, y)
                end
                local al = {}
                local q = flat_grad:neg()
                for j = #old_dirs, 1, -1 do
                    al[j] = dot(old_stps[j], q) * ro[j]
                    q:sub_(old_dirs[j] * al[j])
                end
                local r = q * H_diag
                for j = 1, #old_dirs do
                    local be_j = dot(old_dirs[j], r) * ro[j]
                    r:add_(old_stps[j] * (al[j] - be_j))
                end
                d = r
            end
            prev_flat_grad = flat_grad:clone()
            prev_loss = loss
            if total_iter == 1 then
                t = math.min(1, 1 / flat_grad:abs():sum():item()) * lr
            else
                t = lr
            end
            local gtd = dot(flat_grad, d)
            if gtd > -tolerance_change then break end
            local ls_func_evals = 0
            local opt_cond = false
            if self.line_search_fn == "strong_wolfe" then
                local x_init = {}
                for i, p in ipairs(params) do x_init[i] = p:clone() end
                -- (the parameters are put back after each trial point, a closure that raises included)
                local function obj_func(x, step_t, dir)
                    add_grad(step_t, dir)
                    local ok, _, v = pcall(evaluate)
                    local fg = ok and gather()
                    for i, p in ipairs(params) do p:copy_(x[i]) end
                    if not ok then error(_, 0) end
                    return v, fg
                end
                loss, flat_grad, t, ls_func_evals = strong_wolfe(obj_func, x_init, t, d, loss, flat_grad, gtd)
                add_grad(t, d)
                opt_cond = absmax(flat_grad) <= tolerance_grad
            else
                add_grad(t, d)
                if n_iter ~= max_iter then
                    local _, v = evaluate()
                    loss = v
                    flat_grad = gather()
                    opt_cond = absmax(flat_grad) <= tolerance_grad
                    ls_func_evals = 1
                end
            end
            current_evals = current_evals + ls_func_evals
            func_evals = func_evals + ls_func_evals
            if n_iter == max_iter or current_evals >= max_eval or opt_cond then break end
            if absmax(d * t) <= tolerance_change then break end
            if math.abs(loss - prev_loss) < tolerance_change then break end
        end
        L.n_iter, L.func_evals = total_iter, func_evals
        L.d, L.t, L.old_dirs, L.old_stps, L.ro, L.H_diag = d, t, old_dirs, old_stps, ro, H_diag
        L.prev_flat_grad, L.prev_loss = prev_flat_grad, prev_loss
    end)
    return orig_loss
end

-- ordo.optim.lr_scheduler: StepLR, MultiStepLR, ExponentialLR, ConstantLR, PolynomialLR,
-- CosineAnnealingLR, LambdaLR, OneCycleLR... (lua/ordo/lr_scheduler.lua).
M.lr_scheduler = require "ordo.lr_scheduler"

return M
