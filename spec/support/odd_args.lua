-- Calls every public function of ordo with odd arguments, the way a user
-- typing at the REPL might: nil, NaN, inf, huge and negative numbers,
-- strings, nested tables, booleans, functions, tensors of every dtype and
-- of odd shapes (empty, 0-dim, non-contiguous), a device, a module.
-- Run by spec/bad_arguments_spec.lua in a process of its own, from a
-- scratch directory (a call may write a file named by its argument):
--
--   build/ordo spec/support/odd_args.lua SEED CALLS_PER_FUNCTION LOG [gpu]
--
-- With "gpu" (and a CUDA device, or the simulated one of
-- ORDO_SIMULATED_GPUS=1), tensors on gpu(0) join the pool, and devices
-- are mixed in the calls.
-- Each call is written to LOG before it is made, so a crash names it.
-- Prints one line per problem found, then "done N":
--   RAW <fn> (<args>) <error>   a Lua error from inside ordo ("attempt to
--                                index a nil value"...) instead of one
--                                naming the function and the bad argument
--   NONSTRING <fn> ...          an error that is not a message
--   UNHEALTHY <fn> ...          the engine no longer runs a simple op after it
-- A run-time failure of a pushed kernel (integer division by zero, an index
-- out of range) is fine: it is data the call cannot check without a wait.
local ordo = require "ordo"
local nn = ordo.nn

local seed = tonumber(arg[1]) or 1
local per = tonumber(arg[2]) or 6
local log = assert(io.open(arg[3] or "odd_args.log", "w"))
local with_gpu = arg[4] == "gpu"
if with_gpu and not ordo.cuda.is_available() then error("odd_args: gpu asked for, but no CUDA device is available") end
math.randomseed(seed)
ordo.manual_seed(seed)

-- Functions that change process-wide state for every later call (or wait
-- for a user) are left out; their own specs check their arguments.
local SKIP = {
    ["autograd.set_enabled"] = true, ["ordo.set_grad_enabled"] = true, ["profiler.start"] = true, ["memory.set_gc_threshold"] = true,
    ["engine.set_bulk_size"] = true, ["engine.shell"] = true, ["engine.run_close_hooks"] = true,
    ["engine.on_close"] = true, ["engine.Engine"] = true, ["data.fashion_mnist"] = true,
    ["data.DataLoader"] = true, ["ordo.set_printoptions"] = true,
}

-- A fresh pool per call: an in-place op must not change what the next call sees.
local function pool()
    local p, n = {
        nil, 0, 1, -1, 2, 3, 2.5, -0.5, 1e18, -1e18, 0 / 0, 1 / 0, 2 ^ 40, -2 ^ 31, 2 ^ 62,
        "x", "float32", "int64", "uint8", "mean", "", {}, {1, 2}, {2, 3}, {-1}, {0}, {{1, 2}, {3}}, {1e18},
        {lr = 0.1}, {stride = 2}, {dim = 1}, {reduction = "x"}, true, false, function() end,
        ordo.tensor({{1, 2, 3}, {4, 5, 6}}),              -- 36: the first tensor
        ordo.tensor({1, 2, 3}, "int64"),
        ordo.tensor({5, -7}, "int64"),
        ordo.tensor({{1, 0, 1}, {0, 1, 1}}, "uint8"),
        ordo.zeros(0),
        ordo.zeros(2, 0),
        ordo.tensor(3.5),
        ordo.randn(3, 3):double(),
        ordo.randn(3, 4):t(),
        ordo.tensor({-3, 4}, "int32"),
        ordo.randn(2, 3, 4, 5),
        ordo.randn(2, 3, 8),                              -- 47: the last tensor
        ordo.cpu(0),
        nn.Linear(3, 2),
    }, 49
    if with_gpu then -- two of the tensors move to gpu(0); its device joins the values
        p[37] = p[37]:to(ordo.gpu(0))
        p[43] = p[43]:to(ordo.gpu(0))
        p[48] = ordo.gpu(0)
    end
    return p, n
end
local FIRST_TENSOR, LAST_TENSOR = 36, 47
local MODULE_METHODS = {"parameters", "named_parameters", "named_modules", "named_buffers", "buffers", "modules",
                        "children", "zero_grad", "train", "eval", "to", "state_dict", "register_parameter",
                        "register_buffer", "add_module", "apply", "requires_grad_", "trainable_parameters",
                        "num_parameters", "save", "load", "extra_repr"}

local function describe_value(v)
    if ordo.is_tensor(v) then return v:dtype() .. "[" .. table.concat(v:shape(), "x") .. "]" end
    if type(v) == "table" then return "table" end
    return tostring(v)
end

local function healthy()
    local ok, r = pcall(function() return ordo.ones(3):add(1):sum():item() end)
    return ok and r == 6
end

local calls, problems = 0, 0
local function report(kind, name, desc, msg)
    problems = problems + 1
    print(("%s %s (%s) %s"):format(kind, name, desc, tostring(msg):gsub("\n", " ")))
end

local function try(name, args, n)
    local d = {}
    for j = 1, n do d[j] = describe_value(args[j]) end
    local desc = table.concat(d, ", ")
    log:write(name, "(", desc, ")\n")
    log:flush()
    calls = calls + 1
    local ok, err = pcall(args.fn, unpack(args, 1, n))
    if not ok then
        if type(err) ~= "string" then
            report("NONSTRING", name, desc, err)
        elseif err:find("attempt to", 1, true) or err:find("cdata", 1, true) then
            report("RAW", name, desc, err)
        end
    else
        pcall(ordo.engine.wait_for_all) -- a kernel's run-time failure is allowed
    end
    if not healthy() then
        report("UNHEALTHY", name, desc, "")
        os.exit(3)
    end
    return ok, err
end

-- name -> function, for the functions of a table (sorted: a fixed order per seed)
local function functions_of(prefix, t, out)
    local keys = {}
    for k, v in pairs(t) do
        if type(k) == "string" and not k:match("^_") and (type(v) == "function" or type(v) == "table") then
            keys[#keys + 1] = k
        end
    end
    table.sort(keys)
    for _, k in ipairs(keys) do
        local v, name = t[k], prefix .. k
        if type(v) == "table" then -- a class: called through its metatable's __call
            local class, mt = v, getmetatable(v)
            v = mt and mt.__call and function(...) return class(...) end or nil
        end
        if v and not SKIP[name] then out[#out + 1] = {name, v} end
    end
    return out
end

local targets = {}
-- indexing and the operators, as functions
targets[#targets + 1] = {"t[k]", function(t, k) return t[k] end}
targets[#targets + 1] = {"t[k] = v", function(t, k, v) t[k] = v end}
targets[#targets + 1] = {"a + b", function(a, b) return a + b end}
targets[#targets + 1] = {"a - b", function(a, b) return a - b end}
targets[#targets + 1] = {"a * b", function(a, b) return a * b end}
targets[#targets + 1] = {"a / b", function(a, b) return a / b end}
targets[#targets + 1] = {"a ^ b", function(a, b) return a ^ b end}
targets[#targets + 1] = {"tostring(t)", function(t) return tostring(t) end}
local operators = #targets
local plain = {} -- ordo's functions (ordo.add...) and the tensor methods
for k, v in pairs(ordo) do if type(v) == "function" and k ~= "save" and k ~= "load" then plain[k] = v end end
functions_of("ordo.", plain, targets)
local methods = {}
for k, v in pairs(ordo.Tensor) do if type(v) == "function" and not k:match("^__") then methods[k] = v end end
local first_method = #targets + 1
functions_of("t:", methods, targets)
local last_method = #targets
functions_of("F.", nn.functional, targets)
local classes = {}
for k, v in pairs(nn) do
    if type(v) == "table" and k ~= "functional" and k ~= "init" and k ~= "utils" and k ~= "Module" then classes[k] = v end
end
functions_of("nn.", classes, targets)
functions_of("init.", nn.init, targets)
functions_of("utils.", nn.utils, targets)
functions_of("utils.rnn.", nn.utils.rnn, targets)
functions_of("optim.", ordo.optim, targets)
functions_of("lr_scheduler.", ordo.optim.lr_scheduler, targets)
functions_of("autograd.", ordo.autograd, targets)
functions_of("engine.", ordo.engine, targets)
local prof = {}
for k, v in pairs(ordo.profiler) do if k ~= "dump" then prof[k] = v end end
functions_of("profiler.", prof, targets)
functions_of("memory.", ordo.memory, targets)
functions_of("cuda.", ordo.cuda, targets)
functions_of("data.", ordo.data, targets)
functions_of("progress.", ordo.progress, targets)

for i, tg in ipairs(targets) do
    local name, fn = tg[1], tg[2]
    local is_method = i <= operators or (i >= first_method and i <= last_method)
    for _ = 1, per do
        local p, np = pool()
        local args, n = {fn = fn}, 0
        if is_method then -- a tensor as self, most of the time
            n = 1
            -- (for the operators always: without a tensor they are plain Lua's)
            local any_self = i > operators and math.random() < 0.1
            args[1] = any_self and p[math.random(1, np)] or p[math.random(FIRST_TENSOR, LAST_TENSOR)]
        end
        for _ = 1, math.random(0, 4) do
            n = n + 1
            args[n] = p[math.random(1, np)]
        end
        local ok, made = try(name, args, n)
        -- a module that was built: call it on a few inputs, and one of its methods
        if ok and nn.is_module(made) then
            for _ = 1, 3 do
                local q = p[math.random(FIRST_TENSOR, LAST_TENSOR)]
                local extra = p[math.random(1, np)]
                try(name .. ":forward", {fn = function(a, b) return made(a, b) end, q, extra}, 2)
            end
            local mname = MODULE_METHODS[math.random(1, #MODULE_METHODS)]
            if type(made[mname]) == "function" then
                try(name .. ":" .. mname, {fn = made[mname], made, p[math.random(1, np)], p[math.random(1, np)]}, 3)
            end
        end
        -- an optimiser or a scheduler that was built: step it, and one of its methods
        if ok and type(made) == "table" and type(made.step) == "function" then
            try(name .. ":step", {fn = made.step, made}, 1)
            for _, mname in ipairs({"zero_grad", "save", "load", "get_last_lr"}) do
                if type(made[mname]) == "function" and math.random() < 0.5 then
                    try(name .. ":" .. mname, {fn = made[mname], made, p[math.random(1, np)]}, 2)
                end
            end
        end
        collectgarbage("step")
    end
end
log:close()
print(("done %d calls, %d problems"):format(calls, problems))
