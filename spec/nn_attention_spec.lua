-- nn.functional.scaled_dot_product_attention and nn.MultiheadAttention
-- (lua/ordo/nn/attention.lua): against attention written out in plain Lua
-- from the parameters, with every kind of mask; gradients by gradcheck.
local ordo = require "ordo"
local H = require "support.helpers"
local nn, F = ordo.nn, ordo.nn.functional

local D = {dtype = "float64"}

-- got against want (H.close's order is the other way)
local function close(got, want, tol, where) return H.close(want, got, tol, where) end

-- One attention: Q (L x E), K (S x E), V (S x Ev) as tables; allowed(i, j)
-- says whether query i may see key j; add(i, j) is added to the score.
local function ref_attention(Q, K, V, scale, allowed, add)
    local out, weights = {}, {}
    for i = 1, #Q do
        local s, m = {}, -math.huge
        for j = 1, #K do
            local dot = 0
            for e = 1, #Q[i] do dot = dot + Q[i][e] * K[j][e] end
            s[j] = dot * scale + (add and add(i, j) or 0)
            if allowed and not allowed(i, j) then s[j] = -math.huge end
            if s[j] > m then m = s[j] end
        end
        local z = 0
        for j = 1, #K do s[j] = math.exp(s[j] - m); z = z + s[j] end
        for j = 1, #K do s[j] = s[j] / z end -- all masked: m = -inf, NaN as in Torch
        weights[i] = s
        out[i] = {}
        for c = 1, #V[1] do
            local acc = 0
            for j = 1, #K do acc = acc + s[j] * V[j][c] end
            out[i][c] = acc
        end
    end
    return out, weights
end

local function matvec_rows(X, W, b, r0, n) -- rows of X times W[r0+1 .. r0+n]ᵀ + b
    local Y = {}
    for t = 1, #X do
        Y[t] = {}
        for o = 1, n do
            local acc = b and b[r0 + o] or 0
            for e = 1, #X[t] do acc = acc + X[t][e] * W[r0 + o][e] end
            Y[t][o] = acc
        end
    end
    return Y
end

describe("scaled_dot_product_attention", function()
    before_each(function() ordo.manual_seed(41) end)

    it("matches attention written out, with causal, boolean and additive masks and a scale", function()
        local q, k, v = ordo.randn({2, 3, 4}, D), ordo.randn({2, 5, 4}, D), ordo.randn({2, 5, 2}, D)
        local Q, K, V = q:totable(), k:totable(), v:totable()
        local allow = ordo.tensor({{1, 0, 1, 1, 0}, {1, 1, 1, 0, 0}, {0, 0, 0, 0, 1}}, "uint8")
        local A = allow:totable()
        local addm = ordo.randn({3, 5}, D)
        local AD = addm:totable()
        local cases = {
            {{}, nil, nil, 0.5},
            {{is_causal = true}, function(i, j) return j <= i end, nil, 0.5},
            {{attn_mask = allow}, function(i, j) return A[i][j] == 1 end, nil, 0.5},
            {{attn_mask = addm}, nil, function(i, j) return AD[i][j] end, 0.5},
            {{scale = 0.3}, nil, nil, 0.3},
        }
        for n, c in ipairs(cases) do
            local y = F.scaled_dot_product_attention(q, k, v, c[1]):totable()
            for b = 1, 2 do
                close(y[b], (ref_attention(Q[b], K[b], V[b], c[4], c[2], c[3])), 1e-12, "case " .. n)
            end
        end
        -- 4 dims (batch x heads x length x E): the same per head
        local q4, k4, v4 = ordo.randn({2, 2, 3, 4}, D), ordo.randn({2, 2, 5, 4}, D), ordo.randn({2, 2, 5, 3}, D)
        local y4 = F.scaled_dot_product_attention(q4, k4, v4, {is_causal = true})
        assert.same({2, 2, 3, 3}, y4:shape())
        for b = 1, 2 do
            for h = 1, 2 do
                close(y4[b][h]:totable(), (ref_attention(q4[b][h]:totable(), k4[b][h]:totable(), v4[b][h]:totable(),
                                                         0.5, function(i, j) return j <= i end)), 1e-12)
            end
        end
    end)

    it("has gradients that agree with central differences; reports bad inputs", function()
        local q = ordo.randn({2, 3, 4}, D):requires_grad()
        local k = ordo.randn({2, 4, 4}, D):requires_grad()
        local v = ordo.randn({2, 4, 3}, D):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(a, b, c)
            return F.scaled_dot_product_attention(a, b, c, {is_causal = true})
        end, {q, k, v}))
        H.raises(function() return F.scaled_dot_product_attention(q, ordo.randn({2, 4, 5}, D), v) end,
                 "scaled_dot_product_attention", "key 2x4x5", "4 features")
        H.raises(function() return F.scaled_dot_product_attention(q, k, v, {is_causal = true, attn_mask = q}) end,
                 "attn_mask or is_causal")
        H.raises(function() return F.scaled_dot_product_attention(q, k, v, {dropout_p = 1}) end, "dropout_p")
        H.raises(function() return F.scaled_dot_product_attention(q, k, v, {mask = 1}) end, "unknown option 'mask'")
        H.raises(function() return F.scaled_dot_product_attention(ordo.randn({2, 2, 3, 4}), ordo.randn({2, 3, 3, 4}),
                                                                  ordo.randn({2, 3, 3, 4})) end, "leading dims")
    end)

    it("broadcasts leading dims of size 1 (and fewer dims) as Torch, with gradients summed back", function()
        -- key and value shared by every batch (1 x heads), or by every head (3 dims)
        local q = ordo.randn({2, 3, 4, 5}, D)
        for _, ks in ipairs({{1, 3}, {3}, {2, 1}}) do
            local kshape, vshape = {unpack(ks)}, {unpack(ks)}
            kshape[#kshape + 1], kshape[#kshape + 2] = 6, 5
            vshape[#vshape + 1], vshape[#vshape + 2] = 6, 2
            local k, v = ordo.randn(kshape, D), ordo.randn(vshape, D)
            local y = F.scaled_dot_product_attention(q, k, v)
            assert.same({2, 3, 4, 2}, y:shape())
            local ke, ve = k:expand({2, 3, 6, 5}), v:expand({2, 3, 6, 2})
            for b = 1, 2 do
                for h = 1, 3 do
                    close(y[b][h]:totable(), (ref_attention(q[b][h]:totable(), ke[b][h]:totable(), ve[b][h]:totable(),
                                                            1 / math.sqrt(5))), 1e-12, table.concat(ks, "x"))
                end
            end
        end
        local qr = ordo.randn({2, 2, 3, 4}, D):requires_grad()
        local kr, vr = ordo.randn({1, 2, 4, 4}, D):requires_grad(), ordo.randn({2, 1, 4, 3}, D):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(a, b, c)
            return F.scaled_dot_product_attention(a, b, c, {is_causal = true})
        end, {qr, kr, vr}))
    end)

    it("training = false turns dropout_p off; a mask that does not fit the scores is named", function()
        local q, k, v = ordo.randn({2, 3, 4}, D), ordo.randn({2, 5, 4}, D), ordo.randn({2, 5, 2}, D)
        local plain = F.scaled_dot_product_attention(q, k, v)
        close(F.scaled_dot_product_attention(q, k, v, {dropout_p = 0.5, training = false}):totable(), plain:totable(),
              1e-15)
        assert.is_true((F.scaled_dot_product_attention(q, k, v, {dropout_p = 0.5}) - plain):abs():max():item() > 0.01)
        H.raises(function() return F.scaled_dot_product_attention(q, k, v, {training = 1}) end,
                 "scaled_dot_product_attention: training must be a boolean, got number")
        H.raises(function() return F.scaled_dot_product_attention(q, k, v, {attn_mask = ordo.zeros({3, 4}, D)}) end,
                 "scaled_dot_product_attention: attn_mask of shape 3x4 does not broadcast to the attention scores' "
                 .. "shape 2x3x5")
        H.raises(function()
            return F.scaled_dot_product_attention(q:unsqueeze(1), k:unsqueeze(1), v:unsqueeze(1),
                                                  {attn_mask = ordo.zeros({3, 3, 5}, "uint8")})
        end, "attn_mask of shape 3x3x5 does not broadcast to the attention scores' shape 1x2x3x5")
    end)

    it("enable_gqa: key and value heads shared by groups of query heads, as Torch's", function()
        local q = ordo.randn({2, 4, 3, 5}, D):requires_grad()
        local k, v = ordo.randn({2, 2, 6, 5}, D), ordo.randn({2, 2, 6, 3}, D)
        local y = F.scaled_dot_product_attention(q, k, v, {enable_gqa = true, is_causal = true})
        assert.same({2, 4, 3, 3}, y:shape())
        -- query head h uses key/value head ceil(h / 2)
        local Q, K, V = q:totable(), k:totable(), v:totable()
        for b = 1, 2 do
            for h = 1, 4 do
                local g = math.floor((h - 1) / 2) + 1
                close(y[b][h]:totable(), (ref_attention(Q[b][h], K[b][g], V[b][g], 1 / math.sqrt(5),
                                                        function(i, j) return j <= i end)), 1e-12, "head " .. h)
            end
        end
        assert.is_true(ordo.autograd.gradcheck(function(a)
            return F.scaled_dot_product_attention(a, k, v, {enable_gqa = true}) end, {q}))
        H.raises(function() return F.scaled_dot_product_attention(q, k, v) end, "do not broadcast")
        H.raises(function() return F.scaled_dot_product_attention(q, ordo.randn({2, 3, 6, 5}, D),
                                                                  ordo.randn({2, 3, 6, 3}, D), {enable_gqa = true}) end,
                 "enable_gqa: the query's 4 heads (dim -3) must be a multiple of key's and value's")
    end)

    it("refuses mixed dtypes (a float mask of another dtype, key or value of another) and a non-boolean is_causal",
       function()
        local q, k, v = ordo.randn({2, 3, 4}), ordo.randn({2, 5, 4}), ordo.randn({2, 5, 2}) -- float32
        -- before: the float64 mask was added and the output came back float64
        H.raises(function() return F.scaled_dot_product_attention(q, k, v, {attn_mask = ordo.zeros({3, 5}, D)}) end,
                 "scaled_dot_product_attention: attn_mask is float64 but the query float32")
        H.raises(function() return F.scaled_dot_product_attention(q, k:double(), v) end,
                 "query, key and value must have one dtype, got float32, float64 and float32")
        H.raises(function() return F.scaled_dot_product_attention(q, k, v, {is_causal = 1}) end,
                 "is_causal must be a boolean, got number")
        assert.equals("float32", F.scaled_dot_product_attention(q, k, v, {attn_mask = ordo.zeros({3, 5})}):dtype())
        local m = nn.MultiheadAttention(4, 2)
        local x = ordo.randn({3, 2, 4})
        H.raises(function() m(x, x, x, {key_padding_mask = ordo.zeros({2, 3}, D)}) end,
                 "MultiheadAttention: key_padding_mask is float64 but the query float32")
        H.raises(function() m(x, x, x, {attn_mask = ordo.zeros({3, 3}, D)}) end,
                 "MultiheadAttention: attn_mask is float64 but the query float32")
        H.raises(function() m(x, x:double(), x) end, "MultiheadAttention: query, key and value must have one dtype")
        H.raises(function() m(x, x, x, {need_weights = 0}) end, "need_weights must be a boolean, got number")
        H.raises(function() m(x, x, x, {is_causal = "yes"}) end, "is_causal must be a boolean, got string")
        assert.equals("float32", m(x, x, x, {key_padding_mask = ordo.zeros({2, 3})}):dtype())
    end)

    it("refuses an integer mask that is not uint8 (int32, int64) on every path, as Torch (bool or float only)",
       function()
        -- before: an int64 mask was silently taken as a boolean one
        local q, k, v = ordo.randn({2, 3, 4}), ordo.randn({2, 5, 4}), ordo.randn({2, 5, 2})
        for _, dt in ipairs({"int32", "int64"}) do
            local want = "attn_mask must be uint8 (a boolean mask) or the query's float dtype float32, got " .. dt
            H.raises(function()
                return F.scaled_dot_product_attention(q, k, v, {attn_mask = ordo.ones({3, 5}, dt)})
            end, "scaled_dot_product_attention: " .. want)
            local m = nn.MultiheadAttention(4, 2)
            local x = ordo.randn({3, 2, 4})
            H.raises(function() m(x, x, x, {attn_mask = ordo.zeros({3, 3}, dt)}) end, "MultiheadAttention: " .. want)
            H.raises(function() m(x, x, x, {attn_mask = ordo.zeros({3, 3}, dt), is_causal = true}) end,
                     "MultiheadAttention: " .. want)
            H.raises(function() m(x, x, x, {key_padding_mask = ordo.zeros({2, 3}, dt)}) end,
                     "MultiheadAttention: key_padding_mask must be uint8 (a boolean mask) or the query's float " ..
                     "dtype float32, got " .. dt)
            -- unbatched, and through the transformer modules that pass their masks on, named as given
            H.raises(function() m(x:select(2, 1), nil, nil, {key_padding_mask = ordo.zeros({3}, dt)}) end,
                     "key_padding_mask must be uint8")
            local enc = nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 8, dropout = 0})
            H.raises(function() enc(x, {src_mask = ordo.zeros({3, 3}, dt)}) end,
                     "TransformerEncoderLayer: src_mask must be uint8 (a boolean mask) or the query's float dtype " ..
                     "float32, got " .. dt)
            H.raises(function() enc(x, {src_key_padding_mask = ordo.zeros({2, 3}, dt), is_causal = true}) end,
                     "TransformerEncoderLayer: src_key_padding_mask must be uint8")
            local dec = nn.TransformerDecoderLayer(4, 2, {dim_feedforward = 8, dropout = 0})
            H.raises(function() dec(x, x, {memory_mask = ordo.zeros({3, 3}, dt)}) end,
                     "TransformerDecoderLayer: memory_mask must be uint8")
            H.raises(function() dec(x, x, {tgt_key_padding_mask = ordo.zeros({2, 3}, dt), tgt_is_causal = true}) end,
                     "TransformerDecoderLayer: tgt_key_padding_mask must be uint8")
            H.raises(function() dec(x, x, {memory_key_padding_mask = ordo.zeros({2, 3}, dt)}) end,
                     "TransformerDecoderLayer: memory_key_padding_mask must be uint8")
            local stack = nn.TransformerEncoder(enc, 2)
            H.raises(function() stack(x, {mask = ordo.zeros({3, 3}, dt)}) end, "TransformerEncoder: mask must be uint8")
            local dstack = nn.TransformerDecoder(dec, 2)
            H.raises(function() dstack(x, x, {tgt_mask = ordo.zeros({3, 3}, dt)}) end,
                     "TransformerDecoder: tgt_mask must be uint8")
            local tf = nn.Transformer({d_model = 4, nhead = 2, num_encoder_layers = 1, num_decoder_layers = 1,
                                       dim_feedforward = 8, dropout = 0})
            H.raises(function() tf(x, x, {src_key_padding_mask = ordo.zeros({2, 3}, dt)}) end,
                     "Transformer: src_key_padding_mask must be uint8")
            H.raises(function() tf(x, x, {memory_mask = ordo.zeros({3, 3}, dt)}) end,
                     "Transformer: memory_mask must be uint8")
        end
        -- the flags too, by the names given (they were MultiheadAttention's is_causal)
        local x = ordo.randn({3, 2, 4})
        local dec = nn.TransformerDecoderLayer(4, 2, {dim_feedforward = 8, dropout = 0})
        H.raises(function() dec(x, x, {tgt_is_causal = 1}) end,
                 "TransformerDecoderLayer: tgt_is_causal must be a boolean, got number")
        H.raises(function() dec(x, x, {memory_is_causal = "yes"}) end,
                 "TransformerDecoderLayer: memory_is_causal must be a boolean, got string")
        H.raises(function() nn.TransformerEncoderLayer(4, 2)(x, {is_causal = 0}) end,
                 "TransformerEncoderLayer: is_causal must be a boolean, got number")
        H.raises(function() nn.TransformerEncoderLayer(4, 2)("x") end,
                 "TransformerEncoderLayer: src must be a tensor, got string")
        -- uint8 and float masks still work
        F.scaled_dot_product_attention(q, k, v, {attn_mask = ordo.ones({3, 5}, "uint8")})
        F.scaled_dot_product_attention(q, k, v, {attn_mask = ordo.zeros({3, 5})})
    end)
end)

describe("attention over fully masked rows", function()
    it("a query that may see no key gets zero weights and output and finite gradients, as Torch's SDPA", function()
        ordo.manual_seed(1)
        local q, k, v = ordo.randn({1, 3, 4}, D):requires_grad(), ordo.randn({1, 3, 4}, D):requires_grad(),
                        ordo.randn({1, 3, 4}, D):requires_grad()
        local allow = ordo.tensor({{1, 1, 0}, {0, 0, 0}, {1, 1, 1}}, "uint8")
        local add = ordo.tensor({{0, 0, -1 / 0}, {-1 / 0, -1 / 0, -1 / 0}, {0, 0, 0}}, D)
        for _, mask in ipairs({allow, add}) do
            local y = F.scaled_dot_product_attention(q, k, v, {attn_mask = mask})
            assert.same({0, 0, 0, 0}, y[1][2]:totable()) -- (it was NaN, and so was every gradient)
            close(y[1][1]:totable(), F.scaled_dot_product_attention(q:narrow(2, 1, 1), k:narrow(2, 1, 2),
                                                                    v:narrow(2, 1, 2))[1][1]:totable(), 1e-12)
            y:sum():backward()
            for _, t in ipairs({q, k, v}) do
                assert.is_false(t.grad:isnan():any())
                t.grad = nil
            end
        end
        assert.is_true(ordo.autograd.gradcheck(function(a, b, c)
            return F.scaled_dot_product_attention(a, b, c, {attn_mask = allow})
        end, {q, k, v}))
        -- MultiheadAttention: a sequence all padding
        local m = nn.MultiheadAttention(4, 2):to("float64")
        local x = ordo.randn({3, 2, 4}, D):requires_grad()
        local out, w = m(x, x, x, {key_padding_mask = ordo.tensor({{0, 0, 1}, {1, 1, 1}}, "uint8")})
        assert.same({{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}, w[2]:totable())
        out:sum():backward()
        assert.is_false(x.grad:isnan():any())
        assert.is_false(m.in_proj_weight.grad:isnan():any())
    end)
end)

describe("nn.MultiheadAttention", function()
    before_each(function() ordo.manual_seed(42) end)

    -- The layer written out for sample n: per head, attention of the
    -- projected rows, heads side by side, then out_proj; weights averaged.
    local function ref_mha(m, Xq, Xk, Xv, allowed)
        local E, Hh = m.embed_dim, m.num_heads
        local Dh = E / Hh
        local W, b = m.in_proj_weight:totable(), m.in_proj_bias and m.in_proj_bias:totable()
        local q, k, v = matvec_rows(Xq, W, b, 0, E), matvec_rows(Xk, W, b, E, E), matvec_rows(Xv, W, b, 2 * E, E)
        local cat, avg = {}, {}
        for t = 1, #Xq do cat[t] = {} end
        for h = 0, Hh - 1 do
            local function part(R)
                local P = {}
                for t = 1, #R do
                    P[t] = {}
                    for d = 1, Dh do P[t][d] = R[t][h * Dh + d] end
                end
                return P
            end
            local o, w = ref_attention(part(q), part(k), part(v), 1 / math.sqrt(Dh), allowed)
            for t = 1, #Xq do
                for d = 1, Dh do cat[t][h * Dh + d] = o[t][d] end
                avg[t] = avg[t] or {}
                for j = 1, #Xk do avg[t][j] = (avg[t][j] or 0) + w[t][j] / Hh end
            end
        end
        local out = matvec_rows(cat, m.out_proj.weight:totable(), m.out_proj.bias and m.out_proj.bias:totable(), 0, E)
        return out, avg
    end

    it("matches the layer written out from its parameters (length x batch and batch_first, masks)", function()
        local m = nn.MultiheadAttention(6, 3, {dtype = "float64"})
        assert.same({18, 6}, m.in_proj_weight:shape())
        assert.same({0}, {m.in_proj_bias:abs():max():item()})
        ordo.no_grad(function() -- biases that are not zero, so that they are checked too
            m.in_proj_bias:copy_(ordo.randn({18}, D))
            m.out_proj.bias:copy_(ordo.randn({6}, D))
        end)
        local xq, xk = ordo.randn({4, 2, 6}, D), ordo.randn({5, 2, 6}, D)
        local y, w = m(xq, xk, xk)
        assert.same({4, 2, 6}, y:shape())
        assert.same({2, 4, 5}, w:shape())
        for n = 1, 2 do
            local Xq, Xk = xq:select(2, n):totable(), xk:select(2, n):totable()
            local out, avg = ref_mha(m, Xq, Xk, Xk)
            close(y:select(2, n):totable(), out, 1e-12, "output " .. n)
            close(w[n]:totable(), avg, 1e-12, "weights " .. n)
        end
        -- batch_first, a causal self-attention, a key padding mask
        local mb = nn.MultiheadAttention(6, 2, {dtype = "float64", batch_first = true})
        local x = ordo.randn({2, 4, 6}, D)
        local yc = mb(x, x, x, {is_causal = true, need_weights = false})
        assert.same({2, 4, 6}, yc:shape())
        local pad = ordo.tensor({{0, 0, 1, 1}, {0, 0, 0, 1}}, "uint8")
        local yp = mb(x, x, x, {key_padding_mask = pad, need_weights = false})
        local am = ordo.tensor({{0, 1, 1, 1}, {0, 0, 1, 1}, {0, 0, 0, 1}, {0, 0, 0, 0}}, "uint8") -- 1: blocked
        local ya = mb(x, x, x, {attn_mask = am, need_weights = false})
        close(yc:totable(), ya:totable(), 1e-12, "is_causal = the causal attn_mask")
        -- Torch's usual call: the causal attn_mask with is_causal as a hint; both applied
        close(mb(x, x, x, {attn_mask = am, is_causal = true, need_weights = false}):totable(), ya:totable(), 1e-12,
              "attn_mask + is_causal")
        -- a hint that is wrong still never attends to a later position: the union of the two masks
        local band = ordo.tensor({{0, 0, 0, 0}, {1, 0, 0, 0}, {1, 1, 0, 0}, {1, 1, 1, 0}}, "uint8") -- allows j >= i
        local yd = mb(x, x, x, {attn_mask = band, is_causal = true, need_weights = false})
        for n = 1, 2 do
            local X = x[n]:totable()
            close(yd[n]:totable(), (ref_mha(mb, X, X, X, function(i, j) return j == i end)), 1e-12, "diagonal " .. n)
        end
        for n = 1, 2 do
            local X = x[n]:totable()
            local P = pad:totable()[n]
            close(yc[n]:totable(), (ref_mha(mb, X, X, X, function(i, j) return j <= i end)), 1e-12, "causal " .. n)
            close(yp[n]:totable(), (ref_mha(mb, X, X, X, function(_, j) return P[j] == 0 end)), 1e-12, "padding " .. n)
        end
        local _, per_head = mb(x, x, x, {average_attn_weights = false})
        assert.same({2, 2, 4, 4}, per_head:shape())
    end)

    -- Torch's options: kdim/vdim (q/k/v_proj_weight), add_bias_kv, add_zero_attn, written out
    local function ref_mha_opts(m, Xq, Xk, Xv, allowed)
        local E, Hh = m.embed_dim, m.num_heads
        local Dh = E / Hh
        local b = m.in_proj_bias and m.in_proj_bias:totable()
        local function proj(X, W, i)
            local Y = {}
            for t = 1, #X do
                Y[t] = {}
                for o = 1, E do
                    local acc = b and b[i * E + o] or 0
                    for e = 1, #X[t] do acc = acc + X[t][e] * W[o][e] end
                    Y[t][o] = acc
                end
            end
            return Y
        end
        local q = proj(Xq, m.q_proj_weight:totable(), 0)
        local k, v = proj(Xk, m.k_proj_weight:totable(), 1), proj(Xv, m.v_proj_weight:totable(), 2)
        if m.bias_k then
            k[#k + 1], v[#v + 1] = m.bias_k:view(-1):totable(), m.bias_v:view(-1):totable()
        end
        if m.add_zero_attn then
            local z = {}
            for e = 1, E do z[e] = 0 end
            k[#k + 1], v[#v + 1] = z, z
        end
        local S0 = #Xk
        local cat = {}
        for t = 1, #Xq do cat[t] = {} end
        for h = 0, Hh - 1 do
            local function part(R)
                local P = {}
                for t = 1, #R do
                    P[t] = {}
                    for d = 1, Dh do P[t][d] = R[t][h * Dh + d] end
                end
                return P
            end
            local o = ref_attention(part(q), part(k), part(v), 1 / math.sqrt(Dh),
                                    function(i, j) return j > S0 or not allowed or allowed(i, j) end)
            for t = 1, #Xq do for d = 1, Dh do cat[t][h * Dh + d] = o[t][d] end end
        end
        return matvec_rows(cat, m.out_proj.weight:totable(), m.out_proj.bias and m.out_proj.bias:totable(), 0, E)
    end

    it("takes Torch's kdim/vdim (q/k/v_proj_weight), add_bias_kv, add_zero_attn and unbatched input", function()
        local m = nn.MultiheadAttention(4, 2, {dtype = "float64", kdim = 3, vdim = 5, add_bias_kv = true,
                                               add_zero_attn = true})
        assert.is_nil(m.in_proj_weight)
        local names = {}
        for _, e in ipairs(m:state_dict()) do names[#names + 1] = e.name .. " " .. table.concat(e.tensor:shape(), "x") end
        table.sort(names)
        assert.same({"bias_k 1x1x4", "bias_v 1x1x4", "in_proj_bias 12", "k_proj_weight 4x3", "out_proj.bias 4",
                     "out_proj.weight 4x4", "q_proj_weight 4x4", "v_proj_weight 4x5"}, names)
        ordo.no_grad(function() m.in_proj_bias:copy_(ordo.randn({12}, D)) end)
        local xq, xk, xv = ordo.randn({3, 2, 4}, D), ordo.randn({5, 2, 3}, D), ordo.randn({5, 2, 5}, D)
        local pad = ordo.tensor({{0, 0, 1, 1, 1}, {1, 1, 1, 1, 1}}, "uint8") -- sample 2: all padding
        local y, w = m(xq, xk, xv, {key_padding_mask = pad})
        assert.same({3, 2, 4}, y:shape())
        assert.same({2, 3, 7}, w:shape()) -- S + the bias key + the zero key
        for n = 1, 2 do
            local P = pad:totable()[n]
            close(y:select(2, n):totable(),
                  ref_mha_opts(m, xq:select(2, n):totable(), xk:select(2, n):totable(), xv:select(2, n):totable(),
                               function(_, j) return P[j] == 0 end), 1e-12, "sample " .. n)
        end
        -- a float attn_mask and is_causal: the extra keys take part
        local am = ordo.randn({3, 5}, D)
        local A = am:totable()
        local X = xq:select(2, 1)
        local mq = nn.MultiheadAttention(4, 2, {dtype = "float64", kdim = 4, vdim = 3, add_bias_kv = true})
        local yc = mq(X, X, ordo.randn({3, 3}, D):fill_(1), {is_causal = true})
        assert.same({3, 4}, yc:shape()) -- unbatched: L x E in, L x E out
        local yam = m(X, xk:select(2, 1), xv:select(2, 1), {attn_mask = am:ge(0), need_weights = false})
        close(yam:totable(), ref_mha_opts(m, X:totable(), xk:select(2, 1):totable(), xv:select(2, 1):totable(),
                                          function(i, j) return A[i][j] < 0 end), 1e-12, "unbatched, masked")
        local _, wu = m(X, xk:select(2, 1), xv:select(2, 1), {average_attn_weights = false})
        assert.same({2, 3, 7}, wu:shape()) -- heads x L x S', no batch
        -- unbatched with a 1-D key_padding_mask, as the batch of one
        local y1 = m(X, xk:select(2, 1), xv:select(2, 1), {key_padding_mask = pad[1], need_weights = false})
        close(y1:totable(), y:select(2, 1):totable(), 1e-12, "unbatched = a batch of one")
        -- gradients (bias_k, bias_v and the three projections too)
        local m2 = nn.MultiheadAttention(4, 2, {dtype = "float64", kdim = 3, vdim = 2, add_bias_kv = true,
                                                add_zero_attn = true, batch_first = true})
        local a, kk, vv = ordo.randn({2, 3, 4}, D):requires_grad(), ordo.randn({2, 2, 3}, D), ordo.randn({2, 2, 2}, D)
        assert.is_true(ordo.autograd.gradcheck(function(t) return (m2(t, kk, vv)) end, {a}))
        m2(a, kk, vv):sum():backward()
        for _, e in ipairs(m2:named_parameters()) do assert.is_true(ordo.is_tensor(e.tensor.grad), e.name) end
        H.raises(function() m2(a, a, a) end, "MultiheadAttention: key must be N x length x 3")
        H.raises(function() nn.MultiheadAttention(4, 2, {kdim = 0}) end, "kdim")
        H.raises(function() nn.MultiheadAttention(4, 2, {add_zero_attn = 1}) end, "add_zero_attn must be a boolean")
    end)

    it("returns the weights it applied: after the dropout in training, as Torch", function()
        local m = nn.MultiheadAttention(8, 2, {dtype = "float64", batch_first = true, dropout = 0.5})
        local x = ordo.randn({3, 6, 8}, D)
        local _, w = m(x, x, x, {average_attn_weights = false})
        local n, zeros = 0, 0
        for _, v in ipairs(w:view(-1):totable()) do
            n = n + 1
            if v == 0 then zeros = zeros + 1 end
        end
        assert.is_true(zeros > n / 4 and zeros < 3 * n / 4, zeros .. " of " .. n .. " weights dropped")
        -- the output is those weights applied: out_proj(weights x v)
        local E, H = 8, 2
        local v = x:matmul(m.in_proj_weight:narrow(1, 2 * E + 1, E):t()) + m.in_proj_bias:narrow(1, 2 * E + 1, E)
        local vh = v:view(3, 6, H, E / H):permute(1, 3, 2, 4)             -- N x H x S x D
        local y1, w1 = m(x, x, x, {average_attn_weights = false})
        local y_w1 = m.out_proj(w1:matmul(vh):permute(1, 3, 2, 4):reshape(3, 6, E))
        close(y1:reshape(-1):totable(), y_w1:reshape(-1):totable(), 1e-12, "output = the returned weights applied")
        m:eval()
        local _, w_eval = m(x, x, x, {average_attn_weights = false})
        assert.is_true(w_eval:eq(0):sum():item() == 0, "no weight dropped in eval")
        close(w_eval:sum(4):reshape(-1):totable(), ordo.ones({3 * 2 * 6}, D):totable(), 1e-12, "eval rows sum to 1")
    end)

    it("trains: gradients agree with central differences; bad inputs are named", function()
        local m = nn.MultiheadAttention(4, 2, {dtype = "float64"})
        local x = ordo.randn({3, 2, 4}, D):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(a) return (m(a, a, a)) end, {x}))
        local y = m(x, x, x)
        y:sum():backward()
        for _, p in ipairs(m:parameters()) do assert.is_true(ordo.is_tensor(p.grad)) end
        assert.equals("MultiheadAttention(4, 2 heads)", tostring(m):match("^[^\n]*"))
        H.raises(function() nn.MultiheadAttention(6, 4) end, "MultiheadAttention", "divisible")
        H.raises(function() m(ordo.randn({3, 2, 5}, D)) end, "MultiheadAttention", "query", "3x2x5")
        H.raises(function() m(x, x, x, {attn_mask = ordo.zeros(2, 2, "uint8")}) end, "attn_mask must be 3 x 3")
        H.raises(function() m(x, x, x, {key_padding_mask = ordo.zeros(3, 3, "uint8")}) end,
                 "key_padding_mask must be 2 x 3")
        H.raises(function() m(x, x, x, {mask = 1}) end, "unknown option 'mask'")
    end)
end)

describe("nn.TransformerEncoderLayer", function()
    before_each(function() ordo.manual_seed(43) end)

    -- The layer from its parts: attention by the (separately checked)
    -- MultiheadAttention, the rest from the parameters with nn.functional.
    local function ref_layer(l, x, attn_opts)
        local act = l.activation == "gelu" and function(h) return F.gelu(h, "none") end or F.relu -- exact, Torch's
        local function sa(h)
            local o = {need_weights = false}
            for k, v in pairs(attn_opts or {}) do o[k] = v end
            return (l.self_attn(h, h, h, o))
        end
        local function ffn(h) return F.linear(act(F.linear(h, l.linear1.weight, l.linear1.bias)), l.linear2.weight, l.linear2.bias) end
        local function n1(h) return F.layer_norm(h, {h:size(-1)}, l.norm1.weight, l.norm1.bias) end
        local function n2(h) return F.layer_norm(h, {h:size(-1)}, l.norm2.weight, l.norm2.bias) end
        if l.norm_first then
            local h = x + sa(n1(x))
            return h + ffn(n2(h))
        end
        local h = n1(x + sa(x))
        return n2(h + ffn(h))
    end

    it("is attention and a feed-forward network with residuals and LayerNorms (post- and pre-norm)", function()
        for _, o in ipairs({{}, {norm_first = true, activation = "gelu"}, {batch_first = true}}) do
            local opts = {dim_feedforward = 12, dtype = "float64"}
            for k, v in pairs(o) do opts[k] = v end
            local l = nn.TransformerEncoderLayer(6, 2, opts)
            ordo.no_grad(function() -- norms that are not the identity
                l.norm1.weight:copy_(ordo.randn({6}, D))
                l.norm2.bias:copy_(ordo.randn({6}, D))
            end)
            l:eval()
            local x = ordo.randn({4, 3, 6}, D)
            close(l(x):totable(), ref_layer(l, x):totable(), 1e-12)
            local causal = l(x, {is_causal = true})
            close(causal:totable(), ref_layer(l, x, {is_causal = true}):totable(), 1e-12)
            local L = x:size(o.batch_first and 2 or 1)
            local blocked = ordo.ones({L, L}, "uint8"):triu(1)
            close(causal:totable(), l(x, {src_mask = blocked}):totable(), 1e-12)
            close(causal:totable(), l(x, {src_mask = blocked, is_causal = true}):totable(), 1e-12) -- (Torch's hint)
        end
        local l = nn.TransformerEncoderLayer(6, 3)
        assert.same({2048, 6}, l.linear1.weight:shape())
        assert.equals(0.1, l.dropout.p)
        -- training: dropout draws, so two passes differ; eval: they agree
        local x = ordo.randn({4, 2, 6})
        assert.is_false(ordo.allclose(l(x), l(x)))
        l:eval()
        assert.is_true(ordo.allclose(l(x), l(x)))
    end)

    it("has gradients that agree with central differences; bad options are named", function()
        local l = nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 6, dropout = 0, dtype = "float64"})
        local x = ordo.randn({3, 2, 4}, D):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(a) return l(a, {is_causal = true}) end, {x}))
        H.raises(function() nn.TransformerEncoderLayer(4, 2, {activation = "tanh"}) end, "TransformerEncoderLayer",
                 "activation")
        H.raises(function() nn.TransformerEncoderLayer(4, 2, {nhead = 2}) end, "unknown option 'nhead'")
        H.raises(function() l(x, {mask = 1}) end, "TransformerEncoderLayer", "unknown option 'mask'")
    end)
end)

describe("nn.TransformerDecoderLayer", function()
    before_each(function() ordo.manual_seed(44) end)

    local function ref_decoder(l, t, mem, so, co)
        local act = l.activation == "gelu" and function(h) return F.gelu(h, "none") end or F.relu -- exact, Torch's
        local function opts(extra)
            local o = {need_weights = false}
            for k, v in pairs(extra or {}) do o[k] = v end
            return o
        end
        local function sa(h) return (l.self_attn(h, h, h, opts(so))) end
        local function ca(h) return (l.multihead_attn(h, mem, mem, opts(co))) end
        local function ffn(h) return F.linear(act(F.linear(h, l.linear1.weight, l.linear1.bias)), l.linear2.weight, l.linear2.bias) end
        local function n(k, h) return F.layer_norm(h, {h:size(-1)}, l["norm" .. k].weight, l["norm" .. k].bias) end
        if l.norm_first then
            local h = t + sa(n(1, t))
            h = h + ca(n(2, h))
            return h + ffn(n(3, h))
        end
        local h = n(1, t + sa(t))
        h = n(2, h + ca(h))
        return n(3, h + ffn(h))
    end

    it("is self-attention, attention to memory and a feed-forward network, each with residual and norm", function()
        for _, o in ipairs({{}, {norm_first = true, activation = "gelu"}}) do
            local opts = {dim_feedforward = 10, dtype = "float64"}
            for k, v in pairs(o) do opts[k] = v end
            local l = nn.TransformerDecoderLayer(6, 3, opts)
            ordo.no_grad(function() l.norm2.weight:copy_(ordo.randn({6}, D)) end)
            l:eval()
            local t, mem = ordo.randn({4, 2, 6}, D), ordo.randn({5, 2, 6}, D)
            close(l(t, mem):totable(), ref_decoder(l, t, mem):totable(), 1e-12)
            local pad = ordo.tensor({{0, 0, 0, 1, 1}, {0, 1, 0, 0, 0}}, "uint8")
            local y = l(t, mem, {tgt_is_causal = true, memory_key_padding_mask = pad})
            close(y:totable(), ref_decoder(l, t, mem, {is_causal = true}, {key_padding_mask = pad}):totable(), 1e-12)
            local blocked = ordo.ones({4, 4}, "uint8"):triu(1)
            close(y:totable(), l(t, mem, {tgt_mask = blocked, memory_key_padding_mask = pad}):totable(), 1e-12)
        end
        local l = nn.TransformerDecoderLayer(4, 2, {dim_feedforward = 6, dropout = 0, dtype = "float64"})
        local t = ordo.randn({3, 2, 4}, D):requires_grad()
        local mem = ordo.randn({4, 2, 4}, D):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(a, b) return l(a, b, {tgt_is_causal = true}) end, {t, mem}))
        H.raises(function() l(t) end, "TransformerDecoderLayer", "memory")
        H.raises(function() l(t, mem, {is_causal = true}) end, "TransformerDecoderLayer", "unknown option 'is_causal'")
    end)
end)

describe("nn.TransformerEncoder, nn.TransformerDecoder, nn.Transformer (Torch's stacks)", function()
    before_each(function() ordo.manual_seed(45) end)

    local function names_of(m)
        local t = {}
        for _, e in ipairs(m:state_dict()) do t[#t + 1] = e.name end
        return t
    end

    it("generate_square_subsequent_mask: 0 on and below the diagonal, -inf above, as Torch's", function()
        local m = nn.Transformer.generate_square_subsequent_mask(3)
        assert.equals("float32", m:dtype())
        local h = -math.huge
        assert.same({{0, h, h}, {0, 0, h}, {0, 0, 0}}, m:totable())
        assert.equals("float64", nn.Transformer.generate_square_subsequent_mask(2, {dtype = "float64"}):dtype())
        H.raises(function() nn.Transformer.generate_square_subsequent_mask(0) end, "sz must be a positive integer")
        H.raises(function() nn.Transformer.generate_square_subsequent_mask(2, {dtype = "int32"}) end,
                 "dtype must be float32 or float64")
    end)

    it("TransformerEncoder: num_layers independent copies of the layer, then the norm", function()
        local layer = nn.TransformerEncoderLayer(6, 2, {dim_feedforward = 10, dtype = "float64",
                                                        activation = function(h) return F.gelu(h) end})
        local enc = nn.TransformerEncoder(layer, 3, nn.LayerNorm(6, {dtype = "float64"}))
        local names = names_of(enc)
        assert.equals("layers.1.self_attn.in_proj_weight", names[1])
        assert.equals("norm.bias", names[#names])
        assert.equals(3 * 12 + 2, #names)
        -- copies: the layer's values, not its tensors
        for i = 1, 3 do
            local c = enc.layers:get(i)
            assert.are_not.equal(layer.linear1.weight, c.linear1.weight)
            close(c.linear1.weight:totable(), layer.linear1.weight:totable(), 0)
        end
        ordo.no_grad(function()
            enc.layers:get(2).linear1.weight:add_(1)
            enc.norm.weight:copy_(ordo.randn({6}, D))
        end)
        enc:eval()
        local x = ordo.randn({4, 2, 6}, D)
        local mask = nn.Transformer.generate_square_subsequent_mask(4, {dtype = "float64"})
        local pad = ordo.tensor({{0, 0, 0, 1}, {0, 0, 0, 0}}, "uint8")
        local y = enc(x, {mask = mask, src_key_padding_mask = pad, is_causal = true})
        local want = x
        for i = 1, 3 do want = enc.layers:get(i)(want, {src_mask = mask, src_key_padding_mask = pad}) end
        want = enc.norm(want)
        close(y:totable(), want:totable(), 1e-12)
        -- the float -inf mask is the causal mask
        close(enc(x, {mask = mask}):totable(), enc(x, {is_causal = true}):totable(), 1e-12)
        -- gradients through the stack
        local e2 = nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 5, dropout = 0,
                                                                          dtype = "float64"}), 2)
        local a = ordo.randn({3, 2, 4}, D):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(t) return e2(t, {is_causal = true}) end, {a}))
        H.raises(function() nn.TransformerEncoder(nn.Linear(2, 2), 2) end,
                 "TransformerEncoder: expected an nn.TransformerEncoderLayer to copy, got Linear")
        H.raises(function() nn.TransformerEncoder(layer, 0) end, "num_layers must be a positive integer")
        H.raises(function() nn.TransformerEncoder(layer, 2, "ln") end, "norm must be a module")
        -- Torch's keywords as options
        local e3 = nn.TransformerEncoder(layer, 1, {norm = nn.LayerNorm(6, {dtype = "float64"}),
                                                   enable_nested_tensor = false})
        assert.is_true(nn.is_module(e3.norm))
        H.raises(function() nn.TransformerEncoder(layer, 1, {nrom = 1}) end, "TransformerEncoder: unknown option 'nrom'")
    end)

    it("TransformerDecoder and Transformer: Torch's layout, masks passed to every layer", function()
        local tf = nn.Transformer({d_model = 8, nhead = 2, num_encoder_layers = 2, num_decoder_layers = 2,
                                   dim_feedforward = 12, batch_first = true, dtype = "float64"})
        local names = names_of(tf)
        assert.equals(2 * 12 + 2 + 2 * 18 + 2, #names)
        assert.equals("encoder.layers.1.self_attn.in_proj_weight", names[1])
        assert.equals("decoder.norm.bias", names[#names])
        tf:eval()
        local src, tgt = ordo.randn({2, 5, 8}, D), ordo.randn({2, 3, 8}, D)
        local tm = tf:generate_square_subsequent_mask(3, {dtype = "float64"})
        local spad = ordo.tensor({{0, 0, 0, 1, 1}, {0, 0, 0, 0, 0}}, "uint8")
        local y = tf(src, tgt, {tgt_mask = tm, tgt_is_causal = true, src_key_padding_mask = spad,
                                memory_key_padding_mask = spad})
        assert.same({2, 3, 8}, y:shape())
        local mem = tf.encoder(src, {src_key_padding_mask = spad})
        local want = tgt
        for i = 1, 2 do
            want = tf.decoder.layers:get(i)(want, mem, {tgt_mask = tm, memory_key_padding_mask = spad})
        end
        close(y:totable(), tf.decoder.norm(want):totable(), 1e-12)
        -- memory_is_causal: the cross attention is causal
        local dl = tf.decoder.layers:get(1)
        local t5 = ordo.randn({2, 5, 8}, D)
        close(dl(t5, src, {memory_is_causal = true}):totable(),
              dl(t5, src, {memory_mask = ordo.ones({5, 5}, "uint8"):triu(1)}):totable(), 1e-12)
        H.raises(function() tf(src, ordo.randn({3, 3, 8}, D)) end, "Transformer: the batch number of src and tgt")
        H.raises(function() tf(src, ordo.randn({2, 3, 6}, D)) end, "must be equal to d_model 8")
        H.raises(function() nn.Transformer({d_model = 8, nhead = 2, heads = 2}) end, "unknown option 'heads'")
    end)

    it("layers take Torch's bias = false and a function as the activation", function()
        local l = nn.TransformerEncoderLayer(4, 2, {bias = false, dim_feedforward = 6})
        assert.same({"self_attn.in_proj_weight", "self_attn.out_proj.weight", "linear1.weight", "linear2.weight",
                     "norm1.weight", "norm2.weight"}, names_of(l))
        ordo.manual_seed(7)
        local a = nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 6, activation = "gelu", dtype = "float64"})
        ordo.manual_seed(7)
        local used = 0
        local b = nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 6, dtype = "float64",
                                                    activation = function(h) used = used + 1; return F.gelu(h) end})
        a:eval(); b:eval()
        local x = ordo.randn({3, 2, 4}, D)
        close(b(x):totable(), a(x):totable(), 1e-12)
        assert.equals(1, used)
        H.raises(function() nn.TransformerEncoderLayer(4, 2, {activation = 3}) end,
                 "activation must be 'relu', 'gelu' or a function")
        H.raises(function() nn.TransformerEncoderLayer(4, 2, {norm_first = 1}) end, "norm_first must be a boolean")
        -- the layer's own name and option names, not MultiheadAttention's
        H.raises(function() nn.TransformerEncoderLayer(4, 2, {dropout = 1}) end,
                 "TransformerEncoderLayer: dropout must be a number in [0, 1), got 1")
        H.raises(function() nn.TransformerDecoderLayer(4, 3) end,
                 "TransformerDecoderLayer: d_model 4 must be divisible by nhead 3")
        H.raises(function() nn.TransformerEncoderLayer(4, 2, {layer_norm_eps = -1}) end,
                 "TransformerEncoderLayer: layer_norm_eps must be a non-negative number")
        assert.equals("MultiheadAttention(4, 2 heads, kdim 3, vdim 4, add_bias_kv, add_zero_attn)",
                      tostring(nn.MultiheadAttention(4, 2, {kdim = 3, add_bias_kv = true, add_zero_attn = true}))
                          :match("^[^\n]*"))
    end)

    it("MultiheadAttention and the transformer layers refuse a query of another dtype than their weights", function()
        -- (the projections promoted it: a float64 output of float32 weights)
        local q = ordo.randn({5, 2, 4}, D)
        local mix = " (convert one with :to())"
        H.raises(function() nn.MultiheadAttention(4, 2)(q, q, q) end,
                 "MultiheadAttention: query is float64 but in_proj_weight is float32" .. mix)
        H.raises(function() nn.MultiheadAttention(4, 2, {kdim = 3})(q, ordo.randn({5, 2, 3}, D), q) end,
                 "MultiheadAttention: query is float64 but q_proj_weight is float32" .. mix)
        H.raises(function() nn.TransformerEncoderLayer(4, 2)(q) end, "MultiheadAttention: query is float64")
        H.raises(function() nn.TransformerEncoderLayer(4, 2, {norm_first = true})(q) end,
                 "LayerNorm: input is float64 but weight is float32" .. mix)
        local m = nn.MultiheadAttention(4, 2):double()
        local x = q:clone():requires_grad()
        local out = m(x, x, x)
        assert.equals("float64", out:dtype())
        out:sum():backward()
        assert.equals("float64", m.in_proj_weight.grad:dtype())
        assert.equals("float64", nn.TransformerEncoderLayer(4, 2):double()(q):dtype())
    end)

    it("TransformerEncoder / Decoder give each copy its own activation module, as Torch's deepcopy", function()
        -- a module activation (a PReLU, with a parameter) was one module shared by every copy and the layer given
        ordo.manual_seed(6)
        local layer = nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 6, dropout = 0, batch_first = true,
                                                        activation = nn.PReLU(1, {dtype = "float64"}), dtype = "float64"})
        local enc = nn.TransformerEncoder(layer, 2)
        local a1, a2 = enc.layers:get(1).activation, enc.layers:get(2).activation
        assert.is_true(a1 ~= a2 and a1 ~= layer.activation and a2 ~= layer.activation)
        assert.is_true(a1.weight ~= a2.weight and a1.weight ~= layer.activation.weight)
        assert.equals(layer.activation.weight:item(), a2.weight:item())
        local names = {}
        for _, e in ipairs(enc:named_parameters()) do
            if e.name:find("activation", 1, true) then names[#names + 1] = e.name end
        end
        assert.same({"layers.1.activation.weight", "layers.2.activation.weight"}, names)
        -- each trains apart: changing one changes neither the other nor the layer given
        ordo.no_grad(function() a1.weight:fill_(0.5) end)
        assert.equals(0.25, a2.weight:item())
        assert.equals(0.25, layer.activation.weight:item())
        local x = ordo.randn({2, 3, 4}, {dtype = "float64"})
        ;(enc(x) * ordo.randn({2, 3, 4}, {dtype = "float64"})):sum():backward()
        assert.is_true(a1.weight.grad ~= nil and a2.weight.grad ~= nil)
        assert.is_nil(layer.activation.weight.grad)
        -- the Transformer's layers, encoder and decoder, each their own
        local tf = nn.Transformer({d_model = 4, nhead = 2, num_encoder_layers = 2, num_decoder_layers = 3,
                                   dim_feedforward = 6, activation = nn.PReLU()})
        local n = 0
        for _, e in ipairs(tf:named_parameters()) do if e.name:find("activation", 1, true) then n = n + 1 end end
        assert.equals(5, n)
        -- a frozen parameter of the layer is frozen in every copy (they trained)
        local fl = nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 6})
        fl.self_attn:requires_grad_(false)
        local fenc = nn.TransformerEncoder(fl, 2)
        assert.equals(#fl:trainable_parameters(), #fenc.layers:get(2):trainable_parameters())
        assert.is_false(fenc.layers:get(1).self_attn.in_proj_weight._rg == true)
        assert.is_true(fenc.layers:get(1).linear1.weight._rg)
        -- a function activation is shared, as before (nothing to copy)
        local f = function(t) return t:relu() end
        local e2 = nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, {activation = f}), 2)
        assert.equals(f, e2.layers:get(2).activation)
    end)
end)
