-- LuaJIT compiles a user's loop of tensor ops.  An op wrapper that holds a
-- closure (FNEW, and the UCLO at each of its returns) or an FFI call with
-- a struct passed by value is not compiled: every trace through it aborts
-- and the user's loop stays in the interpreter, at about twice the cost
-- per op (r = a + b: 3.2 against 1.7 us).
local ordo = require "ordo"
local jit_util = require "jit.util"

-- Functions that are not per-op hot paths: they wait for results, print
-- or do file I/O, and may build closures freely.
local NOT_HOT = {totable = true, __tostring = true, save = true, load = true,
                 set_printoptions = true} -- (a setting, called once)
-- nn.functional's convolution-network layers: one call costs far more in
-- its kernels than the interpreter adds, so they keep their closures.
local NN_HEAVY = {conv2d = true, conv_transpose2d = true, max_pool2d = true, batch_norm = true, unfold = true,
                  fold = true, instance_norm = true}

describe("tensor ops compile under LuaJIT", function()
    it("no op wrapper holds a closure", function()
        local held = {}
        local function scan(label, tbl, skip)
            for name, fn in pairs(tbl) do
                if type(fn) == "function" and not NOT_HOT[name] and not (skip and skip[name])
                    and jit_util.funcinfo(fn).children then
                    local info = jit_util.funcinfo(fn)
                    held[#held + 1] = ("%s.%s (%s:%d)"):format(label, name, info.source, info.linedefined)
                end
            end
        end
        scan("Tensor", ordo.Tensor)
        scan("ordo", ordo)
        scan("nn.functional", ordo.nn.functional, NN_HEAVY)
        table.sort(held)
        assert.are.same({}, held)
    end)

    -- Records the root traces that complete while fn runs: true when one
    -- starts in fn itself (its loop compiled, calls into ordo included).
    -- Up to 3 runs, each from a flushed JIT: LuaJIT backs off a trace that
    -- aborted by a random penalty, so about one run in 40 ends before a
    -- loop that does compile gets its trace (seen on the unchanged code too);
    -- a wrapper holding a closure never compiles, so it fails all 3.
    local function loop_compiles(fn)
        local compiled = false
        local function on_trace(what, tr, func)
            if what == "stop" and func == fn then compiled = true end
        end
        for _ = 1, 3 do
            jit.flush()
            jit.attach(on_trace, "trace")
            local ok, err = pcall(fn)
            jit.attach(on_trace)
            assert(ok, err)
            if compiled then break end
        end
        return compiled
    end

    local a, b
    before_each(function()
        a, b = ordo.rand({4, 4}), ordo.rand({4})
    end)

    it("a loop of binary ops, with broadcasting", function()
        assert.is_true(loop_compiles(function()
            for _ = 1, 10000 do
                local r = a + b
                r = r * 2 - a
            end
        end))
    end)

    it("a loop of unary ops and a reduction", function()
        assert.is_true(loop_compiles(function()
            for _ = 1, 10000 do
                local s = a:exp():tanh():sum()
            end
        end))
    end)

    it("a loop making new tensors", function()
        assert.is_true(loop_compiles(function()
            for _ = 1, 10000 do
                local z = ordo.zeros({4, 4})
            end
        end))
    end)

    it("a loop of an alias that renames its op's errors (clip)", function()
        -- (their wrapper made a table per call and unpacked it: no trace)
        assert.is_true(loop_compiles(function()
            for _ = 1, 10000 do
                local c = a:clip(0, 1)
            end
        end))
    end)

    it("a loop of views, matmul and softmax", function()
        assert.is_true(loop_compiles(function()
            for _ = 1, 10000 do
                local t = a:matmul(a):t():reshape(16)
                local m = a:softmax(2)
            end
        end))
    end)

    it("a loop of nn.Linear's forward, in no_grad", function()
        local layer = ordo.nn.Linear(4, 8)
        ordo.no_grad(function()
            assert.is_true(loop_compiles(function()
                for _ = 1, 10000 do
                    local y = layer(a)
                end
            end))
        end)
    end)

    it("a loop of ops on tensors that require a gradient, in no_grad", function()
        local w = ordo.rand({4, 4}):requires_grad()
        ordo.no_grad(function()
            assert.is_true(loop_compiles(function()
                for _ = 1, 10000 do
                    local r = w * 2 + a
                end
            end))
        end)
    end)

    it("the loops' results are right", function()
        local r
        for _ = 1, 10000 do r = (a + b) * 2 - a end
        local ta, tb, tr = a:totable(), b:totable(), r:totable()
        for i = 1, 4 do
            for j = 1, 4 do
                local want = (ta[i][j] + tb[j]) * 2 - ta[i][j]
                assert.is_true(math.abs(tr[i][j] - want) < 1e-5)
            end
        end
    end)
end)
