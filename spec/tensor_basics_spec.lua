-- Creating tensors, what they tell about themselves, reading them back,
-- printing, devices and views.
local ordo = require "ordo"
local R = require "support.ref"
local H = require "support.helpers"

describe("creating tensors", function()
    it("ordo.tensor from nested tables is float32 on cpu(0) by default", function()
        local a = ordo.tensor({{1, 2}, {3, 4}})
        assert.same({2, 2}, a:shape())
        assert.equals(2, a:dim())
        assert.equals(4, a:numel())
        assert.equals("float32", a:dtype())
        assert.equals(ordo.cpu(0), a:device())
        assert.equals("cpu(0)", tostring(a:device()))
        assert.equals("ordo.FloatTensor", a:type())
        assert.same({{1, 2}, {3, 4}}, a:totable())
        assert.same({2, 1}, a:stride())
        assert.equals(2, a:size(1))
        assert.equals(4, a:element_size())
    end)

    it("every dtype, by name, alias or ordo constant", function()
        local names = {float32 = "float32", float = "float32", float64 = "float64", double = "float64",
                       int32 = "int32", int = "int32", int64 = "int64", long = "int64", uint8 = "uint8", byte = "uint8"}
        for given, dt in pairs(names) do
            local t = ordo.tensor({1, 2, 3}, {dtype = given})
            assert.equals(dt, t:dtype())
            assert.same({1, 2, 3}, t:totable())
        end
        assert.equals("float64", ordo.zeros({1}, {dtype = ordo.float64}):dtype())
        assert.equals("int64", ordo.zeros({1}, "int64"):dtype())
    end)

    it("ordo.tensor takes int64_t / uint64_t cdata (12LL), exact past 2^53, as the values they are", function()
        -- Lua numbers are doubles: 2^53 + 1 and 2^63 - 1 cannot be written as numbers (refused: "is cdata")
        local t = ordo.tensor({9007199254740993LL, -9007199254740993LL, 5ULL, 9223372036854775807LL}, "int64")
        assert.same({1, -1, 5, 1023}, (t - ordo.tensor({2 ^ 53, -2 ^ 53, 0, 2 ^ 63 - 1024}, "int64")):totable())
        assert.same({}, ordo.tensor(7LL, "int64"):shape())
        assert.same({{1, 2}}, ordo.tensor({{1LL, 2}}, "int32"):totable())
        assert.same({3}, ordo.tensor({3ULL}):totable())
        assert.equals("float32", ordo.tensor({3LL}):dtype())
        H.raises(function() return ordo.tensor({0xFFFFFFFFFFFFFFFFULL}, "int64") end, "tensor", "does not fit in int64")
        H.raises(function() return ordo.tensor({300LL}, "uint8") end, "tensor", "300", "does not fit in uint8")
        H.raises(function() return ordo.tensor(require("ffi").new("int[2]")) end, "tensor", "got cdata", "12LL")
        H.raises(function() return ordo.tensor({require("ffi").new("double", 1)}) end, "tensor", "element [1] is cdata")
    end)

    it("ordo.tensor takes one-element tensors among the numbers of a table, as Torch", function()
        -- a list of losses: refused before ("element [1] is ordo.Tensor")
        assert.same({1, 2.5}, ordo.tensor({ordo.tensor(1), ordo.tensor(2.5)}):totable())
        assert.same({{1, 2}, {3, 4}}, ordo.tensor({{ordo.tensor(1), 2}, {3, ordo.tensor({4}, "int64")}}):totable())
        assert.same({1}, ordo.tensor({ordo.tensor(1.5)}, "int32"):totable())
        assert.same({7, 8}, ordo.zeros({2}):copy_({ordo.tensor(7), 8}):totable())
        H.raises(function() return ordo.tensor({ordo.tensor({1, 2})}) end, "tensor", "element [1]", "shape 2", "stack")
        H.raises(function() return ordo.tensor({ordo.tensor(300)}, "uint8") end, "tensor", "300", "uint8")
        -- int64 values past 2^53 keep every bit (item's double dropped the low ones: 2^62 + 1 became 2^62)
        local big = ordo.full({1}, 2 ^ 62, "int64") + 1
        local t = ordo.tensor({big, big - 1, 5}, "int64")
        assert.same({1, 0, 5 - 2 ^ 62}, (t - 2 ^ 62):totable())
        assert.same({1, 0}, (ordo.zeros({2}, "int64"):copy_({big, big:view({}) - 1}) - 2 ^ 62):totable())
        assert.same({1}, (ordo.tensor({{big}}, "int64") - 2 ^ 62):view(-1):totable())
        assert.same({2 ^ 62}, ordo.tensor({big}, "float64"):totable()) -- as a number elsewhere
        H.raises(function() return ordo.tensor({big}, "int32") end, "tensor", "does not fit in int32")
        assert.same({30}, ordo.tensor({10, 20, 30}):index_select(1, {ordo.tensor(3, "int64")}):totable())
        -- and fill_, masked_fill, t[i] = x with such a tensor
        assert.same({1, 1}, (ordo.zeros({2}, "int64"):fill_(big) - 2 ^ 62):totable())
        local m = ordo.tensor({1, 0}, "uint8")
        assert.same({1, -2 ^ 62}, (ordo.zeros({2}, "int64"):masked_fill(m, big) - 2 ^ 62):totable())
        local z = ordo.zeros({2}, "int64")
        assert.equals(z, z:masked_fill_(m, big))
        assert.same({1, -2 ^ 62}, (z - 2 ^ 62):totable())
        z[2] = big -- a shape-1 tensor into an element: its leading 1 goes, as Torch's setitem
        assert.same({1, 1}, (z - 2 ^ 62):totable())
    end)

    it("t:type(name) converts, as Torch7's, instead of ignoring the name", function()
        local a = ordo.tensor({1.5, -2.5, 3})
        assert.same({1, -2, 3}, a:type("torch.IntTensor"):totable())
        assert.equals("int32", a:type("ordo.IntTensor"):dtype())
        assert.equals("ordo.DoubleTensor", a:type("DoubleTensor"):type())
        assert.equals("int64", a:type("int64"):dtype())
        assert.equals(a, a:type("ordo.FloatTensor")) -- already that type: t itself, as to()
        assert.equals("ordo.FloatTensor", a:type())
        H.raises(function() return a:type("torch.CudaTensor") end, "type: unknown type", "CudaTensor")
        H.raises(function() return a:type(3) end, "type: unknown type number")
    end)

    it("0-dim tensors from numbers; item", function()
        local s = ordo.tensor(2.5)
        assert.same({}, s:shape())
        assert.equals(0, s:dim())
        assert.equals(1, s:numel())
        assert.equals(2.5, s:item())
        assert.equals(2.5, s:totable())
        assert.equals(7, ordo.tensor({{7}}):item())
        assert.equals(true, ordo.tensor({true, false}):eq(1):totable()[1] == 1)
    end)

    it("integers are exact through int64, values truncate into integer dtypes", function()
        local big = 2 ^ 52 + 1
        assert.equals(big, ordo.tensor({big}, {dtype = "int64"}):item())
        assert.same({1, -1, 255}, ordo.tensor({1.9, -1.9, 255}, {dtype = "int32"}):totable())
    end)

    it("shapes given as a table or as arguments; empty tensors", function()
        assert.same({2, 3}, ordo.zeros(2, 3):shape())
        assert.same({2, 3}, ordo.ones({2, 3}, {dtype = "int32"}):shape())
        assert.same({}, ordo.zeros({}):shape())
        local e = ordo.empty({0, 4})
        assert.equals(0, e:numel())
        assert.same({}, e:totable())
        assert.same({{}, {}}, ordo.zeros({2, 0}):totable())
        assert.same({0}, ordo.tensor({}):shape())
    end)

    it("*_like functions follow the tensor's shape, dtype and device", function()
        local a = ordo.tensor({{1, 2, 3}}, {dtype = "int64"})
        local z = ordo.zeros_like(a)
        assert.same({{0, 0, 0}}, z:totable())
        assert.equals("int64", z:dtype())
        assert.same({{1, 1, 1}}, ordo.ones_like(a, {dtype = "float64"}):totable())
        assert.equals("float64", ordo.ones_like(a, {dtype = "float64"}):dtype())
        assert.same({{5, 5, 5}}, ordo.full_like(a, 5):totable())
        assert.same({1, 3}, ordo.empty_like(a):shape())
    end)

    it("ordo.tensor(t) copies a tensor, optionally to another dtype", function()
        local a = ordo.tensor({1, 2})
        local b = ordo.tensor(a, {dtype = "float64"})
        a:fill_(0)
        assert.same({1, 2}, b:totable())
        assert.equals("float64", b:dtype())
    end)
end)

describe("devices", function()
    it("cpu devices are interned and print as cpu(n)", function()
        assert.equals(ordo.cpu(0), ordo.cpu())
        assert.equals("cpu(1)", tostring(ordo.cpu(1)))
        local t = ordo.zeros({2}, {device = ordo.cpu(1)})
        assert.equals(ordo.cpu(1), t:device())
        local u = t:to(ordo.cpu(0))
        assert.equals(ordo.cpu(0), u:device())
        assert.equals(t, t:to(ordo.cpu(1)))
        assert.equals(ordo.cpu(1), ordo.zeros({1}, {device = "cpu:1"}):device())
    end)

    it("ops on tensors of different devices raise", function()
        local a = ordo.zeros({2}, {device = ordo.cpu(1)})
        H.raises(function() return a + ordo.zeros({2}) end, "add", "cpu(0)", "cpu(1)")
    end)

    it("without a CUDA device, gpu(n) raises 'no CUDA device available'", function()
        if ordo.cuda.is_available() then
            pending("a CUDA device is present")
            return
        end
        H.raises(function() return ordo.gpu(0) end, "no CUDA device available")
        H.raises(function() return ordo.zeros({2}, {device = "gpu:0"}) end, "no CUDA device available")
        H.raises(function() return ordo.zeros({2}):to("cuda") end, "no CUDA device available")
    end)
end)

describe("printing", function()
    it("shows values Torch-style with a footer", function()
        local s = tostring(ordo.tensor({{1, 2, 3}, {4, 5, 6}}))
        assert.equals(" 1  2  3\n 4  5  6\n[ordo.FloatTensor of size 2x3 on cpu(0)]", s)
        assert.truthy(tostring(ordo.zeros({2}, {dtype = "float64"})):find("[ordo.DoubleTensor of size 2 on cpu(0)]", 1, true))
        assert.truthy(tostring(ordo.zeros({2}, {dtype = "int32"})):find("[ordo.IntTensor of size 2 on cpu(0)]", 1, true))
        assert.truthy(tostring(ordo.zeros({2}, {dtype = "int64"})):find("[ordo.LongTensor of size 2 on cpu(0)]", 1, true))
        assert.truthy(tostring(ordo.zeros({2}, {dtype = "uint8"})):find("[ordo.ByteTensor of size 2 on cpu(0)]", 1, true))
        assert.truthy(tostring(ordo.zeros({1}, {device = ordo.cpu(1)})):find("on cpu(1)]", 1, true))
    end)

    it("fractions get four decimals, extreme magnitudes scientific notation", function()
        local s = tostring(ordo.tensor({0.5, -1.25}))
        assert.equals("  0.5000\n -1.2500\n[ordo.FloatTensor of size 2 on cpu(0)]", s)
        assert.truthy(tostring(ordo.tensor({1e-7, 1}, {dtype = "float64"})):find("1.0000e-07", 1, true))
        local inf = tostring(ordo.tensor({1, 0}) / 0)
        assert.truthy(inf:find("inf", 1, true) and inf:find("nan", 1, true))
    end)

    it("switches to scientific notation as Torch does: integral values from 1e9, fractions spanning 1000x", function()
        local function body(t) return (tostring(t):gsub("\n%[.*$", "")) end
        -- a float32 1e14 showed as 100000000376832, 1e10 as 10000000000
        assert.equals(" 1.0000e+14\n 1.0000e+00", body(ordo.tensor({1e14, 1})))
        assert.equals(" 1.0000e+10\n 2.0000e+00", body(ordo.tensor({1e10, 2}, "float64")))
        assert.equals(" 999999999\n         1", body(ordo.tensor({999999999, 1}, "float64")))
        -- integer dtypes always show their digits
        assert.equals(" 10000000000\n           1", body(ordo.tensor({1e10, 1}, "int64")))
        -- 0.00012 beside 0.5 showed as 0.0001
        assert.equals(" 5.0000e-01\n 1.2000e-04", body(ordo.tensor({0.5, 0.00012}, "float64")))
        assert.equals(" 2.5000e+03\n 1.5000e+00", body(ordo.tensor({2500, 1.5})))
        -- within 1000x, fixed point; zeros, nan and inf take no part in the choice
        assert.equals(" 999.5000\n   1.0000\n   0.0000\n      nan\n     -inf",
                      body(ordo.tensor({999.5, 1, 0, 0 / 0, -1 / 0})))
        assert.equals("    1\n -inf\n  nan", body(ordo.tensor({1, -1 / 0, 0 / 0})))
    end)

    it("rows wider than 80 characters print in pieces of columns, as Torch", function()
        -- (a 5x200 tensor printed lines of 1600 characters)
        assert.equals(table.concat({
            "Columns 1 to 20",
            "  1   2   3   4   5   6   7   8   9  10  11  12  13  14  15  16  17  18  19  20",
            " 31  32  33  34  35  36  37  38  39  40  41  42  43  44  45  46  47  48  49  50",
            "",
            "Columns 21 to 30",
            " 21  22  23  24  25  26  27  28  29  30",
            " 51  52  53  54  55  56  57  58  59  60",
            "[ordo.FloatTensor of size 2x30 on cpu(0)]"}, "\n"), tostring(ordo.arange(1, 61):view(2, 30)))
        -- 80 characters fit; one more column goes on
        assert.equals(" 1  2  3\n[ordo.FloatTensor of size 1x3 on cpu(0)]", tostring(ordo.arange(1, 4):view(1, 3)))
        assert.falsy(tostring(ordo.arange(1, 41):view(2, 20)):find("Column", 1, true))
        local s = tostring(ordo.arange(1, 22):view(1, 21))
        assert.truthy(s:find("\n\nColumn 21\n 21\n[", 1, true), s)
        -- inside each matrix of a 3-d tensor, its values in order
        s = tostring(ordo.arange(1, 2 * 2 * 30 + 1):view(2, 2, 30))
        assert.truthy(s:find("(2,.,.) = \nColumns 1 to 16\n  61   62 ", 1, true), s)
        assert.truthy(s:find("Columns 17 to 30\n  77   78 ", 1, true), s)
        assert.truthy(s:find(" 118  119  120\n[ordo.FloatTensor of size 2x2x30", 1, true), s)
        -- every line within 80 characters; an elided row stays whole
        for line in tostring(ordo.rand({5, 200})):gmatch("[^\n]+") do assert.truthy(#line <= 80, line) end
        s = tostring(ordo.arange(1, 100001):view(100, 1000))
        assert.falsy(s:find("Column", 1, true), s)
    end)

    it("set_printoptions sets precision, threshold, edgeitems, linewidth and sci_mode, as PyTorch's", function()
        local old = ordo.set_printoptions({precision = 2})
        finally(function() ordo.set_printoptions(old) end)
        local x = ordo.tensor({0.123456, 2.5})
        assert.equals(" 0.12\n 2.50\n[ordo.FloatTensor of size 2 on cpu(0)]", tostring(x))
        ordo.set_printoptions({sci_mode = true})
        assert.equals(" 1.23e-01\n 2.50e+00", (tostring(x):gsub("\n%[.*", "")))
        assert.equals(" 1.00e+00\n 2.00e+00", (tostring(ordo.tensor({1, 2})):gsub("\n%[.*", "")))
        assert.equals(" 3\n", tostring(ordo.tensor({3}, "int32")):sub(1, 3)) -- integers stay integers
        ordo.set_printoptions({sci_mode = false, precision = 1})
        assert.equals("  0.0\n 25.0", (tostring(ordo.tensor({1e-7, 25})):gsub("\n%[.*", "")))
        -- precision 0 keeps the point: 1.5 and 2.5 showed as 2 and 3, as if whole
        ordo.set_printoptions({sci_mode = "auto", precision = 0})
        assert.equals("  2.\n -3.\n  0.", (tostring(ordo.tensor({1.5, -2.5, 0.25})):gsub("\n%[.*", "")))
        assert.equals(" 2\n 3", (tostring(ordo.tensor({2, 3})):gsub("\n%[.*", ""))) -- whole values stay integers
        ordo.set_printoptions({profile = "full"}) -- nothing elided
        assert.falsy(tostring(ordo.zeros(3000)):find("...", 1, true))
        assert.equals(4, ordo.set_printoptions({threshold = 10, edgeitems = 1}).precision) -- (full's)
        assert.equals("  1\n...\n 20\n[ordo.FloatTensor of size 20 on cpu(0)]", tostring(ordo.arange(1, 21)))
        ordo.set_printoptions({threshold = 1000, linewidth = 20})
        assert.truthy(tostring(ordo.arange(1, 11):view(1, 10)):find("^Columns 1 to 5\n  1   2   3   4   5\n\nColumns 6"))
        -- any integer >= 1 is an edgeitems or a linewidth (2^32 was refused as "must be an integer >= 1")
        ordo.set_printoptions({threshold = 0, edgeitems = 2 ^ 32, linewidth = 2 ^ 40})
        assert.equals(" 1\n 2\n 3\n[ordo.FloatTensor of size 3 on cpu(0)]", tostring(ordo.arange(1, 4)))
        ordo.set_printoptions({profile = "default"})
        assert.equals(" 0.1235\n 2.5000\n[ordo.FloatTensor of size 2 on cpu(0)]", tostring(x))
        for _, c in ipairs({{{precision = -1}, "precision must be an integer from 0 to 16, got -1"},
                            {{threshold = "3"}, 'threshold must be an integer >= 0 (or math.huge: never elide), got "3"'},
                            {{edgeitems = 0}, "edgeitems must be an integer >= 1, got 0"},
                            {{linewidth = 1.5}, "linewidth must be an integer >= 1, got 1.5"},
                            {{linewidth = math.huge}, "linewidth must be an integer >= 1, got inf"},
                            {{edgeitems = 0 / 0}, "edgeitems must be an integer >= 1, got nan"},
                            {{sci_mode = 1}, 'sci_mode must be true, false or "auto", got 1'},
                            {{profile = "long"}, 'profile must be "default", "short" or "full", got "long"'},
                            {{precison = 3}, "unknown option 'precison'"}}) do
            local ok, e = pcall(ordo.set_printoptions, c[1])
            assert.is_false(ok)
            assert.truthy(tostring(e):find("set_printoptions: " .. c[2], 1, true), e)
        end
        assert.equals(" 0.1235\n 2.5000\n[ordo.FloatTensor of size 2 on cpu(0)]", tostring(x)) -- a refused call changes nothing
    end)

    it("3-d tensors print one matrix per leading index", function()
        local s = tostring(ordo.arange(8):view(2, 2, 2))
        assert.truthy(s:find("(1,.,.) = ", 1, true))
        assert.truthy(s:find("(2,.,.) = ", 1, true))
        assert.truthy(s:find("[ordo.FloatTensor of size 2x2x2 on cpu(0)]", 1, true))
    end)

    it("elides the middle of large tensors", function()
        local s = tostring(ordo.arange(100000):view(100, 1000))
        assert.truthy(#s < 2000)
        assert.truthy(s:find("...", 1, true))
        assert.truthy(s:find("99999", 1, true))
        assert.truthy(s:find("[ordo.FloatTensor of size 100x1000 on cpu(0)]", 1, true))
    end)

    it("the footer says when a tensor requires a gradient or was recorded by autograd, as PyTorch's repr", function()
        -- (nothing told a parameter from a plain tensor, nor a result in the graph from a detached one)
        local x = ordo.tensor({1.5, 2}):requires_grad()
        assert.equals(" 1.5000\n 2.0000\n[ordo.FloatTensor of size 2 on cpu(0), requires_grad]", tostring(x))
        local y = (x * 2):sum()
        assert.equals(" 7\n[ordo.FloatTensor of size () on cpu(0), grad_fn = sum]", tostring(y))
        assert.equals("[ordo.FloatTensor of size 2 on cpu(0), grad_fn = mul]", require("ordo.tensor").summary(x * 2))
        assert.equals(" 3\n 4\n[ordo.FloatTensor of size 2 on cpu(0)]", tostring((x * 2):detach()))
        assert.equals(" 3\n 4\n[ordo.FloatTensor of size 2 on cpu(0)]", tostring(ordo.no_grad(function() return x * 2 end)))
        assert.truthy(tostring(ordo.nn.Linear(2, 3).weight):find("on cpu(0), requires_grad]", 1, true))
    end)

    it("empty and 0-dim tensors", function()
        assert.equals("[ordo.FloatTensor of size 0x3 on cpu(0)]", tostring(ordo.zeros({0, 3})))
        assert.equals(" 2.5000\n[ordo.FloatTensor of size () on cpu(0)]", tostring(ordo.tensor(2.5)))
    end)

    it("print waits for pending ops", function()
        local a = ordo.zeros({3})
        for _ = 1, 100 do a:add_(1) end
        assert.truthy(tostring(a):find("100", 1, true))
    end)
end)

describe("views", function()
    it("reshape/view/flatten share the storage; reshape copies when it must", function()
        local a = ordo.arange(6)
        local v = a:view(2, 3)
        v:narrow(1, 2, 1):fill_(0)
        assert.same({0, 1, 2, 0, 0, 0}, a:totable())
        assert.same({3, 2}, a:reshape({3, -1}):shape())
        local t = v:t()
        H.raises(function() return t:view(6) end, "view", "contiguous")
        local r = t:reshape(6)
        assert.same({0, 0, 1, 0, 2, 0}, r:totable())
        assert.same({6}, v:flatten():shape())
        assert.same({1, 6}, a:view({1, 6}):shape())
    end)

    it("transpose, t, permute, narrow, select, squeeze, unsqueeze, expand", function()
        math.randomseed(5)
        local ra = R.rand({2, 3, 4}, "float64")
        local a = H.make(ordo, ra, "contiguous")
        H.check(a:transpose(1, 3), R.transpose(ra, 1, 3))
        H.check(a:transpose(-1, 1), R.transpose(ra, 1, 3))
        H.check(a:permute(3, 1, 2), R.permute(ra, {3, 1, 2}))
        H.check(a:permute({2, 3, 1}), R.permute(ra, {2, 3, 1}))
        H.check(a:narrow(2, 2, 2), R.narrow(ra, 2, 2, 2))
        H.check(a:narrow(3, -2, 2), R.narrow(ra, 3, 3, 2))
        local sel = a:select(2, 3)
        assert.same({2, 4}, sel:shape())
        H.check(sel:unsqueeze(2), R.narrow(ra, 2, 3, 1))
        assert.same({2, 1, 3, 4}, a:unsqueeze(2):shape())
        assert.same({2, 3, 4, 1}, a:unsqueeze(-1):shape())
        assert.same({2, 4}, a:narrow(2, 1, 1):squeeze():shape())
        assert.same({2, 4}, a:narrow(2, 1, 1):squeeze(2):shape())
        assert.same({2, 3, 4}, a:squeeze(1):shape())
        local e = ordo.tensor({{1}, {2}}):expand(2, 3)
        assert.same({{1, 1, 1}, {2, 2, 2}}, e:totable())
        assert.same({4, 2, 3}, e:expand({4, 2, 3}):shape())
        assert.same({2, 3}, ordo.tensor({1, 2, 3}):expand_as(ordo.zeros(2, 3)):shape())
    end)

    it("writes through views land in the base, in push order", function()
        local base = ordo.zeros({4, 4})
        local col = base:select(2, 2)
        local row = base:narrow(1, 3, 1)
        col:fill_(1)
        row:add_(2)
        base:t():narrow(1, 4, 1):mul_(5)
        local tb = base:totable()
        assert.same({0, 1, 0, 0}, tb[1])
        assert.same({2, 3, 2, 10}, tb[3])
    end)

    it("squeeze takes a list of dims, as Torch's; narrow names a negative start as given", function()
        local x = ordo.zeros({1, 2, 1, 3})
        assert.same({2, 3}, x:squeeze({1, -2}):shape())
        assert.same({1, 2, 3}, x:squeeze({2, 3}):shape()) -- a listed dim of another size stays
        assert.same({1, 2, 1, 3}, x:squeeze({}):shape())
        H.raises(function() return x:squeeze({1, 1}) end, "squeeze", "twice")
        H.raises(function() return x:squeeze({5}) end, "squeeze", "dim 5 out of range")
        H.raises(function() return x:squeeze({1, nil, 3}) end, "squeeze", "entry 2")
        local e = H.raises(function() return ordo.arange(4):narrow(1, -5, 1) end, "narrow: start -5 out of range")
        assert.falsy(e:find("start 0", 1, true), e)
        assert.same({3}, ordo.arange(4):narrow(1, -1, 1):totable())
    end)

    it("unfold: the windows along a dim as a view, as Torch's; gradients add up over overlapping windows", function()
        local x = ordo.arange(1, 8)
        assert.same({{1, 2, 3}, {3, 4, 5}, {5, 6, 7}}, x:unfold(1, 3, 2):totable())
        assert.same({{1, 2}, {4, 5}}, x:unfold(-1, 2, 3):totable()) -- (the 7th element is in no window)
        local m = ordo.arange(12):view(3, 4)
        assert.same({{{0, 4}, {1, 5}, {2, 6}, {3, 7}}, {{4, 8}, {5, 9}, {6, 10}, {7, 11}}}, m:unfold(1, 2, 1):totable())
        assert.same({3, 3, 2}, m:unfold(2, 2, 1):shape())
        assert.same({2, 3, 2}, m:t():unfold(1, 2, 2):shape())
        assert.same({4, 1, 0}, m:t():unfold(2, 0, 5):shape())
        assert.same({5}, ordo.tensor(5):unfold(1, 1, 1):totable()) -- a 0-dim tensor: its one element
        -- a view: a change to the base shows in it
        local v = x:unfold(1, 3, 2)
        x:add_(10)
        assert.same({11, 12, 13}, v[1]:totable())
        assert.equals("unfold", ordo.randn({4}, "float64"):requires_grad():unfold(1, 2, 1):grad_fn())
        local t = ordo.tensor({1, 2, 3, 4, 5}, "float64"):requires_grad()
        t:unfold(1, 3, 1):sum():backward()
        assert.same({1, 2, 3, 2, 1}, t.grad:totable()) -- each element, once per window holding it
        for _, c in ipairs({{1, 3, 2}, {2, 2, 1}, {-1, 5, 5}, {3, 1, 2}}) do
            assert.is_true(ordo.autograd.gradcheck(function(u)
                local y = u:unfold(c[1], c[2], c[3])
                return y * ordo.arange(1, y:numel() + 1, "float64"):view(y:shape())
            end, {ordo.randn({3, 4, 5}, "float64"):requires_grad()}))
        end
        H.raises(function() return x:unfold(1, 8, 1) end, "unfold", "size 8 is larger than dim 1 of size 7")
        H.raises(function() return x:unfold(1, -1, 1) end, "unfold", "size must be an integer >= 0")
        H.raises(function() return x:unfold(1, 2, 0) end, "unfold", "step must be an integer >= 1")
        H.raises(function() return x:unfold(2, 2, 1) end, "unfold", "dim 2 out of range")
        H.raises(function() return ordo.zeros({1, 1, 1, 1, 1, 1, 1, 1}):unfold(1, 1, 1) end, "unfold", "8 dims")
    end)

    it("diagonal, unbind, movedim, swapaxes, view_as, reshape_as: views, as Torch's", function()
        local a = ordo.arange(12):view(3, 4)
        assert.same({0, 5, 10}, a:diagonal():totable())
        assert.same({1, 6, 11}, a:diagonal(1):totable())
        assert.same({4, 9}, a:diagonal(-1):totable())
        assert.same({0}, a:diagonal(4):shape())
        assert.same({0}, a:diagonal(-3):shape())
        assert.same({4, 9}, a:t():diagonal(1):totable())
        local b = ordo.arange(24):view(2, 3, 4)
        assert.same({{0, 5, 10}, {12, 17, 22}}, b:diagonal(0, 2, 3):totable())
        assert.same({{12}, {16}, {20}}, b:diagonal(1, 3, 1):totable()) -- b[i + 1][j][i]: dim 2 stays, first
        local z = ordo.zeros(3, 3)
        z:diagonal():fill_(1) -- a view: writes reach z
        z:diagonal(-1):add_(2)
        assert.same({{1, 0, 0}, {2, 1, 0}, {0, 2, 1}}, z:totable())
        H.raises(function() return a:diagonal(0, 2, -1) end, "diagonal", "both dim 2")
        H.raises(function() return ordo.zeros(3):diagonal() end, "diagonal", "2 dims or more")
        H.raises(function() return a:diagonal(0.5) end, "diagonal", "offset", "0.5")
        local cols = a:unbind(2)
        assert.equals(4, #cols)
        assert.same({1, 5, 9}, cols[2]:totable())
        cols[1]:fill_(-1)
        assert.same({-1, -1, -1}, a:select(2, 1):totable())
        H.raises(function() return a:unbind(3) end, "unbind", "dim 3")
        local c = ordo.zeros(2, 3, 4, 5)
        assert.same({3, 4, 5, 2}, c:movedim(1, -1):shape())
        assert.same({3, 4, 5, 2}, c:movedim({1, 2}, {4, 1}):shape())
        assert.same({4, 2, 3, 5}, c:moveaxis(3, 1):shape())
        H.raises(function() return c:movedim({1, 1}, {2, 3}) end, "movedim", "source dim 1 appears twice")
        H.raises(function() return c:movedim({1, 2}, {3, 3}) end, "movedim", "destination dim 3 appears twice")
        H.raises(function() return c:movedim({1, 2}, 1) end, "movedim", "2 source dims but 1")
        assert.same({4, 3}, a:swapaxes(1, 2):shape())
        assert.same({4, 3}, a:swapdims(-1, -2):shape())
        H.raises(function() return a:swapaxes(1, 3) end, "swapaxes", "dim 3")
        local v = a:view_as(ordo.zeros(4, 3))
        v[1][1] = 100
        assert.equals(100, a[1][1])
        assert.same({12}, a:t():reshape_as(ordo.zeros(12)):shape())
        H.raises(function() return a:view_as({4, 3}) end, "view_as", "expected a tensor")
        H.raises(function() return a:reshape_as(nil) end, "reshape_as", "expected a tensor")
    end)

    it("an expanded view cannot be written", function()
        local e = ordo.tensor({{1}, {2}}):expand(2, 3)
        H.raises(function() e:add_(1) end, "add_", "expanded", "2x3")
    end)

    it("overlapping unfold windows cannot be written (an element in two windows would change twice)", function()
        local x = ordo.arange(7):float()
        local u = x:unfold(1, 3, 2) -- element 3 is in windows 1 and 2
        H.raises(function() u:add_(1) end, "add_", "overlap in memory", "3x3", "(2, 1)", "contiguous()")
        H.raises(function() u:fill_(1) end, "fill_", "overlap in memory")
        H.raises(function() u:copy_(ordo.ones(3, 3)) end, "copy_", "overlap in memory")
        H.raises(function() u:exp_() end, "exp_", "overlap in memory")
        H.raises(function() u:uniform_() end, "uniform_", "overlap in memory")
        H.raises(function() u:scatter_(2, ordo.tensor({{1}, {1}, {1}}, "int64"), 5) end, "scatter", "overlap")
        H.raises(function() u:index_add_(1, ordo.tensor({1}, "int64"), ordo.ones(1, 3)) end, "index_add_", "overlap")
        assert.same({0, 1, 2, 3, 4, 5, 6}, x:totable()) -- nothing written
        -- windows that do not overlap, one window, and the transpose of one are writable
        local y = ordo.arange(7):float()
        y:unfold(1, 2, 3):add_(10)
        assert.same({10, 11, 2, 13, 14, 5, 6}, y:totable())
        u[2]:add_(100)
        assert.same({0, 1, 102, 103, 104, 5, 6}, x:totable())
        local m = ordo.zeros(4, 6)
        m:t():unfold(1, 3, 3):fill_(1)
        m:unfold(2, 2, 2):transpose(1, 3):add_(1)
        assert.same({{2, 2, 2, 2, 2, 2}, {2, 2, 2, 2, 2, 2}, {2, 2, 2, 2, 2, 2}, {2, 2, 2, 2, 2, 2}}, m:totable())
        -- small ops (run at the push) and large ones (the general path) alike
        local big = ordo.zeros(100000):unfold(1, 1000, 500)
        H.raises(function() big:add_(1) end, "add_", "overlap in memory")
        H.raises(function() big:mul_(ordo.ones(199, 1000)) end, "mul_", "overlap in memory")
    end)

    it("t[i] is row i (a view), or on a 1-dim tensor element i; negative from the end", function()
        local a = ordo.arange(1, 13):view(3, 4)
        local row = a[2]
        assert.same({5, 6, 7, 8}, row:totable())
        assert.same({9, 10, 11, 12}, a[-1]:totable())
        assert.equals(7, a[2][3])
        assert.equals(12, a[-1][-1])
        local i = ordo.tensor({4, 5}, "int64")
        assert.equals("number", type(i[2]))
        assert.equals(5, i[2])
        row:fill_(0) -- a view: the base sees it
        assert.same({0, 0, 0, 0}, a:totable()[2])
        local c = ordo.arange(24):view(2, 3, 4)
        assert.same({3, 4}, c[2]:shape())
        assert.same({3, 4}, c[1]:shape())
        assert.equals(23, c[2][3][4])
    end)

    it("t[i] = x fills row or element i with a number, or copies a tensor or table into it", function()
        local a = ordo.zeros(3, 4)
        a[1] = 7
        a[2] = ordo.tensor({1, 2, 3, 4})
        a[-1] = {5, 6, 7, 8}
        a[2][3] = 30
        a[3][-1] = -1
        assert.same({{7, 7, 7, 7}, {1, 2, 30, 4}, {5, 6, 7, -1}}, a:totable())
        a[1] = ordo.tensor(2) -- broadcast, as copy_
        assert.same({2, 2, 2, 2}, a:totable()[1])
        local u = ordo.zeros({3}, "uint8")
        u[2] = true
        assert.same({0, 1, 0}, u:totable())
        -- a table's leading dims of size 1 go as a tensor's (Torch's setitem): {5} into an element
        local v = ordo.zeros(3)
        v[2] = {5}
        v[{3}] = {{6}}
        a[1] = {{9, 8, 7, 6}}
        assert.same({0, 5, 6}, v:totable())
        assert.same({9, 8, 7, 6}, a:totable()[1])
        H.raises(function() v[1] = {{1, 2}} end, "t[i] = x: shape 2 cannot be broadcast to scalar")
        H.raises(function() v[1] = {"x"} end, "t[i] = x", "string")
    end)

    it("t[i] with a bad index or value raises naming the index and the shape; other keys are fields", function()
        local a = ordo.zeros(3, 4)
        H.raises(function() return a[4] end, "t[i]", "index 4", "3x4")
        H.raises(function() return a[0] end, "t[i]", "index 0", "3x4")
        H.raises(function() return a[-4] end, "t[i]", "index -4", "3x4")
        H.raises(function() return a[1.5] end, "t[i]", "integer", "1.5")
        H.raises(function() return ordo.tensor(3)[1] end, "t[i]", "0-dim", "item")
        H.raises(function() a[4] = 1 end, "t[i] = x", "index 4")
        H.raises(function() a[1] = "x" end, "t[i] = x", "string")
        H.raises(function() a[1] = ordo.zeros(5) end, "t[i] = x: shape 5 cannot be broadcast to 4")
        a[2] = ordo.ones({1, 1, 4}) -- leading dims of size 1 go, as Torch's setitem
        assert.same({1, 1, 1, 1}, a[2]:totable())
        a[2] = 0
        H.raises(function() a[1] = ordo.zeros(2, 4) end, "t[i] = x: shape 2x4 cannot be broadcast to 4")
        -- a number that does not fit the dtype, named as the assignment (it said fill_)
        local u = ordo.zeros({2, 2}, "uint8")
        H.raises(function() u[1] = 300 end, "t[i] = x: value 300 does not fit in uint8")
        H.raises(function() u[{1, 2}] = -1 end, "t[{...}] = x: value -1 does not fit in uint8")
        H.raises(function() ordo.zeros({2}, "int32")[1] = 0 / 0 end, "t[i] = x: value nan does not fit in int32")
        assert.same({{0, 0}, {0, 0}}, u:totable())
        H.raises(function() a[{2, {1, 2}}] = {1, 2, 3} end, "t[{...}] = x: shape 3 cannot be broadcast to 2")
        assert.same({{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}}, a:totable()) -- untouched by the failures
        assert.is_nil(a.no_such_field)
        a.note = "mine"
        assert.equals("mine", a.note)
        assert.equals("mine", rawget(a, "note"))
        assert.is_function(a.add_)
    end)

    it("t[{...}] indexes several dims: integers select, {} keeps a dim, {a, b} and {a} keep a range", function()
        local a = ordo.arange(1, 25):view(2, 3, 4)
        local ta = a:totable()
        -- against the plain Lua table, entry by entry
        local col = a[{{}, 2}]
        assert.same({2, 4}, col:shape())
        for i = 1, 2 do for k = 1, 4 do assert.equals(ta[i][2][k], col:totable()[i][k]) end end
        assert.equals(ta[2][3][4], a[{2, 3, 4}])
        assert.equals(ta[2][3][4], a[{-1, -1, -1}])
        assert.equals("number", type(a[{1, 1, 1}]))
        local r = a[{{1, 2}, {2, 3}, 2}]
        assert.same({2, 2}, r:shape())
        assert.same({{ta[1][2][2], ta[1][3][2]}, {ta[2][2][2], ta[2][3][2]}}, r:totable())
        assert.same({1, 3, 4}, a[{{2}}]:shape()) -- {a} keeps the dim
        assert.same({3, 4}, a[{2}]:shape())     -- a number drops it
        assert.same({2, 3, 4}, a[{}]:shape())
        assert.same({{ta[1][3][4]}, {ta[2][3][4]}}, a[{{}, -1, {-1}}]:totable())
        -- views: writing through one changes the base
        a[{{}, 2}]:fill_(0)
        assert.same({0, 0, 0, 0}, a:totable()[1][2])
    end)

    it("t[{...}] = x fills or copies into the indexed view", function()
        local a = ordo.zeros(3, 4)
        a[{{}, 1}] = 5
        a[{1, 4}] = 9
        a[{{2, 3}, {3, 4}}] = ordo.tensor({{1, 2}, {3, 4}})
        a[{3, {1, 2}}] = {7, 8}
        assert.same({{5, 0, 0, 9}, {5, 0, 1, 2}, {7, 8, 3, 4}}, a:totable())
    end)

    it("t[{...}] gives gradients back to the indexed elements", function()
        local w = ordo.rand({3, 4}, {dtype = "float64"}):requires_grad()
        local y = (w[{{}, 2}] * 3):sum() + w[{{1, 2}, {3, 4}}]:sum()
        y:backward()
        assert.same({{0, 3, 1, 1}, {0, 3, 1, 1}, {0, 3, 0, 0}}, w.grad:totable())
    end)

    it("t[{...}] with a bad key raises naming the entry, the dim and the shape", function()
        local a = ordo.zeros(3, 4)
        H.raises(function() return a[{4}] end, "t[{...}]", "index 4", "dim 1", "3x4")
        H.raises(function() return a[{1, -5}] end, "t[{...}]", "index -5", "dim 2", "3x4")
        H.raises(function() return a[{1, 2, 3}] end, "t[{...}]", "3 indices", "2 dims", "3x4")
        H.raises(function() return a[{{3, 1}}] end, "t[{...}]", "{3, 1}", "ends before it starts")
        H.raises(function() return a[{{1, 2, 1, 1}}] end, "t[{...}]", "{} or {first} or {first, last}", "4 entries")
        H.raises(function() return a[{{1, 3, 0}}] end, "t[{...}]", "step", "integer >= 1", "got 0")
        H.raises(function() return a[{{}, {1, 3, 1.5}}] end, "t[{...}]", "step", "dim 2", "1.5")
        H.raises(function() return a[{"x"}] end, "t[{...}]", "entry 1", "string")
        H.raises(function() return a[{1.5}] end, "t[{...}]", "integer", "1.5")
        H.raises(function() return a[{{1, 0.5}}] end, "t[{...}]", "last index", "0.5")
        H.raises(function() return a[{x = 1}] end, "t[{...}]", "list", "x")
        H.raises(function() a[{1, 9}] = 1 end, "t[{...}] = x", "index 9")
        H.raises(function() a[{1, 1}] = "x" end, "t[{...}] = x", "string")
        H.raises(function() a[{{}, 1}] = ordo.zeros(5) end, "t[{...}] = x: shape 5 cannot be broadcast to 3")
        assert.same({{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}}, a:totable()) -- untouched by the failures
    end)

    it("t[{...}] takes a step, {first, last, step}: a view of every step-th, as Torch's a:b:step", function()
        local x = ordo.arange(10)
        assert.same({0, 2, 4, 6, 8}, x[{{1, -1, 2}}]:totable())
        assert.same({1, 4, 7}, x[{{2, 9, 3}}]:totable())
        assert.same({2}, x[{{3, 3, 5}}]:totable())
        local m = ordo.arange(12):view(3, 4)
        assert.same({{0, 2}, {4, 6}, {8, 10}}, m[{{}, {1, 4, 2}}]:totable())
        m[{{1, 3, 2}, {2, 4, 2}}] = 0 -- written through the view
        assert.same({{0, 0, 2, 0}, {4, 5, 6, 7}, {8, 0, 10, 0}}, m:totable())
        local w = ordo.ones(6):requires_grad()
        w[{{1, 6, 2}}]:sum():backward()
        assert.same({1, 0, 1, 0, 1, 0}, w.grad:totable())
    end)

    it("t[{...}] with index tensors is Torch's advanced indexing, read and written", function()
        local L = function(v) return ordo.tensor(v, "int64") end
        local x = ordo.arange(24):view(2, 3, 4)
        -- Torch's x[[0, 1], [2, 0]]: (x[1, 3, :], x[2, 1, :]), the index dims in front
        assert.same({{8, 9, 10, 11}, {12, 13, 14, 15}}, x[{L{1, 2}, L{3, 1}}]:totable())
        -- adjacent index tensors after a kept dim stay in place: x[:, [0, 2], [1, 3]]
        assert.same({{1, 11}, {13, 23}}, x[{{}, L{1, 3}, L{2, 4}}]:totable())
        -- separated by a kept dim, the broadcast index dims go first: x[[0, 1], :, [0, 3]]
        assert.same({{0, 4, 8}, {15, 19, 23}}, x[{L{1, 2}, {}, L{1, 4}}]:totable())
        -- one tensor in the middle: x[:, [2, 0]] is 2x2x4
        local m = x[{{}, L{3, 1}}]
        assert.same({2, 2, 4}, m:shape())
        assert.same({{8, 9, 10, 11}, {0, 1, 2, 3}}, m:totable()[1])
        -- the indices broadcast together; an integer selects first (as Torch's, x[1, [0, 2]])
        assert.same({{0, 4, 8}, {12, 16, 20}}, x[{L{{1}, {2}}, L{1, 2, 3}, 1}]:totable())
        assert.same({{12, 13, 14, 15}, {20, 21, 22, 23}}, x[{2, L{1, 3}}]:totable())
        assert.same({4}, x[{ordo.tensor(2, "int64"), ordo.tensor(3, "int32")}]:shape())
        assert.same({2, 0, 4}, x[{{}, L{}}]:shape())
        -- gradients: a repeated place gets each one
        local w = ordo.ones(3, 3):requires_grad()
        w[{L{1, 1, 3}, L{2, 2, 1}}]:sum():backward()
        assert.same({{0, 2, 0}, {0, 0, 0}, {1, 0, 0}}, w.grad:totable())
        -- writes: values broadcast to the read's shape, through views to the base
        local y = ordo.zeros(2, 3, 4)
        y[{{}, L{1, 3}, L{2, 4}}] = ordo.tensor({{1, 2}, {3, 4}})
        assert.same({{1, 2}, {3, 4}}, y[{{}, L{1, 3}, L{2, 4}}]:totable())
        assert.equals(10, y:sum():item())
        y[{L{1, 2}, {}, L{1, 4}}] = ordo.tensor({{1, 2, 3}, {4, 5, 6}})
        assert.same({{1, 2, 3}, {4, 5, 6}}, y[{L{1, 2}, {}, L{1, 4}}]:totable())
        local z = ordo.zeros(2, 3)
        z[{{2}, L{1, 3}}] = 9
        z[{{}, L{2}}] = ordo.tensor({{7}, {8}})
        assert.same({{0, 7, 0}, {9, 8, 9}}, z:totable())
        local b = ordo.zeros(3, 3)
        b:t()[{L{1, 2}, L{3, 3}}] = 1
        assert.same({{0, 0, 0}, {0, 0, 0}, {1, 1, 0}}, b:totable())
        -- bad indices raise naming the entry; the data stays as it was
        H.raises(function() return x[{L{1, 2}, L{1, 4}}]:totable() end, "t[{...}] (entry 2)", "value 4",
                 "outside [1, 3]")
        pcall(ordo.engine.wait_for_all)
        -- (alone, it said index_select's "dim 1 of size 3", not the user's dim 2)
        H.raises(function() return x[{{}, L{4}}]:totable() end, "t[{...}] (entry 2)", "value 4", "outside [1, 3]")
        pcall(ordo.engine.wait_for_all)
        H.raises(function() z[{L{1}, L{4}}] = 5; return z:totable() end, "t[{...}] = x (entry 2)",
                 "value 4", "outside [1, 3]")
        pcall(ordo.engine.wait_for_all)
        H.raises(function() y[{{}, L{1}, L{5}}] = 5; return y:totable() end, "t[{...}] = x (entry 3)", "value 5",
                 "outside [1, 4]")
        pcall(ordo.engine.wait_for_all)
        assert.same({{0, 7, 0}, {9, 8, 9}}, z:totable())
        H.raises(function() y[{{}, L{1, 3}, L{2, 4}}] = ordo.tensor({1, 2, 3}) end, "t[{...}] = x", "expand")
        H.raises(function() y[{{}, L{1}}] = {1, 2} end, "t[{...}] = x", "number or a tensor", "table")
        -- a uint8 mask entry indexes the dims of its shape (its nonzero positions), as Torch's x[m, 1:3]
        local m2 = ordo.tensor({{1, 0, 1}, {0, 1, 0}}, "uint8")
        assert.same({{1, 2}, {9, 10}, {17, 18}}, x[{m2, {2, 3}}]:totable())
        assert.same({{0, 8}, {12, 20}}, x[{{}, ordo.tensor({1, 0, 1}, "uint8"), 1}]:totable())
        local y2 = x:clone()
        y2[{m2, {2, 3}}] = 0
        assert.same({{0, 0, 0, 3}, {4, 5, 6, 7}, {8, 0, 0, 11}}, y2:totable()[1])
        assert.same({{12, 13, 14, 15}, {16, 0, 0, 19}, {20, 21, 22, 23}}, y2:totable()[2])
        assert.same({1, 3, 4}, x[{ordo.tensor({0, 1}, "uint8")}]:shape())
        H.raises(function() return x[{ordo.tensor({1, 0, 1}, "uint8")}] end, "t[{...}]", "mask at entry 1", "shape 3",
                 "2x3x4")
        H.raises(function() return x[{{}, ordo.ones({3, 5}, "uint8")}] end, "t[{...}]", "mask at entry 2", "3x5")
        H.raises(function() return x[{ordo.tensor(1, "uint8")}] end, "t[{...}]", "entry 1", "0-dim mask")
        H.raises(function() return x[{ordo.tensor({1.5})}] end, "t[{...}]", "entry 1", "float32")
        local v = ordo.zeros(3, 3):requires_grad()
        H.raises(function() v[{L{1}, L{1}}] = 1 end, "t[{...}] = x", "requires a gradient", "index_put")
    end)

    it("the base stays alive while a view does", function()
        local v
        do
            local a = ordo.arange(10)
            v = a:narrow(1, 5, 3)
        end
        collectgarbage()
        collectgarbage()
        assert.same({4, 5, 6}, v:totable())
    end)

    it("Torch's t.T, t.mT, t.H, t.mH: transposing views as fields, with gradients", function()
        local a = ordo.arange(6):view(2, 3)
        assert.same({{0, 3}, {1, 4}, {2, 5}}, a.T:totable())
        assert.same(a.T:totable(), a.H:totable())
        assert.same(a.T:totable(), a.mT:totable())
        a.T[1][2] = 9 -- a view: writes reach a
        assert.equals(9, a[2][1])
        local b = ordo.zeros(2, 3, 4)
        assert.same({4, 3, 2}, b.T:shape())
        assert.same({2, 4, 3}, b.mT:shape())
        assert.same({2, 4, 3}, b.mH:shape())
        local v = ordo.zeros(3)
        assert.equals(v, v.T) -- below 2 dims: t itself
        H.raises(function() return v.mT end, "t.mT", "at least 2 dims", "shape 3")
        H.raises(function() return ordo.tensor(1).mH end, "t.mH")
        local w = ordo.tensor({{1, 2, 3}, {4, 5, 6}}, {dtype = "float64", requires_grad = true})
        local m = ordo.tensor({{1, 0}, {0, 2}, {1, 1}}, "float64")
        ;(w.T * m):sum():backward()
        assert.same(m.T:totable(), w.grad:totable())
        assert.is_nil(a.other) -- other names are still fields not set
    end)
end)
