-- ordo.nn.attention: scaled dot-product attention, multi-head attention and
-- the transformer encoder and decoder layers built on it.
--
--   local out = F.scaled_dot_product_attention(q, k, v, {is_causal = true})
--   local mha = nn.MultiheadAttention(64, 8, {batch_first = true})
--   local y, weights = mha(x, x, x)                 -- self-attention
--
-- Made of tensor ops (matmul, softmax, masked_fill), so they run on every
-- device and autograd differentiates them.  The masks follow Torch, which
-- gives its two functions opposite boolean conventions:
--   scaled_dot_product_attention: a uint8 attn_mask is 1 where a query MAY
--     attend to a key; a float one is added to the scores;
--   MultiheadAttention: a uint8 attn_mask and key_padding_mask are 1 where
--     a query may NOT attend (padding); a float attn_mask is added.
-- A query that may attend to nothing gets zero weights and output (Torch's
-- scaled_dot_product_attention; its MultiheadAttention can give NaN there).
local util = require "ordo.util"
local tensor = require "ordo.tensor"
local autograd = require "ordo.autograd"
local functional = require "ordo.nn.functional"

local fail, typename = util.fail, util.typename
local is_tensor, shape_of = tensor.is_tensor, tensor.shape_of
local fmt, sqrt, huge = string.format, math.sqrt, math.huge
local type, tostring, ipairs, unpack, next, rawset, getmetatable, setmetatable =
    type, tostring, ipairs, unpack, next, rawset, getmetatable, setmetatable

local M = {}

local shape_str = tensor.shape_str_of

local check_tensor = tensor.check_tensor
local check_devices = tensor.check_devices

local FLOAT = {float32 = true, float64 = true}

-- A mask given as argument what of fname, checked against the query q: a
-- tensor on q's device, uint8 (boolean) or a float one of q's dtype (Torch
-- refuses a float mask of another dtype; added, it would silently turn the
-- scores, and the output, into its dtype; and it takes only bool and float
-- masks: an int32 or int64 one was taken as boolean without a word).
local function check_mask(fname, what, mask, q)
    if mask == nil then return end
    check_tensor(fname, what, mask)
    if mask:device() ~= q:device() then
        fail(fmt("%s: expected all tensors on one device, got %s (the query) and %s (%s)", fname,
                 tostring(q:device()), tostring(mask:device()), what))
    end
    if mask:dtype() ~= "uint8" and not FLOAT[mask:dtype()] then
        fail(fmt("%s: %s must be uint8 (a boolean mask) or the query's float dtype %s, got %s", fname, what,
                 q:dtype(), mask:dtype()))
    end
    if FLOAT[mask:dtype()] and mask:dtype() ~= q:dtype() then
        fail(fmt("%s: %s is %s but the query %s: a float mask (added to the scores) must have the query's dtype, " ..
                 "a uint8 one is boolean", fname, what, mask:dtype(), q:dtype()))
    end
end

local function check_bool(fname, what, v)
    if v ~= nil and type(v) ~= "boolean" then fail(fmt("%s: %s must be a boolean, got %s", fname, what, typename(v))) end
end

-- The masks and flags of a transformer module's forward, checked under the
-- names its caller gave them (src_mask, tgt_is_causal...) against the
-- input x they apply to (they were reported as MultiheadAttention's
-- attn_mask or is_causal).
local function check_layer_opts(fname, opts, x, what, masks, flags)
    check_tensor(fname, what, x)
    for _, m in ipairs(masks) do check_mask(fname, m, opts[m], x) end
    for _, f in ipairs(flags or {}) do check_bool(fname, f, opts[f]) end
end

-- scores with a mask applied: allowed (uint8) says where attention may go
-- when allow is true, where it may not when false; a float mask is added.
local function apply_mask(fname, scores, mask, allow)
    if mask == nil then return scores end
    check_tensor(fname, "attn_mask", mask)
    if FLOAT[mask:dtype()] then return scores + mask end
    local blocked = allow and mask:eq(0) or mask:ne(0)
    return scores:masked_fill(blocked, -huge)
end

-- softmax over dim of masked scores: a row whose every score is -inf (a
-- query that may attend to no key: a sequence all padding) gives zeros, as
-- Torch's scaled_dot_product_attention (_safe_softmax); softmax gave NaN
-- there, and NaN gradients to every parameter.  The row's scores are 0
-- inside, so that its softmax, and the backward through it, meet no NaN.
local function safe_softmax(scores, dim)
    local none = scores:eq(-huge):all(dim, true)
    return scores:masked_fill(none, 0):softmax(dim):masked_fill(none, 0)
end

-- The causal mask of L queries and S keys: 1 where key j comes after query
-- i (aligned at the top left, as Torch's is_causal).
local function causal_blocked(L, S, like)
    return tensor.ones({L, S}, tensor.like(like, "uint8")):triu(1)
end

local SDPA_OPTS = {attn_mask = true, is_causal = true, dropout_p = true, scale = true, training = true,
                   enable_gqa = true}

-- The shape the leading dims (all but the last two) of shapes broadcast
-- to (right-aligned, sizes equal or 1), or nil when they do not.
local function broadcast_lead(shapes)
    local leads = {}
    for i, s in ipairs(shapes) do leads[i] = {unpack(s, 1, #s - 2)} end
    local ok, out = pcall(tensor.broadcast_shape, "", leads)
    return ok and out or nil
end

-- t expanded to the leading dims lead and its own last two (rows, cols),
-- then flattened into one batch of rows x cols matrices.
local function as_batch(t, lead, rows, cols)
    local s = {unpack(lead)}
    s[#s + 1], s[#s + 2] = rows, cols
    return t:expand(s):reshape(-1, rows, cols)
end

-- Whether a mask of shape ms broadcasts to the scores' shape full
-- (without growing it).
local function broadcasts_to(ms, full)
    if #ms > #full then return false end
    for i = 1, #ms do
        local d, f = ms[#ms - i + 1], full[#full - i + 1]
        if d ~= f and d ~= 1 then return false end
    end
    return true
end

-- scaled_dot_product_attention(q, k, v [, {attn_mask, is_causal = false,
-- dropout_p = 0, scale = 1/sqrt(E), training = true, enable_gqa = false}]): softmax(q kᵀ ·
-- scale + mask) v over q (..., L, E), k (..., S, E), v (..., S, Ev); the
-- leading dims broadcast against each other (sizes equal or 1), and the
-- mask against the scores (..., L, S).  dropout_p drops attention weights
-- (as Torch: pass it only when training, or pass training = false, which
-- turns the dropout off).
function M.scaled_dot_product_attention(q, k, v, opts)
    local fname = "scaled_dot_product_attention"
    check_tensor(fname, "query", q)
    check_tensor(fname, "key", k)
    check_tensor(fname, "value", v)
    opts = util.check_opts(fname, opts, SDPA_OPTS)
    check_devices(fname, q, k, v)
    check_mask(fname, "attn_mask", opts.attn_mask, q)
    check_bool(fname, "is_causal", opts.is_causal)
    if k:dtype() ~= q:dtype() or v:dtype() ~= q:dtype() then
        fail(fmt("%s: query, key and value must have one dtype, got %s, %s and %s", fname, q:dtype(), k:dtype(),
                 v:dtype()))
    end
    if q:dim() < 2 or k:dim() < 2 or v:dim() < 2 then
        fail(fmt("%s: query, key and value need at least 2 dims (..., length, features), got %s, %s and %s", fname,
                 shape_str(q), shape_str(k), shape_str(v)))
    end
    local E, S = q:size(-1), k:size(-2)
    if k:size(-1) ~= E or v:size(-2) ~= S then
        fail(fmt("%s: key %s must have query's %d features and value %s key's %d positions", fname, shape_str(k), E,
                 shape_str(v), S))
    end
    if not FLOAT[q:dtype()] then fail(fmt("%s: query must be float32 or float64, got %s", fname, q:dtype())) end
    local scale = opts.scale or 1 / sqrt(E)
    if type(scale) ~= "number" then fail(fmt("%s: scale must be a number, got %s", fname, typename(scale))) end
    if opts.is_causal and opts.attn_mask ~= nil then fail(fname .. ": give attn_mask or is_causal, not both") end
    local p = opts.dropout_p or 0
    if type(p) ~= "number" or not (p >= 0 and p < 1) then -- (NaN too)
        fail(fmt("%s: dropout_p must be a number in [0, 1), got %s", fname, tostring(p)))
    end
    if opts.training ~= nil and type(opts.training) ~= "boolean" then
        fail(fmt("%s: training must be a boolean, got %s", fname, typename(opts.training)))
    end
    if opts.training == false then p = 0 end
    check_bool(fname, "enable_gqa", opts.enable_gqa)
    -- grouped-query attention (Torch's enable_gqa): key and value with
    -- fewer heads (dim -3) than the query, each shared by a group of them
    if opts.enable_gqa and q:dim() >= 3 and k:dim() >= 3 and v:dim() >= 3 then
        local Hq, Hk, Hv = q:size(-3), k:size(-3), v:size(-3)
        if Hk ~= Hq or Hv ~= Hq then
            if Hk ~= Hv or Hq % Hk ~= 0 then
                fail(fmt("%s: enable_gqa: the query's %d heads (dim -3) must be a multiple of key's and value's, " ..
                         "which must agree, got %d and %d", fname, Hq, Hk, Hv))
            end
            k, v = k:repeat_interleave(Hq / Hk, k:dim() - 2), v:repeat_interleave(Hq / Hk, v:dim() - 2)
        end
    end
    local L, Ev = q:size(-2), v:size(-1)
    local lead = broadcast_lead({shape_of(q), shape_of(k), shape_of(v)})
    if lead == nil then
        fail(fmt("%s: the leading dims of query %s, key %s and value %s do not broadcast", fname, shape_str(q),
                 shape_str(k), shape_str(v)))
    end
    -- more than one leading dim (N x heads x length x E): expanded to the
    -- broadcast shape and flattened into one batch for matmul, which takes 3
    if #lead > 1 then
        q, k, v = as_batch(q, lead, L, E), as_batch(k, lead, S, E), as_batch(v, lead, S, Ev)
    end
    local scores = q:matmul(k:transpose(-2, -1)) * scale
    local full = shape_of(scores)
    if #lead > 1 then -- the masks broadcast against the caller's dims
        full = {unpack(lead)}
        full[#full + 1], full[#full + 2] = L, S
        scores = scores:view(full)
    end
    if opts.is_causal then scores = scores:masked_fill(causal_blocked(L, S, q), -huge) end
    local mask = opts.attn_mask
    if mask ~= nil then
        check_tensor(fname, "attn_mask", mask)
        if not broadcasts_to(shape_of(mask), full) then
            fail(fmt("%s: attn_mask of shape %s does not broadcast to the attention scores' shape %s (..., L, S)",
                     fname, shape_str(mask), tensor.shape_str(full)))
        end
    end
    scores = apply_mask(fname, scores, mask, true)
    -- (a causal mask alone leaves every query a key: the first)
    local attn = mask ~= nil and safe_softmax(scores, -1) or scores:softmax(-1)
    if p > 0 then attn = functional.dropout(attn, p, true) end
    if #lead <= 1 then return attn:matmul(v) end
    local out = attn:reshape(-1, L, S):matmul(v)
    full[#full] = Ev
    return out:view(full)
end

function M.install(nn)
    local F = nn.functional
    F.scaled_dot_product_attention = M.scaled_dot_product_attention
    local Module, init = nn.Module, nn.init

    -- MultiheadAttention(embed_dim, num_heads [, {dropout = 0, bias = true,
    -- batch_first = false, kdim = embed_dim, vdim = embed_dim, add_bias_kv =
    -- false, add_zero_attn = false, dtype, device}]): Torch's layer and
    -- parameters (in_proj_weight 3E x E drawn by xavier_uniform_ -- or, with
    -- kdim or vdim not E, q_proj_weight E x E, k_proj_weight E x kdim and
    -- v_proj_weight E x vdim --, in_proj_bias zeros, out_proj a Linear(E,
    -- E) with a zero bias, add_bias_kv's bias_k and bias_v 1 x 1 x E).
    -- forward(query, key, value [, {key_padding_mask, attn_mask,
    -- need_weights = true, average_attn_weights = true, is_causal}]):
    -- query L x N x E (N x L x E with batch_first, L x E unbatched), key and
    -- value S x N x kdim / vdim; returns the output (query's shape) and, with
    -- need_weights, the attention weights N x L x S (averaged over the
    -- heads) or N x H x L x S (without N unbatched).
    local MHA = Module:extend("MultiheadAttention")
    nn.MultiheadAttention = MHA
    local MHA_OPTS = {dropout = true, bias = true, batch_first = true, dtype = true, device = true, kdim = true,
                      vdim = true, add_bias_kv = true, add_zero_attn = true}
    function MHA:init(E, H, opts)
        local name = "MultiheadAttention"
        util.check_positive_int(name, "embed_dim", E)
        util.check_positive_int(name, "num_heads", H)
        if E % H ~= 0 then fail(fmt("%s: embed_dim %d must be divisible by num_heads %d", name, E, H)) end
        opts = util.check_opts(name, opts, MHA_OPTS)
        local p = opts.dropout or 0
        if type(p) ~= "number" or not (p >= 0 and p < 1) then -- (NaN too)
            fail(fmt("%s: dropout must be a number in [0, 1), got %s", name, tostring(p)))
        end
        for _, o in ipairs({"bias", "batch_first", "add_bias_kv", "add_zero_attn"}) do check_bool(name, o, opts[o]) end
        local kd, vd = opts.kdim or E, opts.vdim or E
        util.check_positive_int(name, "kdim", kd)
        util.check_positive_int(name, "vdim", vd)
        self.embed_dim, self.num_heads, self.head_dim, self.dropout = E, H, E / H, p
        self.kdim, self.vdim = kd, vd
        self.batch_first = opts.batch_first == true
        self.add_zero_attn = opts.add_zero_attn == true
        local topts = util.param_opts(opts, self)
        if kd == E and vd == E then
            self:register_parameter("in_proj_weight", init.xavier_uniform_(tensor.empty({3 * E, E}, topts)))
        else -- (Torch's names, so that its state dict loads)
            self:register_parameter("q_proj_weight", init.xavier_uniform_(tensor.empty({E, E}, topts)))
            self:register_parameter("k_proj_weight", init.xavier_uniform_(tensor.empty({E, kd}, topts)))
            self:register_parameter("v_proj_weight", init.xavier_uniform_(tensor.empty({E, vd}, topts)))
        end
        if opts.bias ~= false then self:register_parameter("in_proj_bias", tensor.zeros({3 * E}, topts)) end
        self.out_proj = nn.Linear(E, E, {bias = opts.bias ~= false, dtype = topts.dtype, device = topts.device})
        if self.out_proj.bias then autograd.no_grad(function() self.out_proj.bias:zero_() end) end
        if opts.add_bias_kv then
            self:register_parameter("bias_k", init.xavier_normal_(tensor.empty({1, 1, E}, topts)))
            self:register_parameter("bias_v", init.xavier_normal_(tensor.empty({1, 1, E}, topts)))
        end
    end

    -- m with n columns of zeros appended to its last dim (a mask padded for
    -- add_bias_kv's and add_zero_attn's extra keys: they take part).
    local function pad_cols(m, n)
        if n == 0 then return m end
        local s = shape_of(m)
        s[#s] = n
        return tensor.cat({m, tensor.zeros(s, tensor.like(m))}, #s)
    end

    local FWD_OPTS = {key_padding_mask = true, attn_mask = true, need_weights = true, average_attn_weights = true,
                      is_causal = true}

    function MHA:forward(query, key, value, opts)
        local name = "MultiheadAttention"
        opts = util.check_opts(name, opts, FWD_OPTS)
        key, value = key or query, value or key or query
        check_tensor(name, "query", query)
        local unbatched = query:dim() == 2
        local want = unbatched and "length" or self.batch_first and "N x length" or "length x N"
        for _, it in ipairs({{"query", query, self.embed_dim}, {"key", key, self.kdim}, {"value", value, self.vdim}}) do
            local what, t, e = it[1], it[2], it[3]
            check_tensor(name, what, t)
            if t:dim() ~= query:dim() or (t:dim() ~= 3 and t:dim() ~= 2) or t:size(-1) ~= e then
                fail(fmt("%s: %s must be %s x %d (query %s), got %s", name, what, want, e,
                         unbatched and "unbatched, length x E" or "batched", shape_str(t)))
            end
        end
        -- the inputs, the masks and the layer's parameters on one device
        check_devices(name, query, key, value, self.out_proj.weight)
        check_mask(name, "attn_mask", opts.attn_mask, query)
        check_mask(name, "key_padding_mask", opts.key_padding_mask, query)
        for _, o in ipairs({"need_weights", "average_attn_weights", "is_causal"}) do check_bool(name, o, opts[o]) end
        if key:dtype() ~= query:dtype() or value:dtype() ~= query:dtype() then
            fail(fmt("%s: query, key and value must have one dtype, got %s, %s and %s", name, query:dtype(),
                     key:dtype(), value:dtype()))
        end
        -- and the layer's (Torch's; mixed, the projections promoted: a float64 output of float32 weights)
        if self.in_proj_weight ~= nil then
            tensor.check_same_dtype(name, query, "in_proj_weight", self.in_proj_weight, "query")
        else
            tensor.check_same_dtype(name, query, "q_proj_weight", self.q_proj_weight, "query")
        end
        local kpm = opts.key_padding_mask
        if unbatched then -- Torch's unbatched input: a batch of one
            query, key, value = query:unsqueeze(2), key:unsqueeze(2), value:unsqueeze(2)
            if kpm ~= nil and kpm:dim() == 1 then kpm = kpm:view(1, kpm:size(1)) end
        elseif self.batch_first then -- work in length x N x E
            query, key, value = query:transpose(1, 2), key:transpose(1, 2), value:transpose(1, 2)
        end
        local L, N, E, H, D = query:size(1), query:size(2), self.embed_dim, self.num_heads, self.head_dim
        local S0 = key:size(1)
        if key:size(2) ~= N or value:size(2) ~= N or value:size(1) ~= S0 then
            fail(fmt("%s: query, key and value disagree on the batch or key length (%s, %s, %s)", name,
                     shape_str(query), shape_str(key), shape_str(value)))
        end
        local b = self.in_proj_bias
        local function project(x, i, W) -- the in-projection i (0 q, 1 k, 2 v): len x N x E
            if W == nil then W = self.in_proj_weight:narrow(1, i * E + 1, E) end
            return F.linear(x, W, b and b:narrow(1, i * E + 1, E))
        end
        local function heads(y) return y:reshape(y:size(1), N * H, D):transpose(1, 2) end -- (N·H) x len x D
        local q = project(query, 0, self.q_proj_weight)
        local k, v = project(key, 1, self.k_proj_weight), project(value, 2, self.v_proj_weight)
        if self.bias_k then -- add_bias_kv: one more key and value, learned
            k = tensor.cat({k, self.bias_k:expand({1, N, E})}, 1)
            v = tensor.cat({v, self.bias_v:expand({1, N, E})}, 1)
        end
        q, k, v = heads(q), heads(k), heads(v)
        if self.add_zero_attn then -- one more key and value, zeros
            local z = tensor.zeros({N * H, 1, D}, tensor.like(k))
            k, v = tensor.cat({k, z}, 2), tensor.cat({v, z}, 2)
        end
        local S = k:size(2)
        local scores = (q:matmul(k:transpose(2, 3)) * (1 / sqrt(D))):view(N, H, L, S)
        -- With attn_mask too, Torch takes is_causal as a hint that attn_mask
        -- is the causal mask (nn.Transformer's generate_square_subsequent_mask
        -- with is_causal = true is its usual call): both are applied, which
        -- is Torch's result when the hint is true and never attends to a
        -- later position when it is not.
        if opts.is_causal then
            scores = scores:masked_fill(pad_cols(causal_blocked(L, S0, scores), S - S0), -huge)
        end
        local am = opts.attn_mask
        if am ~= nil then
            if am:dim() == 2 and am:size(1) == L and am:size(2) == S0 then
                am = am:view(1, 1, L, S0)
            elseif am:dim() == 3 and am:size(1) == N * H and am:size(2) == L and am:size(3) == S0 then
                am = am:view(N, H, L, S0)
            else
                fail(fmt("%s: attn_mask must be %d x %d or %d x %d x %d (L x S or N·num_heads x L x S), got %s", name,
                         L, S0, N * H, L, S0, shape_str(am)))
            end
            scores = apply_mask(name, scores, pad_cols(am, S - S0), false)
        end
        if kpm ~= nil then
            if kpm:dim() ~= 2 or kpm:size(1) ~= N or kpm:size(2) ~= S0 then
                fail(fmt("%s: key_padding_mask must be %s%d (%skey length), got %s", name,
                         unbatched and "" or N .. " x ", S0, unbatched and "" or "batch x ",
                         shape_str(opts.key_padding_mask)))
            end
            scores = apply_mask(name, scores, pad_cols(kpm, S - S0):view(N, 1, 1, S), false)
        end
        local attn = (am ~= nil or kpm ~= nil) and safe_softmax(scores, 4) or scores:softmax(4)
        -- the weights returned are those applied, after the dropout (Torch's)
        if self.dropout > 0 and self.training then attn = F.dropout(attn, self.dropout, true) end
        local weights = attn
        local out = attn:reshape(N * H, L, S):matmul(v)             -- (N·H) x L x D
            :transpose(1, 2):reshape(L, N, E)                         -- L x N x E
        out = self.out_proj(out)
        if unbatched then
            out = out:squeeze(2)
        elseif self.batch_first then
            out = out:transpose(1, 2)
        end
        if opts.need_weights == false then return out end
        if opts.average_attn_weights ~= false then weights = weights:mean(2) end
        if unbatched then weights = weights:squeeze(1) end
        return out, weights
    end

    local LAYER_OPTS = {dim_feedforward = true, dropout = true, activation = true, layer_norm_eps = true,
                        batch_first = true, norm_first = true, bias = true, dtype = true, device = true}
    -- "gelu" is Torch's layer's: the exact erf form (F.gelu's default)
    local ACTIVATIONS = {relu = F.relu, gelu = F.gelu}

    local function is_callable(f)
        if type(f) == "function" then return true end
        local mt = getmetatable(f)
        return type(f) == "table" and mt ~= nil and mt.__call ~= nil
    end

    -- What both layers are made of: n_attn attentions, the feed-forward
    -- network, n_attn + 1 LayerNorms and the dropouts (one child a
    -- statement: children are registered in the order assigned).
    local function build_layer(self, name, d, heads, opts, n_attn)
        local given = opts
        opts = util.check_opts(name, opts, LAYER_OPTS)
        local ff = opts.dim_feedforward or 2048
        util.check_positive_int(name, "dim_feedforward", ff)
        local act = opts.activation or "relu"
        if not ACTIVATIONS[act] and not is_callable(act) then
            fail(fmt("%s: activation must be 'relu', 'gelu' or a function (or module) of one tensor, got %s", name,
                     type(act) == "string" and fmt("'%s'", act) or typename(act)))
        end
        for _, o in ipairs({"bias", "batch_first", "norm_first"}) do check_bool(name, o, opts[o]) end
        util.check_positive_int(name, "d_model", d)
        util.check_positive_int(name, "nhead", heads)
        if d % heads ~= 0 then fail(fmt("%s: d_model %d must be divisible by nhead %d", name, d, heads)) end
        local p = opts.dropout == nil and 0.1 or opts.dropout
        if type(p) ~= "number" or not (p >= 0 and p < 1) then -- (NaN too)
            fail(fmt("%s: dropout must be a number in [0, 1), got %s", name, tostring(p)))
        end
        local eps = opts.layer_norm_eps or 1e-5
        if type(eps) ~= "number" or not (eps >= 0) then
            fail(fmt("%s: layer_norm_eps must be a non-negative number, got %s", name, tostring(eps)))
        end
        local bias = opts.bias ~= false
        local topts = {bias = bias, dtype = opts.dtype, device = opts.device}
        local mha_opts = {dropout = p, bias = bias, batch_first = opts.batch_first, dtype = opts.dtype,
                          device = opts.device}
        self.self_attn = MHA(d, heads, mha_opts)
        if n_attn == 2 then self.multihead_attn = MHA(d, heads, mha_opts) end
        self.linear1 = nn.Linear(d, ff, topts)
        self.dropout = nn.Dropout(p)
        self.linear2 = nn.Linear(ff, d, topts)
        for i = 1, n_attn + 1 do
            self["norm" .. i] = nn.LayerNorm(d, {eps = eps, bias = bias, dtype = opts.dtype, device = opts.device})
        end
        for i = 1, n_attn + 1 do self["dropout" .. i] = nn.Dropout(p) end
        -- (a module given as the activation is a child, as in Torch)
        self.activation, self.norm_first = act, opts.norm_first == true
        self.batch_first = opts.batch_first == true
        -- what TransformerEncoder / TransformerDecoder make their copies from
        rawset(self, "_build_args", {d, heads, given})
    end

    -- x + sublayer(x) with the layer's norm k: before (norm_first) or after.
    local function residual(self, k, x, sublayer, ...)
        local norm = self["norm" .. k]
        if self.norm_first then return x + self["dropout" .. k](sublayer(self, norm(x), ...)) end
        return norm(x + self["dropout" .. k](sublayer(self, x, ...)))
    end
    local function self_block(self, x, o) return (self.self_attn(x, x, x, o)) end
    local function cross_block(self, x, memory, o) return (self.multihead_attn(x, memory, memory, o)) end
    local function ff_block(self, x)
        local act = self.activation
        if type(act) == "string" then act = ACTIVATIONS[act] end
        return self.linear2(self.dropout(act(self.linear1(x))))
    end

    -- TransformerEncoderLayer(d_model, nhead [, {dim_feedforward = 2048,
    -- dropout = 0.1, activation = "relu" | "gelu" | a function, layer_norm_eps
    -- = 1e-5, batch_first = false, norm_first = false, bias = true, dtype,
    -- device}]): Torch's layer -- self-attention then a feed-forward network
    -- (Linear, activation, Linear), each with dropout and a residual
    -- connection, LayerNorm after each (before, with norm_first).
    -- forward(src [, {src_mask, src_key_padding_mask, is_causal}]): src
    -- length x N x d_model (N x length x d_model with batch_first, length x
    -- d_model unbatched); the masks as MultiheadAttention's.
    local Encoder = Module:extend("TransformerEncoderLayer")
    nn.TransformerEncoderLayer = Encoder
    function Encoder:init(d, heads, opts) build_layer(self, "TransformerEncoderLayer", d, heads, opts, 1) end

    local ENC_FWD = {src_mask = true, src_key_padding_mask = true, is_causal = true}
    function Encoder:forward(src, opts)
        opts = util.check_opts("TransformerEncoderLayer", opts, ENC_FWD)
        check_layer_opts("TransformerEncoderLayer", opts, src, "src", {"src_mask", "src_key_padding_mask"},
                         {"is_causal"})
        local o = {attn_mask = opts.src_mask, key_padding_mask = opts.src_key_padding_mask, is_causal = opts.is_causal,
                   need_weights = false}
        return residual(self, 2, residual(self, 1, src, self_block, o), ff_block)
    end

    -- TransformerDecoderLayer(d_model, nhead [, the encoder layer's
    -- options]): Torch's layer -- self-attention over the target, then
    -- attention from the target to memory (the encoder's output), then the
    -- feed-forward network, each with dropout, a residual connection and a
    -- LayerNorm.  forward(tgt, memory [, {tgt_mask, memory_mask,
    -- tgt_key_padding_mask, memory_key_padding_mask, tgt_is_causal,
    -- memory_is_causal}]).
    local Decoder = Module:extend("TransformerDecoderLayer")
    nn.TransformerDecoderLayer = Decoder
    function Decoder:init(d, heads, opts) build_layer(self, "TransformerDecoderLayer", d, heads, opts, 2) end

    local DEC_FWD = {tgt_mask = true, memory_mask = true, tgt_key_padding_mask = true, memory_key_padding_mask = true,
                     tgt_is_causal = true, memory_is_causal = true}
    local DEC_MASKS = {"tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask"}
    local DEC_FLAGS = {"tgt_is_causal", "memory_is_causal"}
    function Decoder:forward(tgt, memory, opts)
        opts = util.check_opts("TransformerDecoderLayer", opts, DEC_FWD)
        check_tensor("TransformerDecoderLayer", "memory", memory)
        check_layer_opts("TransformerDecoderLayer", opts, tgt, "tgt", DEC_MASKS, DEC_FLAGS)
        local so = {attn_mask = opts.tgt_mask, key_padding_mask = opts.tgt_key_padding_mask,
                    is_causal = opts.tgt_is_causal, need_weights = false}
        local co = {attn_mask = opts.memory_mask, key_padding_mask = opts.memory_key_padding_mask,
                    is_causal = opts.memory_is_causal, need_weights = false}
        local x = residual(self, 1, tgt, self_block, so)
        x = residual(self, 2, x, cross_block, memory, co)
        return residual(self, 3, x, ff_block)
    end

    -- whether module m is of class cls (or a subclass)
    local function is_instance(m, cls)
        local c = getmetatable(m)
        while type(c) == "table" do
            if c == cls then return true end
            local mt = getmetatable(c)
            c = mt and rawget(mt, "__index")
        end
        return false
    end

    -- A copy of module m of its own (Torch's copy.deepcopy): its tensors
    -- cloned (a parameter a leaf again, frozen if m's was), its children,
    -- plain tables and its own fields copied; a tensor or table held twice
    -- inside m is held twice in the copy too (memo).  Functions, classes
    -- and other objects with a metatable are shared.
    local function deep_copy(v, memo)
        local done = memo[v]
        if done ~= nil then return done end
        if is_tensor(v) then
            local c = autograd.no_grad(function() return v:detach():clone() end)
            if v._rg and not v._node then c:requires_grad() end
            memo[v] = c
            return c
        end
        if type(v) ~= "table" then return v end
        local mt = getmetatable(v)
        if mt ~= nil and not nn.is_module(v) then return v end
        local c = {}
        memo[v] = c
        for k, x in next, v do rawset(c, deep_copy(k, memo), deep_copy(x, memo)) end
        return mt and setmetatable(c, mt) or c
    end

    -- num_layers copies of layer (Torch deep-copies it: the copies start
    -- with its parameters, and train apart), as a ModuleList "layers".
    -- A module given as the activation (nn.PReLU(), with a parameter) is
    -- copied for each too: one module was shared by every copy and the
    -- layer given, its parameter trained as one.
    local function copies(self, name, layer, cls, n)
        if not nn.is_module(layer) or not is_instance(layer, cls) or rawget(layer, "_build_args") == nil then
            fail(fmt("%s: expected an nn.%s to copy, got %s", name, cls._class_name, nn.is_module(layer) and
                     (layer._class_name or "a module") or typename(layer)))
        end
        util.check_positive_int(name, "num_layers", n)
        local a = layer._build_args
        local w = layer.linear1.weight
        local o = {}
        for k, v in pairs(a[3] or {}) do o[k] = v end
        o.dtype, o.device = w:dtype(), w:device()
        local make = getmetatable(layer).new
        local sd = layer:state_dict()
        local list, frozen = {}, {}
        for _, f in ipairs(layer:named_parameters()) do
            if not f.tensor._rg then frozen[f.name] = true end
        end
        for i = 1, n do
            local oi = {}
            for k, v in pairs(o) do oi[k] = v end
            if nn.is_module(oi.activation) then oi.activation = deep_copy(oi.activation, {}) end
            local c = make(a[1], a[2], oi)
            c:load_state_dict(sd)
            -- a frozen parameter of the layer stays frozen in its copies (as Torch's deepcopy; they trained)
            for _, e in ipairs(c:named_parameters()) do
                if frozen[e.name] then e.tensor:requires_grad_(false) end
            end
            c:train(layer.training)
            list[i] = c
        end
        self.layers = nn.ModuleList(list)
        self.num_layers = n
    end

    -- the final norm: a module or nil (Torch's norm = None), or Torch's
    -- keywords as options {norm, enable_nested_tensor, mask_check} (the two
    -- last are Torch's fast-path switches: accepted, nothing to do here)
    local STACK_OPTS = {norm = true, enable_nested_tensor = true, mask_check = true}
    local function final_norm(self, name, norm)
        if type(norm) == "table" and getmetatable(norm) == nil then
            local o = util.check_opts(name, norm, STACK_OPTS)
            for _, k in ipairs({"enable_nested_tensor", "mask_check"}) do check_bool(name, k, o[k]) end
            norm = o.norm
        end
        if norm ~= nil and not nn.is_module(norm) then
            fail(fmt("%s: norm must be a module (e.g. nn.LayerNorm(d_model)) or nil, got %s", name, typename(norm)))
        end
        if norm ~= nil then self.norm = norm end
    end

    -- TransformerEncoder(encoder_layer, num_layers [, norm | {norm}]): Torch's stack
    -- of num_layers copies of encoder_layer (layers[1] ..), then norm (a
    -- module, e.g. a LayerNorm) if given.  forward(src [, {mask,
    -- src_key_padding_mask, is_causal}]).
    local Stack = Module:extend("TransformerEncoder")
    nn.TransformerEncoder = Stack
    function Stack:init(layer, n, norm)
        copies(self, "TransformerEncoder", layer, Encoder, n)
        final_norm(self, "TransformerEncoder", norm)
    end
    local STACK_FWD = {mask = true, src_key_padding_mask = true, is_causal = true}
    function Stack:forward(src, opts)
        opts = util.check_opts("TransformerEncoder", opts, STACK_FWD)
        check_layer_opts("TransformerEncoder", opts, src, "src", {"mask", "src_key_padding_mask"}, {"is_causal"})
        local o = {src_mask = opts.mask, src_key_padding_mask = opts.src_key_padding_mask, is_causal = opts.is_causal}
        local x = src
        for _, l in self.layers:ipairs() do x = l(x, o) end
        if self.norm then x = self.norm(x) end
        return x
    end

    -- TransformerDecoder(decoder_layer, num_layers [, norm]): the same for
    -- the decoder; forward(tgt, memory [, the decoder layer's options]).
    local DStack = Module:extend("TransformerDecoder")
    nn.TransformerDecoder = DStack
    function DStack:init(layer, n, norm)
        copies(self, "TransformerDecoder", layer, Decoder, n)
        final_norm(self, "TransformerDecoder", norm)
    end
    function DStack:forward(tgt, memory, opts)
        opts = util.check_opts("TransformerDecoder", opts, DEC_FWD)
        check_layer_opts("TransformerDecoder", opts, tgt, "tgt", DEC_MASKS, DEC_FLAGS)
        local x = tgt
        for _, l in self.layers:ipairs() do x = l(x, memory, opts) end
        if self.norm then x = self.norm(x) end
        return x
    end

    -- generate_square_subsequent_mask(sz [, {dtype = "float32", device}]):
    -- Torch's causal mask for attn_mask / src_mask / tgt_mask: sz x sz, 0 on
    -- and below the diagonal, -inf above (a float mask, added: its dtype
    -- must be the model's).
    local function square_subsequent_mask(sz, opts, more)
        local name = "generate_square_subsequent_mask"
        if nn.is_module(sz) then sz, opts = opts, more end -- (called as model:generate_square_subsequent_mask(sz))
        util.check_positive_int(name, "sz", sz)
        opts = util.check_opts(name, opts, {dtype = true, device = true})
        local dt = opts.dtype or tensor.get_default_dtype()
        if not FLOAT[dt] then fail(fmt("%s: dtype must be float32 or float64, got %s", name, tostring(dt))) end
        return tensor.full({sz, sz}, -huge, {dtype = dt, device = opts.device}):triu(1)
    end

    -- Transformer([{d_model = 512, nhead = 8, num_encoder_layers = 6,
    -- num_decoder_layers = 6, dim_feedforward = 2048, dropout = 0.1,
    -- activation, custom_encoder, custom_decoder, layer_norm_eps = 1e-5,
    -- batch_first, norm_first, bias, dtype, device}]): Torch's encoder-decoder
    -- (encoder: TransformerEncoder with a final LayerNorm, decoder the
    -- same; every weight of 2 or more dims redrawn by xavier_uniform_, as
    -- Torch's).  forward(src, tgt [, {src_mask, tgt_mask, memory_mask,
    -- src_key_padding_mask, tgt_key_padding_mask, memory_key_padding_mask,
    -- src_is_causal, tgt_is_causal, memory_is_causal}]).
    local Transformer = Module:extend("Transformer")
    nn.Transformer = Transformer
    Transformer.generate_square_subsequent_mask = square_subsequent_mask
    local TF_OPTS = {d_model = true, nhead = true, num_encoder_layers = true, num_decoder_layers = true,
                     dim_feedforward = true, dropout = true, activation = true, custom_encoder = true,
                     custom_decoder = true, layer_norm_eps = true, batch_first = true, norm_first = true, bias = true,
                     dtype = true, device = true}
    function Transformer:init(opts)
        local name = "Transformer"
        opts = util.check_opts(name, opts, TF_OPTS)
        local d, h = opts.d_model or 512, opts.nhead or 8
        util.check_positive_int(name, "d_model", d)
        util.check_positive_int(name, "nhead", h)
        local lo = {}
        for k in pairs(LAYER_OPTS) do lo[k] = opts[k] end
        local nopts = {eps = opts.layer_norm_eps or 1e-5, bias = opts.bias, dtype = opts.dtype, device = opts.device}
        for _, o in ipairs({"custom_encoder", "custom_decoder"}) do
            if opts[o] ~= nil and not nn.is_module(opts[o]) then
                fail(fmt("%s: %s must be a module, got %s", name, o, typename(opts[o])))
            end
        end
        self.encoder = opts.custom_encoder or Stack(Encoder(d, h, lo), opts.num_encoder_layers or 6, nn.LayerNorm(d, nopts))
        self.decoder = opts.custom_decoder or DStack(Decoder(d, h, lo), opts.num_decoder_layers or 6, nn.LayerNorm(d, nopts))
        self.d_model, self.nhead, self.batch_first = d, h, opts.batch_first == true
        for _, p in ipairs(self:parameters()) do
            if p:dim() > 1 then init.xavier_uniform_(p) end
        end
    end
    local TF_FWD = {src_mask = true, tgt_mask = true, memory_mask = true, src_key_padding_mask = true,
                    tgt_key_padding_mask = true, memory_key_padding_mask = true, src_is_causal = true,
                    tgt_is_causal = true, memory_is_causal = true}
    function Transformer:forward(src, tgt, opts)
        local name = "Transformer"
        opts = util.check_opts(name, opts, TF_FWD)
        check_layer_opts(name, opts, src, "src", {"src_mask", "src_key_padding_mask"}, {"src_is_causal"})
        check_layer_opts(name, opts, tgt, "tgt", {"tgt_mask", "memory_mask", "tgt_key_padding_mask",
                                                  "memory_key_padding_mask"}, {"tgt_is_causal", "memory_is_causal"})
        local bd = self.batch_first and 1 or 2
        if src:dim() == 3 and tgt:dim() == 3 and src:size(bd) ~= tgt:size(bd) then
            fail(fmt("%s: the batch number of src and tgt must be equal, got %s and %s", name, shape_str(src),
                     shape_str(tgt)))
        end
        if src:size(-1) ~= self.d_model or tgt:size(-1) ~= self.d_model then
            fail(fmt("%s: the feature number of src and tgt must be equal to d_model %d, got %s and %s", name,
                     self.d_model, shape_str(src), shape_str(tgt)))
        end
        local memory = self.encoder(src, {mask = opts.src_mask, src_key_padding_mask = opts.src_key_padding_mask,
                                          is_causal = opts.src_is_causal})
        return self.decoder(tgt, memory, {tgt_mask = opts.tgt_mask, memory_mask = opts.memory_mask,
                                          tgt_key_padding_mask = opts.tgt_key_padding_mask,
                                          memory_key_padding_mask = opts.memory_key_padding_mask,
                                          tgt_is_causal = opts.tgt_is_causal, memory_is_causal = opts.memory_is_causal})
    end

    function MHA:extra_repr()
        return fmt("%d, %d heads%s%s%s%s%s", self.embed_dim, self.num_heads,
                   (self.kdim ~= self.embed_dim or self.vdim ~= self.embed_dim)
                       and fmt(", kdim %d, vdim %d", self.kdim, self.vdim) or "",
                   self.dropout > 0 and fmt(", dropout %g", self.dropout) or "", self.bias_k and ", add_bias_kv" or "",
                   self.add_zero_attn and ", add_zero_attn" or "", self.batch_first and ", batch_first" or "")
    end
    return nn
end

return M
