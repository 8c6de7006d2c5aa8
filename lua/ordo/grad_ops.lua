-- ordo.grad_ops: the backward of every differentiable tensor op.
--
-- Installed by ordo.autograd over the methods of ordo.Tensor (and the
-- module functions matmul, cat, stack, where): each wrapper calls the
-- forward op, then, when grad mode is on and an input needs a gradient,
-- records a node whose backward function computes the input gradients
-- with ordinary tensor ops (pushes).  Gradients come back in the inputs'
-- shapes (sum_to undoes broadcasting).  In-place methods are wrapped with
-- a guard instead: they may not change, or read, a tensor that requires a
-- gradient while grad mode is on.
--
-- No wrapper contains a closure: each one calls a recorder (defined beside
-- it) that makes the backward function.  LuaJIT does not compile the
-- creation of a closure (FNEW) nor the closing of upvalues (UCLO) that
-- every return from a function holding one executes, so such a wrapper
-- aborted every trace through it and left the user's loop of tensor ops to
-- the interpreter (r = a + b took twice as long).  The spec "no op wrapper
-- holds a closure" keeps it so.
local util = require "ordo.util"
local extra_arg = util.extra_arg -- a further positional argument: an error naming it
local tensor = require "ordo.tensor"

local fail = util.fail
local Tensor = tensor.Tensor
local is_tensor, shape_of = tensor.is_tensor, tensor.shape_of
local fmt = string.format
local type, select, ipairs, pairs, unpack = type, select, ipairs, pairs, unpack

local M = {}

function M.install(ag)
    local record, needs, sum_to, list_needs = ag.record, ag.needs, ag.sum_to, ag.list_needs
    local raw = {}
    for k, v in pairs(Tensor) do raw[k] = v end
    M.raw = raw

    -- ------------------------------------------------------------ binary

    -- bw(g, a, b, y, need_a, need_b) -> ga, gb in the output's shape (or
    -- any shape that broadcasts to it); scalars (numbers) get none.  saves:
    -- the operands the backward reads ("a", "b", "y"), checked for in-place
    -- changes at backward.
    local function binary(name, f, bw, saves)
        saves = saves or ""
        local save_a, save_b, save_y = saves:find("a", 1, true), saves:find("b", 1, true), saves:find("y", 1, true)
        local function rec(a, b, y, ...)
            local ta, tb = is_tensor(a), is_tensor(b)
            local saved = {}
            if ta and save_a then saved[#saved + 1] = a end
            if tb and save_b then saved[#saved + 1] = b end
            if save_y then saved[#saved + 1] = y end
            local extra = select("#", ...) > 0 and {...} or nil
            record(name, y, {a, b, n = 2}, function(g)
                local na, nb = ta and a._rg, tb and b._rg
                local ga, gb = bw(g, a, b, y, na, nb, extra)
                if na and ga then ga = sum_to(ga:expand(shape_of(g)), shape_of(a)) end
                if nb and gb then gb = sum_to(gb:expand(shape_of(g)), shape_of(b)) end
                return na and ga or nil, nb and gb or nil
            end, saved)
        end
        return function(a, b, ...)
            local y = f(a, b, ...)
            if needs(a, b) then rec(a, b, y, ...) end
            return y
        end
    end

    local function alpha_of(extra) return extra and extra[1] or 1 end

    local add_bw = function(g, _, _, _, na, nb, extra)
        local al = alpha_of(extra)
        return na and g, nb and (al == 1 and g or g * al)
    end
    local sub_bw = function(g, _, _, _, na, nb, extra)
        local al = alpha_of(extra)
        return na and g, nb and (al == 1 and -g or g * -al)
    end
    local mul_bw = function(g, a, b, _, na, nb)
        return na and g * b, nb and g * a
    end
    local div_bw = function(g, a, b, y, na, nb)
        -- d(a/b)/da = 1/b; d(a/b)/db = -a/b^2 = -y/b
        return na and g / b, nb and -(g * y) / b
    end
    local pow_bw = function(g, a, b, y, na, nb)
        local ga, gb
        if na then
            -- d(a^b)/da = b a^(b-1), and 0 where b == 0 (a^0 is constant; at
            -- a == 0 the formula would give 0 * inf = NaN), as Torch
            if is_tensor(b) then
                ga = (g * b * raw.pow(a, b - 1)):masked_fill(b:eq(0), 0)
            elseif b == 0 then
                ga = tensor.zeros_like(g)
            else
                ga = g * b * raw.pow(a, b - 1)
            end
        end
        if nb then
            -- d(a^b)/db = a^b log a (a > 0); 0 where a == 0 and b >= 0, as
            -- Torch (0 * log 0 would be NaN), for a number base 0 too; where
            -- b < 0, inf * log 0 = -inf, as Torch's
            -- the base's log in g's dtype: an integer base's a:log() is the
            -- default float32 (a float64 exponent got float32 gradients)
            local la = is_tensor(a) and (a:dtype() == g:dtype() and a or a:to(g:dtype())):log() or math.log(a)
            gb = g * y * la
            if is_tensor(a) then
                gb = gb:masked_fill(a:eq(0):mul(b:ge(0)), 0)
            elseif a == 0 then
                gb = gb:masked_fill(b:ge(0), 0)
            end
        end
        return ga, gb
    end
    -- ties split the gradient in half (the subgradient's middle)
    -- As Torch's: each side gets the gradient unless it lost (lose(a, b):
    -- a lost to b), half of it on a tie; a NaN compares as neither, so
    -- where either side is NaN (the result NaN) both get all of it (the
    -- NaN side got none, the other all).
    -- The losing side's gradient is selected away (masked_fill), not
    -- multiplied by 0: an inf gradient there (x:maximum(0):sqrt() at
    -- negative x) made NaN, where Torch gives 0.
    local function extremum_bw(lose)
        return function(g, a, b, _, na, nb)
            local gt = g * (1 - a:eq(b):to(g:dtype()) * 0.5)
            return na and gt:masked_fill(lose(a, b), 0), nb and gt:masked_fill(lose(b, a), 0)
        end
    end

    local B = {
        add = add_bw, sub = sub_bw, mul = mul_bw, div = div_bw, pow = pow_bw,
        maximum = extremum_bw(function(a, b) return a:lt(b) end),
        minimum = extremum_bw(function(a, b) return a:gt(b) end),
    }
    local SAVE = {mul = "ab", div = "by", pow = "aby", maximum = "ab", minimum = "ab"}
    for name, bw in pairs(B) do
        Tensor[name] = binary(name, raw[name], bw, SAVE[name])
    end
    -- div with a rounding mode: derived.lua's div (a zero gradient for floats)
    local div_float = Tensor.div
    Tensor.div = function(a, b, mode)
        if mode ~= nil then return raw.div(a, b, mode) end
        return div_float(a, b)
    end
    Tensor.__add = binary("add", raw.__add, add_bw)
    Tensor.__sub = binary("sub", raw.__sub, sub_bw)
    Tensor.__mul = binary("mul", raw.__mul, mul_bw, SAVE.mul)
    Tensor.__div = binary("div", raw.__div, div_bw, SAVE.div)
    Tensor.__pow = binary("pow", raw.__pow, pow_bw, SAVE.pow)
    Tensor.__unm = function(a) return a:neg() end

    -- max(t) with a tensor is maximum; max(dim) gives values and indices
    local function extremum(name, f, pair)
        local function rec(x, dim, keepdim, v, idx)
            record(name, v, {x, n = 1}, function(g)
                if dim == nil then
                    -- every element equal to the extremum shares the gradient;
                    -- a NaN extremum (NaN propagates) is shared by the NaN
                    -- elements, as Torch's (x == NaN matched none: 0 / 0)
                    -- selected, not multiplied by the mask: an inf g made NaN
                    -- at every other element (Torch's CPU masked_fill: 0)
                    local m = x:eq(v):add(x:isnan():mul(v:isnan()))
                    return tensor.where(m, g / m:sum():to(g:dtype()), 0)
                end
                local gi, ii = g, idx
                if not keepdim then gi, ii = g:unsqueeze(dim), idx:unsqueeze(dim) end
                return tensor.zeros_like(x):scatter_add_(dim, ii, gi)
            end, dim == nil and {x, v} or {idx}) -- what the backward reads: x's values only over everything
            -- (along a dim only the indices route the gradient, as Torch's: x may change in place after)
        end
        return function(x, dim, keepdim)
            if is_tensor(dim) then return Tensor[pair](x, dim) end
            local v, idx = f(x, dim, keepdim)
            if needs(x) then rec(x, dim, keepdim, v, idx) end
            if idx == nil then return v end -- over everything: the value alone (no trailing nil at the REPL)
            return v, idx
        end
    end
    Tensor.max = extremum("max", raw.max, "maximum")
    Tensor.min = extremum("min", raw.min, "minimum")

    -- clamp(lo, hi), bounds numbers or tensors (broadcasting): as Torch,
    -- the gradient goes to x where lo <= x <= hi, to lo where x < lo (and
    -- lo < hi), to hi where x > hi or hi < lo (the forward takes hi when
    -- the bounds cross); a tensor bound's gradient is summed back to its
    -- shape.  A mask is a float 0/1 tensor: * is "and".  g is selected by
    -- it (masked_fill), not multiplied: an inf gradient where x was clamped
    -- (x:clamp(0):sqrt() at 0) made NaN there, where Torch gives 0.
    local function lt(a, b) -- a < b with a number on either side
        if is_tensor(a) then return a:lt(b) end
        return b:gt(a)
    end
    local function clamp_bw(g, x, lo, hi)
        local dt = g:dtype()
        local tlo, thi = is_tensor(lo), is_tensor(hi)
        local gx, glo, ghi
        if x._rg then
            local m
            if lo ~= nil then m = x:ge(lo):to(dt) end
            if hi ~= nil then
                local mh = x:le(hi):to(dt)
                m = m and m * mh or mh
            end
            gx = sum_to(g:masked_fill(m:eq(0), 0), shape_of(x))
        end
        -- the bounds cross where hi < lo (only then can both be tensors or numbers)
        local crossed = lo ~= nil and hi ~= nil and (tlo or thi) and lt(hi, lo):to(dt) or nil
        if tlo and lo._rg then
            local m = x:lt(lo):to(dt)
            if crossed then m = m * (1 - crossed) end
            glo = sum_to(g:masked_fill(m:eq(0), 0), shape_of(lo))
        end
        if thi and hi._rg then
            local m = x:gt(hi):to(dt)
            if crossed then m = (m + crossed):clamp(nil, 1) end -- "or"
            ghi = sum_to(g:masked_fill(m:eq(0), 0), shape_of(hi))
        end
        return gx, glo, ghi
    end
    local function rec_clamp(x, lo, hi, y)
        local saved = {x}
        if is_tensor(lo) then saved[#saved + 1] = lo end
        if is_tensor(hi) then saved[#saved + 1] = hi end
        record("clamp", y, {x, lo, hi, n = 3}, function(g) return clamp_bw(g, x, lo, hi) end, saved)
    end
    Tensor.clamp = function(x, lo, hi, extra)
        if extra ~= nil then extra_arg("clamp", "(min, max)", extra) end
        local y = raw.clamp(x, lo, hi)
        if needs(x, lo, hi) then rec_clamp(x, lo, hi, y) end
        return y
    end

    -- ------------------------------------------------------------ unary

    local TWO_OVER_SQRT_PI = 2 / math.sqrt(math.pi) -- erf'(x) = 2 / sqrt(pi) * exp(-x^2)
    local U = {
        neg = function(g) return -g end,
        abs = function(g, x) return g * (x:gt(0):to(g:dtype()) - x:lt(0):to(g:dtype())) end,
        relu = function(g, _, y) return g:masked_fill(y:le(0), 0) end,
        exp = function(g, _, y) return g * y end,
        log = function(g, x) return g / x end,
        sqrt = function(g, _, y) return g / (y * 2) end,
        tanh = function(g, _, y) return g * (1 - y * y) end,
        sigmoid = function(g, _, y) return g * y * (1 - y) end,
        square = function(g, x) return g * x * 2 end,
        sin = function(g, x) return g * x:cos() end,
        cos = function(g, x) return -(g * x:sin()) end,
        log1p = function(g, x) return g / (x + 1) end,
        expm1 = function(g, _, y) return g * (y + 1) end,
        rsqrt = function(g, _, y) return g * y * y * y * -0.5 end,
        reciprocal = function(g, _, y) return -(g * y * y) end,
        tan = function(g, _, y) return g * (y * y + 1) end,
        asin = function(g, x) return g * (1 - x * x):rsqrt() end,
        acos = function(g, x) return -(g * (1 - x * x):rsqrt()) end,
        atan = function(g, x) return g / (x * x + 1) end,
        sinh = function(g, x) return g * x:cosh() end,
        cosh = function(g, x) return g * x:sinh() end,
        asinh = function(g, x) return g * (x * x + 1):rsqrt() end,
        acosh = function(g, x) return g * (x * x - 1):rsqrt() end,
        atanh = function(g, x) return g / (1 - x * x) end,
        erf = function(g, x) return g * (x * x):neg():exp() * TWO_OVER_SQRT_PI end,
        erfc = function(g, x) return g * (x * x):neg():exp() * -TWO_OVER_SQRT_PI end,
        erfinv = function(g, _, y) return g * (y * y):exp() * (1 / TWO_OVER_SQRT_PI) end,
    }
    -- piecewise constant: no gradient (zero almost everywhere, as in Torch)
    local function zero_grad(g) return tensor.zeros_like(g) end
    for _, name in ipairs({"sign", "floor", "ceil", "round", "trunc"}) do U[name] = zero_grad end
    local SAVES = {neg = "", abs = "x", relu = "y", exp = "y", log = "x", sqrt = "y", tanh = "y", sigmoid = "y",
                   square = "x", sin = "x", cos = "x", log1p = "x", expm1 = "y", rsqrt = "y", reciprocal = "y",
                   tan = "y", asin = "x", acos = "x", atan = "x", sinh = "x", cosh = "x", asinh = "x", acosh = "x",
                   atanh = "x", erf = "x", erfc = "x", erfinv = "y",
                   sign = "", floor = "", ceil = "", round = "", trunc = ""}
    local function rec_unary(name, bw, what, x, y)
        local saved = what == "x" and {x} or what == "y" and {y} or nil
        record(name, y, {x, n = 1}, function(g) return bw(g, x, y) end, saved)
    end
    for name, bw in pairs(U) do
        local f = raw[name]
        local what = SAVES[name]
        Tensor[name] = function(x, extra)
            if extra ~= nil then extra_arg(name, "()", extra) end
            local y = f(x)
            if needs(x) then rec_unary(name, bw, what, x, y) end
            return y
        end
    end

    -- ------------------------------------------------------------ selection

    local raw_where = tensor.where
    -- cond is read by the backward: saved, so that changing it in place
    -- before backward raises instead of routing the gradient wrongly
    local function rec_where(cond, x, y, out)
        record("where", out, {x, y, n = 2}, function(g)
            -- g selected, as Torch's where(cond, g, 0), not multiplied by the
            -- mask: an inf or NaN of g where the other side was chosen
            -- (where(x > 0, x, 0):sqrt() at 0) made NaN gradients
            local gx = is_tensor(x) and x._rg and sum_to(raw_where(cond, g, 0):expand(shape_of(g)), shape_of(x)) or nil
            local gy = is_tensor(y) and y._rg and sum_to(raw_where(cond, 0, g):expand(shape_of(g)), shape_of(y)) or nil
            return gx, gy
        end, {cond})
    end
    tensor.where = function(cond, x, y, extra)
        if extra ~= nil then extra_arg("where", "(condition, x, y)", extra) end
        local out = raw_where(cond, x, y)
        if needs(x, y) then rec_where(cond, x, y, out) end
        return out
    end
    Tensor.where = function(x, cond, y, extra)
        if extra ~= nil then extra_arg("where", "(condition, y)", extra) end
        return tensor.where(cond, x, y)
    end

    -- x's gradient is g where the mask is clear; a tensor value (one
    -- element, as the forward reads it) gets the sum of g where it is set.
    -- The mask is saved: the backward reads it.
    local function masked_fill_bw(g, x, mask, value)
        local gx, gv
        if is_tensor(x) and x._rg then gx = sum_to(g:masked_fill(mask, 0), shape_of(x)) end
        if is_tensor(value) and value._rg then
            -- g where the mask is set, selected (Torch's masked_select), not
            -- multiplied by a 0/1 mask: an inf of g where it is clear (the
            -- sqrt of a 0 kept from x) made the value's gradient NaN
            gv = raw_where(mask, g, 0):sum():reshape(shape_of(value))
        end
        return gx, gv
    end
    local function rec_masked_fill(x, mask, value, y)
        local saved = {mask}
        record("masked_fill", y, {x, value, n = 2}, function(g) return masked_fill_bw(g, x, mask, value) end, saved)
    end
    Tensor.masked_fill = function(x, mask, value, extra)
        if extra ~= nil then extra_arg("masked_fill", "(mask, value)", extra) end
        local y = raw.masked_fill(x, mask, value)
        if needs(x, value) then rec_masked_fill(x, mask, value, y) end
        return y
    end

    -- gather / index_select: the gradient goes back through the adjoint
    -- (scatter_add_ / index_add_), straight into x's gradient (autograd.
    -- partial_into: an embedding looked up step by step made a zero-filled
    -- copy of its whole weight per step).  An index tensor is saved (the
    -- backward reads it); a Lua table of indices cannot change.
    local function saved_index(index)
        if is_tensor(index) then return {index} end
        return nil
    end
    -- The adjoint is pushed under "<op> backward" (Embedding's: "Embedding
    -- backward"): an index out of range fails the gradient naming the op
    -- the user called, not a kernel they never did.
    local function selection(name, adjoint)
        local function rec(x, dim, index, y, who)
            local bw = (who or name) .. " backward"
            record(name, y, {x, n = 1}, function(g)
                return ag.partial_into(Tensor[adjoint], g, dim, index, bw)
            end, saved_index(index))
        end
        Tensor[name] = function(x, dim, index, who)
            local y = raw[name](x, dim, index, who)
            if needs(x) then rec(x, dim, index, y, who) end
            return y
        end
    end
    selection("gather", "scatter_add_")
    selection("index_select", "index_add_")

    -- cumsum: each input element adds to every output at or after it, so
    -- its gradient is the sum of g from its place to the end of the line
    local function identity_bw(g) return g end
    local function rec_cumsum(x, dim, y)
        if x:dim() == 0 then return record("cumsum", y, {x, n = 1}, identity_bw) end
        local d = dim or 1
        record("cumsum", y, {x, n = 1}, function(g) return g:sum(d, true) - g:cumsum(d) + g end)
    end
    Tensor.cumsum = function(x, dim)
        local y = raw.cumsum(x, dim)
        if needs(x) then rec_cumsum(x, dim, y) end
        return y
    end

    -- cumprod: its own kernel (tensor.cumprod_backward), exact where x has
    -- zeros, as dividing g * y by x would not be
    local cumprod_backward = tensor.cumprod_backward
    local function rec_cumprod(x, dim, y)
        record("cumprod", y, {x, n = 1}, function(g) return cumprod_backward(x, g, dim) end, {x})
    end
    Tensor.cumprod = function(x, dim)
        local y = raw.cumprod(x, dim)
        if needs(x) then rec_cumprod(x, dim, y) end
        return y
    end

    -- sort: a permutation of each line; the gradient goes back to where
    -- each value came from (topk and argsort go through it)
    local function rec_sort(x, dim, values, idx)
        if x:dim() == 0 then return record("sort", values, {x, n = 1}, identity_bw) end
        local d = type(dim) == "number" and dim or -1
        record("sort", values, {x, n = 1}, function(g)
            local z = tensor.zeros_like(x)
            return z:scatter_add_(d, idx, g)
        end, {idx}) -- the indices the caller holds route the gradient: saved
    end
    Tensor.sort = function(x, dim, descending, extra)
        if extra ~= nil then extra_arg("sort", "(dim, descending)", extra) end
        local values, idx = raw.sort(x, dim, descending)
        if needs(x) then rec_sort(x, dim, values, idx) end
        return values, idx
    end

    -- out-of-place scatter_add / index_add: linear in self (gradient g) and
    -- in src (g read back through the selection they are the adjoint of)
    -- scatter_add reads only the part of src that index covers (src may be
    -- larger in any dim, as Torch's): the rest of src gets a zero gradient
    local function pad_to(gi, src)
        local gs, ss = shape_of(gi), shape_of(src)
        local same = #gs == #ss
        if same then for i = 1, #gs do if gs[i] ~= ss[i] then same = false break end end end
        if same then return gi end
        local z = tensor.zeros_like(src)
        local part = z
        for i = 1, #gs do part = raw.narrow(part, i, 1, gs[i]) end
        raw.copy_(part, gi)
        return z
    end
    local function accumulation(name, select)
        local function rec(x, dim, index, src, y, who)
            record(name, y, {x, src, n = 2}, function(g)
                local gsrc
                if is_tensor(src) and src._rg then gsrc = pad_to(g[select](g, dim, index, who), src) end
                return x._rg and g or nil, gsrc
            end, saved_index(index))
        end
        local params = name == "index_add" and "(dim, index, src, alpha)" or "(dim, index, src)"
        Tensor[name] = function(x, dim, index, src, who, extra)
            if extra ~= nil then extra_arg(name, params, extra) end
            -- index_add's alpha scales src here, so that its gradient has it too
            if who ~= nil and type(who) ~= "string" and name == "index_add" then
                src, who = tensor.index_add_alpha(name, src, who), nil
            end
            local y = raw[name](x, dim, index, src, who)
            if needs(x, src) then rec(x, dim, index, src, y, who) end
            return y
        end
    end
    accumulation("scatter_add", "gather")
    accumulation("index_add", "index_select")

    -- scatter (scatter_ is guarded as every in-place op): self's gradient
    -- is g with the written places zeroed; src's is g read back where each
    -- of its elements was written (gather: every one of repeated indices
    -- gets it, as Torch's); the part of src that index does not cover gets 0
    local function rec_scatter(x, dim, index, src, y)
        record("scatter", y, {x, src, n = 2}, function(g)
            local gsrc
            if is_tensor(src) and src._rg then gsrc = pad_to(g:gather(dim, index), src) end
            return x._rg and g:scatter(dim, index, 0) or nil, gsrc
        end, saved_index(index))
    end
    Tensor.scatter = function(x, dim, index, src, who)
        local y = raw.scatter(x, dim, index, src, who)
        if needs(x, src) then rec_scatter(x, dim, index, src, y) end
        return y
    end

    -- ------------------------------------------------------------ reductions

    -- g (reduced over dim, or everything) broadcast back to x's shape
    local function unreduce(g, x, dim, keepdim)
        local xs = shape_of(x)
        if dim == nil then
            local ones = {}
            for i = 1, #xs do ones[i] = 1 end
            return g:reshape(ones):expand(xs)
        end
        if not keepdim then g = g:unsqueeze(dim) end
        return g:expand(xs)
    end

    local function rec_sum(x, dim, keepdim, y)
        record("sum", y, {x, n = 1}, function(g) return unreduce(g, x, dim, keepdim) end)
    end
    Tensor.sum = function(x, dim, keepdim)
        local y = raw.sum(x, dim, keepdim)
        if needs(x) then rec_sum(x, dim, keepdim, y) end
        return y
    end

    local function rec_mean(x, dim, keepdim, y)
        record("mean", y, {x, n = 1}, function(g)
            local n = dim == nil and x:numel() or x:size(dim)
            return unreduce(g / n, x, dim, keepdim)
        end)
    end
    Tensor.mean = function(x, dim, keepdim)
        local y = raw.mean(x, dim, keepdim)
        if needs(x) then rec_mean(x, dim, keepdim, y) end
        return y
    end

    local function rec_softmax(x, dim, y)
        local d = dim or -1
        record("softmax", y, {x, n = 1}, function(g)
            local gy = g * y
            return y * (g - (gy:dim() == 0 and gy or gy:sum(d, true))) -- (a 0-dim x is one line)
        end, {y})
    end
    -- softmax(dim [, dtype]) and log_softmax: Torch's dtype (a float
    -- dtype's name, or {dtype = name}): the input cast to it first, the
    -- result of it (float32 scores softmaxed in float64).  It was ignored
    -- silently.  (Here, not in a wrapper around the op: a user's loop of
    -- softmax then compiled no more.)
    local function softmax_input(name, x, dtype)
        if not is_tensor(x) then return x end -- (the op itself names what x is)
        local dt = tensor.opt_dtype(name, dtype, true)
        return dt and x:to(dt) or x
    end
    Tensor.softmax = function(x, dim, dtype, extra)
        if extra ~= nil then extra_arg("softmax", "(dim, dtype)", extra) end
        if dtype ~= nil then x = softmax_input("softmax", x, dtype) end
        local y = raw.softmax(x, dim)
        if needs(x) then rec_softmax(x, dim, y) end
        return y
    end

    local function rec_log_softmax(x, dim, y)
        local d = dim or -1
        record("log_softmax", y, {x, n = 1}, function(g)
            return g - y:exp() * (g:dim() == 0 and g or g:sum(d, true)) -- (a 0-dim x is one line)
        end, {y})
    end
    Tensor.log_softmax = function(x, dim, dtype, extra)
        if extra ~= nil then extra_arg("log_softmax", "(dim, dtype)", extra) end
        if dtype ~= nil then x = softmax_input("log_softmax", x, dtype) end
        local y = raw.log_softmax(x, dim)
        if needs(x) then rec_log_softmax(x, dim, y) end
        return y
    end

    -- ------------------------------------------------------------ matmul

    -- 1-D operands are made 2-D (a row, a column), as the forward does;
    -- a 2-D operand broadcast over a batch gets its gradient summed back.
    local function matmul_bw(g, a, b, na, nb)
        local A = a:dim() == 1 and a:unsqueeze(1) or a
        local Bm = b:dim() == 1 and b:unsqueeze(2) or b
        local shape = {}
        if A:dim() == 3 or Bm:dim() == 3 then
            local ba, bb = A:dim() == 3 and A:size(1) or 1, Bm:dim() == 3 and Bm:size(1) or 1
            shape[1] = ba == 1 and bb or ba -- (a batch of 1 broadcasts, to 0 too)
        end
        shape[#shape + 1] = A:size(-2)
        shape[#shape + 1] = Bm:size(-1)
        local G = g:reshape(shape)
        local ga, gb
        if na then ga = sum_to(tensor.matmul(G, Bm:transpose(-1, -2)), shape_of(A)):reshape(shape_of(a)) end
        if nb then gb = sum_to(tensor.matmul(A:transpose(-1, -2), G), shape_of(Bm)):reshape(shape_of(b)) end
        return ga, gb
    end

    local raw_matmul = tensor.matmul
    M.raw_matmul = raw_matmul
    local function rec_matmul(a, b, y)
        record("matmul", y, {a, b, n = 2}, function(g)
            return matmul_bw(g, a, b, a._rg, b._rg)
        end, {a, b})
    end
    -- Operands above 3-D (Torch's broadcast batched matmul): the batch dims
    -- (all but the last two; a 1-D operand is a row or a column) broadcast
    -- against each other, both operands are expanded to them and flattened
    -- into one batch of 3-D matmul.  Made of differentiable ops, so the
    -- gradients (summed back over broadcast dims) need no code of their own.
    local function matmul_nd(a, b)
        local sa, sb = shape_of(a), shape_of(b)
        local va = #sa == 1 and a:view(1, sa[1]) or a
        local vb = #sb == 1 and b:view(sb[1], 1) or b
        local SA, SB = shape_of(va), shape_of(vb)
        local m, k, k2, n = SA[#SA - 1], SA[#SA], SB[#SB - 1], SB[#SB]
        if k ~= k2 then
            fail(fmt("matmul: shapes %s and %s cannot be multiplied (inner dimensions %d and %d differ)",
                     tensor.shape_str(sa), tensor.shape_str(sb), k, k2))
        end
        local nba, nbb = #SA - 2, #SB - 2
        local nbatch = math.max(nba, nbb)
        local batch, total = {}, 1
        for i = 1, nbatch do
            local x, y = SA[i - (nbatch - nba)] or 1, SB[i - (nbatch - nbb)] or 1 -- missing leading dims: 1
            if x ~= y and x ~= 1 and y ~= 1 then
                fail(fmt("matmul: batch dims of shapes %s and %s do not broadcast (%d against %d)",
                         tensor.shape_str(sa), tensor.shape_str(sb), x, y))
            end
            batch[i] = x == 1 and y or x
            total = total * batch[i]
        end
        local ea, eb, es = {unpack(batch)}, {unpack(batch)}, {unpack(batch)}
        ea[nbatch + 1], ea[nbatch + 2] = m, k
        eb[nbatch + 1], eb[nbatch + 2] = k, n
        es[nbatch + 1], es[nbatch + 2] = m, n
        local y = tensor.matmul(va:expand(ea):reshape(total, m, k), vb:expand(eb):reshape(total, k, n)):view(es)
        if #sa == 1 then return y:squeeze(nbatch + 1) end
        if #sb == 1 then return y:squeeze(nbatch + 2) end
        return y
    end
    tensor.matmul = function(a, b, extra)
        if extra ~= nil then extra_arg("matmul", "(a, b)", extra) end
        if is_tensor(a) and is_tensor(b) and (a._c.ndim > 3 or b._c.ndim > 3) then return matmul_nd(a, b) end
        local y = raw_matmul(a, b)
        if needs(a, b) then rec_matmul(a, b, y) end
        return y
    end
    Tensor.matmul = function(a, b, extra)
        if extra ~= nil then extra_arg("matmul", "(other)", extra) end
        return tensor.matmul(a, b)
    end

    -- ------------------------------------------------------------ shapes and copies

    local function view_like(name, f, bw)
        local function rec(x, y, ...)
            local args = {...}
            local n = select("#", ...)
            record(name, y, {x, n = 1}, function(g) return bw(g, x, args, n) end)
        end
        Tensor[name] = function(x, ...)
            local y = f(x, ...)
            if y ~= x then
                if needs(x) then
                    rec(x, y, ...)
                elseif (x._rg or x._nograd_view) and y._c.storage == x._c.storage then
                    -- a view made under no_grad of a tensor that requires a
                    -- gradient (or of such a view): no graph links it to
                    -- that tensor, so an in-place op on it with grad mode
                    -- on is refused below, as Torch refuses it
                    y._nograd_view = true
                end
            end
            return y
        end
    end
    local function back_to_shape(g, x) return g:reshape(shape_of(x)) end
    for _, name in ipairs({"view", "reshape", "flatten", "squeeze"}) do
        view_like(name, raw[name], back_to_shape)
    end
    view_like("unsqueeze", raw.unsqueeze, function(g, x) return g:reshape(shape_of(x)) end)
    view_like("transpose", raw.transpose, function(g, x, args)
        local d1, d2 = args[1], args[2]
        if d1 == nil and d2 == nil then d1, d2 = 1, 2 end
        return g:transpose(d1, d2)
    end)
    view_like("t", raw.t, function(g) return g:t() end)
    view_like("permute", raw.permute, function(g, x, args)
        local perm = type(args[1]) == "table" and args[1] or args
        local n = x:dim()
        local inv = {}
        for i = 1, n do
            local p = perm[i]
            if p < 0 then p = p + n + 1 end
            inv[p] = i
        end
        return g:permute(inv)
    end)
    view_like("expand", raw.expand, function(g, x) return sum_to(g, shape_of(x)) end)
    view_like("expand_as", raw.expand_as, function(g, x) return sum_to(g, shape_of(x)) end)
    -- a part of x: its gradient is added into that part of x's (autograd.partial)
    view_like("narrow", raw.narrow, function(g, x, args)
        return ag.partial(raw.narrow, g, args[1], args[2], args[3])
    end)
    view_like("select", raw.select, function(g, x, args)
        return ag.partial(raw.select, g, args[1], args[2])
    end)
    -- unfold: each element gets the gradient of every window it is in:
    -- g's window dim (last) moved beside dim and the two merged, then
    -- added back at the elements' places (i step + j, window i, element j)
    view_like("unfold", raw.unfold, function(g, x, args)
        local size, step = args[2], args[3]
        local nd = x:dim()
        if nd == 0 then return size == 1 and g:reshape({}) or tensor.zeros_like(x) end
        local d = args[1] < 0 and args[1] + nd + 1 or args[1]
        local nw = g:size(d)
        local perm, merged = {}, shape_of(x)
        for i = 1, d do perm[i] = i end
        perm[d + 1] = nd + 1
        for i = d + 1, nd do perm[i + 1] = i end
        merged[d] = nw * size
        local gm = g:permute(perm):reshape(merged)
        local i64 = tensor.like(x, "int64")
        local idx = (tensor.arange(nw, i64) * step):view(nw, 1) + tensor.arange(1, size + 1, i64):view(1, size)
        return tensor.zeros_like(x):index_add_(d, idx:reshape(-1), gm)
    end)
    -- diagonal: g goes back onto that diagonal of zeros (copied: a backward records nothing)
    view_like("diagonal", raw.diagonal, function(g, x, args)
        local z = tensor.zeros_like(x)
        raw.diagonal(z, args[1], args[2], args[3]):copy_(g)
        return z
    end)
    view_like("contiguous", raw.contiguous, function(g) return g end)
    view_like("clone", raw.clone, function(g) return g end)
    -- to(dtype/device): the gradient goes back to x's dtype and device
    view_like("to", raw.to, function(g, x) return g:to(x:device(), x:dtype()) end)

    local raw_cat = tensor.cat
    local function rec_cat(list, dim, y)
        local inputs = {n = #list}
        for i = 1, #list do inputs[i] = list[i] end
        record("cat", y, inputs, function(g)
            local r, off = {}, 1
            local d = dim or 1
            for i = 1, #list do
                local len = list[i]:size(d)
                if list[i]._rg then r[i] = g:narrow(d, off, len) end
                off = off + len
            end
            return r -- one list: unpack fails past a few thousand values (an LSTM over 10,000 steps)
        end)
    end
    tensor.cat = function(list, dim, extra)
        if extra ~= nil then extra_arg("cat", "(tensors, dim)", extra) end
        local y = raw_cat(list, dim)
        if type(list) == "table" and list_needs(list) then rec_cat(list, dim, y) end
        return y
    end
    -- stack is cat of unsqueezed views: its graph comes through those ops
    local raw_stack = tensor.stack
    tensor.stack = function(list, dim, extra)
        if extra ~= nil then extra_arg("stack", "(tensors, dim)", extra) end
        if type(list) == "table" and list_needs(list) then
            local d = tensor.stack_check(list, dim)
            local parts = {}
            for i, t in ipairs(list) do parts[i] = t:unsqueeze(d) end
            return tensor.cat(parts, d)
        end
        return raw_stack(list, dim)
    end

    -- ------------------------------------------------------------ in-place guards

    -- What to use instead of an in-place op: "the out-of-place add" where
    -- that op exists; the ops below have none of that name (t[i] = x and
    -- t[{...}] = x fill_ or copy_ a view, so their errors, renamed as the
    -- assignment, suggest these too).
    local INSTEAD = {
        fill_ = "ordo.full_like(t, x) for all of it, t:masked_fill(mask, x) or ordo.where(mask, x, t) for part " ..
            "of it (t[i] = x fills in place)",
        zero_ = "ordo.zeros_like(t)",
        copy_ = "the source itself (src:clone(), src:expand_as(t)), or ordo.where / ordo.cat to build the new " ..
            "tensor (t[i] = tensor copies in place)",
        uniform_ = "ordo.rand (random values carry no gradient)",
        normal_ = "ordo.randn (random values carry no gradient)",
        bernoulli_ = "ordo.bernoulli (random values carry no gradient)",
    }
    local function instead(name)
        local alt = INSTEAD[name]
        if alt then return alt end
        local base = name:sub(1, -2)
        if raw[base] ~= nil then return "the out-of-place " .. base end
        return "an out-of-place op"
    end
    -- in-place ops whose tensor arguments never carry a gradient through
    -- (bernoulli_'s probabilities only pick where the ones fall)
    local ARGS_CARRY_NO_GRADIENT = {bernoulli_ = true}
    for name, f in pairs(raw) do
        if type(f) == "function" and name:match("[^_]_$") and name ~= "requires_grad_" and name ~= "detach_" then
            local alt = instead(name)
            local check_args = not ARGS_CARRY_NO_GRADIENT[name]
            Tensor[name] = function(self, ...)
                if ag.is_enabled() then
                    if type(self) == "table" and self._rg then
                        fail(fmt("%s: a tensor that requires a gradient cannot be changed in place " ..
                                 "(use %s, or wrap the update in ordo.no_grad)", name, alt))
                    end
                    if type(self) == "table" and self._nograd_view then
                        fail(fmt("%s: this view was made under ordo.no_grad of a tensor that requires a " ..
                                 "gradient, so it cannot be changed in place with grad mode on (the change " ..
                                 "would reach that tensor unseen); make the change under ordo.no_grad too", name))
                    end
                    for i = 1, check_args and select("#", ...) or 0 do
                        local a = select(i, ...)
                        if type(a) == "table" and a._rg then
                            fail(fmt("%s: an in-place op cannot take an input that requires a gradient " ..
                                     "(its gradient would be lost); use %s", name, alt))
                        end
                    end
                end
                return f(self, ...)
            end
        end
    end
end

return M
