-- ordo.nn.utils: gradient clipping.
--
--   loss:backward()
--   nn.utils.clip_grad_norm_(model:parameters(), 1.0)
--   opt:step()
--
-- Both push their work and return at once: nothing waits for the gradients.
-- clip_grad_norm_ scales by a 0-dim tensor computed on the device rather
-- than by a Lua number, which would need a wait for the norm.
local util = require "ordo.util"
local tensor = require "ordo.tensor"
local autograd = require "ordo.autograd"

local fail, typename = util.fail, util.typename
local is_tensor = tensor.is_tensor
local fmt, huge = string.format, math.huge
local type, ipairs, pairs, tostring, getmetatable, select = type, ipairs, pairs, tostring, getmetatable, select

local M = {}

-- nn.utils.rnn: pad_sequence, pack_padded_sequence, pad_packed_sequence, pack_sequence
M.rnn = require "ordo.nn.rnn_utils"

-- a bad value as a message shows it: a number, or its type ("1" is not 1)
local function shown(v) return type(v) == "number" and tostring(v) or typename(v) end

-- The gradients of params (a tensor or a list of them) that exist, each
-- once: a parameter listed twice (the lists of two modules that share
-- it, joined) is counted once in the norm and clipped once.
local function grads_of(fname, params)
    if is_tensor(params) then params = {params} end
    if type(params) ~= "table" or getmetatable(params) ~= nil then
        fail(fmt("%s: expected a list of parameters (model:parameters()), got %s", fname, typename(params)))
    end
    -- (ipairs stopped at a hole: {a, nil, b} left b unclipped)
    local n = 0
    for k in pairs(params) do if type(k) == "number" and k >= 1 and k % 1 == 0 and k > n then n = k end end
    local gs, dev, seen = {}, nil, {}
    for i = 1, n do
        local p = params[i]
        if not is_tensor(p) then fail(fmt("%s: parameter %d is %s, expected a tensor", fname, i, typename(p))) end
        local g = p.grad
        if g ~= nil and not is_tensor(g) then
            fail(fmt("%s: the gradient of parameter %d is %s, expected a tensor", fname, i, typename(g)))
        end
        if g ~= nil and not seen[g] then
            seen[g] = true
            -- (clipping writes into it: checked for all first, so that none is clipped alone)
            local c = g._c
            for d = 0, c.ndim - 1 do
                if c.strides[d] == 0 and c.shape[d] > 1 then
                    fail(fmt("%s: the gradient of parameter %d is an expanded view (a stride of 0), which " ..
                             "cannot be clipped in place; give it a copy (p.grad = p.grad:contiguous())", fname, i))
                end
            end
            dev = dev or g:device()
            if g:device() ~= dev then
                fail(fmt("%s: gradients on %s and %s: clipping needs them on one device", fname, tostring(dev),
                         tostring(g:device())))
            end
            gs[#gs + 1] = g
        end
    end
    return gs
end

-- The body of clip_grad_norm_, run in no-grad mode.
local function clip_norm(gs, max_norm, norm_type, error_if_nonfinite)
    local total
    for _, g in ipairs(gs) do
        -- (the powers in float64: a float32 gradient of 4e19, an exploding one, squared to inf and the
        -- norm with it, so every gradient was scaled to 0; one of 1e-25 squared to 0)
        local part
        if norm_type == huge then
            part = g:abs():max():to("float64")
        else
            part = g:to("float64"):abs():pow(norm_type):sum()
        end
        if total == nil then
            total = part
        elseif norm_type == huge then
            total = total:maximum(part)
        else
            total = total + part
        end
    end
    if norm_type ~= huge then total = total:pow(1 / norm_type) end
    if error_if_nonfinite then
        -- (Torch's check: a wait for the norm, before any gradient is scaled)
        local v = total:item()
        if not (v > -huge and v < huge) then
            fail(fmt("clip_grad_norm_: the total norm of order %s of the gradients is %s (non-finite), so they " ..
                     "cannot be clipped; the gradients are left as they were (error_if_nonfinite = false " ..
                     "scales them by it anyway)", norm_type == huge and "inf" or tostring(norm_type), tostring(v)))
        end
    end
    -- scale = min(1, max_norm / (total + 1e-6)): a 0-dim tensor, no wait
    local scale = (max_norm / (total + 1e-6)):clamp(nil, 1)
    for _, g in ipairs(gs) do g:mul_(scale:to(g:dtype())) end
    return total
end

-- Torch's trailing arguments of the clippers: error_if_nonfinite (a
-- boolean, clip_grad_norm_ only) and foreach (a boolean or nil: a speed
-- hint, nothing to do here), positional or as an options table
-- {error_if_nonfinite =, foreach =}.  Anything else raises: a dropped
-- error_if_nonfinite = true would let a NaN norm through unseen.
local CLIP_OPTS = {error_if_nonfinite = true, foreach = true}
local function clip_options(fname, with_nonfinite, ...)
    local n = select("#", ...)
    while n > 0 and select(n, ...) == nil do n = n - 1 end -- (trailing nils are no arguments)
    local a, b = ...
    local nonfinite, foreach
    if n == 1 and type(a) == "table" and getmetatable(a) == nil then
        local o = util.check_opts(fname, a, with_nonfinite and CLIP_OPTS or {foreach = true})
        nonfinite, foreach = o.error_if_nonfinite, o.foreach
    elseif with_nonfinite and n <= 2 then
        nonfinite, foreach = a, b
    elseif not with_nonfinite and n <= 1 then
        foreach = a
    else
        fail(fmt("%s: too many arguments (after %s: an options table {%s} or Torch's positional %s)", fname,
                 with_nonfinite and "norm_type" or "clip_value",
                 with_nonfinite and "error_if_nonfinite, foreach" or "foreach",
                 with_nonfinite and "error_if_nonfinite, foreach" or "foreach"))
    end
    if nonfinite ~= nil and type(nonfinite) ~= "boolean" then
        fail(fmt("%s: error_if_nonfinite must be true or false, got %s", fname, shown(nonfinite)))
    end
    if foreach ~= nil and type(foreach) ~= "boolean" then
        fail(fmt("%s: foreach must be true, false or nil, got %s", fname, shown(foreach)))
    end
    return nonfinite == true
end

-- clip_grad_norm_(params, max_norm [, norm_type = 2 [, error_if_nonfinite
-- = false [, foreach]]]): scales the gradients of params together so that
-- their norm (all of them as one vector; norm_type a p > 0, or math.huge /
-- "inf" for the largest magnitude) is at most max_norm.  Returns that norm
-- before clipping, a 0-dim float64 tensor (0 when no parameter has a
-- gradient).  error_if_nonfinite (or {error_if_nonfinite = true}) waits
-- for the norm and raises, the gradients unchanged, when it is NaN or inf.
function M.clip_grad_norm_(params, max_norm, norm_type, ...)
    local fname = "clip_grad_norm_"
    local error_if_nonfinite = clip_options(fname, true, ...)
    if type(max_norm) ~= "number" or not (max_norm >= 0) then
        fail(fmt("%s: max_norm must be a number >= 0, got %s", fname, shown(max_norm)))
    end
    if norm_type == nil then norm_type = 2 end
    if norm_type == "inf" then norm_type = huge end
    if type(norm_type) ~= "number" or not (norm_type > 0) then
        fail(fmt("%s: norm_type must be a number > 0 or \"inf\", got %s", fname, shown(norm_type)))
    end
    local gs = grads_of(fname, params)
    if #gs == 0 then return tensor.zeros({}, {dtype = "float64"}) end
    return autograd.no_grad(clip_norm, gs, max_norm, norm_type, error_if_nonfinite)
end

-- clip_grad_value_(params, clip_value [, foreach]): clamps every gradient
-- element to [-clip_value, clip_value], in place.
function M.clip_grad_value_(params, clip_value, ...)
    local fname = "clip_grad_value_"
    clip_options(fname, false, ...)
    if type(clip_value) ~= "number" or not (clip_value >= 0) then
        fail(fmt("%s: clip_value must be a number >= 0, got %s", fname, shown(clip_value)))
    end
    for _, g in ipairs(grads_of(fname, params)) do
        autograd.no_grad(g.clamp_, g, -clip_value, clip_value)
    end
end

-- The tensors of params (a tensor or a list of them, no holes), checked.
local function tensor_list(fname, params)
    if is_tensor(params) then return {params} end
    if type(params) ~= "table" or getmetatable(params) ~= nil then
        fail(fmt("%s: expected a list of parameters (model:parameters()), got %s", fname, typename(params)))
    end
    local n = 0
    for k in pairs(params) do
        if not (type(k) == "number" and k >= 1 and k % 1 == 0) then
            fail(fmt("%s: expected a list of parameters, got the key %s", fname, tostring(k)))
        end
        if k > n then n = k end
    end
    local r = {}
    for i = 1, n do
        local p = params[i]
        if not is_tensor(p) then fail(fmt("%s: parameter %d is %s, expected a tensor", fname, i, typename(p))) end
        if i > 1 and tostring(p:device()) ~= tostring(r[1]:device()) then
            fail(fmt("%s: the parameters must be on one device, parameter 1 is on %s, parameter %d on %s", fname,
                     tostring(r[1]:device()), i, tostring(p:device())))
        end
        r[i] = p
    end
    return r
end

-- parameters_to_vector(params): Torch's: the parameters flattened and
-- joined into one 1-dim tensor (a copy; gradients flow back to them).
function M.parameters_to_vector(params, ...)
    local fname = "parameters_to_vector"
    if select("#", ...) > 0 then fail(fmt("%s: takes the parameters alone, got a further %s", fname, typename((...)))) end
    local ps = tensor_list(fname, params)
    if #ps == 0 then fail(fname .. ": expected at least one parameter, got an empty list") end
    local flat = {}
    for i, p in ipairs(ps) do flat[i] = p:reshape(-1) end
    return tensor.cat(flat)
end

-- vector_to_parameters(vec, params): Torch's: vec's values copied into the
-- parameters in turn (each its numel, in its shape), outside autograd;
-- vec must hold exactly as many values as the parameters.
function M.vector_to_parameters(vec, params, ...)
    local fname = "vector_to_parameters"
    if select("#", ...) > 0 then fail(fmt("%s: takes vec and the parameters, got a further %s", fname, typename((...)))) end
    if not is_tensor(vec) then fail(fmt("%s: vec must be a tensor, got %s", fname, typename(vec))) end
    if vec:dim() ~= 1 then fail(fmt("%s: vec must have 1 dim, got %d", fname, vec:dim())) end
    local ps = tensor_list(fname, params)
    local total = 0
    for _, p in ipairs(ps) do total = total + p:numel() end
    if vec:numel() ~= total then
        fail(fmt("%s: vec has %d values, the parameters %d", fname, vec:numel(), total))
    end
    if #ps > 0 and tostring(vec:device()) ~= tostring(ps[1]:device()) then
        fail(fmt("%s: vec is on %s, the parameters on %s", fname, tostring(vec:device()), tostring(ps[1]:device())))
    end
    autograd.no_grad(function()
        local at = 1
        for _, p in ipairs(ps) do
            local n = p:numel()
            if n > 0 then p:copy_(vec:narrow(1, at, n):view(p:shape())) end
            at = at + n
        end
    end)
end

return M
