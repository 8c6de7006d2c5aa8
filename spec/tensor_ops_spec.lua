-- Every tensor op against a plain-Lua reference (spec/support/ref.lua) on
-- random shapes: broadcasting, non-contiguous views, every dtype the op
-- accepts, empty and one-element tensors.
local ordo = require "ordo"
local R = require "support.ref"
local H = require "support.helpers"

local DTYPES = R.DTYPES
local ISFLOAT = R.ISFLOAT
local floor = math.floor

local function trunc(x) return x >= 0 and floor(x) or -floor(-x) end

-- promotion of a dimensioned tensor with a Lua number (ordo's rule)
local function scalar_result(dt, s)
    if not ISFLOAT[dt] and s ~= floor(s) then return "float32" end
    return dt
end

local BINARY = {
    add = {f = function(x, y) return x + y end},
    sub = {f = function(x, y) return x - y end},
    mul = {f = function(x, y) return x * y end},
    div = {f = function(x, y) return x / y end, float = true},
    pow = {f = function(x, y) return x ^ y end, float = true, rtol = 1e-5},
    maximum = {f = function(x, y) return x > y and x or y end},
    minimum = {f = function(x, y) return x < y and x or y end},
    eq = {f = function(x, y) return x == y and 1 or 0 end, cmp = true},
    ne = {f = function(x, y) return x ~= y and 1 or 0 end, cmp = true},
    lt = {f = function(x, y) return x < y and 1 or 0 end, cmp = true},
    le = {f = function(x, y) return x <= y and 1 or 0 end, cmp = true},
    gt = {f = function(x, y) return x > y and 1 or 0 end, cmp = true},
    ge = {f = function(x, y) return x >= y and 1 or 0 end, cmp = true},
}
local BINARY_NAMES = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge"}

-- the ops a number may come first in, through the operators
local METAMETHOD = {
    add = function(x, y) return x + y end,
    sub = function(x, y) return x - y end,
    mul = function(x, y) return x * y end,
    div = function(x, y) return x / y end,
    pow = function(x, y) return x ^ y end,
}

local function result_dtype(spec, dt)
    if spec.cmp then return "uint8" end
    if spec.float and not ISFLOAT[dt] then return "float32" end
    return dt
end

-- pow on float32: the reference computes in double, the kernel in float
local function tol_for(spec, dt)
    if spec.rtol and dt == "float32" then return spec.rtol, 1e-5 end
    return nil
end

describe("elementwise binary ops", function()
    for _, name in ipairs(BINARY_NAMES) do
        local spec = BINARY[name]
        it(name .. " on every dtype, broadcast shapes and every layout", function()
            math.randomseed(11)
            for _, dt in ipairs(DTYPES) do
                for _, layout in ipairs(H.LAYOUTS) do
                    for _ = 1, 3 do
                        local sa = H.rand_shape(3, 4, true)
                        local sb = H.broadcast_partner(sa)
                        if math.random() < 0.5 then sa, sb = sb, sa end
                        local ra, rb = R.rand(sa, dt), R.rand(sb, dt)
                        if spec.float and not ISFLOAT[dt] then
                            -- keep integer pow/div away from 0 ** negative
                            rb = R.map(rb, function(v) return v == 0 and 1 or v end)
                        end
                        local rdt = result_dtype(spec, dt)
                        local fa = ISFLOAT[rdt] and R.map(ra, function(v) return v end, rdt) or ra
                        local fb = ISFLOAT[rdt] and R.map(rb, function(v) return v end, rdt) or rb
                        local ref = R.binary(fa, fb, spec.f, rdt)
                        local a, b = H.make(ordo, ra, layout), H.make(ordo, rb, "contiguous")
                        local rtol, atol = tol_for(spec, rdt)
                        local what = ("%s %s %s %s and %s"):format(name, dt, layout, R.shape_str(sa), R.shape_str(sb))
                        H.check(a[name](a, b), ref, rtol, atol, what)
                        -- operand order swapped, the other one non-contiguous
                        local a2, b2 = H.make(ordo, ra, "contiguous"), H.make(ordo, rb, layout)
                        H.check(b2[name](b2, a2), R.binary(fb, fa, spec.f, rdt), rtol, atol, what .. " (swapped)")
                    end
                end
            end
        end)

        it(name .. " with a number on either side, on every layout", function()
            math.randomseed(12)
            for _, dt in ipairs(DTYPES) do
                for _, s in ipairs({2, -1, 0.5}) do
                  for _, layout in ipairs(H.LAYOUTS) do
                    if not (dt == "uint8" and s < 0) then
                        local shape = H.rand_shape(3, 4, true)
                        local ra = R.rand(shape, dt)
                        if spec.float and not ISFLOAT[dt] or name == "div" or name == "pow" then
                            ra = R.map(ra, function(v) return v == 0 and 1 or v end)
                        end
                        local cdt = scalar_result(dt, s)
                        local rdt = result_dtype(spec, cdt)
                        local fa = R.map(ra, function(v) return v end, cdt)
                        local a = H.make(ordo, ra, layout)
                        local rtol, atol = tol_for(spec, rdt)
                        local what = ("%s %s %s with %s"):format(name, dt, layout, s)
                        local sv = R.cast(s, cdt)
                        H.check(a[name](a, s), R.map(fa, function(v) return spec.f(v, sv) end, rdt), rtol, atol, what)
                        H.check(ordo[name](a, s), R.map(fa, function(v) return spec.f(v, sv) end, rdt), rtol, atol, what)
                        if METAMETHOD[name] then
                            H.check(METAMETHOD[name](s, a), R.map(fa, function(v) return spec.f(sv, v) end, rdt),
                                    rtol, atol, what .. " (number first)")
                        end
                    end
                  end
                end
            end
        end)
    end

    it("operators + - * / and unary - with tensors and numbers on either side", function()
        math.randomseed(13)
        local ra, rb = R.rand({2, 3}, "float32"), R.rand({3}, "float32")
        local a, b = H.make(ordo, ra, "transposed"), H.make(ordo, rb, "narrowed")
        H.check(a + b, R.binary(ra, rb, BINARY.add.f, "float32"))
        H.check(a - b, R.binary(ra, rb, BINARY.sub.f, "float32"))
        H.check(a * b, R.binary(ra, rb, BINARY.mul.f, "float32"))
        H.check(a / b, R.binary(ra, rb, BINARY.div.f, "float32"))
        H.check(2 + a, R.map(ra, function(v) return 2 + v end))
        H.check(2 - a, R.map(ra, function(v) return 2 - v end))
        H.check(a - 2, R.map(ra, function(v) return v - 2 end))
        H.check(3 * a, R.map(ra, function(v) return 3 * v end))
        H.check(3 / a, R.map(ra, function(v) return R.cast(3 / v, "float32") end))
        H.check(a / 4, R.map(ra, function(v) return v / 4 end))
        H.check(-a, R.map(ra, function(v) return -v end))
        H.check(a ^ 2, R.map(ra, function(v) return v * v end), 1e-6, 1e-6)
        H.check(2 ^ a, R.map(ra, function(v) return 2 ^ v end), 1e-5, 1e-6)
    end)

    it("integer division with rounding mode trunc", function()
        local ra = R.new({2, 3}, {7, -7, 9, 0, 5, -3}, "int32")
        local rb = R.new({3}, {2, 2, -4}, "int32")
        local a, b = H.make(ordo, ra, "contiguous"), H.make(ordo, rb, "contiguous")
        local f = function(x, y) return trunc(x / y) end
        H.check(a:div(b, "trunc"), R.binary(ra, rb, f, "int32"))
        H.check(a:div(2, "trunc"), R.map(ra, function(v) return trunc(v / 2) end))
        local c = a:clone()
        c:div_(b, "trunc")
        H.check(c, R.binary(ra, rb, f, "int32"))
        H.check(a / b, R.binary(ra, rb, function(x, y) return x / y end, "float32"))
    end)

    it("promotes mixed dtypes (uint8 < int32 < int64 < float32 < float64)", function()
        math.randomseed(14)
        for _, da in ipairs(DTYPES) do
            for _, db in ipairs(DTYPES) do
                local ra, rb = R.rand({2, 3}, da), R.rand({3}, db)
                local a, b = H.make(ordo, ra, "contiguous"), H.make(ordo, rb, "contiguous")
                local dt = H.promote(da, db)
                local fa, fb = R.map(ra, function(v) return v end, dt), R.map(rb, function(v) return v end, dt)
                H.check(a + b, R.binary(fa, fb, BINARY.add.f, dt), nil, nil, da .. "+" .. db)
                H.check(a:mul(b), R.binary(fa, fb, BINARY.mul.f, dt), nil, nil, da .. "*" .. db)
                H.check(a:lt(b), R.binary(fa, fb, BINARY.lt.f, "uint8"), nil, nil, da .. "<" .. db)
                assert.equals(dt, ordo.result_type(a, b))
            end
        end
        -- a 0-dim tensor does not raise the dtype within its kind, but a higher kind wins
        assert.equals("float32", (ordo.ones({2}) + ordo.tensor(1, {dtype = "float64"})):dtype())
        assert.equals("int32", (ordo.ones({2}, {dtype = "int32"}) + ordo.tensor(1, {dtype = "int64"})):dtype())
        assert.equals("float64", (ordo.ones({2}, {dtype = "int32"}) + ordo.tensor(1, {dtype = "float64"})):dtype())
        assert.equals("int32", (ordo.ones({2}, {dtype = "int32"}) + 2):dtype())
        assert.equals("float32", (ordo.ones({2}, {dtype = "int32"}) + 2.5):dtype())
        assert.equals("uint8", (ordo.ones({2}, {dtype = "uint8"}) * 3):dtype())
    end)
end)

describe("in-place binary ops", function()
    for _, name in ipairs({"add", "sub", "mul", "div", "pow", "maximum", "minimum"}) do
        local spec = BINARY[name]
        it(name .. "_ writes through every layout and broadcasts the operand", function()
            math.randomseed(21)
            for _, dt in ipairs(DTYPES) do
                if not spec.float or ISFLOAT[dt] then
                    for _, layout in ipairs(H.LAYOUTS) do
                        local sa = H.rand_shape(3, 4, true)
                        local sb = H.broadcast_partner(sa)
                        local ra, rb = R.rand(sa, dt), R.rand(sb, dt)
                        local a = H.make(ordo, ra, layout)
                        local b = H.make(ordo, rb, "transposed")
                        local r = a[name .. "_"](a, b)
                        assert.equals(a, r)
                        local rtol, atol = tol_for(spec, dt)
                        H.check(a, R.binary(ra, rb, spec.f, dt), rtol, atol, name .. "_ " .. dt .. " " .. layout)
                    end
                end
            end
        end)
    end

    it("< and <= between tensors say where the elementwise comparisons are (Lua makes them one boolean)", function()
        local a, b = ordo.tensor({1, 2}), ordo.tensor({2, 1})
        H.raises(function() return a < b end, "<: Lua turns a comparison into one boolean", "a:lt(b)")
        H.raises(function() return a <= b end, "<=:", "a:le(b)")
        H.raises(function() return a > b end, "a:lt(b)", "gt") -- Lua asks b < a
        assert.is_true(a == a)
        assert.is_false(a == a:clone()) -- identity, as documented
    end)

    it("maximum_, minimum_ and clamp_ with a wider integer operand compare in its dtype (it was cast first)", function()
        local u = ordo.tensor({5, 200}, "uint8")
        assert.same({5, 200}, u:clone():maximum_(ordo.tensor({-1, -1}, "int32")):totable()) -- -1 became 255
        assert.same({5, 200}, u:clone():minimum_(ordo.tensor({300, 300}, "int32")):totable()) -- 300 became 44
        assert.same({7, 200}, u:clone():maximum_(ordo.tensor({7, -3}, "int64")):totable())
        assert.same({5, 200}, u:clone():clamp_(ordo.tensor({-1}, "int32"), ordo.tensor({300}, "int32")):totable())
        assert.same({5}, ordo.tensor({5}, "int32"):minimum_(ordo.tensor({2 ^ 40}, "int64")):totable())
        assert.same({44}, ordo.tensor({5}, "uint8"):maximum_(ordo.tensor({300}, "int32")):totable()) -- then stored: wraps
        -- add, sub and mul wrap the same either way
        assert.same({4, 199}, u:clone():add_(ordo.tensor({-1, -1}, "int32")):totable())
        H.raises(function() return u:clone():maximum_(ordo.zeros({2, 2}, "int64")) end, "maximum_", "cannot be broadcast")
    end)

    it("add_/sub_ take alpha, and numbers", function()
        local ra, rb = R.rand({3, 2}, "float64"), R.rand({3, 2}, "float64")
        local a, b = H.make(ordo, ra, "transposed"), H.make(ordo, rb, "contiguous")
        a:add_(b, 2):sub_(1):mul_(3):sub_(b, -1)
        H.check(a, R.binary(ra, rb, function(x, y) return ((x + 2 * y) - 1) * 3 + y end, "float64"))
    end)

    it("a negative alpha on unsigned integers, as Torch; a bad alpha is named under add/sub", function()
        -- v * -1 was refused ("mul: value -1 does not fit in uint8")
        local u, v = ordo.tensor({5}, "uint8"), ordo.tensor({2}, "uint8")
        assert.same({7}, u:sub(v, -1):totable())
        assert.same({1}, u:add(v, -2):totable())
        assert.equals("uint8", u:add(v, -2):dtype())
        assert.same({4}, ordo.tensor({5}, "uint8"):add_(1, -1):totable())
        assert.same({9}, ordo.tensor({5}, "uint8"):sub_(v, -2):totable())
        local e = H.raises(function() return u:add(v, 300) end, "add: value 300 does not fit in uint8")
        assert.falsy(e:find("mul", 1, true), e)
        H.raises(function() return ordo.tensor({5}, "int32"):add_(ordo.tensor({1}, "int32"), -2.5) end, "add_", "float32")
        assert.same({6.5}, ordo.tensor({5}):sub(ordo.tensor({3}), -0.5):totable())
        assert.same({-1}, ordo.tensor({5}):add(3, -2):totable())
    end)

    it("casts the operand to the in-place tensor's dtype", function()
        local a = ordo.tensor({1.5, 2.5}, {dtype = "float32"})
        a:add_(ordo.tensor({1, 2}, {dtype = "int64"}))
        assert.same({2.5, 4.5}, a:totable())
        local i = ordo.tensor({1, 2}, {dtype = "int32"})
        i:add_(ordo.tensor({3, 4}, {dtype = "uint8"}))
        assert.same({4, 6}, i:totable())
    end)

    it("reads an aliasing operand before writing (a:add_(a:t()), a:add_(a:narrow(...)))", function()
        local ra = R.rand({3, 3}, "float64")
        local a = H.make(ordo, ra, "contiguous")
        a:add_(a:t())
        H.check(a, R.binary(ra, R.transpose(ra, 1, 2), BINARY.add.f, "float64"))
        local rb = R.rand({4, 3}, "float64")
        local b = H.make(ordo, rb, "contiguous")
        b:add_(b:narrow(1, 1, 1))
        H.check(b, R.binary(rb, R.narrow(rb, 1, 1, 1), BINARY.add.f, "float64"))
        local c = ordo.arange(6, {dtype = "float64"})
        c:narrow(1, 2, 5):copy_(c:narrow(1, 1, 5))
        assert.same({0, 0, 1, 2, 3, 4}, c:totable())
    end)
end)

-- The error functions, independently of C's: erf by its Taylor series where
-- that converges without losing digits (|x| < 2), erfc by its continued
-- fraction beyond (the tail that 1 - erf would lose), odd/even symmetry
-- for x < 0.
local function erf_series(x)
    local sum, term, n = x, x, 0
    repeat
        n = n + 1
        term = -term * x * x / n
        local add = term / (2 * n + 1)
        sum = sum + add
    until add == 0 or math.abs(add) <= 1e-17 * math.abs(sum) -- (x == 0: every term is 0)
    return 2 / math.sqrt(math.pi) * sum
end
local function erfc_ref(x)
    if x ~= x then return x end
    if x < 0 then return 2 - erfc_ref(-x) end
    if x < 2 then return 1 - erf_series(x) end
    if x > 27 then return 0 end
    local f = x -- x + (1/2)/(x + 1/(x + (3/2)/(x + ...))), from the bottom
    for k = 300, 1, -1 do f = x + (k / 2) / f end
    return math.exp(-x * x) / math.sqrt(math.pi) / f
end
-- erfinv by bisection: erf(y) = |x| near 0, erfc(y) = 1 - |x| (exact) in
-- the tails, by erfc's continued fraction with terms enough for y >= 0.47.
-- (x = 0.99: the 1 - erf of erfc_ref above was 10 ulps out.)
local function erfc_cf(x)
    local f = x
    for k = 2000, 1, -1 do f = x + (k / 2) / f end
    return math.exp(-x * x) / math.sqrt(math.pi) / f
end
local function erfinv_ref(x)
    if x ~= x or math.abs(x) > 1 then return 0 / 0 end
    if math.abs(x) == 1 then return x * math.huge end
    if x == 0 then return x end
    local a = math.abs(x)
    local lo, hi = 0, a <= 0.5 and 0.5 or 6 -- (the series is exact only near 0: erfinv(0.5) = 0.477)
    for _ = 1, 1100 do -- (down to 1e-300 and below)
        local mid = (lo + hi) / 2
        if mid == lo or mid == hi then break end
        local low
        if a <= 0.5 then low = erf_series(mid) < a else low = erfc_cf(mid) > 1 - a end
        if low then lo = mid else hi = mid end
    end
    return x < 0 and -lo or lo
end

local UNARY = {
    neg = {f = function(x) return -x end, dtypes = {"float32", "float64", "int32", "int64"}},
    abs = {f = math.abs, dtypes = DTYPES},
    relu = {f = function(x) return x > 0 and x or 0 end, dtypes = DTYPES},
    exp = {f = math.exp, float = true},
    log = {f = function(x) return x > 0 and math.log(x) or (x == 0 and -math.huge or 0 / 0) end, float = true},
    sqrt = {f = function(x) return x >= 0 and math.sqrt(x) or 0 / 0 end, float = true},
    tanh = {f = function(x)
        local e = math.exp(2 * x)
        return (e - 1) / (e + 1)
    end, float = true},
    sigmoid = {f = function(x) return 1 / (1 + math.exp(-x)) end, float = true},
    sign = {f = function(x) return x > 0 and 1 or (x < 0 and -1 or x) end, dtypes = DTYPES},
    square = {f = function(x) return x * x end, dtypes = DTYPES, wrap = true},
    sin = {f = math.sin, float = true},
    cos = {f = math.cos, float = true},
    log1p = {f = function(x)
        if x < -1 then return 0 / 0 elseif x == -1 then return -math.huge end
        local u = 1 + x -- log1p without losing the digits of small x (Goldberg's trick)
        if u == 1 then return x end
        return math.log(u) * x / (u - 1)
    end, float = true},
    expm1 = {f = function(x)
        if math.abs(x) < 1e-5 then return x + x * x / 2 + x * x * x / 6 end
        return math.exp(x) - 1
    end, float = true},
    rsqrt = {f = function(x) return x > 0 and 1 / math.sqrt(x) or (x == 0 and math.huge or 0 / 0) end, float = true},
    reciprocal = {f = function(x) return 1 / x end, float = true},
    floor = {f = math.floor, dtypes = DTYPES},
    ceil = {f = math.ceil, dtypes = DTYPES},
    round = {f = function(x) -- halves to even
        local r = math.floor(x + 0.5)
        if r - x == 0.5 and r % 2 ~= 0 then r = r - 1 end
        return r
    end, dtypes = DTYPES},
    trunc = {f = function(x) return x >= 0 and math.floor(x) or math.ceil(x) end, dtypes = DTYPES},
    tan = {f = math.tan, float = true},
    asin = {f = math.asin, float = true}, -- NaN outside [-1, 1], as C's
    acos = {f = math.acos, float = true},
    atan = {f = math.atan, float = true},
    sinh = {f = function(x) return (math.exp(x) - math.exp(-x)) / 2 end, float = true},
    cosh = {f = function(x) return (math.exp(x) + math.exp(-x)) / 2 end, float = true},
    asinh = {f = function(x)
        local s = math.log(math.abs(x) + math.sqrt(x * x + 1)) -- odd: no cancellation for x < 0
        return x < 0 and -s or s
    end, float = true},
    acosh = {f = function(x) return math.log(x + math.sqrt(x * x - 1)) end, float = true}, -- NaN below 1
    atanh = {f = function(x) return 0.5 * math.log((1 + x) / (1 - x)) end, float = true}, -- +-inf at +-1
    erf = {f = function(x) return 1 - erfc_ref(x) end, float = true},
    erfc = {f = function(x) return erfc_ref(x) end, float = true},
    erfinv = {f = function(x) return erfinv_ref(x) end, float = true},
}
local UNARY_NAMES = {"neg", "abs", "relu", "exp", "log", "sqrt", "tanh", "sigmoid", "sign", "square", "sin", "cos",
                     "log1p", "expm1", "rsqrt", "reciprocal", "floor", "ceil", "round", "trunc",
                     "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "erf", "erfc", "erfinv"}

describe("elementwise unary ops", function()
    for _, name in ipairs(UNARY_NAMES) do
        local spec = UNARY[name]
        it(name .. " on every dtype it accepts and every layout, in and out of place", function()
            math.randomseed(31)
            for _, dt in ipairs(spec.dtypes or DTYPES) do
                for _, layout in ipairs(H.LAYOUTS) do
                    local shape = H.rand_shape(3, 5, true)
                    local ra = R.rand(shape, dt)
                    local rdt = (spec.float and not ISFLOAT[dt]) and "float32" or dt
                    local fa = R.map(ra, function(v) return v end, rdt)
                    local ref = R.map(fa, spec.f, rdt)
                    local rtol = rdt == "float32" and 2e-6 or 1e-12
                    local a = H.make(ordo, ra, layout)
                    H.check(a[name](a), ref, rtol, 1e-7, name .. " " .. dt .. " " .. layout)
                    H.check(ordo[name](a), ref, rtol, 1e-7, name .. " " .. dt .. " " .. layout)
                    if rdt == dt then
                        a[name .. "_"](a)
                        H.check(a, ref, rtol, 1e-7, name .. "_ " .. dt .. " " .. layout)
                    end
                end
            end
        end)
    end

    it("casts: floats to integers truncate and saturate (NaN gives 0); integers to narrower integers wrap", function()
        -- as the README says; a C cast out of range would be undefined
        assert.same({0, 255, 0, 1, 255}, ordo.tensor({-1.5, 300, 0 / 0, 1.9, 1 / 0}):to("uint8"):totable())
        assert.same({-2147483648, 2147483647, 0, -1}, ordo.tensor({-1e10, 1e10, 0 / 0, -1.9}, "float64"):int():totable())
        assert.same({255, 44, 0}, ordo.tensor({-1, 300, 256}, "int32"):byte():totable())
        assert.same({-1294967296}, ordo.tensor({3e9}, "int64"):int():totable())
        local d = ordo.zeros({3}, "int32")
        d:copy_(ordo.tensor({1e10, -1e10, 0 / 0}))
        assert.same({2147483647, -2147483648, 0}, d:totable())
    end)

    it("round halves to even; floor, ceil, round, trunc keep integer dtypes; sign and square of uint8", function()
        assert.same({0, 2, 2, -2, 4, -0.0}, ordo.tensor({0.5, 1.5, 2.5, -2.5, 3.5, -0.5}):round():totable())
        assert.same({-2, 1}, ordo.tensor({-1.5, 1.5}):floor():totable())
        assert.same({-1, 2}, ordo.tensor({-1.5, 1.5}):ceil():totable())
        assert.same({-1, 1}, ordo.tensor({-1.5, 1.5}):trunc():totable())
        for _, dt in ipairs({"int32", "int64", "uint8"}) do
            local i = ordo.tensor({3, 7}, dt)
            for _, name in ipairs({"floor", "ceil", "round", "trunc"}) do
                local r = i[name](i)
                assert.equals(dt, r:dtype())
                assert.same({3, 7}, r:totable())
                assert.equals(i, i[name .. "_"](i))
            end
        end
        local u = ordo.tensor({0, 3, 20}, "uint8")
        assert.same({0, 1, 1}, u:sign():totable())
        assert.same({0, 9, 144}, u:square():totable()) -- 400 wraps to 144
        assert.same({0, 9, 144}, u:clone():square_():totable())
        assert.same({0, 1, 1}, u:clone():sign_():totable())
        local nan = ordo.tensor({0 / 0}):sign():item()
        assert.is_true(nan ~= nan)
        assert.equals("float32", ordo.tensor({4}, "int32"):rsqrt():dtype())
        assert.same({0.5}, ordo.tensor({4}, "int32"):rsqrt():totable())
        H.raises(function() ordo.tensor({4}, "int32"):sin_() end, "sin_", "int32")
    end)

    it("erfinv: Torch's values at and beyond +-1, float64 to its last digits into the tails", function()
        for _, dt in ipairs({"float32", "float64"}) do
            local r = ordo.tensor({-1, 1, 1.5, -2, 0 / 0, -0.0, 0}, dt):erfinv():totable()
            assert.equals(-1 / 0, r[1], dt)
            assert.equals(1 / 0, r[2], dt)
            for i = 3, 5 do assert.is_true(r[i] ~= r[i], dt .. " NaN " .. i) end
            assert.equals(-1 / 0, 1 / r[6], dt .. " -0.0 keeps its sign")
            assert.equals(1 / 0, 1 / r[7], dt)
        end
        -- dense in (-1, 1) and out to 1 - 2^-53, where erf(y) is 1 in float64; within a few
        -- ulps (the reference sums series; against 50-digit mpmath the kernel is within 2 ulps)
        local xs = {}
        for i = -99, 99 do xs[#xs + 1] = i / 100 end
        for k = 1, 53 do xs[#xs + 1] = 1 - 2 ^ -k; xs[#xs + 1] = -(1 - 2 ^ -k) end
        for _, v in ipairs({1e-300, 1e-12, 0.4999999, 0.5, 0.5000001}) do xs[#xs + 1] = v end
        local got = ordo.tensor(xs, "float64"):erfinv():totable()
        for i, x in ipairs(xs) do
            local want = erfinv_ref(x)
            assert.is_true(math.abs(got[i] - want) <= 1e-15 * math.abs(want), ("erfinv(%.17g) = %.17g, want %.17g")
                :format(x, got[i], want))
        end
        assert.near(5.8636, got[#xs - 6], 1e-4) -- erfinv(1 - 2^-53)
        -- integers compute in float32; ordo.erfinv is the method
        assert.equals("float32", ordo.tensor({0}, "int32"):erfinv():dtype())
        assert.near(0.4769362762, ordo.erfinv(ordo.tensor({0.5}, "float64")):item(), 1e-10)
        H.raises(function() ordo.tensor({0}, "int64"):erfinv_() end, "erfinv_", "int64")
    end)

    it("abs of -0.0 is +0.0 (C's fabs, Torch, NumPy), out of place and in place", function()
        for _, dt in ipairs({"float32", "float64"}) do
            local a = ordo.tensor({-0.0, 0, -2, 0 / 0}, dt)
            local r = a:abs():totable()
            assert.equals(1 / 0, 1 / r[1], dt) -- +0: 1 / -0 would be -inf
            assert.equals(1 / 0, 1 / r[2], dt)
            assert.equals(2, r[3])
            assert.is_true(r[4] ~= r[4])
            assert.equals(1 / 0, 1 / a:abs_():totable()[1], dt .. " abs_")
        end
        assert.same({2147483647, 0, -2147483648}, ordo.tensor({-2147483647, 0, -2147483648}, "int32"):abs():totable())
    end)

    it("clamp and clamp_", function()
        local ra = R.rand({4, 3}, "float32")
        local a = H.make(ordo, ra, "transposed")
        local f = function(v) return math.min(math.max(v, -1), 0.5) end
        H.check(a:clamp(-1, 0.5), R.map(ra, f))
        H.check(a:clamp(nil, 0.5), R.map(ra, function(v) return math.min(v, 0.5) end))
        a:clamp_(-1, 0.5)
        H.check(a, R.map(ra, f))
    end)

    it("clamp_ with a bad tensor bound raises under clamp_ and leaves the tensor as it was", function()
        -- the min was applied before the max's error (and the errors named maximum_ / minimum_)
        local x = ordo.arange(3)
        H.raises(function() x:clamp_(1, ordo.tensor({1, 2})) end, "clamp_: shape 2 cannot be broadcast to 3")
        assert.same({0, 1, 2}, x:totable())
        local i = ordo.arange(3, "int32")
        H.raises(function() i:clamp_(1, ordo.tensor({1.5})) end, "clamp_", "float32", "int32")
        assert.same({0, 1, 2}, i:totable())
        local e = ordo.engine.new({kind = "naive"})
        H.raises(function() x:clamp_(1, ordo.tensor({2}, {engine = e})) end, "clamp_", "different engines")
        assert.same({0, 1, 2}, x:totable())
        local err = H.raises(function() return x:clamp(ordo.tensor({1, 2})) end, "clamp:", "3 and 2")
        assert.falsy(err:find("maximum", 1, true), err)
        -- good tensor bounds still work, broadcast
        x:clamp_(ordo.tensor({1}), ordo.tensor(1.5))
        assert.same({1, 1, 1.5}, x:totable())
        assert.same({{1, 1, 1.5}, {1, 1, 2}}, ordo.arange(3):clamp(1, ordo.tensor({{1.5}, {2}})):totable())
        e:close()
    end)
end)

describe("reductions", function()
    local function check_reduce(name, reff, dtypes, out_dtype)
        it(name .. " over all and over each dim, keepdim or not, every layout", function()
            math.randomseed(41)
            for _, dt in ipairs(dtypes) do
                for _, layout in ipairs(H.LAYOUTS) do
                    local shape = H.rand_shape(3, 5, false)
                    local ra = R.rand(shape, dt)
                    local odt = out_dtype(dt)
                    local fa = R.map(ra, function(v) return v end, ISFLOAT[odt] and odt or dt)
                    local a = H.make(ordo, ra, layout)
                    local rtol = odt == "float32" and 1e-5 or 1e-12
                    H.check(a[name](a), reff(fa, nil, odt, false), rtol, 1e-5, name .. " " .. dt)
                    for d = 1, #shape do
                        for _, keep in ipairs({false, true}) do
                            local got = a[name](a, d, keep)
                            H.check(got, reff(fa, d, odt, keep), rtol, 1e-5,
                                    ("%s(%d, %s) %s %s %s"):format(name, d, tostring(keep), dt, layout, R.shape_str(shape)))
                        end
                        H.check(a[name](a, d - #shape - 1), reff(fa, d, odt, false), rtol, 1e-5, name .. " negative dim")
                    end
                end
            end
        end)
    end
    check_reduce("sum", function(r, d, odt, k) return R.sum(r, d, odt, k) end, DTYPES,
                 function(dt) return ISFLOAT[dt] and dt or "int64" end)
    check_reduce("mean", function(r, d, odt, k) return R.mean(r, d, odt, k) end, DTYPES,
                 function(dt) return ISFLOAT[dt] and dt or "float32" end)
    check_reduce("max", function(r, d, _, k) return R.max(r, d, k) end, DTYPES, function(dt) return dt end)
    check_reduce("min", function(r, d, _, k) return R.min(r, d, k) end, DTYPES, function(dt) return dt end)
    check_reduce("argmax", function(r, d, _, k) return R.argmax(r, d, k) end, DTYPES, function() return "int64" end)
    check_reduce("argmin", function(r, d, _, k) return R.argmin(r, d, k) end, DTYPES, function() return "int64" end)

    it("max(dim) and min(dim) return values and indices (from 1)", function()
        local a = ordo.tensor({{1, 5, 2}, {7, 0, 7}})
        local v, i = a:max(2)
        assert.same({5, 7}, v:totable())
        assert.same({2, 1}, i:totable())
        assert.equals("int64", i:dtype())
        v, i = a:min(1)
        assert.same({1, 0, 2}, v:totable())
        assert.same({1, 2, 1}, i:totable())
        assert.equals(4, a:argmax():item())
        assert.equals(7, a:max():item())
        -- over everything: the value alone, no trailing nil (the REPL prints every result)
        assert.equals(1, select("#", a:max()))
        assert.equals(1, select("#", ordo.min(a)))
    end)

    it("argmax/argmin along an outer dim (folded slice by slice): first index on ties, NaN the extreme", function()
        math.randomseed(7)
        local S = {6, 10, 3}
        for _, dt in ipairs({"float32", "float64", "int32", "int64", "uint8"}) do
            local vals = {}
            for i = 1, 6 * 10 * 3 do
                vals[i] = math.random(0, 2) -- many ties
                if dt:match("float") and math.random() < 0.1 then vals[i] = 0 / 0 end
            end
            local x = ordo.tensor(vals, dt):view(S)
            local function at(i, j, k) return vals[((i - 1) * 10 + (j - 1)) * 3 + k] end
            for _, f in ipairs({"argmax", "argmin"}) do
                local better = f == "argmax" and function(v, b) return v > b or (v ~= v and b == b) end
                    or function(v, b) return v < b or (v ~= v and b == b) end
                for d = 1, 2 do
                    local got = x[f](x, d):totable()
                    for a = 1, d == 1 and 10 or 6 do
                        for k = 1, 3 do
                            local bi
                            for r = 1, S[d] do
                                local v = d == 1 and at(r, a, k) or at(a, r, k)
                                local b = bi and (d == 1 and at(bi, a, k) or at(a, bi, k))
                                if not bi or better(v, b) then bi = r end
                            end
                            assert.equal(bi, got[a][k], ("%s(%d) %s at %d,%d"):format(f, d, dt, a, k))
                        end
                    end
                end
            end
        end
    end)

    it("sum and mean of empty tensors; one-element tensors", function()
        assert.equals(0, ordo.zeros({0, 3}):sum():item())
        assert.same({0, 0, 0}, ordo.zeros({0, 3}):sum(1):totable())
        local one = ordo.tensor({{4.5}})
        assert.equals(4.5, one:sum():item())
        assert.equals(4.5, one:mean(2):item())
        assert.equals(4.5, one:max():item())
        assert.equals(1, one:argmax():item())
        assert.equals(3.5, ordo.tensor(3.5):sum():item())
    end)
end)

describe("softmax and log_softmax", function()
    for _, name in ipairs({"softmax", "log_softmax"}) do
        it(name .. " along every dim, float dtypes, every layout", function()
            math.randomseed(51)
            for _, dt in ipairs({"float32", "float64", "int32"}) do
                for _, layout in ipairs(H.LAYOUTS) do
                    local shape = H.rand_shape(3, 5, false)
                    if #shape == 0 then shape = {3} end
                    local ra = R.rand(shape, dt)
                    local rdt = ISFLOAT[dt] and dt or "float32"
                    local fa = R.map(ra, function(v) return v end, rdt)
                    local a = H.make(ordo, ra, layout)
                    for d = 1, #shape do
                        H.check(a[name](a, d), R.softmax(fa, d, name == "log_softmax"), rdt == "float32" and 1e-5 or 1e-12,
                                1e-6, name .. " " .. dt .. " " .. layout .. " dim " .. d)
                    end
                    H.check(a[name](a), R.softmax(fa, #shape, name == "log_softmax"), rdt == "float32" and 1e-5 or 1e-12, 1e-6)
                end
            end
        end)
    end
    it("is stable for large inputs", function()
        local a = ordo.tensor({1000, 1001, 1002}, {dtype = "float64"})
        local s = a:softmax(1):totable()
        assert.is_true(math.abs(s[3] - 0.6652409557748219) < 1e-12)
    end)
end)

describe("matmul", function()
    it("2-D on every dtype and layout", function()
        math.randomseed(61)
        for _, dt in ipairs(DTYPES) do
            for _, layout in ipairs(H.LAYOUTS) do
                local m, k, n = math.random(1, 5), math.random(1, 5), math.random(1, 5)
                local ra, rb = R.rand({m, k}, dt), R.rand({k, n}, dt)
                local a, b = H.make(ordo, ra, layout), H.make(ordo, rb, layout)
                local rtol = dt == "float32" and 1e-5 or 1e-12
                H.check(a:matmul(b), R.matmul(ra, rb, dt), rtol, 1e-5, "matmul " .. dt .. " " .. layout)
                H.check(ordo.matmul(a, b), R.matmul(ra, rb, dt), rtol, 1e-5)
            end
        end
    end)

    it("batched 3-D, and a 2-D operand broadcast over the batch", function()
        math.randomseed(62)
        for _, dt in ipairs({"float32", "float64", "int64"}) do
            for _, layout in ipairs(H.LAYOUTS) do
                local bs, m, k, n = math.random(1, 4), math.random(1, 4), math.random(1, 4), math.random(1, 4)
                local ra, rb = R.rand({bs, m, k}, dt), R.rand({bs, k, n}, dt)
                local a, b = H.make(ordo, ra, layout), H.make(ordo, rb, layout)
                local rtol = dt == "float32" and 1e-5 or 1e-12
                H.check(a:matmul(b), R.matmul(ra, rb, dt), rtol, 1e-5, "bmm " .. dt .. " " .. layout)
                local r2 = R.rand({k, n}, dt)
                local b2 = H.make(ordo, r2, layout)
                local rep = {}
                for _ = 1, bs do rep[#rep + 1] = r2 end
                local stacked = R.new({bs, k, n}, {}, dt)
                for q = 1, bs do for i = 1, k * n do stacked.data[(q - 1) * k * n + i] = r2.data[i] end end
                H.check(a:matmul(b2), R.matmul(ra, stacked, dt), rtol, 1e-5, "bmm with 2-D")
            end
        end
    end)

    it("above 3-D: batch dims broadcast as Torch's (missing ones count as 1), against plain Lua", function()
        ordo.manual_seed(63)
        -- out[i][j] = a[i][1] @ b[j] for a 2x1xMxK and b 3xKxN: out 2x3xMxN
        for _, dt in ipairs({"float32", "float64", "int64"}) do
            local m, k, n = 2, 3, 4
            local a = ordo.randint(-4, 5, {2, 1, m, k}):to(dt)
            local b = ordo.randint(-4, 5, {3, k, n}):to(dt)
            local y = a:matmul(b)
            assert.same({2, 3, m, n}, y:shape())
            assert.equals(dt, y:dtype())
            local ta, tb, ty = a:totable(), b:totable(), y:totable()
            for i = 1, 2 do for j = 1, 3 do for r = 1, m do for c = 1, n do
                local sum = 0
                for q = 1, k do sum = sum + ta[i][1][r][q] * tb[j][q][c] end
                assert.near(sum, ty[i][j][r][c], 1e-4)
            end end end end
            -- non-contiguous, and a 1-D operand on each side
            local at = ordo.randint(-4, 5, {2, 3, k, m}):to(dt):transpose(3, 4)
            local v = ordo.randint(-4, 5, {k}):to(dt)
            local tat, tv, yv = at:totable(), v:totable(), at:matmul(v):totable()
            for i = 1, 2 do for j = 1, 3 do for r = 1, m do
                local sum = 0
                for q = 1, k do sum = sum + tat[i][j][r][q] * tv[q] end
                assert.near(sum, yv[i][j][r], 1e-4)
            end end end
            assert.same({2, 3, n}, ordo.randn(k):to(dt):matmul(b:expand(2, 3, k, n)):shape())
        end
        assert.same({0, 3, 2, 4}, ordo.zeros({0, 1, 2, 3}):matmul(ordo.zeros({3, 3, 4})):shape())
        local err = H.raises(function() return ordo.zeros({2, 3, 4, 5}):matmul(ordo.zeros({4, 5, 6})) end,
                             "matmul", "batch dims", "2x3x4x5", "4x5x6", "3 against 4")
        assert.truthy(err)
        H.raises(function() return ordo.zeros({2, 3, 4, 5}):matmul(ordo.zeros({4, 6})) end, "matmul", "5 and 4")
    end)

    it("1-D operands (vector products) and mixed dtypes", function()
        local v = ordo.tensor({1, 2, 3})
        local m = ordo.tensor({{1, 0}, {0, 1}, {1, 1}})
        assert.equals(14, v:matmul(v):item())
        assert.same({4, 5}, v:matmul(m):totable())
        assert.same({1, 2, 3}, m:matmul(ordo.tensor({1, 2})):totable())
        local md = ordo.tensor({{1, 2}, {3, 4}}, {dtype = "float64"})
        local mi = ordo.tensor({{1, 1}, {1, 1}}, {dtype = "int32"})
        local r = md:matmul(mi)
        assert.equals("float64", r:dtype())
        assert.same({{3, 3}, {7, 7}}, r:totable())
    end)

    it("empty inner and outer dims", function()
        assert.same({{0, 0}, {0, 0}}, ordo.zeros({2, 0}):matmul(ordo.zeros({0, 2})):totable())
        assert.same({2, 0}, ordo.zeros({2, 3}):matmul(ordo.zeros({3, 0})):shape())
    end)
end)

describe("indexing", function()
    it("gather along every dim, every dtype (indices from 1)", function()
        math.randomseed(71)
        for _, dt in ipairs(DTYPES) do
            for _, layout in ipairs(H.LAYOUTS) do
                local shape = {math.random(1, 4), math.random(1, 4), math.random(1, 3)}
                local ra = R.rand(shape, dt)
                local a = H.make(ordo, ra, layout)
                for d = 1, 3 do
                    local ishape = R.copy_shape(shape)
                    ishape[d] = math.random(1, 5)
                    local idata = {}
                    for i = 1, R.numel(ishape) do idata[i] = math.random(1, shape[d]) end
                    local ri = R.new(ishape, idata, "int64")
                    local idx = H.make(ordo, ri, layout)
                    H.check(a:gather(d, idx), R.gather(ra, d, ri), nil, nil, "gather " .. dt .. " dim " .. d)
                end
            end
        end
    end)

    it("index_select along every dim with a tensor or a table of indices", function()
        math.randomseed(72)
        for _, dt in ipairs(DTYPES) do
            local shape = {3, 4, 2}
            local ra = R.rand(shape, dt)
            local a = H.make(ordo, ra, "transposed")
            for d = 1, 3 do
                local list = {}
                for i = 1, math.random(0, 5) do list[i] = math.random(1, shape[d]) end
                H.check(a:index_select(d, list), R.index_select(ra, d, list), nil, nil, "index_select " .. dt)
                if #list > 0 then
                    local t = ordo.tensor(list, {dtype = "int32"})
                    H.check(a:index_select(d, t), R.index_select(ra, d, list), nil, nil, "index_select int32 index")
                end
            end
        end
    end)

    it("an out-of-range index fails at the wait, and the engine carries on", function()
        local a = ordo.tensor({1, 2, 3})
        local r = a:index_select(1, {4})
        local ok, err = pcall(function() return r:totable() end)
        assert.is_false(ok)
        -- the index and the dim as the user counts them
        assert.truthy(tostring(err):find("index_select: index 4 out of range for dim 1 of size 3", 1, true), err)
        assert.same({2, 3}, a:index_select(1, {2, 3}):totable())
        local g = a:gather(1, ordo.tensor({0}, {dtype = "int64"}))
        ok, err = pcall(function() return g:item() end)
        assert.is_false(ok)
        assert.truthy(tostring(err):find("gather: index 0 out of range for dim 1 of size 3", 1, true), err)
        local m = ordo.zeros(2, 3)
        local s = m:scatter_add(2, ordo.tensor({{1}, {4}}, "int64"), ordo.ones(2, 1))
        ok, err = pcall(function() return s:totable() end)
        assert.is_false(ok)
        assert.truthy(tostring(err):find("scatter_add: index 4 out of range for dim 2 of size 3", 1, true), err)
        assert.same({1, 2, 3}, a:totable())
    end)
end)

describe("where and masked_fill", function()
    it("where broadcasts condition, x and y; numbers allowed", function()
        math.randomseed(81)
        for _, dt in ipairs(DTYPES) do
            local sa = {3, 4}
            local rc = R.rand({4}, "uint8")
            rc = R.map(rc, function(v) return v % 2 end)
            local rx, ry = R.rand(sa, dt), R.rand({3, 1}, dt)
            local c, x, y = H.make(ordo, rc, "narrowed"), H.make(ordo, rx, "transposed"), H.make(ordo, ry, "contiguous")
            local f = function(cv, xv, yv) return cv ~= 0 and xv or yv end
            H.check(ordo.where(c, x, y), R.nary({rc, rx, ry}, f, dt), nil, nil, "where " .. dt)
            H.check(x:where(c, y), R.nary({rc, rx, ry}, f, dt))
            local cx = x:gt(0)
            H.check(ordo.where(cx, x, 0), R.map(rx, function(v) return v > 0 and v or 0 end, dt))
        end
    end)

    it("masked_fill and masked_fill_ with a broadcast mask, every dtype", function()
        math.randomseed(82)
        for _, dt in ipairs(DTYPES) do
            for _, layout in ipairs(H.LAYOUTS) do
                local rx = R.rand({3, 4}, dt)
                local rm = R.map(R.rand({4}, "uint8"), function(v) return v % 2 end)
                local x, m = H.make(ordo, rx, layout), H.make(ordo, rm, "contiguous")
                local ref = R.nary({rx, rm}, function(xv, mv) return mv ~= 0 and 5 or xv end, dt)
                H.check(x:masked_fill(m, 5), ref, nil, nil, "masked_fill " .. dt .. " " .. layout)
                x:masked_fill_(m, 5)
                H.check(x, ref, nil, nil, "masked_fill_ " .. dt .. " " .. layout)
            end
        end
    end)
end)

describe("cat and stack", function()
    it("cat along every dim with mixed dtypes and layouts", function()
        math.randomseed(91)
        for d = 1, 3 do
            local shape = {2, 3, 2}
            local parts, refs = {}, {}
            local dt = "uint8"
            for i = 1, 3 do
                local s = R.copy_shape(shape)
                s[d] = math.random(0, 3)
                local pdt = DTYPES[math.random(1, #DTYPES)]
                local r = R.rand(s, pdt)
                refs[i] = r
                parts[i] = H.make(ordo, r, H.LAYOUTS[i])
                dt = H.promote(dt, pdt)
            end
            H.check(ordo.cat(parts, d), R.cat(refs, d, dt), nil, nil, "cat dim " .. d)
        end
    end)

    it("stack adds a dim", function()
        local a, b = ordo.tensor({1, 2}), ordo.tensor({3, 4})
        assert.same({{1, 2}, {3, 4}}, ordo.stack({a, b}):totable())
        assert.same({{1, 3}, {2, 4}}, ordo.stack({a, b}, 2):totable())
    end)
end)

describe("copies and casts", function()
    it("to(dtype) between every pair of dtypes, every layout", function()
        math.randomseed(101)
        for _, from in ipairs(DTYPES) do
            for _, to in ipairs(DTYPES) do
                for _, layout in ipairs(H.LAYOUTS) do
                    local r = R.rand({3, 2}, from)
                    if to == "uint8" then r = R.map(r, math.abs) end -- negative -> uint8 is not portable
                    local t = H.make(ordo, r, layout)
                    local c = t:to(to)
                    H.check(c, R.map(r, function(v) return v end, to), nil, nil, from .. " -> " .. to)
                    if from == to then assert.equals(t, c) end
                end
            end
        end
        local t = ordo.tensor({1.7, -2.7})
        assert.same({1, -2}, t:int():totable())
        assert.equals("float64", t:double():dtype())
        assert.equals("int64", t:long():dtype())
        assert.equals("uint8", t:abs():byte():dtype())
        assert.equals("float32", t:int():float():dtype())
    end)

    it("copy_ broadcasts and casts; fill_, zero_, clone, contiguous", function()
        local a = ordo.zeros({2, 3}, {dtype = "int32"})
        a:copy_(ordo.tensor({1.9, 2.1, -3.5}, {dtype = "float64"}))
        assert.same({{1, 2, -3}, {1, 2, -3}}, a:totable())
        a:t():copy_({{1, 2}, {3, 4}, {5, 6}})
        assert.same({{1, 3, 5}, {2, 4, 6}}, a:totable())
        a:narrow(2, 2, 2):fill_(9)
        assert.same({{1, 9, 9}, {2, 9, 9}}, a:totable())
        local b = a:t():clone()
        assert.is_true(b:is_contiguous())
        a:zero_()
        assert.same({{1, 2}, {9, 9}, {9, 9}}, b:totable())
        assert.same({{0, 0, 0}, {0, 0, 0}}, a:totable())
        local t = a:t()
        assert.is_false(t:is_contiguous())
        assert.is_true(t:contiguous():is_contiguous())
        assert.equals(a, a:contiguous())
    end)

    it("arange, full, zeros, ones on every dtype", function()
        for _, dt in ipairs(DTYPES) do
            assert.same({0, 1, 2, 3}, ordo.arange(4, {dtype = dt}):totable())
            assert.same({2, 4, 6}, ordo.arange(2, 8, 2, {dtype = dt}):totable())
            assert.same({{7, 7}}, ordo.full({1, 2}, 7, {dtype = dt}):totable())
            assert.same({0, 0}, ordo.zeros({2}, {dtype = dt}):totable())
            assert.same({1, 1}, ordo.ones(2, {dtype = dt}):totable())
            assert.equals(dt, ordo.ones(2, {dtype = dt}):dtype())
        end
        assert.same({1, 0.5, 0}, ordo.arange(1, -0.25, -0.5, {dtype = "float64"}):totable())
        assert.same({}, ordo.arange(0):totable())
        assert.same({3}, ordo.arange(3, 3.5):totable())
    end)
end)

describe("random numbers", function()
    it("manual_seed makes rand, randn and bernoulli reproducible", function()
        ordo.manual_seed(123)
        local a, b, c = ordo.rand({100}), ordo.randn({3, 3}), ordo.bernoulli({50}, 0.3)
        ordo.manual_seed(123)
        local a2, b2, c2 = ordo.rand({100}), ordo.randn({3, 3}), ordo.bernoulli({50}, 0.3)
        assert.same(a:totable(), a2:totable())
        assert.same(b:totable(), b2:totable())
        assert.same(c:totable(), c2:totable())
        ordo.manual_seed(124)
        assert.are_not.same(a:totable(), ordo.rand({100}):totable())
    end)

    it("manual_seed takes 64-bit seeds (2^63 and up as unsigned) and refuses larger ones instead of aliasing them", function()
        local function first(seed)
            ordo.manual_seed(seed)
            return ordo.rand({4}):totable()
        end
        -- 2^64 - 2048 is the unsigned form of -2048, 2^63 that of -2^63: the same bits, the same numbers
        assert.same(first(-2048), first(2 ^ 64 - 2048))
        assert.same(first(-2 ^ 63), first(2 ^ 63))
        assert.are_not.same(first(2 ^ 62), first(-2 ^ 63))
        -- out of range: these all seeded like -2^63 before
        for _, bad in ipairs({2 ^ 64, 1e300, -2 ^ 63 - 2 ^ 11}) do
            H.raises(function() ordo.manual_seed(bad) end, "manual_seed", "out of range")
        end
        H.raises(function() ordo.manual_seed("3") end, "manual_seed", "string \"3\"")
        -- every 64-bit seed as int64_t/uint64_t cdata, also those a double cannot hold (2^53 + 1, 2^64 - 1)
        assert.same(first(-1), first(0xFFFFFFFFFFFFFFFFULL))
        assert.same(first(-1), first(-1LL))
        assert.same(first(-2 ^ 63), first(0x8000000000000000ULL))
        assert.same(first(2 ^ 53), first(9007199254740992LL))
        assert.are_not.same(first(9007199254740992LL), first(9007199254740993LL))
        H.raises(function() ordo.manual_seed(require("ffi").new("int[1]")) end, "manual_seed", "12LL")
    end)

    it("get_rng_state / set_rng_state: a copy of the generator, set again, replays the same draws", function()
        ordo.manual_seed(4)
        ordo.rand({3})
        local st = ordo.get_rng_state()
        assert.equals("uint8", st:dtype())
        assert.same({32}, st:shape())
        local a = ordo.rand({5}):totable()
        local d = ordo.nn.Dropout(0.5)(ordo.ones({16})):totable()
        local p = ordo.randperm(9):totable()
        ordo.randn({100}) -- draws in between
        ordo.set_rng_state(st)
        assert.same(a, ordo.rand({5}):totable())
        assert.same(d, ordo.nn.Dropout(0.5)(ordo.ones({16})):totable())
        assert.same(p, ordo.randperm(9):totable())
        -- the state is a copy: the draws since did not change it; it goes through a file
        local path = os.tmpname()
        ordo.save({rng = st}, path)
        ordo.set_rng_state(ordo.load(path).rng)
        os.remove(path)
        assert.same(a, ordo.rand({5}):totable())
        -- cpu(1)'s generator is its own
        ordo.set_rng_state(st, "cpu:1")
        assert.same(a, ordo.rand({5}, {device = "cpu:1"}):totable())
        -- another engine's generator, set from a state of the default engine (was copy_'s error)
        local e = ordo.engine.new({kind = "pooled", cpu_workers = 1})
        ordo.set_rng_state(st, {engine = e})
        assert.same(a, ordo.rand({5}, {engine = e}):totable())
        ordo.set_rng_state(ordo.get_rng_state({engine = e}))
        e:close()
        H.raises(function() ordo.set_rng_state(ordo.zeros({32}, "uint8")) end, "set_rng_state",
                 "not a generator state")
        H.raises(function() ordo.set_rng_state(ordo.zeros({31}, "uint8")) end, "set_rng_state",
                 "uint8 tensor of 32 elements", "uint8 of shape 31")
        H.raises(function() ordo.set_rng_state(st:float()) end, "set_rng_state", "float32 of shape 32")
        H.raises(function() ordo.set_rng_state(nil) end, "set_rng_state", "got nil")
        H.raises(function() ordo.get_rng_state("float64") end, "get_rng_state", "no dtype")
    end)

    it("bernoulli with a tensor of probabilities: per element, broadcast to the tensor, checked", function()
        ordo.manual_seed(11)
        local n = 20000
        -- p = 0 never gives a one, p = 1 always; the rest near their p
        local probs = ordo.tensor({0, 1, 0.25, 0.75}, "float64")
        local draws = ordo.bernoulli(probs:view(1, 4):expand(n, 4):contiguous())
        assert.equals("float64", draws:dtype())
        local freq = draws:mean(1):totable()
        assert.equals(0, freq[1])
        assert.equals(1, freq[2])
        assert.is_true(math.abs(freq[3] - 0.25) < 0.02, "p 0.25: " .. freq[3])
        assert.is_true(math.abs(freq[4] - 0.75) < 0.02, "p 0.75: " .. freq[4])
        -- t:bernoulli_(p) broadcasts p along t's leading dims, into t's dtype
        local t = ordo.zeros({n, 4}, "int32"):bernoulli_(probs:float())
        assert.equals("int32", t:dtype())
        local tf = t:double():mean(1):totable()
        assert.same({0, 1}, {tf[1], tf[2]})
        assert.is_true(math.abs(tf[3] - 0.25) < 0.02 and math.abs(tf[4] - 0.75) < 0.02)
        -- t:bernoulli() draws with t's probabilities; reproducible with manual_seed
        ordo.manual_seed(3)
        local a = ordo.full({100}, 0.5):bernoulli()
        ordo.manual_seed(3)
        assert.same(a:totable(), ordo.bernoulli(ordo.full({100}, 0.5)):totable())
        -- probabilities that need a gradient give a result without one (and are allowed in bernoulli_)
        local pg = ordo.full({8}, 0.5):requires_grad()
        assert.is_nil(ordo.bernoulli(pg):grad_fn())
        ordo.zeros({8}):bernoulli_(pg * 1)
        -- refused, naming what was wrong, and the tensor left as it was: a probability out of range at run time
        -- (checked on the device, no host wait), at the wait that meets it
        local keep = ordo.full({4}, 7)
        keep:bernoulli_(ordo.tensor({0.5, 1.5, 0, 0}))
        H.raises(function() return keep:totable() end, "bernoulli_", "value 1.5 at element 2 is outside [0, 1]")
        assert.same({7, 7, 7, 7}, keep:totable())
        keep:bernoulli_(ordo.tensor({0.5, 0 / 0, 0, 0}))
        H.raises(function() return keep:totable() end, "bernoulli_", "nan at element 2 is outside [0, 1]")
        local fresh = ordo.bernoulli(ordo.tensor({-0.5}))
        H.raises(function() return fresh:item() end, "bernoulli", "value -0.5 at element 1")
        H.raises(function() return fresh:item() end, "bernoulli", "never computed") -- (it holds nothing)
        H.raises(function() keep:bernoulli_(ordo.tensor({1, 0, 1, 0}, "int32")) end, "bernoulli_", "int32")
        H.raises(function() keep:bernoulli_(ordo.full({3}, 0.5)) end, "bernoulli_", "shape 3", "shape 4")
        H.raises(function() keep:bernoulli_(ordo.full({2, 4}, 0.5)) end, "bernoulli_", "2x4", "broadcast")
        H.raises(function() ordo.bernoulli(ordo.full({2}, 0.5), 0.5) end, "bernoulli", "no other argument")
        assert.same({7, 7, 7, 7}, keep:totable())
        -- an expanded tensor is refused in bernoulli_'s name (it was copy_'s), before any draw
        ordo.manual_seed(5)
        local want = ordo.rand({3}):totable()
        ordo.manual_seed(5)
        H.raises(function() ordo.zeros({1}):expand(4):bernoulli_(ordo.full({4}, 0.5)) end,
                 "bernoulli_: cannot write into an expanded view (shape 4 with a stride of 0)")
        assert.same(want, ordo.rand({3}):totable())
    end)

    it("rand_like and randn_like: t's shape, dtype and device (opts override), the same stream as rand", function()
        local t = ordo.zeros({20, 30}, "float64")
        ordo.manual_seed(4)
        local a = ordo.rand_like(t)
        ordo.manual_seed(4)
        assert.same(ordo.rand({20, 30}, "float64"):totable(), a:totable())
        assert.same({20, 30}, a:shape())
        assert.equals("float64", a:dtype())
        ordo.manual_seed(4)
        local b = ordo.randn_like(t, {dtype = "float32"})
        assert.equals("float32", b:dtype())
        ordo.manual_seed(4)
        assert.same(ordo.randn({20, 30}):totable(), b:totable())
        H.raises(function() return ordo.rand_like(ordo.zeros({2}, "int32")) end,
                 "rand_like: dtype int32 not supported (expected float32 or float64)")
        H.raises(function() return ordo.randn_like({2}) end, "randn_like: expected a tensor")
    end)

    it("uniform_ stays in [low, high); normal_ has the asked mean and std; bernoulli_ the asked p", function()
        ordo.manual_seed(7)
        local n = 20000
        local u = ordo.empty({n}, {dtype = "float64"}):uniform_(-2, 3)
        local lo, hi = u:min():item(), u:max():item()
        assert.is_true(lo >= -2 and hi < 3)
        assert.is_true(math.abs(u:mean():item() - 0.5) < 0.05)
        local g = ordo.empty({n}):normal_(1, 2)
        local m = g:mean():item()
        local sd = math.sqrt(((g - m) * (g - m)):mean():item())
        assert.is_true(math.abs(m - 1) < 0.05, "mean " .. m)
        assert.is_true(math.abs(sd - 2) < 0.05, "std " .. sd)
        for _, dt in ipairs(DTYPES) do
            local b = ordo.empty({n}, {dtype = dt}):bernoulli_(0.25)
            local p = b:double():mean():item()
            assert.is_true(math.abs(p - 0.25) < 0.02, dt .. " p " .. p)
            assert.equals(n, (b:eq(0) + b:eq(1)):sum():item())
        end
        local r = ordo.randn({2, 3}, {dtype = "float64"})
        assert.equals("float64", r:dtype())
        -- a bound that is not a number is named by its type (a string "0" was shown as 0)
        H.raises(function() ordo.empty({2}):uniform_("0", 1) end, "uniform_", 'got string "0" and 1')
        H.raises(function() ordo.empty({2}):normal_(0, "1") end, "normal_", 'got 0 and string "1"')
        -- float32 bounds past its range (Torch refuses them): draws past it came out as 3.4e38, or inf
        H.raises(function() ordo.empty({2}):uniform_(-1e39, 1e39) end, "uniform_", "does not fit in float32")
        H.raises(function() ordo.empty({2}):uniform_(-3e38, 3e38) end, "uniform_", "does not fit in float32")
        H.raises(function() ordo.empty({2}):normal_(0, 1e39) end, "normal_", "do not fit in float32")
        assert.is_true(ordo.empty({100}, "float64"):uniform_(-1e39, 1e39):abs():max():item() > 3.5e38)
        local near = ordo.empty({100}):uniform_(-3.4e38, 0)
        assert.is_true(near:min():item() >= -3.4e38 and near:max():item() < 0)
        -- into a non-contiguous view: only the view's elements change
        local base = ordo.zeros({4, 4})
        base:t():narrow(1, 2, 2):uniform_(1, 2)
        local tb = base:totable()
        for i = 1, 4 do
            for j = 1, 4 do
                local inside = (j == 2 or j == 3)
                assert.is_true(inside == (tb[i][j] >= 1), "element " .. i .. "," .. j)
            end
        end
    end)
end)
