-- Every documented tensor op across every dtype, systematically: each
-- binary op on every pair of dtypes (tensors, numbers on either side, 0-dim
-- tensors), each unary op and reduction on each dtype, every cast, the
-- in-place ops that cannot hold their result, and odd scalars.  Checked:
-- the result dtype (README "Type promotion"), the values against a float64
-- reference computed here (integers wrap as in C), and that an op refusing
-- a dtype or a value says so naming the op.
local ordo = require "ordo"
local ffi = require "ffi"
local H = require "support.helpers"

local DTYPES = {"float32", "float64", "int32", "int64", "uint8"}
local RANK = {uint8 = 0, int32 = 1, int64 = 2, float32 = 3, float64 = 4}
local ISFLOAT = {float32 = true, float64 = true}
local floor, huge, abs = math.floor, math.huge, math.abs
local nan = 0 / 0

local function promote(a, b) return RANK[a] >= RANK[b] and a or b end
local function trunc(x) return x >= 0 and floor(x) or -floor(-x) end

local f32 = ffi.new("float[1]")
local function tof32(x)
    f32[0] = x
    return f32[0]
end

local BITS = {int32 = 32, int64 = 64, uint8 = 8}
-- x (an integer-valued double, or any double for floats) stored in dt:
-- float32 rounding, integers wrapped as in C
local function store(x, dt)
    if dt == "float64" then return x end
    if dt == "float32" then return tof32(x) end
    local m = 2 ^ BITS[dt]
    local lo = dt == "uint8" and 0 or -m / 2
    if x >= lo and x < lo + m then return x end
    x = x % m
    if x >= lo + m then x = x - m end
    return x
end

local function same(got, want, dt, tol)
    if got == want then return true end
    if got ~= got and want ~= want then return true end
    if ISFLOAT[dt] then
        tol = tol or (dt == "float32" and 2e-6 or 1e-13)
        return abs(got - want) <= tol * math.max(1, abs(want))
    end
    return false
end

local function check_values(what, t, want, dt, tol)
    local got = t:dim() == 0 and {t:item()} or t:totable()
    assert.equals(#want, #got, what)
    for i = 1, #want do
        if not same(got[i], want[i], dt, tol) then
            error(("%s: element %d is %s, expected %s"):format(what, i, tostring(got[i]), tostring(want[i])), 2)
        end
    end
end

-- values of each dtype: negatives, zero, ties, the range's ends for uint8
local DATA = {
    float32 = {-2.5, 0, 1, 3, -3, 7.25}, float64 = {-2.5, 0, 1, 3, -3, 7.25},
    int32 = {-7, 0, 1, 3, -3, 7}, int64 = {-7, 0, 1, 3, -3, 7}, uint8 = {0, 1, 3, 200, 255, 7},
}
local function reversed(t)
    local r = {}
    for i = 1, #t do r[i] = t[#t + 1 - i] end
    return r
end
local function no_zeros(t)
    local r = {}
    for i = 1, #t do r[i] = t[i] == 0 and 2 or t[i] end
    return r
end

local function pyrem(a, b)
    local r = math.fmod(a, b)
    if r ~= 0 and (r < 0) ~= (b < 0) then r = r + b end
    return r
end

-- kind: "same" (the promoted dtype), "float" (integers give float32),
-- "cmp" (uint8); int_div: an integer divisor must not be 0
local BINARY = {
    {"add", function(a, b) return a + b end, "same"},
    {"sub", function(a, b) return a - b end, "same"},
    {"mul", function(a, b) return a * b end, "same"},
    {"div", function(a, b) return a / b end, "float"},
    {"pow", function(a, b) return a ^ b end, "float"},
    {"maximum", function(a, b) return math.max(a, b) end, "same"},
    {"minimum", function(a, b) return math.min(a, b) end, "same"},
    {"fmod", math.fmod, "same", true},
    {"remainder", pyrem, "same", true},
    {"floor_divide", function(a, b) return floor(a / b) end, "same", true},
    {"eq", function(a, b) return a == b and 1 or 0 end, "cmp"},
    {"ne", function(a, b) return a ~= b and 1 or 0 end, "cmp"},
    {"lt", function(a, b) return a < b and 1 or 0 end, "cmp"},
    {"le", function(a, b) return a <= b and 1 or 0 end, "cmp"},
    {"gt", function(a, b) return a > b and 1 or 0 end, "cmp"},
    {"ge", function(a, b) return a >= b and 1 or 0 end, "cmp"},
}
local OPERATOR = {
    add = function(a, b) return a + b end, sub = function(a, b) return a - b end,
    mul = function(a, b) return a * b end, div = function(a, b) return a / b end,
    pow = function(a, b) return a ^ b end, remainder = function(a, b) return a % b end,
}

local function result_dtype(kind, dt)
    if kind == "cmp" then return "uint8" end
    if kind == "float" and not ISFLOAT[dt] then return "float32" end
    return dt
end

-- the reference: operands in the dtype the op computes in, the result stored in its dtype
local function reference(f, kind, av, bv, cdt, rdt)
    local want = {}
    for i = 1, #av do
        local a, b = store(av[i], cdt), store(type(bv) == "table" and bv[i] or bv, cdt)
        if kind == "float" and cdt == "float32" then a, b = tof32(a), tof32(b) end
        local r = f(a, b)
        want[i] = kind == "cmp" and r or store(r, rdt)
    end
    return want
end

describe("every op on every dtype", function()
    it("binary ops on every pair of dtypes: the promoted dtype and the values", function()
        for _, op in ipairs(BINARY) do
            local name, f, kind, int_div = op[1], op[2], op[3], op[4]
            for _, da in ipairs(DTYPES) do
                for _, db in ipairs(DTYPES) do
                    local cdt = promote(da, db)
                    local rdt = result_dtype(kind, cdt)
                    local av, bv = DATA[da], reversed(DATA[db])
                    if (int_div and not ISFLOAT[cdt]) or (kind == "float" and not ISFLOAT[cdt]) then
                        bv = no_zeros(bv)
                    end
                    local what = ("%s(%s, %s)"):format(name, da, db)
                    local a, b = ordo.tensor(av, da), ordo.tensor(bv, db)
                    local r = a[name](a, b)
                    assert.equals(rdt, r:dtype(), what)
                    check_values(what, r, reference(f, kind, av, bv, cdt, rdt), rdt)
                end
            end
        end
    end)

    it("binary ops with a number on either side: integers keep the tensor's dtype, fractions make float32", function()
        for _, op in ipairs(BINARY) do
            local name, f, kind, int_div = op[1], op[2], op[3], op[4]
            for _, dt in ipairs(DTYPES) do
                for _, s in ipairs({2, 3, 0, 2.5}) do
                    local cdt = (not ISFLOAT[dt] and s ~= floor(s)) and "float32" or dt
                    local rdt = result_dtype(kind, cdt)
                    local zero_div = s == 0 and not ISFLOAT[cdt] and (int_div or kind == "float")
                    local what = ("%s(%s, %s)"):format(name, dt, tostring(s))
                    local t = ordo.tensor(DATA[dt], dt)
                    if zero_div and int_div then
                        H.raises(function() return t[name](t, s) end, name .. ": integer division by zero")
                    elseif not zero_div then
                        local r = t[name](t, s)
                        assert.equals(rdt, r:dtype(), what)
                        check_values(what, r, reference(f, kind, DATA[dt], s, cdt, rdt), rdt)
                    end
                    -- a number first, through the operators
                    if OPERATOR[name] then
                        local bv = (int_div or kind == "float") and no_zeros(DATA[dt]) or DATA[dt]
                        local sv = {}
                        for i = 1, #bv do sv[i] = s end
                        what = ("%s %s %s"):format(tostring(s), name, dt)
                        local r = OPERATOR[name](s, ordo.tensor(bv, dt))
                        assert.equals(rdt, r:dtype(), what)
                        check_values(what, r, reference(f, kind, sv, bv, cdt, rdt), rdt)
                    end
                end
            end
        end
    end)

    it("a 0-dim tensor raises the dtype only across kinds; two 0-dim tensors promote", function()
        for _, d1 in ipairs(DTYPES) do
            for _, d2 in ipairs(DTYPES) do
                local want = d1
                if ISFLOAT[d2] and not ISFLOAT[d1] then want = d2 end
                local t, z = ordo.tensor({1, 2}, d1), ordo.tensor(3, d2)
                assert.equals(want, (t + z):dtype(), d1 .. " + 0-dim " .. d2)
                assert.equals(want, (z * t):dtype(), "0-dim " .. d2 .. " * " .. d1)
                assert.equals(promote(d1, d2), (ordo.tensor(1, d1) + z):dtype(), "0-dim + 0-dim")
                assert.same({4, 5}, (t + z):totable())
            end
        end
    end)

    it("integer results wrap as in C; int64 keeps every bit past 2^53", function()
        assert.same({-2147483648}, (ordo.tensor({2147483647}, "int32") + 1):totable())
        assert.same({44, 0}, (ordo.tensor({100, 128}, "uint8") * 3 - ordo.tensor({0, 128}, "uint8")):totable())
        assert.same({252}, (ordo.tensor({1}, "uint8") - 5):totable())
        assert.same({-2147483648}, ordo.tensor({-2147483648}, "int32"):abs():totable())
        assert.same({-2147483648}, ordo.tensor({-2147483648}, "int32"):div(-1, "trunc"):totable())
        assert.same({0}, (ordo.tensor({-2147483648}, "int32") % -1):totable())
        -- 2^62 + 1 is no double: its bits are checked through arithmetic on the tensor
        local B = ordo.full({1}, 2 ^ 62, "int64")
        local v = ordo.cat({B + 3, B + 1, B + 2, B + 1, B})
        assert.same({3, 1, 2, 1, 0}, (v - B):totable())
        assert.same({0, 1, 0, 1, 0}, v:eq(B + 1):totable())
        assert.same({5, 2, 4, 3, 1}, select(2, v:sort()):totable()) -- stable among the equal B + 1
        assert.equals(1, v:argmax():item())
        assert.same({0, 1, 2, 3}, (v:unique() - B):totable())
        assert.equals(7, (v:sum() - B * 5):item())
        assert.same({0, 5, 6, 5, 4}, v:remainder(ordo.tensor({7}, "int64")):totable()) -- 2^62 mod 7 is 4
        assert.same({3, 1, 2, 1, 0}, (v:floor_divide(1) - B):totable())
    end)

    it("unary ops: math functions make integers float32, the others keep the dtype; refusals name op and dtype", function()
        local m = math
        local function rint(x) -- halves to even
            local f = floor(x)
            if x - f ~= 0.5 then return floor(x + 0.5) end
            return f % 2 == 0 and f or f + 1
        end
        local function erf(x) -- Abramowitz and Stegun 7.1.26: within 1.5e-7
            local t = 1 / (1 + 0.3275911 * abs(x))
            local y = 1 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t +
                           0.254829592) * t * m.exp(-x * x)
            return x < 0 and -y or y
        end
        local LOOSE = 1e-6 -- the references below are not libm's to the last bit
        local UNARY = {
            neg = {function(x) return -x end}, abs = {abs}, relu = {function(x) return x > 0 and x or 0 end},
            sign = {function(x) return x > 0 and 1 or x < 0 and -1 or 0 end}, square = {function(x) return x * x end},
            floor = {m.floor}, ceil = {m.ceil}, round = {rint}, trunc = {trunc},
            exp = {m.exp, true}, expm1 = {function(x) return m.exp(x) - 1 end, true, LOOSE},
            log = {m.log, true}, log1p = {function(x) return m.log(1 + x) end, true, LOOSE},
            sqrt = {m.sqrt, true}, rsqrt = {function(x) return 1 / m.sqrt(x) end, true},
            reciprocal = {function(x) return 1 / x end, true}, tanh = {m.tanh, true},
            sigmoid = {function(x) return 1 / (1 + m.exp(-x)) end, true}, sin = {m.sin, true}, cos = {m.cos, true},
            tan = {m.tan, true}, asin = {m.asin, true}, acos = {m.acos, true}, atan = {m.atan, true},
            sinh = {m.sinh, true}, cosh = {m.cosh, true},
            asinh = {function(x) return x < 0 and -m.log(-x + m.sqrt(x * x + 1)) or m.log(x + m.sqrt(x * x + 1)) end,
                     true, LOOSE},
            acosh = {function(x) return m.log(x + m.sqrt(x * x - 1)) end, true, LOOSE},
            atanh = {function(x) return 0.5 * m.log((1 + x) / (1 - x)) end, true, LOOSE},
            erf = {erf, true, LOOSE}, erfc = {function(x) return 1 - erf(x) end, true, LOOSE},
            log2 = {function(x) return m.log(x) / m.log(2) end, true}, log10 = {m.log10, true},
            isnan = {function(x) return x ~= x and 1 or 0 end, "cmp"},
            isinf = {function(x) return (x == huge or x == -huge) and 1 or 0 end, "cmp"},
            isfinite = {function(x) return (x == x and x ~= huge and x ~= -huge) and 1 or 0 end, "cmp"},
        }
        local vals = {float32 = {-2.5, 0, 0.5, 3, -0.75, 7.25}, float64 = {-2.5, 0, 0.5, 3, -0.75, 7.25},
                      int32 = {-7, 0, 1, 3, -3, 7}, int64 = {-7, 0, 1, 3, -3, 7}, uint8 = {0, 1, 3, 200, 255, 7}}
        for name, spec in pairs(UNARY) do
            local f, mathfn, tol = spec[1], spec[2], spec[3]
            for _, dt in ipairs(DTYPES) do
                local rdt = mathfn == "cmp" and "uint8" or (mathfn and not ISFLOAT[dt]) and "float32" or dt
                local t = ordo.tensor(vals[dt], dt)
                local what = name .. " of " .. dt
                if name == "neg" and dt == "uint8" then
                    H.raises(function() return t:neg() end, "neg: dtype uint8 not supported")
                else
                    local want = {}
                    for i, x in ipairs(vals[dt]) do
                        local r = f(dt == "float32" and tof32(x) or x)
                        want[i] = mathfn == "cmp" and r or store(r, rdt)
                    end
                    local r = t[name](t)
                    assert.equals(rdt, r:dtype(), what)
                    check_values(what, r, want, rdt, tol)
                    local inplace = ordo.Tensor[name .. "_"]
                    if inplace and rdt == dt then
                        local c = t:clone()
                        assert.equals(c, inplace(c))
                        check_values(what .. " in place", c, want, rdt, tol)
                    elseif inplace then
                        -- an integer tensor cannot hold the float result
                        H.raises(function() return inplace(t:clone()) end, name .. "_", dt)
                    end
                end
            end
        end
    end)

    it("reductions: the dtype of each (sum and prod of integers in int64, mean and var in float32), ties", function()
        for _, dt in ipairs(DTYPES) do
            local t = ordo.tensor({{3, 1, 3}, {0, 5, 5}}, dt)
            local int = not ISFLOAT[dt]
            local acc = int and "int64" or dt
            local fl = int and "float32" or dt
            local function is(want_dt, want, r, what)
                assert.equals(want_dt, r:dtype(), what .. " of " .. dt)
                check_values(what .. " of " .. dt, r, want, want_dt)
            end
            is(acc, {17}, t:sum(), "sum")
            is(acc, {7, 10}, t:sum(2), "sum(2)")
            is(acc, {0}, t:prod(), "prod")
            is(acc, {9, 0}, t:prod(2), "prod(2)")
            is(acc, {3, 4, 7, 0, 5, 10}, t:cumsum(2):view(-1), "cumsum")
            is(acc, {3, 3, 9, 0, 0, 0}, t:cumprod(2):view(-1), "cumprod")
            is(acc, {8}, t:trace(), "trace")
            is(fl, {17 / 6}, t:mean(), "mean")
            is(fl, {1.5, 3, 4}, t:mean(1), "mean(1)")
            is(fl, {0.8888888888888888, 5.555555555555555}, t:var(2, false, 0), "var")
            is(fl, {math.sqrt(69)}, t:norm(), "norm")
            is(dt, {5}, t:max(), "max")
            is(dt, {0}, t:amin(), "amin")
            local v, i = t:max(2)
            is(dt, {3, 5}, v, "max(2)")
            is("int64", {1, 2}, i, "max(2) indices") -- the first of equal values
            is("int64", {2, 1}, t:argmin(2), "argmin(2)")
            is("int64", {5}, t:argmax(), "argmax")
            v, i = t:sort(2)
            is(dt, {1, 3, 3, 0, 5, 5}, v:view(-1), "sort")
            is("int64", {2, 1, 3, 1, 2, 3}, i:view(-1), "sort indices") -- stable
            v, i = t:sort(2, true)
            is("int64", {1, 3, 2, 2, 3, 1}, i:view(-1), "sort descending indices")
            v, i = t:topk(2, 2)
            is(dt, {3, 3, 5, 5}, v:view(-1), "topk")
            is(dt, {3}, t:median(), "median")
            is(dt, {0, 1, 3, 5}, t:unique(), "unique")
            is("uint8", {1, 1}, t:any(2), "any(2)")
            assert.is_false(t:all())
            is(fl, {0.46831053083348, 0.063378938333038, 0.46831053083348}, t:softmax(2)[1], "softmax")
        end
    end)

    it("reductions over NaN: max, min, sum, median propagate it; sort and topk take it as the largest", function()
        for _, dt in ipairs({"float32", "float64"}) do
            for _, n in ipairs({5, 40, 300000}) do
                for _, pos in ipairs({1, 3, n}) do
                    local t = ordo.arange(n, {dtype = dt})
                    t[pos] = nan
                    local what = ("%s, %d elements, NaN at %d"):format(dt, n, pos)
                    for _, name in ipairs({"max", "min", "amax", "amin", "sum", "mean", "prod", "median", "logsumexp",
                                           "norm"}) do
                        local r = t[name](t):item()
                        assert.is_true(r ~= r, name .. ": " .. what)
                    end
                    assert.equals(pos, t:argmax():item(), what)
                    assert.equals(pos, t:argmin():item(), what)
                    local v, i = t:max(1)
                    assert.is_true(v:item() ~= v:item(), what)
                    assert.equals(pos, i:item(), what)
                    if n < 1000 then
                        local s = t:sort():totable()
                        assert.is_true(s[n] ~= s[n], "sort puts NaN last: " .. what)
                        local d = t:sort(1, true):totable()
                        assert.is_true(d[1] ~= d[1], "descending puts it first: " .. what)
                        local k = t:topk(1):item()
                        assert.is_true(k ~= k, "topk: " .. what)
                        assert.equals(pos == 1 and 1 or 0, t:topk(1, 1, false):item(), "topk smallest: " .. what)
                    end
                end
            end
        end
        -- along a dim, each line on its own
        local m = ordo.tensor({{1, nan, 3}, {4, 5, 6}})
        local v, i = m:max(2)
        assert.is_true(v[1] ~= v[1])
        assert.same({2, 3}, i:totable())
        local row = m:sort(2)[1]:totable()
        assert.same({1, 3}, {row[1], row[2]})
        assert.is_true(row[3] ~= row[3])
    end)

    it("casts between every pair: floats truncate toward zero and saturate (NaN gives 0), integers wrap", function()
        local special = {nan, huge, -huge, -1.5, -0.5, 0.5, 1.5, 2.5, 127.9, 255.5, 256, 300, -129, 2 ^ 31 - 1, 2 ^ 31,
                         -2 ^ 31, -2 ^ 31 - 1, 2 ^ 53, 2 ^ 63, -2 ^ 63, 1e30, -1e30}
        local LIMIT = {int32 = {-2 ^ 31, 2 ^ 31 - 1}, int64 = {-2 ^ 63, 2 ^ 63}, uint8 = {0, 255}}
        local function from_float(x, dt)
            if ISFLOAT[dt] then return store(x, dt) end
            if x ~= x then return 0 end
            local l = LIMIT[dt]
            return math.max(l[1], math.min(l[2], trunc(x)))
        end
        for _, from in ipairs(DTYPES) do
            local src = {}
            for _, x in ipairs(special) do
                if ISFLOAT[from] then
                    src[#src + 1] = store(x, from)
                else
                    local l = LIMIT[from]
                    if x == x and x == trunc(x) and x >= l[1] and x <= l[2] and x ~= 2 ^ 63 then src[#src + 1] = x end
                end
            end
            local t = ordo.tensor(src, from)
            for _, to in ipairs(DTYPES) do
                local want = {}
                for i, x in ipairs(src) do want[i] = ISFLOAT[from] and from_float(x, to) or store(x, to) end
                local what = from .. " to " .. to
                local r = t:to(to)
                assert.equals(to, r:dtype(), what)
                check_values(what, r, want, to)
                local c = ordo.zeros({#src}, to)
                c:copy_(t)
                check_values(what .. " by copy_", c, want, to)
            end
        end
        -- the named casts
        local x = ordo.tensor({-1.5, 300, nan})
        assert.same({0, 255, 0}, x:byte():totable())
        assert.same({-1, 300, 0}, x:int():totable())
        assert.same({-1, 300, 0}, x:long():totable())
        assert.same({255, 44}, ordo.tensor({-1, 300}, "int32"):byte():totable())
        assert.equals("float64", x:double():dtype())
        assert.equals("float32", ordo.tensor({1}, "int64"):float():dtype())
    end)

    it("in place: a float result into an integer tensor is refused naming the op; integer operands are cast", function()
        local ops = {"add_", "sub_", "mul_", "div_", "pow_", "maximum_", "minimum_", "fmod_", "remainder_",
                     "floor_divide_"}
        local float_result = {div_ = true, pow_ = true}
        for _, op in ipairs(ops) do
            for _, da in ipairs(DTYPES) do
                for _, db in ipairs(DTYPES) do
                    local t = ordo.tensor({6, 4}, da)
                    local refuse = not ISFLOAT[da] and (ISFLOAT[db] or float_result[op])
                    if refuse then
                        H.raises(function() return t[op](t, ordo.tensor({2, 2}, db)) end, op,
                                 "can't be cast to the in-place tensor's dtype " .. da)
                        assert.same({6, 4}, t:totable())
                    else
                        assert.equals(t, t[op](t, ordo.tensor({2, 2}, db)))
                        assert.equals(da, t:dtype())
                    end
                end
                local t = ordo.tensor({6, 4}, da)
                if not ISFLOAT[da] then
                    H.raises(function() return t[op](t, 0.5) end, op, "can't be cast")
                    assert.same({6, 4}, t:totable())
                end
            end
        end
        local i = ordo.tensor({1, 2}, "int32")
        H.raises(function() return i:clamp_(0.5, 3) end, "clamp_", "int32")
        H.raises(function() return i:lerp_(ordo.tensor({3, 4}, "int32"), 0.5) end, "lerp_", "int32")
        H.raises(function() return i:exp_() end, "exp_", "int32")
        H.raises(function() return i:scatter_add_(1, ordo.tensor({1}, "int64"), ordo.tensor({0.5})) end,
                 "scatter_add_", "src is float32")
        assert.same({1, 2}, i:totable())
        -- copy_ converts any dtype: it is a cast, not arithmetic
        assert.same({1, -2}, i:copy_(ordo.tensor({1.9, -2.9})):totable())
    end)

    it("odd numbers: NaN and inf make integers float32; an integer that does not fit is refused naming the op", function()
        for _, dt in ipairs({"int32", "int64", "uint8"}) do
            local t = ordo.tensor({1, 2}, dt)
            for _, op in ipairs({"add", "sub", "mul", "maximum", "minimum"}) do
                local r = t[op](t, nan)
                assert.equals("float32", r:dtype(), op)
                assert.is_true(r[1] ~= r[1], op)
                assert.equals("float32", t[op](t, huge):dtype(), op)
                H.raises(function() return t[op](t, 2 ^ 64) end, op .. ": value", "does not fit in " .. dt)
                H.raises(function() return t[op .. "_"](t, nan) end, op .. "_")
            end
            assert.same({0, 0}, t:eq(nan):totable())
            assert.same({1, 1}, t:ne(nan):totable())
            assert.same({1, 1}, t:lt(huge):totable())
            assert.same({1, 1}, t:gt(-1e300):totable()) -- compared as numbers, not wrapped into the dtype
            assert.same({0, 0}, t:gt(2 ^ 64):totable())
            H.raises(function() return t:fill_(nan) end, "fill_: value nan does not fit in " .. dt)
            H.raises(function() return t:fill_(2 ^ 64) end, "fill_", "does not fit in " .. dt)
            H.raises(function() return ordo.full({1}, -huge, dt) end, "full", "does not fit in " .. dt)
            H.raises(function() return t:masked_fill(t:gt(1), nan) end, "masked_fill", "does not fit")
        end
        -- int64 takes integers to 2^63 exclusive; a number past 2^53 is the double it is
        assert.same({2 ^ 62 + 1}, (ordo.tensor({1}, "int64") + 2 ^ 62):totable())
        H.raises(function() return ordo.tensor({1}, "int64") + 2 ^ 63 end, "add: value", "int64")
        -- 2^63 - 1 is 2^63 as a Lua number: the message says so
        H.raises(function() return ordo.full({1}, 2 ^ 63 - 1, "int64") end, "full: value", "does not fit in int64",
                 "2^63 - 1 rounds to 2^63", "2^63 - 1024")
        assert.same({2 ^ 63 - 1024}, ordo.full({1}, 2 ^ 63 - 1024, "int64"):totable())
        assert.same({-2 ^ 63}, ordo.full({1}, -2 ^ 63, "int64"):totable())
        -- a fraction truncates toward zero where a number is stored into an integer tensor
        assert.same({2, -2}, ordo.tensor({2.7, -2.7}, "int32"):totable())
        assert.same({2, 2}, ordo.zeros({2}, "int32"):fill_(2.9):totable())
        -- float32 takes any number: past its range, inf
        assert.same({huge}, ordo.tensor({1e300}):totable())
        assert.same({-huge}, (ordo.tensor({1}) - 1e300):totable())
    end)

    it("integer division by zero: a number refused at the call, a tensor at the wait, naming the op", function()
        for _, dt in ipairs({"int32", "int64", "uint8"}) do
            local t = ordo.tensor({5, 6}, dt)
            for _, op in ipairs({"fmod", "remainder", "floor_divide"}) do
                H.raises(function() return t[op](t, 0) end, op .. ": integer division by zero")
                local r = t[op](t, ordo.tensor({1, 0}, dt))
                H.raises(function() return r:totable() end, op, "integer division by zero")
            end
            H.raises(function() return t:div(0, "trunc") end, "div: integer division by zero")
            assert.same({5, 6}, t:totable())
            -- true division gives floats: inf, as Torch
            assert.same({huge, huge}, (t / 0):totable())
        end
        ordo.engine.wait_for_all()
    end)
end)

describe("set_default_dtype / get_default_dtype", function()
    local nn = ordo.nn
    after_each(function() ordo.set_default_dtype("float32") end)

    it("is float32 to begin with and float64 once set, for every maker without a dtype", function()
        assert.equal("float32", ordo.get_default_dtype())
        assert.equal("float32", ordo.zeros(2):dtype())
        ordo.set_default_dtype("float64")
        assert.equal("float64", ordo.get_default_dtype())
        for _, t in ipairs({ordo.tensor({1, 2}), ordo.tensor(0.1), ordo.zeros(2), ordo.ones(2), ordo.empty(2),
                            ordo.full({2}, 3), ordo.rand(2), ordo.randn(2), ordo.arange(0.5, 3), ordo.arange(4),
                            ordo.linspace(0, 1, 3), ordo.logspace(0, 1, 3), ordo.eye(2),
                            ordo.normal(ordo.zeros(2, "int64"), 1)}) do
            assert.equal("float64", t:dtype())
        end
        -- a Lua number kept at double precision: 0.1 is not rounded to float32
        assert.equal(0.1, ordo.tensor({0.1}):totable()[1])
        -- integer inputs made float: the default float dtype (Torch's)
        local i = ordo.tensor({1, 2}, "int64")
        assert.equal("float64", i:mean():dtype())
        assert.equal("float64", (i + 0.5):dtype())
        assert.equal("float64", i:exp():dtype())
    end)

    it("makes integer inputs of the derived float ops the default dtype", function()
        ordo.set_default_dtype("float64")
        local i = ordo.tensor({1, 2}, "int64")
        local j = ordo.tensor({3, 5}, "int64")
        local m = ordo.tensor({{1, 2}, {3, 5}}, "int64")
        local results = {
            norm = i:norm(), logsumexp = i:logsumexp(1), lerp = i:lerp(j, 0.5),
            cdist = ordo.cdist(m, m), dist = i:dist(j), logcumsumexp = i:logcumsumexp(1),
            deg2rad = i:deg2rad(), rad2deg = i:rad2deg(), atan2 = ordo.atan2(i, j),
            hypot = ordo.hypot(i, j), logaddexp = ordo.logaddexp(i, j), logit = (i - 1):logit(),
            exp2 = i:exp2(), sinc = i:sinc(),
        }
        for name, r in pairs(results) do assert.equal("float64", r:dtype(), name) end
        ordo.set_default_dtype("float32")
        assert.equal("float32", i:lerp(j, 0.5):dtype())
        assert.equal("float32", ordo.hypot(i, j):dtype())
    end)

    it("leaves integer makers and given dtypes alone", function()
        ordo.set_default_dtype("float64")
        assert.equal("int64", ordo.randint(0, 3, {2}):dtype())
        assert.equal("int64", ordo.randperm(3):dtype())
        assert.equal("int64", ordo.arange(4, "int64"):dtype())
        assert.same({0, 1, 2, 3}, ordo.arange(4, "int64"):totable())
        assert.equal("float32", ordo.zeros(2, "float32"):dtype())
        assert.equal("int32", (ordo.tensor({1}, "int32") + 1):dtype())
        local f = ordo.zeros(2, "float32")
        assert.equal("float32", (f + 1.5):dtype()) -- a float32 tensor stays float32
    end)

    it("makes nn layers' parameters and float buffers in the default dtype", function()
        ordo.set_default_dtype("float64")
        assert.equal("float64", nn.Linear(2, 3).weight:dtype())
        assert.equal("float64", nn.Linear(2, 3).bias:dtype())
        assert.equal("float64", nn.Conv2d(1, 2, 3).weight:dtype())
        assert.equal("float64", nn.LSTM(2, 3).weight_ih_l0:dtype())
        assert.equal("float64", nn.Embedding(4, 2).weight:dtype())
        assert.equal("float64", nn.BatchNorm1d(3).running_mean:dtype())
        assert.equal("float64", nn.MultiheadAttention(4, 2).out_proj.weight:dtype())
        assert.equal("float32", nn.Linear(2, 3, {dtype = "float32"}).weight:dtype())
        -- losses given integer tensors compute in the default dtype
        local i = ordo.tensor({1, 0}, "int64")
        assert.equal("float64", nn.functional.binary_cross_entropy(i, i):dtype())
        assert.equal("float64", nn.functional.kl_div(i, i):dtype())
        local F = nn.functional
        assert.equal("float64", F.mse_loss(i, i):dtype())
        assert.equal("float64", F.l1_loss(i, i):dtype())
        assert.equal("float64", F.softplus(i):dtype())
        assert.equal("float64", F.logsigmoid(i):dtype())
        assert.equal("float64", F.gaussian_nll_loss(i, i, ordo.tensor({1, 1}, "int64")):dtype())
        assert.equal("float64", F.multilabel_soft_margin_loss(ordo.tensor({{1, 0}}, "int64"),
                                                              ordo.tensor({{1, 0}}, "int64")):dtype())
        local m = nn.Linear(2, 1)
        assert.equal("float64", m(ordo.randn(3, 2)):dtype()) -- default-dtype input meets default-dtype layer
        ordo.set_default_dtype("float32")
        assert.equal("float32", nn.Linear(2, 3).weight:dtype())
        assert.equal("float64", m.weight:dtype()) -- tensors made before keep their dtype
    end)

    it("accepts only float32 or float64", function()
        for _, bad in ipairs({"int64", "uint8", "float16", 1, false}) do
            local ok, err = pcall(ordo.set_default_dtype, bad)
            assert.is_false(ok)
            assert.matches("set_default_dtype: only float32 or float64", err)
        end
        local ok = pcall(ordo.set_default_dtype)
        assert.is_false(ok)
        assert.equal("float32", ordo.get_default_dtype())
        ordo.set_default_dtype("double") -- (Torch's alias)
        assert.equal("float64", ordo.get_default_dtype())
    end)
end)
