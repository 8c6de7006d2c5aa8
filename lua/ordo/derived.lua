-- ordo.derived: tensor ops made of other ops, with no kernel of their own.
-- They run on every device the ops they use run on, and autograd
-- differentiates them through those ops (they call the methods as they are
-- when called, so autograd's wrappers are the ones used).  Statistics
-- (var, std, prod, median, kthvalue, norm, logsumexp), answers as a Lua
-- boolean (allclose, equal, all, any), making tensors (eye, linspace,
-- logspace, meshgrid, randint, randperm), vectors and matrices (dot,
-- outer, mm, bmm, addmm, baddbmm, addmv, addr, addbmm, einsum, tensordot,
-- mv, trace, tril, triu, diag, diagonal, diag_embed, flip, unique,
-- unique_consecutive, masked_select, kron, cross, cdist, take), elementwise
-- (log2, log10, isnan, isinf, isfinite, isclose, nan_to_num, lerp, fmod,
-- remainder, addcmul, addcdiv), along a dim (diff, cummax, cummin,
-- logcumsumexp), counting (bincount, histc), rearranging (roll, tile)
-- and cutting one into views (chunk, split, tensor_split); at the end,
-- small conveniences (atan2, hypot, movedim, new_zeros...).
local tensor = require "ordo.tensor"
local util = require "ordo.util"
local extra_arg = util.extra_arg -- a further positional argument: an error naming it

local Tensor, is_tensor, is_int, check_self = tensor.Tensor, tensor.is_tensor, tensor.is_int, tensor.check_self
local check_devices, check_devices_list = tensor.check_devices, tensor.check_devices_list
local fail, typename = util.fail, util.typename

local own_errors = util.own_errors
local show = util.show -- values in error messages (a tensor by its shape, not its values)
local fmt, ceil, huge = string.format, math.ceil, math.huge
local type, tostring, ipairs, pairs, rawequal, getmetatable, unpack =
    type, tostring, ipairs, pairs, rawequal, getmetatable, unpack

local M = {}

local function shape_of_str(t) return tensor.shape_str(t:shape()) end

-- The length of t along dim, a bad dim named under fname (t:size(dim)
-- would name size, an op the user did not call).
local function size_along(fname, t, dim)
    return t:size(tensor.norm_dim(fname, t, dim) + 1)
end

-- Checks a dim argument (nil allowed) under fname.
local function check_dim(fname, t, dim)
    if dim ~= nil then tensor.norm_dim(fname, t, dim) end
end

local function is_float(t)
    local dt = t:dtype()
    return dt == "float32" or dt == "float64"
end

-- An integer tensor made float for a float op: the default dtype (float32,
-- float64 after ordo.set_default_dtype("float64")), as Torch's.
local function to_default_float(t) return t:to(tensor.get_default_dtype()) end

-- An in-place op's refusal in grad mode, under its own name and with its
-- own out-of-place form (addcmul_'s add_ inside named itself and suggested
-- add; floor_divide_ suggested div, cumsum_ named copy_).
local function inplace_guard(fname, self)
    local autograd = package.loaded["ordo.autograd"]
    if self._rg and autograd and autograd.is_enabled() then
        fail(fmt("%s: a tensor that requires a gradient cannot be changed in place (use the out-of-place %s, " ..
                 "or wrap the update in ordo.no_grad)", fname, fname:sub(1, -2)))
    end
end

-- var(dim, keepdim, correction): the variance over all elements (dim nil)
-- or over dim, divided by n - correction (default 1, Bessel's: the
-- unbiased estimate, as Torch); integers compute in float32.  Two passes,
-- the second corrected for the error of the first one's mean (sum d^2 -
-- (sum d)^2 / n, d = x - mean): a float32 mean rounds (1e7 and 1e7 + 1
-- alternating: the mean 1e7 + 0.5 is not a float32), and d^2 about the
-- rounded mean alone made the variance 0.5, not 0.25; Torch accumulates
-- in double.
function Tensor:var(dim, keepdim, correction)
    check_self("var", self)
    if correction == nil then correction = 1 end
    if type(correction) ~= "number" then
        fail("var: correction must be a number, got " .. typename(correction))
    end
    local n = dim == nil and self:numel() or size_along("var", self, dim)
    local mean = dim == nil and self:mean() or self:mean(dim, true)
    local d = self - mean
    local ss = dim == nil and (d * d):sum() or (d * d):sum(dim, keepdim)
    if n > 0 then
        local sd = dim == nil and d:sum() or d:sum(dim, keepdim)
        -- (never below 0, which rounding could give for a constant input: std would be NaN)
        ss = (ss - sd * sd / n):clamp(0)
    end
    local denom = n - correction
    return ss / (denom > 0 and denom or 0) -- 0 / 0: NaN, as Torch, when there are too few elements
end

function Tensor:std(dim, keepdim, correction)
    check_self("std", self)
    check_dim("std", self, dim)
    if correction ~= nil and type(correction) ~= "number" then
        fail("std: correction must be a number, got " .. typename(correction))
    end
    local v = self:var(dim, keepdim, correction)
    local autograd = package.loaded["ordo.autograd"]
    if not (autograd and autograd.needs(v)) then return v:sqrt() end
    -- sqrt's derivative is infinite at 0 (a constant input), and inf * 0
    -- is NaN; Torch's std takes 0 there: the root of 1, then 0 selected
    -- (as norm does), so a constant input's gradient is 0
    local zero = v:eq(0)
    return tensor.where(zero, 0, tensor.where(zero, 1, v):sqrt())
end

-- t summed over all elements (dim nil) or over dim.
local function sum_over(t, dim, keepdim)
    if dim == nil then return t:sum() end
    return t:sum(dim, keepdim)
end

-- prod(dim, keepdim): the product over all elements (dim nil, a 0-dim
-- tensor) or over dim; integers multiply in int64 (wrapping), as sum adds.
-- The last of the running products (cumprod), so its gradient is
-- cumprod's, exact where x has zeros; the product of nothing is 1.
function Tensor:prod(dim, keepdim)
    check_self("prod", self)
    if self:dim() == 0 then return self:cumprod() end -- its one element (integers in int64)
    local x, d = self, 1
    if dim == nil then x = self:reshape(-1) else d = tensor.norm_dim("prod", self, dim) + 1 end
    local n = x:size(d)
    local p
    if n == 0 then
        if is_float(x) then
            -- ones made from x (a sum over nothing is 0), so that the result
            -- stays in x's graph: its gradient is x's (empty) zeros
            p = x:sum(d, true) + 1
        else
            local shape = x:shape()
            shape[d] = 1
            p = tensor.ones(shape, tensor.like(x, "int64"))
        end
    else
        p = x:cumprod(d):narrow(d, n, 1)
    end
    if dim == nil then return p:reshape() end
    if keepdim then return p end
    return p:squeeze(d)
end

-- The k-th smallest along dim d (1-based) of a sort: values, indices,
-- kept as a dim of size 1.
local function kth_of_sort(x, d, k)
    local values, idx = x:sort(d)
    return values:narrow(d, k, 1), idx:narrow(d, k, 1)
end

-- The dim of a selection along one dim (median, kthvalue): 1-based, the
-- last by default; x as a line when it has no dims.
local function select_dim(fname, x, dim)
    if x:dim() == 0 then return nil end
    return tensor.norm_dim(fname, x, dim or -1) + 1
end

-- kthvalue(k [, dim = -1] [, keepdim]): the k-th smallest value along dim
-- and its int64 index (from 1); NaN counts as the largest, as in sort.
function Tensor:kthvalue(k, dim, keepdim)
    check_self("kthvalue", self)
    local d = select_dim("kthvalue", self, dim)
    local n = d and self:size(d) or 1
    if not is_int(k) or k < 1 or k > n then
        fail(fmt("kthvalue: k must be an integer in 1..%d (the size of dim %s of shape %s), got %s", n,
                 show(d or 1), shape_of_str(self), show(k)))
    end
    if not d then return self:clone(), tensor.zeros({}, tensor.like(self, "int64")) + 1 end
    -- on the CPU a selection (O(n) a line), sort's k-th exactly; a small k
    -- through topk's heap (n log k, faster still): the last of the k smallest
    local v, i
    if k * 16 <= n and self:device().type ~= "gpu" then
        v, i = self:topk(k, d, false)
        v, i = v:narrow(d, k, 1), i:narrow(d, k, 1)
    else
        v, i = tensor.select_place(self, d, k)
        if not v then v, i = kth_of_sort(self, d, k) end
    end
    if keepdim then return v, i end
    return v:squeeze(d), i:squeeze(d)
end

-- median(): the lower median of all elements (the (n+1)/2-th smallest,
-- rounded down), a 0-dim tensor; median(dim [, keepdim]): values and int64
-- indices along dim.  A line holding NaN has median NaN (as Torch; its
-- index is that of a NaN).
-- median() of everything: its gradient is shared evenly by the elements
-- equal to the median (by the NaN elements when it is NaN), as Torch's
-- (and max()'s); one sorted place would pick an arbitrary one of the ties.
local function record_median_all(x, v)
    local autograd = package.loaded["ordo.autograd"]
    return autograd.record("median", v, {x, n = 1}, function(g)
        -- selected, not multiplied by the mask: an inf g made NaN at
        -- every other element (Torch's CPU masked_fill: 0)
        local m = x:eq(v):add(x:isnan():mul(v:isnan()))
        return tensor.where(m, g / m:sum():to(g:dtype()), 0)
    end, {x, v})
end

function Tensor:median(dim, keepdim)
    check_self("median", self)
    local x, d = self, nil
    if dim == nil then
        if self:numel() == 0 then fail("median: cannot take the median of an empty tensor") end
        local autograd = package.loaded["ordo.autograd"]
        if autograd and autograd.needs(self) then
            return record_median_all(self, self:detach():median())
        end
        x, d = self:reshape(-1), 1
    else
        d = select_dim("median", self, dim)
        if d and self:size(d) == 0 then
            fail(fmt("median: cannot take the median of dim %d of size 0 (shape %s)", d, shape_of_str(self)))
        end
        if not d then return self:clone(), tensor.zeros({}, tensor.like(self, "int64")) + 1 end
    end
    local n = x:size(d)
    -- on the CPU a selection (O(n) a line; a line with NaN gives its last NaN)
    local v, i = tensor.select_place(x, d, math.floor((n + 1) / 2), true)
    if not v then
        local values, idx = x:sort(d)
        v, i = values:narrow(d, math.floor((n + 1) / 2), 1), idx:narrow(d, math.floor((n + 1) / 2), 1)
        if is_float(x) then -- NaN sorts last: a line ending in NaN has it as its median
            local last_v, last_i = values:narrow(d, n, 1), idx:narrow(d, n, 1)
            local nan = last_v:isnan()
            v, i = tensor.where(nan, last_v, v), tensor.where(nan, last_i, i)
        end
    end
    if dim == nil then return v:reshape() end
    if keepdim then return v, i end
    return v:squeeze(d), i:squeeze(d)
end

-- norm(0), the count of nonzero elements, is piecewise constant: a zero
-- gradient, as Torch's (without a node, a loss of it alone could not go
-- backward, and one made of it and more lost nothing but the error).
local function record_zero_norm(x, r)
    local autograd = package.loaded["ordo.autograd"]
    return autograd.record("norm", r, {x, n = 1}, function() return tensor.zeros_like(x) end)
end

-- norm(p, dim, keepdim): the p-norm (default 2; math.huge or "inf": the
-- largest magnitude; -math.huge or "-inf": the smallest; 0: the number of
-- nonzero elements, as Torch) over all elements or over dim.
function Tensor:norm(p, dim, keepdim)
    check_self("norm", self)
    if p == nil then p = 2 end
    if p == "inf" then p = huge elseif p == "-inf" then p = -huge elseif p == "fro" then p = 2 end
    if type(p) ~= "number" or (p < 0 and p ~= -huge) or p ~= p then
        fail("norm: p must be a number >= 0, \"inf\", \"-inf\" or \"fro\", got " .. show(p))
    end
    check_dim("norm", self, dim)
    local x = is_float(self) and self or to_default_float(self)
    if p == 0 then -- (NaN counts: it is not 0)
        local r = sum_over(x:ne(0):to(x:dtype()), dim, keepdim)
        local autograd = package.loaded["ordo.autograd"]
        if autograd and autograd.needs(x) then return record_zero_norm(x, r) end
        return r
    end
    local a = x:abs()
    if p == -huge then
        local n = dim == nil and a:numel() or size_along("norm", a, dim)
        if n == 0 then
            fail(fmt("norm: the -inf norm (the smallest magnitude) of no elements is undefined (shape %s)",
                     shape_of_str(self)))
        end
        if dim == nil then return a:min() end
        return a:amin(dim, keepdim) -- ties share the gradient, as "inf"
    end
    if p == huge then
        if a:numel() == 0 then return sum_over(a, dim, keepdim) end -- no elements: 0, as Torch
        if dim == nil then return a:max() end
        return a:amax(dim, keepdim) -- ties share the gradient, as over everything
    end
    if p == 1 then return sum_over(a, dim, keepdim) end
    local reduced = dim == nil and x:numel() or size_along("norm", x, dim)
    if reduced == 0 then return sum_over(a, dim, keepdim) end -- no elements: 0
    -- The sum runs on x / m, m the largest magnitude (a constant: the value
    -- and the gradient are those of the plain formula): x^p of float32
    -- overflowed past 1e19 (the norm of {1e30, 1e30} was inf) and
    -- underflowed below 1e-19 (that of {1e-30, 1e-30} was 0).
    local m = dim == nil and a:max() or (a:amax(dim, true))
    m = m:detach()
    m = m:masked_fill(m:eq(0):add(m:eq(huge)):ne(0), 1) -- all zeros, or an inf: nothing to scale
    local y = x / m
    local autograd = package.loaded["ordo.autograd"]
    local ya = p ~= 2 and y:abs() or nil
    if p < 1 and autograd and autograd.needs(x) then
        -- |y|^p's derivative p |y|^(p-1) is infinite at a zero element for
        -- p < 1 (and abs's 0 there times it NaN); Torch takes 0 there: the
        -- power of 1 in those places, then 0 selected, so no inf is met
        local z = ya:eq(0)
        ya = tensor.where(z, 0, tensor.where(z, 1, ya):pow(p))
    elseif ya then
        ya = ya:pow(p)
    end
    local s = p == 2 and sum_over(y * y, dim, true) or sum_over(ya, dim, true)
    if dim == nil then s = s:reshape({}) end
    local r
    if not (autograd and autograd.needs(x)) then
        r = p == 2 and s:sqrt() or s:pow(1 / p)
    else
        -- The root's derivative is infinite at 0 (and inf * 0 is NaN), where
        -- Torch takes the subgradient 0: the root of 1 there, then 0 selected,
        -- so the zero norm's gradient is 0 (F.normalize of a zero row stays finite).
        local zero = s:eq(0)
        local safe = tensor.where(zero, 1, s)
        r = tensor.where(zero, 0, p == 2 and safe:sqrt() or safe:pow(1 / p))
    end
    r = r * m
    if dim ~= nil and not keepdim then r = r:squeeze(tensor.norm_dim("norm", x, dim) + 1) end
    return r
end

-- logsumexp(dim, keepdim): log(sum(exp(t))) over all elements or over dim,
-- without overflow (the largest element is taken out first).
function Tensor:logsumexp(dim, keepdim)
    check_self("logsumexp", self)
    check_dim("logsumexp", self, dim)
    local x = is_float(self) and self or to_default_float(self)
    -- nothing to sum: log 0, as Torch (max would raise on no elements)
    if x:numel() == 0 then return sum_over(x, dim, keepdim) - huge end
    local m = dim == nil and x:max() or (x:max(dim, true))
    -- an infinite largest element would give inf - inf: shift by 0 there
    m = m:detach():masked_fill(m:abs():eq(huge), 0)
    local s = dim == nil and (x - m):exp():sum() or (x - m):exp():sum(dim, true)
    local r = s:log() + m
    if dim ~= nil and not keepdim then r = r:squeeze(dim) end
    return r
end

-- The mask (uint8) of the elements of a close to b: a == b or |a - b| <=
-- atol + rtol * |b| (b broadcast to a; NaNs are close only with
-- equal_nan, equal infinities are).
local function close_mask(fname, a, b, rtol, atol, equal_nan)
    check_self(fname, a)
    check_devices(fname, a, b)
    rtol, atol = rtol or 1e-5, atol or 1e-8
    if type(rtol) ~= "number" or type(atol) ~= "number" then
        fail(fmt("%s: rtol and atol must be numbers, got %s and %s", fname, typename(rtol), typename(atol)))
    end
    if equal_nan ~= nil and type(equal_nan) ~= "boolean" then
        fail(fmt("%s: equal_nan must be a boolean, got %s", fname, typename(equal_nan)))
    end
    if not is_tensor(b) and type(b) ~= "number" then
        fail(fmt("%s: expected a tensor or a number to compare with, got %s", fname, typename(b)))
    end
    if is_tensor(b) then -- b broadcasts to a (the difference's error would name sub)
        local sa, sb = a:shape(), b:shape()
        local ok = #sb <= #sa
        for i = 1, #sb do
            local x, y = sa[#sa - #sb + i], sb[i]
            if ok and y ~= 1 and y ~= x then ok = false end
        end
        if not ok then
            fail(fmt("%s: b of shape %s does not broadcast to a's shape %s", fname, shape_of_str(b), shape_of_str(a)))
        end
    end
    -- integers compare in float64: their difference (and |b|) in their own
    -- dtype wraps (uint8 0 - 1 is 255, int64 2^62 - -2^62 is negative), so
    -- close values were far and far ones close; a:eq(b) keeps exact equality
    local x, y = a, b
    if not tensor.result_type(a, b):match("^float") then
        x = a:double()
        if is_tensor(b) then y = b:double() end
    end
    local tol = is_tensor(y) and y:abs() * rtol + atol or math.abs(y) * rtol + atol
    -- as NumPy: an infinite difference is never close (the tolerance of an
    -- infinite b is infinite too), equal values always (inf - inf is NaN)
    local d = (x - y):abs()
    local close = d:le(tol):mul(d:ne(huge)):maximum(a:eq(b))
    if equal_nan then
        local bn = is_tensor(y) and y:isnan() or (y ~= y and 1 or 0)
        close = close:maximum(x:isnan():mul(bn))
    end
    return close
end

-- isclose(a, b [, rtol [, atol [, equal_nan]]]): Torch's, a uint8 mask of
-- the shape of a (b broadcasts to it).
function M.isclose(a, b, rtol, atol, equal_nan, extra)
    if extra ~= nil then extra_arg("isclose", "(other, rtol, atol, equal_nan)", extra) end
    local close = close_mask("isclose", a, b, rtol, atol, equal_nan)
    return close:expand(a:shape()):contiguous()
end
Tensor.isclose = M.isclose

-- allclose(a, b [, rtol [, atol [, equal_nan]]]): isclose everywhere; a Lua
-- boolean (waits).
function M.allclose(a, b, rtol, atol, equal_nan, extra)
    if extra ~= nil then extra_arg("allclose", "(other, rtol, atol, equal_nan)", extra) end
    local close = close_mask("allclose", a, b, rtol, atol, equal_nan)
    if close:numel() == 0 then return true end
    return close:min():item() == 1
end
Tensor.allclose = M.allclose

-- equal(a, b): the same shape and the same values (a Lua boolean; waits).
function M.equal(a, b, extra)
    if extra ~= nil then extra_arg("equal", "(other)", extra) end
    check_self("equal", a)
    if not is_tensor(b) then fail("equal: expected a tensor to compare with, got " .. typename(b)) end
    check_devices("equal", a, b)
    local sa, sb = a:shape(), b:shape()
    if #sa ~= #sb then return false end
    for i = 1, #sa do if sa[i] ~= sb[i] then return false end end
    if a:numel() == 0 then return true end
    return a:eq(b):min():item() == 1
end
Tensor.equal = M.equal

-- An empty tensor of the dtype, device and engine opts asks for, a bad
-- option named under fname (tensor.empty's error would name empty).
local function proto_of(fname, opts)
    local ok, r = pcall(tensor.empty, {0}, opts)
    if not ok then error((tostring(r):gsub("empty: ", fname .. ": ", 1)), 0) end
    return r
end

-- tensor.zeros(shape, opts), an error (out of memory) named under fname.
local function zeros_named(fname, shape, opts)
    local ok, r = pcall(tensor.zeros, shape, opts)
    if not ok then error((tostring(r):gsub("zeros: ", fname .. ": ", 1)), 0) end
    return r
end

-- eye(n [, m] [, opts]): ones on the diagonal of an n x m matrix (m = n).
function M.eye(n, m, opts, extra)
    if extra ~= nil then extra_arg("eye", "(n, m, opts)", extra) end
    if type(m) ~= "number" and m ~= nil then m, opts = nil, m end
    m = m or n
    if not is_int(n) or not is_int(m) or n < 0 or m < 0 then
        fail(fmt("eye: sizes must be integers >= 0, got %s and %s", show(n), show(m)))
    end
    -- the result first: a size too large fails here, before the index rows
    local proto = proto_of("eye", opts) -- the dtype, device and engine asked for
    local out = tensor.new_on("eye", proto, {n, m}, proto._c.dtype)
    local rows = tensor.arange(n, tensor.like(out, "int64")):view(n, 1)
    local cols = tensor.arange(m, tensor.like(out, "int64")):view(1, m)
    return out:copy_(rows:eq(cols))
end

-- linspace(start, stop, n [, opts]): n values evenly from start to stop,
-- both included (float32 unless opts says otherwise).
local function linspace(start, stop, n, opts)
    if type(start) ~= "number" or type(stop) ~= "number" then
        fail(fmt("linspace: start and stop must be numbers, got %s and %s", typename(start), typename(stop)))
    end
    if not is_int(n) or n < 0 or n >= 2 ^ 53 then
        fail("linspace: the count must be an integer >= 0 (below 2^53), got " .. show(n))
    end
    local proto = proto_of("linspace", opts)
    -- an integer dtype: the ends must fit it (the cast would clamp 300 to 255 in uint8), said at the call
    if n >= 1 then tensor.check_fits("linspace", proto._c.dtype, start) end
    if n >= 2 then tensor.check_fits("linspace", proto._c.dtype, stop) end
    local steps = tensor.arange(n, tensor.like(proto, "float64"))
    local step = n > 1 and (stop - start) / (n - 1) or 0
    local r = steps * step + start
    if n > 1 then r[n] = stop end -- exactly stop, whatever the rounding of the steps
    return r:to(proto:dtype())
end
function M.linspace(start, stop, n, opts, extra)
    if extra ~= nil then extra_arg("linspace", "(start, stop, n, opts)", extra) end
    return own_errors("linspace", pcall(linspace, start, stop, n, opts))
end

-- logspace(start, stop, n [, {base = 10, dtype =, device =}]): base^x for
-- x in linspace(start, stop, n).
local function logspace(start, stop, n, opts)
    local base = 10
    -- a dtype or a device alone, as every maker takes (tensor.empty checks it)
    if type(opts) == "table" and getmetatable(opts) == nil then
        opts = util.check_opts("logspace", opts, {base = true, dtype = true, device = true, engine = true})
        if opts.base ~= nil then
            if type(opts.base) ~= "number" or not (opts.base > 0) then
                fail("logspace: base must be a positive number, got " .. show(opts.base))
            end
            base = opts.base
        end
        opts = {dtype = opts.dtype, device = opts.device, engine = opts.engine}
    end
    local proto = proto_of("logspace", opts)
    local f64 = tensor.like(proto, "float64")
    if not is_int(n) or n < 0 or n >= 2 ^ 53 then -- (full would name itself)
        fail("logspace: the count must be an integer >= 0 (below 2^53), got " .. show(n))
    end
    if type(start) == "number" and type(stop) == "number" then -- (else linspace names them)
        if n >= 1 then tensor.check_fits("logspace", proto._c.dtype, base ^ start) end
        if n >= 2 then tensor.check_fits("logspace", proto._c.dtype, base ^ stop) end
    end
    return tensor.full({n}, base, f64):pow(M.linspace(start, stop, n, f64)):to(proto:dtype())
end
function M.logspace(start, stop, n, opts, more, extra)
    if extra ~= nil then extra_arg("logspace", "(start, stop, n, base, opts)", extra) end
    if type(opts) == "number" then -- Torch's base in 4th place, the options after it
        local base = opts
        if more == nil then
            opts = {base = base}
        elseif type(more) == "table" and getmetatable(more) == nil then
            if more.base ~= nil then
                fail("logspace: base given twice (" .. show(base) .. " and base = " .. show(more.base) .. ")")
            end
            opts = {base = base}
            for k, v in pairs(more) do opts[k] = v end
        elseif type(more) == "string" then
            opts = {base = base, dtype = more}
        else
            opts = {base = base, device = more}
        end
    elseif more ~= nil then
        extra_arg("logspace", "(start, stop, n, base, opts)", more)
    end
    return own_errors("logspace", pcall(logspace, start, stop, n, opts))
end

-- Raises if one of the n arguments packed in ts is nil with one after it
-- (# of ts may stop at the hole, dropping the rest); trailing nils are fine.
local function check_no_hole(fname, what, ts, n)
    local last = 0
    for i = 1, n do if ts[i] ~= nil then last = i end end
    for i = 1, last do
        if ts[i] == nil then fail(fmt("%s: %s %d is nil", fname, what, i)) end
    end
end

-- meshgrid(t1, t2, ... [, {indexing = "ij"}]) (or a table of tensors):
-- for 1-dim tensors of sizes n1, n2, ..., as many tensors of shape n1 x n2
-- x ..., the k-th holding tk along dim k (views: expand).  indexing "xy"
-- swaps the first two dims (n2 x n1 x ...), as NumPy's default.
function M.meshgrid(...)
    local ts = {...}
    check_no_hole("meshgrid", "argument", ts, select("#", ...))
    local opts
    if #ts >= 1 and type(ts[#ts]) == "table" and not is_tensor(ts[#ts]) and getmetatable(ts[#ts]) == nil
        and ts[#ts][1] == nil then
        opts = table.remove(ts)
    end
    if #ts == 1 and type(ts[1]) == "table" and not is_tensor(ts[1]) then
        ts = ts[1]
        util.check_list("meshgrid", "the list of tensors", ts, true)
    end
    opts = util.check_opts("meshgrid", opts, {indexing = true})
    local indexing = opts.indexing or "ij"
    if indexing ~= "ij" and indexing ~= "xy" then
        fail("meshgrid: indexing must be 'ij' or 'xy', got " .. show(indexing))
    end
    if #ts == 0 then fail("meshgrid: expected at least one tensor") end
    local sizes = {}
    for i, t in ipairs(ts) do
        if not is_tensor(t) or t:dim() > 1 then
            fail(fmt("meshgrid: argument %d must be a 0- or 1-dim tensor, got %s", i,
                     is_tensor(t) and "shape " .. shape_of_str(t) or typename(t)))
        end
        sizes[i] = t:numel()
    end
    check_devices_list("meshgrid", ts) -- (as Torch: grids on several devices would not combine)
    local swap = indexing == "xy" and #ts >= 2
    local order = {} -- order[k]: the output dim of input k
    for i = 1, #ts do order[i] = i end
    if swap then order[1], order[2] = 2, 1 end
    local out_shape = {}
    for i = 1, #ts do out_shape[order[i]] = sizes[i] end
    local out = {}
    for i, t in ipairs(ts) do
        local view = {}
        for k = 1, #ts do view[k] = 1 end
        view[order[i]] = sizes[i]
        out[i] = t:reshape(view):expand(out_shape)
    end
    return unpack(out)
end

-- unique([{sorted = true, return_inverse = false, return_counts = false}]):
-- the distinct values of all elements, in increasing order (a 1-dim
-- tensor; waits, its size depends on the values), and optionally where
-- each element went (int64, from 1, the input's shape) and how many of
-- each there are (int64).  Each NaN counts as distinct, as in Torch.
-- With dim, Torch's unique slices: the distinct slices along dim, in
-- lexicographic order (a stable sort by each element of the slice, the
-- last first), the inverse one index per slice.
local function unique_dim(self, opts, dim, consecutive)
    local fname = consecutive and "unique_consecutive" or "unique"
    if not is_int(dim) then fail(fmt("%s: dim must be an integer, got %s", fname, show(dim))) end
    local d = tensor.norm_dim(fname, self, dim) + 1
    local x = self:movedim(d, 1)
    local n = x:size(1)
    local rows = x:reshape(n, n == 0 and 0 or -1)
    local m = rows:size(2)
    local like = tensor.like(self, "int64")
    local order = tensor.arange(1, n + 1, like)
    for j = m, 1, -1 do -- stable sorts, the last column first: lexicographic
        if consecutive then break end -- (runs of equal neighbours: in place, no sort)
        local _, o = rows:select(2, j):index_select(1, order):sort(1)
        order = order:index_select(1, o)
    end
    local sorted = rows:index_select(1, order)
    local new
    if n == 0 then
        new = tensor.zeros({0}, like)
    else
        local first = tensor.ones({1}, like)
        local differs = n == 1 and nil or (m == 0 and tensor.zeros({n - 1}, like) or
            sorted:narrow(1, 2, n - 1):ne(sorted:narrow(1, 1, n - 1)):any(2):long())
        new = differs and tensor.cat({first, differs}, 1) or first
    end
    local picked = tensor.arange(1, n + 1, like):masked_select(new:ne(0)) -- (a wait: k depends on the values)
    local k = picked:numel()
    local shape = x:shape()
    shape[1] = k
    local out = sorted:index_select(1, picked):reshape(shape):movedim(1, d)
    if not opts.return_inverse and not opts.return_counts then return out end
    local group = n > 0 and new:cumsum(1) or new
    local inverse, counts
    if opts.return_inverse then inverse = tensor.zeros({n}, like):scatter_add_(1, order, group) end
    if opts.return_counts then
        counts = tensor.zeros({k}, like)
        if n > 0 then counts:scatter_add_(1, group, tensor.ones({n}, like)) end
    end
    if inverse and counts then return out, inverse, counts end
    return out, inverse or counts
end

function Tensor:unique(opts, extra)
    if extra ~= nil then extra_arg("unique", "(opts)", extra) end
    check_self("unique", self)
    opts = util.check_opts("unique", opts, {sorted = true, return_inverse = true, return_counts = true, dim = true})
    -- (a number or a string was taken as true without a word)
    for _, k in ipairs({"sorted", "return_inverse", "return_counts"}) do
        if opts[k] ~= nil and type(opts[k]) ~= "boolean" then
            fail(fmt("unique: %s must be true or false, got %s", k, show(opts[k])))
        end
    end
    -- sorted = false leaves the order to the implementation, as Torch's: here sorted too
    if opts.dim ~= nil then return unique_dim(self, opts, opts.dim) end
    local flat = self:reshape(-1)
    local n = flat:numel()
    local values, order = flat:sort(1)
    local new -- 1 where a sorted value differs from the one before it
    if n == 0 then
        new = tensor.zeros({0}, tensor.like(self, "int64"))
    else
        local first = tensor.ones({1}, tensor.like(self, "int64"))
        new = n == 1 and first or tensor.cat({first, values:narrow(1, 2, n - 1):ne(values:narrow(1, 1, n - 1)):long()}, 1)
    end
    local out = values:masked_select(new:ne(0))
    if not opts.return_inverse and not opts.return_counts then return out end
    local group = n > 0 and new:cumsum(1) or new -- the unique value (from 1) of each sorted element
    local inverse, counts
    if opts.return_inverse then
        inverse = tensor.zeros({n}, tensor.like(self, "int64")):scatter_add_(1, order, group)
            :reshape(self:shape())
    end
    if opts.return_counts then
        counts = tensor.zeros({out:numel()}, tensor.like(self, "int64"))
        if n > 0 then counts:scatter_add_(1, group, tensor.ones({n}, tensor.like(self, "int64"))) end
    end
    if inverse and counts then return out, inverse, counts end
    return out, inverse or counts
end

-- unique_consecutive([{return_inverse, return_counts, dim}]): Torch's: each
-- run of equal neighbours kept once, in place (no sort), with where each
-- element went and each run's length; with dim, runs of equal slices.
function Tensor:unique_consecutive(opts)
    local fname = "unique_consecutive"
    check_self(fname, self)
    opts = util.check_opts(fname, opts, {return_inverse = true, return_counts = true, dim = true})
    for _, k in ipairs({"return_inverse", "return_counts"}) do
        if opts[k] ~= nil and type(opts[k]) ~= "boolean" then
            fail(fmt("%s: %s must be true or false, got %s", fname, k, show(opts[k])))
        end
    end
    if opts.dim ~= nil then return unique_dim(self, opts, opts.dim, true) end
    local flat = self:reshape(-1)
    local n = flat:numel()
    local like = tensor.like(self, "int64")
    local new -- 1 where an element differs from the one before it
    if n == 0 then
        new = tensor.zeros({0}, like)
    else
        local first = tensor.ones({1}, like)
        new = n == 1 and first or tensor.cat({first, flat:narrow(1, 2, n - 1):ne(flat:narrow(1, 1, n - 1)):long()}, 1)
    end
    local out = flat:masked_select(new:ne(0))
    if not opts.return_inverse and not opts.return_counts then return out end
    local group = n > 0 and new:cumsum(1) or new
    local inverse, counts
    if opts.return_inverse then inverse = group:reshape(self:shape()) end
    if opts.return_counts then
        counts = tensor.zeros({out:numel()}, like)
        if n > 0 then counts:scatter_add_(1, group, tensor.ones({n}, like)) end
    end
    if inverse and counts then return out, inverse, counts end
    return out, inverse or counts
end

-- all() / any(): are all (any) elements nonzero -- a Lua boolean (waits;
-- NaN counts as nonzero); all(dim [, keepdim]) / any(dim [, keepdim]):
-- a uint8 tensor of the answers along dim.
-- Along a dim of size 0 there is nothing to reduce (min and max refuse
-- it): all is true there and any false, as over no elements at all.
local function all_any_empty(self, dim, keepdim, value)
    local d = tensor.norm_dim("all", self, dim) + 1
    local s = self:shape()
    if keepdim then s[d] = 1 else table.remove(s, d) end
    return tensor.full(s, value, tensor.like(self, "uint8"))
end

function Tensor:all(dim, keepdim)
    check_self("all", self)
    check_dim("all", self, dim)
    if dim ~= nil and size_along("all", self, dim) == 0 then return all_any_empty(self, dim, keepdim, 1) end
    local nz = self:ne(0)
    if dim ~= nil then return (nz:min(dim, keepdim)) end
    return self:numel() == 0 or nz:min():item() == 1
end

function Tensor:any(dim, keepdim)
    check_self("any", self)
    check_dim("any", self, dim)
    if dim ~= nil and size_along("any", self, dim) == 0 then return all_any_empty(self, dim, keepdim, 0) end
    local nz = self:ne(0)
    if dim ~= nil then return (nz:max(dim, keepdim)) end
    return self:numel() > 0 and nz:max():item() == 1
end

-- The options of a random integer maker: its dtype (int64 unless opts
-- names one) and the options for the float64 draw it starts from.
local INT_OPTS = {dtype = true, device = true, engine = true}
local function int_options(fname, opts)
    local dtype
    if opts == nil or type(opts) == "string" then
        dtype, opts = opts, {}
    elseif type(opts) == "table" and getmetatable(opts) == nil then
        for k in pairs(opts) do -- (a misspelt option, Torch's requires_grad, was ignored)
            if not INT_OPTS[k] then
                fail(fmt("%s: unknown option '%s' (expected dtype, device or engine)", fname, tostring(k)))
            end
        end
        dtype = opts.dtype
    else
        fail(fmt("%s: options must be a table {dtype =, device =, engine =} or a dtype, got %s", fname,
                 typename(opts)))
    end
    -- the canonical name ("long", "i64" were not int64 to the range checks below)
    dtype = dtype == nil and "int64" or tensor.DT_NAME[tensor.parse_dtype(fname, dtype)]
    return dtype, {dtype = "float64", device = opts.device, engine = opts.engine}
end

-- Values lo..hi must fit dtype: a draw that does not would be clamped or
-- wrapped by the cast (randint(0, 300, ..., "uint8") gave 255s); a float
-- dtype holds every integer up to 2^24 (float32) or 2^53 (float64), as
-- Torch's bounds: past them a draw rounds (randint(0, 2^25, ..., "float32")
-- gave high itself, randperm(2^25, "float32") repeated values).
local INT_LIMITS = {uint8 = {0, 256}, int32 = {-2 ^ 31, 2 ^ 31}, int64 = {-2 ^ 63, 2 ^ 63}} -- [lo, hi)
local FLOAT_LIMITS = {float32 = {-2 ^ 24, 2 ^ 24 + 1}, float64 = {-2 ^ 53, 2 ^ 53 + 1}}
local function check_int_range(fname, dtype, lo, hi)
    local r = INT_LIMITS[dtype] or FLOAT_LIMITS[dtype]
    if r and (lo < r[1] or hi >= r[2]) then
        fail(fmt("%s: values %s..%s do not fit in %s%s", fname, show(lo), show(hi), dtype,
                 FLOAT_LIMITS[dtype] and fmt(" (its integers are exact from -2^%d to 2^%d)",
                                             dtype == "float32" and 24 or 53, dtype == "float32" and 24 or 53) or ""))
    end
end

-- randint over a range past 2^53, in int64: a float64 draw scaled to it
-- has only 53 random bits, so its low bits were always 0 (randint(0, 2^62)
-- gave only even numbers, and 2 values mod 1024).  Such a range, a double,
-- is a multiple of 2^g (g = its exponent - 52): a block of 2^g drawn from
-- its range / 2^g (< 2^53), then g random low bits, all in int64 (the
-- block's offset added in two halves: past 2^63 it does not fit alone).
-- high - low may round up (2^63 - 1024 - -2^63 is 2^64 as a double): the
-- draw is kept below high, computed in int64 (high - 1 is high as a double).
local function wide_randint(shape, ropts, low, high)
    local range = high - low
    local _, ex = math.frexp(range) -- 2^(ex - 1) <= range < 2^ex
    local g = ex - 1 - 52
    local q = range / 2 ^ g
    local iopts = {dtype = "int64", device = ropts.device, engine = ropts.engine}
    local block = tensor.rand(shape, ropts):mul(q):floor():clamp(0, q - 1):to("int64")
    local lowbits = tensor.rand(shape, ropts):mul(2 ^ g):floor():to("int64")
    local half = block * 2 ^ (g - 1)
    local r = tensor.full(shape, low, iopts):add(half):add(half):add(lowbits)
    return r:minimum(tensor.full({}, high, iopts):sub(1))
end

-- a bound in randint's message ("5" was shown as 5)
local function shown_bound(x) return type(x) == "string" and fmt("string %q", x) or show(x) end

-- randint([low,] high, shape [, opts]): integers drawn uniformly from
-- low..high-1 (low 0 by default), int64 unless opts says otherwise; the
-- generator is ordo.manual_seed's.
function M.randint(a, b, c, d, extra)
    if extra ~= nil then extra_arg("randint", "([low,] high, shape [, opts])", extra) end
    local low, high, shape, opts
    if type(b) == "number" then low, high, shape, opts = a, b, c, d
    else
        if d ~= nil then extra_arg("randint", "([low,] high, shape [, opts])", d) end
        low, high, shape, opts = 0, a, b, c
    end
    if not is_int(low) or not is_int(high) or high <= low then
        fail(fmt("randint: expected integers low < high, got %s and %s", shown_bound(low), shown_bound(high)))
    end
    if type(shape) ~= "table" then fail("randint: expected the shape as a table, got " .. typename(shape)) end
    util.check_list("randint", "the shape", shape, true) -- (said here: rand would name itself)
    local dtype, ropts = int_options("randint", opts)
    check_int_range("randint", dtype, low, high - 1)
    local range = high - low
    if range > 2 ^ 53 and INT_LIMITS[dtype] == INT_LIMITS.int64 then return wide_randint(shape, ropts, low, high) end
    local u = tensor.rand(shape, ropts) -- [0, 1) in float64: exact enough for any int32 range
    local off = u:mul(range):floor():clamp(0, range - 1) -- 0..range-1, exact (range <= 2^53)
    -- low added in the integer dtype: past 2^53 a float64 sum rounds (randint(2^53, 2^53 + 4) gave
    -- only even values, randint(2^62, 2^62 + 2048) only multiples of 1024 and high itself)
    if INT_LIMITS[dtype] then return off:to(dtype):add(low) end
    return off:add(low):to(dtype)
end

-- randperm(n [, opts]): 1..n in a random order (int64 unless opts says
-- otherwise): indices count from 1 in ordo.
local function randperm(n, opts)
    if not is_int(n) or n < 0 then fail("randperm: n must be an integer >= 0, got " .. show(n)) end
    local dtype, ropts = int_options("randperm", opts)
    if n > 0 then check_int_range("randperm", dtype, 1, n) end
    return tensor.rand({n}, ropts):argsort():to(dtype)
end
function M.randperm(n, opts, extra)
    if extra ~= nil then extra_arg("randperm", "(n, opts)", extra) end
    return own_errors("randperm", pcall(randperm, n, opts))
end

-- dot(a, b): the sum of a * b over two 1-dim tensors of one length and
-- one dtype, as a 0-dim tensor of that dtype (Torch's rules: no promotion;
-- an integer dot wraps as the dtype does, it does not widen to int64 as
-- sum does).
function Tensor:dot(b, extra)
    if extra ~= nil then extra_arg("dot", "(other)", extra) end
    check_self("dot", self)
    check_devices("dot", self, b)
    if not is_tensor(b) or self:dim() ~= 1 or b:dim() ~= 1 or self:size(1) ~= b:size(1) then
        fail(fmt("dot: expected two 1-dim tensors of one length, got shapes %s and %s", shape_of_str(self),
                 is_tensor(b) and shape_of_str(b) or typename(b)))
    end
    if self:dtype() ~= b:dtype() then
        fail(fmt("dot: expected two tensors of one dtype, got %s and %s", self:dtype(), b:dtype()))
    end
    local s = (self * b):sum()
    return s:dtype() == self:dtype() and s or s:to(self:dtype())
end

-- outer(a, b): the n x m matrix a[i] * b[j] of two 1-dim tensors.
local function outer(self, b)
    check_self("outer", self)
    check_devices("outer", self, b)
    if not is_tensor(b) or self:dim() ~= 1 or b:dim() ~= 1 then
        fail(fmt("outer: expected two 1-dim tensors, got shapes %s and %s", shape_of_str(self),
                 is_tensor(b) and shape_of_str(b) or typename(b)))
    end
    return self:view(-1, 1) * b:view(1, -1)
end
function Tensor:outer(b, extra)
    if extra ~= nil then extra_arg("outer", "(other)", extra) end
    return own_errors("outer", pcall(outer, self, b))
end

-- The mask of a matrix's elements on or below (tril) / above (triu) the
-- diagonal k (0 the main one, > 0 above it, < 0 below).
local function band(fname, t, k, lower)
    check_self(fname, t)
    k = k or 0
    if not is_int(k) then fail(fmt("%s: the diagonal must be an integer, got %s", fname, show(k))) end
    if t:dim() < 2 then fail(fmt("%s: expected a matrix (or a batch of them), got shape %s", fname, shape_of_str(t))) end
    local n, m = t:size(-2), t:size(-1)
    local rows = tensor.arange(n, tensor.like(t, "int64")):view(n, 1)
    local cols = tensor.arange(m, tensor.like(t, "int64")):view(1, m)
    local keep = lower and (cols - rows):le(k) or (cols - rows):ge(k)
    return t:masked_fill(keep:eq(0), 0)
end
function Tensor:tril(k, extra)
    if extra ~= nil then extra_arg("tril", "(k)", extra) end
    return band("tril", self, k, true)
end
function Tensor:triu(k, extra)
    if extra ~= nil then extra_arg("triu", "(k)", extra) end
    return band("triu", self, k, false)
end

-- flip(dims): a copy with the order reversed along dims (a dim or a table).
function Tensor:flip(dims, extra)
    if extra ~= nil then extra_arg("flip", "(dims)", extra) end
    check_self("flip", self)
    if type(dims) == "number" then dims = {dims} end
    if type(dims) ~= "table" then fail("flip: expected a dim or a table of dims, got " .. typename(dims)) end
    util.check_list("flip", "the dims", dims, true)
    local seen = {}
    for _, d in ipairs(dims) do -- a dim twice would flip it back (Torch refuses it too)
        local k = tensor.norm_dim("flip", self, d)
        if seen[k] ~= nil then
            fail(fmt("flip: dims %s and %s are the same dim (each may appear once)", show(seen[k]), show(d)))
        end
        seen[k] = d
    end
    local r = self
    for _, d in ipairs(dims) do
        local n = size_along("flip", r, d)
        local rev = tensor.arange(n, 0, -1, tensor.like(self, "int64"))
        r = r:index_select(d, rev)
    end
    return rawequal(r, self) and self:clone() or r
end

-- diag([k]): a 1-dim tensor's values on the diagonal k of a square matrix
-- (of size n + |k|), or a matrix's diagonal k as a 1-dim tensor (a copy),
-- as Torch's.
local function diag(self, k)
    check_self("diag", self)
    k = k or 0
    if not is_int(k) then fail(fmt("diag: the diagonal must be an integer, got %s", show(k))) end
    local d = self:dim()
    if d == 1 then
        -- scattered into zeros, not eye(n) * self: 0 * inf would put NaN
        -- off the diagonal of a vector holding inf
        local n = self:size(1)
        local m = n + math.abs(k)
        local first = k >= 0 and k or -k * m -- (from 0) the place of the diagonal's first element
        local at = tensor.arange(0, n, tensor.like(self, "int64")):mul(m + 1):add(first + 1)
        return tensor.zeros({m * m}, tensor.like(self)):scatter_add(1, at, self):view(m, m)
    end
    if d ~= 2 then fail(fmt("diag: expected a 1-dim or 2-dim tensor, got shape %s", shape_of_str(self))) end
    return self:diagonal(k)
end
function Tensor:diag(k, extra)
    if extra ~= nil then extra_arg("diag", "(k)", extra) end
    return own_errors("diag", pcall(diag, self, k))
end

-- A dim v (from 1, or negative from the end; nil: default, negative) of a
-- result of nd dims, as a positive one.
local function result_dim(fname, nd, v, default)
    if v == nil then return nd + default + 1 end
    if not is_int(v) or v < -nd or v > nd or v == 0 then
        fail(fmt("%s: dim %s out of range for a result of %d dims", fname, show(v), nd))
    end
    return v < 0 and nd + v + 1 or v
end

-- diag_embed([offset [, dim1 [, dim2]]]): the last dim of t (n values) on
-- the diagonal offset of (n + |offset|)-square matrices in dims dim1 and
-- dim2 of the result (default the last two), zeros elsewhere, as Torch's.
local function diag_embed(self, offset, dim1, dim2)
    local fname = "diag_embed"
    check_self(fname, self)
    offset = offset or 0
    if not is_int(offset) then fail(fmt("%s: the offset must be an integer, got %s", fname, show(offset))) end
    local x = self:dim() == 0 and self:reshape(1) or self
    local nd = x:dim() + 1
    local d1, d2 = result_dim(fname, nd, dim1, -2), result_dim(fname, nd, dim2, -1)
    if d1 == d2 then fail(fmt("%s: dim1 %s and dim2 %s are the same dim", fname, show(dim1), show(dim2))) end
    if nd > 8 then fail(fmt("%s: the result would have %d dims (8 at most)", fname, nd)) end
    local n = x:size(-1)
    local m = n + math.abs(offset)
    local shape = x:shape()
    shape[#shape] = m * m
    local first = offset >= 0 and offset or -offset * m
    local at = tensor.arange(0, n, tensor.like(x, "int64")):mul(m + 1):add(first + 1)
    local r = tensor.zeros(shape, tensor.like(x)):index_add(#shape, at, x)
    shape[#shape] = m
    shape[#shape + 1] = m
    r = r:view(shape)
    -- the two new dims are last: move them to d1 and d2
    local perm, rest = {}, 1
    for d = 1, nd do
        if d == d1 then perm[d] = nd - 1
        elseif d == d2 then perm[d] = nd
        else perm[d], rest = rest, rest + 1 end
    end
    return r:permute(perm)
end
function Tensor:diag_embed(offset, dim1, dim2, extra)
    if extra ~= nil then extra_arg("diag_embed", "(offset, dim1, dim2)", extra) end
    return own_errors("diag_embed", pcall(diag_embed, self, offset, dim1, dim2))
end

-- The positions (int64, from 1, in order) of the k nonzero elements of m,
-- a 1-dim uint8 tensor of 0s and 1s, in time and memory linear in its
-- length (a sort of m took n log n, and its int64 indices as much memory).
-- pos = cumsum(m) gives the j-th selected element the value j, and those
-- after it too up to the next one: the j-th selected element is the first
-- with pos = j, so it comes after the elements with pos < j, which a
-- count of each value of pos (index_add of ones) and a running sum of the
-- counts give.
local function mask_positions(m, k)
    local like = tensor.like(m, "int64")
    if k == 0 then return tensor.zeros({0}, like) end
    local pos = m:cumsum(1):add_(1) -- 1..k + 1: a value's slot, from 1
    local one = tensor.ones({1}, like):expand({m:numel()})
    local count = tensor.zeros({k + 1}, like):index_add_(1, pos, one)
    return count:narrow(1, 1, k):cumsum(1):add_(1)
end

-- masked_select(mask): the elements where mask (uint8, broadcast to t) is
-- nonzero, in row-major order, as a 1-dim tensor (waits: its length
-- depends on the values).
function Tensor:masked_select(mask, extra)
    if extra ~= nil then extra_arg("masked_select", "(mask)", extra) end
    check_self("masked_select", self)
    if not is_tensor(mask) then fail("masked_select: mask must be a tensor, got " .. typename(mask)) end
    check_devices("masked_select", self, mask)
    -- both broadcast to one shape, as Torch's (a mask larger than self failed inside expand_as)
    local shape = tensor.broadcast_shape("masked_select", {self:shape(), mask:shape()})
    local flat = self:expand(shape):contiguous():reshape(-1)
    local m = mask:ne(0):expand(shape):contiguous():reshape(-1)
    return flat:index_select(1, mask_positions(m, m:sum():item()))
end

-- ---------------------------------------------------------------- matrix products

-- The operand check of mm, bmm and mv: dims of each, and the error naming
-- both shapes.
local function check_product(fname, a, b, da, db, what)
    check_self(fname, a)
    if not is_tensor(b) or a:dim() ~= da or b:dim() ~= db then
        fail(fmt("%s: expected %s, got shapes %s and %s", fname, what, shape_of_str(a),
                 is_tensor(b) and shape_of_str(b) or typename(b)))
    end
    check_devices(fname, a, b)
    -- the inner sizes here too, so that the error names this op, not matmul
    local inner_a, inner_b = a:size(da), b:size(db == 1 and 1 or db - 1)
    if inner_a ~= inner_b then
        fail(fmt("%s: shapes %s and %s cannot be multiplied (inner dimensions %d and %d differ)", fname,
                 shape_of_str(a), shape_of_str(b), inner_a, inner_b))
    end
end

-- mm(b): the product of two matrices (2-dim tensors), as matmul.
function Tensor:mm(b, extra)
    if extra ~= nil then extra_arg("mm", "(other)", extra) end
    check_product("mm", self, b, 2, 2, "two matrices (2-dim tensors)")
    return tensor.matmul(self, b)
end

-- bmm(b): the products of two batches of matrices (3-dim tensors of one
-- batch size), as matmul without broadcasting.
function Tensor:bmm(b, extra)
    if extra ~= nil then extra_arg("bmm", "(other)", extra) end
    check_product("bmm", self, b, 3, 3, "two batches of matrices (3-dim tensors)")
    if self:size(1) ~= b:size(1) then
        fail(fmt("bmm: batch sizes differ: shapes %s and %s", shape_of_str(self), shape_of_str(b)))
    end
    return tensor.matmul(self, b)
end

-- The scalars of addmm and baddbmm: {beta = 1, alpha = 1}.
local function beta_alpha(fname, opts)
    opts = util.check_opts(fname, opts, {beta = true, alpha = true})
    local beta, alpha = opts.beta or 1, opts.alpha or 1
    if type(beta) ~= "number" or type(alpha) ~= "number" then
        fail(fmt("%s: beta and alpha must be numbers, got %s and %s", fname, typename(beta), typename(alpha)))
    end
    return beta, alpha
end

-- beta * self + alpha * product (self broadcast to the product's shape;
-- beta = 0 ignores self, NaN and all, as Torch).
local function add_scaled(fname, self, multiply, mname, a, b, opts)
    local beta, alpha = beta_alpha(fname, opts)
    -- (mm would take a for its self)
    if not is_tensor(a) then fail(fmt("%s: a must be a tensor, got %s", fname, typename(a))) end
    if not is_tensor(b) then fail(fmt("%s: b must be a tensor, got %s", fname, typename(b))) end
    -- the product's errors (shapes that cannot be multiplied) are fname's
    local ok, product = pcall(multiply, a, b)
    if not ok then error((tostring(product):gsub(mname .. ": ", fname .. ": ", 1)), 0) end
    -- self broadcasts to the product's shape, not past it, as Torch's (a
    -- 3x2x2 self made addmm's result 3x2x2; a 2x2 one, addmv's 2x2)
    local ps, ss = product:shape(), self:shape()
    local fits = #ss <= #ps
    for i = 1, #ss do
        local x, y = ss[#ss - i + 1], ps[#ps - i + 1]
        fits = fits and (x == y or x == 1)
    end
    if not fits then
        fail(fmt("%s: self of shape %s cannot be broadcast to the product's shape %s", fname, shape_of_str(self),
                 tensor.shape_str(ps)))
    end
    -- an integer scale must fit an integer operand's dtype: said under
    -- fname (mul named itself: "mul: value -1 does not fit in uint8")
    if alpha ~= 1 then
        if is_int(alpha) then tensor.check_fits(fname, tensor.parse_dtype(fname, product:dtype()), alpha, " (alpha)") end
        product = product * alpha
    end
    if beta == 0 then return product + self:mul(0):nan_to_num(0, 0, 0) end -- (self's shape still checked)
    if beta ~= 1 and is_int(beta) then tensor.check_fits(fname, tensor.parse_dtype(fname, self:dtype()), beta, " (beta)") end
    return product + (beta == 1 and self or self * beta)
end

-- self:addmm(a, b [, {beta = 1, alpha = 1}]): beta * self + alpha * (a mm b).
function Tensor:addmm(a, b, opts, extra)
    if extra ~= nil then extra_arg("addmm", "(mat1, mat2, opts)", extra) end
    check_self("addmm", self)
    check_devices("addmm", self, a, b)
    return add_scaled("addmm", self, Tensor.mm, "mm", a, b, opts)
end

-- self:baddbmm(a, b [, {beta = 1, alpha = 1}]): the same with bmm.
function Tensor:baddbmm(a, b, opts, extra)
    if extra ~= nil then extra_arg("baddbmm", "(mat1, mat2, opts)", extra) end
    check_self("baddbmm", self)
    check_devices("baddbmm", self, a, b)
    return add_scaled("baddbmm", self, Tensor.bmm, "bmm", a, b, opts)
end

-- self:addmv(m, v [, ...]): beta * self + alpha * (m mv v); self:addr(u, v
-- [, ...]): beta * self + alpha * (u outer v); self:addbmm(a, b [, ...]):
-- beta * self + alpha * the sum over the batch of (a bmm b), as Torch's.
function Tensor:addmv(m, v, opts)
    check_self("addmv", self)
    check_devices("addmv", self, m, v)
    return add_scaled("addmv", self, Tensor.mv, "mv", m, v, opts)
end
function Tensor:addr(u, v, opts)
    check_self("addr", self)
    check_devices("addr", self, u, v)
    return add_scaled("addr", self, Tensor.outer, "outer", u, v, opts)
end
function Tensor:addbmm(a, b, opts)
    check_self("addbmm", self)
    check_devices("addbmm", self, a, b)
    return add_scaled("addbmm", self, function(x, y) return Tensor.bmm(x, y):sum(1) end, "bmm", a, b, opts)
end

-- nonzero([{as_tuple = false}]): the positions (int64, from 1) of the
-- nonzero elements, in row-major order: a k x ndim tensor, or with
-- as_tuple a Lua list of ndim 1-dim tensors, one per dim (waits: k depends
-- on the values).  NaN counts as nonzero.
function Tensor:nonzero(opts, extra)
    if extra ~= nil then extra_arg("nonzero", "(opts)", extra) end
    check_self("nonzero", self)
    opts = util.check_opts("nonzero", opts, {as_tuple = true})
    local nd = self:dim()
    if self:numel() == 0 then -- no positions (and no size to divide them by below)
        if opts.as_tuple then
            local coords = {}
            for d = 1, nd do coords[d] = tensor.zeros({0}, tensor.like(self, "int64")) end
            return coords
        end
        return tensor.zeros({0, nd}, tensor.like(self, "int64"))
    end
    local m = self:ne(0):reshape(-1)
    local flat = mask_positions(m, m:sum():item()):sub_(1) -- from 0
    local k = flat:numel()
    local coords = {}
    local rest = flat
    for d = nd, 1, -1 do
        local n = self:size(d)
        if n == 0 then -- no element, no position: nothing to divide by 0
            coords[d] = rest + 1
        else
            coords[d] = rest:remainder(n) + 1
            rest = rest:div(n, "trunc")
        end
    end
    if opts.as_tuple then return coords end
    if nd == 0 then return tensor.zeros({k, 0}, tensor.like(self, "int64")) end
    return tensor.stack(coords, 2)
end

-- ---------------------------------------------------------------- einsum

-- The letters of s as a list, and a set of them.
local function letters(s)
    local list, set = {}, {}
    for c in s:gmatch(".") do
        list[#list + 1] = c
        set[c] = true
    end
    return list, set
end

local function index_of(list, c)
    for i, x in ipairs(list) do if x == c then return i end end
end

-- t (letters l) summed over the letters not in keep; returns t, l.
local function sum_out(t, l, keep)
    for i = #l, 1, -1 do
        if not keep[l[i]] then
            t = t:sum(i)
            table.remove(l, i)
        end
    end
    return t, l
end

-- A (letters la) times B (letters lb), keeping the letters in keep: the
-- shared kept letters as a batch, the shared others summed by one batched
-- matrix product, the rest free.  Returns the product and its letters
-- (batch, A's free, B's free).
local function contract(A, la, B, lb, keep)
    local _, sa = letters(table.concat(la))
    local _, sb = letters(table.concat(lb))
    local keep_a, keep_b = {}, {}
    for c in pairs(sa) do keep_a[c] = keep[c] or sb[c] end
    for c in pairs(sb) do keep_b[c] = keep[c] or sa[c] end
    A, la = sum_out(A, la, keep_a)
    B, lb = sum_out(B, lb, keep_b)
    local batch, shared, free_a, free_b = {}, {}, {}, {}
    for _, c in ipairs(la) do
        if index_of(lb, c) then
            if keep[c] then batch[#batch + 1] = c else shared[#shared + 1] = c end
        else
            free_a[#free_a + 1] = c
        end
    end
    for _, c in ipairs(lb) do if not index_of(la, c) then free_b[#free_b + 1] = c end end
    local function size(t, l, group)
        local n, sizes = 1, {}
        for i, c in ipairs(group) do
            sizes[i] = t:size(index_of(l, c))
            n = n * sizes[i]
        end
        return n, sizes
    end
    local function perm(l, groups)
        local p = {}
        for _, g in ipairs(groups) do for _, c in ipairs(g) do p[#p + 1] = index_of(l, c) end end
        return p
    end
    local nb, bsizes = size(A, la, batch)
    local nfa, fasizes = size(A, la, free_a)
    local nfb, fbsizes = size(B, lb, free_b)
    local nk = size(A, la, shared)
    local A3 = (#la > 0 and A:permute(perm(la, {batch, free_a, shared})) or A):reshape(nb, nfa, nk)
    local B3 = (#lb > 0 and B:permute(perm(lb, {batch, shared, free_b})) or B):reshape(nb, nk, nfb)
    local out_sizes, out_letters = {}, {}
    for _, g in ipairs({{batch, bsizes}, {free_a, fasizes}, {free_b, fbsizes}}) do
        for i, c in ipairs(g[1]) do
            out_letters[#out_letters + 1] = c
            out_sizes[#out_sizes + 1] = g[2][i]
        end
    end
    local R = A3:matmul(B3)
    return #out_sizes > 0 and R:reshape(out_sizes) or R:reshape(), out_letters
end

-- einsum's "...": each operand's gets letters the equation does not use
-- for the dims it stands for (right-aligned across operands, so they
-- broadcast); the output's "..." (or, without "->", the output's start,
-- as Torch's) gets them all.  Returns the equation in letters; dots[c] is
-- set for those letters.
local function ellipsis_letters(eq, spec, ts, dots)
    local lhs, rhs = spec:match("^([^%-]*)%->(.*)$")
    if not lhs then lhs = spec end
    local used, free = {}, {}
    for c in spec:gmatch("%a") do used[c] = true end
    for c in ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"):gmatch(".") do
        if not used[c] then free[#free + 1] = c end
    end
    local parts, ndots, most = {}, {}, 0
    for part in (lhs .. ","):gmatch("([^,]*),") do parts[#parts + 1] = part end
    for k, part in ipairs(parts) do
        local rest, n = part:gsub("%.%.%.", "")
        if n > 1 or rest:find("%.") then fail(fmt("einsum: operand %d (%q) may hold one '...' at most", k, part)) end
        if n == 1 then
            local t = ts[k]
            if not is_tensor(t) then fail(fmt("einsum: operand %d must be a tensor, got %s", k, typename(t))) end
            ndots[k] = t:dim() - #rest
            if ndots[k] < 0 then
                fail(fmt("einsum: operand %d has %d dims (shape %s) but %q names %d besides '...'", k, t:dim(),
                         shape_of_str(t), part, #rest))
            end
            most = math.max(most, ndots[k])
        end
    end
    if most > #free then fail(fmt("einsum: no letters left for the dims of '...' in %q", eq)) end
    for i = 1, most do dots[free[i]] = true end
    for k, part in ipairs(parts) do
        if ndots[k] then parts[k] = (part:gsub("%.%.%.", table.concat(free, "", most - ndots[k] + 1, most))) end
    end
    if rhs then
        local rest, n = rhs:gsub("%.%.%.", "")
        if n > 1 or rest:find("%.") then fail(fmt("einsum: the output (%q) may hold one '...' at most", rhs)) end
        rhs = (rhs:gsub("%.%.%.", table.concat(free, "", 1, most)))
    else -- implicit: the dims of "..." first, then the letters seen once, in order
        local count, once = {}, {}
        for c in lhs:gmatch("%a") do count[c] = (count[c] or 0) + 1 end
        for c, n in pairs(count) do if n == 1 then once[#once + 1] = c end end
        table.sort(once)
        rhs = table.concat(free, "", 1, most) .. table.concat(once)
    end
    return table.concat(parts, ",") .. "->" .. rhs
end

-- einsum(equation, t1, t2, ...) (or einsum(equation, {t1, t2, ...})):
-- Einstein summation, "ij,jk->ik" (a matrix product), "bij,bjk->bik",
-- "i,i->", "ij->ji"...; without "->", the output is the letters that
-- appear once, in alphabetical order.  Letters a-z and A-Z; a letter
-- repeated within one operand takes its diagonal ("ii->i", "ii" the
-- trace), "..." stands for the dims not named, and dims of size 1
-- broadcast, as Torch's.
-- Two operands at a time become one batched matrix product; sums and
-- permutations do the rest, so autograd differentiates it.
function M.einsum(eq, ...)
    local ts = {...}
    check_no_hole("einsum", "operand", ts, select("#", ...))
    if #ts == 1 and type(ts[1]) == "table" and not is_tensor(ts[1]) then
        ts = ts[1]
        util.check_list("einsum", "the list of operands", ts, true)
    end
    if type(eq) ~= "string" then fail("einsum: expected an equation string first, got " .. typename(eq)) end
    check_devices_list("einsum", ts)
    ts = {unpack(ts)} -- (operands are replaced by their diagonals and expansions below: not in the caller's list)
    local spec = eq:gsub("%s", "")
    local dots = {} -- the letters standing for the dims of "..."
    if spec:find("%.%.%.") then spec = ellipsis_letters(eq, spec, ts, dots) end
    local lhs, rhs = spec:match("^([^%-]*)%->(.*)$")
    if not lhs then lhs = spec end
    if spec:find("[^%a,%->]") or (rhs and rhs:find("[^%a]")) then
        fail(fmt("einsum: the equation may hold only letters, ',' and one '->', got %q", eq))
    end
    local ops = {}
    for part in (lhs .. ","):gmatch("([^,]*),") do ops[#ops + 1] = part end
    if #ops ~= #ts then
        fail(fmt("einsum: %q names %d operand%s, got %d tensor%s", eq, #ops, #ops == 1 and "" or "s", #ts,
                 #ts == 1 and "" or "s"))
    end
    local size_of, count, lists = {}, {}, {}
    for k, part in ipairs(ops) do
        local t = ts[k]
        if not is_tensor(t) then fail(fmt("einsum: operand %d must be a tensor, got %s", k, typename(t))) end
        if #part ~= t:dim() then
            fail(fmt("einsum: operand %d has %d dims (shape %s) but %q names %d", k, t:dim(), shape_of_str(t), part,
                     #part))
        end
        local l = letters(part)
        -- a letter twice in one operand: its diagonal, as the last dim ("ii->i", "ii" the trace)
        local again = true
        while again do
            again = false
            local first = {}
            for i, c in ipairs(l) do
                if first[c] then
                    if t:size(first[c]) ~= t:size(i) then
                        fail(fmt("einsum: index %s repeated in operand %d (%q) names dims of sizes %d and %d " ..
                                 "(shape %s): a diagonal needs equal ones", c, k, part, t:size(first[c]), t:size(i),
                                 shape_of_str(t)))
                    end
                    t = t:diagonal(0, first[c], i)
                    local rest = {}
                    for j, x in ipairs(l) do if j ~= first[c] and j ~= i then rest[#rest + 1] = x end end
                    rest[#rest + 1] = c
                    l, again = rest, true
                    break
                end
                first[c] = i
            end
        end
        for i, c in ipairs(l) do
            count[c] = (count[c] or 0) + 1
            local n, m = size_of[c], t:size(i)
            if n and n ~= m then
                if n ~= 1 and m ~= 1 then -- (a size of 1 broadcasts, as Torch's)
                    fail(fmt("einsum: %s is %d in one operand and %d in operand %d (shape %s)",
                             dots[c] and "a dim of '...'" or "index " .. c, n, m, k, shape_of_str(ts[k])))
                end
                if n == 1 then size_of[c] = m end
            else
                size_of[c] = m
            end
        end
        ts[k], lists[k] = t, l
    end
    for k, t in ipairs(ts) do -- dims of size 1 stretched to the others'
        local shape, stretch = {}, false
        for i, c in ipairs(lists[k]) do
            shape[i] = size_of[c]
            stretch = stretch or size_of[c] ~= t:size(i)
        end
        if stretch then ts[k] = t:expand(shape) end
    end
    if not rhs then -- implicit: the letters seen once in the equation ("ii" is the trace), in order
        local seen_in_eq, once = {}, {}
        for c in lhs:gmatch("%a") do seen_in_eq[c] = (seen_in_eq[c] or 0) + 1 end
        for c, n in pairs(seen_in_eq) do if n == 1 then once[#once + 1] = c end end
        table.sort(once)
        rhs = table.concat(once)
    end
    local out, out_set = letters(rhs)
    local seen = {}
    for _, c in ipairs(out) do
        if seen[c] then fail(fmt("einsum: index %s appears twice in the output %q", c, rhs)) end
        if not size_of[c] then fail(fmt("einsum: output index %s is in no operand (%q)", c, eq)) end
        seen[c] = true
    end
    -- left to right, keeping what the output or a later operand needs
    local R, lr = ts[1], {unpack(lists[1])}
    for k = 2, #ts do
        local keep = {}
        for c in pairs(out_set) do keep[c] = true end
        for j = k + 1, #ts do for _, c in ipairs(lists[j]) do keep[c] = true end end
        R, lr = contract(R, lr, ts[k], {unpack(lists[k])}, keep)
    end
    R, lr = sum_out(R, lr, out_set)
    if #out == 0 then return #lr == 0 and R or R:reshape() end
    local p, identity = {}, true
    for i, c in ipairs(out) do
        p[i] = index_of(lr, c)
        identity = identity and p[i] == i
    end
    return identity and R or R:permute(p)
end

-- tensordot(a, b [, dims]): Torch's: the sum of products over dims of a
-- and b, the dims left over of a then of b in the result.  dims an integer
-- n >= 0 (a's last n dims with b's first n, 2 by default) or a pair of
-- lists {{a's dims}, {b's dims}} (from 1, negative from the end; a single
-- dim may be a number: {2, 1}), paired in order and of equal sizes.
local function dims_list(fname, which, t, list)
    if type(list) == "number" then list = {list} end
    if type(list) ~= "table" or is_tensor(list) then
        fail(fmt("%s: dims for %s must be a list of dims, got %s", fname, which, typename(list)))
    end
    util.check_list(fname, "dims for " .. which, list, true)
    local out, seen = {}, {}
    for i, d in ipairs(list) do
        if not is_int(d) then fail(fmt("%s: dims for %s must be integers, got %s", fname, which, show(d))) end
        if t:dim() == 0 then
            fail(fmt("%s: dim %s of %s is out of range: it is a 0-dim tensor", fname, show(d), which))
        end
        local k = tensor.norm_dim(fname, t, d) + 1
        if seen[k] then fail(fmt("%s: dim %s of %s is given twice", fname, show(d), which)) end
        seen[k], out[i] = true, k
    end
    return out
end

local function tensordot(a, b, dims)
    local fname = "tensordot"
    check_self(fname, a)
    if not is_tensor(b) then fail(fmt("%s: expected two tensors, got a tensor and %s", fname, typename(b))) end
    check_devices(fname, a, b)
    if dims == nil then dims = 2 end
    local da, db
    if type(dims) == "number" then
        if not is_int(dims) or dims < 0 then
            fail(fmt("%s: dims must be an integer >= 0 or a pair of lists of dims, got %s", fname, show(dims)))
        end
        if dims > a:dim() or dims > b:dim() then
            fail(fmt("%s: dims %d is more than the dims of shapes %s and %s", fname, dims, shape_of_str(a),
                     shape_of_str(b)))
        end
        da, db = {}, {}
        for i = 1, dims do da[i], db[i] = a:dim() - dims + i, i end
    elseif type(dims) == "table" and not is_tensor(dims) then
        util.check_list(fname, "dims", dims, true)
        if #dims ~= 2 then
            fail(fmt("%s: dims must be an integer or a pair of lists {{a's dims}, {b's dims}}, got a list of %d",
                     fname, #dims))
        end
        da, db = dims_list(fname, "a", a, dims[1]), dims_list(fname, "b", b, dims[2])
        if #da ~= #db then
            fail(fmt("%s: the lists of dims must be of one length, got %d for a and %d for b", fname, #da, #db))
        end
    else
        fail(fmt("%s: dims must be an integer or a pair of lists {{a's dims}, {b's dims}}, got %s", fname,
                 typename(dims)))
    end
    local nk = 1
    local in_a, in_b = {}, {}
    for i = 1, #da do
        local sa, sb = a:size(da[i]), b:size(db[i])
        if sa ~= sb then
            fail(fmt("%s: a's dim %d (size %d) and b's dim %d (size %d) differ (shapes %s and %s)", fname, da[i], sa,
                     db[i], sb, shape_of_str(a), shape_of_str(b)))
        end
        nk = nk * sa
        in_a[da[i]], in_b[db[i]] = true, true
    end
    local pa, pb, out = {}, {}, {}
    local nfa, nfb = 1, 1
    for d = 1, a:dim() do
        if not in_a[d] then
            pa[#pa + 1], out[#out + 1] = d, a:size(d)
            nfa = nfa * a:size(d)
        end
    end
    for i = 1, #da do pa[#pa + 1] = da[i] end
    for i = 1, #db do pb[#pb + 1] = db[i] end
    for d = 1, b:dim() do
        if not in_b[d] then
            pb[#pb + 1], out[#out + 1] = d, b:size(d)
            nfb = nfb * b:size(d)
        end
    end
    local A = (a:dim() > 0 and a:permute(pa) or a):reshape(nfa, nk)
    local B = (b:dim() > 0 and b:permute(pb) or b):reshape(nk, nfb)
    local r = A:matmul(B)
    return #out > 0 and r:reshape(out) or r:reshape()
end
function M.tensordot(a, b, dims) return own_errors("tensordot", pcall(tensordot, a, b, dims)) end
Tensor.tensordot = M.tensordot

-- mv(v): a matrix times a vector (a 1-dim tensor).
function Tensor:mv(v, extra)
    if extra ~= nil then extra_arg("mv", "(v)", extra) end
    check_product("mv", self, v, 2, 1, "a matrix (2-dim) and a vector (1-dim)")
    return tensor.matmul(self, v)
end

-- trace(): the sum of a matrix's main diagonal (0-dim).
function Tensor:trace(extra)
    if extra ~= nil then extra_arg("trace", "()", extra) end
    check_self("trace", self)
    if self:dim() ~= 2 then fail(fmt("trace: expected a matrix (2-dim tensor), got shape %s", shape_of_str(self))) end
    return self:diag():sum()
end

-- ---------------------------------------------------------------- elementwise

local LN2, LN10 = math.log(2), math.log(10)

-- log2() / log10(): logarithms in base 2 and 10 (integers give float32).
function Tensor:log2(extra)
    if extra ~= nil then extra_arg("log2", "()", extra) end
    check_self("log2", self)
    return self:log() / LN2
end
function Tensor:log10(extra)
    if extra ~= nil then extra_arg("log10", "()", extra) end
    check_self("log10", self)
    return self:log() / LN10
end

-- isnan() / isinf() / isfinite(): uint8 masks; integers are always finite.
function Tensor:isnan(extra)
    if extra ~= nil then extra_arg("isnan", "()", extra) end
    check_self("isnan", self)
    return self:ne(self)
end
function Tensor:isinf(extra)
    if extra ~= nil then extra_arg("isinf", "()", extra) end
    check_self("isinf", self)
    if not is_float(self) then return tensor.zeros_like(self, {dtype = "uint8"}) end
    return self:abs():eq(huge)
end
function Tensor:isfinite(extra)
    if extra ~= nil then extra_arg("isfinite", "()", extra) end
    check_self("isfinite", self)
    if not is_float(self) then return tensor.ones_like(self, {dtype = "uint8"}) end
    return (self - self):eq(0) -- inf - inf and NaN - NaN are NaN
end

-- logical_not, logical_and, logical_or, logical_xor: uint8 masks (1 or 0),
-- nonzero counting as true (NaN too), as Torch's (bool there); the other
-- operand a tensor (broadcast) or a number.  Masks combine without them too
-- (m1 * m2), but uint8 arithmetic wraps (m1 - m2 is 255 where m2 alone is
-- set, and neg refuses uint8), so these say what is meant.
local function truth(fname, self, x)
    check_devices(fname, self, x)
    if is_tensor(x) then
        tensor.broadcast_shape(fname, {self:shape(), x:shape()}) -- (mul would name itself)
        return x:ne(0)
    end
    if type(x) == "boolean" then return x and 1 or 0 end
    if type(x) ~= "number" then fail(fmt("%s: expected a tensor or a number, got %s", fname, typename(x))) end
    return x ~= 0 and 1 or 0 -- (a NaN is nonzero: true)
end
function Tensor:logical_not(extra)
    if extra ~= nil then extra_arg("logical_not", "()", extra) end
    check_self("logical_not", self)
    return self:eq(0)
end
function Tensor:logical_and(other, extra)
    if extra ~= nil then extra_arg("logical_and", "(other)", extra) end
    check_self("logical_and", self)
    return self:ne(0):mul(truth("logical_and", self, other))
end
function Tensor:logical_or(other, extra)
    if extra ~= nil then extra_arg("logical_or", "(other)", extra) end
    check_self("logical_or", self)
    return self:ne(0):maximum(truth("logical_or", self, other))
end
function Tensor:logical_xor(other, extra)
    if extra ~= nil then extra_arg("logical_xor", "(other)", extra) end
    check_self("logical_xor", self)
    return self:ne(0):ne(truth("logical_xor", self, other))
end

local FLOAT_MAX = {float32 = 3.4028234663852886e38, float64 = 1.7976931348623157e308}
local I64_CODE = require("ordo.cdef").I64

-- nan_to_num([nan [, posinf [, neginf]]]): a copy with NaN replaced by nan
-- (0), inf by posinf and -inf by neginf (the dtype's largest and lowest
-- finite values by default); integers come back as a copy.
function Tensor:nan_to_num(nan, posinf, neginf, extra)
    if extra ~= nil then extra_arg("nan_to_num", "(nan, posinf, neginf)", extra) end
    check_self("nan_to_num", self)
    for i, v in ipairs({nan or 0, posinf or 0, neginf or 0}) do
        if type(v) ~= "number" then
            fail(fmt("nan_to_num: %s must be a number, got %s", ({"nan", "posinf", "neginf"})[i], typename(v)))
        end
    end
    if not is_float(self) then return self:clone() end
    local big = FLOAT_MAX[self:dtype()]
    local r = self:masked_fill(self:ne(self), nan or 0)
    r = r:masked_fill(r:eq(huge), posinf or big)
    return r:masked_fill(r:eq(-huge), neginf or -big)
end

-- lerp(stop, weight): self + weight * (stop - self); weight a number or a
-- tensor (broadcast).
function Tensor:lerp(stop, weight, extra)
    if extra ~= nil then extra_arg("lerp", "(stop, weight)", extra) end
    check_self("lerp", self)
    check_devices("lerp", self, stop, weight)
    if not is_tensor(stop) and type(stop) ~= "number" then
        fail("lerp: the end must be a tensor or a number, got " .. typename(stop))
    end
    if not is_tensor(weight) and type(weight) ~= "number" then
        fail("lerp: the weight must be a tensor or a number, got " .. typename(weight))
    end
    -- the shapes first, so that a mismatch names lerp (not its sub)
    local shapes = {self:shape()}
    if is_tensor(stop) then shapes[#shapes + 1] = stop:shape() end
    if is_tensor(weight) then shapes[#shapes + 1] = weight:shape() end
    tensor.broadcast_shape("lerp", shapes)
    -- integers interpolate in float32, whatever the weight: stop - self
    -- wrapped in their dtype (uint8 5 to 3 by 0.25 gave 68.5), and an
    -- integer weight kept the integer dtype where 0.5 gave float32
    if not tensor.result_type(self, stop):match("^float") then
        self = to_default_float(self)
        if is_tensor(stop) then stop = to_default_float(stop) end
    end
    -- Torch's two forms: from self below a weight of 0.5, from stop above,
    -- so that weight 1 gives stop exactly (self + (stop - self) lost it to
    -- rounding: 1e8 + (1 - 1e8) is 0 in float32)
    local d = stop - self
    if type(weight) == "number" then
        if weight < 0.5 then return self + d * weight end
        return stop - d * (1 - weight)
    end
    return tensor.where(weight:lt(0.5), self + d * weight, stop - d * (1 - weight))
end

-- The remainder of a / b with the quotient rounded toward zero (fmod, the
-- sign of a) or down (remainder, the sign of b, as Python's %).  Floats
-- take C's fmod, which is exact (a - trunc(a / b) * b loses the remainder
-- once a / b passes the mantissa: 1e8 fmod 3 was 0), and remainder moves a
-- nonzero result whose sign differs from b's by b, as Python does; their
-- gradients are those of a - q * b with q the rounded quotient.  Integers
-- divide exactly ("trunc") and an integer divisor of 0 fails as div does.
-- a:div(b, "trunc") of integer operands (b a tensor or a number), named
-- fname where a tensor divisor of 0 fails when the op runs.
local function int_div(fname, a, b)
    if is_tensor(b) then return tensor.int_div_as(fname, a, b) end
    tensor.check_fits(fname, a._c.dtype, b) -- (div would name itself)
    return a:div(b, "trunc")
end

local function record_modulo(fname, a, b, r, floor_mode)
    local autograd = package.loaded["ordo.autograd"]
    if not (autograd and autograd.needs(a, b)) then return r end
    return autograd.record(fname, r, {a, b, n = 2}, function(g)
        local ga, gb
        if a._rg then ga = autograd.sum_to(g, a:shape()) end
        if is_tensor(b) and b._rg then
            local q = a:detach() / b:detach()
            q = floor_mode and q:floor() or q:trunc()
            gb = autograd.sum_to(-(g * q), b:shape())
        end
        return ga, gb
    end, is_tensor(b) and {a, b} or {a})
end

local function modulo(fname, a, b, floor_mode)
    check_self(fname, a)
    check_devices(fname, a, b)
    if not is_tensor(b) and type(b) ~= "number" then
        fail(fmt("%s: the divisor must be a tensor or a number, got %s", fname, typename(b)))
    end
    if is_tensor(b) then tensor.broadcast_shape(fname, {a:shape(), b:shape()}) end -- (fmod or sub would name itself)
    if tensor.result_type(a, b):match("^float") then
        local ad = a._rg and a:detach() or a
        local bd = is_tensor(b) and b._rg and b:detach() or b
        local r = tensor.float_fmod(ad, bd)
        if floor_mode then
            local bneg = is_tensor(bd) and bd:lt(0) or (bd < 0 and 1 or 0)
            r = tensor.where(r:ne(0):mul(r:lt(0):ne(bneg)), r + bd, r)
        end
        return record_modulo(fname, a, b, r, floor_mode)
    end
    if b == 0 then fail(fname .. ": integer division by zero") end -- a number: named at the call
    if type(b) == "number" then tensor.check_fits(fname, a._c.dtype, b) end -- (div would name itself)
    local r = a - int_div(fname, a, b) * b
    if not floor_mode then return r end
    -- a nonzero remainder whose sign differs from the divisor's moves by b
    local bneg = is_tensor(b) and b:lt(0) or (b < 0 and 1 or 0)
    local off = r:ne(0):mul(r:lt(0):ne(bneg))
    return r + off:to(r:dtype()) * b
end
function Tensor:fmod(b, extra)
    if extra ~= nil then extra_arg("fmod", "(other)", extra) end
    return modulo("fmod", self, b, false)
end
function Tensor:remainder(b, extra)
    if extra ~= nil then extra_arg("remainder", "(other)", extra) end
    return modulo("remainder", self, b, true)
end
-- a % b: remainder, the sign of the divisor, as Lua's own % (and Python's)
Tensor.__mod = function(a, b)
    if is_tensor(a) then return modulo("remainder", a, b, true) end
    if type(a) ~= "number" then
        fail("remainder: expected a tensor or a number, got " .. typename(a))
    end
    -- a number dividend: a 0-dim tensor beside b, in the dtype the op computes in
    local dt = tensor.result_type(b, a)
    tensor.check_fits("remainder", tensor.parse_dtype("remainder", dt), a) -- (tensor would name itself)
    return modulo("remainder", tensor.tensor(a, tensor.like(b, dt)), b, true)
end

-- div(u, "floor") and div(u, "trunc") on floats: Torch's rounding_mode
-- (the kernel's div(u, "trunc") keeps integer operands).  "floor" rounds
-- the quotient down, as Python's // and Torch's floor_divide: integers
-- from the exact truncated quotient, floats as Torch from C's exact fmod
-- ((a - fmod(a, b)) / b, moved down when the remainder's sign is not b's,
-- then floored and rounded to the nearest integer), so 1 // 0.1 is 9 as in
-- Python (floor(1 / 0.1) is 10); a float divisor of 0 gives a / b.  Their
-- gradient is zero, as Torch's.
local div_kernel, div_kernel_ = Tensor.div, Tensor.div_

local function record_zero(fname, a, b, r)
    local autograd = package.loaded["ordo.autograd"]
    if not (autograd and autograd.needs(a, b)) then return r end
    return autograd.record(fname, r, {a, b, n = 2}, function()
        local ga = a._rg and tensor.zeros_like(a) or nil
        local gb = is_tensor(b) and b._rg and tensor.zeros_like(b) or nil
        return ga, gb
    end)
end

local function rounded_div(fname, a, b, mode)
    if not is_tensor(b) and type(b) ~= "number" then
        fail(fmt("%s: the divisor must be a tensor or a number, got %s", fname, typename(b)))
    end
    if is_tensor(b) then tensor.broadcast_shape(fname, {a:shape(), b:shape()}) end -- (div would name itself)
    local rt = tensor.result_type(a, b)
    local ad = a._rg and a:detach() or a
    local bd = is_tensor(b) and b._rg and b:detach() or b
    local r
    if rt:match("^float") then
        if ad:dtype() ~= rt then ad = ad:to(rt) end
        if is_tensor(bd) and bd:dtype() ~= rt then bd = bd:to(rt) end
        local q = ad / bd
        if mode == "trunc" then
            r = q:trunc()
        else
            local mod = tensor.float_fmod(ad, bd)
            local bneg = is_tensor(bd) and bd:lt(0) or (bd < 0 and 1 or 0)
            local d = (ad - mod) / bd
            d = d - mod:ne(0):mul(mod:lt(0):ne(bneg)):to(rt)
            local f = d:floor()
            f = f + (d - f):gt(0.5):to(rt)
            f = tensor.where(d:eq(0), q * 0, f) -- a zero quotient keeps a / b's sign
            if is_tensor(bd) then -- a divisor of 0 gives a / b (inf or NaN)
                f = tensor.where(bd:eq(0), q, f)
            elseif bd == 0 then
                f = q
            end
            r = f
        end
    else
        if ad:dtype() ~= rt then ad = ad:to(rt) end
        if is_tensor(bd) and bd:dtype() ~= rt then bd = bd:to(rt) end
        if bd == 0 then fail(fname .. ": integer division by zero") end -- a number: named at the call
        local q = int_div(fname, ad, bd) -- a tensor divisor of 0 fails when it runs, named fname
        local rem = ad - q * bd
        local bneg = is_tensor(bd) and bd:lt(0) or (bd < 0 and 1 or 0)
        r = q - rem:ne(0):mul(rem:lt(0):ne(bneg)):to(rt)
    end
    return record_zero(fname, a, b, r)
end

-- "trunc" of integers is the kernel's (which also names a bad divisor)
local function kernel_trunc(self, b)
    if not is_tensor(b) and type(b) ~= "number" then return false end -- (rounded_div names it)
    return not tensor.result_type(self, b):match("^float")
end

local function div_mode_message(fname, mode)
    return fmt("%s: unknown rounding mode %s (expected nil, \"trunc\" or \"floor\")", fname, show(mode))
end

function Tensor:div(b, mode, extra)
    if extra ~= nil then extra_arg("div", "(other, mode)", extra) end
    check_self("div", self)
    if mode == nil or (mode == "trunc" and kernel_trunc(self, b)) then
        return div_kernel(self, b, mode)
    end
    if mode ~= "trunc" and mode ~= "floor" then fail(div_mode_message("div", mode)) end
    return rounded_div("div", self, b, mode)
end

-- the in-place forms write the rounded quotient into self, as the other in-place ops
local function rounded_div_(fname, self, b, mode)
    inplace_guard(fname, self)
    local r = rounded_div(fname, self, b, mode)
    if shape_of_str(r) ~= shape_of_str(self) then
        fail(fmt("%s: the result's shape %s is not the in-place tensor's %s (an operand broadcast beyond it)",
                 fname, shape_of_str(r), shape_of_str(self)))
    end
    if is_float(r) and not is_float(self) then
        fail(fmt("%s: the result type %s can't be cast to the in-place tensor's dtype %s", fname, r:dtype(), self:dtype()))
    end
    local ok, err = pcall(self.copy_, self, r) -- (copy_'s errors are this op's)
    if not ok then error((tostring(err):gsub("copy_: ", fname .. ": ", 1)), 0) end
    return self
end

function Tensor:div_(b, mode, extra)
    if extra ~= nil then extra_arg("div_", "(other, mode)", extra) end
    check_self("div_", self)
    if mode == nil or (mode == "trunc" and kernel_trunc(self, b)) then
        return div_kernel_(self, b, mode)
    end
    if mode ~= "trunc" and mode ~= "floor" then fail(div_mode_message("div_", mode)) end
    return rounded_div_("div_", self, b, mode)
end

-- floor_divide(u): div(u, "floor"), as Torch's (and Python's //)
function Tensor:floor_divide(b, extra)
    if extra ~= nil then extra_arg("floor_divide", "(other)", extra) end
    check_self("floor_divide", self)
    return rounded_div("floor_divide", self, b, "floor")
end
function Tensor:floor_divide_(b, extra)
    if extra ~= nil then extra_arg("floor_divide_", "(other)", extra) end
    check_self("floor_divide_", self)
    return rounded_div_("floor_divide_", self, b, "floor")
end

-- ---------------------------------------------------------------- rearranging

-- roll(shifts [, dims]): elements moved shifts places along dims (a number
-- or a table of them), those pushed past the end coming back at the start;
-- without dims, over the flattened tensor, keeping its shape.
function Tensor:roll(shifts, dims, extra)
    if extra ~= nil then extra_arg("roll", "(shifts, dims)", extra) end
    check_self("roll", self)
    if dims == nil then
        if type(shifts) ~= "number" then fail("roll: without dims, shifts must be one integer, got " .. typename(shifts)) end
        return self:contiguous():reshape(-1):roll(shifts, 1):reshape(self:shape())
    end
    if type(shifts) == "number" then shifts = {shifts} end
    if type(dims) == "number" then dims = {dims} end
    if type(shifts) == "table" then util.check_list("roll", "the shifts", shifts, true) end
    if type(dims) == "table" then util.check_list("roll", "the dims", dims, true) end
    if type(shifts) ~= "table" or type(dims) ~= "table" or #shifts ~= #dims then
        fail(fmt("roll: expected as many shifts as dims, got %s and %s", show(type(shifts) == "table" and #shifts or shifts),
                 show(type(dims) == "table" and #dims or dims)))
    end
    local r = self
    for i, d in ipairs(dims) do
        local s = shifts[i]
        if not is_int(s) then fail(fmt("roll: shift %d must be an integer, got %s", i, show(s))) end
        local n = size_along("roll", r, d)
        local k = n > 0 and math.fmod(s, n) or 0 -- exact, where s % n is not past 2^53
        if k < 0 then k = k + n end
        if k ~= 0 then r = tensor.cat({r:narrow(d, n - k + 1, k), r:narrow(d, 1, n - k)}, d) end
    end
    return rawequal(r, self) and self:clone() or r
end

-- tile(reps): copies of the tensor side by side, reps[i] times along dim i
-- (a table or the counts as arguments); fewer reps than dims repeat the
-- last dims, more add leading dims.
local function tile(self, ...)
    check_self("tile", self)
    local nargs = select("#", ...)
    local reps, nreps
    if nargs == 1 and type((...)) == "table" then
        reps, nreps = (...), #(...)
        util.check_list("tile", "the counts", reps, true)
    else
        reps, nreps = {...}, nargs
    end
    if nreps == 0 then fail("tile: expected the repetition counts, got none") end
    for i = 1, nreps do -- holes (a nil among the counts) too
        local r = reps[i]
        if not is_int(r) or r < 0 then fail(fmt("tile: count %d must be an integer >= 0, got %s", i, show(r))) end
    end
    local shape = self:shape()
    local n = math.max(#shape, nreps)
    if n > 8 then fail(fmt("tile: %d counts for shape %s: the result would have %d dims (at most 8 supported)",
                           nreps, shape_of_str(self), n)) end
    local full, count, nrep = {}, {}, 0 -- self's shape with leading 1s, and the count of each dim
    for i = 1, n do
        full[i] = shape[i - (n - #shape)] or 1
        count[i] = reps[i - (n - nreps)] or 1
        if count[i] ~= 1 then nrep = nrep + 1 end
    end
    if n + nrep <= 8 then -- a dim before each repeated one, expanded to its count
        local inner, outer, final = {}, {}, {}
        for i = 1, n do
            if count[i] ~= 1 then
                inner[#inner + 1], outer[#outer + 1] = 1, count[i]
            end
            inner[#inner + 1], outer[#outer + 1] = full[i], full[i]
            final[i] = count[i] * full[i]
        end
        -- a copy, as Torch's: the reshape gives a view when it can (all
        -- counts 1, or a repeated dim of size 1), stride 0 where repeated
        local r = self:reshape(inner):expand(outer):reshape(final)
        return r._c.storage == self._c.storage and r:clone() or r
    end
    -- no room for those dims (a tensor has at most 8): an index_select of
    -- 1..s, count times over, along each repeated dim
    local x = self:reshape(full)
    for i = 1, n do
        local r, s = count[i], full[i]
        if r * s == 0 then
            x = x:narrow(i, 1, 0)
        elseif r ~= 1 then
            x = x:index_select(i, tensor.arange(r * s, tensor.like(self, "int64")):remainder(s):add_(1))
        end
    end
    return x
end
function Tensor:tile(...) return own_errors("tile", pcall(tile, self, ...)) end

-- The lengths along dim that chunk and split cut.
local function cut(t, sizes, dim)
    local parts, start = {}, 1
    for i = 1, #sizes do
        parts[i] = t:narrow(dim, start, sizes[i])
        start = start + sizes[i]
    end
    return parts
end

-- chunk(n [, dim]): at most n views along dim (default 1) of equal length,
-- the last one shorter when the length does not divide.
function Tensor:chunk(n, dim, extra)
    if extra ~= nil then extra_arg("chunk", "(n, dim)", extra) end
    check_self("chunk", self)
    dim = dim or 1
    if not is_int(n) or n < 1 then fail("chunk: the count must be an integer >= 1, got " .. show(n)) end
    local len = size_along("chunk", self, dim)
    local each = ceil(len / n)
    local sizes = {}
    if each == 0 then return {self:narrow(dim, 1, 0)} end
    for start = 1, len, each do sizes[#sizes + 1] = math.min(each, len - start + 1) end
    return cut(self, sizes, dim)
end


-- tensor_split(n | {cuts} [, dim]): Torch's: n views along dim (default
-- 1), the first len % n of them one longer; or, with a list, views cut
-- after cuts[1] elements, after cuts[2], ... (Torch's indices: x[:c1],
-- x[c1:c2], ..., x[ck:], each slice as Python's: a cut past the end is the
-- end, a slice whose end is before its start is empty).
function Tensor:tensor_split(sections, dim, extra)
    if extra ~= nil then extra_arg("tensor_split", "(sections, dim)", extra) end
    local fname = "tensor_split"
    check_self(fname, self)
    dim = dim or 1
    local len = size_along(fname, self, dim)
    local parts = {}
    if type(sections) == "table" and not is_tensor(sections) then
        util.check_list(fname, "the cuts", sections, true)
        local prev = 0
        for i, c in ipairs(sections) do
            if not is_int(c) or c < 0 then fail(fmt("%s: cut %d must be an integer >= 0, got %s", fname, i, show(c))) end
            local a, b = math.min(prev, len), math.min(c, len)
            parts[#parts + 1] = self:narrow(dim, a + 1, math.max(0, b - a))
            prev = c
        end
        local a = math.min(prev, len)
        parts[#parts + 1] = self:narrow(dim, a + 1, len - a)
        return parts
    end
    if not is_int(sections) or sections < 1 then
        fail(fname .. ": expected a count >= 1 or a list of cuts, got " .. show(sections))
    end
    if sections > len and sections > 2 ^ 20 then -- (each a Lua object: 2^40 of them would fill the memory)
        fail(fmt("%s: %s views of a dim of length %d: at most the length, or 2^20", fname, show(sections), len))
    end
    local each, extra, start = math.floor(len / sections), len % sections, 1
    for i = 1, sections do
        local n = each + (i <= extra and 1 or 0)
        parts[i] = self:narrow(dim, start, n)
        start = start + n
    end
    return parts
end

-- split(size [, dim]): views along dim (default 1) of length size, the
-- last one shorter; or, with a table of lengths, views of those lengths
-- (they must add up to the length of dim).
function Tensor:split(size, dim, extra)
    if extra ~= nil then extra_arg("split", "(size, dim)", extra) end
    check_self("split", self)
    dim = dim or 1
    local len = size_along("split", self, dim)
    local sizes = {}
    if type(size) == "table" then
        util.check_list("split", "the lengths", size, true)
        local total = 0
        for i, s in ipairs(size) do
            if not is_int(s) or s < 0 then
                fail(fmt("split: length %d must be an integer >= 0, got %s", i, show(s)))
            end
            sizes[i], total = s, total + s
        end
        if total ~= len then
            fail(fmt("split: lengths add up to %s but dim %s has %d", show(total), show(dim), len))
        end
    else
        if not is_int(size) or size < 1 then
            fail("split: size must be an integer >= 1 or a table of lengths, got " .. show(size))
        end
        for start = 1, len, size do sizes[#sizes + 1] = math.min(size, len - start + 1) end
        if len == 0 then sizes[1] = 0 end -- one empty view, as Torch's (and chunk's)
    end
    return cut(self, sizes, dim)
end

-- ---------------------------------------------------------------- reductions over several dims

-- x with the dims of the list dims (from 1, negative from the end) moved
-- last and merged into one, and the shape the reduction has with keepdim
-- (1 at each reduced dim).
local function merged_dims(fname, x, dims)
    util.check_list(fname, "the list of dims", dims, true) -- (strict: {correction = 0} is no empty list)
    local n = #dims
    if n == 0 then fail(fname .. ": the list of dims is empty") end
    local reduced = {}
    for i = 1, n do
        if dims[i] == nil then fail(fmt("%s: dim %d of the list is nil", fname, i)) end
        local d = tensor.norm_dim(fname, x, dims[i]) + 1
        if reduced[d] then fail(fmt("%s: dim %s appears twice in the list", fname, show(dims[i]))) end
        reduced[d] = true
    end
    local s = x:shape()
    local perm, merged, keep_shape, count = {}, {}, {}, 1
    for i = 1, #s do
        if not reduced[i] then
            perm[#perm + 1], merged[#merged + 1] = i, s[i]
        end
        keep_shape[i] = reduced[i] and 1 or s[i]
    end
    for i = 1, #s do
        if reduced[i] then perm[#perm + 1], count = i, count * s[i] end
    end
    merged[#merged + 1] = count
    return x:permute(perm):reshape(merged), keep_shape
end

-- The reductions whose dim may also be a list of dims, as Torch's
-- (t:mean({3, 4}): the mean of each N x C plane): the dims merged into
-- one, then reduced as one dim; made of differentiable ops.
for _, name in ipairs({"sum", "mean", "var", "std", "logsumexp", "all", "any"}) do
    local one_dim = Tensor[name]
    Tensor[name] = function(self, dim, keepdim, ...)
        if type(dim) ~= "table" then return one_dim(self, dim, keepdim, ...) end
        check_self(name, self)
        local x, keep_shape = merged_dims(name, self, dim)
        local r = one_dim(x, -1, false, ...)
        if keepdim then r = r:reshape(keep_shape) end
        return r
    end
end
-- amax / amin([dim [, keepdim]]): the largest (smallest) values over all
-- elements, a dim or a list of dims -- max/min's values without indices.
-- As Torch's, the gradient is shared evenly by the elements equal to the
-- extremum (max(dim) gives it all to the one its index names), so amax
-- over a dim agrees with amax over everything, which max() shares too.
local function record_spread(name, x, d, vk, out)
    local autograd = package.loaded["ordo.autograd"]
    return autograd.record(name, out, {x, n = 1}, function(g)
        local m = x:eq(vk):to(g:dtype())
        local gk = g:dim() < x:dim() and g:unsqueeze(d) or g
        return m * (gk / m:sum(d, true))
    end, {x, vk})
end
-- the extremum of x along d (from 1): the values (keepdim), then recorded
local function extremum_along(name, one, x, d, keepdim)
    local autograd = package.loaded["ordo.autograd"]
    if not (autograd and autograd.needs(x)) then return (Tensor[one](x, d, keepdim)) end
    local vk = (Tensor[one](x:detach(), d, true))
    return record_spread(name, x, d, vk, keepdim and vk or vk:squeeze(d))
end
for name, one in pairs({amax = "max", amin = "min"}) do
    Tensor[name] = function(self, dim, keepdim)
        check_self(name, self)
        if dim == nil then
            if self:numel() == 0 then -- (said here: max's own error would name max)
                fail(fmt("%s: cannot reduce an empty tensor (shape %s) without a dim", name, shape_of_str(self)))
            end
            return Tensor[one](self)
        end
        if type(dim) ~= "table" then
            local d = tensor.norm_dim(name, self, dim) + 1
            if self:size(d) == 0 then
                fail(fmt("%s: cannot reduce dim %d of size 0 (shape %s)", name, d, shape_of_str(self)))
            end
            return extremum_along(name, one, self, d, keepdim)
        end
        local x, keep_shape = merged_dims(name, self, dim)
        if x:size(x:dim()) == 0 then
            fail(fmt("%s: cannot reduce dims of size 0 (shape %s)", name, shape_of_str(self)))
        end
        local r = extremum_along(name, one, x, x:dim(), false)
        if keepdim then r = r:reshape(keep_shape) end
        return r
    end
end

local norm_one_dim = Tensor.norm
function Tensor:norm(p, dim, keepdim)
    if type(dim) ~= "table" then return norm_one_dim(self, p, dim, keepdim) end
    check_self("norm", self)
    local x, keep_shape = merged_dims("norm", self, dim)
    local r = norm_one_dim(x, p, -1, false)
    if keepdim then r = r:reshape(keep_shape) end
    return r
end

-- repeat_interleave(repeats [, dim]): each element along dim (without a
-- dim: of the flattened tensor) repeated -- repeats times (an integer), or
-- repeats[i] times for element i (a list or an integer tensor of one count
-- per element).  Counts given as a list or tensor are read (a wait); the
-- index is then built by the engine: a 1 marked at each element's first
-- output place, summed up (cumsum), so a zero count skips its element.
local function repeat_interleave(self, repeats, dim)
    local fname = "repeat_interleave"
    check_self(fname, self)
    check_devices(fname, self, repeats)
    local x, d = self, 1
    if dim == nil then x = self:reshape(-1) else d = tensor.norm_dim(fname, self, dim) + 1 end
    local s = x:shape()
    local n = s[d]
    if type(repeats) == "number" then
        if not is_int(repeats) or repeats < 0 then
            fail(fname .. ": repeats must be an integer >= 0, a list or a tensor of them, got " .. show(repeats))
        end
        if #s == 8 then -- no room for the dim unsqueeze adds: element i // repeats at place i (from 0)
            if n * repeats == 0 then return x:narrow(d, 1, 0) end
            return x:index_select(d, tensor.arange(n * repeats, tensor.like(x, "int64")):div(repeats, "floor"):add_(1))
        end
        local expanded, out = {}, {}
        for i = 1, #s do
            expanded[#expanded + 1] = s[i]
            if i == d then expanded[#expanded + 1] = repeats end
            out[i] = i == d and s[i] * repeats or s[i]
        end
        -- a copy, as Torch's (a view when the reshape can: repeats 1, or one element along d)
        local r = x:unsqueeze(d + 1):expand(expanded):reshape(out)
        return r._c.storage == self._c.storage and r:clone() or r
    end
    local counts = repeats
    if type(repeats) == "table" and getmetatable(repeats) == nil then
        counts = tensor.tensor(#repeats > 0 and repeats or {0}, tensor.like(x, "int64"))
        if #repeats == 0 then counts = counts:narrow(1, 1, 0) end
    elseif not is_tensor(repeats) then
        fail(fname .. ": repeats must be an integer >= 0, a list or a tensor of them, got " .. typename(repeats))
    end
    local dt = counts:dtype()
    if dt == "float32" or dt == "float64" or counts:dim() > 1 then
        fail(fmt("%s: repeats must hold integers in one dim, got %s of shape %s", fname, dt, shape_of_str(counts)))
    end
    counts = counts:reshape(-1):to("int64")
    if counts:numel() == 1 and n ~= 1 then counts = counts:expand(n) end -- one count for all
    if counts:numel() ~= n then
        fail(fmt("%s: %d counts for %d elements along dim %d (shape %s)", fname, counts:numel(), n, d,
                 shape_of_str(self)))
    end
    if n == 0 then return x end
    if counts:min():item() < 0 then fail(fname .. ": repeats must be >= 0") end
    local total = counts:sum():item()
    local starts = counts:cumsum(1) - counts -- each element's first place in the output, from 0
    local first = starts:masked_select(starts:lt(total)) + 1 -- elements with a place (trailing zero counts have none)
    local marks = tensor.zeros({total}, tensor.like(x, "int64"))
    marks:scatter_add_(1, first, tensor.ones_like(first))
    return x:index_select(d, marks:cumsum(1))
end
function Tensor:repeat_interleave(repeats, dim, extra)
    if extra ~= nil then extra_arg("repeat_interleave", "(repeats, dim)", extra) end
    return own_errors("repeat_interleave", pcall(repeat_interleave, self, repeats, dim))
end

-- nan_to_num_, lerp_, fmod_, remainder_: the in-place forms, as Torch's.
-- The result is written into self, which must hold it: self's shape (an
-- operand may broadcast to it, not beyond) and a dtype the result can be
-- cast to (no float result into an integer tensor), as the other in-place
-- ops; the write is a copy_, whose errors name the op.
for _, name in ipairs({"nan_to_num", "lerp", "fmod", "remainder"}) do
    local f, iname = Tensor[name], name .. "_"
    Tensor[iname] = function(self, ...)
        check_self(iname, self)
        local autograd = package.loaded["ordo.autograd"]
        if self._rg and autograd and autograd.is_enabled() then -- (copy_ would name itself)
            fail(fmt("%s: a tensor that requires a gradient cannot be changed in place (use the out-of-place %s, " ..
                     "or wrap the update in ordo.no_grad)", iname, name))
        end
        -- (the out-of-place op's errors under this op's name)
        local ok, r = pcall(f, self, ...)
        if not ok then error((tostring(r):gsub(name .. ": ", iname .. ": ", 1)), 0) end
        if shape_of_str(r) ~= shape_of_str(self) then
            fail(fmt("%s: the result's shape %s is not the in-place tensor's %s (an operand broadcast beyond it)",
                     iname, shape_of_str(r), shape_of_str(self)))
        end
        if is_float(r) and not is_float(self) then
            fail(fmt("%s: the result type %s can't be cast to the in-place tensor's dtype %s", iname, r:dtype(),
                     self:dtype()))
        end
        -- copy_'s errors (an expanded view, overlapping windows, a view made under no_grad) are this op's
        local ok, err = pcall(self.copy_, self, r)
        if not ok then error((tostring(err):gsub("copy_: ", iname .. ": ", 1)), 0) end
        return self
    end
end

-- t:multinomial(n [, replacement]), ordo.multinomial(probs, n [,
-- replacement]): Torch's: n category indices (int64, from 1) drawn from
-- each distribution of probs -- 1-dim: one, n indices; 2-dim: one a row,
-- rows x n -- whose weights are finite and >= 0 and need not sum to 1.
-- Without replacement (the default, as Torch's) no index repeats in a row,
-- which needs n nonzero weights; with it, the draws are independent.
-- Gumbel-max: argmax(log p + G), G = -log(-log U), picks i with
-- probability p_i / sum(p), and the top n of one set of keys is a draw
-- without replacement (Gumbel-top-k); made of tensor ops, it runs on any
-- device, with the engine's generator, and checks the weights there: a
-- negative, NaN or infinite weight, or a row of too few nonzero weights,
-- fails the result at the wait that meets it ("multinomial (nonzero
-- weights): check_range: value 1 at element 2 is outside [3, inf]": row 2
-- has one).
-- A uniform draw of 0 (one in 2^24 in float32) made its Gumbel key -inf,
-- the key of a zero weight, and the tie could pick the zero-weight index:
-- the draws are kept at or above U_MIN (2^-126, float32's smallest normal),
-- so a nonzero weight's key is always finite.
local U_MIN = 2 ^ -126
-- Whether any of the arguments is not nil (trailing nils are no arguments).
local function has_more(...)
    for i = 1, select("#", ...) do
        if select(i, ...) ~= nil then return true end
    end
    return false
end
function Tensor:multinomial(n, replacement, ...)
    local fname = "multinomial"
    check_self(fname, self)
    -- (Torch's keyword table {generator =, out =} was dropped unseen: one generator an engine here)
    if has_more(...) then
        fail(fmt("%s: takes (n [, replacement]), got a further argument (%s): the draws use the engine's " ..
                 "generator (ordo.manual_seed), and the result is returned, not written to an out tensor", fname,
                 typename((...))))
    end
    if not is_float(self) or self:dim() < 1 or self:dim() > 2 then
        fail(fmt("%s: expected weights of dtype float32 or float64 with 1 or 2 dims, got %s of shape %s", fname,
                 self:dtype(), shape_of_str(self)))
    end
    local C = self:size(-1)
    if C == 0 then fail(fmt("%s: the weights of shape %s have no categories", fname, shape_of_str(self))) end
    if replacement == nil then replacement = false end
    if type(replacement) ~= "boolean" then
        fail(fmt("%s: replacement must be true or false, got %s", fname, typename(replacement)))
    end
    if not is_int(n) or n < 1 then fail(fmt("%s: the number of samples must be an integer >= 1, got %s", fname, show(n))) end
    if not replacement and n > C then
        fail(fmt("%s: cannot draw %d samples of %d categories without replacement", fname, n, C))
    end
    local dt = self:dtype()
    local p = self:detach()
    if self:dim() == 1 then p = p:view(1, C) end
    local R = p:size(1)
    -- the result first, named for errors (a size too large, out of memory)
    local idx = tensor.new_on(fname, p, {R, n}, I64_CODE)
    p = tensor.checked_in_range("multinomial (weights)", p, 0, FLOAT_MAX[dt])
    local nonzero = p:gt(0):sum(2, true):to(dt)
    nonzero = tensor.checked_in_range("multinomial (nonzero weights)", nonzero, replacement and 1 or n, huge)
    local logp = p:log() + nonzero * 0 -- (the keys wait for the count's check)
    if R == 0 then return self:dim() == 1 and idx:view(n) or idx end
    if replacement then
        -- n independent Gumbel-max draws a row, a block of them at a time:
        -- the keys of a block hold at most about 2^22 elements
        local block = math.max(1, math.floor(2 ^ 22 / (R * C)))
        for start = 1, n, block do
            local len = math.min(block, n - start + 1)
            local keys = logp:view(R, 1, C):expand(R, len, C)
            local u = tensor.empty_like(keys):uniform_(0, 1):clamp_(U_MIN, 1)
            idx:narrow(2, start, len):copy_((keys - (-u:log()):log()):argmax(3))
        end
    else
        local u = tensor.empty_like(logp):uniform_(0, 1):clamp_(U_MIN, 1)
        local _, top = (logp - (-u:log()):log()):topk(n, 2)
        idx:copy_(top)
    end
    if self:dim() == 1 then idx = idx:view(n) end
    return idx
end

-- keepdim with no dim keeps every dim, as size 1 (as sum, mean and max
-- do, and Torch's): these gave a 0-dim tensor, ignoring keepdim.
local function keep_every_dim(self, r)
    local s = {}
    for i = 1, self:dim() do s[i] = 1 end
    return r:reshape(s)
end
for _, name in ipairs({"var", "std", "prod", "logsumexp", "amax", "amin"}) do
    local f = Tensor[name]
    Tensor[name] = function(self, dim, keepdim, ...)
        local r = f(self, dim, keepdim, ...)
        if dim == nil and keepdim then return keep_every_dim(self, r) end
        return r
    end
end
local norm_dims = Tensor.norm
function Tensor:norm(p, dim, keepdim)
    local r = norm_dims(self, p, dim, keepdim)
    if dim == nil and keepdim then return keep_every_dim(self, r) end
    return r
end

-- ---------------------------------------------------------------- more of Torch's tensor functions

-- diff([n [, dim [, prepend [, append]]]]): the n-th forward difference
-- along dim (default the last): x[i + 1] - x[i], n times, after prepend and
-- append (tensors) are joined to x along dim, as Torch's.
function Tensor:diff(n, dim, prepend, append, extra)
    if extra ~= nil then extra_arg("diff", "(n, dim, prepend, append)", extra) end
    local fname = "diff"
    check_self(fname, self)
    n = n or 1
    if not is_int(n) or n < 0 then fail(fmt("%s: n must be an integer >= 0, got %s", fname, show(n))) end
    if self:dim() == 0 then fail(fname .. ": expected at least 1 dim, got a 0-dim tensor") end
    local d = tensor.norm_dim(fname, self, dim or -1) + 1
    local parts = {}
    for _, e in ipairs({{"prepend", prepend}, {"self"}, {"append", append}}) do
        local v = e[1] == "self" and self or e[2]
        if v ~= nil then
            if not is_tensor(v) then fail(fmt("%s: %s must be a tensor, got %s", fname, e[1], typename(v))) end
            if v:dim() ~= self:dim() then
                fail(fmt("%s: %s of shape %s must have the dims of the input (shape %s)", fname, e[1],
                         shape_of_str(v), shape_of_str(self)))
            end
            for i = 1, v:dim() do -- (cat said it, under its own name)
                if i ~= d and v:size(i) ~= self:size(i) then
                    fail(fmt("%s: %s of shape %s must match the input's shape %s except along dim %d", fname, e[1],
                             shape_of_str(v), shape_of_str(self), d))
                end
            end
            parts[#parts + 1] = v
        end
    end
    check_devices_list(fname, parts)
    local x = #parts == 1 and self or tensor.cat(parts, d)
    for _ = 1, n do
        local len = x:size(d)
        if len <= 1 then return x:narrow(d, 1, 0) end
        x = x:narrow(d, 2, len - 1) - x:narrow(d, 1, len - 1)
    end
    return x
end

-- The value of addcmul/addcdiv: a number, or {value = v}.
local function scale_value(fname, value)
    if type(value) == "table" and not is_tensor(value) then
        value = util.check_opts(fname, value, {value = true}).value
    end
    if value == nil then return 1 end
    if type(value) ~= "number" then fail(fmt("%s: the value must be a number, got %s", fname, typename(value))) end
    return value
end

local function check_operands(fname, a, b)
    if not is_tensor(a) or not is_tensor(b) then
        fail(fmt("%s: expected two tensors, got %s and %s", fname, typename(a), typename(b)))
    end
end

-- addcmul(t1, t2 [, value]): self + value * t1 * t2; addcdiv: self + value
-- * t1 / t2 (value 1 by default, a number or {value = v}), as Torch's; the
-- in-place forms keep self's dtype.
function Tensor:addcmul(t1, t2, value, extra)
    if extra ~= nil then extra_arg("addcmul", "(t1, t2, value)", extra) end
    check_self("addcmul", self)
    check_operands("addcmul", t1, t2)
    value = scale_value("addcmul", value)
    check_devices("addcmul", self, t1, t2)
    tensor.broadcast_shape("addcmul", {self:shape(), t1:shape(), t2:shape()})
    return self + t1 * t2 * value
end
function Tensor:addcdiv(t1, t2, value, extra)
    if extra ~= nil then extra_arg("addcdiv", "(t1, t2, value)", extra) end
    check_self("addcdiv", self)
    check_operands("addcdiv", t1, t2)
    value = scale_value("addcdiv", value)
    check_devices("addcdiv", self, t1, t2)
    tensor.broadcast_shape("addcdiv", {self:shape(), t1:shape(), t2:shape()})
    return self + t1 / t2 * value
end
function Tensor:addcmul_(t1, t2, value, extra)
    if extra ~= nil then extra_arg("addcmul_", "(t1, t2, value)", extra) end
    check_self("addcmul_", self)
    check_operands("addcmul_", t1, t2)
    value = scale_value("addcmul_", value)
    check_devices("addcmul_", self, t1, t2)
    tensor.broadcast_shape("addcmul_", {self:shape(), t1:shape(), t2:shape()})
    inplace_guard("addcmul_", self)
    return self:add_(t1 * t2, value)
end
function Tensor:addcdiv_(t1, t2, value, extra)
    if extra ~= nil then extra_arg("addcdiv_", "(t1, t2, value)", extra) end
    check_self("addcdiv_", self)
    check_operands("addcdiv_", t1, t2)
    value = scale_value("addcdiv_", value)
    check_devices("addcdiv_", self, t1, t2)
    tensor.broadcast_shape("addcdiv_", {self:shape(), t1:shape(), t2:shape()})
    inplace_guard("addcdiv_", self)
    return self:add_(t1 / t2, value)
end

-- kron(a, b): the Kronecker product (the fewer dims of the two get leading
-- 1s): block (i, j, ...) is a[i, j, ...] * b.
local function kron(a, b)
    local fname = "kron"
    check_self(fname, a)
    if not is_tensor(b) then fail(fmt("%s: expected two tensors, got a tensor and %s", fname, typename(b))) end
    check_devices(fname, a, b)
    local nd = math.max(a:dim(), b:dim())
    local sa, sb = a:shape(), b:shape()
    if nd > 4 then
        -- (the interleaved view below takes 2 x nd dims, past the 8 a tensor has): each element of a
        -- repeated b's size along every dim, times b tiled a's size along it
        local ea, eb, reps = {}, {}, {}
        for i = 1, nd do
            ea[i], eb[i] = sa[#sa - nd + i] or 1, sb[#sb - nd + i] or 1
            reps[i] = ea[i]
        end
        local x = a:reshape(ea)
        for i = 1, nd do
            if eb[i] ~= 1 then x = x:repeat_interleave(eb[i], i) end
        end
        return x * b:reshape(eb):tile(reps)
    end
    local va, vb, out = {}, {}, {}
    for i = 1, nd do
        local x = sa[#sa - nd + i] or 1
        local y = sb[#sb - nd + i] or 1
        va[2 * i - 1], va[2 * i] = x, 1
        vb[2 * i - 1], vb[2 * i] = 1, y
        out[i] = x * y
    end
    if nd == 0 then return a * b end
    return (a:reshape(va) * b:reshape(vb)):reshape(out)
end
function M.kron(a, b, extra)
    if extra ~= nil then extra_arg("kron", "(other)", extra) end
    return own_errors("kron", pcall(kron, a, b))
end
Tensor.kron = M.kron

-- The shape a and b broadcast to, each expanded to it.
local function broadcast_pair(fname, a, b)
    local shape = tensor.broadcast_shape(fname, {a:shape(), b:shape()})
    return a:expand(shape), b:expand(shape)
end

-- cross(a, b [, dim]): the cross product of 3-vectors along dim (default
-- the last, as torch.linalg.cross), a and b broadcast together.
function M.cross(a, b, dim, extra)
    if extra ~= nil then extra_arg("cross", "(other, dim)", extra) end
    local fname = "cross"
    check_self(fname, a)
    if not is_tensor(b) then fail(fmt("%s: expected two tensors, got a tensor and %s", fname, typename(b))) end
    check_devices(fname, a, b)
    local x, y = broadcast_pair(fname, a, b)
    if x:dim() == 0 then fail(fname .. ": expected 3-vectors, got 0-dim tensors") end
    local d = tensor.norm_dim(fname, x, dim or -1) + 1
    if x:size(d) ~= 3 then
        fail(fmt("%s: dim %s must have size 3, got shapes %s and %s", fname, show(dim or -1), shape_of_str(a),
                 shape_of_str(b)))
    end
    local like = tensor.like(x, "int64")
    local i1, i2 = tensor.tensor({2, 3, 1}, like), tensor.tensor({3, 1, 2}, like)
    return x:index_select(d, i1) * y:index_select(d, i2) - x:index_select(d, i2) * y:index_select(d, i1)
end
Tensor.cross = M.cross

-- cdist(x1, x2 [, p | {p = p, compute_mode}]): the p-norm distances (p as
-- norm's, default 2) between the rows of x1 (..., P, M) and those of x2
-- (..., R, M): (..., P, R), the batch dims broadcast.  For p = 2 with more
-- than 25 rows on either side (Torch's "use_mm_for_euclid_dist_if_necessary",
-- the default compute_mode; "use_mm_for_euclid_dist" always,
-- "donot_use_mm_for_euclid_dist" never) the squared distances come from
-- one matrix product, |a|^2 + |b|^2 - 2 a.b, as Torch's: no P x R x M
-- difference tensor (1000 x 1000 rows of 64 took 1.2 GB that way); the
-- gradient is 0 where a distance is 0, as Torch's.
local COMPUTE_MODES = {use_mm_for_euclid_dist_if_necessary = true, use_mm_for_euclid_dist = true,
                       donot_use_mm_for_euclid_dist = true}
local function cdist(x1, x2, p)
    local fname = "cdist"
    check_self(fname, x1)
    if not is_tensor(x2) then fail(fmt("%s: expected two tensors, got a tensor and %s", fname, typename(x2))) end
    check_devices(fname, x1, x2)
    if x1:dim() < 2 or x2:dim() < 2 or x1:size(-1) ~= x2:size(-1) then
        fail(fmt("%s: expected (..., P, M) and (..., R, M), got shapes %s and %s", fname, shape_of_str(x1),
                 shape_of_str(x2)))
    end
    if x1:dim() >= 8 or x2:dim() >= 8 then
        fail(fmt("%s: at most 7 dims, got shapes %s and %s", fname, shape_of_str(x1), shape_of_str(x2)))
    end
    local mode = "use_mm_for_euclid_dist_if_necessary"
    if type(p) == "table" and not is_tensor(p) then -- F.cdist's form
        local opts = util.check_opts(fname, p, {p = true, compute_mode = true})
        p = opts.p
        if opts.compute_mode ~= nil then
            if not COMPUTE_MODES[opts.compute_mode] then
                fail(fmt("%s: compute_mode must be \"use_mm_for_euclid_dist_if_necessary\", " ..
                         "\"use_mm_for_euclid_dist\" or \"donot_use_mm_for_euclid_dist\", got %s", fname,
                         show(opts.compute_mode)))
            end
            mode = opts.compute_mode
        end
    end
    if p ~= nil and type(p) ~= "number" then fail(fmt("%s: p must be a number >= 0, got %s", fname, show(p))) end
    if p ~= nil and (p < 0 or p ~= p) then fail(fmt("%s: p must be a number >= 0, got %s", fname, show(p))) end
    p = p or 2
    tensor.broadcast_shape(fname, {{unpack(x1:shape(), 1, x1:dim() - 2)}, {unpack(x2:shape(), 1, x2:dim() - 2)}})
    local P, R = x1:size(-2), x2:size(-2)
    if p == 2 and (mode == "use_mm_for_euclid_dist" or (mode == "use_mm_for_euclid_dist_if_necessary" and
                                                          (P > 25 or R > 25))) then
        if not tensor.result_type(x1, x2):match("^float") then x1, x2 = to_default_float(x1), to_default_float(x2) end
        local sq1 = (x1 * x1):sum(-1, true)                     -- (..., P, 1)
        local sq2 = (x2 * x2):sum(-1, true):transpose(-1, -2)   -- (..., 1, R)
        local d2 = sq1 + sq2 - x1:matmul(x2:transpose(-1, -2)) * 2
        -- rounding may leave a small negative: a distance of 0, and its gradient 0
        local pos = d2:detach():gt(0)
        return tensor.where(pos, tensor.where(pos, d2, 1):sqrt(), 0)
    end
    return (x1:unsqueeze(-2) - x2:unsqueeze(-3)):norm(p, -1)
end
function M.cdist(x1, x2, p, extra)
    if extra ~= nil then extra_arg("cdist", "(x2, p)", extra) end
    return own_errors("cdist", pcall(cdist, x1, x2, p))
end
Tensor.cdist = M.cdist

-- take(index): the elements of the flattened tensor at index (from 1,
-- int64 or int32), in index's shape.
function Tensor:take(index, extra)
    if extra ~= nil then extra_arg("take", "(index)", extra) end
    local fname = "take"
    check_self(fname, self)
    if not is_tensor(index) or is_float(index) or index:dtype() == "uint8" then
        fail(fmt("%s: expected an int64 or int32 tensor of indices, got %s", fname,
                 is_tensor(index) and index:dtype() or typename(index)))
    end
    check_devices(fname, self, index)
    return self:reshape(-1):index_select(1, index:reshape(-1), fname):view(index:shape())
end

-- cummax(dim) / cummin(dim): the running largest / smallest along dim and
-- its index (int64, from 1; of a tie the latest, and NaN once met, as
-- Torch's); the gradient goes to the element the index names.
local function running_extremum(fname, self, dim, largest)
    check_self(fname, self)
    if dim == nil then fail(fname .. ": expected a dim") end
    local x = self
    if self:dim() == 0 then
        tensor.norm_dim(fname, self:reshape(1), dim)
        x = self:reshape(1)
        dim = 1
    end
    local d = tensor.norm_dim(fname, x, dim) + 1
    local n = x:size(d)
    local v = x:detach()
    local s = 1
    while s < n do -- v[i] = the extremum of v[i - s] and v[i] (doubling: log n steps)
        local a, b = v:narrow(d, s + 1, n - s), v:narrow(d, 1, n - s)
        local m = largest and a:maximum(b) or a:minimum(b) -- (NaN wins both)
        v = tensor.cat({v:narrow(d, 1, s), m}, d)
        s = s * 2
    end
    -- where x reaches the running extremum (or is NaN) the index moves to it:
    -- the running largest of those places
    local shape = {}
    for i = 1, x:dim() do shape[i] = 1 end
    shape[d] = n
    local pos = tensor.arange(1, n + 1, tensor.like(x, "int64")):view(shape)
    local mark = x:detach():eq(v)
    if is_float(x) then mark = mark:logical_or(x:detach():isnan()) end
    local at = pos * mark
    s = 1
    while s < n do
        at = tensor.cat({at:narrow(d, 1, s), at:narrow(d, s + 1, n - s):maximum(at:narrow(d, 1, n - s))}, d)
        s = s * 2
    end
    local values = x:gather(d, at)
    if self:dim() == 0 then return values:reshape(), at:reshape() end
    return values, at
end
-- logcumsumexp([dim]): log(cumsum(exp(t), dim)) without overflow or
-- underflow, as Torch's: a doubling scan of logaddexp (log n steps), so
-- each running result is exact for any spread of the values and autograd
-- differentiates it (integers in float32; 0- and 1-dim tensors need no dim).
function Tensor:logcumsumexp(dim, extra)
    local fname = "logcumsumexp"
    check_self(fname, self)
    if extra ~= nil then fail(fmt("%s: takes a dim only, got a second argument (%s)", fname, show(extra))) end
    if dim == nil then
        if self:dim() > 1 then fail(fmt("%s: expected a dim for a tensor of shape %s", fname, shape_of_str(self))) end
        dim = 1
    end
    local x = is_float(self) and self or to_default_float(self)
    local zero_dim = x:dim() == 0
    if zero_dim then
        tensor.norm_dim(fname, x:reshape(1), dim)
        x, dim = x:reshape(1), 1
    end
    local d = tensor.norm_dim(fname, x, dim) + 1
    local n = x:size(d)
    local v = x
    local s = 1
    while s < n do -- v[i] = logaddexp(v[i - s], v[i]): after the steps, the log-sum of every x[j], j <= i
        local a, b = v:narrow(d, s + 1, n - s), v:narrow(d, 1, n - s)
        local m = a:detach():maximum(b:detach())
        local shift = tensor.where(m:abs():eq(huge), 0, m) -- (inf - inf would be NaN)
        local sum = ((a - shift):exp() + (b - shift):exp()):log() + shift
        v = tensor.cat({v:narrow(d, 1, s), sum}, d)
        s = s * 2
    end
    if zero_dim then return v:reshape() end
    return v
end
function Tensor:cummax(dim, extra)
    if extra ~= nil then extra_arg("cummax", "(dim)", extra) end
    return running_extremum("cummax", self, dim, true)
end
function Tensor:cummin(dim, extra)
    if extra ~= nil then extra_arg("cummin", "(dim)", extra) end
    return running_extremum("cummin", self, dim, false)
end

-- bincount([weights [, minlength]]): Torch's: for a 1-dim tensor of
-- integers >= 0, the count (or the sum of weights) of each value v at
-- place v + 1 (places count from 1), max(input) + 1 places at least
-- minlength; int64, or the weights' dtype (integer weights: int64). Waits
-- (its length depends on the values).
function Tensor:bincount(weights, minlength, extra)
    if extra ~= nil then extra_arg("bincount", "(weights, minlength)", extra) end
    local fname = "bincount"
    check_self(fname, self)
    if is_float(self) or self:dim() ~= 1 then
        fail(fmt("%s: expected a 1-dim tensor of integers, got %s of shape %s", fname, self:dtype(),
                 shape_of_str(self)))
    end
    if weights ~= nil then
        if not is_tensor(weights) then fail(fmt("%s: weights must be a tensor, got %s", fname, typename(weights))) end
        check_devices(fname, self, weights)
        if weights:dim() ~= 1 or weights:size(1) ~= self:size(1) then
            fail(fmt("%s: weights of shape %s must have the input's shape %s", fname, shape_of_str(weights),
                     shape_of_str(self)))
        end
    end
    minlength = minlength or 0
    if not is_int(minlength) or minlength < 0 then
        fail(fmt("%s: minlength must be an integer >= 0, got %s", fname, show(minlength)))
    end
    local len = minlength
    if self:numel() > 0 then
        local lo = self:min():item()
        if lo < 0 then fail(fmt("%s: the values must be >= 0, got %s", fname, show(lo))) end
        len = math.max(len, self:max():item() + 1)
    end
    local dt = weights ~= nil and is_float(weights) and weights:dtype() or "int64"
    local src = weights ~= nil and weights:to(dt) or tensor.ones({self:size(1)}, tensor.like(self, "int64"))
    local at = self:to("int64") + 1
    return zeros_named(fname, {len}, tensor.like(self, dt)):index_add(1, at, src)
end

-- histc([bins [, min [, max]]]): Torch's histogram: bins (default 100)
-- equal bins over [min, max] (both 0, the default: the data's smallest and
-- largest, a wait), the last bin closed; elements outside, and NaN, are
-- not counted.  A float tensor; no gradient.
function Tensor:histc(bins, lo, hi, extra)
    if extra ~= nil then extra_arg("histc", "(bins, lo, hi)", extra) end
    local fname = "histc"
    check_self(fname, self)
    if not is_float(self) then fail(fmt("%s: expected a float tensor, got %s", fname, self:dtype())) end
    bins, lo, hi = bins or 100, lo or 0, hi or 0
    if not is_int(bins) or bins < 1 then fail(fmt("%s: bins must be an integer >= 1, got %s", fname, show(bins))) end
    if type(lo) ~= "number" or type(hi) ~= "number" or lo ~= lo or hi ~= hi then
        fail(fmt("%s: min and max must be numbers, got %s and %s", fname, show(lo), show(hi)))
    end
    if lo > hi then fail(fmt("%s: max %s must be >= min %s", fname, show(hi), show(lo))) end
    local x = self:detach():reshape(-1)
    if lo == hi and x:numel() > 0 then
        local finite = x:masked_select(x:isfinite())
        if finite:numel() > 0 then lo, hi = finite:min():item(), finite:max():item() end
    end
    if lo == hi then lo, hi = lo - 1, hi + 1 end
    if lo == -huge or hi == huge then
        fail(fmt("%s: the range [%s, %s] must be finite", fname, show(lo), show(hi)))
    end
    if self:dtype() == "float32" then
        -- the edges in the input's dtype, as Torch's: 0.3 as a float32 is
        -- above the double 0.3, and was left out of histc(3, 0.1, 0.3)'s last bin
        local e = tensor.tensor({lo, hi}, "float32"):totable()
        if e[1] == e[2] then
            fail(fmt("%s: min %s and max %s are one value in float32: no range to divide", fname, show(lo), show(hi)))
        end
        lo, hi = e[1], e[2]
    end
    local xd = x:double()
    local inside = xd:ge(lo):logical_and(xd:le(hi))
    -- (x - lo) * bins / (hi - lo), in Torch's order: bins / (hi - lo) alone is inf for a tiny range
    local at = ((xd - lo) * bins / (hi - lo)):floor():clamp(0, bins - 1):to("int64") + 1
    at = at:masked_fill(inside:eq(0), 1) -- (counted as 0 below)
    return zeros_named(fname, {bins}, tensor.like(self)):index_add(1, at, inside:to(self:dtype()))
end


-- keepdim must be true, false or nil: Lua takes every other value as true,
-- so x:sum(1, 0) (keepdim = 0 meant as false) or x:sum(1, "float64") (a
-- dtype in its place, as Torch's sum(dim, dtype)) kept the dim silently.
local KEEPDIM_AT = {sum = 2, mean = 2, max = 2, min = 2, argmax = 2, argmin = 2, amax = 2, amin = 2, var = 2,
                    std = 2, logsumexp = 2, prod = 2, all = 2, any = 2, median = 2, norm = 3, kthvalue = 3}
-- sum, mean and prod take Torch's dtype third (a name or {dtype =}): the
-- input cast to it first, the result of it; the other reductions of (dim,
-- keepdim) refuse a third argument, which they ignored.
local WITH_DTYPE = {sum = true, mean = true, prod = true}
local TWO_ARGS = {max = true, min = true, argmax = true, argmin = true, amax = true, amin = true, logsumexp = true,
                  all = true, any = true, median = true}
-- each one's parameters, as a further argument's error names them (the
-- wrapper takes four: the longest, norm's, is four with its dtype above)
local REDUCE_PARAMS = {sum = "(dim, keepdim, dtype)", mean = "(dim, keepdim, dtype)", prod = "(dim, keepdim, dtype)",
                       var = "(dim, keepdim, correction)", std = "(dim, keepdim, correction)",
                       norm = "(p, dim, keepdim)", kthvalue = "(k, dim, keepdim)"}
for name, at in pairs(KEEPDIM_AT) do
    local f = Tensor[name]
    local params = REDUCE_PARAMS[name] or "(dim, keepdim)"
    Tensor[name] = function(self, a, b, c, d, extra)
        if d ~= nil then extra_arg(name, params, d) end
        if extra ~= nil then extra_arg(name, params, extra) end
        local k = c
        if at == 2 then k = b end
        if k ~= nil and type(k) ~= "boolean" then
            fail(fmt("%s: keepdim must be true or false, got %s", name, show(k)))
        end
        if c ~= nil and TWO_ARGS[name] then
            fail(fmt("%s: expected (dim, keepdim), got a third argument %s", name, show(c)))
        end
        if c ~= nil and WITH_DTYPE[name] then
            check_self(name, self)
            local dt = c
            if type(dt) == "table" and getmetatable(dt) == nil then
                dt = util.check_opts(name, dt, {dtype = true}).dtype
            end
            if dt ~= nil then
                dt = tensor.DT_NAME[tensor.parse_dtype(name, dt)]
                if name == "mean" and not dt:match("^float") then
                    fail(fmt("mean: dtype must be float32 or float64, got %s", dt))
                end
                local r = f(self:to(dt), a, b)
                if r:dtype() ~= dt then r = r:to(dt) end
                return r
            end
        end
        return f(self, a, b, c, d)
    end
end

-- cumsum(dim [, dtype]) and cumprod: Torch's dtype (a name, or {dtype =
-- name}): the input is cast to it first, and the result is of it (an
-- integer one wraps in it).  Without one, as before: integers run in int64.
for _, name in ipairs({"cumsum", "cumprod"}) do
    local f = Tensor[name]
    Tensor[name] = function(self, dim, dtype, extra)
        if extra ~= nil then extra_arg(name, "(dim, dtype)", extra) end
        if dtype == nil then return f(self, dim) end
        check_self(name, self)
        if type(dtype) == "table" and getmetatable(dtype) == nil then
            dtype = util.check_opts(name, dtype, {dtype = true}).dtype
            if dtype == nil then return f(self, dim) end
        end
        local dt = tensor.DT_NAME[tensor.parse_dtype(name, dtype)]
        local r = f(self:to(dt), dim)
        if r:dtype() ~= dt then r = r:to(dt) end
        return r
    end
end

local opt_dtype = tensor.opt_dtype

-- norm(p, dim, keepdim [, dtype]): Torch's dtype, a float one, the input
-- cast to it first; it was ignored silently.  (softmax's dtype is in
-- grad_ops.lua: a wrapper here kept a user's loop of softmax from compiling.)
do
    local norm = Tensor.norm
    Tensor.norm = function(self, p, dim, keepdim, dtype, extra)
        if extra ~= nil then extra_arg("norm", "(p, dim, keepdim, dtype)", extra) end
        if dtype == nil then return norm(self, p, dim, keepdim) end
        check_self("norm", self)
        local dt = opt_dtype("norm", dtype, true)
        if dt == nil then return norm(self, p, dim, keepdim) end
        return norm(self:to(dt), p, dim, keepdim)
    end
end

-- ---------------------------------------------------------------- cov, corrcoef

-- A weight of cov: a tensor of one dim (or 0-dim) of n elements, of the
-- kind asked (fweights integers, aweights floats), none below 0.
local function cov_weight(name, w, n, want_int)
    if not is_tensor(w) then fail(fmt("cov: %s must be a tensor, got %s", name, typename(w))) end
    if w:dim() > 1 then fail(fmt("cov: %s must have one dim or none, got %d dims", name, w:dim())) end
    if w:numel() ~= n then
        fail(fmt("cov: %s must have one weight per observation (%d, the input's columns), got %d", name, n, w:numel()))
    end
    if want_int and is_float(w) then fail(fmt("cov: fweights must be an integer tensor, got %s", w:dtype())) end
    if not want_int and not is_float(w) then
        fail(fmt("cov: aweights must be a float tensor (float32 or float64), got %s", w:dtype()))
    end
    if n > 0 and w:detach():lt(0):any() then fail(fmt("cov: %s must not be negative", name)) end
    return w:reshape(-1)
end

-- cov([{correction = 1, fweights =, aweights =}]): Torch's: the covariance
-- matrix of the rows (variables) over the columns (observations) of a
-- 2-dim tensor (one dim: a single variable, a 0-dim result); fweights:
-- integer counts of each observation, aweights: float importances. Made of
-- tensor ops, so gradients flow (to the input and aweights).
function Tensor:cov(opts, extra)
    if extra ~= nil then extra_arg("cov", "(opts)", extra) end
    check_self("cov", self)
    opts = util.check_opts("cov", opts, {correction = true, fweights = true, aweights = true})
    local correction = opts.correction
    if correction == nil then correction = 1 end
    if type(correction) == "boolean" then correction = correction and 1 or 0 end
    if not is_int(correction) or correction < 0 then
        fail("cov: correction must be an integer >= 0, got " .. show(correction))
    end
    if self:dim() > 2 then fail(fmt("cov: expected a tensor of 2 dims or fewer, got %d dims", self:dim())) end
    local x = self:dim() < 2 and self:reshape(1, -1) or self
    if not is_float(x) then x = x:to(tensor.get_default_dtype()) end
    local n = x:size(2)
    local fw = opts.fweights ~= nil and cov_weight("fweights", opts.fweights, n, true) or nil
    local aw = opts.aweights ~= nil and cov_weight("aweights", opts.aweights, n, false) or nil
    if fw then check_devices("cov", x, fw) end
    if aw then check_devices("cov", x, aw) end
    local w
    if fw then w = fw:to(x:dtype()) end
    if aw then
        aw = aw:to(x:dtype())
        w = w and w * aw or aw
    end
    local avg, norm, w_sum
    if w then
        w_sum = w:sum()
        avg = (x * w):sum(2, true) / w_sum
        if correction == 0 then
            norm = w_sum
        elseif not aw then
            norm = w_sum - correction
        else
            norm = w_sum - (w * aw):sum() * correction / w_sum
        end
        norm = norm:clamp(0) -- (0: inf or NaN, as Torch's, where there are too few observations)
    else
        avg = x:mean(2, true)
        norm = math.max(n - correction, 0)
    end
    local xc = x - avg
    local c = xc:matmul((w and xc * w or xc):t()) / norm
    if c:size(1) == 1 then c = c:reshape({}) end
    return c
end

-- corrcoef(): Torch's: the Pearson correlation coefficients of the rows
-- (variables) of a 2-dim tensor, cov normalised by the standard
-- deviations, clamped to [-1, 1]; a single variable gives 1 (NaN when it
-- is constant).
function Tensor:corrcoef(extra)
    if extra ~= nil then extra_arg("corrcoef", "()", extra) end -- (cov takes the weights)
    check_self("corrcoef", self)
    if self:dim() > 2 then fail(fmt("corrcoef: expected a tensor of 2 dims or fewer, got %d dims", self:dim())) end
    local c = self:cov()
    if c:dim() == 0 then return c / c end
    local sd = c:diagonal():sqrt()
    c = c / sd:reshape(-1, 1) / sd:reshape(1, -1)
    return c:clamp(-1, 1)
end

-- ---------------------------------------------------------------- small conveniences a Torch user reaches for

-- Calls f(...), its error said under fname instead of under inner (the op
-- it is made of, which the user did not call).
local function as_op_result(fname, inner, ok, ...)
    if not ok then
        local msg = tostring((...)):gsub(inner .. ": ", fname .. ": ", 1)
        -- an in-place op's grad-mode refusal suggests its own out-of-place
        -- form (addcmul_: addcmul, not the add_ inside)
        local base = fname:match("^(.-)_$")
        if base and Tensor[base] then
            msg = msg:gsub("%(use the out%-of%-place [%w_]+,", "(use the out-of-place " .. base .. ",", 1)
        end
        error(msg, 0)
    end
    return ...
end
local function as_op(fname, inner, f, ...)
    -- (no table per call: a loop of clip, view_as... stays compiled)
    return as_op_result(fname, inner, pcall(f, ...))
end

-- round([decimals]) and round_: Torch's decimals (a number or {decimals =
-- n}; it was ignored, x:round(2) rounding to integers): halves to even at
-- that decimal place, computed as Torch's in the tensor's dtype: x * 10^d
-- rounded, then divided by 10^d (d < 0: x / 10^-d rounded, then
-- multiplied).  An integer tensor has no decimals to round (d > 0 leaves
-- it as it is); d < 0 on one is refused, as Torch has no kernel for it.
for _, name in ipairs({"round", "round_"}) do
    local f = Tensor[name]
    Tensor[name] = function(self, decimals, extra)
        if extra ~= nil then extra_arg(name, "(decimals)", extra) end
        if decimals == nil then return f(self) end
        check_self(name, self)
        if type(decimals) == "table" and getmetatable(decimals) == nil then
            decimals = util.check_opts(name, decimals, {decimals = true}).decimals
            if decimals == nil then return f(self) end
        end
        if not is_int(decimals) then
            fail(fmt("%s: decimals must be an integer, got %s", name,
                     type(decimals) == "number" and show(decimals) or typename(decimals)))
        end
        if decimals == 0 then return f(self) end
        if not is_float(self) then
            if decimals > 0 then return f(self) end
            fail(fmt("%s: decimals < 0 needs a float tensor, got %s (decimals %d)", name, self:dtype(), decimals))
        end
        local p = 10 ^ math.abs(decimals)
        if name == "round" then
            if decimals > 0 then return (self * p):round() / p end
            return (self / p):round() * p
        end
        if decimals > 0 then return self:mul_(p):round_():div_(p) end
        return self:div_(p):round_():mul_(p)
    end
end

-- clip(lo, hi), clip_: clamp's other name.
function Tensor:clip(lo, hi, extra)
    if extra ~= nil then extra_arg("clip", "(min, max)", extra) end
    return as_op("clip", "clamp", Tensor.clamp, self, lo, hi)
end
function Tensor:clip_(lo, hi, extra)
    if extra ~= nil then extra_arg("clip_", "(min, max)", extra) end
    return as_op("clip_", "clamp_", Tensor.clamp_, self, lo, hi)
end
-- clamp_min(lo), clamp_max(hi) and their in-place forms: clamp with one bound, as Torch's.
for _, name in ipairs({"clamp_min", "clamp_max", "clamp_min_", "clamp_max_"}) do
    local inplace = name:sub(-1) == "_"
    local inner = inplace and "clamp_" or "clamp"
    local low = name:sub(7, 9) == "min"
    Tensor[name] = function(self, bound, extra)
        if extra ~= nil then extra_arg(name, "(bound)", extra) end
        check_self(name, self)
        if bound == nil then
            fail(fmt("%s: expected a number or a tensor as the %s bound, got nil", name, low and "lower" or "upper"))
        end
        if low then return as_op(name, inner, Tensor[inner], self, bound, nil) end
        return as_op(name, inner, Tensor[inner], self, nil, bound)
    end
end

-- swapaxes(d1, d2), swapdims(d1, d2): transpose's other names; movedim(src, dst): dim src
-- (or a list of dims) moved to place dst (or the list's places), the
-- others kept in order, as Torch's (a view).
function Tensor:swapaxes(d1, d2, extra)
    if extra ~= nil then extra_arg("swapaxes", "(dim0, dim1)", extra) end
    return as_op("swapaxes", "transpose", Tensor.transpose, self, d1, d2)
end
function Tensor:swapdims(d1, d2, extra)
    if extra ~= nil then extra_arg("swapdims", "(dim0, dim1)", extra) end
    return as_op("swapdims", "transpose", Tensor.transpose, self, d1, d2)
end
function Tensor:movedim(src, dst, extra)
    if extra ~= nil then extra_arg("movedim", "(src, dst)", extra) end
    local fname = "movedim"
    check_self(fname, self)
    if type(src) == "number" then src = {src} end
    if type(dst) == "number" then dst = {dst} end
    if type(src) ~= "table" or is_tensor(src) or type(dst) ~= "table" or is_tensor(dst) then
        fail(fmt("%s: expected dims (numbers or lists of them), got %s and %s", fname, typename(src), typename(dst)))
    end
    util.check_list(fname, "the source dims", src, true)
    util.check_list(fname, "the destination dims", dst, true)
    if #src ~= #dst then
        fail(fmt("%s: %d source dims but %d destinations", fname, #src, #dst))
    end
    local n = self:dim()
    local perm, from_taken = {}, {}
    for i = 1, #src do
        local a = tensor.norm_dim(fname, self, src[i]) + 1
        local b = tensor.norm_dim(fname, self, dst[i]) + 1
        if from_taken[a] then fail(fmt("%s: source dim %s appears twice", fname, show(src[i]))) end
        if perm[b] then fail(fmt("%s: destination dim %s appears twice", fname, show(dst[i]))) end
        perm[b], from_taken[a] = a, true
    end
    local rest = 1
    for place = 1, n do
        if not perm[place] then
            while from_taken[rest] do rest = rest + 1 end
            perm[place], rest = rest, rest + 1
        end
    end
    if n == 0 then return self end
    return self:permute(perm)
end
function Tensor:moveaxis(src, dst, extra)
    if extra ~= nil then extra_arg("moveaxis", "(src, dst)", extra) end
    return as_op("moveaxis", "movedim", Tensor.movedim, self, src, dst)
end

-- fliplr / flipud: flip(2) / flip(1); rot90([k [, dims]]): k quarter turns
-- from dims[1] towards dims[2] (default {1, 2}), as Torch's.
function Tensor:fliplr(extra)
    if extra ~= nil then extra_arg("fliplr", "()", extra) end
    check_self("fliplr", self)
    if self:dim() < 2 then fail("fliplr: expected at least 2 dims, got shape " .. shape_of_str(self)) end
    return self:flip(2)
end
function Tensor:flipud(extra)
    if extra ~= nil then extra_arg("flipud", "()", extra) end
    check_self("flipud", self)
    if self:dim() < 1 then fail("flipud: expected at least 1 dim, got a 0-dim tensor") end
    return self:flip(1)
end
function Tensor:rot90(k, dims, extra)
    if extra ~= nil then extra_arg("rot90", "(k, dims)", extra) end
    local fname = "rot90"
    check_self(fname, self)
    k = k or 1
    if not is_int(k) then fail(fmt("%s: k must be an integer, got %s", fname, show(k))) end
    dims = dims or {1, 2}
    if type(dims) ~= "table" or is_tensor(dims) then fail(fmt("%s: dims must be a list of two dims, got %s", fname, typename(dims))) end
    util.check_list(fname, "the dims", dims, true)
    if #dims ~= 2 then fail(fmt("%s: dims must hold two dims, got %d", fname, #dims)) end
    local a, b = tensor.norm_dim(fname, self, dims[1]) + 1, tensor.norm_dim(fname, self, dims[2]) + 1
    if a == b then fail(fmt("%s: dims %s and %s are the same dim", fname, show(dims[1]), show(dims[2]))) end
    k = k % 4
    if k == 1 then return self:flip(b):transpose(a, b) end
    if k == 2 then return self:flip({a, b}) end
    if k == 3 then return self:flip(a):transpose(a, b) end
    return self:clone()
end

-- new_zeros / new_ones / new_empty(shape [, opts]), new_full(shape, v [,
-- opts]), new_tensor(data [, opts]): made like self (its dtype, device and
-- engine) unless opts says otherwise, as Torch's.
local function like_self(fname, self, opts)
    check_self(fname, self)
    local base = tensor.like(self)
    if opts == nil then return base end
    if type(opts) == "string" then -- a dtype, or a device
        if pcall(tensor.parse_dtype, fname, opts) then base.dtype = opts else base.device = opts end
        return base
    end
    if type(opts) == "table" and getmetatable(opts) == nil then
        opts = util.check_opts(fname, opts, {dtype = true, device = true, engine = true})
        for k, v in pairs(opts) do base[k] = v end
        return base
    end
    base.device = opts -- a device object (tensor.zeros checks it)
    return base
end
-- new_zeros(2, 3 [, opts]): the sizes as arguments too, as Torch's (and ordo.zeros)
local function sizes_as_args(shape, ...)
    if type(shape) ~= "number" then
        -- after the options: new_zeros({2}, nil, 5) dropped the 5 unseen
        for i = 2, select("#", ...) do
            local v = select(i, ...)
            if v ~= nil then fail(fmt("expected (shape [, opts]), got a further argument %s", show(v))) end
        end
        return shape, (...)
    end
    local sizes, n = {shape}, select("#", ...)
    for i = 1, n do
        local v = select(i, ...)
        if type(v) ~= "number" then
            if i < n then fail(fmt("expected sizes, then the options last, got %s after them", typename(select(i + 1, ...)))) end
            return sizes, v
        end
        sizes[#sizes + 1] = v
    end
    return sizes, nil
end
for _, name in ipairs({"zeros", "ones", "empty"}) do
    Tensor["new_" .. name] = function(self, ...)
        local fname = "new_" .. name
        local ok, shape, opts = pcall(sizes_as_args, ...)
        if not ok then fail(fname .. ": " .. tostring(shape):gsub("^.-: expected", "expected")) end
        local o = like_self(fname, self, opts)
        if type(shape) ~= "table" or is_tensor(shape) then
            fail(fmt("%s: expected the shape as a table, got %s", fname, typename(shape)))
        end
        return as_op(fname, name, tensor[name], shape, o)
    end
end
function Tensor:new_full(shape, value, opts, extra)
    if extra ~= nil then extra_arg("new_full", "(shape, value, opts)", extra) end
    local o = like_self("new_full", self, opts)
    if type(shape) ~= "table" or is_tensor(shape) then
        fail("new_full: expected the shape as a table, got " .. typename(shape))
    end
    return as_op("new_full", "full", tensor.full, shape, value, o)
end
function Tensor:new_tensor(data, opts, extra)
    if extra ~= nil then extra_arg("new_tensor", "(data, opts)", extra) end
    local o = like_self("new_tensor", self, opts)
    return as_op("new_tensor", "tensor", tensor.tensor, data, o)
end

-- view_as(u), reshape_as(u): u's shape; broadcast_to(shape): expand's other
-- name; ordo.broadcast_tensors(t1, t2, ...): each expanded to the shape
-- they broadcast to (views, as separate values).
function Tensor:view_as(u, extra)
    if extra ~= nil then extra_arg("view_as", "(other)", extra) end
    check_self("view_as", self)
    if not is_tensor(u) then fail("view_as: expected a tensor, got " .. typename(u)) end
    return as_op("view_as", "view", Tensor.view, self, u:shape())
end
function Tensor:reshape_as(u, extra)
    if extra ~= nil then extra_arg("reshape_as", "(other)", extra) end
    check_self("reshape_as", self)
    if not is_tensor(u) then fail("reshape_as: expected a tensor, got " .. typename(u)) end
    return as_op("reshape_as", "reshape", Tensor.reshape, self, u:shape())
end
function Tensor:broadcast_to(shape, extra)
    if extra ~= nil then extra_arg("broadcast_to", "(shape)", extra) end
    check_self("broadcast_to", self)
    if type(shape) ~= "table" or is_tensor(shape) then
        fail("broadcast_to: expected the shape as a table, got " .. typename(shape))
    end
    return as_op("broadcast_to", "expand", Tensor.expand, self, shape)
end
function M.broadcast_tensors(...)
    local ts = {...}
    check_no_hole("broadcast_tensors", "tensor", ts, select("#", ...))
    local shapes = {}
    for i, t in ipairs(ts) do
        if not is_tensor(t) then fail(fmt("broadcast_tensors: argument %d must be a tensor, got %s", i, typename(t))) end
        shapes[i] = t:shape()
    end
    local shape = tensor.broadcast_shape("broadcast_tensors", shapes)
    local out = {}
    for i, t in ipairs(ts) do out[i] = t:expand(shape) end
    return unpack(out, 1, #ts)
end

-- unbind([dim]): the slices along dim (default 1) as a Lua list of views.
function Tensor:unbind(dim, extra)
    if extra ~= nil then extra_arg("unbind", "(dim)", extra) end
    check_self("unbind", self)
    local d = tensor.norm_dim("unbind", self, dim or 1) + 1
    local out = {}
    for i = 1, self:size(d) do out[i] = self:select(d, i) end
    return out
end

-- frac(): x - trunc(x), the sign of x; deg2rad / rad2deg.
function Tensor:frac(extra)
    if extra ~= nil then extra_arg("frac", "()", extra) end
    check_self("frac", self)
    if not is_float(self) then fail("frac: expected a float tensor, got " .. self:dtype()) end
    return self - self:trunc()
end
function Tensor:deg2rad(extra)
    if extra ~= nil then extra_arg("deg2rad", "()", extra) end
    check_self("deg2rad", self)
    return (is_float(self) and self or to_default_float(self)) * (math.pi / 180)
end
function Tensor:rad2deg(extra)
    if extra ~= nil then extra_arg("rad2deg", "()", extra) end
    check_self("rad2deg", self)
    return (is_float(self) and self or to_default_float(self)) * (180 / math.pi)
end

-- count_nonzero([dim]): int64; nansum / nanmean([dim [, keepdim]]): NaN
-- left out (nanmean of no numbers is NaN); aminmax([dim [, keepdim]]):
-- amin, amax.
function Tensor:count_nonzero(dim, extra)
    if extra ~= nil then extra_arg("count_nonzero", "(dim)", extra) end
    check_self("count_nonzero", self)
    local m = self:ne(0)
    if dim == nil then return m:sum() end
    return as_op("count_nonzero", "sum", Tensor.sum, m, dim)
end
function Tensor:nansum(dim, keepdim)
    check_self("nansum", self)
    local x = is_float(self) and self:masked_fill(self:isnan(), 0) or self
    if dim == nil then
        if keepdim ~= nil then return as_op("nansum", "sum", Tensor.sum, x, nil, keepdim) end
        return x:sum()
    end
    return as_op("nansum", "sum", Tensor.sum, x, dim, keepdim)
end
function Tensor:nanmean(dim, keepdim)
    check_self("nanmean", self)
    if not is_float(self) then fail("nanmean: expected a float tensor, got " .. self:dtype()) end
    local ok = self:isnan():logical_not():to(self:dtype())
    local s = as_op("nanmean", "nansum", Tensor.nansum, self, dim, keepdim)
    local n = dim == nil and ok:sum() or ok:sum(dim, keepdim)
    return s / n
end
function Tensor:aminmax(dim, keepdim, extra)
    if extra ~= nil then extra_arg("aminmax", "(dim, keepdim)", extra) end
    check_self("aminmax", self)
    return as_op("aminmax", "amin", Tensor.amin, self, dim, keepdim), self:amax(dim, keepdim)
end

-- nansum(dim, keepdim [, dtype]) and nanmean: Torch's dtype (nanmean's a
-- float one), the input cast to it first; it was ignored silently.
for _, name in ipairs({"nansum", "nanmean"}) do
    local f = Tensor[name]
    Tensor[name] = function(self, dim, keepdim, dtype, extra)
        if extra ~= nil then extra_arg(name, "(dim, keepdim, dtype)", extra) end
        if dtype == nil then return f(self, dim, keepdim) end
        check_self(name, self)
        local dt = opt_dtype(name, dtype, name == "nanmean")
        if dt == nil then return f(self, dim, keepdim) end
        local r = f(self:to(dt), dim, keepdim)
        if r:dtype() ~= dt then r = r:to(dt) end
        return r
    end
end

-- var_mean / std_mean(dim, keepdim, correction): both, as Torch's.
function Tensor:var_mean(dim, keepdim, correction, extra)
    if extra ~= nil then extra_arg("var_mean", "(dim, keepdim, correction)", extra) end
    local v = as_op("var_mean", "var", Tensor.var, self, dim, keepdim, correction)
    return v, dim == nil and (keepdim and self:mean(nil, true) or self:mean()) or self:mean(dim, keepdim)
end
function Tensor:std_mean(dim, keepdim, correction, extra)
    if extra ~= nil then extra_arg("std_mean", "(dim, keepdim, correction)", extra) end
    local v = as_op("std_mean", "std", Tensor.std, self, dim, keepdim, correction)
    return v, dim == nil and (keepdim and self:mean(nil, true) or self:mean()) or self:mean(dim, keepdim)
end

-- Two operands (tensors or numbers, at least one tensor), as binary ops take them.
local function two(fname, a, b)
    if not is_tensor(a) and not is_tensor(b) then
        fail(fmt("%s: expected a tensor and a tensor or a number, got %s and %s", fname, typename(a), typename(b)))
    end
    if not is_tensor(a) and type(a) ~= "number" then fail(fmt("%s: expected a tensor or a number, got %s", fname, typename(a))) end
    if not is_tensor(b) and type(b) ~= "number" then fail(fmt("%s: expected a tensor or a number, got %s", fname, typename(b))) end
    check_devices(fname, is_tensor(a) and a or b, is_tensor(a) and b or a)
    if is_tensor(a) and is_tensor(b) then tensor.broadcast_shape(fname, {a:shape(), b:shape()}) end
    -- integers compute in float32, as the math functions
    if is_tensor(a) and not is_float(a) and not (is_tensor(b) and is_float(b)) then a = to_default_float(a) end
    if is_tensor(b) and not is_float(b) and not (is_tensor(a) and is_float(a)) then b = to_default_float(b) end
    return a, b
end

-- atan2's gradient, recorded here: a closure in atan2 itself would keep
-- LuaJIT from compiling a loop that calls it
local function rec_atan2(autograd, fname, r, yt, xt, yd, xd)
    return autograd.record(fname, r, {yt, xt, n = 2}, function(g)
        local d = xd * xd + yd * yd
        d = tensor.where(d:eq(0), 1, d) -- the origin: 0 / 1
        return g * xd / d, -(g * yd / d)
    end, {yt, xt})
end

-- atan2(y, x) (self is y): the angle of (x, y), in (-pi, pi], as C's; its
-- gradient (x, -y) / (x^2 + y^2), 0 at the origin as Torch's.
function M.atan2(y, x, extra)
    if extra ~= nil then extra_arg("atan2", "(other)", extra) end
    local fname = "atan2"
    y, x = two(fname, y, x)
    local yt = is_tensor(y) and y or tensor.full_like(x, y)
    local xt = is_tensor(x) and x or tensor.full_like(y, x)
    local dt = tensor.result_type(yt, xt)
    yt, xt = yt:to(dt), xt:to(dt)
    local yd, xd = yt:detach(), xt:detach()
    -- atan(y / x) corrected by pi for x < 0; x = 0: +-pi/2 by y's sign (0 at y = 0)
    local base = (yd / xd):atan()
    local pi = math.pi
    local signy = tensor.where(yd:lt(0), -1, 1):to(dt) -- (pi times it in dt, not float32)
    -- y of -0.0 counts as negative, as C's atan2 (1 / -0 is -inf)
    signy = tensor.where(yd:eq(0):logical_and((1 / yd):lt(0)), -1, signy)
    local r = tensor.where(xd:lt(0), base + signy * pi, base)
    r = tensor.where(xd:eq(0), tensor.where(yd:eq(0), tensor.where((1 / xd):lt(0), signy * pi, yd * 0), signy * (pi / 2)), r)
    -- both infinite: +-pi/4 or +-3pi/4, as C's (inf / inf is NaN)
    local both = xd:abs():eq(huge):logical_and(yd:abs():eq(huge))
    r = tensor.where(both, tensor.where(xd:gt(0), signy * (pi / 4), signy * (3 * pi / 4)), r)
    r = tensor.where(xd:ne(xd):logical_or(yd:ne(yd)), 0 / 0, r):to(dt)
    local autograd = package.loaded["ordo.autograd"]
    if not (autograd and autograd.needs(yt, xt)) then return r end
    return rec_atan2(autograd, fname, r, yt, xt, yd, xd)
end
Tensor.atan2 = M.atan2
function Tensor:arctan2(other, extra)
    if extra ~= nil then extra_arg("arctan2", "(other)", extra) end
    return as_op("arctan2", "atan2", M.atan2, self, other)
end

-- hypot(a, b): sqrt(a^2 + b^2) without overflow or underflow on the way.
function M.hypot(a, b, extra)
    if extra ~= nil then extra_arg("hypot", "(other)", extra) end
    a, b = two("hypot", a, b)
    if not is_tensor(a) then a = tensor.full_like(b, a) end
    if not is_tensor(b) then b = tensor.full_like(a, b) end
    local x, y = a:abs(), b:abs()
    local m = x:maximum(y):detach()
    local safe = tensor.where(m:eq(0):logical_or(m:eq(huge)):logical_or(m:ne(m)), 1, m)
    local r = ((x / safe):square() + (y / safe):square()):sqrt() * safe
    return tensor.where(x:eq(huge):logical_or(y:eq(huge)), huge, r) -- inf beside NaN is inf, as C's
end
Tensor.hypot = M.hypot

-- logaddexp(a, b): log(exp(a) + exp(b)) without overflow (equal infinities
-- give themselves).
function M.logaddexp(a, b, extra)
    if extra ~= nil then extra_arg("logaddexp", "(other)", extra) end
    a, b = two("logaddexp", a, b)
    local m = is_tensor(a) and (is_tensor(b) and a:maximum(b) or a:clamp(b)) or b:clamp(a)
    local md = m:detach()
    local shift = tensor.where(md:abs():eq(huge), 0, md)
    local r = ((a - shift):exp() + (b - shift):exp()):log() + shift
    return r
end
Tensor.logaddexp = M.logaddexp

-- xlogy(x, y): x * log(y), 0 where x is 0 (unless y is NaN), as Torch's.
function M.xlogy(x, y, extra)
    if extra ~= nil then extra_arg("xlogy", "(y)", extra) end
    x, y = two("xlogy", x, y)
    local xt = is_tensor(x) and x or tensor.full_like(y, x)
    local yt = is_tensor(y) and y or tensor.full_like(xt, y)
    local zero = xt:detach():eq(0):logical_and(yt:detach():eq(yt:detach()))
    -- (where, not y:masked_fill: the mask has the broadcast shape, which y
    -- smaller than x could not take)
    local safe_y = tensor.where(zero, 1, yt)
    return (xt * safe_y:log()):masked_fill(zero, 0)
end
Tensor.xlogy = M.xlogy

-- logit([eps]): log(p / (1 - p)), p clamped to [eps, 1 - eps] when eps is given.
-- Its gradient is Torch's, g / (p (1 - p)): infinite at 0 and 1 (the chain
-- through the division gave NaN there), 0 outside [eps, 1 - eps] with an
-- eps, NaN outside [0, 1] without.  Recorded here: a closure in logit
-- would keep LuaJIT from compiling a loop that calls it.
local function rec_logit(autograd, r, x, pd, eps)
    return autograd.record("logit", r, {x, n = 1}, function(g)
        local d = g / (pd * (1 - pd))
        if eps then return tensor.where(pd:lt(eps):logical_or(pd:gt(1 - eps)), 0, d) end
        return tensor.where(pd:lt(0):logical_or(pd:gt(1)), 0 / 0, d)
    end, {x})
end
function Tensor:logit(eps, extra)
    if extra ~= nil then extra_arg("logit", "(eps)", extra) end
    check_self("logit", self)
    if eps ~= nil and (type(eps) ~= "number" or not (eps >= 0 and eps <= 0.5)) then
        fail("logit: eps must be a number in [0, 0.5], got " .. show(eps))
    end
    local x = is_float(self) and self or to_default_float(self)
    local pd = x:detach()
    local p = eps and pd:clamp(eps, 1 - eps) or pd
    local r = (p / (1 - p)):log()
    local autograd = package.loaded["ordo.autograd"]
    if not (autograd and autograd.needs(x)) then return r end
    return rec_logit(autograd, r, x, pd, eps)
end

-- dist(u [, p]): the p-norm of self - u; inner(u): the sum over the last
-- dims of products (vectors: dot; else self (.., n) and u (.., n) give
-- self's leading dims then u's).
function Tensor:dist(u, p, extra)
    if extra ~= nil then extra_arg("dist", "(other, p)", extra) end
    check_self("dist", self)
    if not is_tensor(u) then fail("dist: expected a tensor, got " .. typename(u)) end
    check_devices("dist", self, u)
    tensor.broadcast_shape("dist", {self:shape(), u:shape()})
    return as_op("dist", "norm", Tensor.norm, self - u, p or 2)
end
function Tensor:inner(u, extra)
    if extra ~= nil then extra_arg("inner", "(other)", extra) end
    check_self("inner", self)
    if not is_tensor(u) then fail("inner: expected a tensor, got " .. typename(u)) end
    check_devices("inner", self, u)
    if self:dim() == 0 or u:dim() == 0 then return self * u end
    if self:size(-1) ~= u:size(-1) then
        fail(fmt("inner: the last dims differ: shapes %s and %s", shape_of_str(self), shape_of_str(u)))
    end
    if self:dim() + u:dim() - 2 > 8 then
        fail(fmt("inner: the result would have more than 8 dims (shapes %s and %s)", shape_of_str(self), shape_of_str(u)))
    end
    local n = self:size(-1)
    local a, b = self:reshape(-1, n), u:reshape(-1, n)
    local shape = {}
    for i = 1, self:dim() - 1 do shape[#shape + 1] = self:size(i) end
    for i = 1, u:dim() - 1 do shape[#shape + 1] = u:size(i) end
    return a:matmul(b:t()):reshape(shape)
end

-- quantile(q [, dim [, keepdim]]): Torch's linear interpolation between the
-- sorted values at q (n - 1) (q in [0, 1]: a number, or a list or 1-dim
-- tensor of them, whose results stack along a new first dim); over all
-- elements without a dim; a line holding NaN gives NaN.  Float tensors.
-- interpolation (Torch's: a name, or {interpolation = name}; it was ignored,
-- every mode gave "linear"): between the elements at floor and ceil of the
-- rank q (n - 1), "linear" (default) the value at the rank, "lower" and
-- "higher" one of the two, "nearest" the one at the rank rounded (halves
-- to even), "midpoint" their mean.
local QUANTILE_MODES = {linear = true, lower = true, higher = true, nearest = true, midpoint = true}
function Tensor:quantile(q, dim, keepdim, interpolation, extra)
    if extra ~= nil then extra_arg("quantile", "(q, dim, keepdim, interpolation)", extra) end
    local fname = "quantile"
    check_self(fname, self)
    if not is_float(self) then fail(fmt("%s: expected a float tensor, got %s", fname, self:dtype())) end
    -- Torch's keywords as a trailing options table: x:quantile(q, {dim =, keepdim =, interpolation =})
    -- or x:quantile(q, dim, {keepdim =, interpolation =})
    if type(dim) == "table" and getmetatable(dim) == nil and keepdim == nil and interpolation == nil then
        local o = util.check_opts(fname, dim, {dim = true, keepdim = true, interpolation = true})
        dim, keepdim, interpolation = o.dim, o.keepdim, o.interpolation
    elseif type(keepdim) == "table" and getmetatable(keepdim) == nil and interpolation == nil then
        local o = util.check_opts(fname, keepdim, {keepdim = true, interpolation = true})
        keepdim, interpolation = o.keepdim, o.interpolation
    end
    if keepdim ~= nil and type(keepdim) ~= "boolean" then
        fail(fmt("%s: keepdim must be true or false, got %s", fname, show(keepdim)))
    end
    if type(interpolation) == "table" and getmetatable(interpolation) == nil then
        interpolation = util.check_opts(fname, interpolation, {interpolation = true}).interpolation
    end
    local mode = interpolation or "linear"
    if not QUANTILE_MODES[mode] then
        fail(fmt("%s: interpolation must be 'linear', 'lower', 'higher', 'nearest' or 'midpoint', got %s", fname,
                 type(mode) == "string" and ("'" .. mode .. "'") or typename(mode)))
    end
    local qs, scalar
    if type(q) == "number" then
        qs, scalar = {q}, true
    elseif is_tensor(q) then
        if q:dim() > 1 then fail(fmt("%s: q must be a number or a 1-dim list of them, got shape %s", fname, shape_of_str(q))) end
        qs = q:reshape(-1):totable()
    elseif type(q) == "table" then
        util.check_list(fname, "q", q, true)
        qs = q
    else
        fail(fmt("%s: q must be a number or a 1-dim list of them, got %s", fname, typename(q)))
    end
    for i, v in ipairs(qs) do
        if type(v) ~= "number" or not (v >= 0 and v <= 1) then
            fail(fmt("%s: q must be in [0, 1], got %s", fname, show(v)))
        end
    end
    local x, d = self, nil
    if dim == nil then x, d = self:reshape(-1), 1 else d = tensor.norm_dim(fname, self, dim) + 1 end
    local n = x:size(d)
    if n == 0 then fail(fmt("%s: cannot take a quantile of no elements (shape %s)", fname, shape_of_str(self))) end
    local sorted = x:sort(d)
    local has_nan = x:isnan():any(d, true)
    local outs = {}
    for i, v in ipairs(qs) do
        local pos = v * (n - 1)
        local lo = math.floor(pos)
        local hi = math.min(lo + 1, n - 1)
        local w = pos - lo
        if mode == "lower" then w = 0
        elseif mode == "higher" then
            lo, w = math.ceil(pos), 0
        elseif mode == "nearest" then
            local r = math.floor(pos + 0.5)
            if r - pos == 0.5 and r % 2 == 1 then r = r - 1 end -- (halves to even, as Torch's round)
            lo, w = r, 0
        elseif mode == "midpoint" and w > 0 then w = 0.5
        end
        local a = sorted:narrow(d, lo + 1, 1)
        local r = w == 0 and a or a:lerp(sorted:narrow(d, hi + 1, 1), w)
        r = r:masked_fill(has_nan, 0 / 0)
        if dim == nil then
            local ones = {}
            if keepdim then for j = 1, self:dim() do ones[j] = 1 end end
            r = r:reshape(ones)
        elseif not keepdim then
            r = r:squeeze(d)
        end
        outs[i] = r
    end
    if scalar then return outs[1] end
    if #outs == 0 then fail(fname .. ": q is an empty list") end
    return tensor.stack(outs, 1)
end

-- tril_indices(rows, cols [, offset [, opts]]) / triu_indices: the (row,
-- column) positions, from 1, of the elements on or below (above) the
-- diagonal offset, as a 2 x N int64 tensor in row-major order, as Torch's.
local function band_indices(fname, rows, cols, offset, opts, lower)
    if not is_int(rows) or not is_int(cols) or rows < 0 or cols < 0 then
        fail(fmt("%s: rows and cols must be integers >= 0, got %s and %s", fname, show(rows), show(cols)))
    end
    if type(offset) ~= "number" and offset ~= nil then offset, opts = nil, offset end
    offset = offset or 0
    if not is_int(offset) then fail(fmt("%s: the offset must be an integer, got %s", fname, show(offset))) end
    if rows * cols > 2 ^ 31 then fail(fmt("%s: %d x %d is too large", fname, rows, cols)) end
    local o = proto_of(fname, opts)
    local asked = (type(opts) == "string" and pcall(tensor.parse_dtype, fname, opts)) or
        (type(opts) == "table" and getmetatable(opts) == nil and opts.dtype ~= nil)
    local dt = asked and o:dtype() or "int64" -- (a device alone keeps int64)
    if dt ~= "int64" and dt ~= "int32" then fail(fmt("%s: the dtype must be int64 or int32, got %s", fname, dt)) end
    local like = tensor.like(o, dt)
    local r = tensor.arange(1, rows + 1, like):view(rows, 1)
    local c = tensor.arange(1, cols + 1, like):view(1, cols)
    local keep = lower and (c - r):le(offset) or (c - r):ge(offset)
    local rr, cc = r:expand(rows, cols):masked_select(keep), c:expand(rows, cols):masked_select(keep)
    return tensor.stack({rr, cc}, 1)
end
function M.tril_indices(rows, cols, offset, opts, extra)
    if extra ~= nil then extra_arg("tril_indices", "(rows, cols, offset, opts)", extra) end
    return band_indices("tril_indices", rows, cols, offset, opts, true)
end
function M.triu_indices(rows, cols, offset, opts, extra)
    if extra ~= nil then extra_arg("triu_indices", "(rows, cols, offset, opts)", extra) end
    return band_indices("triu_indices", rows, cols, offset, opts, false)
end

-- An index argument: an int64 or int32 tensor of at most 1 dim, or a Lua
-- list of integers (made an int64 tensor like t); 1-dim.
local function index_arg(fname, t, index, what)
    if type(index) == "table" and not is_tensor(index) then
        util.check_list(fname, what, index, true)
        for i, v in ipairs(index) do
            if not is_int(v) then fail(fmt("%s: entry %d of %s must be an integer, got %s", fname, i, what, show(v))) end
        end
        return tensor.tensor(#index == 0 and {} or index, tensor.like(t, "int64")):reshape(-1)
    end
    if not is_tensor(index) or is_float(index) or index:dtype() == "uint8" then
        fail(fmt("%s: %s must be an int64 or int32 tensor (or a list of integers), got %s", fname, what,
                 is_tensor(index) and index:dtype() or typename(index)))
    end
    if index:dim() > 1 then fail(fmt("%s: %s must have at most 1 dim, got shape %s", fname, what, shape_of_str(index))) end
    check_devices(fname, t, index)
    return index:reshape(-1)
end

-- index_fill(dim, index, value) / index_fill_: the slices at index (from
-- 1) along dim set to value (a number or one-element tensor), as Torch's.
local function index_fill(fname, self, dim, index, value, inplace)
    check_self(fname, self)
    local d = tensor.norm_dim(fname, self, dim) + 1
    local idx = index_arg(fname, self, index, "the index")
    local n = self:size(d)
    local shape, oshape = {}, {}
    for i = 1, self:dim() do shape[i], oshape[i] = 1, 1 end
    shape[d], oshape[d] = n, idx:numel()
    -- the hits along dim d itself, so that an index out of range, found
    -- when the index_add runs, is named with the caller's op and dim
    local hits = tensor.zeros(shape, tensor.like(self, "int64"))
    if idx:numel() > 0 then
        hits = as_op(fname, "index_add", Tensor.index_add, hits, d, idx, tensor.ones(oshape, tensor.like(self, "int64")),
                     fname)
    end
    local mask = hits:ne(0)
    if inplace then return as_op(fname, "masked_fill_", Tensor.masked_fill_, self, mask, value) end
    return as_op(fname, "masked_fill", Tensor.masked_fill, self, mask, value)
end
function Tensor:index_fill(dim, index, value, extra)
    if extra ~= nil then extra_arg("index_fill", "(dim, index, value)", extra) end
    return index_fill("index_fill", self, dim, index, value, false)
end
function Tensor:index_fill_(dim, index, value, extra)
    if extra ~= nil then extra_arg("index_fill_", "(dim, index, value)", extra) end
    return index_fill("index_fill_", self, dim, index, value, true)
end

-- index_copy(dim, index, src) / index_copy_: src's slice i copied to the
-- slice index[i] along dim (src has self's shape but index's length along
-- dim), as Torch's.
local function index_copy(fname, self, dim, index, src, inplace)
    check_self(fname, self)
    local d = tensor.norm_dim(fname, self, dim) + 1
    local idx = index_arg(fname, self, index, "the index")
    if not is_tensor(src) then fail(fmt("%s: src must be a tensor, got %s", fname, typename(src))) end
    check_devices(fname, self, src)
    local ss, st = src:shape(), self:shape()
    local ok = #ss == #st and ss[d] == idx:numel()
    for i = 1, #st do if i ~= d and ss[i] ~= st[i] then ok = false end end
    if not ok then
        fail(fmt("%s: src of shape %s must be the shape %s with %d along dim %s", fname, shape_of_str(src),
                 shape_of_str(self), idx:numel(), show(dim)))
    end
    local vshape = {}
    for i = 1, #ss do vshape[i] = 1 end
    vshape[d] = idx:numel()
    local full = idx:view(vshape):expand(ss)
    if inplace then return as_op(fname, "scatter_", Tensor.scatter_, self, d, full, src, fname) end
    return as_op(fname, "scatter", Tensor.scatter, self, d, full, src, fname)
end
function Tensor:index_copy(dim, index, src, extra)
    if extra ~= nil then extra_arg("index_copy", "(dim, index, src)", extra) end
    return index_copy("index_copy", self, dim, index, src, false)
end
function Tensor:index_copy_(dim, index, src, extra)
    if extra ~= nil then extra_arg("index_copy_", "(dim, index, src)", extra) end
    return index_copy("index_copy_", self, dim, index, src, true)
end

-- index_put_({i1, i2, ...}, values [, accumulate]): Torch's: the elements
-- (or slices) at (i1[k], i2[k], ...) of the leading dims (indices from 1,
-- broadcast together) set to values (broadcast to them), or added to with
-- accumulate; index_put the same on a copy.
local function index_put(fname, self, indices, values, accumulate, inplace)
    check_self(fname, self)
    if type(indices) ~= "table" or is_tensor(indices) then
        fail(fmt("%s: expected a list of index tensors, got %s", fname, typename(indices)))
    end
    util.check_list(fname, "the indices", indices, true)
    local k = #indices
    if self:dim() == 0 then fail(fmt("%s: a 0-dim tensor has no dim to index", fname)) end
    if k == 0 or k > self:dim() then
        fail(fmt("%s: expected 1 to %d index tensors (one per leading dim), got %d", fname, self:dim(), k))
    end
    if accumulate ~= nil and type(accumulate) ~= "boolean" then
        fail(fmt("%s: accumulate must be true or false, got %s", fname, show(accumulate)))
    end
    local shapes = {}
    for i, ix in ipairs(indices) do
        if not is_tensor(ix) or is_float(ix) or ix:dtype() == "uint8" then
            fail(fmt("%s: index %d must be an int64 or int32 tensor, got %s", fname, i,
                     is_tensor(ix) and ix:dtype() or typename(ix)))
        end
        check_devices(fname, self, ix)
        shapes[i] = ix:shape()
    end
    local bshape = tensor.broadcast_shape(fname, shapes)
    local st = self:shape()
    -- the linear place (from 1) of each indexed slice in self viewed as (prod of the leading k dims, rest)
    local lin = nil
    local stride = 1
    for i = k, 1, -1 do
        local ix = indices[i]
        -- with more than one index the scatter sees only the linear place:
        -- each index is checked against its own dim (on the engine, no
        -- wait), else {1}, {5} of a 2x3 tensor wrote element (2, 2)
        if k > 1 then
            ix = tensor.checked_in_range(fmt("%s (index %d)", fname, i),
                                         ix:to("float64"), 1, st[i])
        end
        ix = ix:to("int64"):expand(bshape)
        local term = (ix - 1) * stride
        lin = lin and lin + term or term
        stride = stride * st[i]
    end
    lin = lin:reshape(-1) + 1
    local rest = {}
    for i = k + 1, #st do rest[#rest + 1] = st[i] end
    local vshape = {lin:numel()}
    for _, v in ipairs(rest) do vshape[#vshape + 1] = v end
    local slice_shape = {}
    for _, v in ipairs(bshape) do slice_shape[#slice_shape + 1] = v end
    for _, v in ipairs(rest) do slice_shape[#slice_shape + 1] = v end
    if not is_tensor(values) and type(values) ~= "number" then
        fail(fmt("%s: values must be a tensor or a number, got %s", fname, typename(values)))
    end
    local v = is_tensor(values) and values or as_op(fname, "full", tensor.full, {}, values, tensor.like(self))
    check_devices(fname, self, v)
    -- a float tensor into an integer one is refused, as scatter's (which
    -- writes it) and Torch's, and by t[mask] = x, as masked_fill_ refuses a
    -- fraction; t[index] = x and t[{...}] = x cast, as copy_ and Torch's setitem
    if is_tensor(values) and is_float(values) and not is_float(self) and
       (fname == "index_put_" or fname == "index_put" or fname == "t[mask] = x") then
        fail(fmt("%s: values are %s but the tensor is %s (their fractions would be dropped; convert one of " ..
                 "them with :to() first)", fname, values:dtype(), self:dtype()))
    end
    v = as_op(fname, "expand", Tensor.expand, v:to(self:dtype()), slice_shape):reshape(vshape)
    local flat_shape = {stride}
    for _, r in ipairs(rest) do flat_shape[#flat_shape + 1] = r end
    -- the index of each slice, along the first dim, expanded to the slice
    local ishape = {lin:numel()}
    for i = 1, #rest do ishape[i + 1] = 1 end
    local full = lin:view(ishape):expand(vshape)
    if not inplace then
        local flat = self:reshape(flat_shape)
        local name = accumulate and "scatter_add" or "scatter"
        return as_op(fname, name, Tensor[name], flat, 1, full, v, fname):view(st)
    end
    local base = self:contiguous() -- (self when it is: written in place)
    local flat = base:view(flat_shape)
    local name = accumulate and "scatter_add_" or "scatter_"
    local ok, err = pcall(Tensor[name], flat, 1, full, v, fname)
    if not ok then -- (the out-of-place op to use instead is index_put, not the scatter inside)
        err = tostring(err):gsub(name .. ": ", fname .. ": ", 1)
        error((err:gsub("the out%-of%-place scatter[_%a]*", "the out-of-place index_put", 1)), 0)
    end
    if not rawequal(base, self) then as_op(fname, "copy_", Tensor.copy_, self, base) end
    return self
end
-- who (internal): the name errors take (t[index] = x's)
function Tensor:index_put_(indices, values, accumulate, who)
    tensor.check_who("index_put_", who)
    return index_put(who or "index_put_", self, indices, values, accumulate, true)
end
function Tensor:index_put(indices, values, accumulate, extra)
    if extra ~= nil then extra_arg("index_put", "(indices, values, accumulate)", extra) end
    return index_put("index_put", self, indices, values, accumulate, false)
end

-- masked_scatter(mask, source) / masked_scatter_: Torch's: the places where
-- mask (uint8, broadcast to t's shape) is set take source's elements in
-- row-major order (source has at least as many; cast to t's dtype, a float
-- one for an integer t refused); waits for the count.
local function masked_scatter(fname, self, mask, source, inplace)
    check_self(fname, self)
    if not is_tensor(mask) or mask:dtype() ~= "uint8" then
        fail(fmt("%s: mask must be a uint8 tensor (as comparisons return), got %s", fname,
                 is_tensor(mask) and mask:dtype() or typename(mask)))
    end
    if not is_tensor(source) then fail(fmt("%s: source must be a tensor, got %s", fname, typename(source))) end
    check_devices(fname, self, mask)
    check_devices(fname, self, source)
    if is_float(source) and not is_float(self) then
        fail(fmt("%s: source is %s but the tensor is %s (its fractions would be dropped; convert one of them " ..
                 "with :to() first)", fname, source:dtype(), self:dtype()))
    end
    local t = self:dim() == 0 and self:view({1}) or self
    local m = as_op(fname, "expand", Tensor.expand, mask:dim() == 0 and mask:view({1}) or mask, t:shape())
    local pos = m:nonzero({as_tuple = true})
    local count = pos[1]:numel()
    if source:numel() < count then
        fail(fmt("%s: the mask selects %d elements but source (shape %s) has %d", fname, count,
                 shape_of_str(source), source:numel()))
    end
    local vals = source:reshape(-1):narrow(1, 1, count)
    if inplace then
        as_op(fname, "index_put_", Tensor.index_put_, t, pos, vals, nil, fname)
        return self
    end
    return t:index_put(pos, vals):view(self:shape())
end
function Tensor:masked_scatter_(mask, source, extra)
    if extra ~= nil then extra_arg("masked_scatter_", "(mask, source)", extra) end
    return masked_scatter("masked_scatter_", self, mask, source, true)
end
function Tensor:masked_scatter(mask, source, extra)
    if extra ~= nil then extra_arg("masked_scatter", "(mask, source)", extra) end
    return masked_scatter("masked_scatter", self, mask, source, false)
end

-- A number as a tensor beside ref (its device and engine): in ref's dtype
-- when it holds the number exactly, else in float64, so that isin,
-- searchsorted and bucketize compare the number itself (2.5 was cut to 2
-- against an int64 tensor, -1 refused against a uint8 one).
local INT_RANGE = {uint8 = {0, 256}, int32 = {-2 ^ 31, 2 ^ 31}, int64 = {-2 ^ 63, 2 ^ 63}} -- [lo, hi)
local function number_beside(shape, v, ref)
    local dt = ref:dtype()
    local r = INT_RANGE[dt]
    if r and not (is_int(v) and v >= r[1] and v < r[2]) then dt = "float64" end
    return tensor.full(shape, v, tensor.like(ref, dt))
end

-- isin(elements, test): a uint8 mask, in elements' shape, of the elements
-- equal to some element of test (NaN to none), as Torch's: one sort of
-- both, n log n, no n x m table.
local isin -- (below)
function M.isin(elements, test, opts, extra)
    if extra ~= nil then extra_arg("isin", "(elements, test, opts)", extra) end
    local fname = "isin"
    -- Torch's invert (and assume_unique, a hint the sort does not need)
    opts = util.check_opts(fname, opts, {invert = true, assume_unique = true})
    for _, k in ipairs({"invert", "assume_unique"}) do
        if opts[k] ~= nil and type(opts[k]) ~= "boolean" then
            fail(fmt("%s: %s must be a boolean, got %s", fname, k, typename(opts[k])))
        end
    end
    local r = isin(fname, elements, test)
    if opts.invert then return r:eq(0) end
    return r
end
isin = function(fname, elements, test)
    if not is_tensor(elements) and not is_tensor(test) then
        fail(fmt("%s: expected tensors, got %s and %s", fname, typename(elements), typename(test)))
    end
    if type(test) == "number" and is_tensor(elements) then test = number_beside({1}, test, elements) end
    if type(elements) == "number" and is_tensor(test) then elements = number_beside({}, elements, test) end
    if not is_tensor(elements) or not is_tensor(test) then
        fail(fmt("%s: expected tensors or numbers, got %s and %s", fname, typename(elements), typename(test)))
    end
    check_devices(fname, elements, test)
    local dt = tensor.result_type(elements, test)
    local e, t = elements:detach():reshape(-1):to(dt), test:detach():reshape(-1):to(dt)
    local n, m = e:numel(), t:numel()
    local like = tensor.like(e, "int64")
    if n == 0 or m == 0 then return tensor.zeros(elements:shape(), tensor.like(elements, "uint8")) end
    -- test first: a stable sort puts its values before equal elements
    local all = tensor.cat({t, e}, 1)
    local from_test = tensor.cat({tensor.ones({m}, like), tensor.zeros({n}, like)}, 1)
    local sorted, order = all:sort(1)
    local total = n + m
    local starts = tensor.cat({tensor.ones({1}, like), sorted:narrow(1, 2, total - 1):ne(sorted:narrow(1, 1, total - 1)):long()}, 1)
    -- each place's run start (the latest start at or before it), and whether a test value opened that run
    local pos = tensor.arange(1, total + 1, like)
    local run, _ = (pos * starts):cummax(1)
    local hit = from_test:index_select(1, order):index_select(1, run)
    -- back to the input order; the elements are the places after the m test values
    local back = tensor.zeros({total}, like):scatter_(1, order, hit)
    return back:narrow(1, m + 1, n):to("uint8"):view(elements:shape())
end
Tensor.isin = M.isin

-- searchsorted(sorted, values [, {right = false, side, sorter, out_int32}])
-- / bucketize(values, boundaries [, {right = false, out_int32}]): Torch's
-- insertion places, counted from 1 as ordo's indices (1 + Torch's): the
-- place (1..m + 1) values would take in the sorted sequence, before equal
-- ones (after them with right, or side = "right"); int64 (int32 with
-- out_int32) in values' shape (or a number's: 0-dim).  searchsorted's
-- sequence may be N-dim: one sorted sequence per row of its last dim, and
-- values' leading dims those of the sequence, as Torch's; sorter (int64
-- positions from 1, the sequence's shape) sorts an unsorted sequence.
-- One stable sort of both along the last dim.
local function insertion(fname, seq, values, opts)
    local batched_ok = fname == "searchsorted"
    opts = util.check_opts(fname, opts, batched_ok and {right = true, side = true, sorter = true, out_int32 = true}
                                        or {right = true, out_int32 = true})
    if opts.right ~= nil and type(opts.right) ~= "boolean" then
        fail(fmt("%s: right must be true or false, got %s", fname, show(opts.right)))
    end
    if opts.out_int32 ~= nil and type(opts.out_int32) ~= "boolean" then
        fail(fmt("%s: out_int32 must be true or false, got %s", fname, show(opts.out_int32)))
    end
    local right = opts.right
    if opts.side ~= nil then
        if opts.side ~= "left" and opts.side ~= "right" then
            fail(fmt("%s: side must be \"left\" or \"right\", got %s", fname, show(opts.side)))
        end
        if right ~= nil and right ~= (opts.side == "right") then
            fail(fmt("%s: side = %q and right = %s disagree", fname, opts.side, tostring(right)))
        end
        right = opts.side == "right"
    end
    if not is_tensor(seq) or seq:dim() == 0 or (not batched_ok and seq:dim() ~= 1) then
        fail(fmt("%s: the sorted sequence must be a %s tensor, got %s", fname,
                 batched_ok and "1-dim or N-dim" or "1-dim", is_tensor(seq) and "shape " .. shape_of_str(seq) or typename(seq)))
    end
    if type(values) == "number" then
        if seq:dim() > 1 then
            fail(fmt("%s: values must be a tensor for an N-dim sequence (shape %s), got a number", fname,
                     shape_of_str(seq)))
        end
        values = number_beside({}, values, seq)
    end
    if not is_tensor(values) then fail(fmt("%s: values must be a tensor or a number, got %s", fname, typename(values))) end
    check_devices(fname, seq, values)
    local nd = seq:dim()
    if nd > 1 then
        local ok = values:dim() == nd
        for i = 1, nd - 1 do ok = ok and values:size(i) == seq:size(i) end
        if not ok then
            fail(fmt("%s: values of shape %s must have the leading dims of the sequence's shape %s (all but its last)",
                     fname, shape_of_str(values), shape_of_str(seq)))
        end
    end
    if opts.sorter ~= nil then
        local so = opts.sorter
        if not is_tensor(so) or (so:dtype() ~= "int64" and so:dtype() ~= "int32") then
            fail(fmt("%s: sorter must be an int64 or int32 tensor, got %s", fname,
                     is_tensor(so) and so:dtype() or typename(so)))
        end
        check_devices(fname, seq, so)
        local same = so:dim() == nd
        for i = 1, nd do same = same and so:size(i) == seq:size(i) end
        if not same then
            fail(fmt("%s: sorter of shape %s must have the sequence's shape %s", fname, shape_of_str(so),
                     shape_of_str(seq)))
        end
        seq = seq:detach():gather(nd, so:to("int64"), "searchsorted (sorter)")
    end
    local dt = tensor.result_type(seq, values)
    local b, v
    if nd == 1 then
        b, v = seq:detach():to(dt):view(1, -1), values:detach():reshape(1, -1):to(dt)
    else -- the leading dims as one batch of rows
        local lead = 1
        for i = 1, nd - 1 do lead = lead * seq:size(i) end
        b = seq:detach():to(dt):reshape(lead, seq:size(nd))
        v = values:detach():to(dt):reshape(lead, values:size(nd))
    end
    local rows, m, n = b:size(1), b:size(2), v:size(2)
    local like = tensor.like(v, opts.out_int32 and "int32" or "int64")
    local l64 = tensor.like(v, "int64")
    if n == 0 or rows == 0 then return tensor.zeros(values:shape(), like) end
    if m == 0 then return tensor.ones(values:shape(), like) end
    -- a stable sort of both along each row: the boundaries before equal values (right) or after them (left)
    local all, from_b
    if right then
        all, from_b = tensor.cat({b, v}, 2), tensor.cat({tensor.ones({rows, m}, l64), tensor.zeros({rows, n}, l64)}, 2)
    else
        all, from_b = tensor.cat({v, b}, 2), tensor.cat({tensor.zeros({rows, n}, l64), tensor.ones({rows, m}, l64)}, 2)
    end
    local _, order = all:sort(2)
    local before = from_b:gather(2, order):cumsum(2) -- boundaries at or before each sorted place
    local back = tensor.zeros({rows, n + m}, l64):scatter_(2, order, before)
    local r = (right and back:narrow(2, m + 1, n) or back:narrow(2, 1, n)) + 1
    return r:reshape(values:shape()):to(like.dtype)
end
function M.searchsorted(seq, values, opts, extra)
    if extra ~= nil then extra_arg("searchsorted", "(values, opts)", extra) end
    check_self("searchsorted", seq)
    return insertion("searchsorted", seq, values, opts)
end
Tensor.searchsorted = M.searchsorted
function M.bucketize(values, boundaries, opts, extra)
    if extra ~= nil then extra_arg("bucketize", "(boundaries, opts)", extra) end
    if not is_tensor(values) and type(values) ~= "number" then
        fail("bucketize: expected a tensor or a number, got " .. typename(values))
    end
    return insertion("bucketize", boundaries, values, opts)
end
Tensor.bucketize = M.bucketize

-- cumsum_(dim) / cumprod_(dim): in place, as Torch's: self keeps its dtype
-- (an integer one wraps in it).
-- (no closures: a method that makes one is not compiled into its caller's
-- loop; spec/tensor_jit_spec.lua)
local function cum_copy(self, name, dim) return self:copy_(self[name](self, dim)) end
local function cum_inplace(name, self, dim, extra)
    local fname = name .. "_"
    check_self(fname, self)
    if extra ~= nil then
        fail(fmt("%s: unexpected extra argument %s; expected t:%s(dim)", fname, show(extra), fname))
    end
    inplace_guard(fname, self)
    return own_errors(fname, pcall(cum_copy, self, name, dim))
end
function Tensor:cumsum_(dim, extra) return cum_inplace("cumsum", self, dim, extra) end
function Tensor:cumprod_(dim, extra) return cum_inplace("cumprod", self, dim, extra) end

-- Products, scans and searches refuse an argument past their last one
-- (x:cummax(1, true), kron(a, b, 3), histc(bins, min, max, 1) ignored it
-- without a word): name -> how many they take (a method's self the first).
local TAKES = {
    cummax = {2, "t:cummax(dim)"}, cummin = {2, "t:cummin(dim)"}, cumsum = {3, "t:cumsum(dim [, dtype])"},
    cumprod = {3, "t:cumprod(dim [, dtype])"}, diff = {5, "t:diff([n [, dim [, prepend [, append]]]])"},
    histc = {4, "t:histc([bins [, min [, max]]])"}, outer = {2, "a:outer(b)"},
    unique = {2, "t:unique([opts])"}, unique_consecutive = {2, "t:unique_consecutive([opts])"},
    addmm = {4, "c:addmm(a, b [, opts])"}, baddbmm = {4, "c:baddbmm(a, b [, opts])"},
    addmv = {4, "c:addmv(m, v [, opts])"}, addr = {4, "c:addr(u, v [, opts])"},
    addbmm = {4, "c:addbmm(a, b [, opts])"},
    kron = {2, "kron(a, b)"}, cross = {3, "cross(a, b [, dim])"}, cdist = {3, "cdist(x1, x2 [, p | opts])"},
    tensordot = {3, "tensordot(a, b [, dims])"}, searchsorted = {3, "searchsorted(sorted, values [, opts])"},
    bucketize = {3, "bucketize(values, boundaries [, opts])"},
}
for name, t in pairs(TAKES) do
    local n, usage = t[1], t[2]
    local f = Tensor[name]
    local function checked(...)
        for i = n + 1, select("#", ...) do
            local v = select(i, ...)
            if v ~= nil then fail(fmt("%s: unexpected extra argument %s; expected %s", name, show(v), usage)) end
        end
        return f(...)
    end
    Tensor[name] = checked
    if M[name] == f then M[name] = checked end
end


-- Small Torch names a user reaches for first.
-- t:is_floating_point(), t:is_signed() (every dtype but uint8),
-- t:tolist() (totable's Torch name), t:ndimension() (dim), t:nbytes()
-- (numel * element_size), t:itemsize() (element_size), t:positive() (t).
function Tensor:is_floating_point(extra)
    if extra ~= nil then extra_arg("is_floating_point", "()", extra) end
    check_self("is_floating_point", self)
    return is_float(self)
end
function Tensor:is_signed(extra)
    if extra ~= nil then extra_arg("is_signed", "()", extra) end
    check_self("is_signed", self)
    return self:dtype() ~= "uint8"
end
function Tensor:tolist(extra)
    if extra ~= nil then extra_arg("tolist", "()", extra) end
    return as_op("tolist", "totable", Tensor.totable, self)
end
function Tensor:ndimension(extra)
    if extra ~= nil then extra_arg("ndimension", "()", extra) end
    return as_op("ndimension", "dim", Tensor.dim, self)
end
function Tensor:nbytes(extra)
    if extra ~= nil then extra_arg("nbytes", "()", extra) end
    check_self("nbytes", self)
    return self:numel() * self:element_size()
end
function Tensor:itemsize(extra)
    if extra ~= nil then extra_arg("itemsize", "()", extra) end
    return as_op("itemsize", "element_size", Tensor.element_size, self)
end
-- bool(): Torch's boolean tensor as ordo's masks are, uint8 of 1 where t
-- is nonzero (NaN too, as Torch's), 0 elsewhere; no gradient.
function Tensor:bool(extra)
    if extra ~= nil then extra_arg("bool", "()", extra) end
    check_self("bool", self)
    return self:ne(0)
end
function Tensor:positive(extra)
    if extra ~= nil then extra_arg("positive", "()", extra) end
    check_self("positive", self)
    if self:dtype() == "uint8" then fail("positive: dtype uint8 not supported (as Torch's: it has no sign)") end
    return self
end

-- NumPy's and Torch's other names of the elementwise ops, each also in
-- place where the op is: absolute, negative, arcsin..., subtract,
-- multiply, divide, true_divide, greater..., sgn (sign, for real
-- tensors), fix (trunc); errors name the name called.
local ALIASES = {
    absolute = "abs", negative = "neg", arcsin = "asin", arccos = "acos", arctan = "atan", arcsinh = "asinh",
    arccosh = "acosh", arctanh = "atanh", arctan2 = "atan2", subtract = "sub", multiply = "mul", divide = "div",
    true_divide = "div", greater = "gt", greater_equal = "ge", less = "lt", less_equal = "le", not_equal = "ne",
    sgn = "sign", fix = "trunc",
}
for alias, target in pairs(ALIASES) do
    for _, sfx in ipairs({"", "_"}) do
        local name, inner = alias .. sfx, target .. sfx
        if Tensor[inner] ~= nil and Tensor[name] == nil then
            Tensor[name] = function(self, ...)
                check_self(name, self)
                return as_op(name, inner, Tensor[inner], self, ...)
            end
        end
    end
end

-- isposinf(), isneginf(): uint8 masks of +inf, -inf (integers: none);
-- signbit(): uint8, 1 where the sign bit is set (-0.0 and -inf too, as
-- Torch's); exp2(): 2^t (integers compute in float32).
function Tensor:isposinf(extra)
    if extra ~= nil then extra_arg("isposinf", "()", extra) end
    check_self("isposinf", self)
    if not is_float(self) then return tensor.zeros_like(self, {dtype = "uint8"}) end
    return self:eq(huge)
end
function Tensor:isneginf(extra)
    if extra ~= nil then extra_arg("isneginf", "()", extra) end
    check_self("isneginf", self)
    if not is_float(self) then return tensor.zeros_like(self, {dtype = "uint8"}) end
    return self:eq(-huge)
end
function Tensor:signbit(extra)
    if extra ~= nil then extra_arg("signbit", "()", extra) end
    check_self("signbit", self)
    if self:dtype() == "uint8" then return tensor.zeros_like(self) end
    if not is_float(self) then return self:lt(0) end
    -- -0.0: 1 / -0.0 is -inf; NaN compares false either way (Torch reads the bit; a NaN's is rarely set)
    return tensor.where(self:eq(0), self:reciprocal():lt(0), self:lt(0))
end
function Tensor:exp2(extra)
    if extra ~= nil then extra_arg("exp2", "()", extra) end
    check_self("exp2", self)
    if not is_float(self) then return 2 ^ to_default_float(self) end
    return 2 ^ self
end

-- fmax(u), fmin(u): maximum / minimum that skip NaN (the other side when
-- one is NaN, NaN only where both are), as Torch's and NumPy's.
for _, p in ipairs({{"fmax", "maximum"}, {"fmin", "minimum"}}) do
    local name, inner = p[1], p[2]
    Tensor[name] = function(self, other, extra)
        if extra ~= nil then extra_arg(name, "(other)", extra) end
        check_self(name, self)
        local m = as_op(name, inner, Tensor[inner], self, other)
        if not is_float(m) then return m end
        local a = is_tensor(self) and self or m
        local b = is_tensor(other) and other or tensor.full_like(m, other)
        return tensor.where(b:isnan(), a:expand_as(m):to(m:dtype()),
                            tensor.where(a:isnan(), b:expand_as(m):to(m:dtype()), m))
    end
end

-- The in-place ops made of other in-place ops refuse a tensor that requires
-- a gradient under their own name (the inner op, uniform_ or copy_, named
-- itself), before anything is drawn or written.
local function no_grad_inplace(fname, t, instead)
    local autograd = package.loaded["ordo.autograd"]
    if t._rg and autograd and autograd.is_enabled() then
        fail(fmt("%s: a tensor that requires a gradient cannot be changed in place (%s, or wrap the update in " ..
                 "ordo.no_grad)", fname, instead))
    end
end

-- tril_(k), triu_(k): tril and triu in place.
function Tensor:tril_(k, extra)
    if extra ~= nil then extra_arg("tril_", "(k)", extra) end
    check_self("tril_", self)
    no_grad_inplace("tril_", self, "use the out-of-place tril")
    return self:copy_(as_op("tril_", "tril", Tensor.tril, self, k))
end
function Tensor:triu_(k, extra)
    if extra ~= nil then extra_arg("triu_", "(k)", extra) end
    check_self("triu_", self)
    no_grad_inplace("triu_", self, "use the out-of-place triu")
    return self:copy_(as_op("triu_", "triu", Tensor.triu, self, k))
end


-- unflatten(dim, sizes): dim split into sizes (one of them may be -1),
-- as Torch's (a view where the strides allow, else a copy, as reshape).
function Tensor:unflatten(dim, sizes, extra)
    if extra ~= nil then extra_arg("unflatten", "(dim, sizes)", extra) end
    local fname = "unflatten"
    check_self(fname, self)
    local d = tensor.norm_dim(fname, self, dim) + 1
    if type(sizes) ~= "table" or is_tensor(sizes) or #sizes == 0 then
        fail(fmt("%s: expected the sizes as a non-empty table, got %s", fname, show(sizes)))
    end
    local shown = {}
    for i = 1, #sizes do shown[i] = show(sizes[i]) end
    shown = "{" .. table.concat(shown, ", ") .. "}"
    local n, prod, infer = self:size(d), 1, nil
    for i, v in ipairs(sizes) do
        if v == -1 and not infer then infer = i
        elseif not is_int(v) or v < 0 then
            fail(fmt("%s: sizes must be integers >= 0 (one may be -1), got %s", fname, shown))
        else prod = prod * v end
    end
    local new = {}
    for i, v in ipairs(sizes) do new[i] = v end
    if infer then
        if prod == 0 or n % prod ~= 0 then
            fail(fmt("%s: sizes %s cannot fill dim %d of size %d", fname, shown, dim, n))
        end
        new[infer] = n / prod
    elseif prod ~= n then
        fail(fmt("%s: sizes %s (%d elements) do not fit dim %d of size %d", fname, shown, prod, dim, n))
    end
    local s, shape = self:shape(), {}
    for i = 1, d - 1 do shape[#shape + 1] = s[i] end
    for _, v in ipairs(new) do shape[#shape + 1] = v end
    for i = d + 1, #s do shape[#shape + 1] = s[i] end
    return self:reshape(shape)
end

-- take_along_dim(indices [, dim]): gather along dim with self and indices
-- broadcast to each other in the other dims, as Torch's; without a dim,
-- over the flattened tensor.  Indices count from 1.
function Tensor:take_along_dim(indices, dim, extra)
    if extra ~= nil then extra_arg("take_along_dim", "(indices, dim)", extra) end
    local fname = "take_along_dim"
    check_self(fname, self)
    if not is_tensor(indices) then fail(fmt("%s: expected a tensor of indices, got %s", fname, typename(indices))) end
    if dim == nil then return as_op(fname, "gather", Tensor.gather, self:reshape(-1), 1, indices:reshape(-1), fname) end
    local d = tensor.norm_dim(fname, self, dim) + 1
    if indices:dim() ~= self:dim() then
        fail(fmt("%s: indices must have as many dims as the input (%d), got shape %s", fname, self:dim(),
                 shape_of_str(indices)))
    end
    local sa, si = self:shape(), indices:shape()
    local ea, ei = {}, {}
    for i = 1, #sa do
        if i == d then
            ea[i], ei[i] = sa[i], si[i]
        else
            if sa[i] ~= si[i] and sa[i] ~= 1 and si[i] ~= 1 then
                fail(fmt("%s: shapes %s and %s do not broadcast outside dim %d", fname, shape_of_str(self),
                         shape_of_str(indices), dim))
            end
            local b = math.max(sa[i], si[i])
            if sa[i] == 0 or si[i] == 0 then b = 0 end
            ea[i], ei[i] = b, b
        end
    end
    return as_op(fname, "gather", Tensor.gather, self:expand(ea), d, indices:expand(ei), fname)
end

-- fill_diagonal_(v [, wrap]): v on the main diagonal, in place, as Torch's
-- (a matrix, or all dims of one size); wrap: a tall matrix's diagonal
-- starts again every columns + 1 rows (NumPy's).
function Tensor:fill_diagonal_(v, wrap, extra)
    if extra ~= nil then extra_arg("fill_diagonal_", "(v, wrap)", extra) end
    local fname = "fill_diagonal_"
    check_self(fname, self)
    if type(v) ~= "number" then fail(fmt("%s: expected a number as the fill value, got %s", fname, typename(v))) end
    if wrap ~= nil and type(wrap) ~= "boolean" then
        fail(fmt("%s: wrap must be a boolean, got %s", fname, typename(wrap)))
    end
    local s, nd = self:shape(), self:dim()
    if nd < 2 then fail(fmt("%s: expected at least 2 dims, got shape %s", fname, shape_of_str(self))) end
    if nd > 2 then
        for i = 2, nd do
            if s[i] ~= s[1] then
                fail(fmt("%s: all dims must have the same size beyond 2 dims, got shape %s", fname, shape_of_str(self)))
            end
        end
    end
    no_grad_inplace(fname, self, "use masked_fill with the diagonal's mask")
    local numel = self:numel()
    if numel == 0 then return self end
    -- the flat (row-major) positions of the diagonal: every step-th, from 0
    local step, c = 1, 1
    for i = nd, 2, -1 do
        c = c * s[i]
        step = step + c
    end
    local n = s[1]
    for i = 2, nd do n = math.min(n, s[i]) end
    local pos = tensor.arange(numel, tensor.like(self, "int64"))
    local mask = (pos % step):eq(0)
    if not (wrap and nd == 2) then mask = tensor.where(pos:le((n - 1) * step), mask, 0) end
    return self:masked_fill_(mask:view(s), v)
end

-- is_cuda(), is_same_size(u), is_nonzero() (a one-element tensor's value
-- as a boolean; waits), storage_offset() (in elements), float_power(e)
-- (in float64, as Torch's).
function Tensor:is_cuda(extra)
    if extra ~= nil then extra_arg("is_cuda", "()", extra) end
    check_self("is_cuda", self)
    return self:device().type == "gpu"
end
function Tensor:is_same_size(u, extra)
    if extra ~= nil then extra_arg("is_same_size", "(u)", extra) end
    check_self("is_same_size", self)
    if not is_tensor(u) then fail("is_same_size: expected a tensor, got " .. typename(u)) end
    return shape_of_str(self) == shape_of_str(u)
end
function Tensor:is_nonzero(extra)
    if extra ~= nil then extra_arg("is_nonzero", "()", extra) end
    check_self("is_nonzero", self)
    if self:numel() ~= 1 then
        fail(fmt("is_nonzero: a tensor of %d elements has no single truth value (expected one element, got shape %s)",
                 self:numel(), shape_of_str(self)))
    end
    return self:item() ~= 0
end
function Tensor:storage_offset(extra)
    if extra ~= nil then extra_arg("storage_offset", "()", extra) end
    check_self("storage_offset", self)
    return tonumber(self._c.offset)
end
function Tensor:float_power(e, extra)
    if extra ~= nil then extra_arg("float_power", "(e)", extra) end
    check_self("float_power", self)
    if is_tensor(e) then e = e:double() end
    return as_op("float_power", "pow", Tensor.pow, self:double(), e)
end


-- atleast_1d(t), atleast_2d(t): t viewed with at least 1 or 2 dims (a
-- 0-dim t as {1} / {1, 1}, a vector as a row {1, n}), as Torch's; a list
-- of tensors gives a list.  hstack(list): cat along dim 2 (along 1 for
-- vectors); vstack(list): the rows stacked, vectors as rows (cat of their
-- atleast_2d along dim 1).
local function atleast(fname, n, t)
    if type(t) == "table" and not is_tensor(t) then
        local r = {}
        for i, v in ipairs(t) do r[i] = atleast(fname, n, v) end
        return r
    end
    if not is_tensor(t) then fail(fmt("%s: expected a tensor or a list of them, got %s", fname, typename(t))) end
    local nd = t:dim()
    if nd >= n then return t end
    if nd == 0 then return n == 1 and t:view(1) or t:view(1, 1) end
    return t:unsqueeze(1) -- n == 2, a vector: a row
end
function M.atleast_1d(t, extra)
    if extra ~= nil then extra_arg("atleast_1d", "(t)", extra) end
    return atleast("atleast_1d", 1, t)
end
function M.atleast_2d(t, extra)
    if extra ~= nil then extra_arg("atleast_2d", "(t)", extra) end
    return atleast("atleast_2d", 2, t)
end
local function check_list_of_tensors(fname, list)
    if type(list) ~= "table" or is_tensor(list) or #list == 0 then
        fail(fmt("%s: expected a non-empty list of tensors, got %s", fname, typename(list)))
    end
    for i, t in ipairs(list) do
        if not is_tensor(t) then fail(fmt("%s: element %d is %s, expected a tensor", fname, i, typename(t))) end
    end
end
function M.hstack(list, extra)
    if extra ~= nil then extra_arg("hstack", "(list)", extra) end
    check_list_of_tensors("hstack", list)
    local l = atleast("hstack", 1, list)
    return as_op("hstack", "cat", tensor.cat, l, l[1]:dim() == 1 and 1 or 2)
end
function M.vstack(list, extra)
    if extra ~= nil then extra_arg("vstack", "(list)", extra) end
    check_list_of_tensors("vstack", list)
    return as_op("vstack", "cat", tensor.cat, atleast("vstack", 2, list), 1)
end


-- Torch's other in-place random fills, from uniform_ and normal_ (so the
-- generator and its seed are theirs): exponential_([lambd = 1]),
-- log_normal_([mean = 1 [, std = 2]]) (exp of a normal, Torch's defaults),
-- cauchy_([median = 0 [, sigma = 1]]), geometric_(p) (trials to the first
-- success, 1, 2, ...; any dtype), random_([from,] to) (integers in
-- [from, to), any dtype; from 0 without it).  Each returns t.
local function check_float_self(fname, t)
    check_self(fname, t)
    if not is_float(t) then fail(fmt("%s: dtype %s not supported (expected float32 or float64)", fname, t:dtype())) end
end
local function finite_number(fname, what, v, positive)
    if type(v) ~= "number" or v ~= v or v == huge or v == -huge or (positive and not (v > 0)) then
        fail(fmt("%s: %s must be a finite number%s, got %s", fname, what, positive and " > 0" or "", show(v)))
    end
end
function Tensor:exponential_(lambd, extra)
    if extra ~= nil then extra_arg("exponential_", "(lambd)", extra) end
    lambd = lambd == nil and 1 or lambd
    finite_number("exponential_", "lambd", lambd, true)
    check_float_self("exponential_", self)
    no_grad_inplace("exponential_", self, "draw into a new tensor: random values carry no gradient")
    -- U in [0, 1): -log(1 - U) / lambd, finite (U = 0 gives 0)
    return self:uniform_(0, 1):neg_():log1p_():div_(-lambd)
end
function Tensor:log_normal_(mean, std, extra)
    if extra ~= nil then extra_arg("log_normal_", "(mean, std)", extra) end
    mean, std = mean == nil and 1 or mean, std == nil and 2 or std
    finite_number("log_normal_", "mean", mean)
    finite_number("log_normal_", "std", std, true)
    check_float_self("log_normal_", self)
    no_grad_inplace("log_normal_", self, "draw into a new tensor: random values carry no gradient")
    return self:normal_(mean, std):exp_()
end
function Tensor:cauchy_(median, sigma, extra)
    if extra ~= nil then extra_arg("cauchy_", "(median, sigma)", extra) end
    median, sigma = median == nil and 0 or median, sigma == nil and 1 or sigma
    finite_number("cauchy_", "median", median)
    finite_number("cauchy_", "sigma", sigma, true)
    check_float_self("cauchy_", self)
    no_grad_inplace("cauchy_", self, "draw into a new tensor: random values carry no gradient")
    return self:uniform_(0, 1):sub_(0.5):mul_(math.pi):tan_():mul_(sigma):add_(median)
end
function Tensor:geometric_(p, extra)
    if extra ~= nil then extra_arg("geometric_", "(p)", extra) end
    check_self("geometric_", self)
    if type(p) ~= "number" or not (p > 0 and p <= 1) then
        fail(fmt("geometric_: p must be a probability in (0, 1], got %s", show(p)))
    end
    no_grad_inplace("geometric_", self, "draw into a new tensor: random values carry no gradient")
    -- floor(log(1 - U) / log(1 - p)) + 1 in float64, then into t's dtype
    if p == 1 then return self:fill_(1) end -- (every first trial succeeds)
    local u = tensor.empty_like(self, "float64"):uniform_(0, 1)
    return self:copy_(u:neg_():log1p_():div_(math.log(1 - p)):floor_():add_(1))
end
function Tensor:random_(from, to, extra)
    if extra ~= nil then extra_arg("random_", "(from, to)", extra) end
    local fname = "random_"
    check_self(fname, self)
    if to == nil then from, to = 0, from end
    if to == nil then fail("random_: expected random_([from,] to): the bound to (excluded) is needed here") end
    no_grad_inplace(fname, self, "draw into a new tensor: random values carry no gradient")
    local r = as_op(fname, "randint", M.randint, from, to, self:shape(), {dtype = self:dtype(), device = self:device()})
    return self:copy_(r)
end


-- ordo.randint_like(t, [low,] high [, opts]): randint of t's shape, dtype
-- and device (opts overriding them), as Torch's.
function M.randint_like(t, a, b, c, extra)
    local fname = "randint_like"
    if extra ~= nil then extra_arg(fname, "(t, [low,] high [, opts])", extra) end
    if not is_tensor(t) then fail(fmt("%s: expected a tensor, got %s", fname, typename(t))) end
    local low, high, opts
    if type(b) == "number" then
        low, high, opts = a, b, c
    else
        if c ~= nil then extra_arg(fname, "(t, [low,] high [, opts])", c) end
        low, high, opts = 0, a, b
    end
    local o = {dtype = t:dtype(), device = t:device()}
    if type(opts) == "string" then
        o.dtype = opts
    elseif opts ~= nil then
        if type(opts) ~= "table" or getmetatable(opts) ~= nil then
            fail(fmt("%s: options must be a table {dtype =, device =} or a dtype, got %s", fname, typename(opts)))
        end
        for k, v in pairs(opts) do o[k] = v end
    end
    return as_op(fname, "randint", M.randint, low, high, t:shape(), o)
end

-- ordo.normal(mean, std [, shape [, opts]]): Torch's: numbers mean and std
-- with a shape, or tensors (either or both; a number for the other) drawn
-- elementwise, in their broadcast shape, float.  std must be >= 0.
function M.normal(mean, std, shape, opts, extra)
    local fname = "normal"
    if extra ~= nil then extra_arg(fname, "(mean, std, shape, opts)", extra) end
    local mt, st = is_tensor(mean), is_tensor(std)
    if not mt and type(mean) ~= "number" then fail(fmt("%s: mean must be a number or a tensor, got %s", fname, typename(mean))) end
    if not st and type(std) ~= "number" then fail(fmt("%s: std must be a number or a tensor, got %s", fname, typename(std))) end
    if not mt and not st then
        if not (std >= 0) or std == huge or mean ~= mean or math.abs(mean) == huge then
            fail(fmt("%s: expected a finite mean and a finite std >= 0, got %s and %s", fname, show(mean), show(std)))
        end
        if shape == nil then fail(fname .. ": numbers mean and std need a shape, normal(mean, std, shape)") end
        local r = as_op(fname, "randn", tensor.randn, shape, opts)
        if not is_float(r) then fail(fmt("%s: dtype %s not supported (expected float32 or float64)", fname, r:dtype())) end
        return r:mul_(std):add_(mean)
    end
    if shape ~= nil or opts ~= nil then
        fail(fname .. ": with a tensor mean or std the shape is theirs; no shape or options are taken")
    end
    if st and std:lt(0):any() then fail(fname .. ": std must be >= 0 everywhere") end -- (waits: std's values)
    local ref = mt and mean or std
    local dt = is_float(ref) and ref:dtype() or tensor.get_default_dtype()
    if mt and st then dt = tensor.result_type(mean, std) end
    if dt ~= "float32" and dt ~= "float64" then dt = tensor.get_default_dtype() end
    local m = mt and mean:to(dt) or mean
    local sd = st and std:to(dt) or std
    local like = mt and st and (m + sd) or (mt and m or sd) -- (the broadcast shape)
    return tensor.randn_like(like, {dtype = dt}):mul_(sd):add_(m)
end

-- sinc(): sin(pi x) / (pi x), 1 at 0 (Torch's); integers compute in float32.
function Tensor:sinc(extra)
    if extra ~= nil then extra_arg("sinc", "()", extra) end
    check_self("sinc", self)
    local x = is_float(self) and self or to_default_float(self)
    local zero = x:eq(0)
    local px = tensor.where(zero, 1, x) * math.pi -- (no 0 / 0, so no NaN in the gradient either)
    return tensor.where(zero, 1, px:sin() / px)
end


-- apply_(fn), map_(u, fn): Torch's (and Torch7's) elementwise Lua
-- functions, in place: each element x becomes fn(x) (map_: fn(x, y), y
-- the element of u broadcast to t); a nil result keeps x (Torch7's).  They
-- wait and run on the host, element by element (for prototyping, not for
-- speed); a result must be a number (a boolean as 1 or 0) that fits t's
-- dtype, or nothing changes.  Returns t.
local function elementwise_lua(fname, self, fn, u)
    check_self(fname, self)
    if type(fn) ~= "function" then fail(fmt("%s: expected a function, got %s", fname, typename(fn))) end
    no_grad_inplace(fname, self, "compute a new tensor instead")
    local xs = self:reshape(-1):totable()
    if type(xs) == "number" then xs = {xs} end
    local ys
    if u ~= nil then
        if not is_tensor(u) then fail(fmt("%s: expected a tensor as the second operand, got %s", fname, typename(u))) end
        local ok, e = pcall(u.expand_as, u, self)
        if not ok then
            fail(fmt("%s: the tensor of shape %s does not broadcast to %s", fname, shape_of_str(u), shape_of_str(self)))
        end
        ys = e:reshape(-1):totable()
        if type(ys) == "number" then ys = {ys} end
    end
    -- int64 values reach Lua as doubles: past 2^53 they would come back changed
    for _, lt in ipairs({{xs, self}, {ys or {}, u}}) do
        local list, owner = lt[1], lt[2]
        if owner and owner:dtype() == "int64" then
            for i = 1, #list do
                if math.abs(list[i]) >= 2 ^ 53 then
                    fail(fmt("%s: int64 element %d is beyond 2^53, which a Lua number cannot hold exactly", fname, i))
                end
            end
        end
    end
    local out = {}
    for i = 1, #xs do
        local x = xs[i]
        local r
        if ys then r = fn(x, ys[i]) else r = fn(x) end
        if r == nil then r = x end
        if type(r) == "boolean" then r = r and 1 or 0 end
        if type(r) ~= "number" then
            fail(fmt("%s: the function returned %s for element %d (expected a number)", fname, typename(r), i))
        end
        out[i] = r
    end
    if #out == 0 then return self end
    local t = as_op(fname, "tensor", tensor.tensor, out, {dtype = self:dtype(), device = self:device()})
    return self:copy_(t:view(self:shape()))
end
function Tensor:apply_(fn, extra)
    if extra ~= nil then extra_arg("apply_", "(fn)", extra) end
    return elementwise_lua("apply_", self, fn)
end
function Tensor:map_(u, fn, extra)
    if extra ~= nil then extra_arg("map_", "(u, fn)", extra) end
    return elementwise_lua("map_", self, fn, u)
end

return M
