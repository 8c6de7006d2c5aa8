-- ordo.nn.functional: the stateless forms of the layers and losses.
--
-- Each function is made of differentiable tensor ops (ordo.autograd records
-- them), so it needs no backward of its own.  Targets of classification
-- losses are class indices counted from 1 (int64), like every index in ordo.
local util = require "ordo.util"
local tensor = require "ordo.tensor"
local autograd = require "ordo.autograd"
local grad_ops = require "ordo.grad_ops" -- installed by ordo.autograd: its raw (unrecorded) ops

local fail, typename = util.fail, util.typename
local is_int = util.is_int
local is_tensor, shape_of = tensor.is_tensor, tensor.shape_of
local fmt = string.format
local type, pairs, ipairs, tostring, getmetatable, unpack = type, pairs, ipairs, tostring, getmetatable, unpack

local M = {}

-- The name an F function reports under: its own, or the module's that
-- calls it (who, internal).  A user's further argument lands in who: a
-- non-string there was dropped unseen (F.relu(x, false, 3), F.linear(x, w,
-- b, 5), Torch's positional extras), so it raises.
-- A layer passes its own name as the last argument; a user's further
-- argument lands there too. Torch's positional reduction,
-- F.binary_cross_entropy(p, y, nil, "sum"), would otherwise rename the
-- errors and be dropped unseen (a mean loss where a sum was asked for).
local REDUCTION_WORDS = {mean = true, sum = true, none = true, batchmean = true, elementwise_mean = true}
local function name_of(who, own, extra)
    if extra ~= nil then
        util.fail(string.format("%s: got a further argument (%s) it does not take", own,
                                type(extra) == "string" and string.format("%q", extra) or util.show(extra)))
    end
    if who == nil then return own end
    if type(who) ~= "string" then
        util.fail(string.format("%s: got a further argument (%s) it does not take", own, util.typename(who)))
    end
    if REDUCTION_WORDS[who] then
        util.fail(string.format('%s: got a further argument ("%s") it does not take (a reduction goes in the options: '
                                .. '{reduction = "%s"})', own, who, who))
    end
    return who
end

local shape_str = tensor.shape_str_of

local check_tensor = tensor.check_tensor
local check_devices = tensor.check_devices
local check_float, check_same_dtype = tensor.check_float, tensor.check_same_dtype

-- linear's node (a function of its own so that linear holds no closure,
-- which LuaJIT would not compile).
local function record_linear(x2, weight, bias, y)
    autograd.record("linear", y, {x2, weight, bias, n = 3}, function(g)
        local gx, gw, gb
        if x2._rg then gx = g:matmul(weight) end
        if weight._rg then gw = g:t():matmul(x2) end
        if bias ~= nil and bias._rg then gb = g:sum(1) end
        return gx, gw, gb
    end, {x2, weight})
end

-- Torch's bilinear(x1, x2, weight [, bias]): y[..., o] = x1[..., i]
-- weight[o, i, j] x2[..., j] + bias[o]; x1 (..., in1), x2 (..., in2) of
-- the same leading dims, weight (out, in1, in2), bias (out) or nil.
function M.bilinear(x1, x2, weight, bias, who, extra)
    local fname = name_of(who, "bilinear", extra)
    check_tensor(fname, "input1", x1)
    check_tensor(fname, "input2", x2)
    check_tensor(fname, "weight", weight)
    check_devices(fname, x1, x2, weight, bias)
    if weight:dim() ~= 3 then
        fail(fmt("%s: weight must be 3-D (out_features x in1_features x in2_features), got shape %s", fname,
                 shape_str(weight)))
    end
    local nout, n1, n2 = weight:size(1), weight:size(2), weight:size(3)
    if bias ~= nil then
        check_tensor(fname, "bias", bias)
        if bias:dim() ~= 1 or bias:size(1) ~= nout then
            fail(fmt("%s: bias must have shape %d (one per output of weight %s), got %s", fname, nout,
                     shape_str(weight), shape_str(bias)))
        end
    end
    check_same_dtype(fname, x1, "input2", x2)
    check_same_dtype(fname, x1, "weight", weight)
    check_same_dtype(fname, x1, "bias", bias)
    if x1:dim() == 0 or x1:size(-1) ~= n1 then
        fail(fmt("%s: input1 of shape %s does not match weight %s (expected a last dim of %d)", fname,
                 shape_str(x1), shape_str(weight), n1))
    end
    if x2:dim() == 0 or x2:size(-1) ~= n2 then
        fail(fmt("%s: input2 of shape %s does not match weight %s (expected a last dim of %d)", fname,
                 shape_str(x2), shape_str(weight), n2))
    end
    local s1, s2 = shape_of(x1), shape_of(x2)
    if #s1 ~= #s2 then
        fail(fmt("%s: input1 %s and input2 %s must have the same leading dims", fname, shape_str(x1), shape_str(x2)))
    end
    for i = 1, #s1 - 1 do
        if s1[i] ~= s2[i] then
            fail(fmt("%s: input1 %s and input2 %s must have the same leading dims", fname, shape_str(x1),
                     shape_str(x2)))
        end
    end
    local a = x1:reshape(-1, n1)
    local b = x2:reshape(-1, n2)
    local n = a:size(1)
    -- (n, in1) @ (in1, out·in2) -> (n, out, in2), times x2 (n, 1, in2), summed over in2
    local t = a:matmul(weight:permute(2, 1, 3):reshape(n1, nout * n2)):view(n, nout, n2)
    local y = (t * b:view(n, 1, n2)):sum(3)
    if bias ~= nil then y = y + bias end
    s1[#s1] = nout
    return y:reshape(s1)
end

-- Torch's local_response_norm(x, size [, alpha = 1e-4, beta = 0.75, k = 1]):
-- x (N, C, *) divided by (k + alpha/size · the sum of squares over size
-- neighbouring channels, zero padded)^beta (AlexNet's normalisation).
function M.local_response_norm(x, size, alpha, beta, k, who, extra)
    local fname = name_of(who, "local_response_norm", extra)
    check_tensor(fname, "input", x)
    if not is_int(size) or size < 1 then
        fail(fmt("%s: size must be an integer >= 1, got %s", fname,
                 type(size) == "number" and tostring(size) or typename(size)))
    end
    alpha, beta, k = alpha == nil and 1e-4 or alpha, beta == nil and 0.75 or beta, k == nil and 1 or k
    for _, e in ipairs({{"alpha", alpha}, {"beta", beta}, {"k", k}}) do
        if type(e[2]) ~= "number" or e[2] ~= e[2] then
            fail(fmt("%s: %s must be a number, got %s", fname, e[1], type(e[2]) == "number" and "nan" or typename(e[2])))
        end
    end
    if x:dim() < 3 then
        fail(fmt("%s: expected an input of 3 dims or more (N, C, *), got shape %s", fname, shape_str(x)))
    end
    if x:dtype() ~= "float32" and x:dtype() ~= "float64" then
        fail(fmt("%s: input must be float32 or float64, got %s (convert it with :float())", fname, x:dtype()))
    end
    local c = x:size(2)
    local sq = x * x
    local before, after = math.floor(size / 2), math.floor((size - 1) / 2)
    local parts = {}
    if before > 0 then
        local s0 = shape_of(x)
        s0[2] = before
        parts[#parts + 1] = tensor.zeros(s0, tensor.like(x))
    end
    parts[#parts + 1] = sq
    if after > 0 then
        local s1 = shape_of(x)
        s1[2] = after
        parts[#parts + 1] = tensor.zeros(s1, tensor.like(x))
    end
    local padded = #parts > 1 and tensor.cat(parts, 2) or sq
    local sum = padded:narrow(2, 1, c)
    for i = 2, size do sum = sum + padded:narrow(2, i, c) end
    return x / (sum * (alpha / size) + k):pow(beta)
end

-- Torch's channel_shuffle(x, groups): the C channels of x (N, C, *) as
-- groups × C/groups, transposed (C/groups × groups): channels interleaved.
function M.channel_shuffle(x, groups, who, extra)
    local fname = name_of(who, "channel_shuffle", extra)
    check_tensor(fname, "input", x)
    if not is_int(groups) or groups < 1 then
        fail(fmt("%s: groups must be an integer >= 1, got %s", fname,
                 type(groups) == "number" and tostring(groups) or typename(groups)))
    end
    if x:dim() < 3 then
        fail(fmt("%s: expected an input of 3 dims or more (N, C, *), got shape %s", fname, shape_str(x)))
    end
    local c = x:size(2)
    if c % groups ~= 0 then
        fail(fmt("%s: the %d channels cannot be split into %d groups", fname, c, groups))
    end
    local s = shape_of(x)
    local v = {s[1], groups, c / groups}
    for i = 3, #s do v[#v + 1] = s[i] end
    return x:reshape(v):transpose(2, 3):reshape(s)
end

-- y = x W^T + b; x (..., in), weight (out, in), bias (out) or nil.
-- Its own backward: the weight's gradient is computed as g^T x, straight in
-- the weight's layout (through matmul's backward it would be the transpose
-- of x^T g, and then need a transposing copy).
function M.linear(x, weight, bias, who, extra)
    local fname = name_of(who, "linear", extra)
    check_tensor(fname, "input", x)
    check_tensor(fname, "weight", weight)
    check_devices(fname, x, weight, bias)
    if weight:dim() ~= 2 then
        fail(fmt(fname .. ": weight must be 2-D (out_features x in_features), got shape %s", shape_str(weight)))
    end
    if bias ~= nil then
        -- (one of another shape would broadcast in the forward, and its gradient come back of shape out)
        check_tensor(fname, "bias", bias)
        if bias:dim() ~= 1 or bias:size(1) ~= weight:size(1) then
            fail(fmt(fname .. ": bias must have shape %d (one per output of weight %s), got %s", weight:size(1),
                     shape_str(weight), shape_str(bias)))
        end
    end
    -- one dtype (Torch's; mixed, the product promoted: float64 out of a float32 layer, the weight's
    -- gradient float32; an integer input came out float32)
    check_same_dtype(fname, x, "weight", weight)
    check_same_dtype(fname, x, "bias", bias)
    local nin = weight:size(2)
    if x:dim() == 0 or x:size(-1) ~= nin then
        fail(fmt(fname .. ": input of shape %s does not match weight %s (expected a last dim of %d)",
                 shape_str(x), shape_str(weight), nin))
    end
    local s = shape_of(x)
    local x2 = x
    if x:dim() ~= 2 then x2 = x:reshape(-1, nin) end
    -- the raw ops record nothing: this op's node is its own
    local raw = grad_ops.raw
    local y = grad_ops.raw_matmul(x2, raw.t(weight))
    if bias ~= nil then raw.add_(y, bias) end
    if autograd.needs(x2, weight, bias) then record_linear(x2, weight, bias, y) end
    if x:dim() ~= 2 then
        s[#s] = weight:size(1)
        y = y:reshape(s)
    end
    return y
end

-- one_hot(indices [, num_classes]): int64, indices' shape plus a last dim
-- of num_classes (default: the largest index), 1 at each index (counting
-- from 1, as every index in ordo) and 0 elsewhere.  Waits, to check that
-- every index is in 1..num_classes.
local function one_hot(indices, n)
    check_tensor("one_hot", "indices", indices)
    local dt = indices:dtype()
    if dt == "float32" or dt == "float64" then
        fail("one_hot: indices must be an integer tensor, got " .. dt)
    end
    if n ~= nil and (type(n) ~= "number" or n < 1 or not is_int(n)) then
        fail("one_hot: num_classes must be an integer >= 1, got " .. tostring(n))
    end
    if indices:numel() == 0 then
        if n == nil then fail("one_hot: num_classes is needed for an empty tensor of indices") end
    else
        local lo, hi = indices:min():item(), indices:max():item()
        n = n or hi
        if lo < 1 or hi > n then
            fail(fmt("one_hot: index %d out of range 1..%d (indices of shape %s)", lo < 1 and lo or hi, n,
                     shape_str(indices)))
        end
    end
    if indices:dim() >= 8 then -- (unsqueeze below would name itself)
        fail(fmt("one_hot: indices of shape %s: the result would have %d dims (at most 8 supported)",
                 shape_str(indices), indices:dim() + 1))
    end
    local classes = tensor.arange(1, n + 1, tensor.like(indices, dt))
    return indices:unsqueeze(-1):eq(classes):to("int64")
end
-- (a failure of the ops it is made of named after it: "one_hot: arange:
-- out of memory ...")
function M.one_hot(indices, n) return util.own_errors("one_hot", pcall(one_hot, indices, n)) end

-- Torch's inplace flag (relu(x, inplace), elu(x, alpha, inplace)...):
-- true is refused, as dropout's; it was ignored, x keeping its values
-- while the caller believed it changed.
local function no_inplace(fname, inplace)
    if inplace ~= nil and inplace ~= false then
        fail(fmt("%s: in-place is not supported (got inplace %s): use the result", fname, util.show(inplace)))
    end
end
-- relu, tanh, sigmoid: the tensor methods, as functions
for _, name in ipairs({"relu", "tanh", "sigmoid"}) do
    M[name] = function(x, inplace, who)
        local fname = name_of(who, name)
        check_tensor(fname, "input", x)
        if name == "relu" then no_inplace(fname, inplace) end
        return x[name](x)
    end
end
-- x * sigmoid(x) (also called swish)
function M.silu(x, inplace, who, extra)
    local fname = name_of(who, "silu", extra)
    check_tensor(fname, "input", x)
    no_inplace(fname, inplace)
    return x * x:sigmoid()
end
-- GELU.  approximate = "none" (the default, as Torch's: the exact form):
-- 0.5 x (1 + erf(x / sqrt 2)); "tanh" (Torch's approximate = "tanh"):
-- 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
local SQRT_HALF = math.sqrt(0.5)
function M.gelu(x, approximate, who, extra)
    local fname = name_of(who, "gelu", extra)
    check_tensor(fname, "input", x)
    if approximate == "tanh" then
        return x * 0.5 * ((x + x * x * x * 0.044715) * math.sqrt(2 / math.pi)):tanh():add(1)
    end
    if approximate ~= nil and approximate ~= "none" then
        fail(fmt(fname .. ": approximate must be \"tanh\" or \"none\", got %s", type(approximate) == "string" and
                 fmt("%q", approximate) or typename(approximate)))
    end
    return x * 0.5 * (x * SQRT_HALF):erf():add(1)
end
-- x where x > 0, slope * x elsewhere (slope 0.01 by default).  A where,
-- not relu(x) - slope relu(-x): at x = 0 the gradient is then slope, as
-- Torch's (relu's gradient is 0 there on both sides, which gave 0).
function M.leaky_relu(x, slope, inplace, who, extra)
    local fname = name_of(who, "leaky_relu", extra)
    check_tensor(fname, "input", x)
    no_inplace(fname, inplace)
    slope = slope or 0.01
    if type(slope) ~= "number" then fail(fname .. ": slope must be a number, got " .. typename(slope)) end
    return tensor.where(x:gt(0), x, x * slope)
end
-- log(1 + exp(x)), without overflow: relu(x) + log1p(exp(-|x|)), with a
-- node of its own whose gradient is sigmoid(x): through relu and abs the
-- chain rule gave 0 at x = 0 (both kinks' gradients are 0 there) instead
-- of 1/2, so a logit of exactly 0 (a zero-initialised output layer) got
-- the wrong gradient in binary_cross_entropy_with_logits.  The value comes
-- from a detached x (nothing recorded); the node is made in a function of
-- its own (no closure in softplus).
--
-- softplus(x [, beta = 1 [, threshold = 20]]), as Torch's: log(1 +
-- exp(beta x)) / beta, and x itself where beta x > threshold (the
-- gradient there 1, elsewhere sigmoid(beta x)).  Both were dropped unseen.
local function record_softplus(x, y, beta, threshold)
    autograd.record("softplus", y, {x, n = 1}, function(g)
        local bx = beta == 1 and x or x * beta
        local s = bx:sigmoid()
        if threshold < math.huge then s = tensor.where(bx:gt(threshold), 1, s) end
        return g * s
    end, {x})
end
function M.softplus(x, beta, threshold, who, extra)
    local fname = name_of(who, "softplus", extra)
    check_tensor(fname, "input", x)
    if beta == nil then beta = 1 end
    if threshold == nil then threshold = 20 end
    if type(beta) ~= "number" or beta ~= beta or beta == 0 or beta == math.huge or beta == -math.huge then
        fail(fname .. ": beta must be a finite nonzero number, got " .. util.show(beta))
    end
    if type(threshold) ~= "number" or threshold ~= threshold then
        fail(fname .. ": threshold must be a number, got " .. util.show(threshold))
    end
    -- integers in the default float dtype, as exp and log take them (-|x| of uint8 raised "neg: dtype uint8 not supported")
    if x:dtype() ~= "float32" and x:dtype() ~= "float64" then x = x:to(tensor.get_default_dtype()) end
    local xd = x._rg and x:detach() or x
    local bx = beta == 1 and xd or xd * beta
    local y = bx:relu() + (-bx:abs()):exp():log1p()
    if beta ~= 1 then y = y / beta end
    if threshold < math.huge then y = tensor.where(bx:gt(threshold), xd, y) end
    if autograd.needs(x) then record_softplus(x, y, beta, threshold) end
    return y
end
-- the same as -softplus(-x): log(sigmoid(x)) without underflow to -inf
function M.logsigmoid(x, who, extra)
    local fname = name_of(who, "logsigmoid", extra)
    check_tensor(fname, "input", x)
    if x:dtype() ~= "float32" and x:dtype() ~= "float64" then x = x:to(tensor.get_default_dtype()) end -- (uint8: no -x)
    return -M.softplus(-x, 1, math.huge)
end
-- ELU: x where x > 0, alpha (e^x - 1) elsewhere (alpha 1 by default).
-- The negative part is expm1 of min(x, 0) (so a large x cannot overflow
-- it), taken by clamp, whose gradient passes at x = 0: the gradient there
-- is alpha, Torch's (x <= 0 is its negative branch).
function M.elu(x, alpha, inplace, who, extra)
    local fname = name_of(who, "elu", extra)
    check_tensor(fname, "input", x)
    no_inplace(fname, inplace)
    alpha = alpha or 1
    if type(alpha) ~= "number" then fail(fname .. ": alpha must be a number, got " .. typename(alpha)) end
    return x:relu() + x:clamp(nil, 0):expm1() * alpha
end
-- SELU: ELU scaled so that activations keep mean 0 and variance 1
-- (Klambauer et al.'s constants, as Torch).
local SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
function M.selu(x, inplace, who, extra)
    local fname = name_of(who, "selu", extra)
    check_tensor(fname, "input", x)
    no_inplace(fname, inplace)
    return M.elu(x, SELU_ALPHA) * SELU_SCALE
end
-- x clamped to [lo, hi] with Torch's hardtanh gradient: g strictly inside
-- (lo, hi), 0 at the bounds too.  clamp's own gradient passes at the bounds
-- (Torch's clamp does), which gave ReLU6 a gradient of 1 at 0 and 6.  The
-- node is made in a function of its own (no closure in the callers).
local function record_hardtanh(name, x, lo, hi, y)
    autograd.record(name, y, {x, n = 1}, function(g)
        -- g selected away at and beyond the bounds (Torch's where), not
        -- multiplied by a 0/1 mask: an inf gradient there (relu6(x):sqrt()
        -- at x <= 0) made NaN where Torch gives 0; a NaN x passes g, as Torch's
        return g:masked_fill(x:le(lo):logical_or(x:ge(hi)), 0)
    end, {x})
end
local function hardtanh(name, x, lo, hi)
    local y = grad_ops.raw.clamp(x, lo, hi) -- records nothing: the node is the one below
    if autograd.needs(x) then record_hardtanh(name, x, lo, hi, y) end
    return y
end

-- Hardtanh: x clamped to [min_val, max_val] (-1 and 1 by default);
-- ReLU6 is Hardtanh(0, 6).  The gradient is 0 at the bounds, as Torch's.
function M.hardtanh(x, min_val, max_val, inplace, who, extra)
    local fname = name_of(who, "hardtanh", extra)
    check_tensor(fname, "input", x)
    no_inplace(fname, inplace)
    min_val, max_val = min_val or -1, max_val or 1
    if type(min_val) ~= "number" or type(max_val) ~= "number" or min_val > max_val then
        fail(fmt(fname .. ": expected numbers min_val <= max_val, got %s and %s", tostring(min_val), tostring(max_val)))
    end
    return hardtanh("hardtanh", x, min_val, max_val)
end
function M.relu6(x, inplace, who, extra)
    local fname = name_of(who, "relu6", extra)
    check_tensor(fname, "input", x)
    no_inplace(fname, inplace)
    return hardtanh("relu6", x, 0, 6)
end
-- relu6(x + 3) / 6 and x times it (MobileNetV3's cheap sigmoid and swish).
-- Torch's gradients at the kinks x = -3 and 3: hardsigmoid's is 0 there
-- (hardtanh's), hardswish's is x/3 + 1/2 (-0.5 and 1.5), which the product
-- rule gives with clamp's gradient, passing at the bounds.
function M.hardsigmoid(x, inplace, who, extra)
    local fname = name_of(who, "hardsigmoid", extra)
    check_tensor(fname, "input", x)
    no_inplace(fname, inplace)
    return hardtanh("hardsigmoid", x + 3, 0, 6) / 6
end
function M.hardswish(x, inplace, who, extra)
    local fname = name_of(who, "hardswish", extra)
    check_tensor(fname, "input", x)
    no_inplace(fname, inplace)
    return x * ((x + 3):clamp(0, 6) / 6)
end
-- Mish: x tanh(softplus(x)).
function M.mish(x, inplace, who, extra)
    local fname = name_of(who, "mish", extra)
    check_tensor(fname, "input", x)
    no_inplace(fname, inplace)
    return x * M.softplus(x, 1, math.huge):tanh()
end
-- CELU(alpha = 1): max(0, x) + min(0, alpha (exp(x / alpha) - 1)), Torch's.
function M.celu(x, alpha, inplace, who, extra)
    local fname = name_of(who, "celu", extra)
    check_tensor(fname, "input", x)
    no_inplace(fname, inplace)
    alpha = alpha or 1
    if type(alpha) ~= "number" or alpha == 0 or alpha ~= alpha then
        fail(fname .. ": alpha must be a nonzero number, got " .. util.show(alpha))
    end
    return x:relu() + (x:clamp(nil, 0) / alpha):expm1() * alpha
end
-- threshold(x, threshold, value): x where x > threshold, value elsewhere.
function M.threshold(x, threshold, value, inplace, who, extra)
    local fname = name_of(who, "threshold", extra)
    check_tensor(fname, "input", x)
    no_inplace(fname, inplace)
    if type(threshold) ~= "number" or type(value) ~= "number" then
        fail(fmt("%s: expected numbers threshold and value, got %s and %s", fname, util.show(threshold),
                 util.show(value)))
    end
    return tensor.where(x:gt(threshold), x, value)
end
-- x - tanh(x)
function M.tanhshrink(x, who, extra)
    local fname = name_of(who, "tanhshrink", extra)
    check_tensor(fname, "input", x)
    return x - x:tanh()
end
-- softshrink(x, lambd = 0.5): x - lambd above lambd, x + lambd below
-- -lambd, 0 between; hardshrink(x, lambd = 0.5): x where |x| > lambd, else 0.
local function shrink_lambd(fname, lambd)
    lambd = lambd == nil and 0.5 or lambd
    if type(lambd) ~= "number" or not (lambd >= 0) or lambd == math.huge then
        fail(fname .. ": lambd must be a finite number >= 0, got " .. util.show(lambd))
    end
    return lambd
end
function M.softshrink(x, lambd, who, extra)
    local fname = name_of(who, "softshrink", extra)
    check_tensor(fname, "input", x)
    lambd = shrink_lambd(fname, lambd)
    return tensor.where(x:gt(lambd), x - lambd, tensor.where(x:lt(-lambd), x + lambd, 0))
end
function M.hardshrink(x, lambd, who, extra)
    local fname = name_of(who, "hardshrink", extra)
    check_tensor(fname, "input", x)
    lambd = shrink_lambd(fname, lambd)
    return tensor.where(x:abs():gt(lambd), x, 0)
end
-- glu(x, dim = -1): a * sigmoid(b), a and b the halves of x along dim.
function M.glu(x, dim, who, extra)
    local fname = name_of(who, "glu", extra)
    check_tensor(fname, "input", x)
    dim = dim == nil and -1 or dim
    if x:dim() == 0 then fail(fname .. ": a 0-dim input has no dim to halve") end
    local d = tensor.norm_dim(fname, x, dim) + 1
    local n = x:size(d)
    if n % 2 ~= 0 then
        fail(fmt("%s: dim %d of input %s must have an even size to halve, got %d", fname, d, shape_str(x), n))
    end
    return x:narrow(d, 1, n / 2) * x:narrow(d, n / 2 + 1, n / 2):sigmoid()
end
-- x / (1 + |x|)
function M.softsign(x, who, extra)
    local fname = name_of(who, "softsign", extra)
    check_tensor(fname, "input", x)
    return x / (x:abs() + 1)
end
-- PReLU: x where x > 0, weight * x elsewhere; weight has one element, or
-- one per channel (dim 2 of x).
function M.prelu(x, weight, who, extra)
    local fname = name_of(who, "prelu", extra)
    check_tensor(fname, "input", x)
    check_tensor(fname, "weight", weight)
    check_devices(fname, x, weight)
    check_same_dtype(fname, x, "weight", weight)
    local n = weight:numel()
    if weight:dim() ~= 1 or (n ~= 1 and (x:dim() < 2 or x:size(2) ~= n)) then
        fail(fmt(fname .. ": weight must have shape 1 or the %s channels of input %s, got %s",
                 x:dim() >= 2 and tostring(x:size(2)) or "(no)", shape_str(x), shape_str(weight)))
    end
    local w = weight
    if n > 1 then
        local s = {1, n}
        for i = 3, x:dim() do s[i] = 1 end
        w = weight:view(s)
    end
    return tensor.where(x:gt(0), x, x * w) -- as leaky_relu: the gradient at 0 is the slope, Torch's
end
-- softmax(x, dim [, dtype]), log_softmax, softmin (softmax of -x): dtype
-- as Torch's, the input cast to it first (it was ignored)
function M.softmax(x, dim, dtype)
    check_tensor("softmax", "input", x)
    return x:softmax(dim, dtype)
end
function M.log_softmax(x, dim, dtype)
    check_tensor("log_softmax", "input", x)
    return x:log_softmax(dim, dtype)
end
local function softmax_of_neg(x, dim, dtype) return (-x):softmax(dim, dtype) end
function M.softmin(x, dim, dtype)
    check_tensor("softmin", "input", x)
    local ok, r = pcall(softmax_of_neg, x, dim, dtype)
    if not ok then error((tostring(r):gsub("softmax: ", "softmin: ", 1)), 0) end
    return r
end

-- Inverted dropout: in training, zeroes each element with probability p
-- (mask from the engine RNG) and scales the rest by 1/(1-p).
-- p = 1 (as Torch) drops everything: x * 0, zeros with a zero gradient.
-- training is true, false or nil (true): another value (Torch's 0 or 1,
-- a string) was taken as true, whatever it meant.
local function check_p(fname, p, training, inplace)
    if inplace ~= nil and inplace ~= false then -- (Torch's inplace = True was ignored: x kept its values)
        fail(fmt("%s: in-place dropout is not supported (got inplace %s): use the result", fname, tostring(inplace)))
    end
    if p == nil then p = 0.5 end
    if type(p) ~= "number" or not (p >= 0 and p <= 1) then -- (NaN too)
        fail(fmt("%s: p must be a number in [0, 1], got %s", fname, tostring(p)))
    end
    if training ~= nil and type(training) ~= "boolean" then
        fail(fmt("%s: training must be true or false, got %s", fname, typename(training)))
    end
    return p
end

-- dropout scales what it keeps by 1 / (1 - p): a float input only when it
-- drops (an integer one came back int32 or float32 depending on p, 0.5 or
-- 0.3); in eval mode, or with p = 0, any input passes through, as Torch's
local function check_float_input(fname, x)
    check_tensor(fname, "input", x)
    local dt = x:dtype()
    if dt ~= "float32" and dt ~= "float64" then
        fail(fmt("%s: input must be float32 or float64, got %s (convert it with :float())", fname, dt))
    end
end

function M.dropout(x, p, training, inplace, who, extra)
    local fname = name_of(who, "dropout", extra)
    p = check_p(fname, p, training, inplace)
    check_tensor(fname, "input", x)
    if training == false or p == 0 then return x end
    check_float_input(fname, x)
    if p == 1 then return x * 0 end
    local mask = tensor.empty_like(x):bernoulli_(1 - p)
    return x * mask * (1 / (1 - p))
end

-- Channel dropout: in training, zeroes each whole channel (dim 2 of x
-- N×C×…; dim 1 of an unbatched C×H×W) with probability p and scales the
-- rest by 1/(1-p) -- for convolutional features, whose neighbours are
-- too alike for element dropout to regularise.
-- Torch's alpha_dropout(x, p = 0.5, training = false) and
-- feature_alpha_dropout (whole channels of N×C×…): dropout for SELU
-- networks; a dropped value becomes SELU's negative saturation, and all is
-- scaled and shifted (a, b) so that the mean and variance stay 0 and 1.
-- As Torch's, training defaults to false here (the modules pass theirs).
local SELU_ALPHA = 1.7580993408473766 -- (SELU's scale · alpha)
local function alpha_dropout(fname, feature, x, p, training, inplace)
    p = check_p(fname, p, training, inplace)
    check_tensor(fname, "input", x)
    if feature and x:dim() < 2 then
        fail(fmt("%s: expected an input of 2 dims or more (N, C, ...), got shape %s", fname, shape_str(x)))
    end
    if not training or p == 0 then return x end
    check_float_input(fname, x)
    if p == 1 then return x * 0 end
    local s = shape_of(x)
    if feature then for i = 3, #s do s[i] = 1 end end
    local keep = tensor.empty(s, tensor.like(x)):bernoulli_(1 - p)
    local a = 1 / math.sqrt((SELU_ALPHA * SELU_ALPHA * p + 1) * (1 - p))
    local b = (keep - 1) * (SELU_ALPHA * a) + SELU_ALPHA * a * p
    return x * (keep * a) + b
end
function M.alpha_dropout(x, p, training, inplace, who, extra)
    return alpha_dropout(name_of(who, "alpha_dropout", extra), false, x, p, training, inplace)
end
function M.feature_alpha_dropout(x, p, training, inplace, who, extra)
    return alpha_dropout(name_of(who, "feature_alpha_dropout", extra), true, x, p, training, inplace)
end

-- dropout1d: N×C×L or C×L, dropout3d: N×C×D×H×W or C×D×H×W, as Torch's.
local CHANNEL_SHAPES = {[1] = {"(N, C, L)", "(C, L)"}, [2] = {"(N, C, H, W)", "(C, H, W)"},
                        [3] = {"(N, C, D, H, W)", "(C, D, H, W)"}}
local function channel_dropout(fname, nsp, x, p, training, inplace)
    p = check_p(fname, p, training, inplace)
    check_tensor(fname, "input", x)
    if x:dim() ~= nsp + 1 and x:dim() ~= nsp + 2 then
        fail(fmt("%s: expected a %d-D input %s or a %d-D one %s, got shape %s", fname, nsp + 2, CHANNEL_SHAPES[nsp][1],
                 nsp + 1, CHANNEL_SHAPES[nsp][2], shape_str(x)))
    end
    if training == false or p == 0 then return x end
    check_float_input(fname, x)
    if p == 1 then return x * 0 end
    local s = shape_of(x)
    for i = x:dim() - nsp + 1, x:dim() do s[i] = 1 end
    local mask = tensor.empty(s, tensor.like(x)):bernoulli_(1 - p)
    return x * mask * (1 / (1 - p))
end
function M.dropout2d(x, p, training, inplace, who, extra)
    return channel_dropout(name_of(who, "dropout2d", extra), 2, x, p, training, inplace)
end
function M.dropout1d(x, p, training, inplace, who, extra)
    return channel_dropout(name_of(who, "dropout1d", extra), 1, x, p, training, inplace)
end
function M.dropout3d(x, p, training, inplace, who, extra)
    return channel_dropout(name_of(who, "dropout3d", extra), 3, x, p, training, inplace)
end

local REDUCTIONS = {mean = true, sum = true, none = true}

local function reduce(fname, loss, reduction)
    reduction = reduction or "mean"
    if not REDUCTIONS[reduction] then
        fail(fmt("%s: reduction must be 'mean', 'sum' or 'none', got %s", fname, tostring(reduction)))
    end
    if reduction == "mean" then return loss:mean() end
    if reduction == "sum" then return loss:sum() end
    return loss
end

-- A loss's options: reduction, the named numeric ones and the named
-- tensor ones, nothing else.
local function loss_opts(fname, opts, numeric, tensors)
    -- Torch's positional weight or reduction: say where it goes
    if is_tensor(opts) and tensors and tensors.weight then
        fail(fmt("%s: options must be a table, got %s (a weight goes in the options: {weight = w})", fname,
                 typename(opts)))
    elseif type(opts) == "string" then
        fail(fmt('%s: options must be a table, got string (a reduction goes in the options: {reduction = "%s"})',
                 fname, opts))
    end
    opts = util.check_opts(fname, opts)
    for k, v in pairs(opts) do
        if tensors and tensors[k] then
            if not is_tensor(v) then fail(fmt("%s: option %s must be a tensor, got %s", fname, k, typename(v))) end
        elseif k ~= "reduction" and not (numeric and numeric[k]) then
            fail(fmt("%s: unknown option '%s'", fname, tostring(k)))
        elseif k ~= "reduction" and type(v) ~= "number" then
            fail(fmt("%s: option %s must be a number, got %s", fname, k, typename(v)))
        end
    end
    return opts
end

local function check_same_shape(fname, input, target)
    check_tensor(fname, "input", input)
    check_tensor(fname, "target", target)
    if tensor.shape_str(shape_of(input)) ~= tensor.shape_str(shape_of(target)) then
        fail(fmt("%s: target of shape %s does not match input %s", fname, shape_str(target), shape_str(input)))
    end
    check_devices(fname, input, target)
end

local function check_target(fname, input, target)
    check_tensor(fname, "target", target)
    local dt = target:dtype()
    if dt ~= "int64" and dt ~= "int32" then
        fail(fmt("%s: target must hold class indices (int64, from 1), got %s", fname, dt))
    end
    if target:dim() ~= 1 or target:size(1) ~= input:size(1) then
        fail(fmt("%s: target of shape %s does not match input %s (expected %d class indices)", fname,
                 shape_str(target), shape_str(input), input:size(1)))
    end
end

-- The class-index losses' common part, Torch's rules: logp N×C, target N.
-- opts.weight (C) weighs each sample by its target's class; a target equal
-- to opts.ignore_index (default -100, Torch's: padding written for Torch
-- works here, and no class, counted from 1, can be -100) counts for
-- nothing; smoothing = e puts e of the
-- target's weight evenly on every class.  "mean" divides by the summed
-- weights of the targets kept (their count without weights).
local function class_nll(fname, logp, target, opts, smoothing)
    local N, C = logp:size(1), logp:size(2)
    local w, ii = opts.weight, opts.ignore_index
    if ii == nil then ii = -100 end
    check_devices(fname, logp, target, w)
    if w ~= nil and (w:dim() ~= 1 or w:size(1) ~= C or w:dtype() ~= logp:dtype()) then
        fail(fmt("%s: weight must be a %s tensor of %d class weights, got %s %s", fname, logp:dtype(), C, w:dtype(),
                 shape_str(w)))
    end
    if not is_int(ii) then fail(fmt("%s: ignore_index must be an integer, got %s", fname, tostring(ii))) end
    local keep = target:ne(ii)
    local t = tensor.where(keep, target, tensor.ones_like(target))
    -- a class index out of range fails the loss when the gather runs (no
    -- host wait per loss to check it here), named as the target's:
    -- "cross_entropy (target): gather: index 4 out of range for dim
    -- 2 of size 3"
    local who = fname .. " (target)"
    local loss = -logp:gather(2, t:view(-1, 1), who):view(-1)
    local wt = w and w:index_select(1, t, who)
    if wt then loss = loss * wt end
    if smoothing > 0 then
        local smooth = w and -(logp * w:view(1, C)):sum(2) or -logp:sum(2)
        loss = loss * (1 - smoothing) + smooth * (smoothing / C)
    end
    local kf = keep:to(logp:dtype())
    -- the ignored rows selected away, not multiplied by 0: their logp at the
    -- stand-in class may be -inf (a masked class), and -inf * 0 made the loss NaN
    loss = tensor.where(keep, loss, 0)
    local reduction = opts.reduction or "mean"
    if not REDUCTIONS[reduction] then
        fail(fmt("%s: reduction must be 'mean', 'sum' or 'none', got %s", fname, tostring(reduction)))
    end
    if reduction == "none" then return loss end
    if reduction == "sum" then return loss:sum() end
    if wt then return loss:sum() / (wt * kf):sum() end
    return loss:sum() / kf:sum()
end

-- Negative log-likelihood of log-probabilities logp (N×C) at target (N);
-- opts: reduction, weight (C), ignore_index.
-- Inputs N×C×d1×...×dk (a class score per position: a sequence's steps,
-- an image's pixels) against targets N×d1×...×dk, as Torch: the classes
-- moved last and every position made a row, so the rules of the N×C case
-- hold over all positions ("mean" over all the positions kept); "none"
-- gives the loss in the target's shape.  input2, target2 and that shape,
-- or the arguments as they are for an N×C input.
local function positions_as_rows(fname, input, target)
    local nd = input:dim()
    if nd == 2 then return input, target, nil end
    if nd < 2 then fail(fmt("%s: expected input of shape C, NxC or NxCxd1..., got %s", fname, shape_str(input))) end
    check_tensor(fname, "target", target)
    local is, ts = shape_of(input), shape_of(target)
    local want = {is[1]}
    for i = 3, nd do want[#want + 1] = is[i] end
    if tensor.shape_str(ts) ~= tensor.shape_str(want) then
        -- scores with the classes last (N x T x C, a sequence model's
        -- output) against N x T: say where the classes go
        local last = {unpack(is, 1, nd - 1)}
        local hint = ""
        if tensor.shape_str(ts) == tensor.shape_str(last) then
            local perm = {1, nd}
            for i = 2, nd - 1 do perm[#perm + 1] = i end
            hint = fmt("; the classes are dim 2 (N x C x d1...): for scores with the classes last pass " ..
                       "input:permute(%s) or input:reshape(-1, %d) against target:reshape(-1)", table.concat(perm, ", "),
                       is[nd])
        end
        fail(fmt("%s: target of shape %s does not match input %s (expected class indices of shape %s)%s", fname,
                 shape_str(target), shape_str(input), tensor.shape_str(want), hint))
    end
    local perm = {1}
    for i = 3, nd do perm[#perm + 1] = i end
    perm[#perm + 1] = 2
    return input:permute(perm):reshape(-1, is[2]), target:reshape(-1), ts
end

local function rows_back(loss, shape)
    if shape and loss:dim() == 1 then return loss:reshape(shape) end
    return loss
end

local FLOAT_DT = {float32 = true, float64 = true}

-- An unbatched input, the C scores of one sample, as Torch's: against one
-- class index (a 0-dim target) or, for cross_entropy, C probabilities;
-- computed as a batch of one, "none" giving a 0-dim loss.
local function unbatched(fname, fn, input, target, opts, probabilities)
    check_tensor(fname, "target", target)
    if target:dim() > 1 then -- (a target of more dims than the input: the two swapped, most likely)
        fail(fmt("%s: target of shape %s for an input of shape %s (one sample's class scores): the scores come " ..
                 "first, the target second, %s(input, target)", fname, shape_str(target), shape_str(input), fname))
    end
    local soft = FLOAT_DT[target:dtype()] and probabilities
    local C = input:size(1)
    if soft then
        if target:dim() ~= 1 or target:size(1) ~= C then
            fail(fmt("%s: target of shape %s does not match input %s (one sample's class probabilities)", fname,
                     shape_str(target), shape_str(input)))
        end
        target = target:view(1, C)
    else
        if target:dim() ~= 0 then
            fail(fmt("%s: an input of shape %s (one sample's class scores) takes one class index, a 0-dim target " ..
                     "(ordo.tensor(k, \"int64\")), got shape %s%s", fname, shape_str(input), shape_str(target),
                     probabilities and " (or class probabilities of the input's shape, float)" or ""))
        end
        target = target:view(1)
    end
    local loss = fn(input:view(1, C), target, opts, fname)
    if loss:dim() > 0 then loss = loss:view({}) end
    return loss
end

function M.nll_loss(logp, target, opts, who, extra)
    local fname = name_of(who, "nll_loss", extra)
    check_tensor(fname, "input", logp)
    if logp:dim() == 1 then return unbatched(fname, M.nll_loss, logp, target, opts, false) end
    opts = loss_opts(fname, opts, {ignore_index = true}, {weight = true})
    if logp:dtype() ~= "float32" and logp:dtype() ~= "float64" then
        fail(fmt(fname .. ": input must be float32 or float64 log-probabilities, got %s", logp:dtype()))
    end
    local tshape
    logp, target, tshape = positions_as_rows(fname, logp, target)
    check_target(fname, logp, target)
    return rows_back(class_nll(fname, logp, target, opts, 0), tshape)
end

-- Cross-entropy of logits (N×C) against class indices (N, from 1);
-- opts.reduction = "mean" (default), "sum" or "none"; opts.weight (C
-- class weights) and opts.ignore_index (a target to leave out, e.g. a
-- padding token) as nll_loss; opts.label_smoothing = e in [0, 1] (Torch's range) puts e
-- of the target's weight evenly on every class, as Torch: (1 - e) (-log
-- p[target]) + e mean over classes of -log p.
-- Cross-entropy against class probabilities (soft labels: mixup,
-- distillation), Torch's: target of the input's shape, float; loss =
-- -sum over classes of weight · target · log_softmax (the target smoothed
-- to target (1 - e) + e / C first); "mean" over the rows (and positions).
local function soft_cross_entropy(fname, logits, target, opts, e)
    if tensor.shape_str(shape_of(target)) ~= tensor.shape_str(shape_of(logits)) then
        fail(fmt("%s: target of %s of shape %s: class indices must be int64 (from 1), a target of probabilities " ..
                 "(float) has the input's shape %s", fname, target:dtype(), shape_str(target), shape_str(logits)))
    end
    -- an ignore_index that no class can have (below 1: Torch's -100, or its
    -- 0-based -1 plus one) ignores nothing here, as Torch's a negative one:
    -- one criterion serves batches of class indices and of probabilities
    -- (mixup on some of them); one that names a class has no meaning here
    local ii = opts.ignore_index
    if ii ~= nil and not (is_int(ii) and ii < 1) then
        fail(fmt("%s: ignore_index %s needs class-index targets (int64), not probabilities (an ignore_index below " ..
                 "1, which no class has, is allowed)", fname, tostring(ii)))
    end
    if logits:dim() < 2 then fail(fmt("%s: expected input of shape C, NxC or NxCxd1..., got %s", fname, shape_str(logits))) end
    local C = logits:size(2)
    local t = e > 0 and target * (1 - e) + e / C or target
    local prod = logits:log_softmax(2) * t
    local w = opts.weight
    check_devices(fname, logits, w)
    if w ~= nil then
        if w:dim() ~= 1 or w:size(1) ~= C or w:dtype() ~= logits:dtype() then
            fail(fmt("%s: weight must be a %s tensor of %d class weights, got %s %s", fname, logits:dtype(), C,
                     w:dtype(), shape_str(w)))
        end
        local ws = {1, C}
        for i = 3, logits:dim() do ws[i] = 1 end
        prod = prod * w:view(ws)
    end
    return reduce(fname, -prod:sum(2), opts.reduction)
end

function M.cross_entropy(logits, target, opts, who, extra)
    local fname = name_of(who, "cross_entropy", extra)
    check_tensor(fname, "input", logits)
    if logits:dim() == 1 then return unbatched(fname, M.cross_entropy, logits, target, opts, true) end
    opts = loss_opts(fname, opts, {label_smoothing = true, ignore_index = true}, {weight = true})
    if is_tensor(target) and FLOAT_DT[target:dtype()] then
        local e = opts.label_smoothing or 0
        if not (e >= 0 and e <= 1) then
            fail(fmt(fname .. ": label_smoothing must be in [0, 1], got %s", tostring(e)))
        end
        return soft_cross_entropy(fname, logits, target, opts, e)
    end
    -- an integer target of the input's own shape: probabilities given as
    -- integers (one-hot rows), not indices ("target of shape 2x3 does not
    -- match input 2x3" said nothing of the dtype)
    if is_tensor(target) and logits:dim() >= 2 and tensor.shape_str(shape_of(target)) == tensor.shape_str(shape_of(logits)) then
        local idx_shape = shape_of(logits)
        table.remove(idx_shape, 2)
        fail(fmt(fname .. ": a target of the input's shape %s holds class probabilities and must be float32 or " ..
                 "float64, got %s (class indices: int64 of shape %s; :float() converts one-hot rows)", shape_str(logits),
                 target:dtype(), tensor.shape_str(idx_shape)))
    end
    local tshape
    logits, target, tshape = positions_as_rows(fname, logits, target)
    check_target(fname, logits, target)
    local e = opts.label_smoothing or 0
    if not (e >= 0 and e <= 1) then fail(fmt(fname .. ": label_smoothing must be in [0, 1], got %s", tostring(e))) end
    return rows_back(class_nll(fname, logits:log_softmax(2), target, opts, e), tshape)
end

-- The elementwise regression losses' target: a tensor that broadcasts to
-- the input's own shape (or a number).  One that would make the result
-- larger than the input is refused: predictions N x 1 against targets N
-- would compare every prediction with every target, N x N terms, a loss
-- that trains towards the mean (Torch warns of it; here it is an error).
local function check_target_broadcast(fname, input, target, what)
    what = what or "target"
    if not is_tensor(target) then
        if type(target) ~= "number" then
            fail(fmt("%s: %s must be a tensor or a number, got %s", fname, what, typename(target)))
        end
        return
    end
    check_devices(fname, input, target)
    local a, b = shape_of(input), shape_of(target)
    local r = tensor.broadcast_shape(fname, {a, b})
    if tensor.shape_str(r) ~= tensor.shape_str(a) then
        fail(fmt("%s: %s of shape %s would broadcast the input of shape %s to %s (every input against every " ..
                 "%s); give them the same shape (e.g. input:view(-1) or %s:view(-1, 1))", fname, what,
                 shape_str(target), shape_str(input), tensor.shape_str(r), what, what))
    end
end

-- a and b (tensors or numbers) as the default float dtype (float32
-- unless ordo.set_default_dtype says otherwise) when they would compute in an
-- integer dtype: a difference of integers wraps there (uint8 1 - 2 is 255,
-- so l1_loss of {1, 2} and {2, 1} was 128) and its square overflows int32
-- past 46341.  Float operands are left as they are.
local function as_float(a, b)
    if tensor.result_type(a, b):match("^float") then return a, b end
    if is_tensor(a) then a = a:to(tensor.get_default_dtype()) end
    if is_tensor(b) then b = b:to(tensor.get_default_dtype()) end
    return a, b
end

-- ---------------------------------------------------------------- ranking and metric losses (Torch's formulas)

-- The options of the losses below that take more than numbers: each named
-- number and flag checked here, so a bad one names the loss, not the op
-- inside it that met it ("add: expected a tensor or a number, got string"
-- for a margin of "x"; a swap of 1 was taken as true).
local function check_loss_values(fname, opts, numbers, flags)
    for _, k in ipairs(numbers) do
        local v = opts[k]
        if v ~= nil and (type(v) ~= "number" or v ~= v) then
            fail(fmt("%s: option %s must be a number, got %s", fname, k, type(v) == "number" and "nan" or typename(v)))
        end
    end
    for _, k in ipairs(flags or {}) do
        local v = opts[k]
        if v ~= nil and type(v) ~= "boolean" then
            fail(fmt("%s: option %s must be a boolean, got %s", fname, k, typename(v)))
        end
    end
end

-- The loss's operands' shapes broadcast together (checked here so the error
-- names the loss, not cosine_similarity or pairwise_distance inside it).
local function check_broadcast(fname, ...)
    local shapes = {}
    for i = 1, select("#", ...) do shapes[i] = shape_of((select(i, ...))) end
    tensor.broadcast_shape(fname, shapes)
end

-- margin_ranking_loss(x1, x2, y [, {margin = 0, reduction}]): max(0,
-- -y (x1 - x2) + margin), y = 1 where x1 should rank higher, -1 lower.
function M.margin_ranking_loss(x1, x2, y, opts, who, extra)
    local fname = name_of(who, "margin_ranking_loss", extra)
    opts = loss_opts(fname, opts, {margin = true})
    check_loss_values(fname, opts, {"margin"}) -- (a NaN margin made the loss NaN)
    check_tensor(fname, "input1", x1)
    check_tensor(fname, "target", y)
    check_devices(fname, x1, x2, y)
    check_target_broadcast(fname, x1, x2, "input2")
    check_target_broadcast(fname, x1, y)
    x1, x2 = as_float(x1, x2)
    -- clamp, not relu: at 0 the gradient passes, as Torch's clamp_min (relu's is 0 there, so equal
    -- scores with margin 0, e.g. from a zero-initialised model, got no gradient at all)
    -- -((x1 - x2) y), not (x1 - x2) * -y: a uint8 y has no -y
    return reduce(fname, (-((x1 - x2) * y) + (opts.margin or 0)):clamp(0), opts.reduction)
end

-- cosine_embedding_loss(x1, x2, y [, {margin = 0, reduction}]): rows of x1
-- and x2 (N×D); 1 - cos where y = 1, max(0, cos - margin) where y = -1.
function M.cosine_embedding_loss(x1, x2, y, opts, who, extra)
    local fname = name_of(who, "cosine_embedding_loss", extra)
    opts = loss_opts(fname, opts, {margin = true})
    check_loss_values(fname, opts, {"margin"}) -- (a NaN margin made the loss NaN)
    check_tensor(fname, "input1", x1)
    check_tensor(fname, "input2", x2)
    check_tensor(fname, "target", y)
    check_devices(fname, x1, x2, y)
    check_broadcast(fname, x1, x2)
    local cos = M.cosine_similarity(x1, x2, {dim = -1}, fname)
    check_target_broadcast(fname, cos, y) -- one target per row
    local pos, neg = y:eq(1):to(cos:dtype()), y:eq(-1):to(cos:dtype())
    local loss = (1 - cos) * pos + (cos - (opts.margin or 0)):clamp(0) * neg -- (clamp: Torch's gradient at 0)
    return reduce(fname, loss, opts.reduction)
end

-- triplet_margin_loss(anchor, positive, negative [, {margin = 1, p = 2,
-- eps = 1e-6, swap = false, reduction}]): max(d(a, p) - d(a, n) + margin,
-- 0) with d the p-norm distance of rows; swap takes the smaller of d(a,
-- n) and d(p, n).
function M.triplet_margin_loss(a, pos, neg, opts, who, extra)
    local fname = name_of(who, "triplet_margin_loss", extra)
    opts = util.check_opts(fname, opts, {margin = true, p = true, eps = true, swap = true, reduction = true})
    check_loss_values(fname, opts, {"margin", "p", "eps"}, {"swap"})
    if opts.p ~= nil and not (opts.p >= 0) then fail(fmt("%s: p must be >= 0, got %s", fname, tostring(opts.p))) end
    check_tensor(fname, "anchor", a)
    check_tensor(fname, "positive", pos)
    check_tensor(fname, "negative", neg)
    check_devices(fname, a, pos, neg)
    check_broadcast(fname, a, pos, neg)
    local d = {p = opts.p or 2, eps = opts.eps or 1e-6}
    local dap, dan = M.pairwise_distance(a, pos, d, fname), M.pairwise_distance(a, neg, d, fname)
    if opts.swap then dan = dan:minimum(M.pairwise_distance(pos, neg, d, fname)) end
    return reduce(fname, (dap - dan + (opts.margin or 1)):clamp(0), opts.reduction) -- (clamp: Torch's gradient at 0)
end

-- gaussian_nll_loss(input, target, var [, {full = false, eps = 1e-6,
-- reduction}]): 0.5 (log var + (input - target)^2 / var), var at least
-- eps (+ 0.5 log 2 pi when full): the negative log-likelihood of target
-- under a Gaussian of mean input and variance var.
function M.gaussian_nll_loss(input, target, var, opts, who, extra)
    local fname = name_of(who, "gaussian_nll_loss", extra)
    opts = util.check_opts(fname, opts, {full = true, eps = true, reduction = true})
    check_loss_values(fname, opts, {"eps"}, {"full"})
    if opts.eps ~= nil and not (opts.eps > 0) then fail(fmt("%s: eps must be > 0, got %s", fname, tostring(opts.eps))) end
    check_tensor(fname, "input", input)
    -- var a number: one variance for every expectation, as Torch's (a float var)
    if type(var) == "number" then
        if not (var >= 0 and var < math.huge) then
            fail(fmt("%s: var must be a tensor or a finite number >= 0, got %s", fname, tostring(var)))
        end
        var = tensor.full_like(input, var, {dtype = FLOAT_DT[input:dtype()] and input:dtype() or tensor.get_default_dtype()})
    end
    check_tensor(fname, "var", var)
    check_devices(fname, input, target, var)
    check_target_broadcast(fname, input, target)
    -- var without the input's last dim (one variance per row, Torch's
    -- homoscedastic form) stands for each of its elements
    local vs, is = shape_of(var), shape_of(input)
    if #vs == #is - 1 and #is > 1 and tensor.shape_str(vs) == tensor.shape_str({unpack(is, 1, #is - 1)}) then
        var = var:unsqueeze(-1)
    end
    check_target_broadcast(fname, input, var, "var")
    -- var at least eps, as Torch's, which clamps it under no_grad: the
    -- value clamped, the gradient passing as if it were not (through
    -- clamp's own gradient, 0 below eps, a variance that fell under eps
    -- got no gradient to grow back and stayed there).  A negative
    -- variance is an error, as Torch's; checked at run time on the device
    -- (no host wait), failing the loss.  Integers compute in float32.
    if not FLOAT_DT[var:dtype()] then var = var:to(tensor.get_default_dtype()) end
    local eps = opts.eps or 1e-6
    local v = var
    local checked = tensor.checked_in_range(fname, var, 0, math.huge)
    if var._rg and autograd.is_enabled() then
        local vd = var:detach()
        v = var + (checked:clamp(eps, math.huge) - vd)
    else
        v = checked:clamp(eps, math.huge)
    end
    input, target = as_float(input, target)
    local d = input - target
    local loss = (v:log() + d * d / v) * 0.5
    if opts.full then loss = loss + 0.5 * math.log(2 * math.pi) end
    return reduce(fname, loss, opts.reduction)
end

-- ---------------------------------------------------------------- more of Torch's losses (compositions of ops)

-- poisson_nll_loss(input, target [, {log_input = true, full = false, eps =
-- 1e-8, reduction}]): the negative log-likelihood of target under a Poisson
-- distribution of rate exp(input) (log_input) or input: exp(input) - target
-- input, or input - target log(input + eps); full adds Stirling's
-- approximation of log(target!), target log target - target + 0.5 log(2 pi
-- target), where target > 1 (0 elsewhere), as Torch's.
function M.poisson_nll_loss(input, target, opts, who, extra)
    local fname = name_of(who, "poisson_nll_loss", extra)
    opts = util.check_opts(fname, opts, {log_input = true, full = true, eps = true, reduction = true})
    check_loss_values(fname, opts, {"eps"}, {"log_input", "full"})
    if opts.eps ~= nil and not (opts.eps >= 0) then fail(fmt("%s: eps must be >= 0, got %s", fname, tostring(opts.eps))) end
    check_tensor(fname, "input", input)
    check_tensor(fname, "target", target)
    check_target_broadcast(fname, input, target)
    input, target = as_float(input, target)
    local loss
    if opts.log_input == false then
        loss = input - target * (input + (opts.eps or 1e-8)):log()
    else
        loss = input:exp() - target * input
    end
    if opts.full then
        local big = target:gt(1)
        -- the term of a target of 1 (where it is left out) computed: log of a target of 0 would be -inf, and
        -- its gradient NaN through the masked places
        local t = tensor.where(big, target, 1)
        local stirling = t * t:log() - t + (t * (2 * math.pi)):log() * 0.5
        loss = loss + tensor.where(big, stirling, 0)
    end
    return reduce(fname, loss, opts.reduction)
end

-- hinge_embedding_loss(input, target [, {margin = 1, reduction}]): input
-- where target is 1, max(0, margin - input) where it is -1 (Torch's: a
-- target of any other value gets both terms).
function M.hinge_embedding_loss(input, target, opts, who, extra)
    local fname = name_of(who, "hinge_embedding_loss", extra)
    opts = loss_opts(fname, opts, {margin = true})
    check_loss_values(fname, opts, {"margin"})
    check_tensor(fname, "input", input)
    check_tensor(fname, "target", target)
    check_target_broadcast(fname, input, target)
    input = as_float(input, target)
    local m = (-input + (opts.margin or 1)):clamp(0) -- (clamp: Torch's gradient at 0)
    local loss = tensor.where(target:ne(1), m, 0) + tensor.where(target:ne(-1), input, 0)
    return reduce(fname, loss, opts.reduction)
end

-- soft_margin_loss(input, target [, {reduction}]): log(1 + exp(-target
-- input)), targets 1 or -1, computed as softplus (finite for large inputs).
function M.soft_margin_loss(input, target, opts, who, extra)
    local fname = name_of(who, "soft_margin_loss", extra)
    opts = loss_opts(fname, opts)
    check_tensor(fname, "input", input)
    check_tensor(fname, "target", target)
    check_target_broadcast(fname, input, target)
    input, target = as_float(input, target)
    return reduce(fname, M.softplus(-(input * target), 1, math.huge), opts.reduction)
end

-- A weight of one per class: a 1-D tensor of C elements of the input's dtype.
local function check_class_weight(fname, x, w, C)
    if w ~= nil and (w:dim() ~= 1 or w:size(1) ~= C or w:dtype() ~= x:dtype()) then
        fail(fmt("%s: weight must be a %s tensor of %d class weights, got %s %s", fname, x:dtype(), C, w:dtype(),
                 shape_str(w)))
    end
end

-- multilabel_soft_margin_loss(input, target [, {weight, reduction}]):
-- input N x C (or C) logits, target of its shape, 1 where a class is
-- present and 0 where not; each sample's loss the mean over the classes of
-- the binary cross-entropies -(y log sigmoid(x) + (1 - y) log sigmoid(-x)),
-- times weight (C, one per class); "none" gives N losses.
function M.multilabel_soft_margin_loss(input, target, opts, who, extra)
    local fname = name_of(who, "multilabel_soft_margin_loss", extra)
    opts = loss_opts(fname, opts, nil, {weight = true})
    check_same_shape(fname, input, target)
    if input:dim() < 1 then fail(fmt("%s: expected input of shape C or NxC, got %s", fname, shape_str(input))) end
    local w = opts.weight
    check_devices(fname, input, target, w)
    if not FLOAT_DT[input:dtype()] then input = input:to(tensor.get_default_dtype()) end
    local C = input:size(-1)
    check_class_weight(fname, input, w, C)
    local loss = -(target * M.logsigmoid(input) + (1 - target) * M.logsigmoid(-input))
    if w ~= nil then loss = loss * w end
    return reduce(fname, loss:sum(-1) / C, opts.reduction)
end

-- multi_margin_loss(input, target [, {p = 1, margin = 1, weight,
-- reduction}]): input N x C class scores, target N class indices (from 1);
-- each sample's loss sum over the classes i other than its target y of
-- weight[y] max(0, margin - x[y] + x[i])^p, divided by C, as Torch's (p 1
-- or 2).  One sample's C scores take a 0-dim index.
function M.multi_margin_loss(input, target, opts, who, extra)
    local fname = name_of(who, "multi_margin_loss", extra)
    check_tensor(fname, "input", input)
    if input:dim() == 1 then return unbatched(fname, M.multi_margin_loss, input, target, opts, false) end
    opts = loss_opts(fname, opts, {p = true, margin = true}, {weight = true})
    check_loss_values(fname, opts, {"p", "margin"})
    local p = opts.p or 1
    if p ~= 1 and p ~= 2 then fail(fmt("%s: p must be 1 or 2, got %s", fname, tostring(p))) end
    if input:dim() ~= 2 then fail(fmt("%s: expected input of shape C or NxC, got %s", fname, shape_str(input))) end
    check_target(fname, input, target)
    local w = opts.weight
    check_devices(fname, input, target, w)
    if not FLOAT_DT[input:dtype()] then input = input:to(tensor.get_default_dtype()) end
    local C = input:size(2)
    check_class_weight(fname, input, w, C)
    local who_t = fname .. " (target)" -- (an index out of range fails the gather at run time, as cross_entropy's)
    local t = target:view(-1, 1)
    local xy = input:gather(2, t, who_t)
    -- relu: no gradient where a term is exactly 0, as Torch's kernel (its z > 0)
    local z = (input - xy + (opts.margin or 1)):relu()
    if p == 2 then z = z * z end
    -- the target's own class left out (its term would be max(0, margin)^p)
    local own = tensor.arange(1, C + 1, tensor.like(target)):view(1, C):eq(t)
    z = tensor.where(own, 0, z)
    if w ~= nil then z = z * w:index_select(1, target, who_t):view(-1, 1) end
    return reduce(fname, z:sum(2) / C, opts.reduction)
end

-- multilabel_margin_loss(input, target [, {reduction}]): input N x C (or
-- C) scores, target of its shape holding each sample's class indices
-- (from 1), ended by the first index < 1 (0, Torch's -1 plus one) and
-- padded after it; each sample's loss sum over its classes j and the
-- classes i not among them of max(0, 1 - (x[j] - x[i])), divided by C.
function M.multilabel_margin_loss(input, target, opts, who, extra)
    local fname = name_of(who, "multilabel_margin_loss", extra)
    opts = loss_opts(fname, opts)
    check_same_shape(fname, input, target)
    local dt = target:dtype()
    if dt ~= "int64" and dt ~= "int32" then
        fail(fmt("%s: target must hold class indices (int64, from 1, ended by 0), got %s", fname, dt))
    end
    local nd = input:dim()
    if nd ~= 1 and nd ~= 2 then fail(fmt("%s: expected input of shape C or NxC, got %s", fname, shape_str(input))) end
    if not FLOAT_DT[input:dtype()] then input = input:to(tensor.get_default_dtype()) end
    local x, t = input, target
    if nd == 1 then x, t = x:view(1, -1), t:view(1, -1) end
    local C = x:size(2)
    -- the indices before the first < 1 count (K of them, K = C slots)
    local valid = t:lt(1):to("int64"):cumsum(2):eq(0)                        -- N x K
    local ti = tensor.where(valid, t, 1)
    local xt = x:gather(2, ti, fname .. " (target)")                           -- N x K: x at each target
    local classes = tensor.arange(1, C + 1, tensor.like(t)):view(1, 1, C)
    local hit = ti:unsqueeze(3):eq(classes):logical_and(valid:unsqueeze(3))    -- N x K x C
    local is_target = hit:any(2)                                               -- N x C
    local keep = valid:unsqueeze(3):logical_and(is_target:logical_not():unsqueeze(2))
    local z = (-(xt:unsqueeze(3) - x:unsqueeze(2)) + 1):relu()                 -- N x K x C (Torch's z > 0: relu)
    local loss = tensor.where(keep, z, 0):sum({2, 3}) / C
    if nd == 1 then loss = loss:view({}) end
    return reduce(fname, loss, opts.reduction)
end

-- (module level, not closures: a function holding one is not compiled
-- into the loops that call it; see spec/tensor_jit_spec.lua)
local function default_distance(u, v) return M.pairwise_distance(u, v) end

local function triplet_distance(fname, d, u, v, what)
    local r = d(u, v)
    if not is_tensor(r) then
        fail(fmt("%s: distance_function returned %s for %s, expected a tensor of distances", fname, typename(r), what))
    end
    return r
end

-- triplet_margin_with_distance_loss(anchor, positive, negative [,
-- {distance_function = pairwise_distance, margin = 1, swap = false,
-- reduction}]): max(d(a, p) - d(a, n) + margin, 0), d any function of two
-- tensors giving a tensor of distances (pairwise_distance by default);
-- swap takes the smaller of d(a, n) and d(p, n).
function M.triplet_margin_with_distance_loss(a, pos, neg, opts, who, extra)
    local fname = name_of(who, "triplet_margin_with_distance_loss", extra)
    opts = util.check_opts(fname, opts, {distance_function = true, margin = true, swap = true, reduction = true})
    check_loss_values(fname, opts, {"margin"}, {"swap"})
    if opts.margin ~= nil and not (opts.margin > 0) then
        fail(fmt("%s: margin must be > 0, got %s", fname, tostring(opts.margin)))
    end
    local d = opts.distance_function
    if d ~= nil and type(d) ~= "function" and not (type(d) == "table" and getmetatable(d) and getmetatable(d).__call) then
        fail(fmt("%s: option distance_function must be a function, got %s", fname, typename(d)))
    end
    d = d or default_distance
    check_tensor(fname, "anchor", a)
    check_tensor(fname, "positive", pos)
    check_tensor(fname, "negative", neg)
    check_devices(fname, a, pos, neg)
    if a:dim() ~= pos:dim() or a:dim() ~= neg:dim() then
        fail(fmt("%s: anchor, positive and negative must have the same number of dims, got shapes %s, %s and %s",
                 fname, shape_str(a), shape_str(pos), shape_str(neg)))
    end
    local dap = triplet_distance(fname, d, a, pos, "(anchor, positive)")
    local dan = triplet_distance(fname, d, a, neg, "(anchor, negative)")
    if opts.swap then dan = dan:minimum(triplet_distance(fname, d, pos, neg, "(positive, negative)")) end
    return reduce(fname, (dap - dan + (opts.margin or 1)):clamp(0), opts.reduction)
end

-- Mean absolute error; the target broadcasts to the input's shape.
function M.l1_loss(input, target, opts, who, extra)
    local fname = name_of(who, "l1_loss", extra)
    opts = loss_opts(fname, opts)
    check_tensor(fname, "input", input)
    check_target_broadcast(fname, input, target)
    input, target = as_float(input, target)
    return reduce(fname, (input - target):abs(), opts.reduction)
end

-- Binary cross-entropy of logits against targets in [0, 1] (the same
-- shape), computed stably as softplus(x) - x y.
-- opts.weight (broadcasting to the input) weighs each element's loss;
-- opts.pos_weight (broadcasting to the input, e.g. one per class of N x C)
-- weighs the positive term, Torch's: -(pw y log sigmoid(x) + (1 - y) log(1
-- - sigmoid(x))) = (1 - y) x + (1 + (pw - 1) y) softplus(-x).
function M.binary_cross_entropy_with_logits(logits, target, opts, who, extra)
    local fname = name_of(who, "binary_cross_entropy_with_logits", extra)
    opts = loss_opts(fname, opts, nil, {weight = true, pos_weight = true})
    check_tensor(fname, "input", logits)
    check_tensor(fname, "target", target)
    check_devices(fname, logits, target, opts.weight, opts.pos_weight)
    if tensor.shape_str(shape_of(logits)) ~= tensor.shape_str(shape_of(target)) then
        fail(fmt("%s: target of shape %s does not match input %s", fname, shape_str(target), shape_str(logits)))
    end
    local w, pw = opts.weight, opts.pos_weight
    if w ~= nil then check_target_broadcast(fname, logits, w, "weight") end
    if pw ~= nil then check_target_broadcast(fname, logits, pw, "pos_weight") end
    local sp = M.softplus(logits, 1, math.huge)
    local loss
    if pw == nil then
        loss = sp - logits * target
    else
        loss = (1 - target) * logits + ((pw - 1) * target + 1) * (sp - logits)
    end
    if w ~= nil then loss = loss * w end
    return reduce(fname, loss, opts.reduction)
end

-- x - its mean along dim (kept), the rounding of the mean corrected (as
-- Tensor:var and batch_norm): a float32 mean can be off by half a unit
-- (1e7 and 1e7 + 1 alternating: the mean 1e7 + 0.5 is no float32), and
-- x - mean alone made the variance 0.5, not 0.25, and the normalised
-- values 0 and 2, not -1 and 1.  The correction, the mean of x - mean
-- (0 but for that rounding), is a constant to autograd: its exact
-- derivative is 0, and its backward would cost a pass.
local function centred(x, dim)
    local d = x - x:mean(dim, true)
    return d - d:detach():mean(dim, true)
end

-- Normalises x over its last dims (the shape normalized_shape gives):
-- (x - mean) / sqrt(var + eps), var the biased one, then * weight + bias.
function M.layer_norm(x, normalized_shape, weight, bias, eps, who, extra)
    local fname = name_of(who, "layer_norm", extra)
    check_tensor(fname, "input", x)
    check_devices(fname, x, weight, bias)
    check_float(fname, "input", x)
    eps = eps or 1e-5
    if type(normalized_shape) == "number" then normalized_shape = {normalized_shape} end
    if type(normalized_shape) ~= "table" or getmetatable(normalized_shape) ~= nil then
        fail(fname .. ": normalized_shape must be a size or a list of sizes, got " .. typename(normalized_shape))
    end
    -- as batch_norm's: a NaN (or negative) eps made every output NaN
    if type(eps) ~= "number" or not (eps >= 0) then
        fail(fname .. ": eps must be a non-negative number, got " .. util.show(eps))
    end
    local s, k = shape_of(x), #normalized_shape
    local ok = k >= 1 and k <= #s
    for i = 1, k do ok = ok and s[#s - k + i] == normalized_shape[i] end
    if not ok then
        fail(fmt(fname .. ": input of shape %s does not end in the normalized shape %s", shape_str(x),
                 tensor.shape_str(normalized_shape)))
    end
    -- weight and bias have the normalized shape (another would broadcast: a 3 x 1 weight over N x 4 rows)
    for _, e in ipairs({{"weight", weight}, {"bias", bias}}) do
        local t = e[2]
        if t ~= nil then
            check_tensor(fname, e[1], t)
            if tensor.shape_str(shape_of(t)) ~= tensor.shape_str(normalized_shape) then
                fail(fmt(fname .. ": %s of shape %s, expected the normalized shape %s", e[1], shape_str(t),
                         tensor.shape_str(normalized_shape)))
            end
            check_same_dtype(fname, x, e[1], t)
        end
    end
    local lead, n = {}, 1
    for i = 1, #s - k do lead[i] = s[i] end
    for i = 1, k do n = n * normalized_shape[i] end
    lead[#lead + 1] = n -- (not -1: with an empty batch, 0 x -1 would be ambiguous)
    local x2 = x:reshape(lead) -- the normalised dims as one
    local d = centred(x2, -1)
    local y = (d / ((d * d):mean(-1, true) + eps):sqrt()):reshape(s)
    if weight ~= nil then y = y * weight end
    if bias ~= nil then y = y + bias end
    return y
end

-- rms_norm(x, normalized_shape [, weight, eps]) (Torch's F.rms_norm): x
-- divided by the root mean square over its last dims (normalized_shape,
-- a size or a list of sizes) plus eps, then scaled by weight (that
-- shape).  eps nil: the dtype's machine epsilon, as Torch's.
local MACHINE_EPS = {float32 = 1.1920928955078125e-07, float64 = 2.220446049250313e-16}
function M.rms_norm(x, normalized_shape, weight, eps, who, extra)
    local fname = name_of(who, "rms_norm", extra)
    check_tensor(fname, "input", x)
    check_devices(fname, x, weight)
    if type(normalized_shape) == "number" then normalized_shape = {normalized_shape} end
    if type(normalized_shape) ~= "table" or getmetatable(normalized_shape) ~= nil then
        fail(fname .. ": normalized_shape must be a size or a list of sizes, got " .. typename(normalized_shape))
    end
    local dt = x:dtype()
    if not MACHINE_EPS[dt] then fail(fname .. ": input must be float32 or float64, got " .. dt) end
    if eps == nil then eps = MACHINE_EPS[dt] end
    if type(eps) ~= "number" or not (eps >= 0) then
        fail(fname .. ": eps must be a non-negative number, got " .. util.show(eps))
    end
    local s, k = shape_of(x), #normalized_shape
    local ok = k >= 1 and k <= #s
    for i = 1, k do ok = ok and s[#s - k + i] == normalized_shape[i] end
    if not ok then
        fail(fmt(fname .. ": input of shape %s does not end in the normalized shape %s", shape_str(x),
                 tensor.shape_str(normalized_shape)))
    end
    if weight ~= nil then
        check_tensor(fname, "weight", weight)
        if tensor.shape_str(shape_of(weight)) ~= tensor.shape_str(normalized_shape) then
            fail(fmt(fname .. ": weight of shape %s, expected the normalized shape %s", shape_str(weight),
                     tensor.shape_str(normalized_shape)))
        end
        check_same_dtype(fname, x, "weight", weight)
    end
    local lead, n = {}, 1
    for i = 1, #s - k do lead[i] = s[i] end
    for i = 1, k do n = n * normalized_shape[i] end
    lead[#lead + 1] = n
    local x2 = x:reshape(lead)
    local y = (x2 / ((x2 * x2):mean(-1, true) + eps):sqrt()):reshape(s)
    if weight ~= nil then y = y * weight end
    return y
end

-- group_norm(x, num_groups [, weight, bias, eps = 1e-5]): x N×C×… with
-- its C channels in num_groups groups of consecutive channels, each
-- group of each sample normalised over its channels and positions (the
-- biased variance, as Torch), then scaled and shifted per channel by
-- weight and bias (C each).  One group is LayerNorm over C×…; C groups
-- are InstanceNorm.
function M.group_norm(x, num_groups, weight, bias, eps, who, extra)
    local fname = name_of(who, "group_norm", extra)
    check_tensor(fname, "input", x)
    check_devices(fname, x, weight, bias)
    check_float(fname, "input", x)
    eps = eps or 1e-5
    if type(eps) ~= "number" or not (eps >= 0) then
        fail(fname .. ": eps must be a non-negative number, got " .. util.show(eps))
    end
    if x:dim() < 2 then fail(fmt(fname .. ": expected an input of shape N x C x ..., got %s", shape_str(x))) end
    local s = shape_of(x)
    local C = s[2]
    if type(num_groups) ~= "number" or num_groups < 1 or not is_int(num_groups) or C % num_groups ~= 0 then
        fail(fmt(fname .. ": num_groups must be a positive integer that divides the %d channels of input %s, got %s",
                 C, shape_str(x), tostring(num_groups)))
    end
    for what, t in pairs({weight = weight, bias = bias}) do -- (nil ones are not there)
        check_tensor(fname, what, t)
        if t:dim() ~= 1 or t:size(1) ~= C then
            fail(fmt(fname .. ": %s must have shape %d (one per channel), got %s", what, C, shape_str(t)))
        end
        check_same_dtype(fname, x, what, t)
    end
    local per = C / num_groups -- a group's elements (not -1: with an empty batch, 0 x g x -1 is ambiguous)
    for i = 3, #s do per = per * s[i] end
    local g = x:reshape(s[1], num_groups, per)
    local d = centred(g, 3)
    local y = (d / ((d * d):mean(3, true) + eps):sqrt()):reshape(s)
    if weight == nil and bias == nil then return y end
    local per_channel = {1, C}
    for i = 3, #s do per_channel[i] = 1 end
    if weight ~= nil then y = y * weight:view(per_channel) end
    if bias ~= nil then y = y + bias:view(per_channel) end
    return y
end

-- ---------------------------------------------------------------- distances and padding

-- normalize(x [, {p = 2, dim = -1, eps = 1e-12}]): x divided by its
-- p-norm along dim (at least eps).
function M.normalize(x, opts, who, extra)
    local fname = name_of(who, "normalize", extra)
    check_tensor(fname, "input", x)
    opts = util.check_opts(fname, opts, {p = true, dim = true, eps = true})
    local p, dim, eps = opts.p or 2, opts.dim or -1, opts.eps or 1e-12
    -- the options checked here, named as normalize (they were named as norm,
    -- or clamp, and a negative or NaN eps gave NaN rows)
    if type(p) ~= "number" or not (p >= 0) then fail(fmt("%s: p must be a number >= 0, got %s", fname, util.show(p))) end
    if type(eps) ~= "number" or not (eps >= 0) then
        fail(fmt("%s: eps must be a number >= 0, got %s", fname, util.show(eps)))
    end
    local nd = x:dim()
    if nd == 0 then fail(fname .. ": expected a tensor of at least one dim, got a scalar") end
    if not is_int(dim) or dim < -nd or dim > nd or dim == 0 then
        fail(fmt("%s: dim must be an integer in 1..%d or -%d..-1 (the input's shape is %s), got %s", fname, nd, nd,
                 shape_str(x), util.show(dim)))
    end
    return x / x:norm(p, dim, true):clamp(eps, math.huge)
end

-- t's 2-norm along dim (kept), at least eps for the value only (the
-- gradient that of the norm itself): Torch's clamp under no_grad.
local function clamped_norm(t, dim, eps)
    local n = t:norm(2, dim, true)
    if not (n._rg and autograd.is_enabled()) then return n:clamp(eps, math.huge) end
    local nd = n:detach()
    return n + (nd:clamp(eps, math.huge) - nd)
end

-- cosine_similarity(a, b [, {dim = -1, eps = 1e-8}]): a·b / (|a| |b|)
-- along dim (shapes broadcast), each norm at least eps.
function M.cosine_similarity(a, b, opts, who, extra)
    local fname = name_of(who, "cosine_similarity", extra)
    check_tensor(fname, "a", a)
    check_tensor(fname, "b", b)
    check_devices(fname, a, b)
    opts = util.check_opts(fname, opts, {dim = true, eps = true})
    local dim, eps = opts.dim or -1, opts.eps or 1e-8
    -- the options checked here, named as the function (a bad dim was named
    -- as norm's, a string eps as clamp's, and a negative or NaN eps gave NaN)
    if type(eps) ~= "number" or not (eps >= 0) then
        fail(fmt("%s: eps must be a number >= 0, got %s", fname, util.show(eps)))
    end
    local sa, sb = shape_of(a), shape_of(b)
    local s = tensor.broadcast_shape(fname, {sa, sb})
    if #s == 0 then fail(fname .. ": expected vectors (the similarity is along a dim), got two scalars") end
    if not is_int(dim) or dim < -#s or dim > #s or dim == 0 then
        fail(fmt("%s: dim must be an integer in 1..%d or -%d..-1 (the inputs' shape is %s), got %s", fname, #s, #s,
                 tensor.shape_str(s), util.show(dim)))
    end
    -- both broadcast first, as Torch: a b of size 1 along dim stands for
    -- that many copies in the norm too (its own norm would make |cos| > 1)
    local full = tensor.shape_str(s)
    if tensor.shape_str(sa) ~= full then a = a:expand(s) end
    if tensor.shape_str(sb) ~= full then b = b:expand(s) end
    -- each divided by its norm first, as Torch: a·b and |a| |b| overflow
    -- float32 once the elements pass about 1e19 (inf / inf: NaN)
    -- each norm at least eps as Torch's, which clamps them under no_grad:
    -- the gradient passes the clamp as if it were not there
    local na, nb = clamped_norm(a, dim, eps), clamped_norm(b, dim, eps)
    return ((a / na) * (b / nb)):sum(dim)
end

-- pairwise_distance(a, b [, {p = 2, eps = 1e-6, keepdim = false}]): the
-- p-norm of a - b + eps along the last dim (shapes broadcast), as Torch.
function M.pairwise_distance(a, b, opts, who, extra)
    local fname = name_of(who, "pairwise_distance", extra)
    check_tensor(fname, "a", a)
    check_tensor(fname, "b", b)
    check_devices(fname, a, b)
    opts = util.check_opts(fname, opts, {p = true, eps = true, keepdim = true})
    -- the options checked here, named as the function (they were named as
    -- norm's or add's, the ops inside that met them)
    local p, eps = opts.p, opts.eps
    if p ~= nil and (type(p) ~= "number" or not (p >= 0)) then
        fail(fmt("%s: p must be a number >= 0, got %s", fname, util.show(p)))
    end
    if eps ~= nil and (type(eps) ~= "number" or eps ~= eps) then
        fail(fmt("%s: eps must be a number, got %s", fname, util.show(eps)))
    end
    if opts.keepdim ~= nil and type(opts.keepdim) ~= "boolean" then
        fail(fmt("%s: keepdim must be true or false, got %s", fname, util.show(opts.keepdim)))
    end
    local s = tensor.broadcast_shape(fname, {shape_of(a), shape_of(b)}) -- (sub would name itself)
    if #s == 0 then fail(fname .. ": expected vectors (the distance is along the last dim), got two scalars") end
    a, b = as_float(a, b)
    return (a - b + (opts.eps or 1e-6)):norm(opts.p or 2, -1, opts.keepdim)
end

-- cdist(a, b [, {p = 2} | p]): every distance between the rows of a (… × P ×
-- M) and of b (… × R × M), a … × P × R tensor.
function M.cdist(a, b, opts)
    check_tensor("cdist", "a", a)
    check_tensor("cdist", "b", b)
    check_devices("cdist", a, b)
    if type(opts) == "number" then opts = {p = opts} end -- torch.cdist(x1, x2, p)'s form
    opts = util.check_opts("cdist", opts, {p = true, compute_mode = true})
    local p = opts.p
    if p ~= nil and (type(p) ~= "number" or p < 0 or p ~= p) then
        fail(fmt("cdist: p must be a number >= 0, got %s", type(p) == "number" and tostring(p) or typename(p)))
    end
    if a:dim() < 2 or b:dim() < 2 or a:size(-1) ~= b:size(-1) then
        fail(fmt("cdist: expected rows of one width, ... x P x M and ... x R x M, got %s and %s", shape_str(a),
                 shape_str(b)))
    end
    a, b = as_float(a, b)
    return a:cdist(b, {p = p, compute_mode = opts.compute_mode}) -- (ordo.cdist: a matrix product for many rows, p = 2)
end

local PAD_MODES = {constant = true, reflect = true, replicate = true, circular = true}

-- y's shape with dim d of size m, filled with value (beside y: its device and engine).
local function filled_like(y, d, m, value)
    local s = shape_of(y)
    s[d] = m
    return tensor.full(s, value, tensor.like(y))
end

-- pad(x, {left, right [, top, bottom [, front, back]]} [, {mode =
-- "constant", value = 0}]): Torch's padding, the pairs from the last dim
-- backwards.  Modes: constant (value), reflect (mirrored, without the
-- edge), replicate (the edge repeated), circular (wrapped around).
-- Negative amounts crop, first: the padding repeats what is left.  Made of
-- cat and index_select, so gradients flow.
local function pad(fname, x, amounts, opts)
    check_tensor(fname, "input", x)
    opts = util.check_opts(fname, opts, {mode = true, value = true})
    local mode = opts.mode or "constant"
    if not PAD_MODES[mode] then
        fail(fmt(fname .. ": mode must be constant, reflect, replicate or circular, got %s", tostring(mode)))
    end
    if type(amounts) ~= "table" or #amounts % 2 ~= 0 or #amounts == 0 or #amounts / 2 > x:dim() then
        fail(fmt(fname .. ": expected an even list of amounts for at most %d dims, got %s", x:dim(),
                 type(amounts) == "table" and #amounts .. " of them" or typename(amounts)))
    end
    local value = opts.value or 0
    if type(value) ~= "number" then fail(fname .. ": value must be a number, got " .. typename(value)) end
    if mode == "constant" then -- (full would name itself)
        tensor.check_fits(fname, tensor.parse_dtype(fname, x:dtype()), value, " (the padding value)")
    end
    local y = x
    for k = 1, #amounts / 2 do
        local d = x:dim() - k + 1
        local lo, hi = amounts[2 * k - 1], amounts[2 * k]
        for _, v in ipairs({lo, hi}) do
            if not is_int(v) then fail(fname .. ": amounts must be integers, got " .. tostring(v)) end
        end
        local n = y:size(d)
        if n + lo + hi < 0 then
            fail(fmt(fname .. ": dim %d of size %d cannot lose %d elements", d, n, -(lo + hi)))
        end
        if lo < 0 then y, n, lo = y:narrow(d, 1 - lo, n + lo), n + lo, 0 end
        if hi < 0 then y, n, hi = y:narrow(d, 1, n + hi), n + hi, 0 end
        if lo > 0 or hi > 0 then
            if mode == "constant" then
                local parts = {}
                if lo > 0 then parts[#parts + 1] = filled_like(y, d, lo, value) end
                parts[#parts + 1] = y
                if hi > 0 then parts[#parts + 1] = filled_like(y, d, hi, value) end
                y = tensor.cat(parts, d)
            else
                if mode == "reflect" and (lo >= n or hi >= n) then
                    fail(fmt("%s: reflect padding of %d and %d needs a dim %d larger than both, got %d", fname, lo, hi,
                             d, n))
                end
                if mode == "circular" and (lo > n or hi > n) then
                    fail(fmt("%s: circular padding of %d and %d needs a dim %d at least as large, got %d", fname,
                             lo, hi, d, n))
                end
                if n == 0 then fail(fmt(fname .. ": cannot %s-pad dim %d of size 0", mode, d)) end
                local idx
                if mode == "replicate" then
                    -- amounts are unbounded here: the index is built by the engine, so a size too
                    -- large fails as an allocation instead of a loop in Lua
                    idx = tensor.arange(-lo, n + hi, tensor.like(y, "int64")):clamp(0, n - 1):add(1)
                else
                    idx = {} -- reflect and circular amounts are at most n: a short list
                    for i = -lo, n + hi - 1 do -- 0-based source positions, then from 1
                        local j = i
                        if mode == "reflect" then
                            if j < 0 then j = -j elseif j >= n then j = 2 * (n - 1) - j end
                        else
                            j = i % n
                        end
                        idx[#idx + 1] = j + 1
                    end
                end
                y = y:index_select(d, idx)
            end
        end
    end
    -- a copy, as Torch's, also where no amount is positive (x itself, or a narrow of it)
    return y._c.storage == x._c.storage and y:clone() or y
end
-- (an op it is made of failing, out of memory above all, named after it:
-- "pad: full: out of memory ...")
function M.pad(x, amounts, opts, who, extra)
    -- Torch's positional pad(x, amounts, mode [, value]): F.pad(x, {1, 1}, "reflect")
    if type(opts) == "string" then
        if who ~= nil and type(who) ~= "number" then
            fail(fmt("pad: after the mode, expected the value to pad with (a number), got %s", typename(who)))
        end
        opts, who = {mode = opts, value = who}, nil
    end
    local fname = name_of(who, "pad", extra)
    return util.own_errors(fname, pcall(pad, fname, x, amounts, opts))
end

-- pixel_shuffle(x, r): N×(C·r²)×H×W -> N×C×(H·r)×(W·r), each r×r block of
-- output pixels from r² channels (sub-pixel convolution's upsampling);
-- pixel_unshuffle(x, r) is its inverse.
local function check_factor(fname, what, x, r)
    check_tensor(fname, "input", x)
    if type(r) ~= "number" or r < 1 or not is_int(r) then
        fail(fmt("%s: %s factor must be a positive integer, got %s", fname, what, tostring(r)))
    end
end

-- x as B x C x H x W (B: its leading dims, none or several, as Torch's
-- (*, C, H, W)), and a function giving a result of B x C' x H' x W' its
-- leading dims back.
local function leading_batch(x)
    local s = shape_of(x)
    local lead, B = {}, 1
    for i = 1, #s - 3 do
        lead[i] = s[i]
        B = B * s[i]
    end
    return x:reshape(B, s[#s - 2], s[#s - 1], s[#s]), function(y)
        local out = {}
        for i = 1, #lead do out[i] = lead[i] end
        for i = 2, 4 do out[#out + 1] = y:size(i) end
        return y:reshape(out)
    end
end

function M.pixel_shuffle(x, r, who, extra)
    local fname = name_of(who, "pixel_shuffle", extra)
    check_factor(fname, "upscale", x, r)
    if x:dim() < 3 or x:size(x:dim() - 2) % (r * r) ~= 0 then
        fail(fmt(fname .. ": expected (N x) C*%d x H x W, got %s", r * r, shape_str(x)))
    end
    local xb, back = leading_batch(x)
    local N, C, H, W = xb:size(1), xb:size(2) / (r * r), xb:size(3), xb:size(4)
    local y = back(xb:reshape(N, C, r, r, H, W):permute(1, 2, 5, 3, 6, 4):reshape(N, C, H * r, W * r))
    return y._c.storage == x._c.storage and y:clone() or y -- (a copy, as Torch's, also for r = 1)
end

function M.pixel_unshuffle(x, r, who, extra)
    local fname = name_of(who, "pixel_unshuffle", extra)
    check_factor(fname, "downscale", x, r)
    local nd = x:dim()
    if nd < 3 or x:size(nd - 1) % r ~= 0 or x:size(nd) % r ~= 0 then
        fail(fmt(fname .. ": expected (N x) C x H x W with H and W multiples of %d, got %s", r, shape_str(x)))
    end
    local xb, back = leading_batch(x)
    local N, C, H, W = xb:size(1), xb:size(2), xb:size(3) / r, xb:size(4) / r
    local y = back(xb:reshape(N, C, H, r, W, r):permute(1, 2, 4, 6, 3, 5):reshape(N, C * r * r, H, W))
    return y._c.storage == x._c.storage and y:clone() or y -- (a copy, as Torch's, also for r = 1)
end

-- Rows of weight (num × dim) at the indices (int64 or int32, from 1, any
-- shape): the result has the indices' shape and then dim.
-- padding_idx (optional): the rows at that index come out as zeros and
-- send no gradient to the weight (a padding token), as Torch's.
-- who (internal): the name an index out of range is reported under when
-- the kernel meets it ("Embedding" from the module; "embedding" here).
-- Torch's embedding_bag(input, weight [, offsets] [, {mode = "mean",
-- per_sample_weights, include_last_offset = false}]): the rows of weight
-- at the indices (from 1) of each bag, reduced by mode ("sum", "mean" or
-- "max"): a 2-D input holds one bag per row (no offsets); a 1-D one is cut
-- into bags at offsets, a 1-D integer tensor of the bags' first positions
-- (from 1, as ordo's indices: Torch's offsets + 1); an empty bag gives
-- zeros. per_sample_weights (the input's shape) scale each row, mode "sum"
-- only.  Gradients reach weight (and per_sample_weights).
local BAG_MODES = {sum = true, mean = true, max = true}
local function reduce_bag(mode, r, dim)
    if mode == "sum" then return r:sum(dim) end
    if mode == "mean" then return r:mean(dim) end
    return (r:max(dim))
end
function M.embedding_bag(input, weight, offsets, opts, who, extra)
    local fname = name_of(who, "embedding_bag", extra)
    if type(offsets) == "table" and not is_tensor(offsets) and opts == nil then offsets, opts = nil, offsets end
    opts = util.check_opts(fname, opts, {mode = true, per_sample_weights = true, include_last_offset = true})
    local mode = opts.mode == nil and "mean" or opts.mode
    if not BAG_MODES[mode] then
        fail(fmt("%s: mode must be \"sum\", \"mean\" or \"max\", got %s", fname, util.show(mode)))
    end
    local last = opts.include_last_offset
    if last ~= nil and type(last) ~= "boolean" then
        fail(fmt("%s: include_last_offset must be a boolean, got %s", fname, typename(last)))
    end
    check_tensor(fname, "input", input)
    if input:dim() ~= 1 and input:dim() ~= 2 then
        fail(fmt("%s: input must be 1-D (with offsets) or 2-D (a bag per row), got shape %s", fname, shape_str(input)))
    end
    local psw = opts.per_sample_weights
    if psw ~= nil then
        check_tensor(fname, "per_sample_weights", psw)
        if mode ~= "sum" then
            fail(fmt("%s: per_sample_weights are only supported with mode \"sum\", got mode %q", fname, mode))
        end
        if shape_str(psw) ~= shape_str(input) then
            fail(fmt("%s: per_sample_weights must have the input's shape %s, got %s", fname, shape_str(input),
                     shape_str(psw)))
        end
        check_same_dtype(fname, weight, "per_sample_weights", psw)
    end
    local rows = M.embedding(input, weight, nil, fname) -- (checks the indices and weight)
    if psw ~= nil then rows = rows * psw:unsqueeze(-1) end
    if input:dim() == 2 then
        if offsets ~= nil then fail(fmt("%s: offsets are for a 1-D input; a 2-D input has a bag per row", fname)) end
        if last then fail(fmt("%s: include_last_offset is for a 1-D input with offsets", fname)) end
        if input:size(2) == 0 then return tensor.zeros({input:size(1), weight:size(2)}, tensor.like(weight)) end
        return reduce_bag(mode, rows, 2)
    end
    if offsets == nil then fail(fmt("%s: a 1-D input needs offsets (the bags' first positions, from 1)", fname)) end
    check_tensor(fname, "offsets", offsets)
    if offsets:dim() ~= 1 or (offsets:dtype() ~= "int64" and offsets:dtype() ~= "int32") then
        fail(fmt("%s: offsets must be a 1-D int64 or int32 tensor, got %s of shape %s", fname, offsets:dtype(),
                 shape_str(offsets)))
    end
    local n, off = input:size(1), offsets:totable() -- (a wait: the bags' bounds are needed here)
    if #off == 0 then
        fail(fmt("%s: offsets must hold at least %s", fname, last and "two values" or "one value"))
    end
    if off[1] ~= 1 then fail(fmt("%s: the first offset must be 1 (bags start from 1, as indices), got %d", fname, off[1])) end
    for i = 2, #off do
        if off[i] < off[i - 1] or off[i] > n + 1 then
            fail(fmt("%s: offsets must be non-decreasing and within 1..%d, got %d at %d", fname, n + 1, off[i], i))
        end
    end
    local bounds = {}
    local nb = last and #off - 1 or #off
    if last and nb < 1 then fail(fmt("%s: with include_last_offset, offsets must hold at least two values", fname)) end
    for b = 1, nb do
        local stop = (b < #off) and off[b + 1] or n + 1
        bounds[b] = {off[b], stop - off[b]}
    end
    local out = {}
    for b, bd in ipairs(bounds) do
        if bd[2] == 0 then
            out[b] = tensor.zeros({weight:size(2)}, tensor.like(weight))
        else
            out[b] = reduce_bag(mode, rows:narrow(1, bd[1], bd[2]), 1)
        end
    end
    return tensor.stack(out, 1)
end

function M.embedding(indices, weight, padding_idx, who, ...)
    local fname = type(who) == "string" and who or "embedding"
    if (who ~= nil and type(who) ~= "string") or select("#", ...) > 0 and (...) ~= nil then
        -- (Torch's max_norm, norm_type, scale_grad_by_freq, sparse were dropped unseen: max_norm renormalises rows)
        fail(fmt("embedding: takes (indices, weight [, padding_idx]), got a further %s (Torch's max_norm, " ..
                 "scale_grad_by_freq and sparse are not supported)", typename(who ~= nil and who or (...))))
    end
    check_tensor(fname, "indices", indices)
    check_tensor(fname, "weight", weight)
    local dt = indices:dtype()
    if dt ~= "int64" and dt ~= "int32" then
        fail(fmt(fname .. ": indices must be int64 or int32 (from 1), got %s", dt))
    end
    if weight:dim() ~= 2 then
        fail(fmt("%s: weight must be 2-D (num x dim), got shape %s", fname, shape_str(weight)))
    end
    -- (one out of range, or not a number, was taken without a word: no row padded, as the module refuses)
    local num = weight:size(1)
    if is_int(padding_idx) and padding_idx < 0 and padding_idx >= -num then padding_idx = num + 1 + padding_idx end
    if padding_idx ~= nil and (not is_int(padding_idx) or padding_idx < 1 or padding_idx > num) then
        fail(fmt("%s: padding_idx must be an index in 1..%d (or -%d..-1 from the end), got %s", fname, num, num,
                 util.show(padding_idx)))
    end
    local s = shape_of(indices)
    s[#s + 1] = weight:size(2)
    local flat = indices:reshape(-1)
    -- a bad index, found when the kernel runs, is reported as embedding's
    local rows = weight:index_select(1, flat, fname)
    if padding_idx ~= nil and autograd.needs(rows) then
        -- the padding row comes out as it is (zeros in a new Embedding, the
        -- pretrained row in from_pretrained, as Torch) but gets no gradient:
        -- its places read a detached copy of the rows
        rows = tensor.where(flat:eq(padding_idx):view(-1, 1), rows:detach(), rows)
    end
    return rows:reshape(s)
end

-- binary_cross_entropy's node, Torch's gradients: p's is g (p - y) /
-- max(p (1 - p), 1e-12), finite at p = 0 and 1 (through the clamped logs
-- the chain rule met log's 1/p = 1/0 times clamp's 0 there: NaN); y's is
-- g (log(1 - p) - log p), the logs clamped as in the loss (Torch's is
-- -logit(p), infinite at p = 0 or 1).  A function of its own: no closure
-- in binary_cross_entropy.
local BCE_EPS = 1e-12
local function record_bce(p, y, loss)
    autograd.record("binary_cross_entropy", loss, {p, y, n = 2}, function(g)
        local gp, gy
        if p._rg then gp = g * (p - y) / (p * (1 - p)):clamp(BCE_EPS) end
        if y._rg then gy = g * ((1 - p):log():clamp(-100) - p:log():clamp(-100)) end
        return gp, gy
    end, {p, y})
end

-- Binary cross-entropy of probabilities p against targets y in [0, 1]
-- (the same shape): -(y log p + (1 - y) log(1 - p)), each log clamped at
-- -100 as Torch does, so p = 0 or 1 gives a large finite loss, not inf,
-- and a finite gradient (record_bce).
function M.binary_cross_entropy(p, y, opts, who, extra)
    local fname = name_of(who, "binary_cross_entropy", extra)
    opts = loss_opts(fname, opts, nil, {weight = true})
    check_same_shape(fname, p, y)
    local w = opts.weight -- each element's loss times its weight (broadcasting to p), Torch's
    if w ~= nil then check_target_broadcast(fname, p, w, "weight") end
    -- the value from detached operands (nothing recorded), the node after;
    -- a probability outside [0, 1] (or NaN) fails the loss at run time, as
    -- Torch's refuses it (no host wait: the check runs as an op)
    -- integer probabilities compute in float32 (or the target's float
    -- dtype) and are range-checked as floats are (an int64 2 gave NaN)
    if not FLOAT_DT[p:dtype()] then p = p:to(FLOAT_DT[y:dtype()] and y:dtype() or tensor.get_default_dtype()) end
    local pd, yd = p._rg and p:detach() or p, y._rg and y:detach() or y
    pd = tensor.checked_in_range(fname, pd, 0, 1)
    local loss = -(yd * pd:log():clamp(-100) + (1 - yd) * (1 - pd):log():clamp(-100))
    if autograd.needs(p, y) then record_bce(p, y, loss) end
    if w ~= nil then loss = loss * w end
    return reduce(fname, loss, opts.reduction)
end

-- Smooth L1: 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere
-- (opts.beta, default 1; 0 is the L1 loss).
function M.smooth_l1_loss(input, target, opts, who, extra)
    local fname = name_of(who, "smooth_l1_loss", extra)
    opts = loss_opts(fname, opts, {beta = true})
    check_tensor(fname, "input", input)
    check_target_broadcast(fname, input, target)
    local beta = opts.beta or 1
    if not (beta >= 0) then fail(fmt("%s: beta must be >= 0, got %s", fname, tostring(beta))) end
    input, target = as_float(input, target)
    local a = (input - target):abs()
    if beta == 0 then return reduce(fname, a, opts.reduction) end
    local loss = tensor.where(a:lt(beta), a * a * (0.5 / beta), a - 0.5 * beta)
    return reduce(fname, loss, opts.reduction)
end

-- Huber: 0.5 d^2 where |d| <= delta, delta (|d| - 0.5 delta) elsewhere
-- (opts.delta, default 1).
function M.huber_loss(input, target, opts, who, extra)
    local fname = name_of(who, "huber_loss", extra)
    opts = loss_opts(fname, opts, {delta = true})
    check_tensor(fname, "input", input)
    check_target_broadcast(fname, input, target)
    local delta = opts.delta or 1
    if not (delta > 0) then fail(fmt("%s: delta must be > 0, got %s", fname, tostring(delta))) end
    input, target = as_float(input, target)
    local a = (input - target):abs()
    local loss = tensor.where(a:le(delta), a * a * 0.5, (a - 0.5 * delta) * delta)
    return reduce(fname, loss, opts.reduction)
end

-- Kullback-Leibler divergence of target probabilities from log-probabilities
-- input (the same shape): target (log target - input), 0 where target is 0.
-- opts.reduction may also be "batchmean" (the sum over the first dim's
-- size: the true KL of each row, averaged; Torch's advice).
-- opts.log_target = true takes the target as log-probabilities too, as
-- Torch's: exp(target) (target - input).
function M.kl_div(input, target, opts, who, extra)
    local fname = name_of(who, "kl_div", extra)
    opts = util.check_opts(fname, opts, {reduction = true, log_target = true})
    check_same_shape(fname, input, target)
    local r = opts.reduction
    if r ~= nil and r ~= "batchmean" and not REDUCTIONS[r] then
        fail(fmt("%s: reduction must be 'mean', 'batchmean', 'sum' or 'none', got %s", fname, tostring(r)))
    end
    if opts.log_target ~= nil and type(opts.log_target) ~= "boolean" then
        fail(fmt("%s: log_target must be a boolean, got %s", fname, typename(opts.log_target)))
    end
    local loss
    if opts.log_target then
        if not FLOAT_DT[target:dtype()] then target = target:to(FLOAT_DT[input:dtype()] and input:dtype() or tensor.get_default_dtype()) end
        loss = target:exp() * (target - input)
    else
        -- 0 log 0 = 0, as Torch's: the log of 1 where the target is 0 (log 0
        -- would be -inf there, and its gradient 1/0 times 0 NaN in the
        -- target's gradient), and those places masked, gradients included
        local zero = target:eq(0)
        loss = target * (tensor.where(zero, 1, target):log() - input)
        loss = loss:masked_fill(zero, 0)
    end
    if r == "batchmean" then
        return loss:sum() / (input:dim() > 0 and input:size(1) or 1)
    end
    return reduce(fname, loss, opts.reduction)
end

-- Mean squared error; the target broadcasts to the input's shape.
function M.mse_loss(input, target, opts, who, extra)
    local fname = name_of(who, "mse_loss", extra)
    opts = loss_opts(fname, opts)
    check_tensor(fname, "input", input)
    check_target_broadcast(fname, input, target)
    input, target = as_float(input, target)
    local d = input - target
    return reduce(fname, d * d, opts.reduction)
end

return M
