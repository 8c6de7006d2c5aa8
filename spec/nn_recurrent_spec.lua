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

-- A cell of class Cell holding the weights of layer l (from 1), direction
-- d (2: reverse) of the sequence module m, by their Torch names.
local function cell_of(m, Cell, l, d)
    local sfx = "_l" .. (l - 1) .. (d == 2 and "_reverse" or "")
    local w = m["weight_ih" .. sfx]
    local cell = Cell(w:size(2), m.hidden_size, {dtype = w:dtype()})
    cell:load_state_dict({weight_ih = w, weight_hh = m["weight_hh" .. sfx], bias_ih = m["bias_ih" .. sfx],
                          bias_hh = m["bias_hh" .. sfx]})
    return cell
end

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
            local cell = cell_of(lstm, nn.LSTMCell, l, 1)
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
            for d, cell in ipairs({cell_of(lstm, nn.LSTMCell, l, 1), cell_of(lstm, nn.LSTMCell, l, 2)}) do
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

    it("the parameters have Torch's names, order and shapes (weight_ih_l0, ..._reverse)", function()
        local m = nn.LSTM(3, 4, {num_layers = 2, bidirectional = true})
        local names, shapes = {}, {}
        for _, e in ipairs(m:state_dict()) do
            names[#names + 1] = e.name
            shapes[#shapes + 1] = table.concat(e.tensor:shape(), "x")
        end
        -- torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True).state_dict()
        assert.same({"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0",
                     "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
                     "weight_ih_l1", "weight_hh_l1", "bias_ih_l1", "bias_hh_l1",
                     "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"},
                    names)
        assert.same({"16x3", "16x4", "16", "16", "16x3", "16x4", "16", "16",
                     "16x8", "16x4", "16", "16", "16x8", "16x4", "16", "16"}, shapes)
        assert.equals(m.weight_ih_l1, m:parameters()[9])
        -- Torch's fields
        assert.same({3, 4, 2, true, false}, {m.input_size, m.hidden_size, m.num_layers, m.bidirectional, m.batch_first})
        assert.is_false(nn.GRU(2, 2).bidirectional)
        local g = nn.GRU(2, 5, {bias = false})
        names = {}
        for _, e in ipairs(g:named_parameters()) do names[#names + 1] = e.name end
        assert.same({"weight_ih_l0", "weight_hh_l0"}, names)
        assert.same({15, 2}, g.weight_ih_l0:shape())
        assert.same({5, 5}, nn.RNN(2, 5).weight_hh_l0:shape())
        assert.equals(0, #nn.RNN(2, 5):children())
        -- a Torch state dict, keyed by those names, loads as it is
        local sd = {}
        for _, e in ipairs(m:state_dict()) do sd[e.name] = ordo.randn(e.tensor:shape()) end
        local miss, unexp = m:load_state_dict(sd)
        assert.same({}, miss)
        assert.same({}, unexp)
        assert.same(sd.bias_hh_l1_reverse:totable(), m.bias_hh_l1_reverse:totable())
        H.raises(function() return nn.LSTM(3, 4, {bias = 0}) end, "LSTM", "bias", "boolean")
        H.raises(function() return nn.RNN(3, 4, {nonlinearity = "gelu"}) end, "RNN", "nonlinearity", "gelu")
    end)

    it("checkpoints written with the older names (cell1.weight_ih...) still load, renamed", function()
        -- spec/fixtures/rnn_old_names_*.ordo: written by ordo at f2aad9c, whose sequence modules held their
        -- layers as cells: an LSTM(3, 2, {num_layers = 2, bidirectional = true}) by m:save, a module with
        -- rnn = GRU(3, 2, {num_layers = 2}) and head = Linear(2, 1) by ordo.save(m:state_dict()), and the
        -- outputs each gave then
        local F64 = {dtype = "float64"}
        local io = ordo.load("spec/fixtures/rnn_old_names_io.ordo")
        local old = ordo.load("spec/fixtures/rnn_old_names_lstm.ordo")
        assert.is_not_nil(old["cell2_reverse.bias_hh"])
        local function lstm() return nn.LSTM(3, 2, {num_layers = 2, bidirectional = true, dtype = "float64"}) end
        local function same(a, b) return assert.is_true(ordo.allclose(a, b, 1e-12, 1e-12)) end
        for _, how in ipairs({"load", "load_state_dict"}) do
            local m = lstm()
            if how == "load" then m:load("spec/fixtures/rnn_old_names_lstm.ordo") else m:load_state_dict(old) end
            assert.same(old["cell2_reverse.bias_hh"]:totable(), m.bias_hh_l1_reverse:totable())
            assert.same(old["cell1.weight_ih"]:totable(), m.weight_ih_l0:totable())
            local out, hn, cn = m(io.x, io.h0)
            same(io.out, out)
            same(io.hn, hn)
            same(io.cn, cn)
        end
        local Tagger = nn.Module:extend("Tagger")
        function Tagger:init()
            self.rnn = nn.GRU(3, 2, {num_layers = 2, dtype = "float64"})
            self.head = nn.Linear(2, 1, F64)
        end
        function Tagger:forward(x) return self.head((self.rnn(x))) end
        local t = Tagger()
        t:load_state_dict(ordo.load("spec/fixtures/rnn_old_names_gru_tagger.ordo"))
        same(io.tagger_out, t(io.x))
        -- saved again, it has today's names
        local names = {}
        for _, e in ipairs(t:state_dict()) do names[#names + 1] = e.name end
        assert.equals("rnn.weight_ih_l0", names[1])
        -- strict = false reports what was missing and unexpected under today's names
        local miss, unexp = Tagger():load_state_dict({["rnn.cell1.weight_ih"] = ordo.zeros({6, 3}, F64),
                                                       ["rnn.cell3.weight_ih"] = ordo.zeros(1)}, {strict = false})
        assert.equals("rnn.weight_hh_l0", miss[1])
        assert.equals(9, #miss) -- (7 of the GRU, 2 of the head)
        assert.same({"rnn.cell3.weight_ih"}, unexp)
        -- a wrong shape names both names; an old name next to the new one is not taken for it
        H.raises(function()
            return Tagger():load_state_dict({["rnn.cell1.weight_ih"] = ordo.zeros({5, 3}, F64)}, {strict = false})
        end, "rnn.weight_ih_l0 (read as rnn.cell1.weight_ih, its older name) is of shape 5x3")
        H.raises(function()
            return nn.GRU(3, 2):load_state_dict({weight_ih_l0 = ordo.zeros(6, 3), weight_hh_l0 = ordo.zeros(6, 2),
                                                  bias_ih_l0 = ordo.zeros(6), bias_hh_l0 = ordo.zeros(6),
                                                  ["cell1.weight_ih"] = ordo.zeros(6, 3)})
        end, "a tensor cell1.weight_ih that the module does not have")
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
        same:load_state_dict(gru:state_dict()) -- the same weights, time first
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

    it("an input or state of another dtype than the weights raises naming the module (Conv's message)", function()
        -- (the products promoted: a float64 output of float32 weights, the weights' gradients float32)
        local x64, x32 = ordo.randn({5, 2, 3}, D), ordo.randn({5, 2, 3})
        local mix = " (convert one with :to())"
        for _, name in ipairs({"RNN", "LSTM", "GRU"}) do
            H.raises(function() nn[name](3, 4)(x64) end, name .. ": input is float64 but weight_ih_l0 is float32" .. mix)
            H.raises(function() nn[name](3, 4)(x64:select(2, 1)) end, name .. ": input is float64 but weight_ih_l0")
            H.raises(function() nn[name](3, 4)(x32, ordo.zeros({1, 2, 4}, D)) end,
                     name .. ": input is float32 but h0 is float64" .. mix)
            local cell = name .. "Cell"
            H.raises(function() nn[cell](3, 4)(x64:select(1, 1)) end, cell .. ": input is float64 but weight_ih is float32")
            H.raises(function() nn[cell](3, 4)(x32:select(1, 1), ordo.zeros({2, 4}, D)) end,
                     cell .. ": input is float32 but state 1 is float64" .. mix)
            -- converted, they take float64, and so do their gradients
            local m = nn[name](3, 4):double()
            local x = x64:clone():requires_grad()
            local out = m(x)
            assert.equals("float64", out:dtype())
            out:sum():backward()
            assert.equals("float64", m.weight_ih_l0.grad:dtype())
            assert.equals("float64", nn[cell](3, 4):to("float64")(x64:select(1, 1)):dtype())
        end
        H.raises(function() nn.LSTM(3, 4)(x32, ordo.zeros({1, 2, 4}), ordo.zeros({1, 2, 4}, D)) end,
                 "LSTM: input is float32 but c0 is float64")
        H.raises(function() nn.LSTM(3, 4)(ordo.ones({5, 2, 3}, {dtype = "int64"})) end,
                 'LSTM: input is int64 but weight_ih_l0 is float32 (convert the input with :to("float32"))')
    end)

    it("nn.utils.rnn: pad_sequence, and packed batches whose sequences each stop at their own length", function()
        local rnn = nn.utils.rnn
        ordo.manual_seed(4)
        local seqs = {ordo.randn({5, 3}, D), ordo.randn({2, 3}, D), ordo.randn({4, 3}, D)}
        -- pad_sequence: T x N x ... (N x T with batch_first), the value after each end (before, padding_side left)
        local tf = rnn.pad_sequence(seqs)
        assert.same({5, 3, 3}, tf:shape())
        local padded = rnn.pad_sequence(seqs, {batch_first = true})
        assert.same({3, 5, 3}, padded:shape())
        assert.same(seqs[2]:totable(), padded[2]:narrow(1, 1, 2):totable())
        assert.same({{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}, padded[2]:narrow(1, 3, 3):totable())
        local left = rnn.pad_sequence(seqs, true, -1, "left")
        assert.same({{-1, -1, -1}, {-1, -1, -1}, {-1, -1, -1}}, left[2]:narrow(1, 1, 3):totable())
        assert.same(seqs[2]:totable(), left[2]:narrow(1, 4, 2):totable())
        for _, kind in ipairs({"RNN", "LSTM", "GRU"}) do
            for _, bidir in ipairs({false, true}) do
                local m = nn[kind](3, 4, {batch_first = true, num_layers = 2, bidirectional = bidir, dtype = "float64"})
                local p = rnn.pack_padded_sequence(padded, {5, 2, 4}, {batch_first = true, enforce_sorted = false})
                local out, hn, cn = m(p)
                assert.is_true(rnn.PackedSequence == getmetatable(out))
                local y, lens = rnn.pad_packed_sequence(out, {batch_first = true})
                assert.same({5, 2, 4}, lens:totable())
                assert.same({3, 5, bidir and 8 or 4}, y:shape())
                -- each sequence as if alone: its outputs, zeros after its end, and its state at its last element
                -- (the reverse direction starting at its own end)
                for i, sq in ipairs(seqs) do
                    local L = sq:size(1)
                    local o1, h1, c1 = m(sq:unsqueeze(1))
                    close(o1[1]:totable(), y[i]:narrow(1, 1, L):totable(), 1e-12)
                    close(h1:select(2, 1):totable(), hn:select(2, i):totable(), 1e-12)
                    if kind == "LSTM" then close(c1:select(2, 1):totable(), cn:select(2, i):totable(), 1e-12) end
                    if L < 5 then assert.equals(0, y[i]:narrow(1, L + 1, 5 - L):abs():max():item()) end
                end
            end
        end
        -- Torch's data and batch_sizes (longest first), positional options, total_length and padding_value
        local p = rnn.pack_sequence(seqs, false)
        assert.same({3, 3, 2, 2, 1}, p.batch_sizes:totable())
        assert.same({1, 3, 2}, p.sorted_indices:totable())
        assert.same({11, 3}, p.data:shape())
        assert.same(seqs[3][1]:totable(), p.data[2]:totable())
        local y = rnn.pad_packed_sequence(rnn.pack_padded_sequence(tf, {5, 2, 4}, false, false), true, -1, 7)
        assert.same({3, 7, 3}, y:shape())
        assert.equals(-1, y[2][3][1])
        assert.equals(-1, y[1][6][1])
        -- gradients go through the packing to the padded input (and none to the padding)
        local g = nn.GRU(3, 4, {dtype = "float64", batch_first = true})
        assert.is_true(ordo.autograd.gradcheck(function(x)
            local o, h = g(rnn.pack_padded_sequence(x, {5, 2, 4}, true, false))
            return rnn.pad_packed_sequence(o, true), h
        end, {padded:clone():requires_grad()}))
        local x = padded:clone():requires_grad()
        local o = g(rnn.pack_padded_sequence(x, {5, 2, 4}, true, false))
        rnn.pad_packed_sequence(o, true):sum():backward()
        assert.equals(0, x.grad[2]:narrow(1, 3, 3):abs():max():item())
        -- bad input raises, naming it
        H.raises(function() rnn.pack_padded_sequence(padded, {5, 2, 4}, true) end, "pack_padded_sequence",
                 "must not increase", "enforce_sorted = false")
        H.raises(function() rnn.pack_padded_sequence(padded, {5, 0, 4}, true, false) end, "length 2 is 0")
        H.raises(function() rnn.pack_padded_sequence(padded, {6, 2, 4}, true, false) end, "length 1 is 6", "1..5")
        H.raises(function() rnn.pack_padded_sequence(padded, {5, 2}, true) end, "2 lengths for a batch of 3")
        H.raises(function() rnn.pack_padded_sequence(padded, {5, 2, 2}, {batch_frist = true}) end,
                 "unknown option 'batch_frist'")
        H.raises(function() rnn.pack_padded_sequence(padded, {5, 2, 2}, true, true, 1) end, "too many arguments")
        H.raises(function() rnn.pad_sequence({seqs[1], ordo.randn({2, 4}, D)}) end, "pad_sequence", "sequence 2")
        H.raises(function() rnn.pad_sequence({}) end, "pad_sequence", "empty list")
        H.raises(function() rnn.pad_sequence({seqs[1], nil, seqs[3]}) end, "pad_sequence", "sequence 2", "nil")
        H.raises(function() rnn.pack_padded_sequence(padded, {5, nil, 4}, true, false) end, "length 2 is nil")
        H.raises(function() rnn.pad_packed_sequence(padded) end, "pad_packed_sequence", "PackedSequence")
        H.raises(function() rnn.pad_packed_sequence(p, {total_length = 4}) end, "total_length", ">= the longest length 5")
        H.raises(function() nn.GRU(4, 2)(p) end, "GRU", "4 features")
    end)
end)
