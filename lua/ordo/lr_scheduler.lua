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
local util = require "ordo.util"

local fail, typename = util.fail, util.typename
local fmt, cos, pi, floor = string.format, math.cos, math.pi, math.floor
local type, pairs, ipairs, setmetatable, getmetatable, tostring = type, pairs, ipairs, setmetatable, getmetatable,
    tostring

local M = {}

local Scheduler = {}
Scheduler.__index = Scheduler

function Scheduler:step()
    self.epoch = self.epoch + 1
    self.optimizer.lr = self:lr_at(self.epoch)
    return self.optimizer.lr
end

function Scheduler:get_last_lr() return self.optimizer.lr end

-- The options of a scheduler: known keys only, numbers unless said, and
-- the required ones present.
local function options(fname, opts, known, required)
    if type(opts) ~= "table" or getmetatable(opts) ~= nil then
        fail(fmt("%s: options must be a table, got %s", fname, typename(opts)))
    end
    for k, v in pairs(opts) do
        local want = known[k]
        if not want then fail(fmt("%s: unknown option '%s'", fname, tostring(k))) end
        if type(v) ~= want then fail(fmt("%s: option %s must be a %s, got %s", fname, k, want, typename(v))) end
    end
    for _, k in ipairs(required) do
        if opts[k] == nil then fail(fmt("%s: option %s is required", fname, k)) end
    end
    return opts
end

local function check_optimizer(fname, opt)
    if type(opt) ~= "table" or type(opt.lr) ~= "number" or type(opt.step) ~= "function" then
        fail(fmt("%s: expected an optimiser (ordo.optim.SGD, Adam...), got %s", fname, typename(opt)))
    end
end

-- A scheduler class: make(self, opts) checks and keeps its options.
local function class(name, known, required, make)
    local cls = setmetatable({__name = "lr_scheduler." .. name}, {__index = Scheduler})
    cls.__index = cls
    local fname = name
    M[name] = setmetatable(cls, {__index = Scheduler, __call = function(_, opt, opts)
        check_optimizer(fname, opt)
        local s = setmetatable({optimizer = opt, base_lr = opt.lr, epoch = 0}, cls)
        make(s, options(fname, opts or {}, known, required))
        opt.lr = s:lr_at(0) -- the epoch-0 rate: the base, or base * lr_lambda(0)
        return s
    end})
    return cls
end

local function positive_int(fname, k, v)
    if v < 1 or v ~= floor(v) then fail(fmt("%s: %s must be an integer >= 1, got %s", fname, k, tostring(v))) end
end

local function non_negative(fname, k, v)
    if not (v >= 0) then fail(fmt("%s: %s must be >= 0, got %s", fname, k, tostring(v))) end
end

-- StepLR(opt, {step_size, gamma = 0.1}): base * gamma^floor(epoch / step_size).
local StepLR = class("StepLR", {step_size = "number", gamma = "number"}, {"step_size"}, function(s, o)
    positive_int("StepLR", "step_size", o.step_size)
    s.step_size, s.gamma = o.step_size, o.gamma or 0.1
    non_negative("StepLR", "gamma", s.gamma)
end)
function StepLR:lr_at(e) return self.base_lr * self.gamma ^ floor(e / self.step_size) end

-- MultiStepLR(opt, {milestones = {...}, gamma = 0.1}): base times gamma
-- for each milestone (an increasing list of epochs) reached.
local MultiStepLR = class("MultiStepLR", {milestones = "table", gamma = "number"}, {"milestones"}, function(s, o)
    local prev = 0
    for i, m in ipairs(o.milestones) do
        if type(m) ~= "number" or m <= prev or m ~= floor(m) then
            fail(fmt("MultiStepLR: milestone %d must be an integer above the one before it, got %s", i, tostring(m)))
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
    end)
function CosineAnnealingLR:lr_at(e)
    return self.eta_min + (self.base_lr - self.eta_min) * (1 + cos(pi * e / self.T_max)) / 2
end

-- LambdaLR(opt, {lr_lambda = fn}): base * fn(epoch) (a warm-up, any rule).
local LambdaLR = class("LambdaLR", {lr_lambda = "function"}, {"lr_lambda"}, function(s, o)
    s.lr_lambda = o.lr_lambda
end)
function LambdaLR:lr_at(e)
    local f = self.lr_lambda(e)
    if type(f) ~= "number" then fail(fmt("LambdaLR: lr_lambda(%d) returned %s, expected a number", e, typename(f))) end
    return self.base_lr * f
end

return M
