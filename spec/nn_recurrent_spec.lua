-- nn recurrent layers (lua/ordo/nn/recurrent.lua): each cell against its
-- equations computed in plain Lua from the same weights, the sequence
-- modules against the cells run step by step, gradients by gradcheck, and
-- the errors.
local ordo = require "ordo"
local H = require "support.helpers"
local nn = ordo.nn

local D = {dtype = "float64"}

local close = H.close

local function sigmoid(v) return 1 / (1 + math.exp(-v)) end

-- plain Lua: W (rows) times v, plus b (a list, or nil)
local function affine(W, v, b)
    local r = {}
    for i = 1, #W do
        local acc = b and b[i] or 0
        for k = 1, #v do acc = acc + W[i][k] * v[k] end
        r[i] = acc
    end
    return r
end

local function add(a, b)
    local r = {}
    for i = 1, #a do r[i] = a[i] + b[i] end
    return r
end

local function params_of(cell)
    return cell.weight_ih:totable(), cell.weight_hh:totable(), cell.bias_ih and cell.bias_ih:totable(),
        cell.bias_hh and cell.bias_hh:totable()
end

-- one step of each cell, for one row x and state h (c), in plain Lua
local function ref_rnn(cell, x, h, relu)
    local wi, wh, bi, bh = params_of(cell)
    local s = add(affine(wi, x, bi), affine(wh, h, bh))
    for i = 1, #s do s[i] = relu and math.max(s[i], 0) or math.tanh(s[i]) end
    return s
end

local function ref_lstm(cell, x, h, c)
    local wi, wh, bi, bh = params_of(cell)
    local g = add(affine(wi, x, bi), affine(wh, h, bh))
    local n = #h
    local h2, c2 = {}, {}
    for j = 1, n do
        local i, f = sigmoid(g[j]), sigmoid(g[n + j])
        local cand, o = math.tanh(g[2 * n + j]), sigmoid(g[3 * n + j])
        c2[j] = f * c[j] + i * cand
        h2[j] = o * math.tanh(c2[j])
    end
    return h2, c2
end

local function ref_gru(cell, x, h)
    local wi, wh, bi, bh = params_of(cell)
    local gi, gh = affine(wi, x, bi), affine(wh, h, bh)
    local n = #h
    local h2 = {}
    for j = 1, n do
        local r, z = sigmoid(gi[j] + gh[j]), sigmoid(gi[n + j] + gh[n + j])
        local cand = math.tanh(gi[2 * n + j] + r * gh[2 * n + j])
        h2[j] = (1 - z) * cand + z * h[j]
    end
    return h2
end

describe("nn recurrent cells", function()
    before_each(function() ordo.manual_seed(21) end)

    it("RNNCell (tanh and relu), LSTMCell and GRUCell match their equations, row by row", function()
        local x, h, c = ordo.randn({3, 4}, D), ordo.randn({3, 5}, D), ordo.randn({3, 5}, D)
        local tx, th, tc = x:totable(), h:totable(), c:totable()
        for _, nl in ipairs({"tanh", "relu"}) do
            local cell = nn.RNNCell(4, 5, {nonlinearity = nl, dtype = "float64"})
            local got = cell(x, h):totable()
            for r = 1, 3 do close(ref_rnn(cell, tx[r], th[r], nl == "relu"), got[r], nil, "rnn " .. nl) end
        end
        local lstm = nn.LSTMCell(4, 5, D)
        local h2, c2 = lstm(x, h, c)
        for r = 1, 3 do
            local wh, wc = ref_lstm(lstm, tx[r], th[r], tc[r])
            close(wh, h2:totable()[r], nil, "lstm h")
            close(wc, c2:totable()[r], nil, "lstm c")
        end
        local gru = nn.GRUCell(4, 5, D)
        local g2 = gru(x, h):totable()
        for r = 1, 3 do close(ref_gru(gru, tx[r], th[r]), g2[r], nil, "gru") end
    end)

    it("without a state the cells start from zeros; a 1-dim input gives a 1-dim state; bias = false", function()
        local x = ordo.randn({2, 3}, D)
        local cell = nn.LSTMCell(3, 4, D)
        local z = ordo.zeros({2, 4}, D)
        local h1, c1 = cell(x)
        local h2, c2 = cell(x, z, z)
        close(h2:reshape(-1):totable(), h1:reshape(-1):totable())
        close(c2:reshape(-1):totable(), c1:reshape(-1):totable())
        local hv = cell(x[1])
        assert.same({4}, hv:shape())
        close(h1[1]:totable(), hv:totable())
        local nb = nn.GRUCell(3, 4, {bias = false})
        assert.is_nil(nb.bias_ih)
        assert.equals(2, #nb:parameters())
        assert.same({2, 4}, nb(ordo.randn({2, 3})):shape())
        -- Torch's initialisation bound: 1/sqrt(hidden)
        local big = nn.LSTMCell(8, 16)
        assert.is_true(big.weight_hh:abs():max():item() <= 0.25)
        assert.same({64, 8}, big.weight_ih:shape())
    end)

    it("gradients through each cell match numerical differentiation", function()
        local x, h, c = ordo.randn({2, 3}, D):requires_grad(), ordo.randn({2, 4}, D):requires_grad(),
            ordo.randn({2, 4}, D):requires_grad()
        local rnn, lstm, gru = nn.RNNCell(3, 4, D), nn.LSTMCell(3, 4, D), nn.GRUCell(3, 4, D)
        assert.is_true(ordo.autograd.gradcheck(function(a, b) return rnn(a, b) end, {x, h}))
        assert.is_true(ordo.autograd.gradcheck(function(a, b, d)
            local h2, c2 = lstm(a, b, d)
            return h2 * 2 + c2
        end, {x, h, c}))
        assert.is_true(ordo.autograd.gradcheck(function(a, b) return gru(a, b) end, {x, h}))
        assert.is_true(ordo.autograd.gradcheck(function(w) return gru:forward(x:detach(), h:detach()) * w end,
                                               {ordo.ones({4}, D):requires_grad()}))
        -- the weights get gradients
        lstm(x, h, c):sum():backward()
        assert.same({16, 3}, lstm.weight_ih.grad:shape())
        assert.same({16}, lstm.bias_hh.grad:shape())
    end)

    it("bad inputs raise naming the module and the shapes", function()
        local cell = nn.GRUCell(3, 4)
        H.raises(function() return cell(ordo.ones(2, 5)) end, "GRUCell", "2x5", "(N, 3)")
        H.raises(function() return cell(ordo.ones(2, 3), ordo.ones(3, 4)) end, "GRUCell", "state 1", "3x4", "2x4")
        H.raises(function() return cell("x") end, "GRUCell", "input", "string")
        H.raises(function() return nn.LSTMCell(0, 3) end, "LSTMCell", "input_size", "0")
        H.raises(function() return nn.RNNCell(2, 3, {nonlinearity = "sigmoid"}) end, "RNNCell", "nonlinearity")
        H.raises(function() return nn.LSTMCell(2, 3, {nonlinearity = "relu"}) end, "LSTMCell", "unknown option")
    end)
end)

describe("nn recurrent sequences", function()
    before_each(function() ordo.manual_seed(22) end)

    it("LSTM with 2 layers equals its cells run step by step; h_n and c_n are the last states", function()
        local lstm = nn.LSTM(3, 4, {num_layers = 2, dtype = "float64"})
        local x = ordo.randn({5, 2, 3}, D)
        local out, hn, cn = lstm(x)
        assert.same({5, 2, 4}, out:shape())
        assert.same({2, 2, 4}, hn:shape())
        assert.same({2, 2, 4}, cn:shape())
        local inputs = {}
        for t = 1, 5 do inputs[t] = x[t] end
        for l = 1, 2 do
            local cell = lstm["cell" .. l]
            local h, c
            for t = 1, 5 do
                h, c = cell(inputs[t], h, c)
                inputs[t] = h
            end
            close(h:reshape(-1):totable(), hn[l]:reshape(-1):totable())
            close(c:reshape(-1):totable(), cn[l]:reshape(-1):totable())
        end
        for t = 1, 5 do close(inputs[t]:reshape(-1):totable(), out[t]:reshape(-1):totable()) end
    end)

    it("a bidirectional LSTM equals its forward and reverse cells run step by step, layer by layer", function()
        local lstm = nn.LSTM(3, 4, {num_layers = 2, bidirectional = true, dtype = "float64"})
        local x = ordo.randn({5, 2, 3}, D)
        local h0 = ordo.randn({4, 2, 4}, D)
        local out, hn, cn = lstm(x, h0)
        assert.same({5, 2, 8}, out:shape())
        assert.same({4, 2, 4}, hn:shape())
        local inputs = {}
        for t = 1, 5 do inputs[t] = x[t] end
        for l = 1, 2 do
            local fw, bw = {}, {}
            for d, cell in ipairs({lstm["cell" .. l], lstm["cell" .. l .. "_reverse"]}) do
                local h, c = h0[(l - 1) * 2 + d], nil
                for k = 1, 5 do
                    local t = d == 1 and k or 6 - k
                    h, c = cell(inputs[t], h, c)
                    if d == 1 then fw[t] = h else bw[t] = h end
                end
                close(h:reshape(-1):totable(), hn[(l - 1) * 2 + d]:reshape(-1):totable())
                close(c:reshape(-1):totable(), cn[(l - 1) * 2 + d]:reshape(-1):totable())
            end
            for t = 1, 5 do inputs[t] = ordo.cat({fw[t], bw[t]}, 2) end
        end
        for t = 1, 5 do close(inputs[t]:reshape(-1):totable(), out[t]:reshape(-1):totable()) end
        -- gradients through both directions
        local g = nn.GRU(2, 3, {bidirectional = true, dtype = "float64"})
        local xs = ordo.randn({4, 2, 2}, D):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(a) return (g(a)) end, {xs}))
    end)

    it("dropout between layers acts in training only", function()
        local m = nn.GRU(3, 5, {num_layers = 3, dropout = 0.5})
        local x = ordo.randn({6, 4, 3})
        assert.is_false(ordo.allclose(m(x), (m(x)))) -- training: new masks each call
        m:eval()
        assert.is_true(ordo.allclose(m(x), (m(x))))
        local plain = nn.GRU(3, 5, {num_layers = 3})
        for i, p in ipairs(plain:parameters()) do ordo.no_grad(function() p:copy_(m:parameters()[i]) end) end
        plain:eval()
        assert.is_true(ordo.allclose(plain(x), (m(x)))) -- eval: no dropout at all
    end)

    it("GRU and RNN: batch_first, a given initial state, and gradients through time", function()
        local gru = nn.GRU(2, 3, {batch_first = true, dtype = "float64"})
        local x = ordo.randn({4, 6, 2}, D) -- N = 4, T = 6
        local h0 = ordo.randn({1, 4, 3}, D)
        local out, hn = gru(x, h0)
        assert.same({4, 6, 3}, out:shape())
        local same, shn = nn.GRU(2, 3, {dtype = "float64"}), nil
        same.cell1 = gru.cell1 -- the same weights, time first
        local out2
        out2, shn = same(x:transpose(1, 2), h0)
        close(out2:transpose(1, 2):reshape(-1):totable(), out:reshape(-1):totable())
        close(shn:reshape(-1):totable(), hn:reshape(-1):totable())
        local rnn = nn.RNN(2, 3, {num_layers = 2, nonlinearity = "relu", dtype = "float64"})
        local ro, rh = rnn(x:transpose(1, 2))
        assert.same({6, 4, 3}, ro:shape())
        assert.same({2, 4, 3}, rh:shape())
        local xs = ordo.randn({3, 2, 2}, D):requires_grad()
        local small = nn.GRU(2, 2, {dtype = "float64"})
        assert.is_true(ordo.autograd.gradcheck(function(a) return (small(a)) end, {xs}))
        local lstm = nn.LSTM(2, 2, {dtype = "float64"})
        assert.is_true(ordo.autograd.gradcheck(function(a)
            local o, h, c = lstm(a)
            return o:sum() + h:sum() * 2 + c:sum() * 3
        end, {xs}))
    end)

    it("an empty sequence gives an empty output and the initial (or zero) state", function()
        local lstm = nn.LSTM(2, 3)
        local out, hn, cn = lstm(ordo.zeros({0, 4, 2}))
        assert.same({0, 4, 3}, out:shape())
        assert.same({1, 4, 3}, hn:shape())
        assert.same({1, 4, 3}, cn:shape())
        assert.equals(0, hn:abs():sum():item())
    end)

    it("a GRU learns to sum a short sequence (the loss falls 20-fold)", function()
        local model, head = nn.GRU(1, 8), nn.Linear(8, 1)
        local params = model:parameters()
        for _, p in ipairs(head:parameters()) do params[#params + 1] = p end
        local opt = ordo.optim.Adam(params, {lr = 0.02})
        local first, last
        for step = 1, 200 do
            local xs = ordo.rand({5, 16, 1})
            opt:zero_grad()
            local _, hn = model(xs)
            local loss = (head(hn[1]) - xs:sum(1)):pow(2):mean()
            loss:backward()
            opt:step()
            if step == 1 then first = loss:item() end
            last = loss:item()
        end
        assert.is_true(last < first / 20, ("loss %g -> %g"):format(first, last))
    end)

    it("an unbatched sequence (T x features) is a batch of one, its states and results without the batch dim", function()
        for _, bf in ipairs({false, true}) do
            local m = nn.LSTM(2, 3, {num_layers = 2, bidirectional = true, batch_first = bf, dtype = "float64"})
            local x, h0, c0 = ordo.randn({4, 2}, D), ordo.randn({4, 3}, D), ordo.randn({4, 3}, D)
            local out, h, c = m(x, h0, c0)
            assert.same({4, 6}, out:shape())
            assert.same({4, 3}, h:shape())
            assert.same({4, 3}, c:shape())
            local ob, hb, cb = m(bf and x:unsqueeze(1) or x:unsqueeze(2), h0:unsqueeze(2), c0:unsqueeze(2))
            assert.same((bf and ob:squeeze(1) or ob:squeeze(2)):totable(), out:totable())
            assert.same(hb:squeeze(2):totable(), h:totable())
            assert.same(cb:squeeze(2):totable(), c:totable())
        end
        local out, h = nn.GRU(2, 3)(ordo.randn({5, 2}))
        assert.same({5, 3}, out:shape())
        assert.same({1, 3}, h:shape())
    end)

    it("bad inputs and states raise naming the module and the expected shape", function()
        local lstm = nn.LSTM(3, 4, {num_layers = 2})
        H.raises(function() return lstm(ordo.ones(5, 2)) end, "LSTM", "T x N x 3", "or T x 3 unbatched", "5x2")
        H.raises(function() return lstm(ordo.ones(5, 3), ordo.zeros(2, 1, 4)) end, "LSTM",
                 "h0 for an unbatched input must be a tensor of shape 2x4", "2x1x4")
        H.raises(function() return lstm(ordo.ones(5, 2, 4)) end, "LSTM", "5x2x4")
        H.raises(function() return lstm(ordo.ones(5, 2, 3), ordo.zeros(1, 2, 4)) end, "LSTM", "h0", "2x2x4", "1x2x4")
        H.raises(function() return lstm(ordo.ones(5, 2, 3), nil, ordo.zeros(2, 3, 4)) end, "LSTM", "c0", "2x2x4")
        H.raises(function() return nn.GRU(3, 4, {num_layers = 0}) end, "GRU", "num_layers")
        H.raises(function() return nn.GRU(3, 4, {nonlinearity = "relu"}) end, "GRU", "nonlinearity", "RNN only")
        H.raises(function() return nn.LSTM(3, 4, {dropout = 1}) end, "LSTM", "dropout", "[0, 1)")
        H.raises(function() return nn.LSTM(3, 4, {bidirectional = 1}) end, "LSTM", "bidirectional", "boolean")
        H.raises(function() return nn.LSTM(3, 4, {bidirectional = true})(ordo.ones(5, 2, 3), ordo.zeros(1, 2, 4)) end,
                 "LSTM", "h0", "2x2x4", "x 2 directions")
        H.raises(function() return nn.LSTM(3, 4, {dropot = 0.1}) end, "LSTM", "unknown option 'dropot'")
        local b = nn.GRU(3, 4, {batch_first = true})
        H.raises(function() return b(ordo.ones(2, 5, 2)) end, "GRU", "N x T x 3")
        -- a c0 for a GRU or RNN (which keep no cell state) raises, as any input too many
        local h0 = ordo.zeros(1, 2, 4)
        H.raises(function() return nn.GRU(3, 4)(ordo.ones(5, 2, 3), h0, h0) end, "GRU: forward takes 2 inputs, got 3")
        H.raises(function() return nn.RNN(3, 4)(ordo.ones(5, 3), ordo.zeros(1, 4), ordo.zeros(1, 4)) end,
                 "RNN: forward takes 2 inputs, got 3")
        H.raises(function() return nn.GRUCell(3, 4)(ordo.ones(2, 3), ordo.zeros(2, 4), ordo.zeros(2, 4)) end,
                 "GRUCell: forward takes 2 inputs, got 3")
        assert.same({5, 2, 4}, nn.GRU(3, 4)(ordo.ones(5, 2, 3), h0):shape())
        assert.same({5, 4}, nn.RNN(3, 4)(ordo.ones(5, 3), ordo.zeros(1, 4)):shape())
        assert.same({5, 2, 4}, nn.LSTM(3, 4)(ordo.ones(5, 2, 3), h0, h0):shape())
    end)
end)
