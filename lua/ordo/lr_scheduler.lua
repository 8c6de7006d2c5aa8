-- ordo.optim.lr_scheduler: learning rates that change with the epoch.
--
--   local sched = ordo.optim.lr_scheduler.CosineAnnealingLR(opt, {T_max = 12})
--   for epoch = 1, 12 do train_one_epoch(); sched:step() end
--
-- A scheduler remembers the optimiser's lr when it is made (the base) and
-- sets opt.lr from a closed form of its epoch count: 0 when made (when it
-- sets the epoch-0 rate), one more at each step() (Torch's schedulers, with
-- their closed forms).
-- sched:get_last_lr() is the lr it last set; sched.epoch its count.
-- ReduceLROnPlateau, which has no closed form, is stepped with the metric
-- it watches instead (sched:step(val_loss)).
local util = require "ordo.util"
local extra_arg = util.extra_arg -- a further positional argument: an error naming it

local fail, typename = util.fail, util.typename
local is_int = util.is_int
local fmt, cos, pi, floor = string.format, math.cos, math.pi, math.floor
local type, pairs, ipairs, setmetatable, getmetatable, tostring, select, pcall, error =
    type, pairs, ipairs, setmetatable, getmetatable, tostring, select, pcall, error

local M = {}

local Scheduler = {}
Scheduler.__index = Scheduler

-- sched.step() instead of sched:step() passes no scheduler: say so
local function check_sched_self(fname, sc)
    if type(sc) ~= "table" or type(sc.optimizer) ~= "table" then
        fail(fmt("%s: expected a scheduler as self, got %s (call it as sched:%s(...))", fname, typename(sc), fname))
    end
end

-- step() takes no argument: Torch's deprecated step(epoch), or a metric
-- meant for ReduceLROnPlateau, would otherwise be dropped without a word.
local function check_no_arg(self, n, x)
    if n > 0 then
        fail(fmt("%s: step takes no argument, got %s (the epoch counts itself; only ReduceLROnPlateau is " ..
                 "stepped with a metric)", self.__name and self.__name:gsub("^lr_scheduler%.", "") or "step",
                 type(x) == "number" and tostring(x) or typename(x)))
    end
end

-- The optimiser's param groups (one made with a plain list has one, its
-- own options).
local function groups_of(opt)
    local g = opt.param_groups
    if type(g) == "table" and #g > 0 then return g end
    return {opt}
end

-- An optimiser made with a plain list: its one group is its own options.
local function single_group(opt)
    local g = opt.param_groups
    return type(g) ~= "table" or #g <= 1 and (g[1] == nil or rawget(g[1], "_opt") == opt)
end

-- The lr of each param group as the step uses it (ordo.optim: a group's
-- own lr follows opt.lr in proportion, one without takes opt.lr), and that
-- proportion; nothing checked.
local function effective_lrs(opt)
    if single_group(opt) then return {opt.lr}, 1 end
    local base = rawget(opt, "_base_lr")
    local lr = opt.lr
    local ratio = type(base) == "number" and base ~= 0 and type(lr) == "number" and lr / base or 1
    local r = {}
    for k, g in ipairs(opt.param_groups) do
        local own = rawget(g, "lr")
        if own ~= nil then r[k] = type(own) == "number" and own * ratio or own else r[k] = lr end
    end
    return r, ratio
end

-- Each scheduler sets opt.lr from its own closed form: two stepped on one
-- optimiser do not chain as Torch's do (the last one stepped would win,
-- the other's rates lost without a word), nor does a schedule go on from
-- an lr set by hand.  So step raises when opt.lr is not what this
-- scheduler set last.
local function check_unchanged(self)
    local lr, mine = self.optimizer.lr, self._set_lr
    if type(mine) == "table" then
        -- (a rate per param group: each group's lr as the step uses it)
        local lrs = effective_lrs(self.optimizer)
        for k = 1, math.min(#lrs, #mine) do
            if lrs[k] ~= mine[k] then
                fail(fmt("%s: param group %d's lr is %s, not the %s this scheduler set: another scheduler, " ..
                         "opt:load or the code changed it (opt.lr or opt.param_groups[%d].lr; schedulers do not " ..
                         "chain: combine them with SequentialLR; resume with sched:load; to go on from a new lr, " ..
                         "make a new scheduler)", (self.__name or "step"):gsub("^lr_scheduler%.", ""), k,
                         tostring(lrs[k]), tostring(mine[k]), k))
            end
        end
        return
    end
    if mine ~= nil and lr ~= mine then
        fail(fmt("%s: opt.lr is %s, not the %s this scheduler set: another scheduler, opt:load or the " ..
                 "code changed it (schedulers do not chain: combine them with SequentialLR or one LambdaLR; " ..
                 "resume with sched:load; to go on from a new lr, make a new scheduler)",
                 (self.__name or "step"):gsub("^lr_scheduler%.", ""), tostring(lr), tostring(mine)))
    end
end

-- The rate of epoch e, refused when it is not a finite number >= 0 (an
-- ExponentialLR with gamma > 1 overflows to inf, base * lr_lambda too):
-- opt:step would refuse it later, far from its cause.
local function rate(self, e)
    local lr = self:lr_at(e)
    if type(lr) == "table" then
        -- (one per param group: OneCycleLR's and CyclicLR's lists)
        local n = #groups_of(self.optimizer)
        if #lr ~= n then
            fail(fmt("%s: the optimiser has %d param groups, this scheduler was made for %d (opt:add_param_group " ..
                     "after it: make the scheduler after adding the groups)",
                     (self.__name or "step"):gsub("^lr_scheduler%.", ""), n, #lr))
        end
        for k, v in ipairs(lr) do
            if not (v >= 0 and v < math.huge) then
                fail(fmt("%s: the rate of param group %d at epoch %s is %s, not a finite number >= 0",
                         (self.__name or "step"):gsub("^lr_scheduler%.", ""), k, tostring(e), tostring(v)))
            end
        end
        return lr
    end
    if not (lr >= 0 and lr < math.huge) then
        fail(fmt("%s: the rate at epoch %s is %s, not a finite number >= 0 (base lr %s)",
                 (self.__name or "step"):gsub("^lr_scheduler%.", ""), tostring(e), tostring(lr),
                 tostring(self.base_lr)))
    end
    return lr
end

-- The momentum of each param group at epoch e (OneCycleLR and CyclicLR
-- cycle it, inside a SequentialLR too), and the option it goes to
-- ("momentum", or Adam's "beta1"); nil: the scheduler leaves it alone.
-- Refused when not a finite number >= 0 (beta1: below 1), as the rate.
local function momenta(self, e)
    local moms, key = self:momentum_at(e)
    if moms == nil then return nil end
    local n = #groups_of(self.optimizer)
    if #moms ~= n then
        fail(fmt("%s: the optimiser has %d param groups, this scheduler was made for %d (opt:add_param_group " ..
                 "after it: make the scheduler after adding the groups)",
                 (self.__name or "step"):gsub("^lr_scheduler%.", ""), n, #moms))
    end
    for k, m in ipairs(moms) do
        if not (m >= 0 and m < (key == "beta1" and 1 or math.huge)) then
            fail(fmt("%s: the %s of param group %d at epoch %s is %s, not a finite number >= 0%s",
                     (self.__name or "step"):gsub("^lr_scheduler%.", ""), key, k, tostring(e), tostring(m),
                     key == "beta1" and " and below 1" or ""))
        end
    end
    return moms, key
end

-- Sets what epoch e's values are (computed first by the caller: one that
-- raises changes nothing).
-- A list of rates (one per param group) sets each group's own lr, and
-- opt.lr to the lr the optimiser was made with, so that the proportion the
-- groups follow is 1 (a plain list's one group: opt.lr).  A number after
-- a list (a SequentialLR going from a OneCycleLR with lists to a
-- scheduler of opt.lr) gives the groups back the lrs they had before.
local function apply(self, lr, moms, key)
    local opt = self.optimizer
    if type(lr) == "table" then
        local mine = {}
        for k, v in ipairs(lr) do mine[k] = v end
        if single_group(opt) then
            opt.lr = mine[1]
        else
            local base = rawget(opt, "_base_lr")
            opt.lr = type(base) == "number" and base or opt.lr
            for k, g in ipairs(opt.param_groups) do g.lr = mine[k] end
            rawset(opt, "_group_lrs_set", mine)
        end
        self._set_lr = mine
    else
        local own = self._group_own
        if own and type(self._set_lr) ~= "number" and not single_group(opt) then
            for k, g in ipairs(opt.param_groups) do
                if own[k] == false then rawset(g, "lr", nil) else rawset(g, "lr", own[k]) end
            end
        end
        opt.lr, self._set_lr = lr, lr
    end
    if moms then
        for k, g in ipairs(groups_of(self.optimizer)) do g[key] = moms[k] end
    end
end

-- (OneCycleLR and CyclicLR made with lists: the list of the groups' rates)
local function copy_lrs(lr)
    if type(lr) ~= "table" then return lr end
    local c = {}
    for k, v in ipairs(lr) do c[k] = v end
    return c
end

function Scheduler:momentum_at() return nil end

function Scheduler:step(...)
    check_sched_self("step", self)
    check_no_arg(self, select("#", ...), ...)
    check_unchanged(self)
    -- the rate first: one that raises (OneCycleLR past its end, a LambdaLR
    -- whose function fails) leaves the epoch count and opt.lr as they were
    local lr = rate(self, self.epoch + 1)
    local moms, key = momenta(self, self.epoch + 1)
    self.epoch = self.epoch + 1
    apply(self, lr, moms, key)
    return copy_lrs(lr)
end

function Scheduler:get_last_lr(extra)
    if extra ~= nil then extra_arg("get_last_lr", "()", extra) end
    check_sched_self("get_last_lr", self)
    return copy_lrs(self._set_lr)
end

-- The options of a scheduler: known keys only, numbers unless said, and
-- the required ones present.
local function options(fname, opts, known, required)
    if type(opts) ~= "table" or getmetatable(opts) ~= nil then
        fail(fmt("%s: options must be a table, got %s", fname, typename(opts)))
    end
    for k, v in pairs(opts) do
        local want = known[k]
        if not want then fail(fmt("%s: unknown option '%s'", fname, tostring(k))) end
        -- ("number|list": a number, or one per param group)
        if want == "number|list" then
            if type(v) ~= "number" and (type(v) ~= "table" or getmetatable(v) ~= nil) then
                fail(fmt("%s: option %s must be a number or a list of numbers (one per param group), got %s", fname,
                         k, typename(v)))
            end
        elseif want == "function|list" then
            if type(v) ~= "function" and (type(v) ~= "table" or getmetatable(v) ~= nil) then
                fail(fmt("%s: option %s must be a function or a list of functions (one per param group), got %s",
                         fname, k, typename(v)))
            end
        elseif type(v) ~= want then
            fail(fmt("%s: option %s must be a %s, got %s", fname, k, want, typename(v)))
        end
        -- an infinite gamma, eta_min or max_lr would set opt.lr to inf or NaN
        if type(v) == "number" and not (v > -math.huge and v < math.huge) then
            fail(fmt("%s: option %s must be a finite number, got %s", fname, k, tostring(v)))
        end
    end
    for _, k in ipairs(required) do
        if opts[k] == nil then fail(fmt("%s: option %s is required", fname, k)) end
    end
    return opts
end

local function check_optimizer(fname, opt)
    if type(opt) ~= "table" or type(opt.step) ~= "function" then
        fail(fmt("%s: expected an optimiser (ordo.optim.SGD, Adam...), got %s", fname, typename(opt)))
    end
    -- (an optimiser whose lr was set to a string or NaN was said not to be one: "got optim.SGD")
    local lr = opt.lr
    if type(lr) ~= "number" or not (lr >= 0 and lr < math.huge) then
        fail(fmt("%s: opt.lr must be a finite number >= 0, got %s", fname,
                 type(lr) == "number" and tostring(lr) or typename(lr)))
    end
end

-- A scheduler class: make(self, opts) checks and keeps its options.
local function class(name, known, required, make)
    local cls = setmetatable({__name = "lr_scheduler." .. name}, {__index = Scheduler})
    cls.__index = cls
    local fname = name
    M[name] = setmetatable(cls, {__index = Scheduler, __call = function(_, opt, opts, extra)
        if extra ~= nil then extra_arg(fname, "(optimizer, opts)", extra) end
        check_optimizer(fname, opt)
        local s = setmetatable({optimizer = opt, base_lr = opt.lr, epoch = 0}, cls)
        make(s, options(fname, opts or {}, known, required))
        -- (made with lists, it sets the groups' own lrs: the ones they had
        -- before the first such scheduler on opt, false for none -- a
        -- LambdaLR's bases, as Torch's initial_lr, and what a SequentialLR
        -- gives back after it -- kept on opt for the next one while the
        -- groups hold the rates the last one set: lrs set since by hand
        -- are the new ones)
        if s.per_group and not single_group(opt) then
            local first, last, n = rawget(opt, "_group_lrs0"), rawget(opt, "_group_lrs_set"), #opt.param_groups
            local reuse = type(first) == "table" and #first == n and type(last) == "table" and #last == n
            for k, g in ipairs(opt.param_groups) do
                if reuse and rawget(g, "lr") ~= last[k] then reuse = false end
            end
            if not reuse then
                first = {}
                for k, g in ipairs(opt.param_groups) do
                    local v = rawget(g, "lr")
                    if v == nil then v = false end
                    first[k] = v
                end
                rawset(opt, "_group_lrs0", first)
            end
            s._group_own = first
        end
        -- the epoch-0 rate: the base, or base * lr_lambda(0) (and momentum)
        local lr = rate(s, 0)
        apply(s, lr, momenta(s, 0))
        return s
    end})
    return cls
end

local function positive_int(fname, k, v)
    if v < 1 or not is_int(v) then fail(fmt("%s: %s must be an integer >= 1, got %s", fname, k, tostring(v))) end
end

-- a list option (milestones, schedulers): keys 1..n only, so that none is
-- skipped unseen by ipairs (a hole, a named key)
local function check_list(fname, k, t)
    local n = 0
    for _ in pairs(t) do n = n + 1 end
    if n ~= #t or (n > 0 and t[n] == nil) then
        fail(fmt("%s: %s must be a list (keys 1..n, no holes), got a table with %d keys and length %d", fname, k, n,
                 #t))
    end
    for i = 1, n do
        if t[i] == nil then fail(fmt("%s: %s must be a list (keys 1..n, no holes)", fname, k)) end
    end
end

local function non_negative(fname, k, v)
    if not (v >= 0) then fail(fmt("%s: %s must be >= 0, got %s", fname, k, tostring(v))) end
end

-- cycle_momentum (OneCycleLR, CyclicLR; true unless false, Torch's
-- default): the momentum of each param group cycles between base_momentum
-- and max_momentum (a number, or a list of one per group), inversely to
-- the lr -- SGD's and RMSprop's momentum, Adam's and AdamW's beta1 (Torch's
-- betas[0]).  An optimiser with neither (Adagrad) raises, as Torch's.
local function momentum_setup(fname, s, o, def_base, def_max)
    local cyc = o.cycle_momentum ~= false
    s.cycle_momentum = cyc and 1 or 0 -- (a number, for the state file)
    if not cyc then
        for _, k in ipairs({"base_momentum", "max_momentum"}) do
            if o[k] ~= nil then fail(fmt("%s: %s is used only with cycle_momentum = true", fname, k)) end
        end
        return
    end
    local opt = s.optimizer
    local key = type(opt.momentum) == "number" and "momentum" or type(opt.beta1) == "number" and "beta1" or nil
    if not key then
        fail(fmt("%s: the optimiser (%s) has neither momentum nor beta1 to cycle: give cycle_momentum = false",
                 fname, opt.__name or typename(opt)))
    end
    s.momentum_key = key
    local n = #groups_of(opt)
    local top = key == "beta1" and 1 or math.huge
    for _, kd in ipairs({{"base_momentum", def_base}, {"max_momentum", def_max}}) do
        local k, v = kd[1], o[kd[1]]
        if v == nil then v = kd[2] end
        local list = {}
        if type(v) == "table" then
            check_list(fname, k, v)
            if #v ~= n then
                fail(fmt("%s: expected %d values for %s (one per param group), got %d", fname, n, k, #v))
            end
            for i = 1, n do list[i] = v[i] end
        else
            for i = 1, n do list[i] = v end
        end
        for i, m in ipairs(list) do
            if type(m) ~= "number" or not (m >= 0 and m < top) then
                fail(fmt("%s: %s%s must be %s, got %s", fname, k, type(v) == "table" and fmt("[%d]", i) or "",
                         key == "beta1" and "in [0, 1) (it sets Adam's beta1)" or "a finite number >= 0",
                         type(m) == "number" and tostring(m) or typename(m)))
            end
        end
        s[k] = list
    end
end

-- A list option of one value per param group (Torch's: OneCycleLR's
-- max_lr, CyclicLR's base_lr and max_lr), checked -- its length the
-- number of groups, each value a number for which ok(v) holds (what it
-- must be) -- and copied.
local function group_list(fname, opt, k, v, ok, what)
    check_list(fname, k, v)
    local n = #groups_of(opt)
    if #v ~= n then
        fail(fmt("%s: expected %d values for %s (one per param group), got %d", fname, n, k, #v))
    end
    local c = {}
    for i, x in ipairs(v) do
        if type(x) ~= "number" or not (ok(x) and x < math.huge) then
            fail(fmt("%s: %s[%d] must be %s, got %s", fname, k, i, what,
                     type(x) == "number" and tostring(x) or typename(x)))
        end
        c[i] = x
    end
    return c
end

-- x / d, or each value of a list divided by d
local function scaled(x, d)
    if type(x) ~= "table" then return x / d end
    local r = {}
    for i, v in ipairs(x) do r[i] = v / d end
    return r
end

-- the base lr of each param group of a scheduler of a rate per group
-- (lr_lambdas, eta_min with groups), as base_lr is opt.lr's: a group's
-- own lr of before (_group_own, saved with the state) in proportion to
-- base_lr, one without base_lr; one for an optimiser made with a plain list
local function group_bases(self)
    local own, base = self._group_own, self.base_lr
    if not own then return {base} end
    local made = rawget(self.optimizer, "_base_lr")
    local ratio = type(made) == "number" and made ~= 0 and base / made or 1
    local r = {}
    for k, v in ipairs(own) do r[k] = v ~= false and v * ratio or base end
    return r
end

-- eta_min (CosineAnnealingLR, CosineAnnealingWarmRestarts) with param
-- groups of their own lrs: each group anneals from its own lr to eta_min,
-- as Torch's (in proportion to opt.lr, a group's floor was eta_min times
-- its proportion); its rates set as the groups' own lrs.
local function eta_groups(s)
    if s.eta_min == 0 or single_group(s.optimizer) then return end
    for _, g in ipairs(s.optimizer.param_groups) do
        if rawget(g, "lr") ~= nil then
            s.per_group, s.uses_bases = true, true
            return
        end
    end
end

-- StepLR(opt, {step_size, gamma = 0.1}): base * gamma^floor(epoch / step_size).
local StepLR = class("StepLR", {step_size = "number", gamma = "number"}, {"step_size"}, function(s, o)
    positive_int("StepLR", "step_size", o.step_size)
    s.step_size, s.gamma = o.step_size, o.gamma or 0.1
    non_negative("StepLR", "gamma", s.gamma)
end)
function StepLR:lr_at(e) return self.base_lr * self.gamma ^ floor(e / self.step_size) end

-- MultiStepLR(opt, {milestones = {...}, gamma = 0.1}): base times gamma
-- for each milestone (a non-decreasing list of epochs) reached; one listed
-- k times cuts by gamma^k there (Torch's Counter).
local MultiStepLR = class("MultiStepLR", {milestones = "table", gamma = "number"}, {"milestones"}, function(s, o)
    check_list("MultiStepLR", "milestones", o.milestones)
    local prev = 1
    for i, m in ipairs(o.milestones) do
        if type(m) ~= "number" or m < prev or not is_int(m) then
            fail(fmt("MultiStepLR: milestone %d must be an integer >= 1, not below the one before it, got %s", i,
                     tostring(m)))
        end
        prev = m
    end
    s.milestones, s.gamma = o.milestones, o.gamma or 0.1
    non_negative("MultiStepLR", "gamma", s.gamma)
end)
function MultiStepLR:lr_at(e)
    local n = 0
    for _, m in ipairs(self.milestones) do if e >= m then n = n + 1 end end
    return self.base_lr * self.gamma ^ n
end

-- ExponentialLR(opt, {gamma}): base * gamma^epoch.
local ExponentialLR = class("ExponentialLR", {gamma = "number"}, {"gamma"}, function(s, o)
    non_negative("ExponentialLR", "gamma", o.gamma)
    s.gamma = o.gamma
end)
function ExponentialLR:lr_at(e) return self.base_lr * self.gamma ^ e end

-- CosineAnnealingLR(opt, {T_max, eta_min = 0}): from base down to eta_min
-- along half a cosine over T_max epochs, and back up over the next T_max
-- (Torch's closed form, SGDR without restarts).
local CosineAnnealingLR = class("CosineAnnealingLR", {T_max = "number", eta_min = "number"}, {"T_max"},
    function(s, o)
        positive_int("CosineAnnealingLR", "T_max", o.T_max)
        s.T_max, s.eta_min = o.T_max, o.eta_min or 0
        non_negative("CosineAnnealingLR", "eta_min", s.eta_min)
        eta_groups(s)
    end)
function CosineAnnealingLR:lr_at(e)
    local f, lo = (1 + cos(pi * e / self.T_max)) / 2, self.eta_min
    if not self.per_group then return lo + (self.base_lr - lo) * f end
    local r = group_bases(self)
    for k, b in ipairs(r) do r[k] = lo + (b - lo) * f end
    return r
end

-- CosineAnnealingWarmRestarts(opt, {T_0, T_mult = 1, eta_min = 0}): the
-- cosine of CosineAnnealingLR over T_0 epochs, then restarted at the base
-- for T_0 * T_mult epochs, then T_0 * T_mult^2... (SGDR, Torch's closed
-- form; stepped once per epoch).
local WarmRestarts = class("CosineAnnealingWarmRestarts", {T_0 = "number", T_mult = "number", eta_min = "number"},
    {"T_0"}, function(s, o)
        local f = "CosineAnnealingWarmRestarts"
        positive_int(f, "T_0", o.T_0)
        s.T_0, s.T_mult, s.eta_min = o.T_0, o.T_mult or 1, o.eta_min or 0
        positive_int(f, "T_mult", s.T_mult)
        non_negative(f, "eta_min", s.eta_min)
        eta_groups(s)
    end)
-- sched:step(epoch) (Torch's form for this one, stepped per batch with a
-- fractional epoch: sched:step(epoch + i / iters)) sets the epoch, a number
-- >= 0; step() then goes on from it by 1.
function WarmRestarts:step(...)
    local n, e = select("#", ...), ...
    if n == 0 then return Scheduler.step(self) end
    check_sched_self("step", self)
    if n > 1 or type(e) ~= "number" or not (e >= 0 and e < math.huge) then
        fail(fmt("CosineAnnealingWarmRestarts: step takes no argument or the epoch, a finite number >= 0, got %s",
                 n > 1 and fmt("%d arguments", n) or type(e) == "number" and tostring(e) or typename(e)))
    end
    check_unchanged(self)
    local lr = rate(self, e)
    local moms, key = momenta(self, e)
    self.epoch = e
    apply(self, lr, moms, key)
    return lr
end
function WarmRestarts:lr_at(e)
    local t, len = e, self.T_0 -- the epoch within the current cycle, and that cycle's length
    -- (cycles of one length: a remainder, not a loop as long as the epoch)
    if self.T_mult == 1 then t = e % len end
    while t >= len do
        t = t - len
        len = len * self.T_mult
    end
    local f, lo = (1 + cos(pi * t / len)) / 2, self.eta_min
    if not self.per_group then return lo + (self.base_lr - lo) * f end
    local r = group_bases(self)
    for k, b in ipairs(r) do r[k] = lo + (b - lo) * f end
    return r
end

-- lr_lambda (LambdaLR, MultiplicativeLR): a function, or a list of one
-- per param group (Torch's), checked and copied into s.lr_lambdas
local function lambdas(fname, s, fns)
    if type(fns) ~= "table" then
        s.lr_lambda = fns
        return
    end
    check_list(fname, "lr_lambda", fns)
    local n = #groups_of(s.optimizer)
    if #fns ~= n then
        fail(fmt("%s: expected %d functions for lr_lambda (one per param group), got %d", fname, n, #fns))
    end
    local c = {}
    for i, fn in ipairs(fns) do
        if type(fn) ~= "function" then
            fail(fmt("%s: lr_lambda[%d] must be a function, got %s", fname, i, typename(fn)))
        end
        c[i] = fn
    end
    s.lr_lambdas, s.per_group, s.uses_bases = c, true, true
end

-- fn(e), refused when not a finite number >= 0 (NaN, inf or a negative
-- factor: an lr opt:step refuses, set here unseen); k: the group's
local function lambda_factor(fname, fn, e, k)
    local f = fn(e)
    if type(f) ~= "number" or not (f >= 0 and f < math.huge) then
        fail(fmt("%s: lr_lambda%s(%d) returned %s, expected a finite number >= 0", fname,
                 k and fmt("[%d]", k) or "", e, type(f) == "number" and tostring(f) or typename(f)))
    end
    return f
end

-- LambdaLR(opt, {lr_lambda = fn}): base * fn(epoch) (a warm-up, any rule).
-- lr_lambda may be a list of functions, one per param group (Torch's):
-- each group's base (group_bases: its lr before the first scheduler that
-- set the groups' own lrs, Torch's initial_lr) times its own function,
-- set as the group's own lr.
local LambdaLR = class("LambdaLR", {lr_lambda = "function|list"}, {"lr_lambda"}, function(s, o)
    lambdas("LambdaLR", s, o.lr_lambda)
end)
function LambdaLR:lr_at(e)
    if not self.lr_lambdas then return self.base_lr * lambda_factor("LambdaLR", self.lr_lambda, e) end
    local r = group_bases(self)
    for k, fn in ipairs(self.lr_lambdas) do
        -- (a group added since: rate() raises naming the count)
        r[k] = (r[k] or self.base_lr) * lambda_factor("LambdaLR", fn, e, k)
    end
    return r
end

-- MultiplicativeLR(opt, {lr_lambda = fn}): the lr times fn(epoch) at each
-- step, base * fn(1) * ... * fn(epoch) (Torch's; fn is called once per
-- epoch stepped, and for every epoch again on load_state_dict).  A list of
-- functions, one per param group, as LambdaLR's.
local MultiplicativeLR = class("MultiplicativeLR", {lr_lambda = "function|list"}, {"lr_lambda"}, function(s, o)
    lambdas("MultiplicativeLR", s, o.lr_lambda)
    s._ce, s._cp = 0, {} -- the products up to epoch _ce, of each function
end)
function MultiplicativeLR:lr_at(e)
    local fns = self.lr_lambdas or {self.lr_lambda}
    local i, prods = 0, {}
    if self._ce <= e then i = self._ce end
    for k = 1, #fns do prods[k] = i > 0 and self._cp[k] or 1 end
    while i < e do
        i = i + 1
        for k, fn in ipairs(fns) do
            prods[k] = prods[k] * lambda_factor("MultiplicativeLR", fn, i, self.lr_lambdas and k)
        end
    end
    self._ce, self._cp = e, prods
    if not self.lr_lambdas then return self.base_lr * prods[1] end
    local r = group_bases(self)
    for k = 1, #fns do r[k] = (r[k] or self.base_lr) * prods[k] end
    return r
end

-- LinearLR(opt, {start_factor = 1/3, end_factor = 1, total_iters = 5}):
-- base times a factor going linearly from start_factor to end_factor over
-- total_iters epochs, then staying there (a warm-up, Torch's closed form).
local LinearLR = class("LinearLR", {start_factor = "number", end_factor = "number", total_iters = "number"}, {},
    function(s, o)
        s.start_factor, s.end_factor, s.total_iters = o.start_factor or 1 / 3, o.end_factor or 1, o.total_iters or 5
        if not (s.start_factor > 0 and s.start_factor <= 1) then
            fail(fmt("LinearLR: start_factor must be in (0, 1], got %s", tostring(s.start_factor)))
        end
        if not (s.end_factor >= 0 and s.end_factor <= 1) then
            fail(fmt("LinearLR: end_factor must be in [0, 1], got %s", tostring(s.end_factor)))
        end
        positive_int("LinearLR", "total_iters", s.total_iters)
    end)
function LinearLR:lr_at(e)
    local t = e < self.total_iters and e or self.total_iters
    return self.base_lr * (self.start_factor + (self.end_factor - self.start_factor) * t / self.total_iters)
end

-- ConstantLR(opt, {factor = 1/3, total_iters = 5}): base * factor for the
-- first total_iters epochs, then the base (Torch's closed form).
local ConstantLR = class("ConstantLR", {factor = "number", total_iters = "number"}, {}, function(s, o)
    s.factor, s.total_iters = o.factor or 1 / 3, o.total_iters or 5
    if not (s.factor >= 0 and s.factor <= 1) then
        fail(fmt("ConstantLR: factor must be in [0, 1], got %s", tostring(s.factor)))
    end
    positive_int("ConstantLR", "total_iters", s.total_iters)
end)
function ConstantLR:lr_at(e) return e < self.total_iters and self.base_lr * self.factor or self.base_lr end

-- PolynomialLR(opt, {total_iters = 5, power = 1}): base * (1 -
-- min(epoch, total_iters) / total_iters)^power, down to 0 at total_iters
-- and staying there (Torch's closed form).
local PolynomialLR = class("PolynomialLR", {total_iters = "number", power = "number"}, {}, function(s, o)
    s.total_iters, s.power = o.total_iters or 5, o.power or 1
    positive_int("PolynomialLR", "total_iters", s.total_iters)
    non_negative("PolynomialLR", "power", s.power)
end)
function PolynomialLR:lr_at(e)
    local t = e < self.total_iters and e or self.total_iters
    return self.base_lr * (1 - t / self.total_iters) ^ self.power
end

-- OneCycleLR(opt, {max_lr, total_steps, pct_start = 0.3, div_factor = 25,
-- final_div_factor = 1e4, anneal_strategy = "cos"}): stepped once per
-- batch, the lr climbs from max_lr / div_factor to max_lr over the first
-- pct_start of the steps, then falls to that start / final_div_factor at
-- the last step, along half cosines ("linear": straight lines) -- Torch's
-- one-cycle policy for the lr (the optimiser's own lr is not used; the
-- momentum cycles the other way unless cycle_momentum = false).  Stepping
-- more than total_steps times is an error (Torch's rule: the
-- total_steps-th step() is allowed, and goes on
-- along the last phase's curve, just past its end).  total_steps may be
-- given as epochs and steps_per_epoch instead (their product); three_phase
-- = true climbs, comes back down to the start symmetrically, then falls to
-- the end (Torch's three phases).  max_lr may be a list, one per param
-- group (Torch's): each group's own rates, set as its own lr.
local OneCycleLR = class("OneCycleLR", {max_lr = "number|list", total_steps = "number", pct_start = "number",
                                        div_factor = "number", final_div_factor = "number",
                                        anneal_strategy = "string", epochs = "number", steps_per_epoch = "number",
                                        three_phase = "boolean", cycle_momentum = "boolean",
                                        base_momentum = "number|list", max_momentum = "number|list"}, {"max_lr"},
    function(s, o)
    local f = "OneCycleLR"
    local total = o.total_steps
    if total ~= nil then
        if o.epochs ~= nil or o.steps_per_epoch ~= nil then
            fail(fmt("%s: give total_steps or epochs and steps_per_epoch, not both", f))
        end
        positive_int(f, "total_steps", total)
    elseif o.epochs ~= nil or o.steps_per_epoch ~= nil then
        if o.epochs == nil or o.steps_per_epoch == nil then
            fail(fmt("%s: option %s is required with %s (or give total_steps)", f,
                     o.epochs == nil and "epochs" or "steps_per_epoch", o.epochs == nil and "steps_per_epoch" or "epochs"))
        end
        positive_int(f, "epochs", o.epochs)
        positive_int(f, "steps_per_epoch", o.steps_per_epoch)
        total = o.epochs * o.steps_per_epoch
    else
        fail(fmt("%s: option total_steps is required (or epochs and steps_per_epoch)", f))
    end
    if type(o.max_lr) == "table" then
        -- (one per param group, Torch's: each group peaks at its own)
        s.max_lr, s.per_group = group_list(f, s.optimizer, "max_lr", o.max_lr, function(x) return x > 0 end,
                                           "a finite number > 0"), true
    elseif not (o.max_lr > 0) then
        fail(fmt("%s: max_lr must be positive, got %s", f, tostring(o.max_lr)))
    else
        s.max_lr = o.max_lr
    end
    s.total_steps = total
    s.pct_start = o.pct_start or 0.3
    if not (s.pct_start > 0 and s.pct_start < 1) then
        fail(fmt("%s: pct_start must be in (0, 1), got %s", f, tostring(s.pct_start)))
    end
    for _, k in ipairs({"div_factor", "final_div_factor"}) do
        if o[k] ~= nil and not (o[k] > 0) then fail(fmt("%s: %s must be positive, got %s", f, k, tostring(o[k]))) end
    end
    s.initial_lr = scaled(s.max_lr, o.div_factor or 25)
    s.min_lr = scaled(s.initial_lr, o.final_div_factor or 1e4)
    s.anneal = o.anneal_strategy or "cos"
    if s.anneal ~= "cos" and s.anneal ~= "linear" then
        fail(fmt("%s: anneal_strategy must be 'cos' or 'linear', got %s", f, s.anneal))
    end
    s.three_phase = o.three_phase and 1 or 0 -- (a number, for the state file)
    -- Torch's phases: each ends at a step (a float, as Torch keeps it) and
    -- goes from one rate to the next, starting where the one before ended
    local peak = s.pct_start * s.total_steps - 1
    -- (the climb and the way back take 2 * pct_start of the steps: past
    -- half, the final fall never came and the lr ended at the start)
    if o.three_phase and 2 * s.pct_start * s.total_steps - 2 > s.total_steps - 1 then
        fail(fmt("%s: three_phase with pct_start = %s leaves no step for the final fall (the climb and the way " ..
                 "back take 2 * pct_start of the %d steps): give pct_start <= 0.5", f, tostring(s.pct_start),
                 s.total_steps))
    end
    if o.three_phase then
        s.phases = {{peak, s.initial_lr, s.max_lr}, {2 * s.pct_start * s.total_steps - 2, s.max_lr, s.initial_lr},
                    {s.total_steps - 1, s.initial_lr, s.min_lr}}
    else
        s.phases = {{peak, s.initial_lr, s.max_lr}, {s.total_steps - 1, s.max_lr, s.min_lr}}
    end
    -- the momentum goes the other way: down from max_momentum to
    -- base_momentum as the lr climbs, back up as it falls (three phases:
    -- then staying at max_momentum)
    momentum_setup(f, s, o, 0.85, 0.95)
    if s.cycle_momentum == 1 then
        s.mom_phases = o.three_phase and {{"max_momentum", "base_momentum"}, {"base_momentum", "max_momentum"},
                                          {"max_momentum", "max_momentum"}}
            or {{"max_momentum", "base_momentum"}, {"base_momentum", "max_momentum"}}
    end
end)
-- epoch e's phase and how far along it (0 to 1)
function OneCycleLR:phase_at(e)
    if e > self.total_steps then
        fail(fmt("OneCycleLR: stepped %d times, past total_steps = %d", e, self.total_steps))
    end
    local start, ph = 0, self.phases
    for i, p in ipairs(ph) do
        if e <= p[1] or i == #ph then
            return i, p[1] > start and (e - start) / (p[1] - start) or 1
        end
        start = p[1]
    end
end
function OneCycleLR:anneal_of(from, to, pct)
    if self.anneal == "linear" then return from + (to - from) * pct end
    return to + (from - to) * (1 + cos(pi * pct)) / 2
end
function OneCycleLR:lr_at(e)
    local i, pct = self:phase_at(e)
    local from, to = self.phases[i][2], self.phases[i][3]
    if type(from) ~= "table" then return self:anneal_of(from, to, pct) end
    local r = {}
    for k = 1, #from do r[k] = self:anneal_of(from[k], to[k], pct) end
    return r
end
function OneCycleLR:momentum_at(e)
    if self.cycle_momentum ~= 1 then return nil end
    local i, pct = self:phase_at(e)
    local from, to = self[self.mom_phases[i][1]], self[self.mom_phases[i][2]]
    local r = {}
    for k = 1, #from do r[k] = self:anneal_of(from[k], to[k], pct) end
    return r, self.momentum_key
end

-- CyclicLR(opt, {base_lr, max_lr, step_size_up = 2000, step_size_down =
-- step_size_up, mode = "triangular", gamma = 1, scale_fn, scale_mode}):
-- stepped once per batch, the lr goes from base_lr up to max_lr over
-- step_size_up steps and back down over step_size_down, again and again;
-- "triangular2" halves the height each cycle, "exp_range" scales it by
-- gamma^step; scale_fn(x) (of the cycle, or of the step with scale_mode =
-- "iterations") replaces the mode's.  Torch's closed form (the
-- optimiser's own lr is not used; the momentum cycles the other way unless
-- cycle_momentum = false).  base_lr and max_lr may be lists, one per param
-- group (Torch's; a number beside one stands for each group's).
local CyclicLR = class("CyclicLR", {base_lr = "number|list", max_lr = "number|list", step_size_up = "number",
                                    step_size_down = "number", mode = "string", gamma = "number",
                                    scale_fn = "function", scale_mode = "string", cycle_momentum = "boolean",
                                    base_momentum = "number|list", max_momentum = "number|list"},
    {"base_lr", "max_lr"},
    function(s, o)
        local f = "CyclicLR"
        if type(o.base_lr) == "table" or type(o.max_lr) == "table" then
            -- (one per param group, Torch's; a number stands for each group's)
            local n, lists = #groups_of(s.optimizer), {}
            for _, k in ipairs({"base_lr", "max_lr"}) do
                local v = o[k]
                if type(v) == "table" then
                    lists[k] = group_list(f, s.optimizer, k, v, function(x) return x >= 0 end, "a finite number >= 0")
                else
                    non_negative(f, k, v)
                    lists[k] = {}
                    for i = 1, n do lists[k][i] = v end
                end
            end
            s.cyc_base, s.max_lr, s.per_group = lists.base_lr, lists.max_lr, true
        else
            non_negative(f, "base_lr", o.base_lr)
            non_negative(f, "max_lr", o.max_lr)
            s.cyc_base, s.max_lr = o.base_lr, o.max_lr
        end
        s.step_size_up = o.step_size_up or 2000
        s.step_size_down = o.step_size_down or s.step_size_up
        for _, k in ipairs({"step_size_up", "step_size_down"}) do
            if not (s[k] > 0) then fail(fmt("%s: %s must be positive, got %s", f, k, tostring(s[k]))) end
        end
        s.mode, s.gamma = o.mode or "triangular", o.gamma or 1
        if s.mode ~= "triangular" and s.mode ~= "triangular2" and s.mode ~= "exp_range" then
            fail(fmt("%s: mode must be 'triangular', 'triangular2' or 'exp_range', got %s", f, s.mode))
        end
        if not (s.gamma > 0) then fail(fmt("%s: gamma must be positive, got %s", f, tostring(s.gamma))) end
        s.scale_fn = o.scale_fn
        s.scale_mode = o.scale_mode or (s.scale_fn == nil and s.mode == "exp_range" and "iterations" or "cycle")
        if s.scale_mode ~= "cycle" and s.scale_mode ~= "iterations" then
            fail(fmt("%s: scale_mode must be 'cycle' or 'iterations', got %s", f, s.scale_mode))
        end
        if o.scale_mode ~= nil and s.scale_fn == nil then
            fail(fmt("%s: scale_mode is used only with scale_fn (mode sets its own)", f))
        end
        momentum_setup(f, s, o, 0.8, 0.9)
    end)
-- how far up the cycle epoch e is, scaled (0: base_lr, 1: max_lr)
function CyclicLR:height_at(e)
    local total = self.step_size_up + self.step_size_down
    local ratio = self.step_size_up / total
    local cycle = floor(1 + e / total)
    local x = 1 + e / total - cycle
    local sf = x <= ratio and x / ratio or (x - 1) / (ratio - 1)
    local at = self.scale_mode == "cycle" and cycle or e
    local scale
    if self.scale_fn then
        scale = self.scale_fn(at)
        if type(scale) ~= "number" then
            fail(fmt("CyclicLR: scale_fn(%s) returned %s, expected a number", tostring(at), typename(scale)))
        end
    elseif self.mode == "triangular" then
        scale = 1
    elseif self.mode == "triangular2" then
        scale = 1 / 2 ^ (cycle - 1)
    else
        scale = self.gamma ^ e
    end
    return sf * scale
end
function CyclicLR:lr_at(e)
    local h, lo, hi = self:height_at(e), self.cyc_base, self.max_lr
    if type(lo) ~= "table" then return lo + (hi - lo) * h end
    local r = {}
    for k = 1, #lo do r[k] = lo[k] + (hi[k] - lo[k]) * h end
    return r
end
-- the momentum: max_momentum at base_lr, base_momentum at max_lr (Torch's)
function CyclicLR:momentum_at(e)
    if self.cycle_momentum ~= 1 then return nil end
    local h, r = self:height_at(e), {}
    for k, top in ipairs(self.max_momentum) do r[k] = top - (top - self.base_momentum[k]) * h end
    return r, self.momentum_key
end

-- A scheduler's base lr, and that of the schedulers inside a SequentialLR
-- (one nested in another too: its own took the rate opt had when made).
local function set_base(s, b, list)
    s.base_lr = b
    for _, sch in ipairs(list or s.schedulers or {}) do set_base(sch, b) end
end

-- SequentialLR(opt, {schedulers = {s1, s2, ...}, milestones = {m1, ...}}):
-- s1's rates until epoch m1, then s2's counted from m1, and so on (a
-- warm-up, then a decay).  The schedulers must be made on opt first, s1
-- before the others: each takes opt's lr when made as its base, and s1's
-- is the optimiser's own, so all of them are given s1's base here.
local SequentialLR = class("SequentialLR", {schedulers = "table", milestones = "table"}, {"schedulers", "milestones"},
    function(s, o)
        local f = "SequentialLR"
        local list, ms = o.schedulers, o.milestones
        check_list(f, "schedulers", list)
        check_list(f, "milestones", ms)
        if #list < 1 or #ms ~= #list - 1 then
            fail(fmt("%s: expected n schedulers and n - 1 milestones, got %d and %d", f, #list, #ms))
        end
        for i, sch in ipairs(list) do
            if type(sch) ~= "table" or type(sch.lr_at) ~= "function" or sch.optimizer ~= s.optimizer then
                fail(fmt("%s: scheduler %d must be a closed-form scheduler of this optimiser, got %s", f, i,
                         typename(sch)))
            end
        end
        local prev = 0
        for i, m in ipairs(ms) do
            if type(m) ~= "number" or m <= prev or not is_int(m) then
                fail(fmt("%s: milestone %d must be an integer above the one before it, got %s", f, i, tostring(m)))
            end
            prev = m
        end
        set_base(s, list[1].base_lr, list)
        s.schedulers, s.milestones = list, ms
        -- the groups' own lrs before the first scheduler made with lists
        -- set them: given back when one of opt.lr is in charge
        for _, sch in ipairs(list) do
            if sch._group_own then s._group_own = sch._group_own break end
        end
    end)
-- the scheduler in charge at epoch e, and its own epoch
function SequentialLR:child_at(e)
    local k, start = 1, 0
    for i, m in ipairs(self.milestones) do
        if e >= m then k, start = i + 1, m end
    end
    return self.schedulers[k], e - start
end
function SequentialLR:lr_at(e)
    local sch, ce = self:child_at(e)
    return sch:lr_at(ce)
end
-- (a OneCycleLR or CyclicLR in charge cycles the momentum; another leaves it)
function SequentialLR:momentum_at(e)
    local sch, ce = self:child_at(e)
    return sch:momentum_at(ce)
end

-- ReduceLROnPlateau(opt, {mode = "min", factor = 0.1, patience = 10,
-- threshold = 1e-4, threshold_mode = "rel", cooldown = 0, min_lr = 0,
-- eps = 1e-8}): sched:step(metric) after each epoch with the quantity to
-- watch (a number or a one-element tensor: reading it waits for it); when
-- it has not improved (by threshold) for more than patience epochs, the lr
-- is multiplied by factor (not below min_lr; a change smaller than eps is
-- skipped), then cooldown epochs pass before counting again.  Torch's
-- rules.  With param groups, each group's lr is cut on its own (Torch's):
-- min_lr may be a list, one per group, and a group's lr stays at or above
-- its own min_lr (a group whose lr is already at or below it is left
-- alone); the cut lr is set as the group's own (opt.param_groups[k].lr,
-- saved by opt:save), opt.lr left as it is, and step and get_last_lr give
-- the list of the groups' lrs.
local PLATEAU_OPTS = {mode = "string", factor = "number", patience = "number", threshold = "number",
                      threshold_mode = "string", cooldown = "number", min_lr = "number|list", eps = "number"}
local ReduceLROnPlateau = {__name = "lr_scheduler.ReduceLROnPlateau"}
ReduceLROnPlateau.__index = ReduceLROnPlateau
M.ReduceLROnPlateau = setmetatable(ReduceLROnPlateau, {__call = function(_, opt, opts, extra)
    if extra ~= nil then extra_arg("ReduceLROnPlateau", "(optimizer, opts)", extra) end
    local f = "ReduceLROnPlateau"
    check_optimizer(f, opt)
    local o = options(f, opts or {}, PLATEAU_OPTS, {})
    local s = setmetatable({optimizer = opt, epoch = 0, mode = o.mode or "min", factor = o.factor or 0.1,
                            patience = o.patience or 10, threshold = o.threshold or 1e-4,
                            threshold_mode = o.threshold_mode or "rel", cooldown = o.cooldown or 0,
                            min_lr = o.min_lr or 0, eps = o.eps or 1e-8, num_bad = 0, cooldown_left = 0},
                           ReduceLROnPlateau)
    if s.mode ~= "min" and s.mode ~= "max" then fail(fmt("%s: mode must be 'min' or 'max', got %s", f, s.mode)) end
    if s.threshold_mode ~= "rel" and s.threshold_mode ~= "abs" then
        fail(fmt("%s: threshold_mode must be 'rel' or 'abs', got %s", f, s.threshold_mode))
    end
    if not (s.factor >= 0 and s.factor < 1) then
        fail(fmt("%s: factor must be in [0, 1), got %s", f, tostring(s.factor)))
    end
    for _, k in ipairs({"patience", "cooldown"}) do
        if not (s[k] >= 0 and is_int(s[k])) then
            fail(fmt("%s: %s must be an integer >= 0, got %s", f, k, tostring(s[k])))
        end
    end
    non_negative(f, "threshold", s.threshold)
    if type(s.min_lr) == "table" then
        local list, n = s.min_lr, #groups_of(opt)
        check_list(f, "min_lr", list)
        if #list ~= n then
            fail(fmt("%s: expected %d values for min_lr (one per param group), got %d", f, n, #list))
        end
        local copy = {}
        for i, v in ipairs(list) do
            if type(v) ~= "number" or not (v >= 0 and v < math.huge) then
                fail(fmt("%s: min_lr[%d] must be a finite number >= 0, got %s", f, i,
                         type(v) == "number" and tostring(v) or typename(v)))
            end
            copy[i] = v
        end
        s.min_lr = copy
    else
        non_negative(f, "min_lr", s.min_lr)
    end
    non_negative(f, "eps", s.eps)
    s.best = s.mode == "min" and math.huge or -math.huge
    return s
end})

function ReduceLROnPlateau:better(a)
    local b, t = self.best, self.threshold
    if self.mode == "min" then
        return self.threshold_mode == "rel" and a < b * (1 - t) or self.threshold_mode == "abs" and a < b - t
    end
    return self.threshold_mode == "rel" and a > b * (1 + t) or self.threshold_mode == "abs" and a > b + t
end

-- opt.lr and the groups' own lrs, checked before a step: one set by hand
-- to something else than a finite number >= 0 raises naming it (it failed
-- in the cut with a Lua error, or cut NaN).
local function lr_ok(v) return type(v) == "number" and v >= 0 and v < math.huge end
local function check_lrs(opt)
    if not lr_ok(opt.lr) then
        fail(fmt("ReduceLROnPlateau: opt.lr must be a finite number >= 0, got %s",
                 type(opt.lr) == "number" and tostring(opt.lr) or typename(opt.lr)))
    end
    if single_group(opt) then return end
    for k, g in ipairs(opt.param_groups) do
        if rawget(g, "lr") ~= nil and not lr_ok(g.lr) then
            fail(fmt("ReduceLROnPlateau: opt.param_groups[%d].lr must be a finite number >= 0, got %s", k,
                     type(g.lr) == "number" and tostring(g.lr) or typename(g.lr)))
        end
    end
end

-- The lr of each param group as the step uses it: a group's own lr follows
-- opt.lr in proportion (ordo.optim), one without takes opt.lr; and that
-- proportion.
local function group_lrs(opt)
    check_lrs(opt)
    local base = rawget(opt, "_base_lr")
    local ratio = type(base) == "number" and base ~= 0 and opt.lr / base or 1
    local r = {}
    for k, g in ipairs(opt.param_groups) do r[k] = rawget(g, "lr") ~= nil and g.lr * ratio or opt.lr end
    return r, ratio
end

function ReduceLROnPlateau:step(metric, extra)
    if extra ~= nil then extra_arg("ReduceLROnPlateau: step", "(metric)", extra) end
    check_sched_self("step", self)
    if type(metric) == "table" and type(metric.item) == "function" then
        if type(metric.numel) == "function" and metric:numel() ~= 1 then
            fail(fmt("ReduceLROnPlateau: step expects the metric, a number or a one-element tensor, got a tensor of %d elements",
                     metric:numel()))
        end
        metric = metric:item()
    end
    if type(metric) ~= "number" or metric ~= metric then
        fail(fmt("ReduceLROnPlateau: step expects the metric (a number), got %s",
                 type(metric) == "number" and tostring(metric) or typename(metric)))
    end
    check_lrs(self.optimizer)
    local mins, n = self.min_lr, #groups_of(self.optimizer)
    if type(mins) == "table" and #mins ~= n then
        fail(fmt("ReduceLROnPlateau: the optimiser has %d param groups, min_lr has %d values (opt:add_param_group " ..
                 "after the scheduler was made: make it after adding the groups)", n, #mins))
    end
    self.epoch = self.epoch + 1
    if self:better(metric) then
        self.best, self.num_bad = metric, 0
    else
        self.num_bad = self.num_bad + 1
    end
    if self.cooldown_left > 0 then
        self.cooldown_left = self.cooldown_left - 1
        self.num_bad = 0
    end
    if self.num_bad > self.patience then
        self:reduce()
        self.cooldown_left, self.num_bad = self.cooldown, 0
    end
    return self:get_last_lr()
end

function ReduceLROnPlateau:reduce()
    local opt, mins = self.optimizer, self.min_lr
    local function min_of(k) return type(mins) == "table" and mins[k] or mins end
    if single_group(opt) then
        local old = opt.lr
        local new = math.max(old * self.factor, min_of(1))
        if old - new > self.eps then opt.lr = new end
        return
    end
    local lrs, ratio = group_lrs(opt)
    for k, g in ipairs(opt.param_groups) do
        local old = lrs[k]
        local new = math.max(old * self.factor, min_of(k))
        -- (old > new >= 0: the proportion is not 0)
        if old - new > self.eps then g.lr = new / ratio end
    end
end

function ReduceLROnPlateau:get_last_lr(extra)
    if extra ~= nil then extra_arg("get_last_lr", "()", extra) end
    check_sched_self("get_last_lr", self)
    local opt = self.optimizer
    if single_group(opt) then return opt.lr end
    return (group_lrs(opt))
end

-- ---------------------------------------------------------------- checkpoints

-- sched:state_dict() is what a resumed run needs of a scheduler: its kind,
-- its epoch count, its base lr, the options that shape its rates, and
-- ReduceLROnPlateau's counters (best, num_bad, cooldown_left).
-- sched:load_state_dict(st) puts one back into a scheduler of the same
-- kind made with the same options (a mismatch raises naming the field and
-- changes nothing) and sets opt.lr to the rate of the restored epoch
-- (ReduceLROnPlateau leaves opt.lr to opt:load).  sched:save(path) and
-- sched:load(path) do the same through a file, in the ordo tensor format
-- of m:save and opt:save:
--
--   m:save("m.bin"); opt:save("opt.bin"); sched:save("sched.bin")
--   ... later, with m, opt and sched made as before:
--   m:load("m.bin"); opt:load("opt.bin"); sched:load("sched.bin")
--
-- A scheduler made on a loaded optimiser without load would take the
-- loaded (already decayed) lr as its base and start again from epoch 0.
-- LambdaLR's function is not saved: it comes from the scheduler made anew.
local NUMBERS = {
    StepLR = {"step_size", "gamma"},
    MultiStepLR = {"gamma", "milestones"},
    ExponentialLR = {"gamma"},
    CosineAnnealingLR = {"T_max", "eta_min"},
    CosineAnnealingWarmRestarts = {"T_0", "T_mult", "eta_min"},
    LambdaLR = {},
    MultiplicativeLR = {},
    LinearLR = {"start_factor", "end_factor", "total_iters"},
    ConstantLR = {"factor", "total_iters"},
    PolynomialLR = {"total_iters", "power"},
    CyclicLR = {"cyc_base", "max_lr", "step_size_up", "step_size_down", "mode", "gamma", "scale_mode",
                "cycle_momentum", "base_momentum", "max_momentum"},
    OneCycleLR = {"max_lr", "total_steps", "pct_start", "initial_lr", "min_lr", "anneal", "three_phase",
                  "cycle_momentum", "base_momentum", "max_momentum"},
    SequentialLR = {"milestones"},
    ReduceLROnPlateau = {"mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lr", "eps"},
}
-- options added later: a state saved before them had their default
-- (cycle_momentum: before it, the momentum was left alone)
local SAVED_DEFAULTS = {OneCycleLR = {three_phase = 0, cycle_momentum = 0}, CyclicLR = {cycle_momentum = 0}}
local COUNTERS = {ReduceLROnPlateau = {"best", "num_bad", "cooldown_left"}}

local own_fields
local function kind_of(self) return ((self.__name or "?"):gsub("^lr_scheduler%.", "")) end

local function same(a, b)
    if type(a) == "table" and type(b) == "table" then
        if #a ~= #b then return false end
        for i = 1, #a do if a[i] ~= b[i] then return false end end
        return true
    end
    return a == b
end

local function show(v)
    if type(v) == "table" then
        local parts = {}
        for i = 1, #v do parts[i] = tostring(v[i]) end
        return "{" .. table.concat(parts, ", ") .. "}"
    end
    return type(v) == "string" and fmt("%q", v) or tostring(v)
end

-- The fields of a state beyond kind, epoch and base_lr: the options, and
-- for SequentialLR each of its schedulers' kind and options ("s2.gamma")
-- -- a resumed run made with other schedulers would go on with their
-- rates, unseen.
local function option_fields(self)
    local kind = kind_of(self)
    local list = {}
    for _, k in ipairs(NUMBERS[kind] or {}) do list[#list + 1] = {k, self[k]} end
    if kind == "SequentialLR" then
        for i, sch in ipairs(self.schedulers) do
            local sk = kind_of(sch)
            list[#list + 1] = {fmt("s%d.kind", i), sk}
            for _, k in ipairs(NUMBERS[sk] or {}) do list[#list + 1] = {fmt("s%d.%s", i, k), sch[k]} end
        end
    end
    return list
end

-- A scheduler of a rate per param group (lists, eta_min on groups) keeps
-- the groups' own lrs of when it was made: a LambdaLR's bases, the lrs a
-- SequentialLR gives back to the groups.  They go with the state (-1:
-- none), "group_own" and a SequentialLR's scheduler's "s2.group_own": one
-- made anew after opt:load would take the rates that load set.
function own_fields(self)
    local list = {}
    if self._group_own then list[1] = {"group_own", self._group_own} end
    if kind_of(self) == "SequentialLR" then
        for i, sch in ipairs(self.schedulers) do
            if sch._group_own then list[#list + 1] = {fmt("s%d.group_own", i), sch._group_own} end
        end
    end
    return list
end

local function state_dict(self, extra)
    if extra ~= nil then extra_arg("state_dict", "()", extra) end
    check_sched_self("state_dict", self)
    local kind = kind_of(self)
    local st = {kind = kind, epoch = self.epoch, base_lr = self.base_lr}
    for _, kv in ipairs(option_fields(self)) do
        local k, v = kv[1], kv[2]
        if type(v) == "table" then
            local c = {}
            for i = 1, #v do c[i] = v[i] end
            v = c
        end
        st[k] = v
    end
    for _, k in ipairs(COUNTERS[kind] or {}) do st[k] = self[k] end
    for _, f in ipairs(own_fields(self)) do
        local own = {}
        for k, v in ipairs(f[2]) do own[k] = v == false and -1 or v end
        st[f[1]] = own
    end
    return st
end

local function load_state_dict(self, st, fname, where)
    fname = fname or "load_state_dict"
    check_sched_self(fname, self)
    local kind = kind_of(self)
    where = where or "the state"
    if type(st) ~= "table" then fail(fmt("%s: expected a state table (from sched:state_dict()), got %s", fname,
                                         typename(st))) end
    if st.kind ~= kind then
        fail(fmt("%s: %s is of a %s, not a %s", fname, where, tostring(st.kind), kind))
    end
    local e = st.epoch
    -- (CosineAnnealingWarmRestarts's may be fractional: step(epoch))
    if type(e) ~= "number" or not (e >= 0 and e < math.huge)
        or (not is_int(e) and kind ~= "CosineAnnealingWarmRestarts") then
        fail(fmt("%s: %s has epoch %s, expected an integer >= 0", fname, where, tostring(e)))
    end
    if kind ~= "ReduceLROnPlateau" and (type(st.base_lr) ~= "number" or st.base_lr ~= st.base_lr) then
        fail(fmt("%s: %s has base_lr %s, expected a number", fname, where, tostring(st.base_lr)))
    end
    for _, kv in ipairs(option_fields(self)) do
        local k, mine = kv[1], kv[2]
        local v = st[k]
        if v == nil and SAVED_DEFAULTS[kind] then v = SAVED_DEFAULTS[kind][k] end
        -- (and those of a SequentialLR's scheduler: "s2.three_phase")
        local si, sk = k:match("^(s%d+)%.(.+)$")
        if v == nil and si and SAVED_DEFAULTS[st[si .. ".kind"]] then v = SAVED_DEFAULTS[st[si .. ".kind"]][sk] end
        -- (a SequentialLR state saved before its schedulers' options were)
        if v == nil and k:find("^s%d+%.") and st["s1.kind"] == nil then v = mine end
        if not same(v, mine) then
            fail(fmt("%s: %s was saved with %s = %s, this %s has %s = %s (make it with the same options)", fname,
                     where, k, show(v), kind, k, show(mine)))
        end
    end
    for _, k in ipairs(COUNTERS[kind] or {}) do
        if type(st[k]) ~= "number" or st[k] ~= st[k] then
            fail(fmt("%s: %s has %s = %s, expected a number", fname, where, k, tostring(st[k])))
        end
    end
    if kind == "OneCycleLR" and e > self.total_steps then
        fail(fmt("%s: %s has epoch %d, past total_steps = %d", fname, where, e, self.total_steps))
    end
    -- the groups' own lrs (a state saved before them had none: kept as made)
    local owns, known = {}, {}
    for _, f in ipairs(own_fields(self)) do
        local name, mine = f[1], f[2]
        known[name] = true
        local g = st[name]
        if g ~= nil then
            if type(g) ~= "table" or #g ~= #mine then
                fail(fmt("%s: %s has %s %s, expected a list of %d numbers (one per param group)", fname, where, name,
                         show(g), #mine))
            end
            local new, old = {}, {}
            for k, v in ipairs(g) do
                if type(v) ~= "number" or not (v == -1 or v >= 0 and v < math.huge) then
                    fail(fmt("%s: %s has %s[%d] = %s, expected a finite number >= 0 or -1", fname, where, name, k,
                             tostring(v)))
                end
                new[k], old[k] = v ~= -1 and v, mine[k]
            end
            owns[#owns + 1] = {mine, new, old}
        end
    end
    for k in pairs(st) do
        if type(k) == "string" and k:find("group_own$") and not known[k] then
            fail(fmt("%s: %s was saved by a %s of a rate per param group (%s), this one sets opt.lr: make it with " ..
                     "the same options, on an optimiser with the same groups", fname, where, kind, k))
        end
    end
    -- (in place: a SequentialLR shares its scheduler's)
    local function put_own(which)
        for _, o in ipairs(owns) do
            for k, v in ipairs(o[which]) do o[1][k] = v end
        end
    end
    if self.lr_at then
        -- the rate first: a LambdaLR whose function fails changes nothing
        local old_base = self.base_lr
        set_base(self, st.base_lr)
        put_own(2)
        local ok, lr = pcall(rate, self, e)
        local ok2, moms, key = true, nil, nil
        if ok then ok2, moms, key = pcall(momenta, self, e) end
        if not (ok and ok2) then
            set_base(self, old_base)
            put_own(3)
            error(ok and moms or lr, 0)
        end
        self.epoch = e
        apply(self, lr, moms, key)
    else
        self.epoch = e
        for _, k in ipairs(COUNTERS[kind]) do self[k] = st[k] end
    end
    return self
end

local serialize -- required on first use: ordo.serialize requires ordo.tensor
local tensor
local unpack = unpack

local function save(self, path, extra)
    if extra ~= nil then extra_arg("save", "(path)", extra) end
    check_sched_self("save", self)
    serialize = serialize or require "ordo.serialize"
    tensor = tensor or require "ordo.tensor"
    local st = state_dict(self)
    local entries = {}
    local names = {"kind", "epoch", "base_lr"}
    for _, kv in ipairs(option_fields(self)) do names[#names + 1] = kv[1] end
    for _, k in ipairs(COUNTERS[st.kind] or {}) do names[#names + 1] = k end
    for _, f in ipairs(own_fields(self)) do names[#names + 1] = f[1] end
    for _, k in ipairs(names) do
        local v = st[k]
        local t
        if type(v) == "string" then
            t = #v > 0 and tensor.tensor({v:byte(1, -1)}, {dtype = "uint8"}) or tensor.zeros({0}, {dtype = "uint8"})
        elseif type(v) == "table" then
            t = #v > 0 and tensor.tensor(v, {dtype = "float64"}) or tensor.zeros({0}, {dtype = "float64"})
            k = k .. ".list" -- a list, even of one
        elseif v ~= nil then
            t = tensor.tensor(v, {dtype = "float64"})
        end
        if t then entries[#entries + 1] = {name = k, tensor = t} end
    end
    serialize.write("scheduler save", path, entries)
    return self
end

local function load(self, path, extra)
    if extra ~= nil then extra_arg("load", "(path)", extra) end
    local fname = "scheduler load"
    check_sched_self("load", self)
    serialize = serialize or require "ordo.serialize"
    local st, entries = {}, serialize.read(fname, path)
    for _, e in ipairs(entries) do
        if e.name == "kind" and e.tensor:dtype() == "uint8" and e.tensor:dim() == 1 and e.tensor:numel() > 0 then
            st.kind = string.char(unpack(e.tensor:totable()))
        end
    end
    if not NUMBERS[st.kind] then
        fail(fmt("%s: %s holds no scheduler state%s", fname, path,
                 st.kind and fmt(" (it holds the state of %s)", st.kind) or ""))
    end
    for _, e in ipairs(entries) do
        local t, k = e.tensor, e.name
        -- (a list and a string are 1-d: totable of a damaged 2-d one gave
        -- tables where numbers or bytes belong, and a Lua error in here)
        if k:find("%.list$") and t:dim() == 1 then
            st[k:sub(1, -6)] = t:numel() > 0 and t:totable() or {}
        elseif t:dtype() == "uint8" and t:dim() == 1 then
            st[k] = t:numel() > 0 and string.char(unpack(t:totable())) or ""
        elseif t:numel() == 1 and t:dim() == 0 then
            st[k] = t:item()
        else
            fail(fmt("%s: %s holds %s of shape %s, not a scheduler's state", fname, path, k,
                     require("ordo.tensor").shape_str(t:shape())))
        end
    end
    return load_state_dict(self, st, fname, path)
end

for _, cls in pairs({Scheduler, ReduceLROnPlateau}) do
    cls.state_dict, cls.load_state_dict, cls.save, cls.load = state_dict, function(self, st, extra)
        if extra ~= nil then extra_arg("load_state_dict", "(state)", extra) end
        return load_state_dict(self, st)
    end, save, load
end

return M
