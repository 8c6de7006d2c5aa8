-- A sweep of every differentiable op and nn function against central
-- differences (autograd.gradcheck, float64): elementwise ops under every
-- kind of broadcasting (size-1 dims, 0-dim tensors, numbers on either
-- side), reductions over every dim (negative ones, keepdim, lists of
-- dims), indexing, views, products, cat/stack/split, softmax, norms,
-- activations, every loss with every reduction and its weights,
-- convolution and pooling (stride, padding, dilation, groups),
-- normalisation in training and evaluation, recurrent layers, attention;
-- then the values Torch's conventions give at the kinks (ties, 0, the
-- bounds), and the same gradients from contiguous, expanded and
-- transposed seeds; and that a value changed in place before backward is
-- reported, never turned into a wrong gradient.  Each group runs all of its
-- cases and reports every failing one by name.  Fast: small tensors, a few
-- seconds in all.
local ordo = require "ordo"
local ag = ordo.autograd
local nn = ordo.nn
local F = nn.functional

local D = {dtype = "float64"}

local function leaf(t) return t:requires_grad() end
local function randn(...) return leaf(ordo.randn({...}, D)) end
local function pos(...) return leaf(ordo.rand({...}, D):add(0.5)) end          -- in [0.5, 1.5)
local function unit(...) return leaf(ordo.rand({...}, D):mul(1.6):sub(0.8)) end -- in [-0.8, 0.8)
local function prob(...) return leaf(ordo.rand({...}, D):mul(0.8):add(0.1)) end -- in [0.1, 0.9)
local function scalar(v) return leaf(ordo.tensor(v, D)) end
local function I(t) return ordo.tensor(t, "int64") end
-- distinct values kept apart (none at 0 or at +-1, +-2): max, abs, relu,
-- clamp and the sorts are differentiable at them
local function spread(...)
    local shape = {...}
    local n = 1
    for _, s in ipairs(shape) do n = n * s end
    local vals = {}
    for i = 1, n do vals[i] = ((i * 7919) % n - n / 2 + 0.25) / n * 4 end
    return leaf(ordo.tensor(vals, D):reshape(shape))
end
-- y weighted by 1, 2, 3...: permuting or dropping elements changes the sum
local function weighted(y)
    return y * ordo.arange(1, y:numel() + 1, D):view(y:shape())
end

-- Runs every case {name, fn, inputs [, opts]} and fails once, naming each
-- case whose gradient (or whose call) went wrong.
local function sweep(cases)
    local failed = {}
    for _, c in ipairs(cases) do
        local ok, err = pcall(ag.gradcheck, c[2], c[3], c[4])
        if not ok then failed[#failed + 1] = c[1] .. ": " .. tostring(err) end
    end
    assert(#failed == 0, #failed .. " of " .. #cases .. " cases failed:\n" .. table.concat(failed, "\n"))
end

describe("autograd sweep: every op against central differences (float64)", function()
    before_each(function() ordo.manual_seed(3) end)

    it("elementwise binary ops under broadcasting (size-1 dims, 0-dim tensors, numbers on either side)", function()
        local cases = {}
        local shapes = {{{3, 4}, {4}}, {{3, 1}, {1, 4}}, {{2, 3, 4}, {3, 1}}, {{3, 4}, {}}, {{}, {3, 4}}, {{}, {}},
                        {{1}, {3, 1}}, {{2, 1, 4}, {2, 3, 1}}}
        for _, op in ipairs({"add", "sub", "mul", "div", "maximum", "minimum", "pow"}) do
            for _, sh in ipairs(shapes) do
                local a = #sh[1] == 0 and scalar(0.83) or (op == "pow" and pos(unpack(sh[1])) or spread(unpack(sh[1])))
                local b = #sh[2] == 0 and scalar(1.37) or (op == "div" and pos(unpack(sh[2])) or randn(unpack(sh[2])))
                local tag = op .. " " .. table.concat(sh[1], "x") .. " " .. table.concat(sh[2], "x")
                cases[#cases + 1] = {tag, function(x, y) return x[op](x, y) end, {a, b}}
                cases[#cases + 1] = {tag .. " number", function(x) return x[op](x, 1.3) end, {a}}
            end
        end
        local a, b, p = randn(3, 4), randn(4), pos(3, 4)
        for _, c in ipairs({
            {"+", function(x, y) return x + y end, {a, b}}, {"-", function(x, y) return x - y end, {a, b}},
            {"*", function(x, y) return x * y end, {a, b}}, {"/", function(x, y) return x / y end, {a, pos(4)}},
            {"^", function(x, y) return x ^ y end, {p, b}}, {"unary -", function(x) return -x end, {a}},
            {"number - t", function(x) return 2 - x end, {a}}, {"number / t", function(x) return 2 / x end, {p}},
            {"number ^ t", function(y) return 2 ^ y end, {b}}, {"t ^ t (same)", function(x) return x ^ x end, {p}},
            {"add alpha", function(x, y) return x:add(y, 0.5) end, {a, b}},
            {"sub alpha", function(x, y) return x:sub(y, 2) end, {a, b}},
            {"x * x", function(x) return x * x end, {a}},
            {"t % t", function(x, y) return x % y end, {pos(3), leaf(ordo.tensor({2.1, 1.7, 3.3}, D))}},
            {"number % t", function(y) return 7.5 % y end, {leaf(ordo.tensor({1.3, 2.7, -1.9}, D))}},
            {"fmod", function(x) return x:fmod(0.3) end, {pos(5)}},
            {"fmod divisor", function(y) return ordo.tensor({7.5, -3.2, 4}, D):fmod(y) end,
             {leaf(ordo.tensor({1.3, 2.7, -1.9}, D))}},
            {"remainder broadcast", function(x, y) return x:remainder(y) end,
             {leaf(ordo.tensor({{7.5}, {-3.2}}, D)), leaf(ordo.tensor({1.3, 2.7, -1.9}, D))}},
            {"lerp", function(x, y, w) return x:lerp(y, w) end, {randn(3, 4), randn(4), unit(3, 1)}},
            {"lerp number weight", function(x, y) return x:lerp(y, 0.3) end, {randn(3, 4), randn(4)}},
            {"where", function(x, y) return ordo.where(ordo.tensor({1, 0, 1, 1}, "uint8"), x, y) end,
             {randn(3, 4), randn(3, 1)}},
            {"where 0-dim y", function(x, y) return ordo.where(ordo.tensor({1, 0, 1, 1}, "uint8"), x, y) end,
             {randn(3, 4), scalar(5)}},
            {"where number y", function(x) return x:where(ordo.tensor({1, 0, 1, 1}, "uint8"), 2) end, {randn(3, 4)}},
            {"masked_fill", function(x) return x:masked_fill(ordo.tensor({1, 0, 1, 1}, "uint8"), 2) end, {randn(3, 4)}},
            {"masked_fill tensor value", function(x, v) return x:masked_fill(ordo.tensor({{1}, {0}}, "uint8"), v) end,
             {randn(2, 3), leaf(ordo.tensor({5}, D))}},
            {"clamp numbers", function(x) return x:clamp(-0.5, 0.5) end, {spread(3, 4)}},
            {"clamp max only", function(x) return x:clamp(nil, 0.3) end, {spread(3, 4)}},
            {"clamp crossed bounds", function(x) return x:clamp(1, -1) end, {spread(3, 4)}},
            {"clamp tensor bounds", function(x, l, h) return x:clamp(l, h) end,
             {spread(3, 4), leaf(ordo.full({4}, -0.3, D)), leaf(ordo.full({3, 1}, 0.4, D))}},
            {"nan_to_num", function(x) return x:nan_to_num() end, {randn(3)}},
        }) do cases[#cases + 1] = c end
        sweep(cases)
    end)

    it("unary ops, on 0-dim and non-contiguous tensors and as ordo.f(t)", function()
        local cases = {}
        for _, op in ipairs({"neg", "abs", "relu", "exp", "log", "sqrt", "tanh", "sigmoid", "square", "sin", "cos",
                             "tan", "log1p", "expm1", "rsqrt", "reciprocal", "asin", "acos", "atan", "sinh", "cosh",
                             "asinh", "acosh", "atanh", "erf", "erfc", "log2", "log10", "sign", "floor", "ceil",
                             "round", "trunc"}) do
            local x, v
            if ({log = 1, sqrt = 1, rsqrt = 1, log2 = 1, log10 = 1, reciprocal = 1, log1p = 1})[op] then
                x, v = pos(3, 4), 0.6
            elseif op == "asin" or op == "acos" or op == "atanh" then
                x, v = unit(3, 4), 0.6
            elseif op == "acosh" then
                x, v = leaf(ordo.rand({3, 4}, D):add(1.7)), 1.5
            else
                x, v = spread(3, 4), 0.6
            end
            cases[#cases + 1] = {op, function(t) return t[op](t) end, {x}}
            cases[#cases + 1] = {op .. " 0-dim", function(t) return t[op](t) end, {scalar(v)}}
            cases[#cases + 1] = {op .. " transposed", function(t) local u = t:t() return u[op](u) end, {x}}
            cases[#cases + 1] = {"ordo." .. op, function(t) return ordo[op](t) end, {x}}
        end
        sweep(cases)
    end)

    it("reductions over everything, each dim (negative too), keepdim and lists of dims", function()
        local cases = {}
        local x = spread(2, 3, 4)
        for _, op in ipairs({"sum", "mean", "prod", "logsumexp", "amax", "amin", "var", "std"}) do
            cases[#cases + 1] = {op, function(t) return t[op](t) end, {x}}
            cases[#cases + 1] = {op .. " 0-dim", function(t) return t[op](t) end, {scalar(0.6)}}
            for _, d in ipairs({1, 2, 3, -1, -2, -3}) do
                cases[#cases + 1] = {op .. " dim " .. d, function(t) return weighted(t[op](t, d)) end, {x}}
                cases[#cases + 1] = {op .. " dim " .. d .. " keepdim", function(t) return weighted(t[op](t, d, true)) end,
                                     {x}}
            end
            if op ~= "prod" then
                cases[#cases + 1] = {op .. " dims {1, 3}", function(t) return weighted(t[op](t, {1, 3})) end, {x}}
                cases[#cases + 1] = {op .. " dims {-1, 2} keepdim",
                                     function(t) return weighted(t[op](t, {-1, 2}, true)) end, {x}}
            end
        end
        -- (var and std of one element are NaN, as Torch's: not in the 0-dim cases above)
        for i = #cases, 1, -1 do
            if cases[i][1] == "var 0-dim" or cases[i][1] == "std 0-dim" then table.remove(cases, i) end
        end
        for _, c in ipairs({
            {"var correction 0", function(t) return t:var(2, false, 0) end, {x}},
            {"std correction 0", function(t) return t:std(nil, false, 0) end, {x}},
            {"var dims correction 2", function(t) return t:var({1, 3}, false, 2) end, {x}},
            {"prod keepdim, no dim", function(t) return t:prod(nil, true) end, {x}},
            {"prod with a zero", function(t) return t:prod() end, {leaf(ordo.tensor({1.5, 0, 2, 3}, D))}},
            {"prod with two zeros", function(t) return t:prod() end, {leaf(ordo.tensor({1.5, 0, 2, 0}, D))}},
            {"prod dim with zeros", function(t) return t:prod(2) end,
             {leaf(ordo.tensor({{1.5, 0, 2}, {0, 0, 1}, {1, 2, 3}}, D))}},
            {"logsumexp large", function(t) return t:logsumexp(1) end, {leaf(ordo.tensor({{1000, 1001}, {-3, 2}}, D))}},
        }) do cases[#cases + 1] = c end
        for _, d in ipairs({1, 2, 3, -1, -2, -3}) do
            for _, op in ipairs({"max", "min", "median"}) do
                cases[#cases + 1] = {op .. " dim " .. d, function(t) return weighted((t[op](t, d))) end, {x}}
                cases[#cases + 1] = {op .. " dim " .. d .. " keepdim", function(t) return weighted((t[op](t, d, true))) end,
                                     {x}}
            end
            cases[#cases + 1] = {"kthvalue dim " .. d, function(t) return weighted((t:kthvalue(2, d))) end, {x}}
            cases[#cases + 1] = {"topk dim " .. d, function(t) return weighted((t:topk(2, d))) end, {x}}
            cases[#cases + 1] = {"topk smallest dim " .. d, function(t) return weighted((t:topk(2, d, false))) end, {x}}
            cases[#cases + 1] = {"sort dim " .. d, function(t) return weighted((t:sort(d, true))) end, {x}}
            cases[#cases + 1] = {"cumsum dim " .. d, function(t) return weighted(t:cumsum(d)) end, {x}}
            cases[#cases + 1] = {"cumprod dim " .. d, function(t) return weighted(t:cumprod(d)) end, {x}}
            cases[#cases + 1] = {"softmax dim " .. d, function(t) return weighted(t:softmax(d)) end, {x}}
            cases[#cases + 1] = {"log_softmax dim " .. d, function(t) return weighted(t:log_softmax(d)) end, {x}}
            cases[#cases + 1] = {"norm 3 dim " .. d, function(t) return weighted(t:norm(3, d)) end, {x}}
            cases[#cases + 1] = {"norm 1 dim " .. d .. " keepdim", function(t) return weighted(t:norm(1, d, true)) end, {x}}
        end
        for _, p in ipairs({1, 2, 3, 0.5, 1.5, "inf", "-inf"}) do
            cases[#cases + 1] = {"norm " .. p, function(t) return t:norm(p) end, {x}}
            cases[#cases + 1] = {"norm " .. p .. " dims keepdim", function(t) return weighted(t:norm(p, {1, 3}, true)) end,
                                 {x}}
        end
        for _, c in ipairs({
            {"max", function(t) return t:max() end, {x}}, {"min", function(t) return t:min() end, {x}},
            {"median", function(t) return t:median() end, {x}},
            {"cumprod with zeros", function(t) return t:cumprod(1) end, {leaf(ordo.tensor({1.5, 0, 2, 0, 3}, D))}},
            {"cumsum, cumprod, sort of 0-dim", function(t) return t:cumsum() + t:cumprod() + (t:sort()) end,
             {scalar(2)}},
            {"softmax 0-dim", function(t) return t:softmax() end, {scalar(0.3)}},
            {"argsort to gather", function(t) return weighted(t:gather(1, t:argsort())) end,
             {leaf(ordo.tensor({3, 1, 2}, D))}},
        }) do cases[#cases + 1] = c end
        sweep(cases)
    end)

    it("indexing: gather, scatter, index_select, index_add, masked ops, t[i] and t[{...}], embedding", function()
        local x = randn(3, 4, 5)
        local function idx3(t, shape) return I(t):view(shape) end
        sweep({
            {"gather dim 1", function(t) return t:gather(1, idx3({{1, 2, 3, 1, 2}, {3, 3, 1, 2, 2}}, {2, 1, 5})
                :expand(2, 4, 5):contiguous()) end, {x}},
            {"gather repeated index", function(t) return t:gather(3, idx3({1, 1, 5, 2}, {1, 1, 4}):expand(3, 4, 4)
                :contiguous()) end, {x}},
            {"gather dim -1", function(t) return t:gather(-1, idx3({1, 1, 5, 2}, {1, 1, 4}):expand(3, 4, 4)
                :contiguous()) end, {x}},
            {"index_select repeated", function(t) return t:index_select(2, I({4, 1, 1})) end, {x}},
            {"index_select Lua table", function(t) return t:index_select(3, {5, 1, 5}) end, {x}},
            {"index_select int32", function(t) return t:index_select(1, ordo.tensor({3, 3}, "int32")) end, {x}},
            {"index_select dim -1", function(t) return t:index_select(-1, {2, 2}) end, {x}},
            {"scatter tensor", function(t, s) return t:scatter(2, idx3({1, 3, 2}, {1, 3, 1}):expand(3, 3, 5)
                :contiguous(), s) end, {x, randn(3, 3, 5)}},
            -- (repeated indices: one source wins, yet each gets the gradient, as Torch's: not a derivative;
            -- tensor_derived_spec checks that rule)
            {"scatter number", function(t) return t:scatter(2, idx3({1, 3}, {1, 2, 1}):expand(3, 2, 5):contiguous(), 2.5)
            end, {x}},
            {"scatter_add", function(t, s) return t:scatter_add(2, idx3({1, 1, 2}, {1, 3, 1}):expand(3, 3, 5)
                :contiguous(), s) end, {x, randn(3, 3, 5)}},
            {"scatter_add larger src", function(t, s) return t:scatter_add(2, idx3({1, 1, 2}, {1, 3, 1})
                :expand(3, 3, 5):contiguous(), s) end, {x, randn(3, 4, 6)}},
            {"index_add", function(t, s) return t:index_add(2, I({4, 1, 4}), s) end, {x, randn(3, 3, 5)}},
            {"masked_select", function(t) return weighted(t:masked_select(ordo.tensor({1, 0, 1, 1, 0}, "uint8"))) end,
             {x}},
            {"masked_fill broadcast mask", function(t) return t:masked_fill(ordo.tensor({1, 0, 1, 1, 0}, "uint8"), -1) end,
             {x}},
            {"t[i]", function(t) return t[2] end, {x}},
            {"t[-1]", function(t) return t[-1] end, {x}},
            {"t[{{}, 2}]", function(t) return t[{{}, 2}] end, {x}},
            {"t[{{2, 3}, {1, -2}, 3}]", function(t) return t[{{2, 3}, {1, -2}, 3}] end, {x}},
            {"t[{{2}, {}, {4}}]", function(t) return t[{{2}, {}, {4}}] end, {x}},
            {"nonzero as an index", function(t) return t:index_select(1, I({0, 1, 1}):nonzero():view(-1)) end, {x}},
            {"one_hot product", function(t) return F.one_hot(I({1, 3, 2}), 4):double() * t end, {randn(3, 4)}},
            {"embedding", function(w) return F.embedding(I({{1, 3}, {3, 3}}), w) end, {randn(4, 3)}},
            {"repeat_interleave counts", function(t) return weighted(t:repeat_interleave(I({1, 0, 2, 3}), 2)) end, {x}},
            {"repeat_interleave flat", function(t) return weighted(t:repeat_interleave(3)) end, {randn(2, 2)}},
        })
    end)

    it("views and rearrangements, of non-contiguous tensors too", function()
        local x = randn(3, 4, 5)
        local cases = {
            {"transpose", function(t) return weighted(t:transpose(1, 3)) end, {x}},
            {"transpose negative dims", function(t) return weighted(t:transpose(-1, -2)) end, {x}},
            {"t", function(t) return weighted(t:t()) end, {randn(3, 4)}},
            {"permute list", function(t) return weighted(t:permute({3, 1, 2})) end, {x}},
            {"permute args", function(t) return weighted(t:permute(2, 3, 1)) end, {x}},
            {"permute negative", function(t) return weighted(t:permute(-1, 1, 2)) end, {x}},
            {"expand", function(t) return weighted(t:expand(2, 3, 4)) end, {randn(3, 1)}},
            {"expand -1", function(t) return weighted(t:expand(2, -1, 4)) end, {randn(3, 1)}},
            {"expand 0-dim", function(t) return weighted(t:expand(2, 3)) end, {scalar(1.5)}},
            {"expand_as", function(t) return weighted(t:expand_as(ordo.zeros({2, 3, 4}))) end, {randn(1, 4)}},
            {"reshape of a transposed view", function(t) return weighted(t:transpose(1, 2):reshape(4, 15)) end, {x}},
            {"reshape -1", function(t) return weighted(t:reshape(-1, 5):t()) end, {x}},
            {"view", function(t) return weighted(t:view(5, 12)) end, {x}},
            {"view table", function(t) return weighted(t:view({12, 5})) end, {x}},
            {"flatten", function(t) return weighted(t:flatten(2)) end, {x}},
            {"flatten 1 2", function(t) return weighted(t:flatten(1, 2)) end, {x}},
            {"squeeze", function(t) return weighted(t:squeeze()) end, {randn(3, 1, 4, 1)}},
            {"squeeze dim", function(t) return weighted(t:squeeze(2)) end, {randn(3, 1, 4, 1)}},
            {"squeeze dims", function(t) return weighted(t:squeeze({2, 4})) end, {randn(3, 1, 4, 1)}},
            {"flip", function(t) return weighted(t:flip({1, 3})) end, {x}},
            {"roll", function(t) return weighted(t:roll(2, 3)) end, {x}},
            {"roll flattened", function(t) return weighted(t:roll(-7)) end, {x}},
            {"roll several", function(t) return weighted(t:roll({1, -1}, {1, 2})) end, {x}},
            {"tile", function(t) return weighted(t:tile({2, 1, 3})) end, {x}},
            {"tile with fewer dims", function(t) return weighted(t:tile({2, 2})) end, {randn(3)}},
            {"tile 0-dim", function(t) return weighted(t:tile({3})) end, {scalar(2)}},
            {"tril", function(t) return t:tril() end, {randn(4, 4)}},
            {"triu batched", function(t) return t:triu(1) end, {randn(2, 4, 4)}},
            {"tril -1", function(t) return t:tril(-1) end, {randn(3, 5)}},
            {"diag of a matrix", function(t) return t:diag() end, {randn(3, 4)}},
            {"diag of a vector", function(t) return weighted(t:diag()) end, {randn(3)}},
            {"trace", function(t) return t:trace() end, {randn(4, 2)}},
            {"contiguous", function(t) return weighted(t:t():contiguous()) end, {randn(3, 4)}},
            {"clone", function(t) return t:clone() * 2 end, {randn(3, 4)}},
            {"double, type_as, type, cpu, to(u)", function(t)
                return t:double() + t:type_as(ordo.zeros({1}, D)) + t:type("ordo.DoubleTensor") + t:cpu()
                    + t:to(ordo.zeros({1}, D))
            end, {randn(3, 4)}},
            {"meshgrid", function(a, b) local p, q = ordo.meshgrid(a, b) return p * q + p end, {randn(3), randn(4)}},
            {"meshgrid xy", function(a, b) local p, q = ordo.meshgrid(a, b, {indexing = "xy"}) return p * 2 + q * q end,
             {randn(2), randn(3)}},
            {"Flatten, Unflatten", function(t) return weighted(nn.Unflatten(2, {2, 3})(nn.Flatten()(t))) end,
             {randn(2, 3, 2)}},
        }
        for _, d in ipairs({1, 2, 3, -1, -2, -3}) do
            for _, c in ipairs({
                {"narrow", function(t) return weighted(t:narrow(d, 2, 2)) end},
                {"select", function(t) return weighted(t:select(d, 2)) end},
                {"select from the end", function(t) return weighted(t:select(d, -1)) end},
                {"unsqueeze", function(t) return weighted(t:unsqueeze(d)) end},
                {"unsqueeze then squeeze", function(t) return weighted(t:unsqueeze(d):squeeze(d)) end},
                {"flip", function(t) return weighted(t:flip({d})) end},
                {"roll", function(t) return weighted(t:roll(1, d)) end},
                {"repeat_interleave", function(t) return weighted(t:repeat_interleave(2, d)) end},
                {"flatten to", function(t) return weighted(t:flatten(1, d)) end},
                {"unfold overlapping", function(t) return weighted(t:unfold(d, 2, 1)) end},
                {"unfold with gaps", function(t) return weighted(t:unfold(d, 1, 2)) end},
            }) do cases[#cases + 1] = {c[1] .. " dim " .. d, c[2], {x}} end
        end
        sweep(cases)
    end)

    it("matmul (1-D to 4-D, broadcast batches), mm, bmm, mv, dot, outer, addmm, baddbmm, einsum", function()
        sweep({
            {"matmul 2-D", function(a, b) return a:matmul(b) end, {randn(3, 4), randn(4, 5)}},
            {"matmul transposed operands", function(a, b) return a:t():matmul(b:t()) end, {randn(4, 3), randn(5, 4)}},
            {"matmul 1-D 1-D", function(a, b) return a:matmul(b) end, {randn(4), randn(4)}},
            {"matmul 1-D 2-D", function(a, b) return a:matmul(b) end, {randn(4), randn(4, 3)}},
            {"matmul 2-D 1-D", function(a, b) return a:matmul(b) end, {randn(3, 4), randn(4)}},
            {"matmul 3-D 2-D", function(a, b) return a:matmul(b) end, {randn(2, 3, 4), randn(4, 5)}},
            {"matmul 2-D 3-D", function(a, b) return a:matmul(b) end, {randn(3, 4), randn(2, 4, 5)}},
            {"matmul 3-D 1-D", function(a, b) return a:matmul(b) end, {randn(2, 3, 4), randn(4)}},
            {"matmul 1-D 3-D", function(a, b) return a:matmul(b) end, {randn(3), randn(2, 3, 4)}},
            {"matmul batch of 1", function(a, b) return a:matmul(b) end, {randn(1, 3, 4), randn(2, 4, 5)}},
            {"matmul 4-D broadcast", function(a, b) return a:matmul(b) end, {randn(2, 1, 3, 4), randn(3, 4, 2)}},
            {"matmul 4-D 1-D", function(a, b) return a:matmul(b) end, {randn(2, 2, 3, 4), randn(4)}},
            {"matmul 1-D 4-D", function(a, b) return a:matmul(b) end, {randn(3), randn(2, 2, 3, 4)}},
            {"ordo.matmul a a", function(a) return ordo.matmul(a, a) end, {randn(3, 3)}},
            {"mm", function(a, b) return a:mm(b) end, {randn(3, 4), randn(4, 5)}},
            {"bmm", function(a, b) return a:bmm(b) end, {randn(2, 3, 4), randn(2, 4, 5)}},
            {"bmm transposed", function(a, b) return a:transpose(2, 3):bmm(b) end, {randn(2, 4, 3), randn(2, 4, 5)}},
            {"mv", function(a, v) return a:mv(v) end, {randn(3, 4), randn(4)}},
            {"mv transposed", function(a, v) return a:t():mv(v) end, {randn(3, 4), randn(3)}},
            {"dot", function(a, b) return a:dot(b) end, {randn(4), randn(4)}},
            {"dot self", function(a) return a:dot(a) end, {randn(4)}},
            {"outer", function(a, b) return a:outer(b) end, {randn(4), randn(3)}},
            {"addmm", function(c, a, b) return c:addmm(a, b) end, {randn(3, 5), randn(3, 4), randn(4, 5)}},
            {"addmm broadcast c, beta, alpha", function(c, a, b) return c:addmm(a, b, {beta = 0.5, alpha = 2}) end,
             {randn(5), randn(3, 4), randn(4, 5)}},
            {"baddbmm", function(c, a, b) return c:baddbmm(a, b, {beta = 0.5, alpha = -1}) end,
             {randn(2, 3, 5), randn(2, 3, 4), randn(2, 4, 5)}},
            {"baddbmm broadcast c", function(c, a, b) return c:baddbmm(a, b) end,
             {randn(3, 1), randn(2, 3, 4), randn(2, 4, 5)}},
            {"einsum bij,bjk->bik", function(a, b) return ordo.einsum("bij,bjk->bik", a, b) end,
             {randn(2, 3, 4), randn(2, 4, 5)}},
            {"einsum implicit output", function(a, b) return ordo.einsum("ij,jk", a, b) end, {randn(3, 4), randn(4, 5)}},
            {"einsum transpose", function(a) return weighted(ordo.einsum("ij->ji", a)) end, {randn(3, 4)}},
            {"einsum sum", function(a) return ordo.einsum("ijk->j", a) end, {randn(3, 4, 5)}},
            {"einsum outer", function(a, b) return ordo.einsum("i,j->ij", a, b) end, {randn(3), randn(4)}},
            {"einsum three operands", function(a, b, c) return ordo.einsum("ij,jk,kl->il", a, b, c) end,
             {randn(2, 3), randn(3, 4), randn(4, 2)}},
            {"einsum one operand twice", function(a) return ordo.einsum("ij,ij->i", a, a) end, {randn(3, 4)}},
            {"einsum to a scalar", function(a, b) return ordo.einsum("i,i->", a, b) end, {randn(3), randn(3)}},
            {"einsum attention scores", function(q, k) return ordo.einsum("bhqd,bhkd->bhqk", q, k) end,
             {randn(2, 2, 3, 4), randn(2, 2, 5, 4)}},
            {"einsum letters summed alone", function(a, b) return ordo.einsum("ij,kl->ik", a, b) end,
             {randn(2, 3), randn(4, 5)}},
        })
    end)

    it("cat, stack, split, chunk (every dim), an input listed twice", function()
        local x = randn(3, 4, 5)
        local cases = {
            {"cat dim 2", function(a, b) return weighted(ordo.cat({a, b}, 2)) end, {x, randn(3, 3, 5)}},
            {"cat default dim", function(a, b) return weighted(ordo.cat({a, b})) end, {x, randn(1, 4, 5)}},
            {"cat one tensor twice", function(a) return weighted(ordo.cat({a, a}, 1)) end, {x}},
            {"cat three, dim -1", function(a, b) return weighted(ordo.cat({a, b, a}, -1)) end, {x, randn(3, 4, 2)}},
            {"stack default dim", function(a, b) return weighted(ordo.stack({a, b})) end, {x, randn(3, 4, 5)}},
            {"chunk", function(t) local c = t:chunk(2, 2) return c[1] * 2 + c[2]:narrow(2, 1, 2) end, {x}},
            {"chunk uneven", function(t) local c = t:chunk(3, 3) return weighted(ordo.cat({c[3], c[1]}, 3)) end, {x}},
            {"split lengths", function(t) local c = t:split({1, 3}, 2) return c[2]:sum(2) * c[1] end, {x}},
            {"split size", function(t) return weighted(t:split(2, 3)[3]) end, {x}},
        }
        for _, d in ipairs({1, 2, 3, -1, -2, -3}) do
            cases[#cases + 1] = {"cat dim " .. d, function(t) return weighted(ordo.cat({t, t * 2}, d)) end, {x}}
            cases[#cases + 1] = {"stack dim " .. d, function(t) return weighted(ordo.stack({t, t * 2}, d)) end, {x}}
            cases[#cases + 1] = {"chunk dim " .. d, function(t) return weighted(t:chunk(2, d)[1]) end, {x}}
            cases[#cases + 1] = {"split dim " .. d, function(t) return weighted(t:split(1, d)[2]) end, {x}}
        end
        sweep(cases)
    end)

    it("activations and nn.functional's elementwise ops", function()
        local cases = {}
        for _, a in ipairs({"relu", "tanh", "sigmoid", "silu", "gelu", "leaky_relu", "softplus", "logsigmoid", "elu",
                            "selu", "relu6", "hardsigmoid", "hardswish", "mish", "softsign"}) do
            cases[#cases + 1] = {a, function(t) return F[a](t) end, {spread(3, 5)}}
        end
        for _, c in ipairs({
            {"hardtanh", function(t) return F.hardtanh(t) end, {spread(3, 4)}},
            {"hardtanh bounds", function(t) return F.hardtanh(t, -0.5, 1.5) end, {spread(3, 5)}},
            {"gelu tanh", function(t) return F.gelu(t, "tanh") end, {spread(3, 5)}},
            {"leaky_relu 0.2", function(t) return F.leaky_relu(t, 0.2) end, {spread(3, 5)}},
            {"softplus beta threshold", function(t) return F.softplus(t, 2, 1) end, {spread(3, 5)}},
            {"softplus past the threshold", function(t) return F.softplus(t * 30) end, {spread(3, 5)}},
            {"elu alpha", function(t) return F.elu(t, 0.5) end, {spread(3, 5)}},
            {"prelu one weight", function(t, w) return F.prelu(t, w) end, {spread(2, 3, 4), leaf(ordo.tensor({0.25}, D))}},
            {"prelu per channel", function(t, w) return F.prelu(t, w) end,
             {spread(2, 3, 4), leaf(ordo.tensor({0.25, -0.5, 2}, D))}},
            {"softmax", function(t) return weighted(F.softmax(t, 1)) end, {randn(3, 4)}},
            {"log_softmax", function(t) return weighted(F.log_softmax(t, 2)) end, {randn(3, 4)}},
            {"dropout in eval", function(t) return F.dropout(t, 0.5, false) end, {randn(3, 4)}},
            {"dropout (mask drawn from a fixed seed)", function(t) ordo.manual_seed(5) return F.dropout(t, 0.3) end,
             {randn(3, 4)}},
            {"dropout2d (fixed seed)", function(t) ordo.manual_seed(5) return F.dropout2d(t, 0.3) end,
             {randn(2, 3, 2, 2)}},
            {"linear", function(x, w, b) return F.linear(x, w, b) end, {randn(3, 4), randn(5, 4), randn(5)}},
            {"linear 3-D input", function(x, w, b) return F.linear(x, w, b) end, {randn(2, 3, 4), randn(5, 4), randn(5)}},
            {"linear 1-D input", function(x, w, b) return F.linear(x, w, b) end, {randn(4), randn(5, 4), randn(5)}},
            {"linear non-contiguous input", function(x, w) return F.linear(x:transpose(1, 2), w) end,
             {randn(3, 2, 4), randn(5, 4)}},
            {"linear transposed weight", function(x, w) return F.linear(x, w:t()) end, {randn(3, 4), randn(4, 5)}},
        }) do cases[#cases + 1] = c end
        sweep(cases)
    end)

    it("every loss with every reduction, class weights, ignore_index, label smoothing, soft targets", function()
        local cases = {}
        local logits, tgt = randn(4, 3), I({1, 3, 2, 3})
        local wcls = ordo.tensor({0.5, 2, 1.5}, D)
        local wel, wrow = ordo.rand({4}, D), ordo.rand({3, 1}, D)
        local pw, yb = ordo.rand({4}, D):add(0.5), ordo.rand({3, 4}, D)
        local function add(name, fn, inputs) cases[#cases + 1] = {name, fn, inputs} end
        for _, red in ipairs({"mean", "sum", "none"}) do
            local o = {reduction = red}
            add("cross_entropy " .. red, function(x) return F.cross_entropy(x, tgt, o) end, {logits})
            add("cross_entropy weight " .. red, function(x)
                return F.cross_entropy(x, tgt, {reduction = red, weight = wcls}) end, {logits})
            add("cross_entropy ignore_index " .. red, function(x)
                return F.cross_entropy(x, tgt, {reduction = red, ignore_index = 3}) end, {logits})
            add("cross_entropy label_smoothing " .. red, function(x)
                return F.cross_entropy(x, tgt, {reduction = red, label_smoothing = 0.1}) end, {logits})
            add("cross_entropy weight, ignore_index, smoothing " .. red, function(x)
                return F.cross_entropy(x, tgt, {reduction = red, weight = wcls, ignore_index = 2, label_smoothing = 0.2})
            end, {logits})
            add("cross_entropy soft targets " .. red, function(x, t) return F.cross_entropy(x, t, o) end,
                {logits, prob(4, 3)})
            add("cross_entropy soft targets, weight, smoothing " .. red, function(x, t)
                return F.cross_entropy(x, t, {reduction = red, weight = wcls, label_smoothing = 0.2}) end,
                {logits, prob(4, 3)})
            add("cross_entropy N x C x d1 x d2 " .. red, function(x)
                return F.cross_entropy(x, I({{{1, 2}, {3, 3}}, {{2, 1}, {1, 1}}}), {reduction = red, weight = wcls})
            end, {randn(2, 3, 2, 2)})
            add("cross_entropy N x C x d ignore_index " .. red, function(x)
                return F.cross_entropy(x, I({{1, 2}, {3, 3}}), {reduction = red, ignore_index = 1}) end,
                {randn(2, 3, 2)})
            add("nll_loss weight " .. red, function(x)
                return F.nll_loss(x:log_softmax(2), tgt, {reduction = red, weight = wcls}) end, {logits})
            add("nll_loss ignore_index " .. red, function(x)
                return F.nll_loss(x, tgt, {reduction = red, ignore_index = 1}) end, {logits})
            add("mse_loss " .. red, function(x, t) return F.mse_loss(x, t, o) end, {randn(3, 4), randn(3, 4)})
            add("mse_loss broadcast target " .. red, function(x, t) return F.mse_loss(x, t, o) end,
                {randn(3, 4), randn(4)})
            add("mse_loss number target " .. red, function(x) return F.mse_loss(x, 0.5, o) end, {randn(3, 4)})
            add("l1_loss " .. red, function(x, t) return F.l1_loss(x, t, o) end, {spread(3, 4), randn(3, 4)})
            add("smooth_l1_loss beta 0.5 " .. red, function(x, t)
                return F.smooth_l1_loss(x, t, {reduction = red, beta = 0.5}) end, {spread(3, 4), randn(3, 4)})
            add("smooth_l1_loss beta 0 " .. red, function(x, t)
                return F.smooth_l1_loss(x, t, {reduction = red, beta = 0}) end, {spread(3, 4), randn(3, 4)})
            add("huber_loss " .. red, function(x, t)
                return F.huber_loss(x, t, {reduction = red, delta = 0.7}) end, {spread(3, 4), randn(3, 4)})
            add("binary_cross_entropy " .. red, function(x, t) return F.binary_cross_entropy(x, t, o) end,
                {prob(3, 4), prob(3, 4)})
            add("binary_cross_entropy weight " .. red, function(x, t)
                return F.binary_cross_entropy(x, t, {reduction = red, weight = wel}) end, {prob(3, 4), prob(3, 4)})
            add("bce_with_logits " .. red, function(x, t) return F.binary_cross_entropy_with_logits(x, t, o) end,
                {randn(3, 4), prob(3, 4)})
            add("bce_with_logits weight, pos_weight " .. red, function(x, t)
                return F.binary_cross_entropy_with_logits(x, t, {reduction = red, weight = wrow, pos_weight = pw})
            end, {randn(3, 4), prob(3, 4)})
            add("bce_with_logits pos_weight's own gradient " .. red, function(x, p)
                return F.binary_cross_entropy_with_logits(x, yb, {reduction = red, pos_weight = p}) end,
                {randn(3, 4), pos(4)})
            add("kl_div " .. red, function(x, t) return F.kl_div(x, t, o) end, {randn(3, 4), prob(3, 4)})
            add("margin_ranking_loss " .. red, function(a, b)
                return F.margin_ranking_loss(a, b, ordo.tensor({1, -1, 1, -1}, D), {reduction = red, margin = 0.1})
            end, {randn(4), randn(4)})
            add("cosine_embedding_loss " .. red, function(a, b)
                return F.cosine_embedding_loss(a, b, ordo.tensor({1, -1, 1}, D), {reduction = red, margin = -0.5})
            end, {randn(3, 4), randn(3, 4)})
            add("triplet_margin_loss " .. red, function(a, b, c)
                return F.triplet_margin_loss(a, b, c, {reduction = red, margin = 3}) end,
                {randn(3, 4), randn(3, 4), randn(3, 4)})
            add("triplet_margin_loss p 1, swap " .. red, function(a, b, c)
                return F.triplet_margin_loss(a, b, c, {reduction = red, margin = 3, p = 1, swap = true}) end,
                {randn(3, 4), randn(3, 4), randn(3, 4)})
            add("gaussian_nll_loss full " .. red, function(a, t, v)
                return F.gaussian_nll_loss(a, t, v, {reduction = red, full = true}) end,
                {randn(3, 4), randn(3, 4), pos(3, 4)})
            add("gaussian_nll_loss one var per row " .. red, function(a, t, v)
                return F.gaussian_nll_loss(a, t, v, {reduction = red}) end, {randn(3, 4), randn(3, 4), pos(3)})
            add("poisson_nll_loss full " .. red, function(x, t)
                return F.poisson_nll_loss(x, t * 3, {reduction = red, full = true}) end, {randn(3, 4), pos(3, 4)})
            add("poisson_nll_loss rates " .. red, function(x)
                return F.poisson_nll_loss(x, yb, {reduction = red, log_input = false}) end, {pos(3, 4)})
            add("hinge_embedding_loss " .. red, function(x)
                return F.hinge_embedding_loss(x, ordo.tensor({1, -1, -1, 1}, D), {reduction = red, margin = 5}) end,
                {randn(3, 4)})
            add("soft_margin_loss " .. red, function(x)
                return F.soft_margin_loss(x, ordo.tensor({1, -1, -1, 1}, D), o) end, {randn(3, 4)})
            add("multilabel_soft_margin_loss weight " .. red, function(x, t)
                return F.multilabel_soft_margin_loss(x, t, {reduction = red, weight = wcls}) end, {randn(4, 3), prob(4, 3)})
            add("multi_margin_loss weight " .. red, function(x)
                return F.multi_margin_loss(x, tgt, {reduction = red, weight = wcls, margin = 5}) end, {logits})
            add("multi_margin_loss p 2 " .. red, function(x)
                return F.multi_margin_loss(x, tgt, {reduction = red, p = 2, margin = 5}) end, {logits})
            add("multilabel_margin_loss " .. red, function(x)
                return F.multilabel_margin_loss(x * 0.1, I({{2, 0, 0}, {3, 1, 0}, {1, 2, 3}, {0, 1, 2}}), o) end,
                {randn(4, 3)})
            add("triplet_margin_with_distance_loss " .. red, function(a, b, c)
                return F.triplet_margin_with_distance_loss(a, b, c, {reduction = red, margin = 3}) end,
                {randn(3, 4), randn(3, 4), randn(3, 4)})
        end
        add("kl_div batchmean", function(x, t) return F.kl_div(x, t, {reduction = "batchmean"}) end,
            {randn(3, 4), prob(3, 4)})
        add("CrossEntropyLoss", function(x) return nn.CrossEntropyLoss({weight = wcls})(x, tgt) end, {logits})
        add("NLLLoss", function(x) return nn.NLLLoss({ignore_index = 2})(x, tgt) end, {logits})
        add("BCELoss", function(x, t) return nn.BCELoss()(x, t) end, {prob(3, 4), prob(3, 4)})
        add("BCEWithLogitsLoss", function(x, t) return nn.BCEWithLogitsLoss({pos_weight = pw})(x, t) end,
            {randn(3, 4), prob(3, 4)})
        add("KLDivLoss", function(x, t) return nn.KLDivLoss({reduction = "batchmean"})(x, t) end,
            {randn(3, 4), prob(3, 4)})
        add("MSELoss, L1Loss, SmoothL1Loss, HuberLoss", function(x, t)
            return nn.MSELoss()(x, t) + nn.L1Loss()(x, t) + nn.SmoothL1Loss({beta = 0.3})(x, t)
                + nn.HuberLoss({delta = 0.3})(x, t)
        end, {spread(3, 4), randn(3, 4)})
        add("GaussianNLLLoss", function(a, t, v) return nn.GaussianNLLLoss()(a, t, v) end,
            {randn(3, 4), randn(3, 4), pos(3, 4)})
        sweep(cases)
    end)

    it("distances and normalisation: normalize, cosine_similarity, pairwise_distance, cdist, layer/group/batch norm",
       function()
        local cases = {
            {"normalize", function(x) return F.normalize(x) end, {randn(3, 4)}},
            {"normalize p 1 dim 1", function(x) return F.normalize(x, {p = 1, dim = 1}) end, {spread(3, 4)}},
            {"cosine_similarity", function(a, b) return F.cosine_similarity(a, b) end, {randn(3, 4), randn(3, 4)}},
            {"cosine_similarity broadcast", function(a, b) return F.cosine_similarity(a, b, {dim = 2}) end,
             {randn(3, 4), randn(1, 4)}},
            {"pairwise_distance", function(a, b) return F.pairwise_distance(a, b) end, {randn(3, 4), randn(3, 4)}},
            {"pairwise_distance p 1 keepdim", function(a, b) return F.pairwise_distance(a, b, {p = 1, keepdim = true}) end,
             {randn(3, 4), randn(3, 4)}},
            {"cdist", function(a, b) return F.cdist(a, b) end, {randn(3, 4), randn(5, 4)}},
            {"cdist p 1 batched", function(a, b) return F.cdist(a, b, {p = 1}) end, {randn(2, 3, 4), randn(2, 5, 4)}},
            {"layer_norm", function(x, w, b) return F.layer_norm(x, {4}, w, b) end, {randn(3, 4), randn(4), randn(4)}},
            {"layer_norm over 2 dims", function(x, w, b) return F.layer_norm(x, {3, 4}, w, b) end,
             {randn(2, 3, 4), randn(3, 4), randn(3, 4)}},
            {"layer_norm without affine", function(x) return weighted(F.layer_norm(x, 4)) end, {randn(2, 3, 4)}},
            {"group_norm", function(x, w, b) return F.group_norm(x, 2, w, b) end, {randn(2, 4, 3), randn(4), randn(4)}},
            {"group_norm 4-D, one group", function(x, w, b) return F.group_norm(x, 1, w, b) end,
             {randn(2, 4, 2, 2), randn(4), randn(4)}},
            {"group_norm instance", function(x) return weighted(F.group_norm(x, 4)) end, {randn(2, 4, 3)}},
            {"batch_norm on a non-contiguous input", function(x, w, b)
                return weighted(F.batch_norm(x:transpose(1, 2), nil, nil, w, b, true)) end,
             {randn(3, 4, 2), randn(3), randn(3)}},
        }
        for _, shp in ipairs({{4, 3}, {4, 3, 2}, {2, 3, 2, 2}}) do
            local tag = #shp .. "-D"
            for _, c in ipairs({
                {"batch_norm training " .. tag, function(x, w, b) return weighted(F.batch_norm(x, nil, nil, w, b, true)) end},
                {"batch_norm training with running stats " .. tag, function(x, w, b)
                    return weighted(F.batch_norm(x, ordo.zeros({3}, D), ordo.ones({3}, D), w, b, true)) end},
                {"batch_norm eval " .. tag, function(x, w, b)
                    return weighted(F.batch_norm(x, ordo.tensor({0.1, -0.2, 0.3}, D), ordo.tensor({0.5, 1.5, 2}, D), w, b,
                                                 false))
                end},
            }) do cases[#cases + 1] = {c[1], c[2], {randn(unpack(shp)), randn(3), randn(3)}} end
            cases[#cases + 1] = {"batch_norm without affine " .. tag,
                                 function(x) return weighted(F.batch_norm(x, nil, nil, nil, nil, true)) end,
                                 {randn(unpack(shp))}}
        end
        sweep(cases)
    end)

    it("convolution, pooling, resampling, padding (stride, padding, dilation, groups)", function()
        local cw = randn(4, 3, 3, 3)
        local conv = require "ordo.nn.conv"
        local cases = {
            {"conv2d", function(x, w, b) return F.conv2d(x, w, b) end, {randn(2, 3, 5, 5), cw, randn(4)}},
            {"conv2d stride, padding, dilation", function(x, w, b)
                return F.conv2d(x, w, b, {stride = 2, padding = 2, dilation = 2}) end, {randn(2, 3, 6, 7), cw, randn(4)}},
            {"conv2d per-dim options", function(x, w)
                return F.conv2d(x, w, nil, {stride = {1, 2}, padding = {0, 1}, dilation = {2, 1}}) end,
             {randn(1, 3, 6, 7), randn(2, 3, 2, 3)}},
            {"conv2d groups", function(x, w, b) return F.conv2d(x, w, b, {groups = 2, padding = 1}) end,
             {randn(2, 4, 4, 4), randn(6, 2, 3, 3), randn(6)}},
            {"conv2d depthwise", function(x, w) return F.conv2d(x, w, nil, {groups = 3}) end,
             {randn(1, 3, 4, 4), randn(3, 1, 2, 2)}},
            {"conv2d padding same, even kernel", function(x, w) return F.conv2d(x, w, nil, {padding = "same"}) end,
             {randn(1, 3, 4, 5), randn(2, 3, 2, 3)}},
            {"conv2d unbatched", function(x, w) return F.conv2d(x, w) end, {randn(3, 4, 4), randn(2, 3, 2, 2)}},
            {"conv2d non-contiguous input", function(x, w) return F.conv2d(x:transpose(3, 4), w) end,
             {randn(1, 3, 4, 5), randn(2, 3, 2, 2)}},
            {"conv1d stride, padding, dilation", function(x, w, b)
                return F.conv1d(x, w, b, {stride = 2, padding = 1, dilation = 2}) end, {randn(2, 3, 9), randn(4, 3, 3), randn(4)}},
            {"conv1d groups", function(x, w) return F.conv1d(x, w, nil, {groups = 3}) end, {randn(2, 3, 6), randn(3, 1, 3)}},
            {"conv1d same", function(x, w) return F.conv1d(x, w, nil, {padding = "same"}) end,
             {randn(2, 3, 6), randn(2, 3, 4)}},
            {"conv1d unbatched", function(x, w) return F.conv1d(x, w) end, {randn(3, 6), randn(2, 3, 3)}},
            {"conv_transpose2d", function(x, w, b) return F.conv_transpose2d(x, w, b) end,
             {randn(2, 3, 3, 3), randn(3, 2, 3, 3), randn(2)}},
            {"conv_transpose2d stride, padding, output_padding, dilation", function(x, w, b)
                return F.conv_transpose2d(x, w, b, {stride = 2, padding = 1, output_padding = 1, dilation = 2}) end,
             {randn(1, 3, 3, 4), randn(3, 2, 3, 2), randn(2)}},
            {"conv_transpose2d groups", function(x, w, b) return F.conv_transpose2d(x, w, b, {groups = 3, stride = 2}) end,
             {randn(1, 3, 3, 3), randn(3, 2, 2, 2), randn(6)}},
            {"conv_transpose2d unbatched", function(x, w) return F.conv_transpose2d(x, w) end,
             {randn(3, 3, 3), randn(3, 2, 2, 2)}},
            {"max_pool2d", function(x) return F.max_pool2d(x, 2) end, {spread(2, 2, 4, 4)}},
            {"max_pool2d stride, padding", function(x) return F.max_pool2d(x, 3, {stride = 2, padding = 1}) end,
             {spread(1, 2, 5, 6)}},
            {"max_pool2d overlapping windows", function(x) return F.max_pool2d(x, {2, 3}, {stride = 1}) end,
             {spread(1, 2, 4, 5)}},
            {"max_pool2d unbatched", function(x) return F.max_pool2d(x, 2) end, {spread(2, 4, 4)}},
            {"max_pool2d non-contiguous", function(x) return F.max_pool2d(x:transpose(3, 4), 2) end, {spread(1, 2, 4, 6)}},
            {"max_pool1d", function(x) return F.max_pool1d(x, 3, {stride = 2, padding = 1}) end, {spread(2, 3, 7)}},
            {"avg_pool2d", function(x) return F.avg_pool2d(x, 2) end, {randn(2, 2, 4, 4)}},
            {"avg_pool2d stride, padding", function(x) return F.avg_pool2d(x, 3, {stride = 2, padding = 1}) end,
             {randn(1, 2, 5, 6)}},
            {"avg_pool2d count_include_pad false", function(x)
                return F.avg_pool2d(x, 3, {stride = 2, padding = 1, count_include_pad = false}) end, {randn(1, 2, 5, 6)}},
            {"avg_pool1d count_include_pad false", function(x)
                return F.avg_pool1d(x, 3, {stride = 2, padding = 1, count_include_pad = false}) end, {randn(2, 3, 7)}},
            {"adaptive_avg_pool2d 1", function(x) return F.adaptive_avg_pool2d(x, 1) end, {randn(2, 2, 3, 4)}},
            {"adaptive_avg_pool2d uneven bins", function(x) return F.adaptive_avg_pool2d(x, {2, 3}) end,
             {randn(2, 2, 5, 4)}},
            {"adaptive_avg_pool2d even bins", function(x) return F.adaptive_avg_pool2d(x, {2, 2}) end,
             {randn(2, 2, 4, 6)}},
            {"interpolate nearest", function(x) return weighted(F.interpolate(x, {scale_factor = 2})) end,
             {randn(1, 2, 3, 3)}},
            {"interpolate bilinear", function(x) return F.interpolate(x, {size = {5, 4}, mode = "bilinear"}) end,
             {randn(1, 2, 3, 3)}},
            {"interpolate bilinear align_corners", function(x)
                return F.interpolate(x, {size = {5, 4}, mode = "bilinear", align_corners = true}) end, {randn(1, 2, 3, 3)}},
            {"interpolate linear", function(x) return F.interpolate(x, {scale_factor = 1.5, mode = "linear"}) end,
             {randn(1, 2, 4)}},
            {"interpolate bilinear down", function(x) return F.interpolate(x, {size = {2, 2}, mode = "bilinear"}) end,
             {randn(1, 2, 5, 5)}},
            {"pixel_shuffle", function(x) return weighted(F.pixel_shuffle(x, 2)) end, {randn(2, 8, 2, 3)}},
            {"pixel_unshuffle", function(x) return weighted(F.pixel_unshuffle(x, 2)) end, {randn(2, 2, 4, 6)}},
        }
        for _, layout in ipairs({"batched", "gemm"}) do
            cases[#cases + 1] = {"conv2d layout " .. layout, function(x, w, b)
                local old = conv.conv_layout
                conv.conv_layout = layout
                local ok, y = pcall(F.conv2d, x, w, b, {stride = 2, padding = 1})
                conv.conv_layout = old
                if not ok then error(y, 0) end
                return y
            end, {randn(2, 3, 5, 5), cw, randn(4)}}
        end
        for _, mode in ipairs({"constant", "reflect", "replicate", "circular"}) do
            cases[#cases + 1] = {"pad " .. mode, function(x)
                return weighted(F.pad(x, {1, 2, 2, 1}, {mode = mode, value = 0.5})) end, {randn(1, 2, 3, 4)}}
            cases[#cases + 1] = {"pad " .. mode .. " cropping", function(x)
                return weighted(F.pad(x, {-1, 2, 1, -1}, {mode = mode})) end, {randn(1, 2, 3, 4)}}
        end
        sweep(cases)
    end)

    it("modules: recurrent layers, attention, transformer layers, convolutions and norms, w.r.t. every parameter",
       function()
        local cases = {}
        -- gradients with respect to the input and every parameter of m
        local function mod(name, m, x, call)
            m = m:to("float64")
            local inputs = {x}
            for _, p in ipairs(m:parameters()) do inputs[#inputs + 1] = p end
            cases[#cases + 1] = {name, function(xx) return call and call(m, xx) or m(xx) end, inputs}
        end
        local function out_and_states(m, x)
            local o, h, c = m(x)
            return weighted(o):sum() + h:sum() * 2 + (c and c:sum() * 3 or 0)
        end
        local h0 = ordo.randn({2, 4}, D)
        mod("RNNCell", nn.RNNCell(3, 4), randn(2, 3))
        mod("RNNCell with a state", nn.RNNCell(3, 4), randn(2, 3), function(m, x) return m(x, h0) end)
        mod("LSTMCell", nn.LSTMCell(3, 4), randn(2, 3), function(m, x) local h, c = m(x) return h * 2 + c end)
        mod("GRUCell", nn.GRUCell(3, 4), randn(2, 3))
        mod("RNN tanh, 2 layers", nn.RNN(3, 4, {num_layers = 2}), randn(3, 2, 3), out_and_states)
        mod("RNN relu bidirectional", nn.RNN(3, 4, {nonlinearity = "relu", bidirectional = true}), randn(3, 2, 3),
            out_and_states)
        mod("RNN unbatched", nn.RNN(2, 3), randn(4, 2), out_and_states)
        mod("LSTM 2 layers", nn.LSTM(3, 4, {num_layers = 2}), randn(3, 2, 3), out_and_states)
        mod("LSTM bidirectional batch_first", nn.LSTM(3, 2, {bidirectional = true, batch_first = true}),
            randn(2, 3, 3), out_and_states)
        mod("GRU 2 layers, no bias", nn.GRU(3, 4, {num_layers = 2, bias = false}), randn(3, 2, 3), out_and_states)
        mod("GRU unbatched", nn.GRU(3, 4), randn(3, 3), out_and_states)
        local lstm = nn.LSTM(3, 4):to("float64")
        cases[#cases + 1] = {"LSTM w.r.t. h0 and c0", function(x, h, c) return (lstm(x, h, c)) end,
                             {randn(3, 2, 3), randn(1, 2, 4), randn(1, 2, 4)}}
        cases[#cases + 1] = {"scaled_dot_product_attention", function(q, k, v)
            return F.scaled_dot_product_attention(q, k, v) end, {randn(2, 3, 4), randn(2, 5, 4), randn(2, 5, 3)}}
        cases[#cases + 1] = {"sdpa causal", function(q, k, v)
            return F.scaled_dot_product_attention(q, k, v, {is_causal = true}) end,
            {randn(2, 3, 4), randn(2, 3, 4), randn(2, 3, 3)}}
        cases[#cases + 1] = {"sdpa uint8 mask", function(q, k, v)
            return F.scaled_dot_product_attention(q, k, v, {attn_mask = ordo.tensor({{1, 0, 1, 1, 1}, {1, 1, 0, 0, 1},
                                                                                    {0, 1, 1, 1, 1}}, "uint8")})
        end, {randn(2, 3, 4), randn(2, 5, 4), randn(2, 5, 3)}}
        cases[#cases + 1] = {"sdpa float mask with its own gradient", function(q, k, v, m)
            return F.scaled_dot_product_attention(q, k, v, {attn_mask = m}) end,
            {randn(2, 3, 4), randn(2, 5, 4), randn(2, 5, 3), randn(3, 5)}}
        cases[#cases + 1] = {"sdpa scale, broadcast leading dims", function(q, k, v)
            return F.scaled_dot_product_attention(q, k, v, {scale = 0.3}) end,
            {randn(2, 2, 3, 4), randn(1, 2, 5, 4), randn(2, 1, 5, 3)}}
        cases[#cases + 1] = {"sdpa dropout (fixed seed)", function(q, k, v)
            ordo.manual_seed(4)
            return F.scaled_dot_product_attention(q, k, v, {dropout_p = 0.3}) end,
            {randn(2, 3, 4), randn(2, 5, 4), randn(2, 5, 3)}}
        local kpm = ordo.tensor({{0, 0, 0, 1, 1}, {0, 0, 0, 0, 1}}, "uint8")
        mod("MultiheadAttention", nn.MultiheadAttention(4, 2), randn(3, 2, 4), function(m, q)
            local y, w = m(q, q:narrow(1, 1, 2) * 0.5 + 1, q:narrow(1, 2, 2))
            return weighted(y):sum() + weighted(w):sum()
        end)
        local kv = ordo.randn({5, 2, 4}, D)
        mod("MultiheadAttention key_padding_mask, per-head weights", nn.MultiheadAttention(4, 2), randn(3, 2, 4),
            function(m, q)
                local y, w = m(q, kv, kv, {key_padding_mask = kpm, average_attn_weights = false})
                return weighted(y):sum() + weighted(w):sum()
            end)
        mod("MultiheadAttention causal", nn.MultiheadAttention(4, 2), randn(3, 2, 4),
            function(m, q) return (m(q, q, q, {is_causal = true})) end)
        mod("MultiheadAttention batch_first, no bias", nn.MultiheadAttention(4, 2, {batch_first = true, bias = false}),
            randn(2, 3, 4), function(m, q) return (m(q, kv:transpose(1, 2), kv:transpose(1, 2))) end)
        mod("TransformerEncoderLayer", nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 6, dropout = 0}),
            randn(3, 2, 4))
        mod("TransformerEncoderLayer norm_first, gelu, masks",
            nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 6, dropout = 0, norm_first = true, activation = "gelu",
                                              batch_first = true}), randn(2, 3, 4),
            function(m, x) return m(x, {src_key_padding_mask = ordo.tensor({{0, 0, 1}, {0, 0, 0}}, "uint8"),
                                        is_causal = true}) end)
        mod("TransformerDecoderLayer", nn.TransformerDecoderLayer(4, 2, {dim_feedforward = 6, dropout = 0}),
            randn(3, 2, 4), function(m, x) return m(x, kv, {tgt_is_causal = true, memory_key_padding_mask = kpm}) end)
        mod("Embedding", nn.Embedding(5, 3), randn(1), function(m, _) return m(I({{1, 2}, {5, 5}})) end)
        mod("Conv2d", nn.Conv2d(2, 3, 3, {padding = 1, stride = 2}), randn(1, 2, 5, 5))
        mod("Conv1d groups", nn.Conv1d(4, 2, 3, {groups = 2, padding = 1, stride = 2}), randn(2, 4, 7))
        mod("ConvTranspose2d groups, output_padding",
            nn.ConvTranspose2d(4, 2, 3, {stride = 2, output_padding = 1, groups = 2, padding = 1}), randn(1, 4, 3, 3))
        mod("BatchNorm1d on N x C x L", nn.BatchNorm1d(3), randn(4, 3, 2), function(m, x) return weighted(m(x)) end)
        local bn_eval = nn.BatchNorm2d(3)
        bn_eval:eval()
        mod("BatchNorm2d eval", bn_eval, randn(2, 3, 2, 2))
        local bn_untracked = nn.BatchNorm1d(3, {track_running_stats = false})
        bn_untracked:eval()
        mod("BatchNorm1d untracked, eval (batch statistics)", bn_untracked, randn(4, 3),
            function(m, x) return weighted(m(x)) end)
        mod("LayerNorm without bias", nn.LayerNorm({2, 3}, {bias = false}), randn(2, 2, 3))
        mod("GroupNorm", nn.GroupNorm(2, 4), randn(2, 4, 3), function(m, x) return weighted(m(x)) end)
        mod("PReLU per channel", nn.PReLU(3), randn(2, 3, 2))
        mod("Sequential", nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2), nn.LogSoftmax(2)), randn(2, 3))
        mod("Upsample bilinear align_corners", nn.Upsample({size = {3, 5}, mode = "bilinear", align_corners = true}),
            randn(1, 1, 2, 2))
        sweep(cases)
    end)
end)

-- a and b (nested lists of numbers) equal within tol, relative
local function close(a, b, tol)
    if type(a) == "table" then
        assert.equals(#b, #a)
        for i = 1, #a do close(a[i], b[i], tol) end
        return
    end
    assert(a == b or math.abs(a - b) <= (tol or 1e-12) * math.abs(b), string.format("%.17g vs %.17g", a, b))
end

describe("autograd sweep: Torch's gradients at kinks, ties and edges", function()
    -- the gradient of sum(f(x)) (or of f(x) seeded with seed) for x = vals
    local function grad_of(f, vals, seed)
        local x = ordo.tensor(vals, D):requires_grad()
        local y = f(x)
        if seed then y:backward(ordo.tensor(seed, D)) else y:sum():backward() end
        return x.grad:totable()
    end
    local inf = math.huge

    it("extrema: ties shared (max(), amax, median(), maximum) or to the index (max(dim), sort, pooling)", function()
        assert.same({0, 0.5, 0.5, 0}, grad_of(function(x) return x:max() end, {1, 3, 3, 2}))
        assert.same({0.5, 0.5, 0, 0}, grad_of(function(x) return x:min() end, {1, 1, 3, 2}))
        assert.same({0, 0.5, 0.5, 0}, grad_of(function(x) return x:amax() end, {1, 3, 3, 2}))
        assert.same({{0, 0.5, 0.5, 0}, {0.25, 0.25, 0.25, 0.25}}, grad_of(function(x) return x:amax(2) end,
                                                                         {{1, 3, 3, 2}, {0, 0, 0, 0}}))
        assert.same({0, 0.5, 0.5, 0}, grad_of(function(x) return x:median() end, {1, 2, 2, 3}))
        assert.same({0, 1, 0, 0}, grad_of(function(x) return (x:max(1)) end, {1, 3, 3, 2}))
        assert.same({0, 1, 0, 0}, grad_of(function(x) return (x:median(1)) end, {1, 2, 2, 3}))
        assert.same({0, 1, 0, 0}, grad_of(function(x) return (x:kthvalue(2)) end, {1, 2, 2, 3}))
        assert.same({1, 0, 0}, grad_of(function(x) return (x:topk(1)) end, {3, 3, 1}))
        assert.same({2, 3, 1}, grad_of(function(x) return (x:sort()) end, {3, 3, 1}, {1, 2, 3}))
        assert.same({0.5, 1}, grad_of(function(x) return x:maximum(ordo.tensor({1, 2}, D)) end, {1, 3}))
        assert.same({0.5, 0}, grad_of(function(x) return x:minimum(ordo.tensor({1, 2}, D)) end, {1, 3}))
        assert.same({0.5, -0.5, 0}, grad_of(function(x) return x:norm("inf") end, {2, -2, 1}))
        assert.same({0.5, -0.5, 0}, grad_of(function(x) return x:norm("-inf") end, {1, -1, 2}))
        -- pooling: the first of the window's equal maxima
        assert.same({{{{1, 0}, {0, 0}}}}, grad_of(function(x) return F.max_pool2d(x, 2) end, {{{{1, 1}, {1, 1}}}}))
        assert.same({{{1, 1, 0, 0}}}, grad_of(function(x) return F.max_pool1d(x, 3, {stride = 1}) end, {{{1, 1, 1, 1}}}))
    end)

    it("kinks: abs, relu, clamp, hardtanh, relu6, leaky_relu, elu, softplus, hardsigmoid, hardswish, l1", function()
        assert.same({0, -1, 1}, grad_of(function(x) return x:abs() end, {0, -1, 2}))
        assert.same({0, 0, 1}, grad_of(function(x) return x:relu() end, {0, -1, 2}))
        assert.same({1, 1, 0}, grad_of(function(x) return x:clamp(-1, 1) end, {-1, 1, 2}))
        assert.same({1}, grad_of(function(x) return x:clamp(0) end, {0}))
        assert.same({0, 0}, grad_of(function(x) return F.hardtanh(x) end, {-1, 1}))
        assert.same({0, 0}, grad_of(function(x) return F.relu6(x) end, {0, 6}))
        assert.same({0.01}, grad_of(function(x) return F.leaky_relu(x) end, {0}))
        assert.same({1}, grad_of(function(x) return F.elu(x) end, {0}))
        assert.same({0.5}, grad_of(function(x) return F.softplus(x) end, {0}))
        assert.same({0, 0}, grad_of(function(x) return F.hardsigmoid(x) end, {-3, 3}))
        assert.same({-0.5, 1.5}, grad_of(function(x) return F.hardswish(x) end, {-3, 3}))
        assert.same({0, 0}, grad_of(function(x) return x:sign() + x:round() + x:floor() end, {0, 1.5}))
        assert.same({0}, grad_of(function(x) return F.l1_loss(x, ordo.tensor({1}, D)) end, {1}))
        assert.same({-1}, grad_of(function(x)
            return F.margin_ranking_loss(x, ordo.tensor({0}, D), ordo.tensor({1}, D)) end, {0}))
    end)

    it("zeros: sqrt, pow, norms (every p), normalize, cosine_similarity, cdist, prod, cumprod, kl_div's target", function()
        assert.same({inf, 0.25}, grad_of(function(x) return x:sqrt() end, {0, 4}))
        assert.same({0}, grad_of(function(x) return x:pow(2) end, {0}))
        assert.same({inf}, grad_of(function(x) return x:pow(0.5) end, {0}))
        assert.same({0}, grad_of(function(x) return x:pow(0) end, {0}))
        assert.same({0, 0}, grad_of(function(x) return x:norm() end, {0, 0}))
        close(grad_of(function(x) return x:norm(2, 2) end, {{0, 0}, {3, 4}}), {{0, 0}, {0.6, 0.8}})
        assert.same({0, 1, -1}, grad_of(function(x) return x:norm(1) end, {0, 1, -1}))
        close(grad_of(function(x) return x:norm(0.5) end, {0, 1, 4}), {0, 3, 1.5})
        assert.same({0, 0, 0}, grad_of(function(x) return x:norm(3) end, {0, 0, 0}))
        assert.same({{1e12, 1e12}}, grad_of(function(x) return F.normalize(x) end, {{0, 0}}))
        assert.same({{0, 0}}, grad_of(function(x) return F.cdist(x, ordo.tensor({{1, 2}}, D)) end, {{1, 2}}))
        assert.same({0, 6, 0}, grad_of(function(x) return x:prod() end, {2, 0, 3}))
        assert.same({0, 0, 0}, grad_of(function(x) return x:prod() end, {2, 0, 0}))
        assert.same({1, 8, 0}, grad_of(function(x) return x:cumprod(1) end, {2, 0, 3}))
        local t = ordo.tensor({0, 0.5}, D):requires_grad()
        F.kl_div(ordo.tensor({-1, -1}, D), t, {reduction = "sum"}):backward()
        assert.same(0, t.grad:totable()[1])
        -- the gradient of a cosine similarity with a zero vector is finite
        for _, v in ipairs(grad_of(function(x) return F.cosine_similarity(x, ordo.tensor({{1, 2}}, D)) end, {{0, 0}})[1]) do
            assert.is_true(v == v and math.abs(v) < inf)
        end
    end)

    it("NaN and infinities: where, clamp, relu, nan_to_num, log_softmax and softmax at -inf, BCE at 0 and 1", function()
        assert.same({1, 0}, grad_of(function(x)
            return ordo.where(ordo.tensor({1, 0}, "uint8"), x, ordo.zeros({2}, D)) end, {1, 0}))
        assert.same({0}, grad_of(function(x) return x:clamp(0, 1) end, {0 / 0}))
        assert.same({1}, grad_of(function(x) return x:relu() end, {0 / 0})) -- (NaN <= 0 is false: passes, as Torch)
        assert.same({0, 0, 1}, grad_of(function(x) return x:nan_to_num() end, {0 / 0, inf, 1}))
        assert.same({1, -1}, grad_of(function(x) return x:log_softmax() end, {-inf, 0}, {1, 2}))
        assert.same({0, 0}, grad_of(function(x) return x:softmax() end, {-inf, 0}, {1, 2}))
        assert.same({0, 0}, grad_of(function(x) return F.binary_cross_entropy(x, ordo.tensor({0, 1}, D)) end, {0, 1}))
        assert.same({-5e11, 5e11}, grad_of(function(x)
            return F.binary_cross_entropy(x, ordo.tensor({1, 0}, D)) end, {0, 1}))
        assert.same({-3}, (function()
            local d = ordo.tensor({2}, D):requires_grad()
            ordo.tensor({7.5}, D):fmod(d):sum():backward()
            return d.grad:totable()
        end)())
        assert.same({4}, (function()
            local d = ordo.tensor({2}, D):requires_grad()
            ordo.tensor({-7.5}, D):remainder(d):sum():backward()
            return d.grad:totable()
        end)())
        -- an inf gradient (sqrt at 0) reaches only where it goes: no NaN elsewhere
        -- (they multiplied it by a 0/1 mask: masked_fill's value and max()/min()/median()'s others)
        local v = ordo.tensor({0.5}, D):requires_grad()
        ordo.zeros({2}, D):masked_fill(ordo.tensor({0, 1}, "uint8"), v):sqrt():sum():backward()
        assert.same({0.5 / math.sqrt(0.5)}, v.grad:totable()) -- Torch's masked_select(g, mask):sum()
        assert.same({inf, 0, 0}, grad_of(function(x) return x:max():sqrt() end, {0, -1, -2}))
        assert.same({inf, 0, 0}, grad_of(function(x) return x:min():sqrt() end, {0, 1, 2}))
        assert.same({0, inf, 0}, grad_of(function(x) return x:median():sqrt() end, {-1, 0, 1}))
        assert.same({inf / 2, 0, inf / 2}, grad_of(function(x) return x:max():sqrt() end, {0, -1, 0}))
        -- hardtanh / relu6 (Torch's where: 0 at and beyond the bounds; a NaN x passes g)
        local r6 = grad_of(function(x) return F.relu6(x):sqrt() end, {-1, 0, 3, 6, 7, 0 / 0})
        assert.same({0, 0, 0, 0}, {r6[1], r6[2], r6[4], r6[5]})
        assert.is_true(math.abs(r6[3] - 0.5 / math.sqrt(3)) < 1e-15)
        assert.is_true(r6[6] ~= r6[6])
        assert.same({0, 0, 1, 0, 0}, grad_of(function(x) return F.hardtanh(x) end, {-2, -1, 0, 1, 2}))
    end)
end)

describe("autograd sweep: seeds", function()
    -- grads of every input of fn from a seed
    local function grads(fn, inputs, seed)
        local xs = {}
        for i, x in ipairs(inputs) do xs[i] = x:detach():clone():requires_grad() end
        local y = fn(unpack(xs))
        if seed == "sum" then y:sum():backward() else y:backward(seed) end
        local r = {}
        for i, x in ipairs(xs) do r[i] = x.grad end
        return r
    end

    it("y:sum() (a stride-0 seed), a contiguous seed and the same values transposed or strided give one gradient",
       function()
        ordo.manual_seed(5)
        local function r(...) return ordo.randn({...}, D) end
        local failed = {}
        for _, c in ipairs({
            {"max_pool2d", function(x) return F.max_pool2d(x, 3, {stride = 1, padding = 1}) end, {r(2, 3, 4, 4)}},
            {"max_pool1d", function(x) return F.max_pool1d(x, 2) end, {r(2, 3, 4)}},
            {"avg_pool2d", function(x) return F.avg_pool2d(x, 2) end, {r(2, 3, 4, 4)}},
            {"conv2d", function(x, w, b) return F.conv2d(x, w, b, {padding = 1, stride = 2}) end,
             {r(2, 3, 5, 5), r(4, 3, 3, 3), r(4)}},
            {"conv2d groups", function(x, w, b) return F.conv2d(x, w, b, {groups = 3}) end,
             {r(2, 3, 5, 5), r(3, 1, 3, 3), r(3)}},
            {"conv_transpose2d", function(x, w, b) return F.conv_transpose2d(x, w, b, {stride = 2}) end,
             {r(2, 3, 3, 3), r(3, 2, 3, 3), r(2)}},
            {"batch_norm", function(x, w, b) return F.batch_norm(x, nil, nil, w, b, true) end, {r(4, 3, 2, 2), r(3), r(3)}},
            {"linear", function(x, w, b) return F.linear(x, w, b) end, {r(2, 3, 4), r(5, 4), r(5)}},
            {"cumprod", function(x) return x:cumprod(2) end, {r(3, 4)}},
            {"cumsum", function(x) return x:cumsum(1) end, {r(3, 4)}},
            {"sort", function(x) return (x:sort(2)) end, {r(3, 4)}},
            {"gather", function(x) return x:gather(2, I({{1, 1}, {2, 3}, {4, 4}})) end, {r(3, 4)}},
            {"scatter_add", function(x, s) return x:scatter_add(2, I({{1, 1}, {2, 3}, {4, 4}}), s) end, {r(3, 4), r(3, 2)}},
            {"index_add", function(x, s) return x:index_add(1, I({1, 3, 1}), s) end, {r(3, 4), r(3, 4)}},
            {"max dim", function(x) return (x:max(2)) end, {r(3, 4)}},
            {"amax", function(x) return x:amax(2) end, {r(3, 4)}},
            {"softmax", function(x) return x:softmax(2) end, {r(3, 4)}},
            {"log_softmax", function(x) return x:log_softmax(1) end, {r(3, 4)}},
            {"matmul", function(a, b) return a:matmul(b) end, {r(2, 3, 4), r(4, 5)}},
            {"matmul 1-D", function(a, b) return a:matmul(b) end, {r(3, 4), r(4)}},
            {"einsum", function(a, b) return ordo.einsum("bij,bkj->bik", a, b) end, {r(2, 3, 4), r(2, 5, 4)}},
            {"interpolate bilinear", function(x) return F.interpolate(x, {size = {5, 7}, mode = "bilinear"}) end,
             {r(1, 2, 3, 4)}},
            {"sdpa", function(q, k, v) return F.scaled_dot_product_attention(q, k, v, {is_causal = true}) end,
             {r(2, 3, 4), r(2, 3, 4), r(2, 3, 5)}},
            {"layer_norm", function(x, w, b) return F.layer_norm(x, 4, w, b) end, {r(3, 4), r(4), r(4)}},
            {"cross_entropy none", function(x) return F.cross_entropy(x, I({1, 2, 3}), {reduction = "none"}) end,
             {r(3, 4)}},
            {"repeat_interleave", function(x) return x:repeat_interleave(I({1, 0, 2}), 1) end, {r(3, 4)}},
            {"clamp tensor bound", function(x, lo) return x:clamp(lo, 0.5) end, {r(3, 4), r(4)}},
        }) do
            local name, fn, inputs = c[1], c[2], c[3]
            local shape = fn(unpack(inputs)):shape()
            local W = ordo.rand(shape, D)
            local strided -- W's values in a non-contiguous tensor
            if #shape >= 2 then
                strided = W:transpose(-1, -2):contiguous():transpose(-1, -2)
            else
                strided = ordo.stack({W, W}, -1):select(-1, 1)
            end
            local a, b = grads(fn, inputs, "sum"), grads(fn, inputs, ordo.ones(shape, D))
            local c1, c2 = grads(fn, inputs, W), grads(fn, inputs, strided)
            for i = 1, #inputs do
                if not ordo.allclose(a[i], b[i], 1e-9, 1e-12) then
                    failed[#failed + 1] = name .. " input " .. i .. ": sum() and a seed of ones differ"
                end
                if not ordo.allclose(c1[i], c2[i], 1e-9, 1e-12) then
                    failed[#failed + 1] = name .. " input " .. i .. ": a strided seed gives another gradient"
                end
            end
        end
        assert(#failed == 0, table.concat(failed, "\n"))
    end)
end)

describe("autograd sweep: a value changed in place between an op and backward", function()
    it("raises at backward, or the gradient is the op's at the values it saw: never a silently wrong one", function()
        ordo.manual_seed(2)
        local failed = {}
        -- y = f(x, c), x requiring a gradient; then x (under no_grad), c or y (under no_grad) changed in place
        local function audit(name, f, xshape, cshape, cmake)
            for _, what in ipairs({"x", "c", "y"}) do
                local x0 = ordo.randn(xshape, D):add(0.1)
                local c0 = cshape and (cmake or ordo.randn)(cshape, D):add(cmake and 0.5 or 0.1) or nil
                local xr = x0:clone():requires_grad()
                local yr = f(xr, c0 and c0:clone())
                local W = ordo.rand(yr:shape(), D)
                ;(yr * W):sum():backward()
                local x = x0:clone():requires_grad()
                local c = c0 and c0:clone()
                local y = f(x, c)
                local z = (y * W):sum()
                local changed
                if what == "x" then
                    changed = pcall(ordo.no_grad, function() x:mul_(1.7):add_(0.3) end)
                elseif what == "c" and c then
                    changed = pcall(function() c:mul_(1.7):add_(0.3) end)
                elseif what == "y" then
                    changed = pcall(ordo.no_grad, function() y:mul_(1.7):add_(0.3) end) -- (not an expanded view)
                end
                if changed then
                    local ok, err = pcall(function() z:backward() end)
                    if ok and not ordo.allclose(x.grad, xr.grad, 1e-9, 1e-12) then
                        failed[#failed + 1] = name .. ": a wrong gradient after changing " .. what
                    elseif not ok and not tostring(err):match("changed in place") then
                        failed[#failed + 1] = name .. " (" .. what .. "): " .. tostring(err)
                    end
                end
            end
        end
        local u = ordo.rand
        audit("mul", function(x, c) return x * c end, {3, 4}, {3, 4})
        audit("div", function(x, c) return x / c + c / x:abs():add(0.5) end, {3, 4}, {3, 4}, u)
        audit("pow", function(x, c) return x:abs():add(0.5):pow(c) + c:pow(x) end, {3, 4}, {3, 4}, u)
        audit("maximum", function(x, c) return x:maximum(c) end, {3, 4}, {3, 4})
        audit("clamp tensor bound", function(x, c) return x:clamp(c, nil) end, {3, 4}, {3, 4})
        audit("where", function(x, c) return ordo.where(c:gt(0), x, 0) end, {3, 4}, {3, 4})
        audit("masked_fill", function(x, c) return x:masked_fill(c:gt(0), 0) end, {3, 4}, {3, 4})
        audit("lerp", function(x, c) return c:lerp(c * 2, x) + x:lerp(c, 0.3) end, {3, 4}, {3, 4})
        audit("fmod", function(x, c) return c:fmod(x:abs():add(0.5)) end, {3, 4}, {3, 4})
        for _, f in ipairs({"exp", "log", "sqrt", "tanh", "sigmoid", "sin", "abs", "relu", "rsqrt", "erf", "tan"}) do
            audit(f, function(x)
                local a = (f == "log" or f == "sqrt" or f == "rsqrt") and x:abs():add(0.5) or x
                return a[f](a)
            end, {3, 4})
        end
        audit("matmul", function(x, c) return x:matmul(c) end, {3, 4}, {4, 2})
        audit("matmul 4-D", function(x, c) return x:view(1, 1, 3, 4):matmul(c) end, {3, 4}, {2, 4, 2})
        audit("einsum", function(x, c) return ordo.einsum("ij,jk->ik", x, c) end, {3, 4}, {4, 2})
        audit("linear (input)", function(x, c) return F.linear(x, c) end, {3, 4}, {2, 4})
        audit("linear (weight)", function(x, c) return F.linear(c, x) end, {3, 4}, {2, 4})
        audit("conv2d (input)", function(x, c) return F.conv2d(x:view(1, 1, 3, 4), c) end, {3, 4}, {2, 1, 2, 2})
        audit("conv2d (weight)", function(x, c) return F.conv2d(c, x:view(1, 1, 3, 4)) end, {3, 4}, {1, 1, 4, 5})
        audit("conv_transpose2d (input)", function(x, c) return F.conv_transpose2d(x:view(1, 1, 3, 4), c) end, {3, 4},
              {1, 2, 2, 2})
        audit("conv_transpose2d (weight)", function(x, c) return F.conv_transpose2d(c, x:view(1, 1, 3, 4)) end,
              {3, 4}, {1, 1, 2, 2})
        audit("max_pool2d", function(x) return F.max_pool2d(x:view(1, 1, 3, 4), 2) end, {3, 4})
        audit("batch_norm", function(x, c) return F.batch_norm(x, nil, nil, c, nil, true) end, {3, 4}, {4})
        audit("batch_norm eval", function(x, c) return F.batch_norm(x, c, c:abs(), nil, nil, false) end, {3, 4}, {4})
        audit("layer_norm", function(x, c) return F.layer_norm(x, 4, c) end, {3, 4}, {4})
        audit("softmax, log_softmax", function(x) return x:softmax(2) + x:log_softmax(1) end, {3, 4})
        audit("max, amax, median", function(x) return x:max() + x:amax(2):sum() + x:median() end, {3, 4})
        audit("max dim, sort, topk", function(x) return (x:max(2)) + (x:sort(2)):sum(2) + (x:topk(2)):sum(2) end,
              {3, 4})
        audit("cumprod, prod", function(x) return x:cumprod(2):sum(2) + x:prod(2) end, {3, 4})
        audit("norms, var, std", function(x) return x:norm() + x:norm(3, 2):sum() + x:var(2):sum() + x:std() end,
              {3, 4})
        audit("gather", function(x, c)
            return x:gather(2, c:abs():mul(2):floor():clamp(0, 3):add(1):long()) end, {3, 4}, {3, 2})
        audit("scatter, index_add", function(x, c)
            return c:scatter(2, ordo.tensor({{1}, {2}, {3}}, "int64"), x:narrow(2, 1, 1))
                + c:index_add(1, ordo.tensor({1, 1, 2}, "int64"), x)
        end, {3, 4}, {3, 4})
        audit("activations", function(x) return F.softplus(x) + F.gelu(x) + F.elu(x) + F.hardtanh(x) end, {3, 4})
        audit("binary_cross_entropy", function(x, c)
            return F.binary_cross_entropy(x:abs():clamp(0.1, 0.9), c:sigmoid()) end, {3, 4}, {3, 4})
        audit("kl_div, its target", function(x, c)
            return F.kl_div(x, c:softmax(2)) + F.kl_div(c, x:softmax(2)) end, {3, 4}, {3, 4})
        audit("cosine_similarity, cdist", function(x, c)
            return F.cosine_similarity(x, c):sum() + F.cdist(x, c):sum() end, {3, 4}, {3, 4})
        audit("scaled_dot_product_attention", function(x, c)
            return F.scaled_dot_product_attention(x:view(1, 3, 4), c, c) end, {3, 4}, {1, 5, 4})
        audit("unfold, embedding, interpolate", function(x)
            return x:unfold(2, 2, 1):sum() + F.embedding(ordo.tensor({1, 2, 2}, "int64"), x):sum()
                + F.interpolate(x:view(1, 1, 3, 4), {scale_factor = 2, mode = "bilinear"}):sum()
        end, {3, 4})
        assert(#failed == 0, table.concat(failed, "\n"))
    end)
end)
