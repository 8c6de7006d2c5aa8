-- GPU tensors.  Without a CUDA device (or without CUDA kernels) these are
-- reported as pending, never passed.
local ordo = require "ordo"

local function need_gpu()
    if not ordo.cuda.is_available() then pending("no CUDA device available") end
    if not ordo.engine.has_kernel("add", "gpu") then
        pending("no CUDA kernels registered (kernels/cuda/ is not written yet)")
    end
end

describe("gpu tensors", function()
    it("the DESIGN example: to(gpu), ops, sum, item", function()
        need_gpu()
        local a = ordo.tensor({{1, 2}, {3, 4}})
        local b = ordo.randn({2, 2}, {device = ordo.gpu(0)})
        local c = (a:to(ordo.gpu(0)) + b):relu():sum()
        local expect = 0
        local bt = b:to(ordo.cpu(0)):totable()
        for i = 1, 2 do for j = 1, 2 do expect = expect + math.max(0, a:totable()[i][j] + bt[i][j]) end end
        assert.is_true(math.abs(c:item() - expect) < 1e-4)
        ordo.engine.wait_for_all()
    end)

    it("round trip cpu -> gpu -> cpu keeps values and dtype", function()
        need_gpu()
        for _, dt in ipairs({"float32", "float64", "int32", "int64", "uint8"}) do
            local t = ordo.arange(10, {dtype = dt})
            local back = t:to(ordo.gpu(0)):to(ordo.cpu(0))
            assert.same(t:totable(), back:totable())
            assert.equals(dt, back:dtype())
        end
    end)

    it("matmul on the GPU matches the CPU", function()
        need_gpu()
        local a, b = ordo.randn({64, 32}), ordo.randn({32, 16})
        local g = a:to(ordo.gpu(0)):matmul(b:to(ordo.gpu(0))):to(ordo.cpu(0))
        local d = (g - a:matmul(b)):abs():max():item()
        assert.is_true(d < 1e-3)
    end)
end)
