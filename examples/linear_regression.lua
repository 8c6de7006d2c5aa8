-- Least-squares regression by gradient descent, every step pushed on the
-- engine: y = X w + noise, fitted with the gradient written out by hand
-- (autograd comes later).  Nothing waits inside the loop; the loss is read
-- once every 50 steps, so the engine overlaps steps with that read.
--
--   LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit examples/linear_regression.lua [n] [d] [steps]
local ordo = require "ordo"

local n = tonumber(arg and arg[1]) or 20000   -- samples
local d = tonumber(arg and arg[2]) or 64      -- features
local steps = tonumber(arg and arg[3]) or 300
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
print(("|w - w_true| = %.5f after %d steps (%.2f s CPU)"):format(dist, steps, os.clock() - t0))
print(ordo.profiler.summary())
ordo.profiler.dump("linear_regression.trace.json")
print("trace: linear_regression.trace.json (chrome://tracing or ui.perfetto.dev)")
if dist > 0.01 then
    io.stderr:write("did not converge\n")
    os.exit(1)
end
