-- bench/conv_bench.lua - the CNN layers of ordo.nn on the CPU.
--
--   luajit bench/conv_bench.lua        (after `make`)
--   BENCH_QUICK=1 luajit bench/conv_bench.lua
--
-- Times (median of several runs, each pushed and then waited for) of one
-- forward + backward of the small CNN stack of the Fashion-MNIST example,
--   conv 1->32 3x3 pad 1, relu, maxpool 2, conv 32->64 3x3 pad 1, relu, maxpool 2
-- on a batch of 64 float32 28x28 images, for both layouts of conv2d's
-- products (one big GEMM over the batch, or one GEMM per image), then the
-- parts alone: the second conv's im2col, forward and forward + backward
-- beside the one BLAS product its forward needs (the floor for that layer);
-- max_pool2d forward and backward, the backward beside the alternative of a
-- zero fill + scatter_add over flattened planes; batch_norm forward +
-- backward with its direct backward beside the same function composed of
-- autograd-recorded tensor ops.
local function script_dir()
    local src = debug.getinfo(1, "S").source:sub(2)
    local dir = src:match("^(.*)/[^/]*$") or "."
    if dir:sub(1, 1) ~= "/" then dir = (os.getenv("PWD") or ".") .. "/" .. dir end
    return dir
end
local root = script_dir() .. "/.."
package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. package.path

local ordo = require "ordo"
local conv = require "ordo.nn.conv"
local ffi = require "ffi"
local F = ordo.nn.functional

ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } cb_timespec;
int clock_gettime(int clk, cb_timespec *ts);
]]
local ts = ffi.new("cb_timespec")
local function now()
    ffi.C.clock_gettime(1, ts)
    return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local quick = os.getenv("BENCH_QUICK") == "1"
local REPS = quick and 3 or 15

-- median time of fn() (which returns tensors to wait for) over REPS runs
local function time(fn)
    for _ = 1, 2 do
        local r = {fn()}
        for _, t in ipairs(r) do t:wait() end
    end
    local ts_ = {}
    for i = 1, REPS do
        collectgarbage()
        local t0 = now()
        local r = {fn()}
        for _, t in ipairs(r) do t:wait() end
        ts_[i] = now() - t0
    end
    table.sort(ts_)
    return ts_[math.ceil(REPS / 2)] * 1e3
end

ordo.manual_seed(1)
local N = 64
local x = ordo.randn({N, 1, 28, 28})
local c1 = ordo.nn.Conv2d(1, 32, 3, {padding = 1})
local c2 = ordo.nn.Conv2d(32, 64, 3, {padding = 1})

local function stack_fwd(xx)
    local h = F.max_pool2d(c1(xx):relu(), 2)
    return F.max_pool2d(c2(h):relu(), 2)
end

print(string.format("CNN stack, batch %d float32 28x28, %d CPU cores; median of %d runs (ms)", N,
                    tonumber(io.popen("nproc"):read("*l")), REPS))
for _, layout in ipairs({"gemm", "batched"}) do
    conv.conv_layout = layout
    local fwd = time(function() return stack_fwd(x) end)
    local both = time(function()
        c1.weight.grad, c1.bias.grad, c2.weight.grad, c2.bias.grad = nil, nil, nil, nil
        stack_fwd(x):sum():backward()
        return c1.weight.grad, c1.bias.grad, c2.weight.grad, c2.bias.grad
    end)
    print(string.format("  layout %-8s forward %7.2f   forward+backward %7.2f", layout, fwd, both))
end
conv.conv_layout = "batched"

-- the parts (default layout)
local h1 = ordo.no_grad(function() return F.max_pool2d(c1(x):relu(), 2) end)
local w2 = c2.weight:detach()
local cols_ms = time(function()
    local kid = ordo.tensor and require("ordo.cdef").C.ordo_tensor_kernel_id("im2col")
    local cols = ordo.empty({32 * 9, N * 14 * 14})
    require("ordo.tensor").push(kid, "im2col", 0, {h1}, {cols:view(288, N, 196):transpose(1, 2)}, nil,
                                {3, 3, 1, 1, 1, 1, 1, 1})
    return cols
end)
local a = ordo.randn({64, 288})
local b = ordo.randn({288, N * 196})
local gemm_ms = time(function() return ordo.matmul(a, b) end)
local conv2_f = time(function() return ordo.no_grad(function() return c2(h1) end) end)
local h1r = h1:detach():requires_grad()
local conv2_fb = time(function()
    c2.weight.grad, c2.bias.grad, h1r.grad = nil, nil, nil
    c2(h1r):sum():backward()
    return c2.weight.grad, h1r.grad
end)
local y2 = ordo.randn({N, 64, 28, 28})
local pool_f = time(function() return F.max_pool2d(y2, 2) end)
local y2r = y2:detach():requires_grad()
local pool_fb = time(function()
    y2r.grad = nil
    F.max_pool2d(y2r, 2):sum():backward()
    return y2r.grad
end)
local cdef = require "ordo.cdef"
local tensor = require "ordo.tensor"
local _, pidx = F.max_pool2d(y2, 2, {return_indices = true})
local idx0 = (pidx - 1):reshape(N * 64, 14 * 14)
local gy2 = ordo.randn({N, 64, 14, 14})
local K_BW, K_FILL, K_SCATTER = cdef.C.ordo_tensor_kernel_id("max_pool2d_backward"),
    cdef.C.ordo_tensor_kernel_id("fill"), cdef.C.ordo_tensor_kernel_id("scatter_add")
local idx4 = idx0:view(N, 64, 14, 14)
local bw_kernel = time(function()
    local gx = ordo.empty({N, 64, 28, 28})
    tensor.push(K_BW, "bw", 0, {gy2, idx4}, {gx})
    return gx
end)
local bw_scatter = time(function()
    local gx = ordo.empty({N * 64, 28 * 28})
    tensor.push(K_FILL, "fill", 0, {}, {gx}, {0})
    tensor.push(K_SCATTER, "scatter", 0, {gy2:view(N * 64, 196), idx0}, {gx}, nil, {1})
    return gx
end)

local bn = ordo.nn.BatchNorm2d(32)
local xb = ordo.randn({N, 32, 28, 28}):requires_grad()
local bn_fb = time(function()
    xb.grad, bn.weight.grad, bn.bias.grad = nil, nil, nil
    bn(xb):sum():backward()
    return xb.grad, bn.weight.grad
end)
-- the same training-mode batch norm written with recorded tensor ops
local function bn_composed(x, w, b)
    local n, c = x:size(1), x:size(2)
    local x3 = x:reshape(n, c, -1)
    local m = x3:size(1) * x3:size(3)
    local mean = x3:sum(3, true):sum(1, true) / m
    local d = x3 - mean
    local var = (d * d):sum(3, true):sum(1, true) / m
    return (d * (var + 1e-5):pow(-0.5) * w:view(1, c, 1) + b:view(1, c, 1)):view(x:shape())
end
local bn_comp = time(function()
    xb.grad, bn.weight.grad, bn.bias.grad = nil, nil, nil
    bn_composed(xb, bn.weight, bn.bias):sum():backward()
    return xb.grad, bn.weight.grad
end)
print(string.format("  conv 32->64 on 64x32x14x14: im2col %.2f, its GEMM alone (64x288 . 288x%d) %.2f, " ..
                    "forward %.2f, forward+backward %.2f", cols_ms, N * 196, gemm_ms, conv2_f, conv2_fb))
print(string.format("  max_pool2d 2 on 64x64x28x28: forward %.2f, forward+backward %.2f; backward kernel alone %.2f " ..
                    "(zero fill + scatter_add instead: %.2f)", pool_f, pool_fb, bw_kernel, bw_scatter))
print(string.format("  BatchNorm2d(32) on 64x32x28x28, forward+backward: direct backward %.2f, " ..
                    "composed of autograd ops %.2f", bn_fb, bn_comp))
