-- Least-squares regression by gradient descent, every step pushed on the
-- engine: y = X w + noise, fitted with the gradient written out by hand
-- (autograd comes later).  Nothing waits inside the loop; the loss is read
-- once every 50 steps, so the engine overlaps steps with that read.
--
-- usage: build/ordo examples/linear_regression.lua [n] [d] [steps] [trace.json]
--   (or LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit examples/linear_regression.lua ...)
--
--   n       samples (default 20000)
--   d       features (default 64)
--   steps   gradient steps (default 300)
--   trace.json  where the profiler's trace goes (default
--               linear_regression.trace.json in the current directory)
--
-- Exits 1 when w is not within 0.01 of the truth.
local ordo = require "ordo"

local here = debug.getinfo(1, "S").source:sub(2):match("^(.*[/\\])") or "./"
local cli = dofile(here .. "cli.lua")

-- Each value is checked (examples/cli.lua): n = 0 would fit an empty set
-- (a loss of 0/0), a negative step count would run no step and report it,
-- and a trace that cannot be written would fail after the run.
local opt = cli.parse(arg, {
    name = "linear_regression", script = here .. "linear_regression.lua",
    positional = {{"n", "count", 20000}, {"d", "count", 64}, {"steps", "count", 300},
                  {"trace.json", "outfile", "linear_regression.trace.json"}},
})
local n, d, steps, trace_path = opt.n, opt.d, opt.steps, opt["trace.json"]
local lr = 0.1

ordo.manual_seed(42)
local X = ordo.randn({n, d})
local w_true = ordo.randn({d, 1})
local y = X:matmul(w_true) + ordo.randn({n, 1}) * 0.01

local w = ordo.zeros({d, 1})
local Xt = X:t():contiguous()

ordo.profiler.start()
local t0 = os.clock()
for step = 1, steps do
    local err = X:matmul(w) - y                   -- n x 1
    local grad = Xt:matmul(err) * (2 / n)         -- d x 1
    w:sub_(grad * lr)
    if step % 50 == 0 or step == 1 then
        local loss = (err * err):mean():item()    -- the only waits
        print(("step %4d  loss %.6f"):format(step, loss))
    end
end
local dist = ((w - w_true) ^ 2):sum():sqrt():item()
ordo.engine.wait_for_all()
ordo.profiler.stop()
print(("|w - w_true| = %.5f after %d step%s (%.2f s CPU)"):format(dist, steps, steps == 1 and "" or "s", os.clock() - t0))
print(ordo.profiler.summary())
ordo.profiler.dump(trace_path)
print("trace: " .. trace_path .. " (chrome://tracing or ui.perfetto.dev)")
if dist > 0.01 then
    io.stderr:write("did not converge\n")
    os.exit(1)
end
