-- ordo.nn (modules, layers, losses, save/load) and ordo.optim.
local ordo = require "ordo"
local nn, optim, ag = ordo.nn, ordo.optim, ordo.autograd
local F = nn.functional
local H = require "support.helpers"

local D = {dtype = "float64"}

local function close(a, b, tol)
    tol = tol or 1e-9
    if type(a) == "table" then
        assert.equal(#a, #b)
        for i = 1, #a do close(a[i], b[i], tol) end
        return
    end
    assert(math.abs(a - b) <= tol * (1 + math.abs(b)), string.format("%.12g vs %.12g", a, b))
end

local function tmpname() return os.tmpname() end

describe("nn modules", function()
    before_each(function() ordo.manual_seed(3) end)

    it("Linear: shapes, Torch's init bounds, forward = x W^T + b, gradcheck", function()
        local l = nn.Linear(5, 3)
        assert.same({3, 5}, l.weight:shape())
        assert.same({3}, l.bias:shape())
        local bound = 1 / math.sqrt(5)
        assert.is_true(l.weight:abs():max():item() <= bound)
        assert.is_true(l.bias:abs():max():item() <= bound)
        local x = ordo.randn({4, 5})
        local want = x:matmul(l.weight:detach():t()) + l.bias:detach()
        close(l(x):reshape(-1):totable(), want:reshape(-1):totable(), 1e-6)
        -- 3-D input: applied to the last dim
        assert.same({2, 4, 3}, l(ordo.randn({2, 4, 5})):shape())
        local l64 = nn.Linear(3, 2, {dtype = "float64"})
        local xi = ordo.randn({4, 3}, D):requires_grad()
        assert.is_true(ag.gradcheck(function(x_, w, b) return F.linear(x_, w, b) end, {xi, l64.weight, l64.bias}))
        assert.is_nil(nn.Linear(3, 2, {bias = false}).bias)
    end)

    it("a layer given a dtype its parameters cannot have names itself and the option", function()
        -- (it named the init function that met it: "uniform_: dtype int32 not supported",
        -- "register_parameter: weight must be a float tensor", "empty: unknown dtype")
        local cases = {{"Linear", 2, 3}, {"Conv2d", 1, 1, 3}, {"ConvTranspose1d", 1, 1, 3}, {"LSTM", 2, 3},
                       {"GRUCell", 2, 3}, {"Embedding", 3, 2}, {"LayerNorm", 4}, {"BatchNorm1d", 4},
                       {"GroupNorm", 2, 4}, {"RMSNorm", 4}, {"PReLU", 1}, {"MultiheadAttention", 4, 2}}
        for _, c in ipairs(cases) do
            for _, dt in ipairs({"int32", "uint8", "bogus"}) do
                local args = {unpack(c, 2)}
                args[#args + 1] = {dtype = dt}
                H.raises(function() nn[c[1]](unpack(args)) end, c[1] .. ": option dtype must be",
                         "got \"" .. dt .. "\"")
            end
        end
        -- Torch7's names of the float dtypes still work
        assert.equals("float64", nn.Linear(1, 1, {dtype = "double"}).weight:dtype())
        assert.equals("float32", nn.Conv2d(1, 1, 1, {dtype = "float"}).weight:dtype())
    end)

    it("Linear rejects bad sizes and mismatched inputs with clear messages", function()
        local ok, err = pcall(nn.Linear, 0, 3)
        assert.is_false(ok)
        assert.matches("in_features must be a positive integer", err)
        ok, err = pcall(function() nn.Linear(5, 3)(ordo.randn({2, 4})) end)
        assert.is_false(ok)
        -- (named after the class, as its other errors; F.linear's are linear's)
        assert.matches("Linear: input of shape 2x4 does not match weight 3x5", err)
        -- F.linear's bias has one value per output: another shape broadcast in the forward and raised only at
        -- backward, its gradient being of shape out
        local x, w = ordo.randn({3, 4}), ordo.randn({2, 4})
        H.raises(function() F.linear(x, w, ordo.ones({1})) end, "linear: bias must have shape 2", "got 1")
        H.raises(function() F.linear(x, w, ordo.ones({3, 1})) end, "linear: bias must have shape 2", "got 3x1")
        H.raises(function() F.linear(x, ordo.randn({4})) end, "linear: weight must be 2-D", "got shape 4")
    end)

    it("layers refuse an input of another dtype than their weights, as Conv and BatchNorm (and Torch) do; " ..
       ":double() takes float64", function()
        -- (the input promoted the products: a float64 output of a float32 layer, its gradients float32)
        local x64, x32 = ordo.randn({4, 3}, D), ordo.randn({4, 3})
        local mix = " (convert one with :to())"
        H.raises(function() nn.Linear(3, 2)(x64) end, "Linear: input is float64 but weight is float32" .. mix)
        H.raises(function() nn.Linear(3, 2, D)(x32) end, "Linear: input is float32 but weight is float64" .. mix)
        H.raises(function() F.linear(x32, ordo.randn({2, 3}), ordo.randn({2}, D)) end,
                 "linear: input is float32 but bias is float64" .. mix)
        -- an integer input (it came out float32): only the input can be converted
        H.raises(function() nn.Linear(3, 2)(ordo.ones({4, 3}, {dtype = "int64"})) end,
                 'Linear: input is int64 but weight is float32 (convert the input with :to("float32"))')
        H.raises(function() nn.LayerNorm(3)(x64) end, "LayerNorm: input is float64 but weight is float32" .. mix)
        H.raises(function() F.layer_norm(x32, {3}, nil, ordo.zeros({3}, D)) end,
                 "layer_norm: input is float32 but bias is float64" .. mix)
        H.raises(function() F.layer_norm(ordo.ones({4, 3}, {dtype = "int32"}), {3}) end,
                 "layer_norm: input must be float32 or float64, got int32")
        H.raises(function() nn.GroupNorm(1, 3)(x64) end, "GroupNorm: input is float64 but", "is float32" .. mix)
        H.raises(function() F.group_norm(ordo.ones({4, 3}, {dtype = "uint8"}), 1) end,
                 "group_norm: input must be float32 or float64, got uint8")
        H.raises(function() nn.RMSNorm(3)(x64) end, "RMSNorm: input is float64 but weight is float32" .. mix)
        H.raises(function() nn.PReLU()(x64) end, "PReLU: input is float64 but weight is float32" .. mix)
        -- the message Conv and BatchNorm give, from the same place
        H.raises(function() nn.Conv1d(3, 2, 1)(ordo.randn({1, 3, 4}, D)) end,
                 "Conv1d: input is float64 but weight is float32" .. mix)
        H.raises(function() F.conv2d(ordo.randn({1, 1, 2, 2}), ordo.randn({1, 1, 1, 1}), ordo.randn({1}, D)) end,
                 "conv2d: input is float32 but bias is float64" .. mix)
        -- converted, the layers take float64 (and their gradients are float64)
        for _, m in ipairs({nn.Linear(3, 2):double(), nn.LayerNorm(3):to("float64"), nn.GroupNorm(1, 3):double(),
                            nn.RMSNorm(3):double(), nn.PReLU():double()}) do
            local x = ordo.randn({4, 3}, D):requires_grad()
            local y = m(x)
            assert.equals("float64", y:dtype())
            y:sum():backward()
            assert.equals("float64", x.grad:dtype())
            assert.equals("float64", m:parameters()[1].grad:dtype())
        end
        -- layers without weights take any float dtype
        assert.equals("float64", nn.LayerNorm(3, {elementwise_affine = false})(x64):dtype())
        assert.equals("float64", F.group_norm(x64, 1):dtype())
    end)

    it("LayerNorm and GroupNorm of float32 features far from 0 match float64 (the mean's rounding)", function()
        -- 1e7 and 1e7 + 1 alternating: the float32 mean 1e7 + 0.5 rounds; x - mean alone gave 0 and 1.414
        local vals = {}
        for i = 1, 24 do vals[i] = 1e7 + (i % 2) + (i % 5 == 0 and 3 or 0) end
        local x64 = ordo.tensor(vals, D):view(2, 3, 4)
        local x32 = x64:float()
        local g = ordo.randn({2, 3, 4}, D)
        for _, f in ipairs({function(x) return F.layer_norm(x, {4}) end, function(x) return F.layer_norm(x, {3, 4}) end,
                            function(x) return F.group_norm(x, 1) end, function(x) return F.group_norm(x, 3) end}) do
            local a, b = x32:clone():requires_grad(), x64:clone():requires_grad()
            local ya, yb = f(a), f(b)
            close(ya:double():view(-1):totable(), yb:view(-1):totable(), 1e-4)
            ya:backward(g:float())
            yb:backward(g)
            close(a.grad:double():view(-1):totable(), b.grad:view(-1):totable(), 1e-3)
        end
        close(F.layer_norm(ordo.tensor({{1e7, 1e7 + 1}}), {2}):view(-1):totable(), {-1, 1}, 1e-4)
    end)

    it("a module called with more inputs than its forward takes raises (Torch's TypeError); trailing nils and " ..
       "a vararg forward are fine", function()
        local x = ordo.randn({2, 3})
        local l = nn.Linear(3, 2)
        H.raises(function() l(x, x) end, "Linear: forward takes 1 input, got 2")
        H.raises(function() nn.Sequential(l, nn.ReLU())(x, 5) end, "Sequential: forward takes 1 input, got 2")
        H.raises(function() nn.ReLU()(x, x, x) end, "ReLU: forward takes 1 input, got 3")
        H.raises(function() nn.MSELoss()(x, x, x) end, "MSELoss: forward takes 2 inputs, got 3")
        H.raises(function() nn.Dropout(0.5)(x, true) end, "Dropout: forward takes 1 input, got 2")
        assert.same(l(x):totable(), l(x, nil):totable()) -- (m(x, opts.mask) without a mask)
        assert.equals(0, nn.MSELoss()(x, x, nil):item())
        -- a user's module: a fixed forward is checked the same way, a vararg one takes any number
        local Pair = nn.Module:extend("Pair")
        function Pair:forward(a, b) return a + b end
        H.raises(function() Pair()(x, x, x) end, "Pair: forward takes 2 inputs, got 3")
        assert.same((x + x):totable(), Pair()(x, x):totable())
        local Sum = nn.Module:extend("Sum")
        function Sum:forward(...)
            local r = 0
            for i = 1, select("#", ...) do r = (select(i, ...)) + r end
            return r
        end
        assert.same((x + x + x):totable(), Sum()(x, x, x):totable())
        -- a forward set on an instance is the one counted
        local p = Pair()
        p.forward = function(_, a) return a end
        H.raises(function() p(x, x) end, "Pair: forward takes 1 input, got 2")
        -- a module without a forward of its own says so, whatever it is given
        H.raises(function() nn.ModuleList({l})(x, x) end, "ModuleList: it has no forward of its own")
        H.raises(function() nn.Module:extend("Bare")()(x) end, "Bare: forward is not defined")
        -- too few: the input is checked (Softmax and LogSoftmax raised a bare Lua error on nil)
        H.raises(function() nn.Softmax(2)() end, "Softmax: input must be a tensor, got nil")
        H.raises(function() nn.LogSoftmax(2)(3) end, "LogSoftmax: input must be a tensor, got number")
        H.raises(function() l() end, "Linear: input must be a tensor, got nil")
    end)

    it("a module's errors name its class (Linear: ...), not the functional form it calls (linear: ...)", function()
        -- before: nn.Linear said "linear: ...", nn.MSELoss "mse_loss: ...", nn.ReLU "relu: ..."
        local singles = {
            Linear = nn.Linear(3, 2), ReLU = nn.ReLU(), Tanh = nn.Tanh(), Sigmoid = nn.Sigmoid(), SiLU = nn.SiLU(),
            SELU = nn.SELU(), ReLU6 = nn.ReLU6(), Hardsigmoid = nn.Hardsigmoid(), Hardswish = nn.Hardswish(),
            Mish = nn.Mish(), Softsign = nn.Softsign(), LogSigmoid = nn.LogSigmoid(), GELU = nn.GELU(),
            Softplus = nn.Softplus(), Hardtanh = nn.Hardtanh(), LeakyReLU = nn.LeakyReLU(), ELU = nn.ELU(),
            PReLU = nn.PReLU(), LayerNorm = nn.LayerNorm(3), RMSNorm = nn.RMSNorm(3), GroupNorm = nn.GroupNorm(1, 3),
            ZeroPad2d = nn.ZeroPad2d(1), ReflectionPad1d = nn.ReflectionPad1d(1), PixelShuffle = nn.PixelShuffle(2),
            PixelUnshuffle = nn.PixelUnshuffle(2), Dropout = nn.Dropout(0.5), Dropout2d = nn.Dropout2d(0.5),
            Embedding = nn.Embedding(3, 2), Unfold = nn.Unfold(2), Fold = nn.Fold({4, 4}, 2),
            AdaptiveAvgPool2d = nn.AdaptiveAvgPool2d(2), AdaptiveMaxPool1d = nn.AdaptiveMaxPool1d(2),
        }
        for name, m in pairs(singles) do
            H.raises(function() m("x") end, name .. ": ", "must be a tensor, got string")
        end
        for _, name in ipairs({"MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss", "BCEWithLogitsLoss",
                               "KLDivLoss", "CrossEntropyLoss", "NLLLoss"}) do
            H.raises(function() nn[name]()("x", "y") end, name .. ": ", "must be a tensor, got string")
        end
        for _, name in ipairs({"MarginRankingLoss", "CosineEmbeddingLoss", "TripletMarginLoss", "GaussianNLLLoss"}) do
            H.raises(function() nn[name]()("x", "y", "z") end, name .. ": ", "must be a tensor, got string")
        end
        -- the other messages too, otherwise the same
        H.raises(function() nn.Linear(3, 2)(ordo.zeros(4, 5)) end,
                 "Linear: input of shape 4x5 does not match weight 2x3 (expected a last dim of 3)")
        H.raises(function() nn.LayerNorm(3)(ordo.zeros(4, 5)) end,
                 "LayerNorm: input of shape 4x5 does not end in the normalized shape 3")
        H.raises(function() nn.Embedding(3, 2)(ordo.zeros(4)) end,
                 "Embedding: indices must be int64 or int32 (from 1), got float32")
        H.raises(function() nn.MSELoss()(ordo.zeros(4, 5), ordo.zeros(3)) end, "MSELoss: ")
        H.raises(function() nn.Dropout(0.5)(ordo.zeros({2}, "int32")) end,
                 "Dropout: input must be float32 or float64, got int32")
        H.raises(function() nn.ReflectionPad1d(3)(ordo.zeros(1, 2)) end, "ReflectionPad1d: reflect padding of 3 and 3")
        H.raises(function() nn.CrossEntropyLoss()(ordo.zeros(3), ordo.tensor(4, "int64")):item() end,
                 "CrossEntropyLoss")
        H.raises(function() nn.CrossEntropyLoss()(ordo.randn(2, 3), ordo.randn(2)) end,
                 "CrossEntropyLoss: target of float32 of shape 2: class indices must be int64")
        -- a dim out of range, checked by the tensor method a module calls, also names the module
        local x2 = ordo.randn(2, 3)
        H.raises(function() nn.Softmax(3)(x2) end, "Softmax: dim 3 out of range for a 2-d tensor of shape 2x3")
        H.raises(function() nn.LogSoftmax(-3)(x2) end, "LogSoftmax: dim -3 out of range")
        H.raises(function() nn.Flatten(3)(x2) end, "Flatten: dim 3 out of range")
        H.raises(function() nn.Flatten(2, 1)(x2) end, "Flatten: start_dim 2 comes after end_dim 1 in a tensor of shape 2x3")
        assert.same({2, 3}, nn.Flatten()(x2):shape())
        assert.same({6}, nn.Flatten(1)(x2):shape())
        -- the functional forms keep their own names
        H.raises(function() F.linear(ordo.zeros(4, 5), ordo.zeros(2, 3)) end, "linear: input of shape 4x5")
        H.raises(function() F.mse_loss("x", ordo.zeros(2)) end, "mse_loss: input must be a tensor")
        H.raises(function() F.relu("x") end, "relu: input must be a tensor")
        H.raises(function() F.pad(ordo.zeros(1, 2), {3, 3}, {mode = "reflect"}) end, "pad: reflect padding of 3")
        H.raises(function() F.embedding(ordo.zeros(4), ordo.zeros(3, 2)) end, "embedding: indices must be int64")
    end)

    it("a module prints the options that change what it computes (tostring)", function()
        -- before: each of these printed as if made with the defaults (MaxPool2d's padding, Embedding's
        -- padding_idx, Softmax's dim, a padding value, an RNN's relu, no bias, no affine were left out)
        local cases = {
            {nn.MaxPool2d(3, {stride = 1, padding = 1}), "MaxPool2d(kernel 3x3, stride 1x1, padding 1x1)"},
            {nn.MaxPool1d(3, {stride = 1, padding = 1}), "MaxPool1d(kernel 3, stride 1, padding 1)"},
            {nn.Embedding(10, 3, {padding_idx = 2}), "Embedding(10, 3, padding_idx = 2)"},
            {nn.Embedding(10, 3), "Embedding(10, 3)"},
            {nn.Softmax(2), "Softmax(dim = 2)"}, {nn.LogSoftmax(-1), "LogSoftmax(dim = -1)"},
            {nn.Unflatten(2, {2, 3}), "Unflatten(2, 2x3)"},
            {nn.ConstantPad1d(2, 3.5), "ConstantPad1d(2, 2, value = 3.5)"}, {nn.ZeroPad2d(1), "ZeroPad2d(1, 1, 1, 1)"},
            {nn.BatchNorm1d(3, {affine = false, track_running_stats = false}),
             "BatchNorm1d(3, eps = 1e-05, momentum = 0.1, no affine, no running stats)"},
            {nn.LayerNorm(4, {elementwise_affine = false}), "LayerNorm(4, eps = 1e-05, no affine)"},
            {nn.LayerNorm(4, {bias = false}), "LayerNorm(4, eps = 1e-05, no bias)"},
            -- (GroupNorm's and RMSNorm's missing affine printed as the defaults')
            {nn.GroupNorm(2, 4, {affine = false}), "GroupNorm(2 groups, 4 channels, eps = 1e-05, no affine)"},
            {nn.GroupNorm(2, 4), "GroupNorm(2 groups, 4 channels, eps = 1e-05)"},
            {nn.RMSNorm(4, {elementwise_affine = false}), "RMSNorm(4, eps = None, no affine)"},
            {nn.RMSNorm(4, {eps = 1e-6}), "RMSNorm(4, eps = 1e-06)"},
            -- (Fold's and Unfold's stride, padding and dilation were left out)
            {nn.Fold({4, 5}, 2, {stride = 2, padding = 1}), "Fold(output 4x5, kernel 2x2, stride 2x2, padding 1x1)"},
            {nn.Unfold(2, {stride = {1, 2}, dilation = 2}), "Unfold(kernel 2x2, stride 1x2, dilation 2x2)"},
            {nn.Unfold(3), "Unfold(kernel 3x3)"},
            {nn.RNN(2, 3, {nonlinearity = "relu"}), "RNN(2 -> 3, 1 layer, relu)"},
            {nn.GRU(2, 3, {bias = false}), "GRU(2 -> 3, 1 layer, no bias)"},
            {nn.GRUCell(2, 3, {bias = false}), "GRUCell(2 -> 3, no bias)"},
            {nn.LSTMCell(2, 3, {bias = false}), "LSTMCell(2 -> 3, no bias)"},
            {nn.RNNCell(2, 3, {bias = false}), "RNNCell(2 -> 3, tanh, no bias)"},
        }
        cases[#cases + 1] = {nn.AvgPool2d(2, {padding = 1, count_include_pad = false}),
                             "AvgPool2d(kernel 2x2, stride 2x2, padding 1x1, count_include_pad = false)"}
        for _, c in ipairs(cases) do assert.equals(c[2], tostring(c[1])) end
        -- a user's extra_repr that gives nothing shows nothing; one that gives a table says so (a bare Lua error)
        local A = nn.Module:extend("ReprNil")
        function A:extra_repr() return nil end
        assert.equals("ReprNil", tostring(A()))
        local B = nn.Module:extend("ReprTable")
        function B:extra_repr() return {} end
        H.raises(function() return tostring(B()) end, "ReprTable: extra_repr must return a string, got table")
        assert.matches("(1): ReprNil", tostring(nn.Sequential(A())), 1, true)
        -- Softmax's dim is checked when the module is made (it raised at the first forward)
        H.raises(function() nn.Softmax("x") end, 'Softmax: dim must be an integer, got "x"')
        H.raises(function() nn.LogSoftmax(1.5) end, "LogSoftmax: dim must be an integer, got 1.5")
        -- Unflatten keeps its own copy of the sizes
        local sizes = {2, 3}
        local u = nn.Unflatten(2, sizes)
        sizes[2] = 5
        assert.same({4, 2, 3}, u(ordo.zeros(4, 6)):shape())
    end)

    it("a class called with more arguments than its init takes raises (Torch's TypeError), as a forward does",
       function()
        -- before: nn.ELU(1, true) (Torch's inplace) and nn.Linear(2, 3, {}, x) dropped the extra one unseen
        H.raises(function() nn.ELU(1, true) end, "ELU: takes 1 argument, got 2")
        H.raises(function() nn.LeakyReLU(0.1, true) end, "LeakyReLU: takes 1 argument, got 2")
        H.raises(function() nn.Hardtanh(-1, 1, true) end, "Hardtanh: takes 2 arguments, got 3")
        H.raises(function() nn.Softmax(1, 2) end, "Softmax: takes 1 argument, got 2")
        H.raises(function() nn.Linear(2, 3, {}, 5) end, "Linear: takes 3 arguments, got 4")
        H.raises(function() nn.Conv2d(1, 2, 3, {}, 1) end, "Conv2d: takes 4 arguments, got 5")
        H.raises(function() nn.MSELoss({}, 1) end, "MSELoss: takes 1 argument, got 2")
        H.raises(function() nn.LSTM(1, 2, {}, 3) end, "LSTM: takes 3 arguments, got 4")
        H.raises(function() nn.ZeroPad2d(1, 2) end, "ZeroPad2d: takes 1 argument, got 2")
        -- trailing nils are no arguments; vararg inits (Sequential, a user's init(self, ...)) take any number
        assert.equals(2, #nn.Linear(2, 3, nil, nil):parameters())
        assert.equals(2, #nn.Sequential(nn.ReLU(), nn.Tanh()):children())
        H.raises(function() nn.ReLU(true) end, "ReLU: takes no options, got boolean")
        local Pair = nn.Module:extend("ArgPair")
        function Pair:init(a, b) self.a, self.b = a, b end
        H.raises(function() Pair(1, 2, 3) end, "ArgPair: takes 2 arguments, got 3")
        assert.equals(2, Pair(1, 2).b)
        local Any = nn.Module:extend("ArgAny")
        function Any:init(...) self.n = select("#", ...) end
        assert.equals(4, Any(1, 2, 3, 4).n)
        -- flags that were taken by truthiness: batch_first = 1 read the batch as the time steps, freeze = 0 froze
        H.raises(function() nn.LSTM(3, 4, {batch_first = 1}) end, "LSTM: batch_first must be a boolean, got number")
        H.raises(function() nn.GRU(3, 4, {batch_first = "yes"}) end, "GRU: batch_first must be a boolean")
        H.raises(function() nn.Embedding.from_pretrained(ordo.zeros(3, 2), {freeze = 0}) end,
                 "Embedding.from_pretrained: freeze must be a boolean, got number")
        -- methods that take nothing: m:eval(false) evaluated; Torch's m:parameters(false) (recurse) listed all,
        -- now only the module's own (Torch's recurse = false)
        local m = nn.Sequential(nn.Linear(2, 2))
        H.raises(function() m:eval(false) end, "eval: takes no arguments, got boolean")
        assert.is_true(m.training)
        assert.same({}, m:parameters(false))
        assert.equals(2, #m:parameters(true))
        assert.equals(2, #m:get(1):parameters(false))
        assert.same({"weight", "bias"}, {m:get(1):named_parameters(nil, false)[1].name,
                                         m:get(1):named_parameters(nil, false)[2].name})
        assert.same({}, m:named_parameters("net", false))
        H.raises(function() m:parameters(1) end, "parameters: recurse must be a boolean, got number")
        H.raises(function() m:parameters(true, 1) end, "parameters: takes (recurse), got a further argument 1")
        H.raises(function() m:named_parameters("x", "no") end, "named_parameters: recurse must be a boolean")
        H.raises(function() m:num_parameters(1) end, "num_parameters: takes no arguments, got number")
        assert.equals(6, m:num_parameters())
        assert.is_false(m:eval().training)
        -- buffers(), as Torch's (only named_buffers was there)
        local bn = nn.Sequential(nn.BatchNorm1d(2))
        local bufs, named = bn:buffers(), bn:named_buffers()
        assert.equals(3, #bufs)
        for i, e in ipairs(named) do assert.equals(e.tensor, bufs[i]) end
        assert.same({}, bn:buffers(false))
        assert.equals(3, #bn:get(1):buffers(false))
        assert.same({}, bn:named_buffers(nil, false))
        -- modules, children, named_modules: an argument they do not take is refused, not dropped
        H.raises(function() m:modules(1) end, "modules: takes no arguments, got a further argument 1")
        H.raises(function() m:children(true) end, "children: takes no arguments, got a further argument")
        H.raises(function() m:named_modules("", false) end, "named_modules: takes (prefix), got a further argument")
        assert.equals(2, #m:modules())
        H.raises(function() bn:buffers(0) end, "buffers: recurse must be a boolean, got number")
    end)

    it("Sequential chains modules; parameters are ordered and named", function()
        local m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        local names = {}
        for i, e in ipairs(m:named_parameters()) do names[i] = e.name end
        assert.same({"1.weight", "1.bias", "3.weight", "3.bias"}, names)
        assert.equal(4 * 8 + 8 + 8 * 2 + 2, m:num_parameters())
        assert.same({6, 2}, m(ordo.randn({6, 4})):shape())
        assert.equal(3, m:size())
        assert.matches("Linear%(4 %-> 8%)", tostring(m))
        -- a table of named modules (Torch's OrderedDict) was an empty Sequential, the identity; a hole
        -- dropped every module after it: both raise, and so does ModuleList's
        H.raises(function() nn.Sequential({fc = nn.Linear(4, 2)}) end, "Sequential", "key 'fc'", "as a list")
        H.raises(function() nn.Sequential({nn.Linear(4, 2), nil, nn.ReLU()}) end, "Sequential",
                 "module 2 must be a module, got nil")
        H.raises(function() nn.Sequential({nn.ReLU(), act = nn.ReLU()}) end, "Sequential", "key 'act'")
        H.raises(function() nn.ModuleList({nn.ReLU(), [3] = nn.ReLU()}) end, "ModuleList", "module 2", "nil")
        H.raises(function() nn.ModuleList({head = nn.ReLU()}) end, "ModuleList", "key 'head'", "ModuleDict")
        assert.equal(2, nn.Sequential({nn.ReLU(), nn.Tanh()}):size())
        assert.equal(0, nn.ModuleList({}):size())
    end)

    it("Sequential passes every output of a module on to the next and returns all of the last's (Torch's tuple)", function()
        -- an encoder's mu, logvar into a reparameterisation: only mu went on, logvar was nil
        local Split = nn.Module:extend("Split")
        function Split:forward(h) return h:narrow(2, 1, 3), h:narrow(2, 4, 3) end
        local Join = nn.Module:extend("Join")
        function Join:forward(a, b) return a + b * 10 end
        local x = ordo.arange(12):view(2, 6)
        for _, n in ipairs({2, 3, 4}) do -- (short chains take another path)
            local mods = {Split(), Join()}
            for _ = 3, n do table.insert(mods, 1, nn.Identity()) end
            local y = nn.Sequential(mods)(x)
            assert.same({{30, 41, 52}, {96, 107, 118}}, y:totable())
        end
        local a, b = nn.Sequential(Split())(x)
        assert.same({{3, 4, 5}, {9, 10, 11}}, b:totable())
        a, b = nn.Sequential(nn.Identity(), nn.Identity(), Split())(x)
        assert.same({{0, 1, 2}, {6, 7, 8}}, a:totable())
        assert.same({{3, 4, 5}, {9, 10, 11}}, b:totable())
        local out, h, c = nn.Sequential(nn.LSTM(3, 4))(ordo.randn({5, 2, 3}))
        assert.same({5, 2, 4}, out:shape())
        assert.same({1, 2, 4}, h:shape())
        assert.same({1, 2, 4}, c:shape())
        -- a module given the extra outputs that it does not take says so (Torch's TypeError)
        H.raises(function() nn.Sequential(Split(), nn.Linear(3, 2))(x) end, "Linear: forward takes 1 input, got 2")
        assert.same(x:totable(), nn.Sequential()(x):totable())
    end)

    it("forward hooks and pre-hooks (Torch's register_forward_hook / register_forward_pre_hook)", function()
        ordo.manual_seed(1)
        local enc = nn.Sequential(nn.Linear(4, 2, D), nn.Tanh())
        local model = nn.Sequential(enc, nn.Linear(2, 4, D))
        -- a hook sees the inputs and the output: an autoencoder's codes, kept for a look
        local codes, seen = {}, {}
        local h = enc:register_forward_hook(function(m, inputs, out)
            seen[#seen + 1] = {m, inputs.n, inputs[1]}
            codes[#codes + 1] = out:detach()
        end)
        local x = ordo.randn({5, 4}, D)
        local y = model(x)
        assert.equals(1, #codes)
        assert.is_true(seen[1][1] == enc and seen[1][2] == 1 and seen[1][3] == x)
        assert.same(enc(x):totable(), codes[1]:totable()) -- (the hook ran again here: 2 codes)
        assert.equals(2, #codes)
        h:remove()
        model(x)
        assert.equals(2, #codes)
        -- a value returned replaces the output, and gradients flow through it
        local lin = nn.Linear(2, 1, D)
        local hr = lin:register_forward_hook(function(_, _, out) return out * 2 end)
        lin(ordo.ones({1, 2}, D)):sum():backward()
        assert.same({{2, 2}}, lin.weight.grad:totable())
        hr:remove()
        -- a pre-hook may replace the inputs (a tensor: the one input; a list: all of them)
        local hp = lin:register_forward_pre_hook(function(_, inputs) return inputs[1] * 0 end)
        assert.same(lin.bias:totable(), lin(ordo.randn({1, 2}, D)):view(-1):totable())
        hp:remove()
        hp = lin:register_forward_pre_hook(function(_, inputs) return {inputs[1]:zero_()} end)
        assert.same(lin.bias:totable(), lin(ordo.randn({1, 2}, D)):view(-1):totable())
        hp:remove()
        -- several outputs (an LSTM's out, h, c) are passed on, and kept when the hook returns nothing
        local lstm = nn.LSTM(3, 4, D)
        local n
        lstm:register_forward_hook(function(_, _, ...) n = select("#", ...) end)
        local o, hn, cn = lstm(ordo.randn({5, 2, 3}, D))
        assert.equals(3, n)
        assert.same({1, 2, 4}, cn:shape())
        assert.same({5, 2, 4}, o:shape())
        assert.same({1, 2, 4}, hn:shape())
        -- bad hooks raise, naming them
        H.raises(function() lin:register_forward_hook(3) end, "register_forward_hook", "expected a function")
        H.raises(function() lin:register_forward_hook(print, {prepend = true}) end, "register_forward_hook",
                 "further table")
        H.raises(function() lin.register_forward_pre_hook(print) end, "expected a module as self")
        lin:register_forward_pre_hook(function() return 3 end)
        H.raises(function() lin(ordo.ones({1, 2}, D)) end, "Linear: a forward pre-hook returned number")
        assert.same({5, 4}, y:shape())
    end)

    it("a user module from Module:extend", function()
        local Net = nn.Module:extend("Net")
        function Net:init(h)
            self.fc1 = self:add_module("fc1", nn.Linear(3, h))
            self.fc2 = self:add_module("fc2", nn.Linear(h, 1))
            self:register_parameter("scale", ordo.ones({1}))
        end
        function Net:forward(x) return self.fc2(self.fc1(x):tanh()) * self.scale end
        local net = Net(5)
        assert.equal(5, #net:parameters())
        local out = net(ordo.randn({2, 3}))
        out:sum():backward()
        for _, p in ipairs(net:parameters()) do assert.is_true(ordo.is_tensor(p.grad)) end
        net:zero_grad()
        for _, p in ipairs(net:parameters()) do assert.is_nil(p.grad) end
    end)

    it("register_parameter / register_buffer refuse a name in use (the other kind, a child, a method)", function()
        local function make(init)
            local C = nn.Module:extend("Slots")
            C.init = init
            return C()
        end
        -- a parameter and a buffer of one name were one field listed twice in state_dict
        H.raises(function() make(function(self)
            self:register_parameter("w", ordo.zeros({2}))
            self:register_buffer("w", ordo.ones({3}))
        end) end, "register_buffer: w is already a parameter")
        H.raises(function() make(function(self)
            self:register_buffer("w", ordo.zeros({2}))
            self:register_parameter("w", ordo.ones({3}))
        end) end, "register_parameter: w is already a buffer")
        H.raises(function() make(function(self)
            self.lin = nn.Linear(1, 1)
            self:register_buffer("lin", ordo.ones({3}))
        end) end, "register_buffer: lin is already a child module")
        -- a method's name shadowed it: m:parameters() then called a tensor
        H.raises(function() make(function(self) self:register_parameter("parameters", ordo.ones({1})) end) end,
                 "register_parameter: parameters is the name of a method")
        H.raises(function() make(function(self) self:register_buffer("training", ordo.ones({1})) end) end,
                 "register_buffer: training is the name")
        -- so did a child's: m.forward = nn.ReLU() made m(x) call the ReLU with m, and
        -- m:add_module("parameters", ...) broke m:parameters()
        H.raises(function() make(function(self) self.forward = nn.ReLU() end) end,
                 "forward is the name of a method", "would hide it")
        H.raises(function() local l = nn.Linear(1, 1); l:add_module("parameters", nn.ReLU()) end,
                 "add_module: parameters is the name of a method")
        H.raises(function() nn.Module():add_module("training", nn.ReLU()) end, "add_module: training is the name")
        local holder = nn.Module()
        holder.head = nn.Linear(1, 1)
        assert.equals(2, #holder:parameters())
        H.raises(function() make(function(self) self:register_parameter("a.b", ordo.ones({1})) end) end,
                 "without white space or dots", '"a.b"')
        -- registering again under its own kind replaces; a removed buffer's name may become a parameter's
        local m = make(function(self)
            self:register_parameter("w", ordo.zeros({2}))
            self:register_parameter("w", ordo.ones({3}))
            self:register_buffer("b", ordo.zeros({2}))
            self.b = nil
            self:register_parameter("b", ordo.ones({4}))
        end)
        local names = {}
        for _, e in ipairs(m:state_dict()) do names[#names + 1] = e.name end
        assert.same({"w", "b"}, names)
        assert.same({3}, m.w:shape())
        H.raises(function() make(function(self) self:register_parameter("i", ordo.zeros({2}, {dtype = "int64"})) end) end,
                 "register_parameter: i must be a float tensor", "int64")
    end)

    it("m.training takes a boolean only: a module or anything else assigned to it raises", function()
        -- before: m.training = nn.ReLU() (or 0, or "no") was taken silently, and a truthy non-boolean trained
        local x = ordo.randn({4, 3})
        local made = {Linear = nn.Linear(3, 3), Sequential = nn.Sequential(nn.Linear(3, 3)),
                      ModuleList = nn.ModuleList({nn.ReLU()}), BatchNorm1d = nn.BatchNorm1d(3),
                      Dropout = nn.Dropout(0.5)}
        for _, cls in ipairs({"Linear", "Sequential", "ModuleList", "BatchNorm1d", "Dropout"}) do
            local m = made[cls]
            for _, c in ipairs({{nn.ReLU(), "nn.ReLU"}, {0, "number"}, {"no", "string"},
                                {ordo.zeros({1}), "ordo.Tensor"}}) do
                H.raises(function() m.training = c[1] end,
                         cls .. ": training must be a boolean (or use m:train(mode), m:eval())", "got " .. c[2])
                assert.is_true(m.training)
            end
            H.raises(function() m.training = nil end, cls .. ": training must be a boolean", "got nil")
            assert.is_true(m.training)
            m.training = false
            assert.is_false(m.training)
            m.training = true
            assert.is_true(m.training)
            m:eval()
            assert.is_false(m.training)
            m:train()
            assert.is_true(m.training)
        end
        -- a Dropout set to eval by assignment is the identity, as by eval()
        local d = nn.Dropout(0.5)
        d.training = false
        assert.same(x:totable(), d(x):totable())
        -- children by assignment still register, and a user's module may set training in its own methods
        local Net = nn.Module:extend("TrainNet")
        function Net:init() self.lin = nn.Linear(3, 2); self.training = false end
        function Net:forward(t) return self.lin(t) end
        local n = Net()
        assert.is_false(n.training)
        assert.equals(2, #n:parameters())
        n:train()
        assert.is_true(n.training and n.lin.training)
        H.raises(function() n.training = nn.Linear(1, 1) end, "TrainNet: training must be a boolean", "got nn.Linear")
        assert.equals(2, #n:parameters())
        -- nor a buffer, a parameter or a ModuleDict entry named training
        H.raises(function() nn.ModuleDict({training = nn.ReLU()}) end, "cannot use training")
        -- the REPL still completes m.training (and a module's methods)
        local repl = require "ordo.repl"
        rawset(_G, "spec_module", nn.Linear(2, 2))
        assert.same({"spec_module.train", "spec_module.trainable_parameters", "spec_module.training"},
                    repl.complete("spec_module.tr"))
        assert.same({"spec_module:eval"}, repl.complete("spec_module:ev"))
        rawset(_G, "spec_module", nil)
    end)

    it("a value that is not a tensor or a module assigned over a parameter, buffer or child raises when listed", function()
        -- (m.weight = 5, a plain assignment, dropped the parameter from m:parameters() without a word: an
        -- optimiser never trained it; Torch raises "cannot assign 'int' as parameter 'weight'")
        local l = nn.Linear(2, 2)
        l.weight = 5
        H.raises(function() l:parameters() end, "Linear: the parameter weight was assigned number (expected a tensor")
        H.raises(function() nn.Sequential(l):state_dict() end, "the parameter 1.weight was assigned number")
        l.weight = nil -- (nil, or false, removes it, as Torch's None)
        assert.equals(1, #l:parameters())
        local bn = nn.BatchNorm1d(2)
        bn.running_mean = "x"
        H.raises(function() bn:state_dict() end, "BatchNorm1d: the buffer running_mean was assigned string")
        bn.running_mean = false
        assert.equals(4, #bn:state_dict()) -- (running_var, num_batches_tracked and the two parameters)
        local m = nn.Module()
        m.c = nn.Linear(1, 1)
        m.c = {}
        H.raises(function() m:parameters() end, "Module: the child module c was assigned table (expected a module")
        m.c = ordo.zeros(1)
        H.raises(function() m:parameters() end, "the child module c was assigned a tensor")
        m.c = nil
        assert.equals(0, #m:parameters())
        local s = nn.Sequential(nn.Linear(1, 1), nn.ReLU())
        s[1] = 7
        H.raises(function() s:parameters() end, "Sequential: the child module 1 was assigned number")
    end)

    it("a plain tensor assigned over a parameter raises when the parameters are listed (it never trained)", function()
        local l = nn.Linear(2, 2)
        l.weight = ordo.randn(2, 2) -- (as Torch's TypeError: the weight was listed, and silently frozen)
        for _, f in ipairs({"parameters", "state_dict", "zero_grad"}) do
            H.raises(function() l[f](l) end, "Linear: the parameter weight was assigned a tensor that is not a parameter",
                     'm:register_parameter("weight", t)', "m.weight:copy_(t)")
        end
        H.raises(function() nn.Sequential(nn.ReLU(), l):parameters() end, "the parameter 2.weight was assigned")
        l:register_parameter("weight", l.weight)
        assert.equals(2, #l:trainable_parameters())
        -- tied weights (another parameter, frozen or not), frozen and moved parameters are parameters still
        local emb = nn.Embedding(5, 2):requires_grad_(false)
        local head = nn.Linear(2, 5, {bias = false})
        head.weight = emb.weight
        local m = nn.Sequential(emb, head)
        assert.equals(1, #m:parameters())
        m:to("float64")
        assert.equals(m:get(1).weight, m:get(2).weight)
        assert.is_false(m:get(2).weight:needs_grad())
        assert.equals(1, #m:state_dict())
        local f = nn.Linear(2, 2):requires_grad_(false):double()
        assert.equals(2, #f:parameters())
        local g = nn.Linear(2, 2)
        g.weight = ordo.randn(2, 2)
        g:to("float64") -- moved, still not a parameter
        H.raises(function() g:parameters() end, "the parameter weight was assigned")
    end)

    it("register_parameter of another module's parameter shares that very tensor: listed once, one gradient", function()
        local a = nn.Linear(2, 2)
        local T = nn.Module:extend("SharesWeight")
        function T:init()
            self.a = a
            self:register_parameter("w", a.weight) -- (it was a new tensor on the same storage)
        end
        function T:forward(x) return self.a(x) + x:matmul(self.w:t()) end
        local t = T()
        assert.equals(a.weight, t.w)
        assert.equals(2, #t:parameters())
        t(ordo.ones(1, 2)):sum():backward()
        assert.same({{2, 2}, {2, 2}}, a.weight.grad:totable()) -- both uses, one gradient
        -- a tensor that is not a parameter yet becomes a new leaf: the caller's tensor is left alone
        local plain = ordo.ones({2})
        local U = nn.Module:extend("FromPlain")
        function U:init() self:register_parameter("p", plain) end
        local u = U()
        assert.is_false(plain:needs_grad())
        assert.is_true(u.p:needs_grad())
    end)

    it("register_buffer(name, t, false): a non-persistent buffer moves with the module but is not saved", function()
        local C = nn.Module:extend("Masked")
        function C:init()
            self.lin = nn.Linear(3, 3)
            self:register_buffer("scale", ordo.ones({3}))
            self:register_buffer("mask", ordo.tensor({1, 0, 1}), false)
        end
        function C:forward(x) return self.lin(x) * self.mask * self.scale end
        local outer = nn.Sequential(C())
        local function names(list)
            local r = {}
            for _, e in ipairs(list) do r[#r + 1] = e.name end
            return r
        end
        assert.same({"1.lin.weight", "1.lin.bias", "1.scale"}, names(outer:state_dict()))
        assert.same({"1.scale", "1.mask"}, names(outer:named_buffers()))
        outer:double()
        assert.equals("float64", outer:get(1).mask:dtype())
        -- save and load leave it out (and do not ask for it)
        local path = os.tmpname()
        outer:save(path)
        local loaded = ordo.load(path)
        os.remove(path)
        assert.is_nil(loaded["1.mask"])
        local other = nn.Sequential(C()):double()
        other:load_state_dict(loaded)
        local _, unexpected = other:load_state_dict({["1.mask"] = ordo.ones(3)}, {strict = false})
        assert.same({"1.mask"}, unexpected)
        -- registered again as persistent, it is saved
        outer:get(1):register_buffer("mask", ordo.ones({3}, D))
        assert.same({"1.lin.weight", "1.lin.bias", "1.scale", "1.mask"}, names(outer:state_dict()))
        H.raises(function() outer:get(1):register_buffer("m2", ordo.ones(3), "no") end,
                 "register_buffer: persistent must be a boolean, got string")
    end)

    it("a module assigned to a field is a child, as in Torch; other fields are not registered", function()
        local Net = nn.Module:extend("AssignNet")
        function Net:init()
            self.encoder = nn.Linear(3, 4)
            self.decoder = nn.Sequential(nn.Tanh(), nn.Linear(4, 2))
            self.sizes = {3, 4, 2}         -- a plain table
            self.mask = ordo.ones({4})     -- a tensor: not a parameter without register_parameter
            self.encoder = nn.Linear(3, 4) -- assigned again: still one child, in its first place
        end
        function Net:forward(x) return self.decoder(self.encoder(x) * self.mask) end
        local net = Net()
        local names = {}
        for _, np in ipairs(net:named_parameters()) do names[#names + 1] = np.name end
        assert.same({"encoder.weight", "encoder.bias", "decoder.2.weight", "decoder.2.bias"}, names)
        assert.same({"encoder", "decoder"}, {net:children()[1][1], net:children()[2][1]})
        -- Torch's named_children: {name =, module =}, as named_modules
        local nc = net:named_children()
        assert.same({"encoder", "decoder"}, {nc[1].name, nc[2].name})
        assert.is_true(nc[1].module == net:children()[1][2])
        assert.equals("net.decoder", net:named_children("net")[2].name)
        H.raises(function() net:named_children(3) end, "named_children", "prefix must be a string")
        net:eval()
        assert.is_false(net.decoder.training)
        local path = os.tmpname()
        net:save(path)
        local other = Net()
        other:load(path)
        os.remove(path)
        local x = ordo.randn({2, 3})
        assert.same(net(x):totable(), other(x):totable())
    end)

    it("activations and Flatten", function()
        local x = ordo.tensor({{-1, 2}, {3, -4}})
        assert.same({{0, 2}, {3, 0}}, nn.ReLU()(x):totable())
        close(nn.Tanh()(x):reshape(-1):totable(), x:tanh():reshape(-1):totable())
        close(nn.Sigmoid()(x):reshape(-1):totable(), x:sigmoid():reshape(-1):totable())
        assert.same({2, 12}, nn.Flatten()(ordo.zeros({2, 3, 4})):shape())
        -- start and end dims, as Torch's (counted from 1), and t:flatten's
        local z = ordo.arange(120):view(2, 3, 4, 5)
        assert.same({6, 4, 5}, nn.Flatten(1, 2)(z):shape())
        assert.same({2, 12, 5}, nn.Flatten(2, -2)(z):shape())
        assert.same({2, 3, 20}, z:flatten(-2):shape())
        assert.same({120}, z:flatten():shape())
        assert.same(z:reshape(2, 12, 5):totable(), z:flatten(2, 3):totable())
        assert.same({1}, ordo.tensor(7):flatten():shape())
        assert.equals("Flatten(2, -1)", tostring(nn.Flatten()))
        H.raises(function() nn.Flatten(1.5) end, "Flatten", "integers")
        H.raises(function() nn.Flatten()(ordo.zeros({3})) end, "Flatten: dim 2", "1-d")
        H.raises(function() nn.Flatten()(3) end, "Flatten", "input must be a tensor")
    end)

    it("functional layers and losses name the argument that is not a tensor, or the bad option", function()
        for _, name in ipairs({"relu", "tanh", "sigmoid", "silu", "gelu", "softplus", "leaky_relu", "elu", "selu",
                               "hardtanh", "relu6", "hardsigmoid", "hardswish", "mish", "softsign", "softmax",
                               "log_softmax", "logsigmoid"}) do
            H.raises(function() F[name](3) end, name .. ": input must be a tensor, got number")
        end
        local x = ordo.randn({3, 4})
        H.raises(function() F.l1_loss(x, x, 2) end, "l1_loss", "options must be a table")
        H.raises(function() F.mse_loss(x, x, {reduce = "sum"}) end, "mse_loss", "unknown option 'reduce'")
        H.raises(function() F.binary_cross_entropy_with_logits(x, x, {reductio = "sum"}) end, "unknown option")
        -- a loss module's reduction is checked when it is made, not at its first call
        H.raises(function() nn.CrossEntropyLoss({reduction = "avg"}) end,
                 "CrossEntropyLoss: reduction must be 'mean', 'sum' or 'none', got avg")
        H.raises(function() nn.TripletMarginLoss({reduction = 1}) end, "TripletMarginLoss: reduction", "got number")
        H.raises(function() nn.MSELoss({reduction = "batchmean"}) end, "MSELoss: reduction", "got batchmean")
        assert.equals("batchmean", nn.KLDivLoss({reduction = "batchmean"}).reduction)
        H.raises(function() F.margin_ranking_loss(x, x, {1}) end, "margin_ranking_loss", "target must be a tensor")
        H.raises(function() F.cosine_embedding_loss(x, x, 1) end, "cosine_embedding_loss", "target")
        H.raises(function() F.layer_norm(x) end, "layer_norm", "normalized_shape", "nil")
        close(F.layer_norm(x, 4):totable(), F.layer_norm(x, {4}):totable()) -- a size alone, as Torch
        H.raises(function() F.pad(ordo.zeros({1, 1, 4}), {1e15, 1}, {mode = "replicate"}) end, "out of memory")
        -- named after pad, not the op inside that failed
        H.raises(function() F.pad(ordo.zeros({1, 1, 4}), {1e15, 1}, {mode = "replicate"}) end, "pad: arange: out of memory")
        H.raises(function() F.pad(ordo.zeros({1, 1, 4}), {1e15, 1}) end, "pad: full: out of memory")
        H.raises(function() nn.save(3, "x") end, "nn.save", "module", "number")
        H.raises(function() nn.load({}, "x") end, "nn.load", "module", "table")
        H.raises(function() nn.init.normal_(3) end, "init.normal_", "tensor")
        H.raises(function() nn.init.zeros_(nil) end, "init.zeros_", "tensor")
        -- the tensor method's errors are named after the initialiser (they were "fill_: ...", "uniform_: ...")
        local w = ordo.zeros(4, 3)
        H.raises(function() nn.init.constant_(w, "x") end, "init.constant_: fill_: expected a number, got string")
        H.raises(function() nn.init.uniform_(w, 1, 0) end, "init.uniform_: uniform_: expected finite numbers low <= high")
        H.raises(function() nn.init.normal_(w, 0, -1) end, "init.normal_: normal_: expected a finite mean")
        H.raises(function() nn.init.constant_(ordo.zeros({2}, "uint8"), 300) end, "init.constant_: fill_:", "300")
        assert.is_true(ordo.is_grad_enabled()) -- (grad mode restored after the error)
        assert.same({{1, 1, 1}}, nn.init.ones_(ordo.zeros(1, 3)):totable())
        H.raises(function() nn.init.xavier_uniform_("w") end, "init", "tensor")
        H.raises(function() nn.init.kaiming_uniform_(ordo.empty({2, 2}), "a") end, "kaiming_uniform_", "number")
        -- m.parameters() for m:parameters(): the error says how to call it
        local m = nn.Linear(2, 2)
        local opt = optim.SGD(m:parameters(), {lr = 0.1})
        local sched = optim.lr_scheduler.StepLR(opt, {step_size = 2})
        H.raises(function() m.parameters() end, "parameters: expected a module as self, got nil", "m:parameters")
        H.raises(function() m.to("float64") end, "to: expected a module as self, got string")
        H.raises(function() nn.Linear.zero_grad(nn.Linear) end, "zero_grad", "module as self")
        H.raises(function() opt.step() end, "step: expected an optimiser as self", "opt:step")
        H.raises(function() opt.zero_grad() end, "zero_grad: expected an optimiser as self")
        H.raises(function() sched.step() end, "step: expected a scheduler as self", "sched:step")
        H.raises(function() ordo.Tensor.float({}) end, "float: expected a tensor as self")
        assert.is_true(nn.is_module(nn.ReLU()))
        assert.is_false(nn.is_module(nn.ReLU))
        assert.is_false(nn.is_module({parameters = function() end}))
    end)

    it("Dropout zeroes about p of the elements in training, scales the rest, and is the identity in eval", function()
        local d = nn.Dropout(0.25)
        local y = d(ordo.ones({10000}))
        local zeros = y:eq(0):sum():item()
        assert.is_true(zeros > 2200 and zeros < 2800, "zeros: " .. zeros)
        close(y:max():item(), 1 / 0.75, 1e-6)
        d:eval()
        assert.equal(10000, d(ordo.ones({10000})):sum():item())
        H.raises(function() nn.Dropout(1.5) end, "Dropout: p must be a number in [0, 1], got 1.5")
    end)

    it("dropout with p = 1 gives zeros (as Torch) with a zero gradient; training must be a boolean", function()
        local x = ordo.tensor({{1, -2}, {3, 4}}, D):requires_grad_()
        for _, y in ipairs({nn.Dropout(1)(x), F.dropout(x, 1), F.dropout(x, 1, true)}) do
            assert.same({{0, 0}, {0, 0}}, y:totable())
        end
        F.dropout(x, 1):sum():backward()
        assert.same({{0, 0}, {0, 0}}, x.grad:totable())
        assert.same({{1, -2}, {3, 4}}, F.dropout(x, 1, false):totable())
        local d = nn.Dropout(1)
        d:eval()
        assert.same({{1, -2}, {3, 4}}, d(x):totable())
        assert.equals(0, nn.Dropout2d(1)(ordo.ones({2, 3, 4, 4})):abs():sum():item())
        -- Torch's falsy 0 was taken as true here (a Lua 0 is truthy): a boolean is asked for
        H.raises(function() return F.dropout(x, 0.5, 0) end, "dropout: training must be true or false, got number")
        H.raises(function() return F.dropout2d(ordo.ones({1, 2, 2, 2}), 0.5, "no") end,
                 "dropout2d: training must be true or false, got string")
        -- Torch's inplace = True was ignored, leaving x as it was: refused
        H.raises(function() return nn.Dropout(0.5, true) end, "Dropout: takes only p, got boolean too")
        H.raises(function() return nn.Dropout2d(0.5, true) end, "Dropout2d: takes only p")
        H.raises(function() return F.dropout(x, 0.5, true, true) end, "dropout: in-place dropout is not supported")
        assert.same({2, 2}, F.dropout(x, 0.5, true, false):shape())
    end)

    it("the activations refuse Torch's inplace = true (it was ignored: x kept its values) and take false", function()
        local x = ordo.tensor({-1, 2})
        local cases = {
            {"relu", function(v) return F.relu(x, v) end}, {"relu6", function(v) return F.relu6(x, v) end},
            {"selu", function(v) return F.selu(x, v) end}, {"silu", function(v) return F.silu(x, v) end},
            {"mish", function(v) return F.mish(x, v) end}, {"hardswish", function(v) return F.hardswish(x, v) end},
            {"hardsigmoid", function(v) return F.hardsigmoid(x, v) end},
            {"elu", function(v) return F.elu(x, 1, v) end}, {"leaky_relu", function(v) return F.leaky_relu(x, 0.1, v) end},
            {"hardtanh", function(v) return F.hardtanh(x, -1, 1, v) end},
        }
        for _, c in ipairs(cases) do
            H.raises(function() return c[2](true) end, c[1] .. ": in-place is not supported (got inplace true)")
            H.raises(function() return c[2](1) end, c[1] .. ": in-place is not supported")
            assert.same({2}, c[2](false):shape())
        end
        assert.same({-1, 2}, x:totable())
        assert.same({0, 2}, F.relu(x, false):totable())
        -- a further argument (one past the function's own, where the calling module's name goes) was
        -- dropped unseen: it raises
        local w = ordo.randn({3, 2})
        for _, c in ipairs({
            {"relu", function() return F.relu(x, false, 3) end},
            {"linear", function() return F.linear(x, w, nil, 5) end},
            {"gelu", function() return F.gelu(x, "none", true) end},
            {"layer_norm", function() return F.layer_norm(x, {2}, nil, nil, 1e-5, 7) end},
            {"mse_loss", function() return F.mse_loss(x, x, nil, {}) end},
            {"dropout", function() return F.dropout(x, 0.5, true, false, 0) end},
        }) do
            H.raises(c[2], c[1] .. ": got a further argument")
        end
        assert.same({2}, nn.ReLU()(x):shape()) -- (the modules pass their names there)
        assert.same({3}, nn.Linear(2, 3)(x):shape())
        -- Torch's positional reduction, a string there, was taken for the module's name: the loss
        -- came back a mean where a sum was asked for
        local p, y = ordo.tensor({0.2, 0.7}), ordo.tensor({0, 1})
        for _, c in ipairs({
            {"binary_cross_entropy", function() return F.binary_cross_entropy(p, y, nil, "sum") end, "sum"},
            {"mse_loss", function() return F.mse_loss(p, y, nil, "none") end, "none"},
            {"kl_div", function() return F.kl_div(p:log(), y, nil, "batchmean") end, "batchmean"},
            {"cross_entropy", function() return F.cross_entropy(ordo.randn({2, 3}), ordo.tensor({1, 2}, "int64"), nil, "mean") end, "mean"},
            {"soft_margin_loss", function() return F.soft_margin_loss(p, y, nil, "sum") end, "sum"},
        }) do
            H.raises(c[2], c[1] .. ': got a further argument ("' .. c[3] .. '") it does not take (a reduction goes in the options')
        end
        -- and one past that slot (Torch's positional ignore_index, nll_loss(x, y, None, None, -100)) was dropped
        H.raises(function() return F.nll_loss(ordo.randn({2, 3}), ordo.tensor({1, 2}, "int64"), nil, nil, -100) end,
                 "nll_loss: got a further argument (-100) it does not take")
        H.raises(function() return F.mse_loss(p, y, nil, nil, 3) end, "mse_loss: got a further argument (3)")
        H.raises(function() return F.pairwise_distance(p, y, nil, nil, 3) end, "pairwise_distance: got a further argument (3)")
        assert.near(-(math.log(0.8) + math.log(0.7)), F.binary_cross_entropy(p, y, {reduction = "sum"}):item(), 1e-6)
        assert.near(-(math.log(0.8) + math.log(0.7)), nn.BCELoss({reduction = "sum"})(p, y):item(), 1e-6)
        -- in the options' place, Torch's positional weight or reduction: the error says where it goes
        H.raises(function() return F.binary_cross_entropy(p, y, ordo.ones({2})) end,
                 "binary_cross_entropy: options must be a table, got ordo.Tensor (a weight goes in the options")
        H.raises(function() return F.cross_entropy(ordo.randn({2, 3}), ordo.tensor({1, 2}, "int64"), ordo.ones({3})) end,
                 "cross_entropy: options must be a table", "{weight = w}")
        H.raises(function() return F.mse_loss(p, y, "sum") end,
                 'mse_loss: options must be a table, got string (a reduction goes in the options: {reduction = "sum"})')
    end)

    it("Dropout2d zeroes whole channels with probability p in training, scales the rest; identity in eval", function()
        local d = nn.Dropout2d(0.5)
        local y = d(ordo.ones({50, 40, 3, 2}))
        local per_channel = y:sum(4):sum(3) -- 0 or 6 * 2 for each (n, c)
        local zeros, kept = per_channel:eq(0):sum():item(), per_channel:eq(12):sum():item()
        assert.equals(2000, zeros + kept, "every channel is all zero or all kept")
        assert.is_true(zeros > 850 and zeros < 1150, "zeros: " .. zeros)
        assert.same({3, 2, 2}, F.dropout2d(ordo.ones({3, 2, 2}), 0.5):shape()) -- unbatched C x H x W
        d:eval()
        assert.equals(50 * 40 * 6, d(ordo.ones({50, 40, 3, 2})):sum():item())
        H.raises(function() F.dropout2d(ordo.ones({4, 4}), 0.5) end, "dropout2d", "4-D", "4x4")
        H.raises(function() nn.Dropout2d(-0.5) end, "Dropout2d", "p must be")
    end)

    it("dropout of an integer tensor raises in training (its dtype came out as p made it); eval passes it", function()
        for _, p in ipairs({0.5, 0.3}) do
            H.raises(function() return F.dropout(ordo.tensor({1, 2}, "int32"), p) end,
                     "dropout: input must be float32 or float64, got int32")
            H.raises(function() return F.dropout2d(ordo.ones({1, 2, 2, 2}, "uint8"), p) end, "dropout2d", "uint8")
        end
        H.raises(function() return F.dropout("x", 0.5) end, "dropout: input must be a tensor")
        local i = ordo.tensor({1, 2}, "int64")
        assert.equals(i, F.dropout(i, 0.5, false))
        assert.equals(i, F.dropout(i, 0))
        local d = nn.Dropout(0.5)
        d:eval()
        assert.equals(i, d(i))
    end)

    it("train() and eval() reach every submodule", function()
        local m = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
        m:eval()
        assert.is_false(m:get(2).training)
        m:train()
        assert.is_true(m:get(2).training)
        m:train(false)
        assert.is_false(m:get(2).training)
        -- a mode that is not a boolean raises (train(0) is true in Lua: it trained where eval was meant)
        H.raises(function() m:train(0) end, "train: mode must be a boolean, got number")
        H.raises(function() m:train("eval") end, "train: mode must be a boolean, got string")
        assert.is_false(m.training)
        assert.is_false(m:get(2).training)
    end)

    it("m:zero_grad(false) zeroes each gradient in place (Torch's set_to_none); m:zero_grad() drops them", function()
        local m = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
        m(ordo.ones(4, 2)):sum():backward()
        local g = m:get(1).weight.grad
        m:zero_grad(false)
        assert.equal(g, m:get(1).weight.grad)
        assert.equals(0, g:abs():sum():item())
        assert.equals(0, m:get(2).bias.grad:abs():sum():item())
        m(ordo.ones(4, 2)):sum():backward()
        assert.is_true(m:get(2).bias.grad:item() == 4)
        H.raises(function() m:zero_grad("no") end, "zero_grad: set_to_none must be a boolean, got string")
        m:get(2).bias.grad = 5
        H.raises(function() m:zero_grad(false) end, "zero_grad: the gradient of 2.bias is number")
        m:zero_grad()
        assert.is_nil(m:get(1).weight.grad)
        assert.is_nil(m:get(2).bias.grad)
    end)

    it("CrossEntropyLoss equals -mean log softmax at the targets; gradcheck", function()
        local logits = ordo.tensor({{1, 2, 3}, {1, -1, 0}}, D)
        local y = ordo.tensor({3, 1}, {dtype = "int64"})
        local function lse(r) return math.log(math.exp(r[1]) + math.exp(r[2]) + math.exp(r[3])) end
        local want = ((lse({1, 2, 3}) - 3) + (lse({1, -1, 0}) - 1)) / 2
        close(nn.CrossEntropyLoss()(logits, y):item(), want, 1e-12)
        close(nn.CrossEntropyLoss({reduction = "sum"})(logits, y):item(), 2 * want, 1e-12)
        assert.same({2}, nn.CrossEntropyLoss({reduction = "none"})(logits, y):shape())
        local l = ordo.randn({4, 5}, D):requires_grad()
        local t = ordo.tensor({1, 5, 2, 2}, {dtype = "int64"})
        assert.is_true(ag.gradcheck(function(x) return F.cross_entropy(x, t) end, {l}))
        local ok, err = pcall(F.cross_entropy, l, ordo.tensor({1, 2}, {dtype = "int64"}))
        assert.is_false(ok)
        assert.matches("target of shape 2 does not match input 4x5", err)
        ok, err = pcall(F.cross_entropy, l, ordo.tensor({1, 2, 3, 4}))
        assert.is_false(ok)
        assert.matches("class indices", err)
        -- a class out of range shows when the kernel runs: the loss names it
        -- as its target ("cross_entropy (target): gather: ..."),
        -- in the forward and in the backward, and the engine goes on
        for _, fn in ipairs({"cross_entropy", "nll_loss"}) do
            local bad = ordo.tensor({1, 6, 2, 0}, {dtype = "int64"})
            ok, err = pcall(function() return F[fn](l, bad):item() end)
            assert.is_false(ok)
            assert.matches(fn .. " (target): gather: index 6 out of range for dim 2 of size 5", err, 1, true)
            local x = ordo.randn({4, 5}, D):requires_grad()
            ok, err = pcall(function()
                F[fn](x, bad):backward()
                return x.grad:sum():item()
            end)
            assert.is_false(ok)
            assert.matches(fn .. " (target) backward: scatter_add: index 6 out of range", err, 1, true)
            pcall(ordo.engine.wait_for_all) -- the forward's failure, not yet reported
            ordo.engine.wait_for_all()
            close(F[fn](l, t):item(), F[fn](l, t):item())
        end
    end)

    it("CrossEntropyLoss and NLLLoss with class weights, ignore_index and label smoothing: Torch's formulas", function()
        local logits = ordo.randn({5, 4}, D)
        local y = ordo.tensor({2, 4, 1, 2, 3}, "int64")
        local w = ordo.tensor({0.5, 2, 1, 3}, D)
        local L, Y, W = logits:log_softmax(2):totable(), y:totable(), w:totable()
        -- the plain-Lua loss: per sample (1 - e) w[y] (-logp[y]) + (e / C) sum_c w[c] (-logp[c]), ignored
        -- samples out, "mean" over the kept samples' w[y]
        local function ref(weighted, ignore, e, reduction)
            local total, denom, per = 0, 0, {}
            for i = 1, 5 do
                local wy = weighted and W[Y[i]] or 1
                local v = 0
                if Y[i] ~= ignore then
                    local smooth = 0
                    for c = 1, 4 do smooth = smooth - (weighted and W[c] or 1) * L[i][c] end
                    v = (1 - e) * wy * -L[i][Y[i]] + e / 4 * smooth
                    denom = denom + wy
                end
                per[i] = v
                total = total + v
            end
            if reduction == "none" then return per end
            if reduction == "sum" then return total end
            return total / denom
        end
        for _, weighted in ipairs({false, true}) do
            for _, ignore in ipairs({false, 2}) do
                for _, e in ipairs({0, 0.2}) do
                    for _, red in ipairs({"mean", "sum", "none"}) do
                        local opts = {reduction = red, weight = weighted and w or nil, ignore_index = ignore or nil,
                                      label_smoothing = e}
                        local got = F.cross_entropy(logits, y, opts)
                        local want = ref(weighted, ignore, e, red)
                        if red == "none" then close(got:totable(), want, 1e-12) else close(got:item(), want, 1e-12) end
                        if e == 0 then
                            local o2 = {reduction = red, weight = opts.weight, ignore_index = opts.ignore_index}
                            local nll = F.nll_loss(logits:log_softmax(2), y, o2)
                            if red == "none" then close(nll:totable(), want, 1e-12) else close(nll:item(), want, 1e-12) end
                        end
                    end
                end
            end
        end
        -- an ignored index outside 1..C is fine (never gathered); the modules take the options
        local pad = ordo.tensor({2, -100, 1, 2, -100}, "int64")
        local m = nn.CrossEntropyLoss({ignore_index = -100, weight = w})
        assert.is_true(m(logits, pad):item() == m(logits, pad):item()) -- a number, not NaN
        local x = logits:clone():requires_grad()
        assert.is_true(ag.gradcheck(function(a) return F.cross_entropy(a, y, {weight = w, ignore_index = 2,
                                                                             label_smoothing = 0.1}) end, {x}))
        H.raises(function() F.cross_entropy(logits, y, {weight = ordo.ones({3}, D)}) end, "cross_entropy", "weight",
                 "4 class weights")
        H.raises(function() F.nll_loss(logits, y, {weight = 2}) end, "nll_loss", "weight", "tensor")
        H.raises(function() F.cross_entropy(logits, y, {ignore_index = 1.5}) end, "cross_entropy", "ignore_index")
    end)

    it("NLLLoss and CrossEntropyLoss ignore targets of -100 by default (Torch's ignore_index); another replaces it", function()
        local x = ordo.tensor({{0.2, -1.0, 0.5}, {1.5, 0.3, -0.7}, {0.1, 0.4, -0.2}, {-1, 2, 0}}, D)
        local padded = ordo.tensor({1, -100, 3, -100}, "int64")
        local kept_x = x:index_select(1, ordo.tensor({1, 3}, "int64"))
        local kept_t = ordo.tensor({1, 3}, "int64")
        for _, red in ipairs({"mean", "sum"}) do
            local want = F.cross_entropy(kept_x, kept_t, {reduction = red}):item()
            close(F.cross_entropy(x, padded, {reduction = red}):item(), want)
            close(nn.CrossEntropyLoss({reduction = red})(x, padded):item(), want)
            local wantn = F.nll_loss(kept_x:log_softmax(2), kept_t, {reduction = red}):item()
            close(F.nll_loss(x:log_softmax(2), padded, {reduction = red}):item(), wantn)
            close(nn.NLLLoss({reduction = red})(x:log_softmax(2), padded):item(), wantn)
        end
        local none = F.cross_entropy(x, padded, {reduction = "none"}):totable()
        assert.equals(0, none[2])
        assert.equals(0, none[4])
        -- with weights and label smoothing, the N x C x d form and a gradient that skips the padding
        local w = ordo.tensor({1, 2, 0.5}, D)
        close(F.cross_entropy(x, padded, {weight = w, label_smoothing = 0.1}):item(),
              F.cross_entropy(kept_x, kept_t, {weight = w, label_smoothing = 0.1}):item())
        local seq = x:view(1, 4, 3):permute(1, 3, 2) -- 1 x C x 4
        close(F.cross_entropy(seq, padded:view(1, 4)):item(), F.cross_entropy(kept_x, kept_t):item())
        local xg = x:clone():requires_grad()
        F.cross_entropy(xg, padded):backward()
        assert.same({0, 0, 0}, xg.grad:select(1, 2):totable())
        -- an explicit ignore_index replaces the default: -100 is then out of range, as in Torch
        H.raises(function() F.cross_entropy(x, padded, {ignore_index = 2}):item() end, "cross_entropy", "-100",
                 "out of range")
        close(F.cross_entropy(x, ordo.tensor({1, 2, 3, 2}, "int64"), {ignore_index = 2}):item(),
              F.cross_entropy(kept_x, kept_t):item())
        -- 0 (a 0-based label) is still out of range, not ignored
        H.raises(function() F.nll_loss(x, ordo.tensor({0, 1, 2, 3}, "int64")):item() end, "nll_loss", "index 0",
                 "out of range")
    end)

    it("NLLLoss and CrossEntropyLoss: an ignored row whose scores hold -inf counts for nothing (it made NaN)", function()
        local logp = ordo.tensor({{-1 / 0, -0.1}, {-0.5, -1}}, D)
        local target = ordo.tensor({0, 2}, "int64") -- row 1 ignored
        close(F.nll_loss(logp, target, {ignore_index = 0}):item(), 1)
        close(F.nll_loss(logp, target, {ignore_index = 0, reduction = "sum"}):item(), 1)
        assert.same({0, 1}, F.nll_loss(logp, target, {ignore_index = 0, reduction = "none"}):totable())
        close(F.nll_loss(logp, target, {ignore_index = 0, weight = ordo.tensor({1, 2}, D)}):item(), 1)
        local logits = ordo.tensor({{-1 / 0, 1}, {0.5, 1}}, D)
        close(F.cross_entropy(logits, target, {ignore_index = 0}):item(), -math.log(math.exp(1) / (math.exp(0.5) + math.exp(1))))
        local x = logp:clone():requires_grad()
        F.nll_loss(x, target, {ignore_index = 0}):backward()
        assert.same({{0, 0}, {0, -1}}, x.grad:totable())
    end)

    it("CrossEntropyLoss against class probabilities (soft labels), Torch's formula; gradcheck", function()
        local X = {{0.2, -1.0, 0.5}, {1.5, 0.3, -0.7}}
        local T = {{0.1, 0.6, 0.3}, {1, 0, 0}}
        local W = {1, 2, 0.5}
        local function logsm(r)
            local m = math.max(unpack(r))
            local z = 0
            for _, v in ipairs(r) do z = z + math.exp(v - m) end
            local o = {}
            for i, v in ipairs(r) do o[i] = v - m - math.log(z) end
            return o
        end
        local function ref(eps, w)
            local tot = 0
            for i = 1, 2 do
                local lp = logsm(X[i])
                for c = 1, 3 do tot = tot - (w and w[c] or 1) * (T[i][c] * (1 - eps) + eps / 3) * lp[c] end
            end
            return tot / 2 -- "mean" over the rows
        end
        local x, t, w = ordo.tensor(X, D), ordo.tensor(T, D), ordo.tensor(W, D)
        close(F.cross_entropy(x, t):item(), ref(0), 1e-12)
        close(nn.CrossEntropyLoss({label_smoothing = 0.2, weight = w})(x, t):item(), ref(0.2, W), 1e-12)
        -- one-hot probabilities are the class indices
        local onehot, idx = ordo.tensor({{0, 1, 0}, {0, 0, 1}}, D), ordo.tensor({2, 3}, {dtype = "int64"})
        close(F.cross_entropy(x, onehot, {label_smoothing = 0.1}):item(),
              F.cross_entropy(x, idx, {label_smoothing = 0.1}):item(), 1e-12)
        assert.same({2}, F.cross_entropy(x, t, {reduction = "none"}):shape())
        assert.is_true(ag.gradcheck(function(a, b) return F.cross_entropy(a, b, {label_smoothing = 0.1}) end,
                                    {x:clone():requires_grad(), t:clone():requires_grad()}))
        -- N x C x d: the probabilities per position, "mean" over rows and positions
        local x3, t3 = ordo.randn({2, 3, 4}, D), ordo.randn({2, 3, 4}, D):softmax(2)
        close(F.cross_entropy(x3, t3):item(),
              F.cross_entropy(x3:permute(1, 3, 2):reshape(-1, 3), t3:permute(1, 3, 2):reshape(-1, 3)):item(), 1e-12)
        H.raises(function() F.cross_entropy(x, ordo.tensor({{0.5, 0.5}}, D)) end, "cross_entropy",
                 "class indices must be int64", "probabilities (float) has the input's shape 2x3")
        H.raises(function() F.cross_entropy(x, t, {ignore_index = 1}) end, "ignore_index 1 needs class-index targets")
        H.raises(function() F.cross_entropy(x, t, {ignore_index = 0.5}) end, "ignore_index 0.5 needs class-index targets")
        -- one that no class has (Torch's -100, a negative one as Torch allows) ignores nothing: one criterion for
        -- batches of indices and of probabilities (it raised)
        local crit = nn.CrossEntropyLoss({ignore_index = -100})
        close(crit(x, t):item(), F.cross_entropy(x, t):item(), 1e-12)
        close(crit(x, onehot):item(), crit(x, idx):item(), 1e-12)
        close(F.cross_entropy(x, t, {ignore_index = 0, reduction = "sum"}):item(),
              F.cross_entropy(x, t, {reduction = "sum"}):item(), 1e-12)
        -- one-hot rows given as integers: said so (it was "target of shape 2x3 does not match input 2x3")
        H.raises(function() F.cross_entropy(x, ordo.tensor({{0, 0, 1}, {1, 0, 0}}, "int64")) end,
                 "cross_entropy: a target of the input's shape 2x3 holds class probabilities and must be float32 or " ..
                 "float64, got int64", "class indices: int64 of shape 2")
        H.raises(function() F.cross_entropy(x3, ordo.zeros({2, 3, 4}, "uint8")) end, "got uint8", "of shape 2x4")
    end)

    it("CrossEntropyLoss and NLLLoss over N x C x d1... (a class per position), as Torch's; gradcheck", function()
        local x = ordo.randn({2, 4, 3, 2}, D)
        local y = ordo.tensor({{{1, 2}, {3, 4}, {2, 2}}, {{4, 4}, {1, 3}, {2, 1}}}, {dtype = "int64"})
        -- the same as every position made a row of an N x C input
        local rows, ry = x:permute(1, 3, 4, 2):reshape(-1, 4), y:reshape(-1)
        local w = ordo.tensor({1, 2, 0.5, 3}, D)
        for _, o in ipairs({{}, {reduction = "sum"}, {weight = w},
                            {ignore_index = 2, label_smoothing = 0.1, weight = w}}) do
            close(F.cross_entropy(x, y, o):item(), F.cross_entropy(rows, ry, o):item(), 1e-12)
            close(F.nll_loss(x:log_softmax(2), y, o.label_smoothing == nil and o or {}):item(),
                  F.nll_loss(rows:log_softmax(2), ry, o.label_smoothing == nil and o or {}):item(), 1e-12)
        end
        local none = nn.CrossEntropyLoss({reduction = "none"})(x, y)
        assert.same({2, 3, 2}, none:shape()) -- the target's shape
        close(none:reshape(-1):totable(), F.cross_entropy(rows, ry, {reduction = "none"}):totable(), 1e-12)
        local xs = ordo.randn({2, 4, 5}, D):requires_grad()
        local ys = ordo.tensor({{1, 2, 3, 4, 1}, {2, 2, 4, 3, 1}}, {dtype = "int64"})
        assert.is_true(ag.gradcheck(function(u) return F.cross_entropy(u, ys, {label_smoothing = 0.1}) end, {xs}))
        H.raises(function() F.cross_entropy(x, y:narrow(3, 1, 1)) end, "cross_entropy", "target of shape 2x3x1",
                 "expected class indices of shape 2x3x2")
        -- scores with the classes last (a sequence model's N x T x C) against N x T: the error says where they go
        local seq = ordo.randn({2, 5, 7}, D)
        local st = ordo.ones({2, 5}, "int64")
        H.raises(function() F.cross_entropy(seq, st) end, "expected class indices of shape 2x7", "the classes are dim 2",
                 "input:permute(1, 3, 2) or input:reshape(-1, 7) against target:reshape(-1)")
        close(F.cross_entropy(seq:permute(1, 3, 2), st):item(), F.cross_entropy(seq:reshape(-1, 7), st:reshape(-1)):item(),
              1e-12)
        H.raises(function() F.cross_entropy(ordo.randn({4}), ry:narrow(1, 1, 4)) end, "cross_entropy",
                 "input of shape 4 (one sample's class scores) takes one class index, a 0-dim target", "got shape 4")
        H.raises(function() F.cross_entropy(ordo.randn({}), ordo.tensor(1, "int64")) end, "cross_entropy",
                 "expected input of shape C, NxC or NxCxd1", "got scalar")
        H.raises(function() F.nll_loss(x, y:to("float32")) end, "nll_loss", "class indices")
    end)

    it("CrossEntropyLoss and NLLLoss of one unbatched sample (C scores) against a 0-dim class index or C " ..
       "probabilities, as Torch's", function()
        local x = ordo.tensor({1, 2, 3}, D)
        local lse = math.log(math.exp(1) + math.exp(2) + math.exp(3))
        local y = ordo.tensor(3, "int64")
        for _, red in ipairs({"mean", "sum", "none"}) do
            local l = F.cross_entropy(x, y, {reduction = red})
            assert.equals(0, l:dim())
            close(l:item(), lse - 3, 1e-12)
        end
        -- weight: "mean" divides by the target's weight, "sum" does not
        local w = ordo.tensor({1, 1, 4}, D)
        close(F.cross_entropy(x, y, {weight = w}):item(), lse - 3, 1e-12)
        close(nn.CrossEntropyLoss({weight = w, reduction = "sum"})(x, y):item(), 4 * (lse - 3), 1e-12)
        -- label smoothing, against the batch of one
        close(nn.CrossEntropyLoss({label_smoothing = 0.3})(ordo.tensor({1, 2, 5}, D), ordo.tensor(1, "int64")):item(),
              F.cross_entropy(ordo.tensor({{1, 2, 5}}, D), ordo.tensor({1}, "int64"), {label_smoothing = 0.3}):item(),
              1e-12)
        -- all ignored: NaN for "mean", as Torch's
        local ig = F.cross_entropy(x, y, {ignore_index = 3}):item()
        assert.is_true(ig ~= ig)
        close(F.cross_entropy(x, ordo.tensor({0.5, 0, 0.5}, D)):item(), lse - 2, 1e-12)
        close(nn.NLLLoss()(x:log_softmax(1), ordo.tensor(2, "int64")):item(), lse - 2, 1e-12)
        local xg = x:clone():requires_grad()
        assert.is_true(ag.gradcheck(function(u) return F.cross_entropy(u, y, {label_smoothing = 0.2}) end, {xg}))
        H.raises(function() F.cross_entropy(x, ordo.tensor({3}, "int64")) end, "cross_entropy", "0-dim target",
                 "got shape 1")
        H.raises(function() F.cross_entropy(x, ordo.tensor({0.5, 0.5}, D)) end, "cross_entropy",
                 "target of shape 2 does not match input 3")
        H.raises(function() F.nll_loss(x, ordo.tensor({1, 2, 3}, "int64")) end, "nll_loss", "0-dim target")
        -- the input and the target swapped: said so
        H.raises(function() nn.CrossEntropyLoss()(ordo.tensor({1, 2}, "int64"), ordo.randn({2, 3})) end,
                 "CrossEntropyLoss: target of shape 2x3 for an input of shape 2", "the scores come first",
                 "CrossEntropyLoss(input, target)")
        H.raises(function() F.cross_entropy(x, ordo.tensor(4, "int64")):item() end, "cross_entropy", "index 4 out of range")
        -- one_hot named when an op it is made of fails (8 TiB of classes)
        H.raises(function() return F.one_hot(ordo.tensor({1, 2}, "int64"), 2 ^ 40) end, "one_hot: arange: out of memory")
        -- with class weights (looked up at the target too) the same name
        H.raises(function() F.nll_loss(ordo.randn({2, 3}, D), ordo.tensor({0, 1}, "int64"),
                                      {weight = ordo.ones({3}, D)}):item() end,
                 "nll_loss (target): ", "index 0 out of range")
        pcall(ordo.engine.wait_for_all)
    end)

    it("MarginRanking, CosineEmbedding and TripletMargin: at the hinge (0) the gradient passes, as Torch's clamp_min", function()
        -- equal scores with margin 0 (a zero-initialised model): relu's gradient 0 left them stuck
        local a, b = ordo.zeros({3}, D):requires_grad(), ordo.zeros({3}, D):requires_grad()
        F.margin_ranking_loss(a, b, ordo.tensor({1, -1, 1}, D)):backward()
        close(a.grad:totable(), {-1 / 3, 1 / 3, -1 / 3}, 1e-12)
        close(b.grad:totable(), {1 / 3, -1 / 3, 1 / 3}, 1e-12)
        local u = ordo.tensor({{1, 0}}, D):requires_grad()
        F.cosine_embedding_loss(u, ordo.tensor({{0, 1}}, D), ordo.tensor({-1}, D)):backward() -- cos = margin = 0
        close(u.grad:totable()[1], {0, 1}, 1e-12)
        local an = ordo.tensor({{0, 0}}, D):requires_grad()
        F.triplet_margin_loss(an, ordo.tensor({{1, 0}}, D), ordo.tensor({{0, 2}}, D), {margin = 1}):backward()
        close(an.grad:totable()[1], {-1, 1}, 1e-5) -- d(a, p) - d(a, n) + 1 = 0 exactly
    end)

    it("MarginRanking, CosineEmbedding, TripletMargin and GaussianNLL losses against plain Lua; gradcheck", function()
        local x1, x2 = ordo.randn({6}, D), ordo.randn({6}, D)
        local y = ordo.tensor({1, -1, 1, 1, -1, -1}, D)
        local X1, X2, Y = x1:totable(), x2:totable(), y:totable()
        local want = 0
        for i = 1, 6 do want = want + math.max(0, -Y[i] * (X1[i] - X2[i]) + 0.3) / 6 end
        close(nn.MarginRankingLoss({margin = 0.3})(x1, x2, y):item(), want, 1e-12)
        local r1, r2 = ordo.randn({4, 3}, D), ordo.randn({4, 3}, D)
        local yc = ordo.tensor({1, -1, -1, 1}, D)
        local A, B, YC = r1:totable(), r2:totable(), yc:totable()
        local function norm(v) return math.sqrt(v[1] ^ 2 + v[2] ^ 2 + v[3] ^ 2) end
        local function dist(u, v, eps)
            return math.sqrt((u[1] - v[1] + eps) ^ 2 + (u[2] - v[2] + eps) ^ 2 + (u[3] - v[3] + eps) ^ 2)
        end
        want = 0
        for i = 1, 4 do
            local cos = (A[i][1] * B[i][1] + A[i][2] * B[i][2] + A[i][3] * B[i][3]) / (norm(A[i]) * norm(B[i]))
            want = want + (YC[i] == 1 and 1 - cos or math.max(0, cos - 0.1)) / 4
        end
        close(nn.CosineEmbeddingLoss({margin = 0.1})(r1, r2, yc):item(), want, 1e-12)
        local r3 = ordo.randn({4, 3}, D)
        local C3 = r3:totable()
        for _, swap in ipairs({false, true}) do
            want = 0
            for i = 1, 4 do
                local dan = dist(A[i], C3[i], 1e-6)
                if swap then dan = math.min(dan, dist(B[i], C3[i], 1e-6)) end
                want = want + math.max(0, dist(A[i], B[i], 1e-6) - dan + 2) / 4
            end
            close(nn.TripletMarginLoss({margin = 2, swap = swap})(r1, r2, r3):item(), want, 1e-12)
        end
        local var = ordo.tensor({0.5, 2, 1e-9, 1, 3, 0.1}, D)
        local V = var:totable()
        for _, full in ipairs({false, true}) do
            want = 0
            for i = 1, 6 do
                local v = math.max(V[i], 1e-6)
                want = want + (0.5 * (math.log(v) + (X1[i] - X2[i]) ^ 2 / v) + (full and 0.5 * math.log(2 * math.pi) or 0)) / 6
            end
            close(nn.GaussianNLLLoss({full = full})(x1, x2, var):item(), want, 1e-10)
        end
        local g1, g2 = r1:requires_grad(), r2:requires_grad()
        assert.is_true(ag.gradcheck(function(u, v) return F.cosine_embedding_loss(u, v, yc, {margin = 0.1}) end, {g1, g2}))
        assert.is_true(ag.gradcheck(function(u, v) return F.triplet_margin_loss(u, v, r3) end, {g1, g2}))
        H.raises(function() nn.TripletMarginLoss({margn = 1}) end, "TripletMarginLoss", "unknown option 'margn'")
        -- bad options and operands name the loss, not the op inside that met them ("add: expected a tensor or a
        -- number, got string", "pairwise_distance: b must be a tensor"), and a flag must be a boolean (a swap of 1
        -- was taken as true)
        local a3, b3 = ordo.ones({2, 3}), ordo.ones({2, 4})
        H.raises(function() F.triplet_margin_loss(a3, a3, a3, {margin = "x"}) end, "triplet_margin_loss: option margin",
                 "got string")
        H.raises(function() F.triplet_margin_loss(a3, a3, a3, {p = "x"}) end, "triplet_margin_loss: option p")
        H.raises(function() F.triplet_margin_loss(a3, a3, a3, {p = -1}) end, "triplet_margin_loss: p must be >= 0")
        H.raises(function() F.triplet_margin_loss(a3, a3, a3, {eps = "x"}) end, "triplet_margin_loss: option eps")
        H.raises(function() F.triplet_margin_loss(a3, a3, a3, {swap = 1}) end, "triplet_margin_loss: option swap",
                 "boolean")
        H.raises(function() nn.TripletMarginLoss()(a3, a3) end, "TripletMarginLoss: negative must be a tensor")
        H.raises(function() F.triplet_margin_loss(a3, b3, a3) end, "triplet_margin_loss: shapes 2x3, 2x4 and 2x3")
        H.raises(function() F.cosine_embedding_loss(a3, b3, ordo.ones({2})) end, "cosine_embedding_loss: shapes 2x3 and 2x4")
        H.raises(function() F.cosine_embedding_loss(a3, nil, ordo.ones({2})) end, "cosine_embedding_loss: input2")
        local v2 = ordo.ones({2})
        H.raises(function() F.gaussian_nll_loss(v2, v2, v2, {eps = "x"}) end, "gaussian_nll_loss: option eps")
        H.raises(function() F.gaussian_nll_loss(v2, v2, v2, {eps = -1}) end, "gaussian_nll_loss: eps must be > 0")
        H.raises(function() nn.GaussianNLLLoss({full = 1})(v2, v2, v2) end, "GaussianNLLLoss: option full", "boolean")
        -- var a number: one variance for every expectation, as Torch's float var (it raised "var must be a tensor")
        close(F.gaussian_nll_loss(x1, x2, 0.5):item(), F.gaussian_nll_loss(x1, x2, ordo.full({6}, 0.5, D)):item(), 1e-12)
        close(nn.GaussianNLLLoss({full = true, reduction = "sum"})(x1, x2, 1e-9):item(),
              F.gaussian_nll_loss(x1, x2, ordo.full({6}, 1e-9, D), {full = true, reduction = "sum"}):item(), 1e-12)
        assert.equals("float64", F.gaussian_nll_loss(x1, x2, 2, {reduction = "none"}):dtype())
        assert.is_true(ag.gradcheck(function(u) return F.gaussian_nll_loss(u, x2, 0.7) end, {x1:clone():requires_grad()}))
        H.raises(function() F.gaussian_nll_loss(x1, x2, -1) end,
                 "gaussian_nll_loss: var must be a tensor or a finite number >= 0, got -1")
        H.raises(function() F.gaussian_nll_loss(x1, x2, 0 / 0) end, "gaussian_nll_loss: var must be", "got nan")
        H.raises(function() F.gaussian_nll_loss(x1, x2, "1") end, "gaussian_nll_loss: var must be a tensor")
        -- a NaN margin is refused, as triplet_margin_loss's (it gave a NaN loss)
        H.raises(function() F.margin_ranking_loss(v2, v2, v2, {margin = 0 / 0}) end,
                 "margin_ranking_loss: option margin must be a number, got nan")
        H.raises(function() nn.CosineEmbeddingLoss({margin = 0 / 0})(a3, a3, v2) end,
                 "CosineEmbeddingLoss: option margin must be a number, got nan")
    end)

    it("PoissonNLL, HingeEmbedding, SoftMargin, MultiLabelSoftMargin, MultiMargin, MultiLabelMargin and " ..
       "TripletMarginWithDistance losses: Torch's formulas against plain Lua, reductions; gradcheck", function()
        local x = ordo.randn({3, 4}, D)
        local X = x:totable()
        local function each(f) -- sum over the elements of X of f(i, j), and the N x C table of them
            local s, t = 0, {}
            for i = 1, 3 do
                t[i] = {}
                for j = 1, 4 do t[i][j] = f(i, j); s = s + t[i][j] end
            end
            return s, t
        end
        -- PoissonNLLLoss: exp(x) - t x; x - t log(x + eps); Stirling's term only where t > 1
        local cnt = ordo.tensor({{0, 1, 2, 3}, {5, 0, 1, 1.5}, {7, 2, 0, 4}}, D)
        local T = cnt:totable()
        local function stirling(t) return t > 1 and t * math.log(t) - t + 0.5 * math.log(2 * math.pi * t) or 0 end
        for _, full in ipairs({false, true}) do
            local s, t = each(function(i, j)
                return math.exp(X[i][j]) - T[i][j] * X[i][j] + (full and stirling(T[i][j]) or 0)
            end)
            close(nn.PoissonNLLLoss({full = full})(x, cnt):item(), s / 12, 1e-12)
            close(F.poisson_nll_loss(x, cnt, {full = full, reduction = "sum"}):item(), s, 1e-12)
            assert.same({3, 4}, F.poisson_nll_loss(x, cnt, {full = full, reduction = "none"}):shape())
            close(F.poisson_nll_loss(x, cnt, {full = full, reduction = "none"}):totable()[2], t[2], 1e-12)
        end
        local rate = x:abs() + 0.1
        local RT = rate:totable()
        local s = each(function(i, j) return RT[i][j] - T[i][j] * math.log(RT[i][j] + 1e-3) end)
        close(nn.PoissonNLLLoss({log_input = false, eps = 1e-3})(rate, cnt):item(), s / 12, 1e-12)
        -- HingeEmbeddingLoss: x where y = 1, max(0, margin - x) where y = -1
        local pm = ordo.tensor({{1, -1, 1, -1}, {-1, -1, 1, 1}, {1, 1, -1, -1}}, D)
        local PM = pm:totable()
        s = each(function(i, j) return PM[i][j] == 1 and X[i][j] or math.max(0, 0.5 - X[i][j]) end)
        close(nn.HingeEmbeddingLoss({margin = 0.5})(x, pm):item(), s / 12, 1e-12)
        s = each(function(i, j) return PM[i][j] == 1 and X[i][j] or math.max(0, 1 - X[i][j]) end)
        close(F.hinge_embedding_loss(x, pm, {reduction = "sum"}):item(), s, 1e-12)
        -- SoftMarginLoss: log(1 + exp(-y x)), finite for large scores
        s = each(function(i, j) return math.log(1 + math.exp(-PM[i][j] * X[i][j])) end)
        close(nn.SoftMarginLoss()(x, pm):item(), s / 12, 1e-12)
        close(F.soft_margin_loss(ordo.tensor({-1000, 1000}, D), ordo.tensor({1, 1}, D), {reduction = "sum"}):item(),
              1000, 1e-12)
        -- MultiLabelSoftMarginLoss: per sample the mean over classes of weighted binary cross-entropies
        local lab = ordo.tensor({{1, 0, 0, 1}, {0, 0, 0, 0}, {1, 1, 1, 0}}, D)
        local L = lab:totable()
        local wc = ordo.tensor({0.5, 1, 2, 3}, D)
        local WC = wc:totable()
        local function sig(v) return 1 / (1 + math.exp(-v)) end
        local rows = {}
        for i = 1, 3 do
            rows[i] = 0
            for j = 1, 4 do
                rows[i] = rows[i] - WC[j] * (L[i][j] * math.log(sig(X[i][j])) + (1 - L[i][j]) * math.log(1 - sig(X[i][j]))) / 4
            end
        end
        close(nn.MultiLabelSoftMarginLoss({weight = wc, reduction = "none"})(x, lab):totable(), rows, 1e-12)
        close(nn.MultiLabelSoftMarginLoss({weight = wc})(x, lab):item(), (rows[1] + rows[2] + rows[3]) / 3, 1e-12)
        assert.same({}, F.multilabel_soft_margin_loss(x[1], lab[1], {reduction = "none"}):shape())
        -- MultiMarginLoss: sum over i ~= y of w[y] max(0, margin - x[y] + x[i])^p, / C
        local y = ordo.tensor({2, 4, 1}, "int64")
        local Y = y:totable()
        for _, p in ipairs({1, 2}) do
            for _, w in ipairs({false, true}) do
                local r = {}
                for i = 1, 3 do
                    r[i] = 0
                    for j = 1, 4 do
                        if j ~= Y[i] then
                            r[i] = r[i] + (w and WC[Y[i]] or 1) * math.max(0, 0.7 - X[i][Y[i]] + X[i][j]) ^ p / 4
                        end
                    end
                end
                local o = {p = p, margin = 0.7, weight = w and wc or nil}
                close(F.multi_margin_loss(x, y, {p = p, margin = 0.7, weight = w and wc or nil, reduction = "none"})
                          :totable(), r, 1e-12)
                close(nn.MultiMarginLoss(o)(x, y):item(), (r[1] + r[2] + r[3]) / 3, 1e-12)
                -- one sample's C scores against a 0-dim index
                local one = F.multi_margin_loss(x[3], ordo.tensor(1, "int64"), {p = p, margin = 0.7,
                                                weight = w and wc or nil, reduction = "none"})
                assert.same({}, one:shape())
                close(one:item(), r[3], 1e-12)
            end
        end
        -- MultiLabelMarginLoss: Torch's example, its -1-ended 0-based {3, 0, -1, 1} as {4, 1, 0, 2}: 0.85
        local ex = ordo.tensor({{0.1, 0.2, 0.4, 0.8}}, D)
        close(nn.MultiLabelMarginLoss()(ex, ordo.tensor({{4, 1, 0, 2}}, "int64")):item(), 0.85, 1e-12)
        close(F.multilabel_margin_loss(ex[1], ordo.tensor({4, 1, -1, 2}, "int64")):item(), 0.85, 1e-12)
        local tl = ordo.tensor({{3, 1, 0, 0}, {0, 2, 3, 4}, {4, 3, 2, 1}}, "int64")
        local want = {}
        local sets = {{3, 1}, {}, {4, 3, 2, 1}}
        for i = 1, 3 do
            local in_set = {}
            for _, j in ipairs(sets[i]) do in_set[j] = true end
            want[i] = 0
            for _, j in ipairs(sets[i]) do
                for k = 1, 4 do
                    if not in_set[k] then want[i] = want[i] + math.max(0, 1 - (X[i][j] - X[i][k])) / 4 end
                end
            end
        end
        close(F.multilabel_margin_loss(x, tl, {reduction = "none"}):totable(), want, 1e-12)
        close(F.multilabel_margin_loss(x, tl, {reduction = "sum"}):item(), want[1] + want[2] + want[3], 1e-12)
        -- TripletMarginWithDistanceLoss: pairwise_distance by default (as TripletMarginLoss), or any distance
        local pz, nz = ordo.randn({3, 4}, D), ordo.randn({3, 4}, D)
        for _, swap in ipairs({false, true}) do
            close(nn.TripletMarginWithDistanceLoss({swap = swap})(x, pz, nz):item(),
                  nn.TripletMarginLoss({swap = swap})(x, pz, nz):item(), 1e-12)
        end
        local function cosd(u, v) return 1 - F.cosine_similarity(u, v) end
        local dap, dan, dpn = cosd(x, pz):totable(), cosd(x, nz):totable(), cosd(pz, nz):totable()
        local tw = {}
        for i = 1, 3 do tw[i] = math.max(0, dap[i] - math.min(dan[i], dpn[i]) + 0.3) end
        close(F.triplet_margin_with_distance_loss(x, pz, nz, {distance_function = cosd, margin = 0.3, swap = true,
                                                               reduction = "none"}):totable(), tw, 1e-12)
        -- gradients against central differences
        local g = x:requires_grad()
        assert.is_true(ag.gradcheck(function(u) return F.poisson_nll_loss(u, cnt, {full = true}) end, {g}))
        assert.is_true(ag.gradcheck(function(u) return F.poisson_nll_loss(u:abs() + 0.1, cnt, {log_input = false}) end, {g}))
        -- (the target's gradient finite where a count is 0 or 1, under full)
        assert.is_true(ag.gradcheck(function(c) return F.poisson_nll_loss(x, c, {full = true}) end,
                                    {(cnt + 0.01):requires_grad()}))
        assert.is_true(ag.gradcheck(function(u) return F.hinge_embedding_loss(u, pm, {margin = 3}) end, {g}))
        assert.is_true(ag.gradcheck(function(u) return F.soft_margin_loss(u, pm) end, {g}))
        assert.is_true(ag.gradcheck(function(u) return F.multilabel_soft_margin_loss(u, lab, {weight = wc}) end, {g}))
        assert.is_true(ag.gradcheck(function(u) return F.multi_margin_loss(u, y, {margin = 3, weight = wc}) end, {g}))
        assert.is_true(ag.gradcheck(function(u) return F.multi_margin_loss(u, y, {p = 2, margin = 3}) end, {g}))
        assert.is_true(ag.gradcheck(function(u) return F.multilabel_margin_loss(u * 0.1, tl) end, {g}))
        assert.is_true(ag.gradcheck(function(u, v) return F.triplet_margin_with_distance_loss(u, v, nz,
            {distance_function = cosd, margin = 2}) end, {g, pz:requires_grad()}))
        -- at a term of exactly 0 no gradient, as Torch's kernels (z > 0); at the hinge of the others it passes, as
        -- Torch's clamp_min
        local k = ordo.tensor({{1, 0}}, D):requires_grad()
        F.multi_margin_loss(k, ordo.tensor({1}, "int64")):backward()
        assert.same({{0, 0}}, k.grad:totable())
        k.grad = nil
        F.multilabel_margin_loss(k, ordo.tensor({{1, 0}}, "int64")):backward()
        assert.same({{0, 0}}, k.grad:totable())
        k.grad = nil
        F.hinge_embedding_loss(k, ordo.tensor({{-1, 1}}, D), {reduction = "sum"}):backward()
        assert.same({{-1, 1}}, k.grad:totable())
    end)

    it("the new losses refuse bad shapes, dtypes and options, naming the loss and what was wrong", function()
        local x, y = ordo.randn({3, 4}), ordo.tensor({1, 2, 3}, "int64")
        H.raises(function() F.poisson_nll_loss(x, ordo.zeros({2, 3, 4})) end, "poisson_nll_loss",
                 "target of shape 2x3x4 would broadcast")
        H.raises(function() F.poisson_nll_loss(x, ordo.zeros({4, 1})) end, "poisson_nll_loss: shapes 3x4 and 4x1")
        H.raises(function() F.poisson_nll_loss(x, 2) end, "poisson_nll_loss: target must be a tensor")
        H.raises(function() nn.PoissonNLLLoss({full = 1})(x, x) end, "PoissonNLLLoss: option full must be a boolean")
        H.raises(function() nn.PoissonNLLLoss({log_input = "yes"})(x, x) end, "PoissonNLLLoss: option log_input",
                 "boolean")
        H.raises(function() F.poisson_nll_loss(x, x, {eps = -1}) end, "poisson_nll_loss: eps must be >= 0")
        H.raises(function() F.poisson_nll_loss(x, x, {reduction = "avg"}) end, "poisson_nll_loss: reduction must be")
        H.raises(function() nn.PoissonNLLLoss({reduction = "avg"}) end, "PoissonNLLLoss: reduction must be")
        H.raises(function() nn.PoissonNLLLoss({delta = 1}) end, "PoissonNLLLoss: unknown option 'delta'")
        H.raises(function() F.hinge_embedding_loss(x, x, {margin = "1"}) end, "hinge_embedding_loss: option margin",
                 "number")
        H.raises(function() F.hinge_embedding_loss(x, x, {margin = 0 / 0}) end, "hinge_embedding_loss: option margin",
                 "nan")
        H.raises(function() F.hinge_embedding_loss(x, ordo.ones({3, 1, 4})) end, "hinge_embedding_loss", "would broadcast")
        H.raises(function() F.soft_margin_loss(x, nil) end, "soft_margin_loss: target must be a tensor")
        H.raises(function() F.multilabel_soft_margin_loss(x, ordo.ones({3, 5})) end,
                 "multilabel_soft_margin_loss: target of shape 3x5 does not match input 3x4")
        H.raises(function() F.multilabel_soft_margin_loss(x, x, {weight = ordo.ones({3})}) end,
                 "multilabel_soft_margin_loss: weight must be a float32 tensor of 4 class weights, got float32 3")
        H.raises(function() F.multilabel_soft_margin_loss(x, x, {weight = {1, 2, 3, 4}}) end,
                 "multilabel_soft_margin_loss: option weight must be a tensor")
        H.raises(function() F.multi_margin_loss(x, y, {p = 3}) end, "multi_margin_loss: p must be 1 or 2, got 3")
        H.raises(function() F.multi_margin_loss(x, y:float()) end, "multi_margin_loss: target must hold class indices",
                 "got float32")
        H.raises(function() F.multi_margin_loss(x, ordo.tensor({1, 2}, "int64")) end,
                 "multi_margin_loss: target of shape 2 does not match input 3x4")
        H.raises(function() F.multi_margin_loss(x, y, {weight = ordo.ones({4}, {dtype = "float64"})}) end,
                 "multi_margin_loss: weight must be a float32 tensor of 4 class weights, got float64 4")
        H.raises(function() F.multi_margin_loss(x, ordo.tensor({1, 5, 2}, "int64")):item() end,
                 "multi_margin_loss (target)", "index 5 out of range")
        H.raises(function() F.multi_margin_loss(x[1], y) end, "multi_margin_loss", "0-dim target")
        H.raises(function() F.multi_margin_loss(ordo.randn({2, 3, 4}), y) end,
                 "multi_margin_loss: expected input of shape C or NxC, got 2x3x4")
        H.raises(function() nn.MultiMarginLoss({margin = "x"})(x, y) end, "MultiMarginLoss: option margin must be a number")
        H.raises(function() F.multilabel_margin_loss(x, y) end,
                 "multilabel_margin_loss: target of shape 3 does not match input 3x4")
        H.raises(function() F.multilabel_margin_loss(x, x) end, "multilabel_margin_loss: target must hold class indices",
                 "got float32")
        H.raises(function() F.multilabel_margin_loss(x, ordo.full({3, 4}, 5, {dtype = "int64"})):item() end,
                 "multilabel_margin_loss (target)", "index 5 out of range")
        H.raises(function() F.triplet_margin_with_distance_loss(x, x, x, {margin = 0}) end,
                 "triplet_margin_with_distance_loss: margin must be > 0, got 0")
        H.raises(function() F.triplet_margin_with_distance_loss(x, x, x, {distance_function = 2}) end,
                 "triplet_margin_with_distance_loss: option distance_function must be a function, got number")
        H.raises(function() F.triplet_margin_with_distance_loss(x, x, x, {distance_function = function() return 1 end}) end,
                 "triplet_margin_with_distance_loss: distance_function returned number for (anchor, positive)")
        H.raises(function() F.triplet_margin_with_distance_loss(x, x[1], x) end,
                 "triplet_margin_with_distance_loss: anchor, positive and negative must have the same number of dims")
        H.raises(function() nn.TripletMarginWithDistanceLoss({swap = 1})(x, x, x) end,
                 "TripletMarginWithDistanceLoss: option swap must be a boolean")
        H.raises(function() nn.TripletMarginWithDistanceLoss()(x, x) end, "TripletMarginWithDistanceLoss: negative")
    end)

    it("PairwiseDistance and CosineSimilarity modules; the distances' options checked, named as the function", function()
        local a, b = ordo.randn({3, 4}, D), ordo.randn({3, 4}, D)
        close(nn.PairwiseDistance()(a, b):totable(), F.pairwise_distance(a, b):totable(), 1e-12)
        local pd = nn.PairwiseDistance({p = 1, eps = 0, keepdim = true})
        assert.same({3, 1}, pd(a, b):shape())
        local A, B = a:totable(), b:totable()
        local want = {}
        for i = 1, 3 do
            want[i] = 0
            for j = 1, 4 do want[i] = want[i] + math.abs(A[i][j] - B[i][j]) end
        end
        close(pd(a, b):view(-1):totable(), want, 1e-12)
        assert.equals("PairwiseDistance(p = 1, eps = 0, keepdim = true)", tostring(pd))
        local cs = nn.CosineSimilarity({dim = 1})
        close(cs(a, b):totable(), F.cosine_similarity(a, b, {dim = 1}):totable(), 1e-12)
        assert.same({4}, cs(a, b):shape())
        close(nn.CosineSimilarity()(a, b):totable(), F.cosine_similarity(a, b):totable(), 1e-12)
        -- as TripletMarginWithDistanceLoss's distance (Torch's example)
        local cosd = nn.CosineSimilarity()
        local n = ordo.randn({3, 4}, D)
        close(nn.TripletMarginWithDistanceLoss({distance_function = function(u, v) return 1 - cosd(u, v) end})(a, b, n)
                  :item(),
              F.triplet_margin_with_distance_loss(a, b, n, {distance_function = function(u, v)
                  return 1 - F.cosine_similarity(u, v) end}):item(), 1e-12)
        close(nn.TripletMarginWithDistanceLoss({distance_function = nn.PairwiseDistance()})(a, b, n):item(),
              nn.TripletMarginLoss()(a, b, n):item(), 1e-12)
        -- bad options: named as the function or module (they were named as norm, clamp or add, the ops inside; a
        -- negative or NaN eps of cosine_similarity gave NaN)
        H.raises(function() F.cosine_similarity(a, b, {dim = 3}) end,
                 "cosine_similarity: dim must be an integer in 1..2 or -2..-1 (the inputs' shape is 3x4), got 3")
        H.raises(function() F.cosine_similarity(a, b, {dim = "x"}) end, "cosine_similarity: dim must be an integer")
        H.raises(function() F.cosine_similarity(a, b, {eps = -1}) end, "cosine_similarity: eps must be a number >= 0, got -1")
        H.raises(function() F.cosine_similarity(a, b, {eps = 0 / 0}) end, "cosine_similarity: eps must be", "nan")
        H.raises(function() F.cosine_similarity(a, b, {eps = "x"}) end, "cosine_similarity: eps must be")
        H.raises(function() F.cosine_similarity(ordo.tensor(1), ordo.tensor(2)) end, "cosine_similarity: expected vectors")
        H.raises(function() F.pairwise_distance(a, b, {p = -1}) end, "pairwise_distance: p must be a number >= 0, got -1")
        H.raises(function() F.pairwise_distance(a, b, {p = 0 / 0}) end, "pairwise_distance: p must be", "nan")
        H.raises(function() F.pairwise_distance(a, b, {eps = "x"}) end, "pairwise_distance: eps must be a number")
        H.raises(function() F.pairwise_distance(a, b, {keepdim = 1}) end, "pairwise_distance: keepdim must be true or false")
        H.raises(function() F.pairwise_distance(ordo.tensor(1), ordo.tensor(2)) end, "pairwise_distance: expected vectors")
        H.raises(function() nn.PairwiseDistance({p = -2}) end, "PairwiseDistance: p must be a number >= 0, got -2")
        H.raises(function() nn.PairwiseDistance({keepdim = "yes"}) end, "PairwiseDistance: keepdim must be true or false")
        H.raises(function() nn.PairwiseDistance({q = 1}) end, "PairwiseDistance: unknown option 'q'")
        H.raises(function() nn.PairwiseDistance()(a, ordo.randn({3, 5}, D)) end, "PairwiseDistance: shapes 3x4 and 3x5")
        H.raises(function() nn.CosineSimilarity({dim = 1.5}) end, "CosineSimilarity: dim must be an integer, got 1.5")
        H.raises(function() nn.CosineSimilarity({eps = -1}) end, "CosineSimilarity: eps must be a number >= 0")
        H.raises(function() nn.CosineSimilarity({dim = 3})(a, b) end, "CosineSimilarity: dim must be an integer in 1..2")
        H.raises(function() nn.CosineSimilarity()(a, nil) end, "CosineSimilarity: b must be a tensor")
        -- normalize's too (named as norm or clamp; a negative or NaN eps gave NaN rows)
        H.raises(function() F.normalize(a, {p = -1}) end, "normalize: p must be a number >= 0, got -1")
        H.raises(function() F.normalize(a, {p = "fro"}) end, "normalize: p must be a number >= 0")
        H.raises(function() F.normalize(a, {dim = 3}) end,
                 "normalize: dim must be an integer in 1..2 or -2..-1 (the input's shape is 3x4), got 3")
        H.raises(function() F.normalize(a * 0, {eps = 0 / 0}) end, "normalize: eps must be a number >= 0, got nan")
        H.raises(function() F.normalize(a * 0, {eps = -1}) end, "normalize: eps must be a number >= 0, got -1")
        H.raises(function() F.normalize(a, {eps = "x"}) end, "normalize: eps must be")
        H.raises(function() F.normalize(ordo.tensor(1, D)) end, "normalize: expected a tensor of at least one dim")
        close(F.normalize(a, {p = math.huge, dim = 1}):totable(), (a / a:abs():max(1, true)):totable(), 1e-12)
        -- the losses built on them name themselves
        local s1 = ordo.tensor(1, D)
        H.raises(function() F.cosine_embedding_loss(s1, s1, s1) end, "cosine_embedding_loss: expected vectors")
        H.raises(function() nn.TripletMarginLoss()(s1, s1, s1) end, "TripletMarginLoss: expected vectors")
    end)

    it("a loss's reduction set after it is made is the one used, and checked (as Torch's loss.reduction = ...)",
       function()
        -- before: l.reduction = "sum" was silently ignored (the options made at init were used)
        local a, b = ordo.tensor({1, 2, 3}, D), ordo.tensor({0, 0, 0}, D)
        local l = nn.MSELoss()
        close(l(a, b):item(), 14 / 3, 1e-12)
        l.reduction = "sum"
        close(l(a, b):item(), 14, 1e-12)
        l.reduction = "none"
        assert.same({1, 4, 9}, l(a, b):totable())
        l.reduction = "avg"
        H.raises(function() l(a, b) end, "MSELoss: reduction must be 'mean', 'sum' or 'none', got avg")
        local kl = nn.KLDivLoss()
        kl.reduction = "batchmean"
        local lp = ordo.tensor({{-1, -2}, {-3, -4}}, D)
        local t = ordo.tensor({{0.5, 0.5}, {0.25, 0.75}}, D)
        close(kl(lp, t):item(), F.kl_div(lp, t, {reduction = "batchmean"}):item(), 1e-12)
        -- the losses of three operands have the field too
        local m = nn.MarginRankingLoss({margin = 0.5})
        assert.equals("mean", m.reduction)
        m.reduction = "sum"
        local x1, x2, y = ordo.tensor({1, 2}, D), ordo.tensor({2, 1}, D), ordo.tensor({1, 1}, D)
        close(m(x1, x2, y):item(), F.margin_ranking_loss(x1, x2, y, {margin = 0.5, reduction = "sum"}):item(), 1e-12)
        m.reduction = 1
        H.raises(function() m(x1, x2, y) end, "MarginRankingLoss: reduction must be", "got number")
    end)

    it("MSELoss; gradcheck", function()
        local a = ordo.tensor({1, 2, 3}, D)
        local b = ordo.tensor({1, 0, 0}, D)
        close(nn.MSELoss()(a, b):item(), (0 + 4 + 9) / 3)
        local x = ordo.randn({3, 2}, D):requires_grad()
        local y = ordo.randn({3, 2}, D)
        assert.is_true(ag.gradcheck(function(u) return F.mse_loss(u, y) end, {x}))
    end)

    it("softplus, mish, logsigmoid and the losses built on them take uint8 inputs in float32 (neg refused uint8)", function()
        local u = ordo.tensor({0, 1, 2}, "uint8")
        local want = {math.log(2), math.log(1 + math.exp(1)), math.log(1 + math.exp(2))}
        for _, f in ipairs({"softplus", "mish", "logsigmoid"}) do
            local r = F[f](u)
            assert.equals("float32", r:dtype(), f)
            local ref = F[f](u:double()):totable()
            close(ref, r:totable(), 1e-6)
        end
        close(want, F.softplus(u):totable(), 1e-6)
        close(F.binary_cross_entropy_with_logits(u:float(), ordo.tensor({1, 0, 1})):item(),
              F.binary_cross_entropy_with_logits(u, ordo.tensor({1, 0, 1}, "uint8")):item(), 1e-6)
        -- margin ranking with a uint8 target (all 1: x1 should rank higher)
        close(F.margin_ranking_loss(ordo.tensor({1, 3}), ordo.tensor({2, 1}), ordo.tensor({1, 1}, "uint8")):item(), 0.5, 1e-6)
        H.raises(function() return F.nll_loss(ordo.tensor({{1, 2}}, "uint8"), ordo.tensor({1}, "int64")) end,
                 "nll_loss: input must be float32 or float64 log-probabilities, got uint8")
        H.raises(function() return F.pairwise_distance(ordo.ones({2}, "int64"), ordo.ones({3}, "int64")) end,
                 "pairwise_distance: shapes 2 and 3 cannot be broadcast")
    end)

    it("NaN for a probability, a momentum or an eps is refused (the range checks let NaN through)", function()
        local nan = 0 / 0
        H.raises(function() return nn.Dropout(nan) end, "Dropout: p must be a number in [0, 1], got nan")
        H.raises(function() return nn.Dropout2d(nan) end, "Dropout2d: p must be")
        H.raises(function() return F.dropout(ordo.ones({2}), nan) end, "dropout: p must be")
        H.raises(function() return nn.MultiheadAttention(4, 2, {dropout = nan}) end, "MultiheadAttention: dropout must be")
        H.raises(function() return F.scaled_dot_product_attention(ordo.ones({1, 2, 4}), ordo.ones({1, 2, 4}),
                                                                  ordo.ones({1, 2, 4}), {dropout_p = nan}) end,
                 "dropout_p must be")
        H.raises(function() return nn.LSTM(2, 3, {num_layers = 2, dropout = nan}) end, "LSTM: dropout must be")
        local x = ordo.randn({4, 3})
        H.raises(function() return F.batch_norm(x, ordo.zeros({3}), ordo.ones({3}), nil, nil, true, nan) end,
                 "batch_norm: momentum must be a number in [0, 1], got nan")
        H.raises(function() return nn.BatchNorm1d(3, {momentum = nan}) end, "BatchNorm1d: momentum must be")
        local bn = nn.BatchNorm1d(3)
        bn.momentum = nan -- changed after: its forward says so
        H.raises(function() return bn(x) end, "BatchNorm1d: momentum must be")
        H.raises(function() return nn.LayerNorm(3, {eps = nan}) end, "LayerNorm: option eps must be a non-negative number")
        H.raises(function() return F.layer_norm(x, {3}, nil, nil, nan) end, "layer_norm: eps must be a non-negative number")
        H.raises(function() return nn.GroupNorm(1, 3, {eps = -1}) end, "GroupNorm: option eps must be a non-negative number")
        H.raises(function() return F.group_norm(x, 1, nil, nil, nan) end, "group_norm: eps must be a non-negative number")
        assert.same({4, 3}, F.layer_norm(x, {3}, nil, nil, 0):shape())
    end)

    it("regression losses and distances of integer tensors compute in float32 (a uint8 difference wrapped)", function()
        local u = function(v) return ordo.tensor(v, "uint8") end
        local a, b = u({1, 2}), u({4, 1})
        local l1 = F.l1_loss(a, b)
        assert.equals("float32", l1:dtype())
        close(l1:item(), 2, 1e-6) -- (3 + 1) / 2; was 128 (1 - 4 is 253 in uint8)
        close(F.mse_loss(a, b):item(), 5, 1e-6)
        close(F.smooth_l1_loss(a, b):item(), (2.5 + 0.5) / 2, 1e-6)
        close(F.huber_loss(a, b):item(), (2.5 + 0.5) / 2, 1e-6)
        close(F.l1_loss(a, 3):item(), 1.5, 1e-6)
        close(F.gaussian_nll_loss(a, b, ordo.ones({2})):item(), (9 + 1) / 4, 1e-6)
        close(F.margin_ranking_loss(u({1}), u({2}), ordo.tensor({1}, "int32")):item(), 1, 1e-6)
        close(F.pairwise_distance(u({{0, 0}}), u({{3, 4}})):item(), 5, 1e-5)
        close(F.cdist(u({{0, 0}}), u({{3, 4}})):item(), 5, 1e-6)
        close(F.triplet_margin_loss(u({{0, 0}}), u({{3, 4}}), u({{0, 1}})):item(), 5 - 1 + 1, 1e-5)
        -- int32: the square no longer overflows
        local big = ordo.tensor({0}, "int32")
        close(F.mse_loss(big, ordo.tensor({50000}, "int32")):item(), 2.5e9, 1e-6)
        -- a float operand keeps its dtype
        assert.equals("float64", F.mse_loss(ordo.tensor({1}, "float64"), ordo.tensor({2}, "int32")):dtype())
    end)

    it("MSE, L1, SmoothL1, Huber: a target that would broadcast the input larger (N x 1 against N) raises", function()
        for _, f in ipairs({"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"}) do
            -- predictions N x 1 against targets N compared every prediction with every target (N x N)
            H.raises(function() F[f](ordo.randn({3, 1}), ordo.randn({3})) end, f, "target of shape 3",
                     "input of shape 3x1 to 3x3")
            H.raises(function() F[f](ordo.randn({3}), ordo.randn({3, 1})) end, f, "to 3x3")
            H.raises(function() F[f](ordo.randn({3}), "1") end, f, "target must be a tensor or a number")
            -- a target broadcasting to the input's own shape is still fine
            local x = ordo.tensor({{1, 2}, {3, 4}}, D)
            close(F[f](x, ordo.tensor({1, 2}, D), {reduction = "sum"}):item(),
                  F[f](x, ordo.tensor({{1, 2}, {1, 2}}, D), {reduction = "sum"}):item())
            close(F[f](x, 1, {reduction = "sum"}):item(), F[f](x, ordo.ones({2, 2}, D), {reduction = "sum"}):item())
        end
        H.raises(function() nn.MSELoss()(ordo.randn({4, 1}), ordo.randn({4})) end, "MSELoss: target", "4x4")
        -- the same for the other losses of elementwise operands (Torch refuses margin_ranking's too)
        local ones = ordo.ones({3})
        H.raises(function() F.margin_ranking_loss(ordo.randn({3, 1}), ordo.randn({3}), ones) end,
                 "margin_ranking_loss", "input2 of shape 3", "3x3")
        H.raises(function() F.margin_ranking_loss(ordo.randn({3}), ordo.randn({3}), ones:view(3, 1)) end,
                 "margin_ranking_loss", "target of shape 3x1")
        H.raises(function() F.cosine_embedding_loss(ordo.randn({3, 4}), ordo.randn({3, 4}), ones:view(3, 1)) end,
                 "cosine_embedding_loss", "target of shape 3x1", "3x3")
        H.raises(function() F.gaussian_nll_loss(ordo.randn({3, 1}), ordo.randn({3}), ordo.ones({3, 1})) end,
                 "gaussian_nll_loss", "target of shape 3", "3x3")
        H.raises(function() F.gaussian_nll_loss(ordo.randn({3, 2}), ordo.randn({3, 2}), ordo.ones({4})) end,
                 "gaussian_nll_loss")
        -- a var without the last dim (one per row, Torch's) is each of the row's variances
        local mu, t = ordo.randn({3, 2}, D), ordo.randn({3, 2}, D)
        local v = ordo.rand({3}, D) + 0.5
        close(F.gaussian_nll_loss(mu, t, v):item(), F.gaussian_nll_loss(mu, t, v:view(3, 1):expand(3, 2)):item())
        -- a var under eps: the loss at eps, and the gradient there as if unclamped (Torch clamps it
        -- under no_grad), so a variance that fell under eps is pushed back up (it got 0)
        local var = ordo.tensor({0, 1e-9, 2}, D):requires_grad()
        local l = F.gaussian_nll_loss(ordo.zeros({3}, D), ordo.ones({3}, D), var, {reduction = "sum", eps = 1e-3})
        close(l:item(), 0.5 * (2 * (math.log(1e-3) + 1 / 1e-3) + math.log(2) + 1 / 2), 1e-12)
        l:backward()
        local at_eps = 0.5 * (1 / 1e-3 - 1 / 1e-6)
        close(var.grad:totable(), {at_eps, at_eps, 0.5 * (1 / 2 - 1 / 4)}, 1e-12)
    end)

    it("refuse values out of their domain as Torch's do, at run time: BCE probabilities, a negative variance", function()
        -- (they gave NaN, or a huge loss from a clamped negative variance; the check runs as an op on the
        -- device, so it needs no host wait: the loss fails at the wait that meets it)
        local y = ordo.tensor({0, 1, 1})
        for _, bad in ipairs({1.5, -0.25, 0 / 0}) do
            local l = F.binary_cross_entropy(ordo.tensor({0.2, bad, 0.3}), y)
            H.raises(function() return l:item() end, "binary_cross_entropy", "at element 2 is outside [0, 1]")
            local m = nn.BCELoss()(ordo.tensor({0.2, bad, 0.3}), y)
            H.raises(function() return m:item() end, "BCELoss", "outside [0, 1]")
        end
        -- integer probabilities compute in float and are checked the same way (an int64 2 gave NaN)
        local li = F.binary_cross_entropy(ordo.tensor({0, 2, 1}, "int64"), y)
        H.raises(function() return li:item() end, "binary_cross_entropy", "value 2 at element 2 is outside [0, 1]")
        local ok01 = F.binary_cross_entropy(ordo.tensor({0, 1, 1}, "int64"), ordo.tensor({1, 1, 0}, "int64"),
                                            {reduction = "none"})
        assert.same({100, 0, 100}, ok01:totable())
        -- the edges are in: 0 and 1 give the clamped finite loss
        close(F.binary_cross_entropy(ordo.tensor({0, 1}, D), ordo.tensor({0, 1}, D)):item(), 0)
        local p = ordo.tensor({0.2, 0.7}, D):requires_grad()
        assert.is_true(ag.gradcheck(function(u) return F.binary_cross_entropy(u, ordo.tensor({0, 1}, D)) end, {p}))
        local g = F.gaussian_nll_loss(ordo.zeros({2}), ordo.ones({2}), ordo.tensor({-1, 1}))
        H.raises(function() return g:item() end, "gaussian_nll_loss", "value -1 at element 1 is outside [0, inf]")
        -- and with a variance that needs a gradient, the same; a zero variance is allowed (clamped to eps)
        local v = ordo.tensor({1, -2}):requires_grad()
        H.raises(function() return F.gaussian_nll_loss(ordo.zeros({2}), ordo.ones({2}), v):item() end,
                 "gaussian_nll_loss", "value -2 at element 2")
        assert.is_true(F.gaussian_nll_loss(ordo.zeros({2}), ordo.ones({2}), ordo.tensor({0, 1})):item() > 0)
    end)

    it("SiLU, GELU (exact and tanh approximation), Softplus, LeakyReLU against plain Lua; gradcheck", function()
        local xs = {-30, -2, -0.5, 0.25, 1, 3, 40}
        local x = ordo.tensor(xs, D)
        local function ref(f) local r = {} for i, v in ipairs(xs) do r[i] = f(v) end return r end
        local function sig(v) return 1 / (1 + math.exp(-v)) end
        close(nn.SiLU()(x):totable(), ref(function(v) return v * sig(v) end))
        close(nn.GELU("tanh")(x):totable(), ref(function(v)
            local u = math.sqrt(2 / math.pi) * (v + 0.044715 * v ^ 3)
            return 0.5 * v * (1 + (1 - 2 / (math.exp(2 * u) + 1))) -- tanh, without inf / inf
        end))
        close(nn.Softplus()(x):totable(), ref(function(v) return v > 20 and v or math.log(1 + math.exp(v)) end))
        close(nn.LeakyReLU(0.2)(x):totable(), ref(function(v) return v > 0 and v or 0.2 * v end))
        close(nn.LeakyReLU()(x):totable(), ref(function(v) return v > 0 and v or 0.01 * v end))
        -- the exact GELU, the default (Torch's), 0.5 x (1 + erf(x / sqrt 2)); erf by its series
        local function erf(z)
            local sum, term, k = z, z, 0
            repeat
                k = k + 1
                term = -term * z * z / k
                sum = sum + term / (2 * k + 1)
            until math.abs(term) < 1e-17 or k > 200
            return 2 / math.sqrt(math.pi) * sum
        end
        local small = {-2, -0.5, 0, 0.25, 1, 3}
        local exact = {}
        for i, v in ipairs(small) do exact[i] = 0.5 * v * (1 + erf(v / math.sqrt(2))) end
        close(nn.GELU("none")(ordo.tensor(small, D)):totable(), exact, 1e-12)
        close(nn.GELU({approximate = "none"})(ordo.tensor(small, D)):totable(), exact, 1e-12)
        close(nn.GELU()(ordo.tensor(small, D)):totable(), exact, 1e-12)
        close(F.gelu(ordo.tensor(small, D)):totable(), exact, 1e-12)
        close(F.gelu(ordo.tensor(small, D), "tanh"):totable(), nn.GELU("tanh")(ordo.tensor(small, D)):totable(), 1e-15)
        assert.matches("approximate = none", tostring(nn.GELU()), 1, true)
        H.raises(function() nn.GELU("exact") end, "GELU", "approximate must be")
        H.raises(function() F.gelu(x, 1) end, "gelu", "approximate must be")
        -- the activations without options say so (an argument was dropped unseen)
        H.raises(function() nn.ReLU(true) end, "ReLU: takes no options")
        H.raises(function() nn.Sigmoid({beta = 2}) end, "Sigmoid: takes no options")
        local s = ordo.tensor({-1.3, -0.4, 0.35, 0.9, 2.2}, D):requires_grad()
        for _, f in ipairs({F.silu, F.gelu, F.softplus, function(u) return F.leaky_relu(u, 0.1) end,
                            function(u) return F.gelu(u, "tanh") end}) do
            assert.is_true(ag.gradcheck(f, {s}))
        end
        assert.has_error(function() nn.LeakyReLU("x") end)
    end)

    it("Softplus(beta, threshold) and F.softplus(x, beta, threshold) as Torch's (both were dropped); LogSigmoid", function()
        local xs = {-1000, -5, -0.3, 0, 2, 9.9, 10.1, 30, 1000}
        local x = ordo.tensor(xs, "float64")
        local function ref(beta, threshold)
            local r = {}
            for i, v in ipairs(xs) do
                local b = beta * v
                if b > threshold then r[i] = v
                elseif b > 0 then r[i] = (b + math.log(1 + math.exp(-b))) / beta
                else r[i] = math.log(1 + math.exp(b)) / beta end
            end
            return r
        end
        close(F.softplus(x, 2):totable(), ref(2, 20), 1e-12)
        close(F.softplus(x, 0.5, 3):totable(), ref(0.5, 3), 1e-12)
        close(nn.Softplus(2)(x):totable(), ref(2, 20), 1e-12)
        close(nn.Softplus({beta = 0.5, threshold = 3})(x):totable(), ref(0.5, 3), 1e-12)
        close(nn.Softplus()(x):totable(), ref(1, 20), 1e-12)
        assert.equals(10.1, F.softplus(x, 2):totable()[7]) -- past the threshold: x itself
        assert.equals(30, F.softplus(x):totable()[8])
        assert.matches("beta = 2, threshold = 20", tostring(nn.Softplus(2)), 1, true)
        local p = ordo.tensor({-1.3, 0.2, 4, 12}, "float64"):requires_grad()
        assert.is_true(ag.gradcheck(function(u) return F.softplus(u, 2) end, {p}))
        local w = ordo.tensor({9.9, 10.1}, "float64"):requires_grad()
        F.softplus(w, 2):sum():backward()
        close(w.grad:totable(), {1 / (1 + math.exp(-19.8)), 1}, 1e-12)
        H.raises(function() F.softplus(x, 0) end, "softplus", "beta", "0")
        H.raises(function() F.softplus(x, "2") end, "softplus", "beta")
        H.raises(function() F.softplus(x, 1, {}) end, "softplus", "threshold")
        H.raises(function() nn.Softplus(0) end, "Softplus", "beta", "0")
        H.raises(function() nn.Softplus({beta = 2, thresh = 1}) end, "Softplus", "unknown option 'thresh'")
        -- logsigmoid: log(sigmoid(x)) = -softplus(-x), finite far out (log of an underflowed sigmoid was -inf)
        local l = F.logsigmoid(ordo.tensor({-1000, -1, 0, 1000})):totable()
        close(l, {-1000, -math.log(1 + math.exp(1)), -math.log(2), 0}, 1e-6)
        close(nn.LogSigmoid()(ordo.tensor({-200}, "float64")):totable(), {-200}, 1e-12)
        assert.is_true(ag.gradcheck(F.logsigmoid, {p}))
    end)

    it("CELU, Softshrink, Hardshrink, Tanhshrink, Threshold, GLU (Torch's) against plain Lua; gradcheck", function()
        local xs = {-30, -4, -2.5, -0.5, 0.25, 1, 3.5, 7, 40}
        local x = ordo.tensor(xs, D)
        local function ref(f) local r = {} for i, v in ipairs(xs) do r[i] = f(v) end return r end
        local function tanh(v) return 1 - 2 / (math.exp(2 * v) + 1) end
        close(nn.CELU()(x):totable(), ref(function(v) return v > 0 and v or math.exp(v) - 1 end))
        close(nn.CELU(2)(x):totable(), ref(function(v) return v > 0 and v or 2 * (math.exp(v / 2) - 1) end))
        close(F.celu(x, 0.5):totable(), ref(function(v) return v > 0 and v or 0.5 * (math.exp(v / 0.5) - 1) end))
        close(nn.Softshrink()(x):totable(), ref(function(v) return v > 0.5 and v - 0.5 or v < -0.5 and v + 0.5 or 0 end))
        close(F.softshrink(x, 3):totable(), ref(function(v) return v > 3 and v - 3 or v < -3 and v + 3 or 0 end))
        close(nn.Hardshrink(1)(x):totable(), ref(function(v) return math.abs(v) > 1 and v or 0 end))
        close(F.hardshrink(x):totable(), ref(function(v) return math.abs(v) > 0.5 and v or 0 end))
        close(nn.Tanhshrink()(x):totable(), ref(function(v) return v - tanh(v) end))
        close(nn.Threshold(0.25, -1)(x):totable(), ref(function(v) return v > 0.25 and v or -1 end))
        local g = ordo.tensor({{1, -2, 0.5, 3}, {0, 1, -1, 2}}, D)
        local function sig(v) return 1 / (1 + math.exp(-v)) end
        close(nn.GLU()(g):totable(), {{1 * sig(0.5), -2 * sig(3)}, {0 * sig(-1), 1 * sig(2)}})
        close(F.glu(g, 1):totable(), {{1 * sig(0), -2 * sig(1), 0.5 * sig(-1), 3 * sig(2)}})
        local xi = ordo.tensor({-1.3, -0.2, 0.7, 2.1}, D):requires_grad()
        for name, f in pairs({celu = function(t) return F.celu(t, 1.5) end, softshrink = F.softshrink,
                              hardshrink = F.hardshrink, tanhshrink = F.tanhshrink,
                              threshold = function(t) return F.threshold(t, 0.1, 2) end,
                              glu = function(t) return F.glu(t) end}) do
            assert.is_true(ag.gradcheck(f, {xi}), name)
        end
        H.raises(function() nn.CELU(0) end, "CELU", "nonzero")
        H.raises(function() nn.Softshrink(-1) end, "Softshrink", "lambd", ">= 0")
        H.raises(function() F.hardshrink(x, "a") end, "hardshrink", "lambd")
        H.raises(function() nn.Threshold(1) end, "Threshold", "threshold and value")
        H.raises(function() F.glu(ordo.ones(3)) end, "glu", "even size")
        H.raises(function() nn.GLU(1.5) end, "GLU", "integer")
        H.raises(function() nn.Tanhshrink(1) end, "Tanhshrink", "takes no options")
        H.raises(function() F.celu(x, 1, true) end, "celu", "in-place")
        assert.equals("GLU(dim = -1)", tostring(nn.GLU()))
    end)

    it("ELU, SELU, Hardtanh, ReLU6, Hardsigmoid, Hardswish, Mish, Softsign, PReLU against plain Lua; gradcheck",
       function()
        local xs = {-30, -4, -2.5, -0.5, 0.25, 1, 3.5, 7, 40}
        local x = ordo.tensor(xs, D)
        local function ref(f) local r = {} for i, v in ipairs(xs) do r[i] = f(v) end return r end
        local function clamp(v, lo, hi) return math.max(lo, math.min(hi, v)) end
        local function softplus(v) return v > 20 and v or math.log(1 + math.exp(v)) end
        local function tanh(v) return 1 - 2 / (math.exp(2 * v) + 1) end
        local A, S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
        close(nn.ELU()(x):totable(), ref(function(v) return v > 0 and v or math.exp(v) - 1 end))
        close(nn.ELU(0.5)(x):totable(), ref(function(v) return v > 0 and v or 0.5 * (math.exp(v) - 1) end))
        close(nn.SELU()(x):totable(), ref(function(v) return S * (v > 0 and v or A * (math.exp(v) - 1)) end))
        close(nn.Hardtanh()(x):totable(), ref(function(v) return clamp(v, -1, 1) end))
        close(nn.Hardtanh(-2, 3)(x):totable(), ref(function(v) return clamp(v, -2, 3) end))
        close(nn.ReLU6()(x):totable(), ref(function(v) return clamp(v, 0, 6) end))
        close(nn.Hardsigmoid()(x):totable(), ref(function(v) return clamp(v + 3, 0, 6) / 6 end))
        close(nn.Hardswish()(x):totable(), ref(function(v) return v * clamp(v + 3, 0, 6) / 6 end))
        close(nn.Mish()(x):totable(), ref(function(v) return v * tanh(softplus(v)) end))
        close(nn.Softsign()(x):totable(), ref(function(v) return v / (1 + math.abs(v)) end))
        close(nn.PReLU(1, {dtype = "float64"})(x):totable(), ref(function(v) return v > 0 and v or 0.25 * v end))
        -- one slope per channel
        local pr = nn.PReLU(3, {init = 0.1, dtype = "float64"})
        ordo.no_grad(function() pr.weight:copy_(ordo.tensor({0.1, 0.2, 0.3}, D)) end)
        local c = ordo.tensor({{{-1, 2}, {-1, 2}, {-1, 2}}}, D)
        close(pr(c):totable()[1], {{-0.1, 2}, {-0.2, 2}, {-0.3, 2}})
        -- gradients, away from the kinks
        local s = ordo.tensor({-3.3, -1.3, -0.4, 0.35, 0.9, 2.2, 4.1}, D):requires_grad()
        for _, f in ipairs({F.elu, F.selu, F.hardtanh, F.relu6, F.hardsigmoid, F.hardswish, F.mish, F.softsign}) do
            assert.is_true(ag.gradcheck(f, {s}))
        end
        local w = ordo.tensor({0.1, 0.2, 0.3}, D):requires_grad()
        local u = ordo.randn({2, 3, 4}, D):requires_grad()
        assert.is_true(ag.gradcheck(function(a, b) return F.prelu(a, b) end, {u, w}))
        assert.equals(3, #pr:parameters() == 1 and pr.weight:numel() or 0)
        H.raises(function() nn.Hardtanh(2, 1) end, "Hardtanh", "min_val <= max_val")
        H.raises(function() nn.ELU("a") end, "ELU", "alpha", "string")
        H.raises(function() pr(ordo.zeros({2, 4}, D)) end, "PReLU: weight", "shape 1 or the 4 channels", "got 3")
        H.raises(function() nn.PReLU(1, {ini = 1}) end, "PReLU", "unknown option 'ini'")
    end)

    it("GroupNorm normalises each group of channels per sample, then scales and shifts per channel; gradcheck",
       function()
        local x = ordo.randn({2, 6, 3, 2}, D)
        local gn = nn.GroupNorm(3, 6, {dtype = "float64"})
        ordo.no_grad(function()
            gn.weight:copy_(ordo.tensor({1, 2, 3, 4, 5, 6}, D))
            gn.bias:copy_(ordo.tensor({0, -1, 1, 0.5, 0, 2}, D))
        end)
        local y, xt = gn(x):totable(), x:totable()
        for n = 1, 2 do
            for g = 0, 2 do -- channels 2g+1 and 2g+2, all 3x2 positions: 12 values
                local m, v = 0, 0
                for c = 2 * g + 1, 2 * g + 2 do
                    for i = 1, 3 do for j = 1, 2 do m = m + xt[n][c][i][j] / 12 end end
                end
                for c = 2 * g + 1, 2 * g + 2 do
                    for i = 1, 3 do for j = 1, 2 do v = v + (xt[n][c][i][j] - m) ^ 2 / 12 end end
                end
                local wt, bt = gn.weight:totable(), gn.bias:totable()
                for c = 2 * g + 1, 2 * g + 2 do
                    for i = 1, 3 do
                        for j = 1, 2 do
                            close(y[n][c][i][j], (xt[n][c][i][j] - m) / math.sqrt(v + 1e-5) * wt[c] + bt[c], 1e-9)
                        end
                    end
                end
            end
        end
        assert.equals(0, #nn.GroupNorm(2, 4, {affine = false}):parameters())
        assert.equals("GroupNorm(3 groups, 6 channels, eps = 1e-05)", tostring(gn))
        local u = ordo.randn({2, 4, 3}, D):requires_grad()
        local w, b = ordo.randn({4}, D):requires_grad(), ordo.randn({4}, D):requires_grad()
        assert.is_true(ag.gradcheck(function(a, ww, bb) return F.group_norm(a, 2, ww, bb) end, {u, w, b}))
        assert.is_true(ag.gradcheck(function(a) return F.group_norm(a, 4) end, {u}))
        local ok, err = pcall(nn.GroupNorm, 4, 6)
        assert.is_false(ok)
        assert.matches("GroupNorm: num_groups 4 must divide num_channels 6", err, 1, true)
        ok, err = pcall(gn, ordo.randn({2, 4, 3}, D))
        assert.is_false(ok)
        assert.matches("GroupNorm: expected an input of shape N x 6 x ..., got 2x4x3", err, 1, true)
        ok, err = pcall(F.group_norm, u, 2, ordo.randn({3}, D))
        assert.is_false(ok)
        assert.matches("group_norm: weight must have shape 4 (one per channel), got 3", err, 1, true)
    end)

    it("F.pad in every mode against plain Lua (several dims, cropping); gradients", function()
        local x = ordo.randn({2, 3, 4}, D)
        local X = x:totable()
        -- the source (0-based) of padded position i of a dim of n, or nil (the value)
        local function src(i, n, mode)
            if i >= 0 and i < n then return i end
            if mode == "constant" then return nil end
            if mode == "replicate" then return math.max(0, math.min(n - 1, i)) end
            if mode == "reflect" then return i < 0 and -i or 2 * (n - 1) - i end
            return i % n
        end
        for _, mode in ipairs({"constant", "reflect", "replicate", "circular"}) do
            for _, am in ipairs({{1, 2}, {2, 1, 1, 0}, {0, 3, 2, 2}, {-1, 2, 1, -1}}) do
                local y = F.pad(x, am, {mode = mode, value = 7})
                local lo3, hi3, lo2, hi2 = am[1], am[2], am[3] or 0, am[4] or 0
                assert.same({2, 3 + lo2 + hi2, 4 + lo3 + hi3}, y:shape(), mode)
                local Y = y:totable()
                -- negative amounts crop first; the padding is of what is left
                local function at(i, lo, hi, n)
                    local clo, chi = math.max(0, -lo), math.max(0, -hi)
                    local j = src(i - math.max(0, lo), n - clo - chi, mode)
                    return j and j + clo
                end
                for a = 1, 2 do
                    for b = 0, 3 + lo2 + hi2 - 1 do
                        for c = 0, 4 + lo3 + hi3 - 1 do
                            local sb, sc = at(b, lo2, hi2, 3), at(c, lo3, hi3, 4)
                            local want = (sb and sc) and X[a][sb + 1][sc + 1] or 7
                            close(Y[a][b + 1][c + 1], want, 1e-15)
                        end
                    end
                end
            end
        end
        local g = ordo.randn({2, 3, 4}, D):requires_grad()
        for _, mode in ipairs({"constant", "reflect", "replicate", "circular"}) do
            assert.is_true(ag.gradcheck(function(t) return F.pad(t, {2, 1, 1, 1}, {mode = mode}) end, {g}))
        end
        H.raises(function() F.pad(x, {1}) end, "pad", "even list")
        H.raises(function() F.pad(x, {4, 0}, {mode = "reflect"}) end, "pad", "reflect", "larger")
        H.raises(function() F.pad(x, {1, 1}, {mode = "wrap"}) end, "pad", "mode")
        H.raises(function() F.pad(x, {-3, -2}) end, "pad", "cannot lose 5")
        -- a padding value that does not fit an integer input names pad (it said full)
        local u = ordo.tensor({{3, 4}}, "uint8")
        H.raises(function() F.pad(u, {1, 1}, {value = -1}) end, "pad: value -1 does not fit in uint8 (the padding value)")
        assert.same({{255, 3, 4, 255}}, F.pad(u, {1, 1}, {value = 255}):totable())
        assert.same({{3, 3, 4, 4}}, F.pad(u, {1, 1}, {mode = "replicate", value = -1}):totable()) -- no value used
        -- a copy, as Torch's, where no amount is positive (it gave x itself, or a narrow of it)
        local v = ordo.tensor({{1, 2, 3}})
        F.pad(v, {0, 0}):fill_(0)
        F.pad(v, {-1, 0}, {mode = "reflect"}):fill_(0)
        F.pad(v, {0, 0, 0, 0}):fill_(0)
        assert.same({{1, 2, 3}}, v:totable())
    end)

    it("F.normalize, cosine_similarity, pairwise_distance and cdist against plain Lua; gradients", function()
        local a, b = ordo.randn({3, 4}, D), ordo.randn({3, 4}, D)
        local A, B = a:totable(), b:totable()
        local function norm(v, p)
            local s = 0
            for _, x in ipairs(v) do s = s + math.abs(x) ^ p end
            return s ^ (1 / p)
        end
        local n, cs, pd = F.normalize(a):totable(), F.cosine_similarity(a, b):totable(), F.pairwise_distance(a, b):totable()
        local cd = F.cdist(a, b, {p = 1}):totable()
        for i = 1, 3 do
            local na = norm(A[i], 2)
            for j = 1, 4 do close(n[i][j], A[i][j] / na, 1e-12) end
            local dot = 0
            for j = 1, 4 do dot = dot + A[i][j] * B[i][j] end
            close(cs[i], dot / (na * norm(B[i], 2)), 1e-12)
            local diff = {}
            for j = 1, 4 do diff[j] = A[i][j] - B[i][j] + 1e-6 end
            close(pd[i], norm(diff, 2), 1e-12)
            for k = 1, 3 do
                local d = {}
                for j = 1, 4 do d[j] = A[i][j] - B[k][j] end
                close(cd[i][k], norm(d, 1), 1e-12)
            end
        end
        close(F.normalize(a, {p = 1, dim = 1}):abs():sum(1):totable(), {1, 1, 1, 1}, 1e-12)
        local p, q = ordo.randn({3, 4}, D):requires_grad(), ordo.randn({2, 4}, D):requires_grad()
        assert.is_true(ag.gradcheck(function(u) return F.normalize(u) end, {p}))
        assert.is_true(ag.gradcheck(function(u, v) return F.cdist(u, v) end, {p, q}))
        assert.is_true(ag.gradcheck(function(u) return F.cosine_similarity(u, u * 2 + 1) end, {p}))
        H.raises(function() F.cdist(a, ordo.randn({2, 3})) end, "cdist", "one width")
        -- F.cdist and ordo.cdist take p both ways (Torch's positional p, or {p = })
        close(F.cdist(a, b, 1):totable(), cd, 1e-12)
        close(ordo.cdist(a, b, {p = 1}):totable(), cd, 1e-12)
        H.raises(function() F.cdist(a, b, {p = -1}) end, "cdist: p must be a number >= 0, got -1")
        H.raises(function() ordo.cdist(a, b, {q = 1}) end, "cdist", "unknown option 'q'")
        -- p = 2 with many rows: one matrix product (Torch's compute_mode), no P x R x M difference tensor
        local ma, mb = ordo.randn({40, 5}, D), ordo.randn({30, 5}, D)
        local direct = F.cdist(ma, mb, {compute_mode = "donot_use_mm_for_euclid_dist"})
        local MA, MB = ma:totable(), mb:totable()
        for _, i in ipairs({1, 17, 40}) do
            for _, k in ipairs({1, 30}) do
                local d = {}
                for j = 1, 5 do d[j] = MA[i][j] - MB[k][j] end
                close(direct:totable()[i][k], norm(d, 2), 1e-12)
            end
        end
        close(F.cdist(ma, mb):totable()[7], direct:totable()[7], 1e-10)
        assert.is_true(ordo.allclose(ordo.cdist(ma, mb), direct, 1e-10, 1e-10))
        assert.is_true(ordo.allclose(ordo.cdist(ma:narrow(1, 1, 3), mb:narrow(1, 1, 3), {compute_mode = "use_mm_for_euclid_dist"}),
                                     direct:narrow(1, 1, 3):narrow(2, 1, 3), 1e-10, 1e-10))
        -- batch dims broadcast on that path too
        local ba = ordo.randn({2, 30, 4}, D)
        local bb = ordo.randn({1, 5, 4}, D)
        assert.is_true(ordo.allclose(ordo.cdist(ba, bb), ordo.cdist(ba, bb, {compute_mode = "donot_use_mm_for_euclid_dist"}),
                                     1e-10, 1e-10))
        -- its gradient: as the direct one's, and 0 (not NaN) where a distance is 0
        assert.is_true(ag.gradcheck(function(u, v) return F.cdist(u, v) end,
                                    {ordo.randn({27, 3}, D):requires_grad(), ordo.randn({4, 3}, D):requires_grad()}))
        local x = ordo.randn({30, 3}, D):requires_grad()
        F.cdist(x, x:detach()):sum():backward()
        assert.is_true(x.grad:isfinite():all())
        H.raises(function() F.cdist(a, b, {compute_mode = "fast"}) end, "cdist", "compute_mode")
        H.raises(function() ordo.cdist(ordo.ones(2, 3, 4), ordo.ones(3, 3, 4)) end, "cdist", "cannot be broadcast")
        H.raises(function() F.normalize(a, {q = 2}) end, "normalize", "unknown option 'q'")
        -- operands broadcast first: b of size 1 along dim stands for copies in its norm too (|cos| was > 1)
        local ca, cb = ordo.randn({3, 4}, D), ordo.randn({3, 1}, D)
        close(F.cosine_similarity(ca, cb):totable(), F.cosine_similarity(ca, cb:expand(3, 4)):totable(), 1e-12)
        for _, v in ipairs(F.cosine_similarity(ca, cb):totable()) do assert.is_true(math.abs(v) <= 1 + 1e-12) end
        -- large float32 vectors: each is divided by its norm first, as Torch (a·b overflowed: inf / inf = NaN)
        local big = ordo.tensor({{3e19, 4e19}, {-1e30, 1e30}})
        close(F.cosine_similarity(big, big):totable(), {1, 1}, 1e-6)
        close(F.cosine_similarity(big, -big):totable(), {-1, -1}, 1e-6)
        -- a norm under eps: clamped for the value only, its gradient passing, as Torch's clamp under no_grad
        local tiny = ordo.tensor({{3e-9, 4e-9}}, D):requires_grad()
        F.cosine_similarity(tiny, ordo.tensor({{1, 2}}, D), {eps = 1e-8}):sum():backward()
        local bh, dot = {1 / math.sqrt(5), 2 / math.sqrt(5)}, (3e-9 + 8e-9) / math.sqrt(5)
        close(tiny.grad:totable()[1], {bh[1] / 1e-8 - dot / 1e-16 * 3e-9 / 5e-9, bh[2] / 1e-8 - dot / 1e-16 * 4e-9 / 5e-9},
              1e-9)
    end)

    it("modules, named_modules, apply; requires_grad_(false) freezes a part (fine-tuning)", function()
        local m = nn.Sequential(nn.Linear(2, 3), nn.Sequential(nn.ReLU(), nn.Linear(3, 1)))
        local names = {}
        for _, e in ipairs(m:named_modules()) do names[#names + 1] = e.name end
        assert.same({"", "1", "2", "2.1", "2.2"}, names)
        assert.equals(5, #m:modules())
        local seen = {}
        m:apply(function(x) seen[#seen + 1] = x._class_name end)
        assert.same({"Linear", "ReLU", "Linear", "Sequential", "Sequential"}, seen) -- children first
        -- a module that is a child twice is visited once (an in-place scaling was applied twice)
        local shared = nn.Linear(2, 2)
        local w0 = shared.weight:totable()
        nn.Sequential(shared, nn.Tanh(), shared):apply(function(x)
            if x._class_name == "Linear" then ordo.no_grad(function() x.weight:mul_(2) end) end
        end)
        close(shared.weight:reshape(-1):totable(), ordo.tensor(w0):mul(2):reshape(-1):totable())
        -- freeze the first layer: it gets no gradient and stays as it was after a step
        m:get(1):requires_grad_(false)
        assert.equals(2, #m:trainable_parameters())
        local before = m:get(1).weight:totable()
        local opt = optim.SGD(m:trainable_parameters(), {lr = 0.5})
        m(ordo.randn({4, 2})):sum():backward()
        assert.is_nil(m:get(1).weight.grad)
        assert.is_true(ordo.is_tensor(m:get(2):get(2).weight.grad))
        opt:step()
        assert.same(before, m:get(1).weight:totable())
        m:requires_grad_()
        assert.equals(4, #m:trainable_parameters())
        local prefixed = {}
        for _, e in ipairs(m:named_parameters("net.")) do prefixed[#prefixed + 1] = e.name end
        assert.same({"net.1.weight", "net.1.bias", "net.2.2.weight", "net.2.2.bias"}, prefixed)
        assert.equals("top.2.1", m:named_modules("top")[4].name)
        -- a prefix without its dot is joined with one, as named_modules' and Torch's (it gave "net1.weight")
        assert.equals("net.1.weight", m:named_parameters("net")[1].name)
        assert.equals("net.2.2.bias", m:named_parameters("net")[4].name)
        assert.equals("bn.1.running_mean", nn.Sequential(nn.BatchNorm1d(2)):named_buffers("bn")[1].name)
        assert.equals("bn.1.running_mean", nn.Sequential(nn.BatchNorm1d(2)):named_buffers("bn.")[1].name)
        -- state_dict(prefix) too (the argument was ignored)
        local sd = nn.Sequential(nn.BatchNorm1d(2)):state_dict("enc")
        assert.same({"enc.1.weight", "enc.1.running_mean"}, {sd[1].name, sd[3].name})
        H.raises(function() m:state_dict(1) end, "state_dict", "prefix", "number")
        H.raises(function() m:named_parameters(2) end, "named_parameters", "prefix", "number")
        H.raises(function() m:named_modules({}) end, "named_modules", "prefix", "table")
        H.raises(function() m:apply(3) end, "apply", "function")
        H.raises(function() m:requires_grad_("no") end, "requires_grad_", "boolean")
    end)

    it("PixelShuffle / PixelUnshuffle from their definition; padding layers; Unflatten", function()
        local x = ordo.randn({2, 8, 3, 2}, D)
        local y = nn.PixelShuffle(2)(x)
        assert.same({2, 2, 6, 4}, y:shape())
        local X, Y = x:totable(), y:totable()
        for n = 1, 2 do
            for c = 0, 1 do
                for h = 0, 5 do
                    for w = 0, 3 do -- out[c][h][w] = in[c*4 + (h%2)*2 + w%2][h//2][w//2]
                        local src = X[n][c * 4 + (h % 2) * 2 + w % 2 + 1][math.floor(h / 2) + 1][math.floor(w / 2) + 1]
                        close(Y[n][c + 1][h + 1][w + 1], src, 0)
                    end
                end
            end
        end
        assert.same(x:totable(), nn.PixelUnshuffle(2)(y):totable())
        local img = ordo.randn({1, 2, 3, 4}, D)
        for _, c in ipairs({{nn.ZeroPad2d(1), {1, 1, 1, 1}, "constant", 0}, {nn.ConstantPad2d({1, 0, 2, 1}, 3), {1, 0, 2, 1},
                            "constant", 3}, {nn.ReflectionPad2d({2, 1, 1, 2}), {2, 1, 1, 2}, "reflect"},
                            {nn.ReplicationPad2d(2), {2, 2, 2, 2}, "replicate"}}) do
            assert.same(F.pad(img, c[2], {mode = c[3], value = c[4]}):totable(), c[1](img):totable())
        end
        local seq = ordo.randn({2, 3, 5}, D)
        assert.same(F.pad(seq, {2, 1}, {mode = "reflect"}):totable(), nn.ReflectionPad1d({2, 1})(seq):totable())
        assert.same({2, 3, 2, 3}, nn.Unflatten(2, {3, 2})(ordo.zeros({2, 6, 3})):shape())
        assert.same({4, 2, 3}, nn.Unflatten(-1, {2, 3})(ordo.zeros({4, 6})):shape())
        H.raises(function() nn.ZeroPad2d({1, 2}) end, "ZeroPad2d", "4 of them", "got 2 of them")
        H.raises(function() nn.ConstantPad1d(1) end, "ConstantPad1d", "value")
        H.raises(function() F.pixel_shuffle(ordo.zeros({1, 3, 2, 2}), 2) end, "pixel_shuffle", "C*4", "1x3x2x2")
        H.raises(function() nn.PixelUnshuffle(2)(ordo.zeros({1, 1, 3, 2})) end, "PixelUnshuffle: expected",
                 "multiples of 2")
        -- a copy for a factor of 1 too, as Torch's (it gave a view of the input)
        local p = ordo.ones({1, 2, 2, 2})
        F.pixel_shuffle(p, 1):fill_(0)
        F.pixel_unshuffle(p, 1):fill_(0)
        assert.equals(8, p:sum():item())
        -- Torch's (*, C, H, W): no batch dim, or several
        assert.same(y[1]:totable(), F.pixel_shuffle(x[1], 2):totable())
        assert.same(x[2]:totable(), nn.PixelUnshuffle(2)(y[2]):totable())
        local x5 = x:view(1, 2, 8, 3, 2)
        assert.same(y:view(1, 2, 2, 6, 4):totable(), nn.PixelShuffle(2)(x5):totable())
        assert.same(x5:totable(), F.pixel_unshuffle(y:view(1, 2, 2, 6, 4), 2):totable())
        H.raises(function() F.pixel_shuffle(ordo.zeros({4, 2}), 2) end, "pixel_shuffle", "4x2")
    end)

    it("ModuleDict: children by name, in sorted order; names that would clobber the module refused", function()
        local Net = nn.Module:extend("HeadsNet")
        function Net:init()
            self.heads = nn.ModuleDict({b = nn.Linear(3, 2), a = nn.Linear(3, 1)})
        end
        function Net:forward(x) return self.heads:get("a")(x) + self.heads:get("b")(x):sum(2, true) end
        local net = Net()
        local names = {}
        for _, np in ipairs(net:named_parameters()) do names[#names + 1] = np.name end
        assert.same({"heads.a.weight", "heads.a.bias", "heads.b.weight", "heads.b.bias"}, names)
        assert.same({"a", "b"}, net.heads:keys())
        assert.same({4, 1}, net(ordo.randn({4, 3})):shape())
        local seen = {}
        for name in net.heads:pairs() do seen[#seen + 1] = name end
        assert.same({"a", "b"}, seen)
        net.heads:set("c", nn.ReLU())
        assert.same({"a", "b", "c"}, net.heads:keys())
        H.raises(function() net.heads:get("z") end, "ModuleDict", "no module named z", "a, b, c")
        H.raises(function() net.heads:set("training", nn.ReLU()) end, "ModuleDict", "cannot use training")
        H.raises(function() net.heads:set("parameters", nn.ReLU()) end, "ModuleDict", "cannot use parameters")
        H.raises(function() nn.ModuleDict({["a.b"] = nn.ReLU()}) end, "ModuleDict", "without white space or dots")
        H.raises(function() net.heads(ordo.zeros({1})) end, "ModuleDict", "no forward of its own")
    end)

    it("ParameterList and ParameterDict: the owner's parameters, trained, moved, saved and loaded", function()
        local Net = nn.Module:extend("PListNet")
        function Net:init()
            self.pl = nn.ParameterList({ordo.randn(2, D), ordo.randn(3, D)})
            self.pd = nn.ParameterDict({b = ordo.zeros(2, D), a = ordo.ones(1, D)})
        end
        function Net:forward(x) return (x * self.pl[1]):sum() + self.pl:get(-1):sum() + self.pd.a:sum() * 2 end
        local net = Net()
        local names = {}
        for _, e in ipairs(net:state_dict()) do names[#names + 1] = e.name end
        assert.same({"pl.1", "pl.2", "pd.a", "pd.b"}, names)
        assert.equals(4, #net:parameters())
        assert.equals(2, net.pl:size())
        assert.equals(2, net.pd:size())
        assert.same({"a", "b"}, net.pd:keys())
        assert.equals(net.pd.a, net.pd:get("a"))
        assert.is_true(net.pl[2]:needs_grad() and net.pl[2]:is_leaf())
        -- gradients reach them, and an optimiser given m:parameters() steps them
        local before = net.pd.a:item()
        net(ordo.ones(2, D)):backward()
        assert.same({1, 1}, net.pl[1].grad:totable())
        assert.same({2}, net.pd.a.grad:totable())
        optim.SGD(net:parameters(), {lr = 0.5}):step()
        assert.equals(before - 1, net.pd.a:item())
        -- append, extend, [i] = t, set, update; iteration in order
        net.pl:append(ordo.zeros(4, D)):extend({ordo.zeros(5, D), ordo.zeros(6, D)})
        net.pl[1] = nn.Parameter(ordo.full({2}, 7, D))
        assert.same({7, 7}, net.pl[1]:totable())
        assert.is_true(net.pl[1]:needs_grad())
        local sizes = {}
        for i, p in net.pl:ipairs() do sizes[i] = p:size(1) end
        assert.same({2, 3, 4, 5, 6}, sizes)
        -- the parameters sit at keys 1..n: Lua's # and ipairs see them (#plist was 0, ipairs ran no times)
        assert.equals(5, #net.pl)
        local raw = {}
        for i, p in ipairs(net.pl) do raw[i] = p:size(1) end
        assert.same({2, 3, 4, 5, 6}, raw)
        assert.equals(net.pl[1], net:parameters()[1]) -- (the one assigned in place, taken as it is)
        net.pd:set("c", ordo.zeros(3, D)):update({d = ordo.zeros(1, D)})
        local keys = {}
        for k in net.pd:pairs() do keys[#keys + 1] = k end
        assert.same({"a", "b", "c", "d"}, keys)
        -- values() and items(), Torch's, as ModuleDict's
        local vals, items = net.pd:values(), net.pd:items()
        assert.equals(4, #vals)
        assert.equals(net.pd.c, vals[3])
        assert.equals("d", items[4][1])
        assert.equals(net.pd.d, items[4][2])
        assert.equals(9, #net:parameters())
        -- a frozen nn.Parameter stays frozen
        assert.is_false(nn.ParameterList({nn.Parameter(ordo.ones(2), false)})[1]:needs_grad())
        -- ParameterList:extend("Name") on the class still makes a subclass
        local Sub = nn.ParameterList:extend("SubPL")
        function Sub:init() nn.ParameterList.init(self, {ordo.zeros(2)}) end
        local sub = Sub()
        sub:extend({ordo.zeros(3)})
        assert.equals(2, sub:size())
        assert.same({3}, sub[2]:shape())
        assert.equals("SubPL", sub._class_name)
        -- moved and cast with the module
        net:float()
        assert.equals("float32", net.pl[5]:dtype())
        assert.equals("float32", net.pd.d:dtype())
        assert.equals(5, #net.pl)
        for _, p in ipairs(net.pl) do assert.equals("float32", p:dtype()) end
        assert.is_nil(rawget(net.pl, "1")) -- (moved in place, no field "1" beside key 1)
        assert.equals(net.pl[5], net:get_parameter("pl.5"))
        net:requires_grad_(false)
        assert.is_false(net.pl[3]:needs_grad())
        net:requires_grad_(true)
        -- save / load and state_dict round trip
        local a, b = Net(), Net()
        local path = tmpname()
        a:save(path)
        b:load(path)
        os.remove(path)
        assert.is_true(ordo.equal(a.pl[2], b.pl[2]) and ordo.equal(a.pd.b, b.pd.b))
        local c = Net()
        c:load_state_dict(a:state_dict())
        assert.is_true(ordo.equal(a.pl[1], c.pl[1]))
    end)

    it("ParameterList and ParameterDict refuse bad input and stay as they were", function()
        local pl = nn.ParameterList({ordo.zeros(2)})
        H.raises(function() return pl[3] end, "ParameterList", "index 3 out of range 1..1")
        H.raises(function() pl:append(ordo.zeros(2, "int64")) end, "ParameterList", "parameter 2", "float tensor",
                 "int64")
        H.raises(function() pl:extend({ordo.zeros(2), "x"}) end, "ParameterList", "parameter 3", "tensor", "string")
        assert.equals(1, pl:size()) -- (none of the extend was taken)
        H.raises(function() pl:extend({[1] = ordo.zeros(1), [3] = ordo.zeros(1)}) end, "ParameterList", "hole at 2")
        H.raises(function() pl[2] = ordo.zeros(1) end, "ParameterList", "index 2 out of range")
        -- pl[1] = v over a parameter in place is a plain assignment (no metamethod runs): checked at the next read
        -- through a method, as a module's parameter field; a parameter is taken, anything else raises there
        local p1 = pl[1]
        pl[1] = 5
        H.raises(function() pl:get(1) end, "ParameterList", "parameter 1 is number, not a tensor")
        H.raises(function() pl:parameters() end, "ParameterList", "parameter 1 is number, not a tensor")
        H.raises(function() pl:ipairs() end, "ParameterList", "parameter 1 is number, not a tensor")
        pl[1] = ordo.zeros(2)
        H.raises(function() pl:state_dict() end, "ParameterList", "parameter 1", "not a parameter", "nn.Parameter(t)")
        H.raises(function() pl:double() end, "ParameterList", "parameter 1", "not a parameter")
        pl[1] = p1
        assert.equals(p1, pl:get(1))
        pl[1] = nn.Parameter(ordo.ones(2), false)
        assert.is_false(pl:parameters()[1]:needs_grad())
        pl[1] = p1
        H.raises(function() pl[2] = 5 end, "ParameterList", "index 2 out of range")
        H.raises(function() pl["2"] = ordo.zeros(1) end, "ParameterList", "index 2 out of range")
        H.raises(function() pl["1"] = nn.ReLU() end, "ParameterList: [1] = nn.ReLU: expected a parameter")
        assert.equals(p1, pl:get(1))
        H.raises(function() pl:register_parameter("2", ordo.zeros(1)) end, "2 is a position of the ParameterList")
        assert.equals(1, #pl)
        assert.equals(1, #pl:parameters())
        H.raises(function() nn.ParameterList(3) end, "ParameterList", "expected a table of tensors", "number")
        H.raises(function() pl(ordo.zeros(1)) end, "ParameterList", "no forward of its own")
        local pd = nn.ParameterDict({w = ordo.zeros(1)})
        H.raises(function() pd:set("a.b", ordo.zeros(1)) end, "ParameterDict", "cannot use \"a.b\"")
        H.raises(function() pd:set("keys", ordo.zeros(1)) end, "ParameterDict", "cannot use \"keys\"")
        H.raises(function() pd:set("training", ordo.zeros(1)) end, "ParameterDict", "cannot use")
        H.raises(function() pd:set("x", {}) end, "ParameterDict", "x must be a tensor")
        H.raises(function() pd:update({y = ordo.zeros(1), z = ordo.zeros(1, "uint8")}) end, "ParameterDict",
                 "z must be a float tensor")
        assert.same({"w"}, pd:keys())
        H.raises(function() pd:get("q") end, "ParameterDict", "no parameter named q", "it has w")
        -- pdict.name = t registers it (Torch's pdict["name"] = t), = nil takes it out, as pop
        pd.v = ordo.ones(2)
        assert.same({"w", "v"}, pd:keys())
        assert.is_true(pd.v:needs_grad())
        assert.equals(2, #pd:parameters())
        H.raises(function() pd["x.y"] = ordo.zeros(1) end, "ParameterDict: cannot use \"x.y\"")
        H.raises(function() pd.keys = ordo.zeros(1) end, "ParameterDict: cannot use \"keys\"")
        pd.v = nil
        assert.same({"w"}, pd:keys())
        assert.equals(1, #pd:parameters())
        assert.same({1}, pd:pop("w"):shape())
        assert.same({}, pd:keys())
        assert.same({}, pd:state_dict())
        H.raises(function() nn.ParameterDict({3}) end, "ParameterDict", "cannot use")
        -- Torch's names for a ParameterList ("pl.0", "pl.1") get the hint of its numbering from 0
        local Owner = nn.Module:extend("PLOwner")
        function Owner:init() self.pl = nn.ParameterList({ordo.zeros(2), ordo.zeros(3)}) end
        H.raises(function() Owner():load_state_dict({["pl.0"] = ordo.ones(2), ["pl.1"] = ordo.ones(3)}) end,
                 "pl.1 is of shape 3 in the state dict, the module's is of shape 2",
                 "ParameterList from 0, ordo from 1")
        -- the same for a Sequential whose Torch "1.weight" meets ordo's of another shape
        H.raises(function()
            nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1)):load_state_dict(
                {["0.weight"] = ordo.zeros(3, 2), ["0.bias"] = ordo.zeros(3), ["1.weight"] = ordo.zeros(1, 3),
                 ["1.bias"] = ordo.zeros(1)})
        end, "1.weight is of shape 1x3 in the state dict", "Sequential, ModuleList or ParameterList from 0")
    end)

    it("Sequential/ModuleList extend, insert, pop; ModuleDict update, pop, values, items", function()
        local function kinds(c)
            local r = {}
            for i = 1, c:size() do r[i] = c[i]._class_name end
            return table.concat(r, ",")
        end
        local s = nn.Sequential(nn.ReLU())
        assert.equals(s, s:extend({nn.Tanh(), nn.Linear(2, 2)}))
        assert.equals("ReLU,Tanh,Linear", kinds(s))
        s:insert(1, nn.Sigmoid())
        s:insert(-1, nn.ELU()) -- (before the last, as Python's list.insert)
        s:insert(6, nn.GELU())
        assert.equals("Sigmoid,ReLU,Tanh,ELU,Linear,GELU", kinds(s))
        assert.equals("ReLU", s:pop(2)._class_name)
        assert.equals("GELU", s:pop()._class_name)
        assert.equals("Sigmoid,Tanh,ELU,Linear", kinds(s))
        assert.equals(4, #s) -- (integer keys 1..n, no stale one after a pop)
        assert.is_nil(rawget(s, 5))
        local names = {}
        for _, e in ipairs(s:state_dict()) do names[#names + 1] = e.name end
        assert.same({"4.weight", "4.bias"}, names)
        assert.same({3, 2}, s(ordo.randn(3, 2)):shape())
        local l = nn.ModuleList({nn.ReLU()})
        l:extend(nn.ModuleList({nn.Tanh()})):extend(s)
        assert.equals("ReLU,Tanh,Sigmoid,Tanh,ELU,Linear", kinds(l))
        H.raises(function() l:extend({nn.ReLU(), 3}) end, "ModuleList: extend: module 2 must be a module", "number")
        assert.equals(6, l:size()) -- (nothing of it added)
        H.raises(function() l:extend(3) end, "ModuleList: extend: expected a list of modules")
        H.raises(function() l:extend({a = nn.ReLU()}) end, "ModuleList", "key 'a'")
        H.raises(function() l:insert(9, nn.ReLU()) end, "ModuleList: insert: index 9 out of range 1..7")
        H.raises(function() l:insert(1, 3) end, "ModuleList: insert: expected a module, got number")
        H.raises(function() nn.ModuleList():pop() end, "ModuleList: pop: it is empty")
        H.raises(function() l:pop(7) end, "ModuleList: index 7 out of range")
        -- the class's extend still makes a subclass
        local Block = nn.Sequential:extend("ExtBlock")
        function Block:init() nn.Sequential.init(self, nn.ReLU()) end
        local b = Block()
        b:extend({nn.Tanh()})
        assert.equals("ReLU,Tanh", kinds(b))
        assert.equals("Sub", Block:extend("Sub")._class_name)
        local d = nn.ModuleDict({a = nn.ReLU()})
        d:update({c = nn.Tanh(), b = nn.Linear(2, 2)})
        assert.same({"a", "b", "c"}, d:keys())
        assert.equals(3, d:size())
        assert.equals(3, #d:values())
        assert.equals("b", d:items()[2][1])
        assert.equals("Linear", d:pop("b")._class_name)
        assert.same({"a", "c"}, d:keys())
        assert.equals(0, #d:parameters())
        H.raises(function() d:pop("zz") end, "ModuleDict: no module named zz")
        H.raises(function() d:update({x = 3}) end, "ModuleDict: update: x must be a module")
        H.raises(function() d:update({["a.b"] = nn.ReLU()}) end, "ModuleDict: cannot use a.b")
        assert.same({"a", "c"}, d:keys())
        -- seq[i] = 5 on a module in place is a plain assignment; insert then moved the modules before it up
        -- and failed on it (add_module: 3 must be a module), the container half renumbered
        local q = nn.Sequential(nn.ReLU(), nn.Tanh(), nn.Sigmoid())
        q[2] = 5
        H.raises(function() q:insert(1, nn.ELU()) end, "Sequential: module 2 is number, not a module", "seq[2] =")
        H.raises(function() q:pop() end, "Sequential: module 2 is number, not a module")
        H.raises(function() nn.ModuleList():extend(q) end, "Sequential: module 2 is number")
        assert.equals(3, #q)
        assert.equals("ReLU", q[1]._class_name)
        assert.equals("Sigmoid", q[3]._class_name)
        q[2] = nn.GELU()
        assert.equals("ELU,ReLU,GELU,Sigmoid", kinds(q:insert(1, nn.ELU())))
    end)

    it("load_state_dict(sd, false) is strict = false, as Torch's positional strict", function()
        local m = nn.Linear(2, 2)
        local sd = m:state_dict()
        table.remove(sd, 2)
        local missing, unexpected = m:load_state_dict(sd, false)
        assert.same({"bias"}, missing)
        assert.same({}, unexpected)
        H.raises(function() m:load_state_dict(sd, true) end, "load_state_dict: the state dict has no tensor named bias")
    end)

    it("Softmax2d, Dropout1d, Dropout3d", function()
        local x = ordo.randn(2, 3, 4, 4)
        local y = nn.Softmax2d()(x)
        H.close(x:softmax(2):totable(), y:totable(), 1e-6)
        H.close(x[1]:softmax(1):totable(), nn.Softmax2d()(x[1]):totable(), 1e-6)
        H.raises(function() nn.Softmax2d()(ordo.randn(3, 4)) end, "Softmax2d: expected a 4-D input", "3x4")
        local d1 = nn.Dropout1d(0.5)
        local z = d1(ordo.ones(4, 8, 5))
        -- whole channels: each (n, c) row all 0 or all 2
        for _, plane in ipairs(z:totable()) do
            for _, row in ipairs(plane) do
                for j = 2, 5 do assert.equals(row[1], row[j]) end
                assert.is_true(row[1] == 0 or row[1] == 2)
            end
        end
        assert.same({8, 5}, d1(ordo.ones(8, 5)):shape())
        H.raises(function() d1(ordo.ones(2, 3, 4, 5)) end, "Dropout1d: expected a 3-D input (N, C, L) or a 2-D one")
        local d3 = nn.Dropout3d(0.5)
        local w = d3(ordo.ones(2, 3, 2, 2, 2))
        local per = w:sum({3, 4, 5}):totable()
        for _, r in ipairs(per) do for _, v in ipairs(r) do assert.is_true(v == 0 or v == 16) end end
        H.raises(function() d3(ordo.ones(2, 3)) end, "Dropout3d: expected a 5-D input")
        d3:eval()
        assert.equals(8, d3(ordo.ones(1, 2, 2, 2)):sum():item())
        assert.same({2, 3}, F.dropout1d(ordo.ones(2, 3), 0.3, false):shape())
    end)

    it("nn.utils.parameters_to_vector and vector_to_parameters, as Torch's", function()
        local m = nn.Linear(3, 2)
        local v = nn.utils.parameters_to_vector(m:parameters())
        assert.same({8}, v:shape())
        assert.same(m.weight:reshape(-1):totable(), v:narrow(1, 1, 6):totable())
        v:sum():backward() -- (gradients flow back)
        assert.same({{1, 1, 1}, {1, 1, 1}}, m.weight.grad:totable())
        nn.utils.vector_to_parameters(ordo.arange(8), m:parameters())
        assert.same({{0, 1, 2}, {3, 4, 5}}, m.weight:totable())
        assert.same({6, 7}, m.bias:totable())
        assert.is_true(m.weight:is_leaf() and m.weight:needs_grad())
        H.raises(function() nn.utils.vector_to_parameters(ordo.arange(7), m:parameters()) end,
                 "vector_to_parameters: vec has 7 values, the parameters 8")
        assert.same({6, 7}, m.bias:totable()) -- (untouched)
        H.raises(function() nn.utils.vector_to_parameters(ordo.zeros(2, 4), m:parameters()) end,
                 "vector_to_parameters: vec must have 1 dim")
        H.raises(function() nn.utils.vector_to_parameters(3, m:parameters()) end, "vec must be a tensor")
        H.raises(function() nn.utils.parameters_to_vector({m.weight, 3}) end,
                 "parameters_to_vector: parameter 2 is number, expected a tensor")
        H.raises(function() nn.utils.parameters_to_vector({}) end, "parameters_to_vector: expected at least one")
        H.raises(function() nn.utils.parameters_to_vector(5) end, "parameters_to_vector: expected a list of parameters")
        assert.same({2}, nn.utils.parameters_to_vector(m.bias):shape())
    end)

    it("init.sparse_: N(0, std) with ceil(sparsity * rows) zeros in each column, as Torch's", function()
        ordo.manual_seed(3)
        local w = ordo.empty(10, 6)
        assert.equals(w, nn.init.sparse_(w, 0.25))
        assert.same({3, 3, 3, 3, 3, 3}, w:eq(0):sum(1):totable())
        assert.is_true(w:abs():max():item() < 0.1) -- (std 0.01)
        -- the zeros are at random rows: not the same rows in every column
        local z = w:eq(0):totable()
        local same = true
        for c = 2, 6 do for r = 1, 10 do if z[r][c] ~= z[r][1] then same = false end end end
        assert.is_false(same)
        local b = ordo.empty(5, 3, "float64")
        nn.init.sparse_(b, 0, 1)
        assert.equals(0, b:eq(0):sum():item())
        nn.init.sparse_(b, 1)
        assert.equals(0, b:abs():sum():item())
        H.raises(function() nn.init.sparse_(ordo.empty(3), 0.1) end, "init.sparse_: only 2-dim tensors", "shape 3")
        H.raises(function() nn.init.sparse_(ordo.empty(3, 3), 2) end, "init.sparse_: sparsity must be a number in [0, 1]")
        H.raises(function() nn.init.sparse_(ordo.empty(3, 3), 0.1, -1) end, "init.sparse_: std must be")
        H.raises(function() nn.init.sparse_(ordo.empty(3, 3, "int64"), 0.1) end, "init.sparse_: dtype int64")
    end)

    it("Bilinear and ChannelShuffle, as Torch's", function()
        ordo.manual_seed(5)
        local m = nn.Bilinear(3, 2, 4, D)
        assert.same({4, 3, 2}, m.weight:shape())
        assert.same({4}, m.bias:shape())
        assert.is_true(m.weight:abs():max():item() <= 1 / math.sqrt(3))
        local x1, x2 = ordo.randn(5, 3, D), ordo.randn(5, 2, D)
        local y = m(x1, x2)
        assert.same({5, 4}, y:shape())
        local W, b, a, c, got = m.weight:totable(), m.bias:totable(), x1:totable(), x2:totable(), y:totable()
        for n = 1, 5 do
            for o = 1, 4 do
                local r = b[o]
                for i = 1, 3 do for j = 1, 2 do r = r + a[n][i] * W[o][i][j] * c[n][j] end end
                close(r, got[n][o], 1e-12)
            end
        end
        assert.is_true(ag.gradcheck(function(p, q, w, bb) return F.bilinear(p, q, w, bb) end,
                                    {x1:requires_grad(), x2:requires_grad(), m.weight, m.bias}))
        assert.same({2, 5, 4}, m(ordo.randn(2, 5, 3, D), ordo.randn(2, 5, 2, D)):shape())
        assert.is_nil(nn.Bilinear(3, 2, 4, {bias = false}).bias)
        H.raises(function() m(x1, ordo.randn(4, 2, D)) end, "Bilinear: input1 5x3 and input2 4x2 must have the same")
        H.raises(function() m(x1, ordo.randn(5, 3, D)) end, "Bilinear: input2 of shape 5x3 does not match weight")
        H.raises(function() m(x1:float(), x2) end, "Bilinear", "float32", "float64")
        H.raises(function() m(x1) end, "Bilinear", "input2")
        H.raises(function() nn.Bilinear(3, 2) end, "Bilinear: out_features must be a positive integer")
        H.raises(function() nn.Bilinear(3, 2, 1, {bais = false}) end, "Bilinear", "bais")
        local cs = nn.ChannelShuffle(2)
        assert.same({0, 2, 1, 3}, cs(ordo.arange(4):view(1, 4, 1, 1)):view(-1):totable())
        assert.same({0, 2, 4, 1, 3, 5}, F.channel_shuffle(ordo.arange(6):view(1, 6, 1), 3):view(-1):totable())
        H.raises(function() cs(ordo.zeros(1, 3, 2)) end, "ChannelShuffle: the 3 channels cannot be split into 2 groups")
        H.raises(function() cs(ordo.zeros(3, 2)) end, "ChannelShuffle: expected an input of 3 dims or more")
        H.raises(function() nn.ChannelShuffle(0) end, "ChannelShuffle: groups must be a positive integer")
    end)

    it("AlphaDropout and FeatureAlphaDropout keep mean 0 and variance 1, as Torch's", function()
        ordo.manual_seed(1)
        local x = ordo.randn(200000, D)
        local y = nn.AlphaDropout(0.2)(x)
        assert.is_true(math.abs(y:mean():item()) < 0.01)
        assert.is_true(math.abs(y:std():item() - 1) < 0.01)
        -- two values only where x is constant: kept ones a·x + b, dropped ones the saturation
        local a = 1 / math.sqrt((1.7580993408473766 ^ 2 * 0.5 + 1) * 0.5)
        local vals = {}
        for _, v in ipairs(nn.AlphaDropout(0.5)(ordo.ones(1000, D)):totable()) do vals[string.format("%.9f", v)] = true end
        local want = {[string.format("%.9f", a + 1.7580993408473766 * a * 0.5)] = true,
                      [string.format("%.9f", -1.7580993408473766 * a * 0.5)] = true}
        assert.same(want, vals)
        local m = nn.AlphaDropout(0.5)
        m:eval()
        assert.equals(x, m(x))
        assert.equals(x, F.alpha_dropout(x, 0.5)) -- (Torch's F default: training = false)
        local f = nn.FeatureAlphaDropout(0.5)(ordo.ones(2, 4, 3)):totable()
        for _, plane in ipairs(f) do for _, row in ipairs(plane) do
            assert.equals(row[1], row[2])
            assert.equals(row[1], row[3])
        end end
        H.raises(function() nn.FeatureAlphaDropout(0.5)(ordo.ones(3)) end, "FeatureAlphaDropout: expected an input of 2 dims")
        H.raises(function() nn.AlphaDropout(2) end, "AlphaDropout: p must be a number in [0, 1]")
        assert.same({0, 0, 0}, nn.AlphaDropout(1)(ordo.ones(3)):totable())
    end)

    it("m:type(dtype) is m:to(dtype); half and bfloat16 say ordo has no 16-bit floats", function()
        local m = nn.Linear(2, 2)
        assert.equals(m, m:type("float64"))
        assert.equals("float64", m.weight:dtype())
        H.raises(function() m:type(3) end, "type: expected a dtype")
        H.raises(function() m:type("int64") end, "to: a module's dtype must be float32 or float64")
        H.raises(function() m:half() end, "half: ordo has no 16-bit float dtype", "m:float()")
        H.raises(function() m:bfloat16() end, "bfloat16: ordo has no 16-bit float dtype")
        H.raises(function() ordo.zeros(2):half() end, "half: ordo has no 16-bit float dtype", "t:float()")
        H.raises(function() ordo.zeros(2):bfloat16() end, "bfloat16: ordo has no 16-bit float dtype")
        assert.equals("float64", m.weight:dtype()) -- (left as it was)
    end)

    it("LocalResponseNorm (F.local_response_norm) against plain Lua, as Torch's", function()
        ordo.manual_seed(2)
        local x = ordo.randn(2, 6, 3, D)
        local a = x:totable()
        local function ref(size, alpha, beta, k)
            local r = {}
            for n = 1, 2 do
                r[n] = {}
                for c = 1, 6 do
                    r[n][c] = {}
                    for l = 1, 3 do
                        local s = 0
                        for cc = c - math.floor(size / 2), c + math.floor((size - 1) / 2) do
                            if cc >= 1 and cc <= 6 then s = s + a[n][cc][l] ^ 2 end
                        end
                        r[n][c][l] = a[n][c][l] / (k + alpha / size * s) ^ beta
                    end
                end
            end
            return r
        end
        H.close(ref(3, 0.5, 0.75, 2), nn.LocalResponseNorm(3, 0.5, 0.75, 2)(x):totable(), 1e-12)
        H.close(ref(4, 1, 1, 1), F.local_response_norm(x, 4, 1, 1, 1):totable(), 1e-12)
        H.close(ref(2, 1e-4, 0.5, 1), nn.LocalResponseNorm(2, {beta = 0.5})(x):totable(), 1e-12)
        H.close(ref(5, 1e-4, 0.75, 1), nn.LocalResponseNorm(5)(x):totable(), 1e-12)
        assert.is_true(ag.gradcheck(function(v) return F.local_response_norm(v, 3, 0.5) end, {x:requires_grad()}))
        H.raises(function() nn.LocalResponseNorm(0) end, "LocalResponseNorm: size must be an integer >= 1")
        H.raises(function() nn.LocalResponseNorm(2, {alpha = "x"}) end, "LocalResponseNorm: alpha must be a number")
        H.raises(function() nn.LocalResponseNorm(2, {gamma = 1}) end, "LocalResponseNorm: unknown option 'gamma'")
        H.raises(function() nn.LocalResponseNorm(2)(ordo.zeros(2, 3)) end, "LocalResponseNorm: expected an input of 3 dims")
        H.raises(function() nn.LocalResponseNorm(2)(ordo.zeros(2, 3, 1, "int64")) end,
                 "LocalResponseNorm: input must be float32 or float64")
    end)

    it("3-d and circular pad layers; F.pad's positional mode and value, as Torch's", function()
        local v = ordo.arange(3):view(1, 1, 3)
        assert.same({2, 0, 1, 2, 0}, F.pad(v, {1, 1}, "circular"):view(-1):totable())
        assert.same({9, 0, 1, 2, 9, 9}, F.pad(v, {1, 2}, "constant", 9):view(-1):totable())
        assert.same({1, 0, 1, 2, 1}, F.pad(v, {1, 1}, "reflect"):view(-1):totable())
        H.raises(function() F.pad(v, {1, 1}, "bogus") end, "pad: mode must be constant, reflect, replicate or circular")
        H.raises(function() F.pad(v, {1, 1}, "constant", "x") end, "pad: after the mode, expected the value")
        assert.same({2, 0, 1, 2, 0}, nn.CircularPad1d(1)(v):view(-1):totable())
        local cube = ordo.arange(8):view(1, 1, 2, 2, 2)
        for _, name in ipairs({"ZeroPad3d", "ReflectionPad3d", "ReplicationPad3d", "CircularPad3d"}) do
            local y = nn[name](1)(cube)
            assert.same({1, 1, 4, 4, 4}, y:shape())
            local mode = ({ZeroPad3d = "constant", ReflectionPad3d = "reflect", ReplicationPad3d = "replicate",
                           CircularPad3d = "circular"})[name]
            assert.same(F.pad(cube, {1, 1, 1, 1, 1, 1}, {mode = mode}):totable(), y:totable())
        end
        assert.equals(14, nn.ConstantPad3d({1, 0, 1, 0, 1, 0}, 2)(ordo.zeros(1, 1, 1, 1, 1)):sum():item())
        assert.same(F.pad(ordo.arange(4):view(1, 1, 2, 2), {1, 1, 1, 1}, {mode = "circular"}):totable(),
                    nn.CircularPad2d(1)(ordo.arange(4):view(1, 1, 2, 2)):totable())
        H.raises(function() nn.ZeroPad3d({1, 1}) end, "ZeroPad3d: expected a padding size or 6 of them, got 2")
    end)

    it("nn.Buffer(t [, persistent]) assigned to a new field registers a buffer, as Torch's", function()
        local Net = nn.Module:extend("BufNet")
        function Net:init()
            self.mask = nn.Buffer(ordo.ones(3))
            self.tmp = nn.Buffer(ordo.zeros(2), false)
            self.w = nn.Parameter(ordo.ones(3))
        end
        function Net:forward(x) return x * self.mask * self.w end
        local net = Net()
        local names = {}
        for _, e in ipairs(net:named_buffers()) do names[#names + 1] = e.name end
        assert.same({"mask", "tmp"}, names)
        names = {}
        for _, e in ipairs(net:state_dict()) do names[#names + 1] = e.name end
        assert.same({"w", "mask"}, names) -- (tmp is not persistent)
        assert.equals(1, #net:parameters())
        net:double()
        assert.equals("float64", net.mask:dtype())
        assert.equals("float64", net.tmp:dtype())
        H.raises(function() nn.Buffer(3) end, "nn.Buffer: expected a tensor, got number")
        H.raises(function() nn.Buffer(ordo.zeros(1), 1) end, "nn.Buffer: persistent must be a boolean")
        H.raises(function() Net().parameters = nn.Buffer(ordo.zeros(1)) end,
                 "register_buffer: parameters is the name of a method")
    end)

    it("EmbeddingBag and F.embedding_bag (offsets from 1), as Torch's", function()
        local w = ordo.arange(12, D):view(6, 2) -- row i: {2(i-1), 2(i-1)+1}
        local inp = ordo.tensor({1, 3, 2, 6, 5}, "int64")
        local off = ordo.tensor({1, 3, 3}, "int64") -- bags {1, 3}, {}, {2, 6, 5}
        assert.same({{4, 6}, {0, 0}, {20, 23}}, F.embedding_bag(inp, w, off, {mode = "sum"}):totable())
        H.close({{2, 3}, {0, 0}, {20 / 3, 23 / 3}}, F.embedding_bag(inp, w, off):totable(), 1e-12)
        assert.same({{4, 5}, {0, 0}, {10, 11}}, F.embedding_bag(inp, w, off, {mode = "max"}):totable())
        assert.same({{2, 4}, {10, 12}}, F.embedding_bag(ordo.tensor({{1, 2}, {3, 4}}, "int64"), w, {mode = "sum"}):totable())
        assert.same({{4, 6}, {20, 23}}, F.embedding_bag(inp, w, ordo.tensor({1, 3, 6}, "int64"),
                                                        {mode = "sum", include_last_offset = true}):totable())
        assert.same({{8, 11}, {0, 0}, {18, 20}}, F.embedding_bag(inp, w, off,
            {mode = "sum", per_sample_weights = ordo.tensor({1, 2, 0, 1, 1}, D)}):totable())
        local m = nn.EmbeddingBag(6, 2, {mode = "sum"})
        assert.same({3, 2}, m(inp, off):shape())
        m(inp, off):sum():backward()
        assert.same({{1, 1}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, {1, 1}}, m.weight.grad:totable())
        assert.same({2, 2}, nn.EmbeddingBag(6, 2)(ordo.tensor({{1, 2}, {3, 4}}, "int64")):shape())
        H.raises(function() F.embedding_bag(inp, w) end, "embedding_bag: a 1-D input needs offsets")
        H.raises(function() F.embedding_bag(inp, w, ordo.tensor({2}, "int64")) end, "the first offset must be 1")
        H.raises(function() F.embedding_bag(inp, w, ordo.tensor({1, 4, 3}, "int64")) end,
                 "offsets must be non-decreasing and within 1..6, got 3 at 3")
        H.raises(function() F.embedding_bag(inp, w, off, {mode = "avg"}) end, "mode must be \"sum\", \"mean\" or \"max\"")
        H.raises(function() F.embedding_bag(inp, w, off, {per_sample_weights = ordo.ones(5, D)}) end,
                 "per_sample_weights are only supported with mode \"sum\"")
        H.raises(function() F.embedding_bag(inp, w, off, {mode = "sum", per_sample_weights = ordo.ones(4, D)}) end,
                 "per_sample_weights must have the input's shape 5")
        H.raises(function() F.embedding_bag(ordo.tensor({{1}}, "int64"), w, off) end, "offsets are for a 1-D input")
        H.raises(function() F.embedding_bag(inp:float(), w, off) end, "indices must be int64 or int32")
        H.raises(function() nn.EmbeddingBag(3, 2, {mode = "avg"}) end, "EmbeddingBag: mode must be")
        H.raises(function() nn.EmbeddingBag(3, 2, {padding_idx = 1}) end, "EmbeddingBag", "padding_idx")
    end)

    it("Identity and ModuleList", function()
        local x = ordo.randn({2, 3})
        assert.equals(x, nn.Identity()(x))
        assert.equals(x, nn.Identity(54, {unused = 0.1})(x)) -- (Torch's: any arguments, unused)
        local Net = nn.Module:extend("ListNet")
        function Net:init()
            self.layers = nn.ModuleList({nn.Linear(3, 4), nn.Linear(4, 4)})
            self.layers:append(nn.Linear(4, 2))
        end
        function Net:forward(h)
            for _, layer in self.layers:ipairs() do h = layer(h):tanh() end
            return h
        end
        local net = Net()
        assert.equals(3, net.layers:size())
        assert.equals(6, #net:parameters())
        assert.same({2, 2}, net(x):shape())
        local names = {}
        for _, np in ipairs(net:named_parameters()) do names[#names + 1] = np.name end
        assert.equals("layers.3.bias", names[6])
        local ok, err = pcall(net.layers.get, net.layers, 4)
        assert.is_false(ok)
        assert.matches("ModuleList: index 4 out of range 1..3", err, 1, true)
        -- negative indices count from the end (Torch's m[-1]); Sequential:get checks too (it gave nil)
        assert.equals(net.layers:get(3), net.layers:get(-1))
        H.raises(function() net.layers:get(-4) end, "ModuleList: index -4 out of range")
        local seq = nn.Sequential(nn.ReLU(), nn.Tanh())
        assert.equals("Tanh", seq:get(-1)._class_name)
        assert.equals("ReLU", seq:get(-2)._class_name)
        H.raises(function() seq:get(3) end, "Sequential: index 3 out of range 1..2")
        H.raises(function() seq:get(0) end, "Sequential: index 0 out of range")
        H.raises(function() seq:get("1") end, "Sequential: index \"1\" out of range")
        -- seq[i] is seq:get(i) (it was nil), seq[i] = m replaces the i-th module in its place
        -- (it added a child named 1 after the others); list[i] the same
        assert.equals(seq:get(1), seq[1])
        assert.equals(seq:get(-1), seq[-1])
        assert.equals(net.layers:get(2), net.layers[2])
        H.raises(function() return seq[3] end, "Sequential: index 3 out of range 1..2")
        local lin = nn.Linear(3, 3)
        seq[1] = lin
        assert.equals(lin, seq:get(1))
        assert.equals(2, seq:size())
        assert.same({"1.weight", "1.bias"}, {seq:named_parameters()[1].name, seq:named_parameters()[2].name})
        assert.same({2, 3}, seq(x):shape())
        H.raises(function() seq[3] = nn.ReLU() end, "Sequential: index 3 out of range 1..2")
        -- (seq[2] = 5 over a module in place is a plain assignment, no metamethod sees it: the forward names it)
        seq[2] = 5
        H.raises(function() seq(x) end, "Sequential: module 2 is number, not a module")
        seq[2] = nn.Tanh()
        -- the modules sit at keys 1..n: Lua's # and ipairs see them, as Torch's len(seq) and for m in seq
        -- (#list was 0 and ipairs(list) ran no times: a Torch-style loop made an identity network)
        assert.equals(2, #seq)
        assert.equals(3, #net.layers)
        local seen = {}
        for i, m in ipairs(net.layers) do seen[i] = m end
        assert.same({net.layers:get(1), net.layers:get(2), net.layers:get(3)}, seen)
        seen = {}
        for i, m in ipairs(seq) do seen[i] = m._class_name end
        assert.same({"Linear", "Tanh"}, seen)
        assert.equals(seq:get(1), seq["1"]) -- (the child's name, as in its parameters' names)
        -- seq["2"] = m is seq[2] = m (it made a second child "2" beside key 2: printed and saved, not run)
        local relu = nn.ReLU()
        seq["2"] = relu
        assert.is_nil(rawget(seq, "2"))
        assert.equals(relu, rawget(seq, 2))
        assert.equals(2, #seq:children())
        seq["2"] = nn.Tanh()
        -- a parameter or buffer named after a position refused (a tensor "1" hid the first module from
        -- printing, parameters and state_dict, while forward still ran it)
        H.raises(function() seq:register_parameter("1", ordo.zeros(2)) end, "register_parameter",
                 "1 is a position of the Sequential")
        H.raises(function() net.layers:register_buffer("3", ordo.zeros(2)) end, "register_buffer",
                 "3 is a position of the ModuleList")
        assert.equals(2, #seq:parameters())
        assert.equals(0, #seq:buffers())
        -- a plain Sequential runs 1..n: a named child (Torch's seq.add_module("fc", m)) would never run (it
        -- made an identity network); add_module("3") adds at the end as Torch's, one beyond n is refused (it
        -- sat at key 5 with n unchanged: never run nor counted)
        local plain = nn.Sequential()
        H.raises(function() plain:add_module("fc", nn.Linear(2, 2)) end, "add_module", "child named fc would never run",
                 "seq:add(m)")
        H.raises(function() plain.fc = nn.Linear(2, 2) end, "Sequential", "child named fc would never run")
        H.raises(function() plain:register_module("fc", nn.Linear(2, 2)) end, "register_module", "never run")
        H.raises(function() plain:add_module("0", nn.ReLU()) end, "add_module: 0 is no position of the Sequential",
                 "1..0, or 1 for a new one at the end")
        H.raises(function() plain:add_module("2", nn.ReLU()) end, "add_module: 2 is no position of the Sequential")
        assert.equals(0, #plain:children())
        plain:add_module("1", nn.Linear(2, 2))
        plain:add_module("2", nn.Tanh())
        assert.equals(2, plain:size())
        assert.equals(2, #plain)
        assert.is_true(ordo.allclose(plain(ordo.ones(1, 2)), plain[1](ordo.ones(1, 2)):tanh()))
        H.raises(function() nn.ParameterList({ordo.zeros(1)}):add_module("1", nn.ReLU()) end,
                 "add_module: 1 is a position of the ParameterList")
        -- list[i] = nil over a module in place is a plain assignment: get and ipairs name the hole (get gave nil)
        local held = net.layers[2]
        net.layers[2] = nil
        H.raises(function() net.layers:get(2) end, "ModuleList: module 2 is nil, not a module")
        H.raises(function() for _ in net.layers:ipairs() do end end, "ModuleList: module 2 is nil, not a module")
        net.layers[2] = held
        net.layers[3] = nn.Linear(4, 2)
        assert.equals(6, #net:parameters())
        ok, err = pcall(net.layers, x)
        assert.is_false(ok)
        assert.matches("ModuleList: it has no forward of its own", err, 1, true)
        -- a module that is not one raises naming the container and its place (it named add_module)
        H.raises(function() nn.Sequential(nn.ReLU(), 5) end, "Sequential: module 2 must be a module, got number")
        H.raises(function() nn.Sequential(nn.ReLU(), nil, nn.Tanh()) end, "Sequential: module 2 must be a module, got nil")
        H.raises(function() nn.ModuleList({nn.ReLU(), "x"}) end, "ModuleList: module 2 must be a module, got string")
        H.raises(function() seq:add({}) end, "Sequential: module 3 must be a module, got table")
        assert.equals(2, seq:size())
        -- seq:append(m), PyTorch's name for Torch7's seq:add(m), and a list of modules at construction
        local grown = nn.Sequential({nn.Linear(3, 4)})
        assert.equals(grown, grown:append(nn.ReLU()))
        assert.equals(2, grown:size())
        assert.equals("ReLU", grown:get(2)._class_name)
        H.raises(function() grown:append(5) end, "Sequential: module 3 must be a module, got number")
    end)

    it("nn.Module() is a plain holder of children, as Torch's (it was 'attempt to call a table value')", function()
        local m = nn.Module()
        assert.is_true(nn.is_module(m))
        m.enc = nn.Linear(2, 3)
        m:add_module("dec", nn.Linear(3, 2))
        m:register_buffer("step", ordo.zeros({}, {dtype = "int64"}))
        local names = {}
        for _, e in ipairs(m:state_dict()) do names[#names + 1] = e.name end
        assert.same({"enc.weight", "enc.bias", "dec.weight", "dec.bias", "step"}, names)
        m:eval()
        assert.is_false(m.enc.training)
        assert.equals("float64", m:double().dec.weight:dtype())
        H.raises(function() m(ordo.ones(2)) end, "Module: forward is not defined for this module")
        H.raises(function() nn.Module(3) end, "nn.Module() takes no arguments", "nn.Module:extend")
        assert.is_false(nn.is_module(nn.Module))
        assert.equals("Module\n  (enc): Linear(2 -> 3)\n  (dec): Linear(3 -> 2)", tostring(m))
    end)

    it("a subclass of Sequential or ModuleList keeps seq[i] and seq[i] = m (they were nil and a new child)", function()
        local Block = nn.Sequential:extend("Block")
        function Block:init(n)
            nn.Sequential.init(self, nn.Linear(n, n), nn.ReLU())
            self.scale = 2
        end
        function Block:forward(x) return nn.Sequential.forward(self, x) * self.scale end
        local b = Block(3)
        assert.equals(b:get(1), b[1])
        assert.equals(b:get(2), b[-1])
        assert.equals(2, b.scale)
        local lin = nn.Linear(3, 3)
        b[1] = lin
        assert.equals(lin, b:get(1))
        assert.equals(2, b:size())
        assert.equals(2, #b:parameters())
        H.raises(function() return b[3] end, "Sequential: index 3 out of range 1..2")
        local x = ordo.randn({2, 3})
        assert.is_true(ordo.allclose(b(x), lin(x):relu() * 2))
        local Deeper = Block:extend("Deeper")
        local d = Deeper(2)
        assert.equals(d:get(2), d[2])
        local L = nn.ModuleList:extend("Layers")
        local l = L({nn.Linear(2, 2)})
        assert.equals(l:get(1), l[1])
        assert.is_function(l.append)
        assert.equals("Block", b._class_name)
    end)

    it("LayerNorm normalises the last dims, with a learned scale and shift; gradcheck", function()
        local x = ordo.randn({3, 2, 4}, D)
        local ln = nn.LayerNorm({2, 4}, {dtype = "float64"})
        assert.same({2, 4}, ln.weight:shape())
        local y = ln(x):totable()
        local xt = x:totable()
        for b = 1, 3 do
            local vals = {}
            for i = 1, 2 do for j = 1, 4 do vals[#vals + 1] = xt[b][i][j] end end
            local m, v = 0, 0
            for _, a in ipairs(vals) do m = m + a / 8 end
            for _, a in ipairs(vals) do v = v + (a - m) ^ 2 / 8 end
            for i = 1, 2 do
                for j = 1, 4 do close(y[b][i][j], (xt[b][i][j] - m) / math.sqrt(v + 1e-5), 1e-9) end
            end
        end
        ordo.no_grad(function()
            ln.weight:fill_(2)
            ln.bias:fill_(1)
        end)
        local plain = nn.LayerNorm({2, 4}, {dtype = "float64", affine = false})(x)
        close(ln(x):reshape(-1):totable(), (plain * 2 + 1):reshape(-1):totable())
        local u = ordo.randn({2, 5}, D):requires_grad()
        local w, bias = ordo.randn({5}, D):requires_grad(), ordo.randn({5}, D):requires_grad()
        assert.is_true(ag.gradcheck(function(a, b, c) return F.layer_norm(a, {5}, b, c) end, {u, w, bias}))
        assert.has_error(function() nn.LayerNorm(4)(ordo.zeros(2, 5)) end)
        -- an empty batch: LayerNorm, GroupNorm and a Transformer layer give empty outputs and gradients
        local e = ordo.zeros({0, 2, 4}, D):requires_grad()
        local s0 = ln(e):sum() + nn.GroupNorm(1, 2, {dtype = "float64"})(e):sum()
        s0:backward()
        assert.same({0, 2, 4}, e.grad:shape())
        local enc = nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 8, dropout = 0})
        assert.same({3, 0, 4}, enc(ordo.zeros({3, 0, 4})):shape())
        -- F.layer_norm's weight and bias have the normalized shape (a 3 x 1 weight broadcast to 3 x 4 rows)
        H.raises(function() F.layer_norm(ordo.randn({3, 4}), {4}, ordo.ones({3, 1})) end, "layer_norm",
                 "weight of shape 3x1, expected the normalized shape 4")
        H.raises(function() F.layer_norm(ordo.randn({3, 4}), 4, ordo.ones({4}), ordo.zeros({1})) end, "layer_norm",
                 "bias of shape 1")
        assert.equals(2, #nn.LayerNorm(3):parameters())
        assert.equals(0, #nn.LayerNorm(3, {affine = false}):parameters())
    end)

    it("RMSNorm / F.rms_norm (Torch's): x over the root mean square of its last dims, eps the dtype's epsilon", function()
        local x = ordo.randn({2, 3, 4}, D)
        local m = nn.RMSNorm({3, 4}, {dtype = "float64"})
        assert.equals("RMSNorm(3x4, eps = None)", tostring(m))
        assert.same({3, 4}, m.weight:shape())
        local y, xt = m(x):totable(), x:totable()
        for b = 1, 2 do
            local ss = 0
            for i = 1, 3 do for j = 1, 4 do ss = ss + xt[b][i][j] ^ 2 end end
            local r = math.sqrt(ss / 12 + 2.220446049250313e-16) -- float64's machine epsilon
            for i = 1, 3 do for j = 1, 4 do close(y[b][i][j], xt[b][i][j] / r, 1e-12) end end
        end
        local w = ordo.randn({4}, D)
        close(F.rms_norm(x, 4, w, 0.5):reshape(-1):totable(),
              (x / ((x * x):mean(-1, true) + 0.5):sqrt() * w):reshape(-1):totable(), 1e-12)
        assert.is_true(ag.gradcheck(function(a, ww) return F.rms_norm(a, 4, ww, 1e-3) end,
                                    {x:clone():requires_grad(), w:clone():requires_grad()}))
        assert.equals(0, #nn.RMSNorm(4, {elementwise_affine = false}):parameters())
        H.raises(function() F.rms_norm(x, {4, 3}) end, "rms_norm", "does not end in the normalized shape 4x3")
        H.raises(function() F.rms_norm(x, 4, ordo.ones({3}, D)) end, "rms_norm", "weight of shape 3")
        H.raises(function() nn.RMSNorm(4, {eps = -1}) end, "RMSNorm: option eps must be a non-negative number")
    end)

    it("Embedding gives the rows at the indices (from 1), in the indices' shape; gradients reach the rows", function()
        local e = nn.Embedding(6, 3, {dtype = "float64"})
        local idx = ordo.tensor({{1, 6}, {6, 2}}, "int64")
        local y = e(idx)
        assert.same({2, 2, 3}, y:shape())
        local w = e.weight:totable()
        close(y:totable()[1][2], w[6])
        close(y:totable()[2][2], w[2])
        y:sum():backward()
        local g = e.weight.grad:totable()
        assert.same({1, 1, 1}, g[1])
        assert.same({2, 2, 2}, g[6])
        assert.same({0, 0, 0}, g[3])
        assert.has_error(function() e(ordo.tensor({1.5})) end)
        -- padding_idx: its row starts at zeros, comes out as it is (zeros) and gets no gradient
        local p = nn.Embedding(4, 2, {padding_idx = 3, dtype = "float64"})
        assert.same({0, 0}, p.weight:totable()[3])
        local out = p(ordo.tensor({3, 1, 3}, "int64"))
        assert.same({0, 0}, out:totable()[1])
        ;(out * 5):sum():backward()
        assert.same({{5, 5}, {0, 0}, {0, 0}, {0, 0}}, p.weight.grad:totable())
        H.raises(function() nn.Embedding(4, 2, {padding_idx = 0}) end, "Embedding", "padding_idx", "1..4")
        -- Torch's negative padding_idx counts from the end (-1: the last row), kept as the row it names
        local neg = nn.Embedding(4, 2, {padding_idx = -1, dtype = "float64"})
        assert.equals(4, neg.padding_idx)
        assert.same({0, 0}, neg.weight:totable()[4])
        neg(ordo.tensor({4, 1}, "int64")):sum():backward()
        assert.same({{1, 1}, {0, 0}, {0, 0}, {0, 0}}, neg.weight.grad:totable())
        assert.equals(1, nn.Embedding(4, 2, {padding_idx = -4}).padding_idx)
        H.raises(function() nn.Embedding(4, 2, {padding_idx = -5}) end, "Embedding", "-4..-1", "got -5")
        -- from_pretrained with padding_idx: the pretrained row comes out as it is (Torch's), without a gradient
        local pe = nn.Embedding.from_pretrained(ordo.tensor({{1, 2}, {3, 4}, {5, 6}}, D), {padding_idx = 2, freeze = false})
        local po = pe(ordo.tensor({2, 1, 2, 3}, "int64"))
        assert.same({{3, 4}, {1, 2}, {3, 4}, {5, 6}}, po:totable())
        po:sum():backward()
        assert.same({{1, 1}, {0, 0}, {1, 1}}, pe.weight.grad:totable())
        -- from_pretrained: the given table, frozen unless asked otherwise
        local table_ = ordo.randn({5, 2}, D)
        local fe = nn.Embedding.from_pretrained(table_)
        assert.same(table_:totable()[4], fe(ordo.tensor({4}, "int64")):totable()[1])
        assert.is_false(fe.weight:needs_grad())
        assert.is_true(nn.Embedding.from_pretrained(table_, {freeze = false}).weight:needs_grad())
        H.raises(function() nn.Embedding.from_pretrained(ordo.zeros(3)) end, "from_pretrained", "2-D")
    end)

    it("L1Loss and BCEWithLogitsLoss against plain Lua, stable for large logits; gradcheck", function()
        local a = ordo.tensor({1, -2, 3}, D)
        local b = ordo.tensor({0, 0, 1}, D)
        close(nn.L1Loss()(a, b):item(), (1 + 2 + 2) / 3)
        close(nn.L1Loss({reduction = "sum"})(a, b):item(), 5)
        local logits = ordo.tensor({-3, 0.5, 2, 800, -800}, D)
        local t = ordo.tensor({0, 1, 1, 1, 0}, D)
        local want = 0
        for i, z in ipairs(logits:totable()) do
            local y = t:totable()[i]
            local p = 1 / (1 + math.exp(-z))
            local l
            if math.abs(z) > 30 then l = (z > 0 and (1 - y) * z) or (-y * z) -- the limit: no log(0)
            else l = -(y * math.log(p) + (1 - y) * math.log(1 - p)) end
            want = want + l / 5
        end
        close(nn.BCEWithLogitsLoss()(logits, t):item(), want, 1e-9)
        local x = ordo.randn({4}, D):requires_grad()
        local y = ordo.tensor({0, 1, 0.3, 1}, D)
        assert.is_true(ag.gradcheck(function(u) return F.binary_cross_entropy_with_logits(u, y) end, {x}))
        assert.is_true(ag.gradcheck(function(u) return F.l1_loss(u, y) end, {x}))
        assert.has_error(function() nn.BCEWithLogitsLoss()(x, ordo.zeros(3)) end)
    end)

    it("BCEWithLogitsLoss weight and pos_weight, BCELoss weight: Torch's formulas against plain Lua; gradcheck", function()
        local X = {{0.3, -1.2, 2.0}, {-0.5, 0.0, 4.0}}
        local Y = {{1, 0, 0.3}, {0, 1, 1}}
        local W, PW = {0.5, 2, 1}, {3, 0.5, 2}
        local function sig(v) return 1 / (1 + math.exp(-v)) end
        local with_pw, plain = 0, 0
        for i = 1, 2 do
            for j = 1, 3 do
                local p, y = sig(X[i][j]), Y[i][j]
                with_pw = with_pw - W[j] * (PW[j] * y * math.log(p) + (1 - y) * math.log(1 - p))
                plain = plain - W[j] * (y * math.log(p) + (1 - y) * math.log(1 - p))
            end
        end
        local x, y = ordo.tensor(X, D), ordo.tensor(Y, D)
        local w, pw = ordo.tensor(W, D), ordo.tensor(PW, D)
        close(F.binary_cross_entropy_with_logits(x, y, {weight = w, pos_weight = pw, reduction = "sum"}):item(), with_pw)
        close(nn.BCEWithLogitsLoss({weight = w, pos_weight = pw})(x, y):item(), with_pw / 6)
        close(nn.BCEWithLogitsLoss({weight = w})(x, y):item(), plain / 6)
        close(nn.BCELoss({weight = w})(x:sigmoid(), y):item(), plain / 6)
        -- stable far out: a logit of -200 with target 1 costs pos_weight * 200
        close(F.binary_cross_entropy_with_logits(ordo.tensor({-200}, D), ordo.tensor({1}, D),
                                                 {pos_weight = ordo.tensor({2}, D)}):item(), 400)
        local xr = x:clone():requires_grad()
        assert.is_true(ag.gradcheck(function(u, ww)
            return F.binary_cross_entropy_with_logits(u, y, {weight = ww, pos_weight = pw})
        end, {xr, w:clone():requires_grad()}))
        assert.is_true(ag.gradcheck(function(u) return F.binary_cross_entropy(u:sigmoid(), y, {weight = w}) end, {xr}))
        H.raises(function() F.binary_cross_entropy_with_logits(x, y, {pos_weight = ordo.ones({2}, D)}) end,
                 "binary_cross_entropy_with_logits", "2x3 and 2")
        H.raises(function() F.binary_cross_entropy_with_logits(x, y, {weight = ordo.ones({3, 1, 1}, D)}) end,
                 "binary_cross_entropy_with_logits", "weight of shape 3x1x1")
        H.raises(function() F.binary_cross_entropy(x:sigmoid(), y, {weight = 3}) end, "weight must be a tensor")
        H.raises(function() nn.BCELoss({pos_weight = pw}) end, "BCELoss", "unknown option 'pos_weight'")
    end)

    it("a loss module's weight and pos_weight are its buffers, as Torch's: cast and moved with it, saved", function()
        local x = ordo.tensor({{1, 2, 0.5}, {-1, 0.3, 3}}, D)
        local y = ordo.tensor({1, 3}, "int64")
        local w = ordo.tensor({0.3, 1, 2.5}, D)
        local m = nn.CrossEntropyLoss({weight = w})
        assert.equals(w, m.weight)
        assert.same({"weight"}, {m:state_dict()[1].name})
        local want = F.cross_entropy(x, y, {weight = w}):item()
        -- m:float() casts the weight (it stayed float64, and every float32 call failed)
        m:float()
        assert.equals("float32", m.weight:dtype())
        close(m(x:float(), y):item(), want, 1e-6)
        m:double()
        assert.equals("float64", m.weight:dtype())
        close(m(x, y):item(), want, 1e-6)
        -- the weight the module holds is the one used (replaced in place, as Torch's criterion.weight)
        m.weight = ordo.ones({3}, D)
        close(m(x, y):item(), F.cross_entropy(x, y):item(), 1e-12)
        local b = nn.BCEWithLogitsLoss({pos_weight = ordo.tensor({2, 3, 4}, D), weight = ordo.tensor({1, 0.5, 2}, D)})
        local t = ordo.tensor({{1, 0, 1}, {0, 1, 1}}, D)
        local bw = F.binary_cross_entropy_with_logits(x, t, {pos_weight = b.pos_weight, weight = b.weight}):item()
        b:float()
        assert.equals("float32", b.pos_weight:dtype())
        assert.equals("float32", b.weight:dtype())
        close(b(x:float(), t:float()):item(), bw, 1e-6)
        assert.equals(2, #b:state_dict())
        assert.is_nil(nn.NLLLoss().weight)
        H.raises(function() nn.CrossEntropyLoss({weight = 2}) end, "CrossEntropyLoss: option weight must be a tensor",
                 "number")
        -- Torch's positional form, CrossEntropyLoss(weight), says where the weight goes
        H.raises(function() nn.CrossEntropyLoss(w) end, "CrossEntropyLoss: options must be a table",
                 "CrossEntropyLoss({weight = w})")
    end)

    it("BCELoss, SmoothL1Loss, HuberLoss, KLDivLoss and label smoothing against plain Lua; gradcheck", function()
        local p = ordo.tensor({0.2, 0.9, 0.5, 0, 1}, D)
        local y = ordo.tensor({0, 1, 0.3, 1, 1}, D)
        local want, n = 0, 5
        for i, pv in ipairs(p:totable()) do
            local yv = y:totable()[i]
            local lp = pv > 0 and math.max(math.log(pv), -100) or -100
            local lq = pv < 1 and math.max(math.log(1 - pv), -100) or -100
            want = want - (yv * lp + (1 - yv) * lq) / n
        end
        close(nn.BCELoss()(p, y):item(), want, 1e-12)
        local a, b = ordo.tensor({0.2, -3, 0.9, 2.5}, D), ordo.tensor({0, 0, 0, 0}, D)
        local function smooth(d, beta) d = math.abs(d) return d < beta and 0.5 * d * d / beta or d - 0.5 * beta end
        local function huber(d, delta) d = math.abs(d) return d <= delta and 0.5 * d * d or delta * (d - 0.5 * delta) end
        for _, beta in ipairs({1, 0.5, 2}) do
            local ws, wh = 0, 0
            for _, d in ipairs(a:totable()) do ws, wh = ws + smooth(d, beta), wh + huber(d, beta) end
            close(nn.SmoothL1Loss({beta = beta, reduction = "sum"})(a, b):item(), ws, 1e-12)
            close(nn.HuberLoss({delta = beta})(a, b):item(), wh / 4, 1e-12)
        end
        close(nn.SmoothL1Loss({beta = 0})(a, b):item(), (0.2 + 3 + 0.9 + 2.5) / 4, 1e-12) -- L1
        local logq = ordo.tensor({{0.1, 0.6, 0.3}, {0.5, 0.5, 0}}, D):add(1e-3):log()
        local tgt = ordo.tensor({{0.2, 0.8, 0}, {0.5, 0.25, 0.25}}, D)
        local kl, lq, tt = 0, logq:totable(), tgt:totable()
        for r = 1, 2 do
            for c = 1, 3 do
                if tt[r][c] > 0 then kl = kl + tt[r][c] * (math.log(tt[r][c]) - lq[r][c]) end
            end
        end
        close(nn.KLDivLoss({reduction = "batchmean"})(logq, tgt):item(), kl / 2, 1e-12)
        close(nn.KLDivLoss({reduction = "sum"})(logq, tgt):item(), kl, 1e-12)
        close(nn.KLDivLoss()(logq, tgt):item(), kl / 6, 1e-12)
        -- log_target = true: the target as log-probabilities, Torch's exp(t) (t - input) (0 log 0 as exp(-inf) * -inf
        -- aside: the targets here are all positive)
        local tpos = ordo.tensor({{0.1, 0.5, 0.4}, {0.2, 0.2, 0.6}}, D)
        local klp = 0
        for r = 1, 2 do
            for c = 1, 3 do klp = klp + tpos:totable()[r][c] * (math.log(tpos:totable()[r][c]) - lq[r][c]) end
        end
        close(nn.KLDivLoss({reduction = "batchmean", log_target = true})(logq, tpos:log()):item(), klp / 2, 1e-12)
        close(F.kl_div(logq, tpos:log(), {reduction = "sum", log_target = true}):item(), klp, 1e-12)
        close(F.kl_div(logq, tpos, {reduction = "sum", log_target = false}):item(), klp, 1e-12)
        assert.is_true(ag.gradcheck(function(u, v) return F.kl_div(u, v, {reduction = "batchmean", log_target = true}) end,
                                    {ordo.randn({2, 3}, D):requires_grad(), ordo.randn({2, 3}, D):requires_grad()}))
        H.raises(function() return F.kl_div(logq, tgt, {log_target = 1}) end, "kl_div", "log_target must be a boolean")
        -- label smoothing: (1 - e) nll + e * mean(-log p) over classes
        local logits = ordo.tensor({{1, 2, 0.5}, {-1, 0, 3}}, D)
        local cls = ordo.tensor({2, 3}, "int64")
        local lp = logits:log_softmax(2):totable()
        local ws = 0
        for r, c in ipairs({2, 3}) do
            ws = ws + 0.9 * -lp[r][c] + 0.1 * -(lp[r][1] + lp[r][2] + lp[r][3]) / 3
        end
        close(nn.CrossEntropyLoss({label_smoothing = 0.1})(logits, cls):item(), ws / 2, 1e-12)
        local x = ordo.tensor({0.3, 0.6, 0.8}, D):requires_grad()
        local t = ordo.tensor({0, 1, 0.5}, D)
        assert.is_true(ag.gradcheck(function(u) return F.binary_cross_entropy(u, t) end, {x}))
        assert.is_true(ag.gradcheck(function(u) return F.smooth_l1_loss(u, t, {beta = 0.5}) end, {x}))
        assert.is_true(ag.gradcheck(function(u) return F.huber_loss(u, t, {delta = 0.4}) end, {x}))
        assert.is_true(ag.gradcheck(function(u) return F.kl_div(u:log(), t) end, {x}))
        -- the target's gradient, log t + 1 - input, and 0 where the target is 0, as Torch's (was NaN there)
        local tg = ordo.tensor({0, 0.5, 0.25}, D):requires_grad()
        F.kl_div(ordo.tensor({-1, -2, -3}, D), tg, {reduction = "sum"}):backward()
        close(tg.grad:totable(), {0, math.log(0.5) + 3, math.log(0.25) + 4}, 1e-12)
        assert.is_true(ag.gradcheck(function(u, v) return F.kl_div(u, v, {reduction = "batchmean"}) end,
                                    {ordo.randn({2, 3}, D):requires_grad(), ordo.rand({2, 3}, D):add(0.1):requires_grad()}))
        H.raises(function() return nn.HuberLoss({delta = 0}) (a, b) end, "HuberLoss: delta")
        H.raises(function() return nn.SmoothL1Loss({betta = 1}) end, "SmoothL1Loss", "unknown option 'betta'")
        H.raises(function() return nn.BCELoss()(p, ordo.zeros(4)) end, "BCELoss", "4", "5")
        H.raises(function() return nn.KLDivLoss({reduction = "avg"}) end, "KLDivLoss", "batchmean", "avg")
        H.raises(function() return F.kl_div(logq, tgt, {reduction = "avg"}) end, "kl_div", "batchmean", "avg")
        -- 1 is in Torch's range [0, 1] (it raised): the loss of a uniform target, the mean of -log p over classes
        close(F.cross_entropy(logits, cls, {label_smoothing = 1}):item(),
              -(lp[1][1] + lp[1][2] + lp[1][3] + lp[2][1] + lp[2][2] + lp[2][3]) / 6, 1e-12)
        close(F.cross_entropy(logits, ordo.tensor({{0, 1, 0}, {0, 0, 1}}, D), {label_smoothing = 1}):item(),
              -(lp[1][1] + lp[1][2] + lp[1][3] + lp[2][1] + lp[2][2] + lp[2][3]) / 6, 1e-12)
        H.raises(function() return F.cross_entropy(logits, cls, {label_smoothing = 1.5}) end,
                 "cross_entropy: label_smoothing must be in [0, 1], got 1.5")
        H.raises(function() return F.cross_entropy(logits, cls, {label_smoothing = -0.1}) end, "label_smoothing")
        H.raises(function() return F.cross_entropy(logits, cls, {label_smoothing = "x"}) end, "label_smoothing",
                 "number")
    end)

    it("init helpers draw from the engine RNG (seeded) within their bounds", function()
        ordo.manual_seed(11)
        local a = nn.init.xavier_uniform_(ordo.empty({30, 20}))
        ordo.manual_seed(11)
        local b = nn.init.xavier_uniform_(ordo.empty({30, 20}))
        assert.same(a:totable(), b:totable())
        assert.is_true(a:abs():max():item() <= math.sqrt(6 / 50) + 1e-6)
        assert.equal(0, nn.init.zeros_(ordo.ones({3})):sum():item())
        -- the normal forms and kaiming's mode, Torch's standard deviations
        local t = ordo.empty({400, 500}, D)
        close(nn.init.kaiming_normal_(t):std():item(), math.sqrt(2 / 500), 0.02)
        close(nn.init.kaiming_normal_(t, 0, "fan_out"):std():item(), math.sqrt(2 / 400), 0.02)
        close(nn.init.xavier_normal_(t, 2):std():item(), 2 * math.sqrt(2 / 900), 0.02)
        close(nn.init.kaiming_uniform_(t, 0, "fan_out"):abs():max():item(), math.sqrt(6 / 400), 0.01)
        assert.is_true(t:abs():max():item() <= math.sqrt(6 / 400))
        H.raises(function() nn.init.kaiming_normal_(t, 0, "fan") end, "init.kaiming_normal_", "mode")
        H.raises(function() nn.init.xavier_normal_(t, "2") end, "init.xavier_normal_", "gain must be a finite number")
        -- (a NaN gain was reported by uniform_ as bounds "nan and nan")
        H.raises(function() nn.init.xavier_uniform_(t, 0 / 0) end, "init.xavier_uniform_", "gain", "nan")
    end)

    it("init: calculate_gain and kaiming's nonlinearity as Torch's; fans named by the caller; empty tensors", function()
        local g = nn.init.calculate_gain
        for _, name in ipairs({"linear", "conv1d", "conv2d", "conv3d", "conv_transpose2d", "sigmoid"}) do
            assert.equals(1, g(name))
        end
        close(g("tanh"), 5 / 3, 1e-12)
        close(g("relu"), math.sqrt(2), 1e-12)
        close(g("selu"), 3 / 4, 1e-12)
        close(g("leaky_relu"), math.sqrt(2 / (1 + 0.01 ^ 2)), 1e-12)
        close(g("leaky_relu", 0.2), math.sqrt(2 / 1.04), 1e-12)
        H.raises(function() return g("softmax") end, "init.calculate_gain", "unsupported nonlinearity \"softmax\"")
        H.raises(function() return g("leaky_relu", "x") end, "init.calculate_gain", "slope", "string")
        -- kaiming's 4th argument (Torch's nonlinearity) was ignored: tanh's gain is 5/3, not sqrt 2
        ordo.manual_seed(4)
        local t = ordo.empty({500, 400}, D)
        close(nn.init.kaiming_normal_(t, 0, "fan_in", "tanh"):std():item(), 5 / 3 / math.sqrt(400), 0.02)
        close(nn.init.kaiming_normal_(t, 0.5, "fan_out", "relu"):std():item(), math.sqrt(2 / 500), 0.02)
        local b = math.sqrt(3) / math.sqrt(400) -- linear: gain 1
        nn.init.kaiming_uniform_(t, 0, "fan_in", "linear")
        assert.is_true(t:abs():max():item() <= b and t:abs():max():item() > 0.99 * b)
        H.raises(function() nn.init.kaiming_uniform_(t, 0, "fan_in", "relux") end, "init.kaiming_uniform_",
                 "unsupported nonlinearity")
        H.raises(function() nn.init.kaiming_uniform_(t, 0 / 0) end, "init.kaiming_uniform_", "a must be a number")
        -- a conv weight out x in/groups x kh x kw: fan_in in/groups·kh·kw, fan_out out·kh·kw
        assert.same({4 * 9, 32 * 9}, {nn.init.fan_in_out(ordo.empty({32, 4, 3, 3}))})
        -- fewer than 2 dims: the error names the function called
        H.raises(function() nn.init.kaiming_uniform_(ordo.empty({5})) end, "init.kaiming_uniform_",
                 "at least 2 dims", "shape 5")
        H.raises(function() nn.init.xavier_normal_(ordo.empty({})) end, "init.xavier_normal_", "at least 2 dims")
        -- a tensor of no elements is left as it is (a fan of 0 gave "uniform_: expected finite numbers")
        for _, f in ipairs({"kaiming_uniform_", "kaiming_normal_", "xavier_uniform_", "xavier_normal_"}) do
            assert.same({5, 0}, nn.init[f](ordo.empty({5, 0})):shape())
            assert.same({0, 0}, nn.init[f](ordo.empty({0, 0})):shape())
        end
    end)

    it("init: Torch's keyword arguments as an options table; an argument past the function's own raises", function()
        -- nn.init.kaiming_normal_(w, {mode = "fan_out", nonlinearity = "relu"}) (ResNet's init) raised
        -- "a must be a number, got table"; normal_(w, 0, 0.02, 1) dropped the 1 unseen
        local t = ordo.empty({400, 500}, D)
        ordo.manual_seed(5)
        close(nn.init.kaiming_normal_(t, {mode = "fan_out", nonlinearity = "relu"}):std():item(), math.sqrt(2 / 400), 0.02)
        close(nn.init.kaiming_normal_(t, 0, {mode = "fan_out", nonlinearity = "tanh"}):std():item(),
              5 / 3 / math.sqrt(400), 0.02)
        ordo.manual_seed(6)
        local a = nn.init.kaiming_uniform_(t, {a = math.sqrt(5)}):clone()
        ordo.manual_seed(6)
        assert.same(a:totable(), nn.init.kaiming_uniform_(t, math.sqrt(5)):totable())
        close(nn.init.normal_(t, {std = 0.02}):std():item(), 0.02, 0.02)
        close(nn.init.normal_(t, {mean = 3}):mean():item(), 3, 0.01)
        close(nn.init.trunc_normal_(t, {std = 0.02}):std():item(), 0.02 * 0.8796, 0.02)
        assert.is_true(nn.init.uniform_(t, {a = 2, b = 3}):min():item() >= 2)
        assert.equals(2, nn.init.constant_(t, {val = 2}):mean():item())
        close(nn.init.xavier_normal_(t, {gain = 2}):std():item(), 2 * math.sqrt(2 / 900), 0.02)
        close(nn.init.orthogonal_(ordo.empty({4, 4}, D), {gain = 2}):pow(2):sum():item(), 16, 1e-6)
        -- (sparse_ took no options table: sparse_(w, 0.1, {std = 0.02}) raised "std must be a finite number")
        close(nn.init.sparse_(t, 0.1, {std = 0.02}):std():item(), 0.02 * math.sqrt(0.9), 0.02)
        assert.equals(400 * 500 * 0.1, nn.init.sparse_(t, {sparsity = 0.1}):eq(0):sum():item())
        H.raises(function() nn.init.sparse_(t, 0.1, {sdt = 1}) end, "init.sparse_: unknown option 'sdt'")
        H.raises(function() nn.init.sparse_(t, 0.1, 0.01, 3) end, "init.sparse_: takes (tensor, sparsity, std), got a further argument 3")
        H.raises(function() nn.init.kaiming_normal_(t, {mod = "fan_out"}) end, "init.kaiming_normal_: unknown option 'mod'",
                 "a, mode, nonlinearity")
        H.raises(function() nn.init.normal_(t, 0, {mean = 1}) end, "init.normal_: mean given twice")
        H.raises(function() nn.init.normal_(t, 0, 0.02, 1) end,
                 "init.normal_: takes (tensor, mean, std), got a further argument 1")
        H.raises(function() nn.init.zeros_(t, 5) end, "init.zeros_: takes (tensor), got a further argument 5")
        H.raises(function() nn.init.xavier_uniform_(t, 1, 2) end, "init.xavier_uniform_: takes (tensor, gain), got a further argument 2")
        assert.same({400, 500}, nn.init.normal_(t, nil, 0.5):shape()) -- (a nil in place stands for the default)
    end)

    it("init.trunc_normal_: Torch's truncated normal, within [a, b], with its moments and quantiles", function()
        ordo.manual_seed(6)
        local n = 200000
        for _, dt in ipairs({"float32", "float64"}) do
            local t = nn.init.trunc_normal_(ordo.empty({n}, dt))
            assert.equals(dt, t:dtype())
            local d = t:double()
            assert.is_true(d:min():item() >= -2 and d:max():item() <= 2)
            -- N(0, 1) kept to [-2, 2]: mean 0, variance 1 - 4 phi(2) / (Phi(2) - Phi(-2))
            local Z, phi2 = 0.9544997361036416, math.exp(-2) / math.sqrt(2 * math.pi)
            local v = 1 - 4 * phi2 / Z
            local m = d:mean():item()
            assert.is_true(math.abs(m) < 6 * math.sqrt(v / n), dt .. " mean " .. m)
            local var = ((d - m) ^ 2):mean():item()
            assert.is_true(math.abs(var - v) < 6 * math.sqrt(2 / n), dt .. " variance " .. var .. ", want " .. v)
            -- the fraction below 1: (Phi(1) - Phi(-2)) / Z
            local w = (0.8413447460685429 - 0.022750131948179195) / Z
            local f = d:lt(1):double():mean():item()
            assert.is_true(math.abs(f - w) < 6 * math.sqrt(w * (1 - w) / n), dt .. " P(x < 1) " .. f .. ", want " .. w)
        end
        -- a one-sided window: N(1, 0.25) kept to [0, 1], mean 1 - 0.5 (phi(0) - phi(-2)) / (Phi(0) - Phi(-2))
        local t = nn.init.trunc_normal_(ordo.empty({n}, "float64"), 1, 0.5, 0, 1)
        local phi = function(z) return math.exp(-z * z / 2) / math.sqrt(2 * math.pi) end
        local want = 1 - 0.5 * (phi(0) - phi(-2)) / (0.5 - 0.022750131948179195)
        assert.is_true(t:min():item() >= 0 and t:max():item() <= 1)
        assert.is_true(math.abs(t:mean():item() - want) < 6 * 0.3 / math.sqrt(n), "mean " .. t:mean():item())
        -- far in a tail: still within [a, b] and finite
        local tail = nn.init.trunc_normal_(ordo.empty({1000}), 0, 1, 5, 6)
        assert.is_true(tail:min():item() >= 5 and tail:max():item() <= 6)
        -- reproducible with the seed; a tensor of no elements is left as it is
        ordo.manual_seed(2)
        local a1 = nn.init.trunc_normal_(ordo.empty({50})):totable()
        ordo.manual_seed(2)
        assert.same(a1, nn.init.trunc_normal_(ordo.empty({50})):totable())
        assert.same({0, 3}, nn.init.trunc_normal_(ordo.empty({0, 3})):shape())
        H.raises(function() nn.init.trunc_normal_(ordo.empty({3}), 0, 0) end, "init.trunc_normal_", "std must be > 0")
        H.raises(function() nn.init.trunc_normal_(ordo.empty({3}), 0, 1, 2, 2) end, "init.trunc_normal_", "a < b")
        H.raises(function() nn.init.trunc_normal_(ordo.empty({3}), 0, 1, -1 / 0) end, "init.trunc_normal_",
                 "a must be a finite number")
        H.raises(function() nn.init.trunc_normal_(ordo.empty({3}, "int32")) end, "init.trunc_normal_", "int32")
        H.raises(function() nn.init.trunc_normal_("w") end, "init.trunc_normal_", "tensor")
    end)

    it("init.eye_: the identity of a 2-dim tensor, a parameter's too", function()
        assert.same({{1, 0, 0}, {0, 1, 0}}, nn.init.eye_(ordo.full({2, 3}, 7, "float64")):totable())
        local l = nn.Linear(3, 2)
        nn.init.eye_(l.weight)
        assert.same({{1, 0, 0}, {0, 1, 0}}, l.weight:totable())
        H.raises(function() nn.init.eye_(ordo.ones({2, 2, 2})) end, "init.eye_", "2-dim", "2x2x2")
    end)

    it("init.dirac_: a convolution that passes its input through, per group, as Torch's", function()
        local c = nn.Conv2d(3, 3, 3, {padding = 1, bias = false, dtype = "float64"})
        nn.init.dirac_(c.weight)
        local x = ordo.randn({2, 3, 5, 5}, "float64")
        assert.equals(0, (c(x) - x):abs():max():item())
        -- groups: out 4 = 2 groups of 2, each taking input channels 1..2 at the centre (k // 2 from 0)
        local w = nn.init.dirac_(ordo.full({4, 2, 3}, 5, "float64"), 2):totable()
        local ones = 0
        for o = 1, 4 do
            for i = 1, 2 do
                for k = 1, 3 do
                    local want = (i == (o - 1) % 2 + 1 and k == 2) and 1 or 0
                    assert.equals(want, w[o][i][k], ("element %d,%d,%d"):format(o, i, k))
                    ones = ones + w[o][i][k]
                end
            end
        end
        assert.equals(4, ones)
        assert.equals(1, nn.init.dirac_(ordo.empty({2, 2, 4, 4})):totable()[2][2][3][3]) -- even kernel: index 3
        H.raises(function() nn.init.dirac_(ordo.empty({3, 3})) end, "init.dirac_", "3, 4 or 5-dim", "3x3")
        H.raises(function() nn.init.dirac_(ordo.empty({3, 3, 3}), 2) end, "init.dirac_", "groups", "divides the 3")
    end)

    it("init.orthogonal_: orthonormal columns or rows times the gain, Haar-distributed, as Torch's", function()
        ordo.manual_seed(3)
        for _, sh in ipairs({{40, 25}, {25, 40}, {30, 30}, {8, 2, 3, 3}}) do
            local t = nn.init.orthogonal_(ordo.empty(sh, "float64"), 3)
            assert.same(sh, t:shape())
            local m = t:reshape(sh[1], t:numel() / sh[1])
            local g = m:size(1) >= m:size(2) and m:t():matmul(m) or m:matmul(m:t())
            local err = (g - ordo.eye(g:size(1), {dtype = "float64"}) * 9):abs():max():item()
            assert.is_true(err < 1e-10, table.concat(sh, "x") .. ": off by " .. err)
        end
        local f = nn.init.orthogonal_(ordo.empty({20, 10}))
        assert.is_true((f:t():matmul(f) - ordo.eye(10)):abs():max():item() < 1e-5)
        -- Haar: every entry of a random 3x3 rotation-or-reflection is uniform on [-1, 1]
        local n, s1, s2, inside = 1500, 0, 0, 0
        local t = ordo.empty({3, 3}, "float64")
        for _ = 1, n do
            local x = nn.init.orthogonal_(t):totable()
            s1, s2 = s1 + x[3][3], s2 + x[3][3] ^ 2
            if math.abs(x[2][3]) < 0.5 then inside = inside + 1 end
        end
        assert.is_true(math.abs(s1 / n) < 6 * math.sqrt(1 / 3 / n), "mean " .. s1 / n)
        assert.is_true(math.abs(s2 / n - 1 / 3) < 6 * math.sqrt(4 / 45 / n), "E x^2 " .. s2 / n)
        assert.is_true(math.abs(inside / n - 0.5) < 6 * math.sqrt(0.25 / n), "P(|x| < 0.5) " .. inside / n)
        ordo.manual_seed(8)
        local a = nn.init.orthogonal_(ordo.empty({4, 6})):totable()
        ordo.manual_seed(8)
        assert.same(a, nn.init.orthogonal_(ordo.empty({4, 6})):totable())
        assert.same({0, 4}, nn.init.orthogonal_(ordo.empty({0, 4})):shape())
        H.raises(function() nn.init.orthogonal_(ordo.empty({4})) end, "init.orthogonal_", "at least 2 dims")
        H.raises(function() nn.init.orthogonal_(ordo.empty({4, 4}, "int64")) end, "init.orthogonal_", "int64")
        H.raises(function() nn.init.orthogonal_(ordo.empty({4, 4}), "2") end, "init.orthogonal_", "gain", "string")
    end)

    it("save and load round-trip parameters; mismatches raise and change nothing", function()
        local m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
        local path = tmpname()
        m:save(path)
        local m2 = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
        m2:load(path)
        local x = ordo.randn({5, 3})
        assert.same(m(x):totable(), m2(x):totable())
        local other = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
        local before = other:get(1).weight:totable()
        local ok, err = pcall(function() other:load(path) end)
        assert.is_false(ok)
        assert.matches("1.weight in .* is float32 of shape 4x3, the module's is float32 of shape 5x3", err)
        assert.same(before, other:get(1).weight:totable())
        -- saved in float64: the error says how to load it (load_state_dict casts)
        local path64 = tmpname()
        nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)):double():save(path64)
        H.raises(function() m2:load(path64) end, "load: 1.weight in", "is float64 of shape 4x3, the module's is " ..
                 "float32 of shape 4x3 (saved from a float64 model: m:to(\"float64\") first, or " ..
                 "m:load_state_dict(ordo.load(path)), which casts to the module's dtypes)")
        m2:load_state_dict(ordo.load(path64))
        assert.equals("float32", m2:get(1).weight:dtype())
        os.remove(path64)
        local f = io.open(path, "wb")
        f:write("garbage")
        f:close()
        ok, err = pcall(function() m2:load(path) end)
        assert.is_false(ok)
        assert.matches("not an ordo tensor file", err)
        os.remove(path)
    end)

    it("load_state_dict copies another model's state by name; strict checks names, shapes always; atomic", function()
        local function mk(h) return nn.Sequential(nn.Linear(3, h), nn.BatchNorm1d(h), nn.Linear(h, 2)) end
        local a, b = mk(4), mk(4)
        local x = ordo.randn({5, 3})
        a(x) -- training: the running statistics move away from b's
        a:eval()
        b:eval()
        local missing, unexpected = b:load_state_dict(a:state_dict())
        assert.same({}, missing)
        assert.same({}, unexpected)
        assert.same(a(x):totable(), b(x):totable())
        assert.same(a:get(2).running_mean:totable(), b:get(2).running_mean:totable())
        -- copies, not aliases: a later change to a does not show in b
        ordo.no_grad(function() a:get(1).weight:fill_(7) end)
        assert.is_true(b:get(1).weight:max():item() < 7)
        assert.is_true(b:get(1).weight:needs_grad())
        -- a shape mismatch raises naming the tensor, and changes nothing (strict or not)
        local c = mk(5)
        local before = c:get(1).bias:totable()
        for _, strict in ipairs({true, false}) do
            H.raises(function() c:load_state_dict(a:state_dict(), {strict = strict}) end, "load_state_dict",
                     "1.weight is of shape 4x3 in the state dict, the module's is of shape 5x3")
            assert.same(before, c:get(1).bias:totable())
        end
        -- strict: a missing or an extra name raises before anything changes
        local small = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
        local w0 = small:get(1).weight:totable()
        H.raises(function() small:load_state_dict(a:state_dict()) end, "tensor 3.weight that the module does not have")
        assert.same(w0, small:get(1).weight:totable())
        H.raises(function() mk(4):load_state_dict({["1.weight"] = ordo.zeros({4, 3})}) end,
                 "no tensor named 1.bias", "6 more missing")
        -- strict = false: the names both have; the others are returned
        local d = mk(4)
        missing, unexpected = d:load_state_dict({["1.weight"] = ordo.ones({4, 3}, D), extra = ordo.zeros({1})},
                                                {strict = false})
        assert.same({"1.bias", "2.weight", "2.bias", "3.weight", "3.bias", "2.running_mean", "2.running_var"}, missing)
        assert.same({"extra"}, unexpected)
        assert.equal("float32", d:get(1).weight:dtype()) -- the module's dtype: the values converted
        assert.equal(12, d:get(1).weight:sum():item())
        -- missing and unexpected names both: the error names one of each; Torch's 0-based container names get a hint
        local seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
        H.raises(function()
            seq:load_state_dict({["0.weight"] = ordo.zeros(3, 2), ["0.bias"] = ordo.zeros(3),
                                 ["2.weight"] = ordo.zeros(1, 3), ["2.bias"] = ordo.zeros(1)})
        end, "no tensor named 1.weight (and 3 more missing), and has 0.bias that the module does not have (and 3 more)",
           "Torch numbers the entries of a Sequential, ModuleList or ParameterList from 0, ordo from 1")
        missing, unexpected = seq:load_state_dict({z = ordo.zeros(1), a = ordo.zeros(1), m = ordo.zeros(1)},
                                                  {strict = false})
        assert.same({"a", "m", "z"}, unexpected) -- sorted: the same every run
        assert.equals(4, #missing)
        H.raises(function() d:load_state_dict(5) end, "load_state_dict", "expected a state dict")
        H.raises(function() d:load_state_dict({5}) end, "load_state_dict", "entry 1 is number")
        H.raises(function() d:load_state_dict({}, {strcit = true}) end, "unknown option 'strcit'")
    end)

    it("get_submodule, get_parameter, get_buffer by dotted name; register_module", function()
        local net = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3), nn.Sequential(nn.ReLU(), nn.Linear(3, 1)))
        assert.equals(net[3][2], net:get_submodule("3.2"))
        assert.equals(net, net:get_submodule(""))
        assert.equals(net[3][2].weight, net:get_parameter("3.2.weight"))
        assert.equals(net[2].running_mean, net:get_buffer("2.running_mean"))
        H.raises(function() net:get_submodule("3.5") end, "get_submodule", "'3' has no submodule '5'", "1, 2")
        H.raises(function() net:get_submodule(3) end, "get_submodule", "string", "number")
        H.raises(function() net:get_parameter("1.nope") end, "get_parameter", "'1' has no parameter 'nope'")
        H.raises(function() net:get_buffer("1.weight") end, "get_buffer", "no buffer 'weight'")
        H.raises(function() net:get_parameter("") end, "get_parameter", "non-empty")
        local m = nn.Module()
        local l = nn.Linear(1, 1)
        assert.equals(l, m:register_module("enc", l))
        assert.equals(l.bias, m:get_parameter("enc.bias"))
        H.raises(function() m:register_module("a.b", nn.ReLU()) end, "register_module", "without dots")
    end)

    it("nn.Parameter(t): assigned to a module's field it is registered, as Torch's; frozen with false", function()
        local Mine = nn.Module:extend("Mine")
        function Mine:init()
            self.w = nn.Parameter(ordo.randn({3, 2}, D))
            self.b = nn.Parameter(ordo.zeros({2}, D))
            self.frozen = nn.Parameter(ordo.ones({2}, D), false)
            self.lin = nn.Linear(2, 2):double()
        end
        function Mine:forward(x) return self.lin(x:matmul(self.w) + self.b + self.frozen) end
        local m = Mine()
        local names = {}
        for i, e in ipairs(m:named_parameters()) do names[i] = e.name end
        assert.same({"w", "b", "frozen", "lin.weight", "lin.bias"}, names)
        assert.is_true(m.w:needs_grad())
        assert.is_false(m.frozen:needs_grad())
        m(ordo.randn({4, 3}, D)):sum():backward()
        assert.is_not_nil(m.w.grad)
        assert.is_nil(m.frozen.grad)
        local before = m.w:clone()
        optim.SGD(m:parameters(), {lr = 0.1}):step()
        assert.is_false(m.w:equal(before))
        -- saved and loaded by name
        local sd = m:state_dict()
        local m2 = Mine()
        m2:load_state_dict(sd)
        assert.same(m.w:totable(), m2.w:totable())
        -- a parameter already (a leaf that requires a gradient) stays itself; another one replaces a field
        local leaf = ordo.zeros({2}, D):requires_grad()
        assert.equals(leaf, nn.Parameter(leaf))
        m.b = nn.Parameter(ordo.ones({2}, D))
        assert.same({1, 1}, m:named_parameters()[2].tensor:totable())
        -- a plain tensor is still a plain field; bad inputs are refused
        m.note = ordo.zeros(2)
        assert.equals(5, #m:parameters())
        H.raises(function() nn.Parameter(ordo.tensor({1}, "int64")) end, "nn.Parameter", "float", "int64")
        H.raises(function() nn.Parameter(5) end, "nn.Parameter", "expected a tensor", "number")
        H.raises(function() nn.Parameter(ordo.zeros(2), 1) end, "nn.Parameter", "requires_grad must be a boolean")
        local Bad = nn.Module:extend("Bad")
        function Bad:init() self.parameters = nn.Parameter(ordo.zeros(2)) end
        H.raises(function() Bad() end, "register_parameter")
    end)

    it("a module shared twice lists its buffers once; a child holding its parent (a cycle) overflows nothing", function()
        -- buffers: each once, as parameters (Sequential(bn, bn) listed bn's under both names)
        local bn = nn.BatchNorm1d(2)
        local s = nn.Sequential(bn, nn.ReLU(), bn)
        local names = {}
        for _, e in ipairs(s:state_dict()) do names[#names + 1] = e.name end
        assert.same({"1.weight", "1.bias", "1.running_mean", "1.running_var", "1.num_batches_tracked"}, names)
        assert.equals(3, #s:named_buffers())
        local path = os.tmpname()
        s:save(path)
        s:load(path)
        -- a file of older ordo with both names (two copies, as version 2 wrote them; and Torch's state dict) loads
        local both = ordo.load(path)
        for _, k in ipairs({"running_mean", "running_var", "num_batches_tracked"}) do both["3." .. k] = both["1." .. k]:clone() end
        ordo.save(both, path)
        s:load(path)
        s:load_state_dict(both)
        os.remove(path)
        -- a child that keeps its parent in a field: the parent is its child too, and every walk stops there
        local Child = nn.Module:extend("OwnedChild")
        function Child:init(owner)
            self.lin = nn.Linear(2, 2)
            self.owner = owner
        end
        function Child:forward(x) return self.lin(x) end
        local Parent = nn.Module:extend("Owner")
        function Parent:init()
            self.head = nn.Linear(2, 2)
            self.bn = nn.BatchNorm1d(2)
            self.child = Child(self)
        end
        function Parent:forward(x) return self.child(self.bn(self.head(x))) end
        local m = Parent()
        assert.equals(6, #m:parameters())
        names = {}
        for _, e in ipairs(m:state_dict()) do names[#names + 1] = e.name end
        assert.same({"head.weight", "head.bias", "bn.weight", "bn.bias", "child.lin.weight", "child.lin.bias",
                     "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}, names)
        m:eval()
        assert.is_false(m.bn.training)
        assert.is_false(m.child.training)
        m:train()
        assert.is_true(m.bn.training)
        assert.matches("(owner): Owner (a module above this one)", tostring(m), 1, true)
        m:to("float64")
        assert.equals("float64", m.child.lin.weight:dtype())
        m:load_state_dict(m:state_dict())
        m(ordo.randn({3, 2}, D)):sum():backward()
        m:zero_grad()
        assert.equals(5, #m:modules())
        local n = 0
        m:apply(function() n = n + 1 end)
        assert.equals(5, n)
        -- a child's own train (a frozen BatchNorm) is still called, and an error in one leaves train usable
        local Frozen = nn.BatchNorm1d:extend("FrozenBN")
        function Frozen:train(mode)
            nn.Module.train(self, mode)
            self.training = false
            return self
        end
        local f = nn.Sequential(nn.Linear(2, 2), Frozen(2))
        f:train()
        assert.is_false(f:get(2).training)
        local Bad = nn.Module:extend("BadTrain")
        function Bad:train() error("no train") end
        local b = nn.Sequential(Bad())
        H.raises(function() b:train() end, "no train")
        H.raises(function() b:train() end, "no train") -- (not skipped as a cycle the second time)
    end)

    it("load_state_dict and load take Torch's other names of a shared module's or a tied weight's tensors", function()
        -- Torch's state_dict lists a tensor under every name it has (a module twice in a Sequential, a tied
        -- weight: lm_head.weight = wte.weight); ordo's lists it once, and takes the others as the same tensor
        local LM = nn.Module:extend("TiedLM")
        function LM:init()
            self.wte = nn.Embedding(5, 3)
            self.block = nn.Linear(3, 3)
            self.lm_head = nn.Linear(3, 5, {bias = false})
            self.lm_head.weight = self.wte.weight
        end
        local m = LM()
        local names = {}
        for _, e in ipairs(m:state_dict()) do names[#names + 1] = e.name end
        assert.same({"wte.weight", "block.weight", "block.bias"}, names)
        local w, b = ordo.randn({5, 3}), ordo.randn({3, 3})
        local torch_sd = {["wte.weight"] = w, ["block.weight"] = b, ["block.bias"] = ordo.zeros(3),
                          ["lm_head.weight"] = w}
        local missing, unexpected = m:load_state_dict(torch_sd)
        assert.same({}, missing)
        assert.same({}, unexpected)
        assert.same(w:totable(), m.lm_head.weight:totable())
        assert.equals(m.wte.weight, m.lm_head.weight) -- still tied
        -- one name of the two is enough (some savers drop the tied copy, either one)
        local w2 = ordo.randn({5, 3})
        m:load_state_dict({["lm_head.weight"] = w2, ["block.weight"] = b, ["block.bias"] = ordo.zeros(3)})
        assert.same(w2:totable(), m.wte.weight:totable())
        -- the other name's shape is checked too; a file written with both names loads
        H.raises(function()
            m:load_state_dict({["wte.weight"] = w, ["block.weight"] = b, ["block.bias"] = ordo.zeros(3),
                               ["lm_head.weight"] = ordo.zeros(3, 5)})
        end, "lm_head.weight (another name of wte.weight) is of shape 3x5", "the module's is of shape 5x3")
        H.raises(function() m:load_state_dict({["lm_head.weight"] = ordo.zeros(3, 5)}, {strict = false}) end,
                 "wte.weight (read as lm_head.weight, another name of the same tensor) is of shape 3x5")
        local path = os.tmpname()
        ordo.save(torch_sd, path)
        local m2 = LM()
        m2:load(path)
        os.remove(path)
        assert.same(w:totable(), m2.lm_head.weight:totable())
        -- the same module twice: Torch's 1.weight and 2.weight (its 0 and 1), both taken
        local l = nn.Linear(2, 2)
        local s = nn.Sequential(l, nn.Tanh(), l)
        missing, unexpected = s:load_state_dict({["1.weight"] = ordo.ones(2, 2), ["1.bias"] = ordo.zeros(2),
                                                 ["3.weight"] = ordo.ones(2, 2), ["3.bias"] = ordo.zeros(2)})
        assert.same({}, missing)
        assert.same({}, unexpected)
        assert.same({{1, 1}, {1, 1}}, l.weight:totable())
        -- a name that is no tensor's is still unexpected
        H.raises(function() s:load_state_dict({["1.weight"] = ordo.ones(2, 2), ["1.bias"] = ordo.zeros(2),
                                               ["2.weight"] = ordo.ones(2, 2)}) end,
                 "a tensor 2.weight that the module does not have")
    end)

    it("nn.accuracy: batch by batch in eval mode; labels N x 1, a batch_size of 0 and unknown options raise", function()
        local m = nn.Linear(2, 3)
        ordo.no_grad(function()
            m.weight:copy_(ordo.tensor({{1, 0}, {0, 1}, {0, 0}}))
            m.bias:zero_()
        end)
        local x = ordo.tensor({{1, 0}, {0, 1}, {1, 0}, {-1, -1}})
        local y = ordo.tensor({1, 2, 2, 3}, {dtype = "int64"})
        for _, bs in ipairs({1, 3, 1000}) do assert.equal(0.75, nn.accuracy(m, x, y, {batch_size = bs})) end
        assert.is_true(m.training) -- restored
        -- N x 1 labels would broadcast against the N predictions (N x N matches: an accuracy of 2 here)
        H.raises(function() nn.accuracy(m, x, y:view(4, 1)) end, "accuracy", "labels of shape 4", "4x1")
        H.raises(function() nn.accuracy(m, x, y:to("float32")) end, "accuracy", "float32")
        -- a batch_size of 0 looped for ever; a negative one gave 0
        H.raises(function() nn.accuracy(m, x, y, {batch_size = 0}) end, "accuracy", "batch_size", "got 0")
        H.raises(function() nn.accuracy(m, x, y, {batch_size = -1}) end, "accuracy", "batch_size", "got -1")
        H.raises(function() nn.accuracy(m, x, y, {bs = 2}) end, "accuracy", "unknown option 'bs'")
        H.raises(function() nn.accuracy(function(t) return t end, x, y) end, "accuracy", "expected a module")
    end)

    it("to(dtype) converts parameters, which still require gradients", function()
        local m = nn.Linear(2, 2):to("float64")
        assert.equal("float64", m.weight:dtype())
        assert.is_true(m.weight:needs_grad())
        assert.equal("float64", m(ordo.randn({1, 2}, D)):dtype())
    end)

    it("m:double() and m:float(): to(\"float64\") and to(\"float32\"), as Torch's", function()
        local m = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
        assert.equals(m, m:double())
        assert.same({"float64", "float64", "float64"}, {m:get(1).weight:dtype(), m:get(2).weight:dtype(),
                                                        m:get(2).running_mean:dtype()})
        assert.is_true(m:get(1).weight:needs_grad())
        assert.equal("float64", m(ordo.randn({4, 2}, D)):dtype())
        assert.equals(m, m:float())
        assert.same({"float32", "float32"}, {m:get(1).weight:dtype(), m:get(2).running_var:dtype()})
        H.raises(function() return nn.Module.double(3) end, "double")
    end)

    it("m:to(dtype) takes each parameter's gradient along, cast, as Torch's", function()
        local m = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
        m(ordo.randn({4, 2})):sum():backward()
        local g = m:get(1).weight.grad:totable()
        assert.is_not_nil(m:get(2).bias.grad)
        m:double()
        local w = m:get(1).weight
        assert.equal("float64", w.grad:dtype())
        assert.is_false(w.grad:needs_grad())
        assert.is_true(ordo.allclose(w.grad, ordo.tensor(g, D)))
        assert.equal("float64", m:get(2).bias.grad:dtype())
        -- the next backward accumulates into it
        m(ordo.zeros({4, 2}, D)):sum():backward()
        assert.is_true(ordo.allclose(w.grad, ordo.tensor(g, D)))
        m:zero_grad()
        m:float()
        assert.is_nil(m:get(1).weight.grad)
    end)

    it("to(dtype) keeps each parameter's requires_grad: frozen parameters stay frozen", function()
        local m = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1))
        m:get(1):requires_grad_(false)
        m:to("float64")
        assert.equal("float64", m:get(1).weight:dtype())
        assert.is_false(m:get(1).weight:needs_grad())
        assert.is_false(m:get(1).bias:needs_grad())
        assert.is_true(m:get(3).weight:needs_grad())
        assert.equals(2, #m:trainable_parameters())
        -- nothing to convert: the very same tensors stay (an optimiser made before still holds them)
        local w = m:get(3).weight
        m:to("float64")
        assert.equals(w, m:get(3).weight)
        local fe = nn.Embedding.from_pretrained(ordo.randn({4, 2})):to("float64")
        assert.equal("float64", fe.weight:dtype())
        assert.is_false(fe.weight:needs_grad())
        assert.is_true(nn.Embedding.from_pretrained(ordo.randn({4, 2}), {freeze = false}):to("float64").weight
                           :needs_grad())
    end)

    it("to(dtype) refuses an integer dtype and changes nothing; integer buffers keep their dtype, as in Torch", function()
        local M = nn.Module:extend("WithIndex")
        function M:init()
            self.frozen = nn.Linear(2, 2)
            self.frozen:requires_grad_(false) -- converted first: a failure after it must not leave it changed
            self.l = nn.Linear(2, 2)
            self:register_buffer("idx", ordo.tensor({1, 2}, "int64"))
        end
        local m = M()
        local ok, err = pcall(m.to, m, "int32")
        assert.is_false(ok)
        assert.matches("to: a module's dtype must be float32 or float64 (its parameters need gradients), got int32",
                       err, 1, true)
        assert.equal("float32", m.frozen.weight:dtype())
        assert.equal("float32", m.l.weight:dtype())
        m:to("float64")
        assert.equal("float64", m.frozen.weight:dtype())
        assert.equal("int64", m.idx:dtype())
        assert.same({1, 2}, m.idx:totable())
        m:to(ordo.cpu(1), "float32")
        assert.same({"float32", "int64"}, {m.l.weight:dtype(), m.idx:dtype()})
        assert.same({ordo.cpu(1), ordo.cpu(1)}, {m.l.weight:device(), m.idx:device()})
    end)

    it("an optimiser built before to(dtype or device) raises at step instead of stepping the old tensors", function()
        for _, kind in ipairs({"SGD", "Adam", "RMSprop"}) do
            local m = nn.Linear(3, 1)
            local opt = optim[kind](m:parameters(), {lr = 0.1})
            local before = m.weight:clone()
            m:to("float64")
            local loss = m(ordo.ones({2, 3}, D)):sum()
            loss:backward()
            H.raises(function() opt:step() end, "step: parameter 1 has no gradient", "Module:to moved it",
                     "float64 on cpu(0)", "build the optimiser after")
            assert.is_true(ordo.equal(before, m.weight:float())) -- not stepped
            -- one built after it steps the module's tensors
            opt = optim[kind](m:parameters(), {lr = 0.1})
            opt:step()
            assert.is_false(ordo.equal(before, m.weight:float()))
        end
    end)

    it("to(dtype or device) keeps shared parameters and buffers shared (tied weights stay tied)", function()
        local Stats = nn.Module:extend("SharedStats")
        function Stats:init(buf)
            self:register_buffer("running", buf)
        end
        function Stats:forward(x) return x end
        for _, target in ipairs({"float64", ordo.cpu(1)}) do
            local a, b = nn.Linear(4, 4), nn.Linear(4, 4)
            b.weight = a.weight -- tied: one parameter in two modules
            local buf = ordo.zeros({4})
            local s1, s2 = Stats(buf), Stats(buf)
            local m = nn.Sequential(a, b, s1, s2)
            assert.equals(3, #m:parameters())
            m:to(target)
            local what = tostring(target)
            assert.equals(3, #m:parameters(), what)
            assert.equals(a.weight, b.weight, what)
            assert.equals(s1.running, s2.running, what)
            assert.are_not.equal(buf, s1.running, what)
            if target == "float64" then
                assert.equal("float64", a.weight:dtype())
                assert.equal("float64", s2.running:dtype())
            else
                assert.equal(target, b.weight:device())
                assert.equal(target, s2.running:device())
            end
            assert.is_true(a.weight:needs_grad(), what)
            assert.is_true(a.weight:is_leaf(), what)
            -- the tie holds through training: one gradient, the sum of both uses
            local x = ordo.randn({2, 4}):to(a.weight:device(), a.weight:dtype())
            m(x):sum():backward()
            assert.is_not_nil(a.weight.grad, what)
            assert.equals(a.weight.grad, b.weight.grad, what)
        end
        -- a module that is a child twice moves once, and stays one module
        local l = nn.Linear(2, 2)
        local w = l.weight
        local twice = nn.Sequential(l, nn.Tanh(), l):to("float64")
        assert.equals(twice:get(1), twice:get(3))
        assert.equal("float64", l.weight:dtype())
        assert.are_not.equal(w, l.weight)
        assert.equals(2, #twice:parameters())
    end)

    it("BCELoss: finite gradients (Torch's) where a probability is exactly 0 or 1; the loss as before", function()
        -- sigmoid(20) is 1 in float32: log(1 - p) is clamped, and its gradient was NaN
        local z = ordo.tensor({20.0, 0.0}):requires_grad()
        local loss = nn.BCELoss()(z:sigmoid(), ordo.tensor({1.0, 1.0}))
        loss:backward()
        close(z.grad:totable(), {0, -0.25}, 1e-7)
        -- p = 0 and 1 against either target: loss 100 where the clamped log counts; the
        -- gradients (p - y) / max(p (1 - p), 1e-12) as Torch, and the target's the clamped logs' difference
        local p = ordo.tensor({0, 1, 0, 1, 0.25}, D):requires_grad()
        local y = ordo.tensor({1, 0, 0, 1, 0.5}, D):requires_grad()
        local l = nn.BCELoss({reduction = "none"})(p, y)
        close(l:totable(), {100, 100, 0, 0, -(0.5 * math.log(0.25) + 0.5 * math.log(0.75))}, 1e-12)
        l:sum():backward()
        close(p.grad:totable(), {-1e12, 1e12, 0, 0, -0.25 / (0.25 * 0.75)}, 1e-12)
        close(y.grad:totable(), {100, -100, 100, -100, math.log(0.75) - math.log(0.25)}, 1e-12)
        for _, v in ipairs(p.grad:totable()) do assert.is_true(v == v) end
        -- away from 0 and 1: the chain rule's gradients, for p and the target
        local u = ordo.tensor({0.3, 0.6, 0.8}, D):requires_grad()
        local t = ordo.tensor({0.1, 1, 0.5}, D):requires_grad()
        assert.is_true(ag.gradcheck(function(a, b) return F.binary_cross_entropy(a, b, {reduction = "sum"}) end, {u, t}))
        assert.equals("mean", nn.BCELoss()(u, t):grad_fn())
    end)

    it("activations' gradients at their kinks are Torch's", function()
        local function grad_at(f, xs)
            local x = ordo.tensor(xs, D):requires_grad()
            f(x):sum():backward()
            return x.grad:totable()
        end
        close(grad_at(nn.ReLU6(), {0, 6, 3, -1, 7}), {0, 0, 1, 0, 0})
        close(grad_at(nn.Hardtanh(), {-1, 1, 0, -2, 2}), {0, 0, 1, 0, 0})
        close(grad_at(nn.Hardtanh(-2, 3), {-2, 3, 0}), {0, 0, 1})
        close(grad_at(nn.LeakyReLU(0.1), {0, -1, 1}), {0.1, 0.1, 1})
        close(grad_at(nn.ELU(), {0, 1, -1}), {1, 1, math.exp(-1)})
        close(grad_at(nn.ELU(0.5), {0, 1, -1}), {0.5, 1, 0.5 * math.exp(-1)})
        local A, S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
        close(grad_at(nn.SELU(), {0, 1}), {A * S, S})
        close(grad_at(nn.Hardsigmoid(), {-3, 3, 0}), {0, 0, 1 / 6})
        close(grad_at(nn.Hardswish(), {-3, 3, 0, -4, 4}), {-0.5, 1.5, 0.5, 0, 1})
        local pr = nn.PReLU(1, {dtype = "float64"})
        close(grad_at(pr, {0, -2, 2}), {0.25, 0.25, 1})
        close(pr.weight.grad:totable(), {-2})
        -- large inputs: no overflow in ELU's unused branch (its gradient was computed too)
        close(grad_at(nn.ELU(), {800, -800}), {1, 0})
        assert.equals("relu6", nn.ReLU6()(ordo.tensor({1}, D):requires_grad()):grad_fn())
        -- Softplus: sigmoid(x), 1/2 at 0 (relu's and abs's kinks gave 0 there), no overflow far out
        close(grad_at(nn.Softplus(), {0, 800, -800, 1}), {0.5, 1, 0, 1 / (1 + math.exp(-1))})
        -- so a logit of exactly 0 (a zero-initialised output layer) gets sigmoid(0) - y
        close(grad_at(function(x) return F.binary_cross_entropy_with_logits(x, ordo.tensor({0, 1}, D),
                                                                            {reduction = "sum"}) end, {0, 0}),
              {0.5, -0.5})
    end)

    it("Linear and LayerNorm refuse unknown options; LayerNorm takes Torch's elementwise_affine and bias", function()
        H.raises(function() nn.Linear(3, 2, {bais = false}) end, "Linear", "unknown option 'bais'")
        H.raises(function() nn.Linear(3, 2, {bias = 0}) end, "Linear", "bias", "boolean")
        H.raises(function() nn.LayerNorm(3, {affin = false}) end, "LayerNorm", "unknown option 'affin'")
        assert.equals(0, #nn.LayerNorm(3, {elementwise_affine = false}):parameters())
        local wo = nn.LayerNorm(3, {bias = false})
        assert.equals(1, #wo:parameters())
        assert.is_nil(wo.bias)
        assert.same({2, 3}, wo(ordo.randn({2, 3})):shape())
        H.raises(function() nn.LayerNorm(3, {affine = true, elementwise_affine = false}) end, "LayerNorm",
                 "elementwise_affine", "disagree")
        H.raises(function() nn.LayerNorm(3, {eps = "x"}) end, "LayerNorm", "eps", "number")
    end)

    it("children: removed (set to nil) or assigned over a plain field, parameters(), train() and save follow", function()
        local Net = nn.Module:extend("ChildNet")
        function Net:init()
            self.extra = false                -- a plain field first
            self.body = nn.Linear(2, 3)
            self.extra = nn.Linear(3, 3)      -- then a module: a child, in this place
            self.head = nn.Linear(3, 1)
        end
        function Net:forward(x) return self.head(self.extra(self.body(x))) end
        local net = Net()
        local function names(m)
            local r = {}
            for _, e in ipairs(m:named_parameters()) do r[#r + 1] = e.name end
            return table.concat(r, " ")
        end
        assert.equals("body.weight body.bias extra.weight extra.bias head.weight head.bias", names(net))
        assert.equals(6, #optim.SGD(net:parameters()).params)
        -- removing a child
        net.head = nil
        assert.equals("body.weight body.bias extra.weight extra.bias", names(net))
        net:eval()
        assert.is_false(net.extra.training)
        net:train()
        assert.equals(2, #net:children())
        assert.equals(3, #net:modules())
        net:to("float64")
        local path = os.tmpname()
        net:save(path)
        net:load(path)
        os.remove(path)
        -- assigned again: back in its place
        net.head = nn.Linear(3, 1, D)
        assert.equals("body.weight body.bias extra.weight extra.bias head.weight head.bias", names(net))
        -- a module assigned over a plain field after init, and a child replaced by a plain value
        net.note = "x"
        net.note = nn.Linear(1, 1, D)
        net.extra = false
        assert.equals("body.weight body.bias head.weight head.bias note.weight note.bias", names(net))
        assert.matches("%(note%): Linear", tostring(net))
        -- ModuleDict: a removed entry leaves its keys
        local d = nn.ModuleDict({a = nn.Linear(1, 1), b = nn.Linear(1, 1)})
        d.a = nil
        assert.same({"b"}, d:keys())
        H.raises(function() d:get("a") end, "ModuleDict", "no module named a")
        H.raises(function() net:add_module("a.b", nn.Linear(1, 1)) end, "add_module", "without dots")
        H.raises(function() net:add_module(3, nn.Linear(1, 1)) end, "add_module", "string")
    end)

    it("Embedding and Unflatten name themselves in their errors", function()
        local e = nn.Embedding(10, 3)
        H.raises(function() e(ordo.tensor({1, 11}, "int64")):sum():item() end, "Embedding", "index 11 out of range")
        H.raises(function() e(ordo.tensor({0}, "int32")):totable() end, "Embedding", "index 0 out of range")
        H.raises(function() F.embedding(ordo.tensor({12}, "int64"), e.weight):totable() end, "embedding",
                 "index 12 out of range")
        local ok = pcall(function() return e(ordo.tensor({1}, "int64")):sum():item() end)
        assert.is_true(ok) -- the engine goes on
        -- F.embedding's padding_idx is checked as the module's (9 of 3 rows, 1.5, "x" were taken: nothing padded)
        local w = ordo.randn({3, 2}):requires_grad()
        local i1 = ordo.tensor({1}, "int64")
        H.raises(function() F.embedding(i1, w, 9) end, "embedding: padding_idx must be an index in 1..3", "got 9")
        H.raises(function() F.embedding(i1, w, 0) end, "embedding: padding_idx must be an index in 1..3", "got 0")
        H.raises(function() F.embedding(i1, w, 1.5) end, "padding_idx must be an index in 1..3", "got 1.5")
        H.raises(function() F.embedding(i1, w, "x") end, "padding_idx must be an index in 1..3", 'got "x"')
        F.embedding(ordo.tensor({1, 3}, "int64"), w, 3):sum():backward()
        assert.same({{1, 1}, {0, 0}, {0, 0}}, w.grad:totable())
        w.grad = nil
        F.embedding(ordo.tensor({1, 3}, "int64"), w, -1):sum():backward() -- (Torch's -1: the last row)
        assert.same({{1, 1}, {0, 0}, {0, 0}}, w.grad:totable())
        H.raises(function() F.embedding(i1, w, -4) end, "padding_idx must be an index in 1..3 (or -3..-1 from the end)")
        -- Torch's max_norm (4th) and the rest were dropped unseen: the rows were not renormalised
        H.raises(function() F.embedding(i1, w, nil, 1.0) end, "embedding", "further number", "max_norm")
        H.raises(function() F.embedding(i1, w, 1, nil, 2.0) end, "embedding", "further number")
        local u = nn.Unflatten(2, {2, 3})
        H.raises(function() u(ordo.randn({4, 5})) end, "Unflatten", "2x3", "size 5")
        assert.same({4, 2, 3}, u(ordo.randn({4, 6})):shape())
        assert.same({4, 2, 3}, nn.Unflatten(-1, {2, -1})(ordo.randn({4, 6})):shape())
        H.raises(function() nn.Unflatten(2, {-1, 4})(ordo.randn({4, 6})) end, "Unflatten", "size 6")
        H.raises(function() nn.Unflatten(2, {-1, -1}) end, "Unflatten", "at most one")
        H.raises(function() nn.Unflatten(2, {2.5}) end, "Unflatten", "size 1")
    end)
end)

describe("optim", function()
    it("SGD: p -= lr * g, with weight decay", function()
        local p = ordo.tensor({1, 2}, D):requires_grad()
        local opt = optim.SGD({p}, {lr = 0.1, weight_decay = 0.5})
        ;(p * p):sum():backward() -- g = 2p
        opt:step()
        -- g + wd p = 2p + 0.5p = 2.5p; p - 0.1 * 2.5p = 0.75p
        close(p:totable(), {0.75, 1.5})
    end)

    it("print(opt) shows the optimiser, its parameter count and options (each group's own too), as Torch's", function()
        -- (it printed "table: 0x...", and the REPL showed the internals: _defaults' lr, not the one in use)
        local p, q = ordo.tensor({1, 2}, D):requires_grad(), ordo.tensor({3}, D):requires_grad()
        local opt = optim.SGD({p, q}, {lr = 0.1, momentum = 0.9})
        assert.equals("optim.SGD(2 parameters, lr = 0.1, dampening = 0, maximize = false, momentum = 0.9, " ..
                      "nesterov = false, weight_decay = 0)", tostring(opt))
        opt.lr = 0.05 -- as a scheduler sets it
        assert.truthy(tostring(opt):find("(2 parameters, lr = 0.05, ", 1, true), tostring(opt))
        local adam = optim.Adam({{params = {p}, lr = 0.01}, {params = {q}, weight_decay = 0.5}}, {lr = 0.1})
        assert.equals("optim.Adam(2 parameters, lr = 0.1, amsgrad = false, beta1 = 0.9, beta2 = 0.999, eps = 1e-08, " ..
                      "maximize = false, weight_decay = 0)\n  group 1: 1 parameter, lr = 0.01\n" ..
                      "  group 2: 1 parameter, weight_decay = 0.5", tostring(adam))
        adam.lr = 0.05 -- a group's lr follows opt.lr in proportion: 0.01 * 0.05 / 0.1
        assert.truthy(tostring(adam):find("group 1: 1 parameter, lr = 0.005\n", 1, true), tostring(adam))
        -- opt:step() without a closure gives no value (the REPL printed "nil" after each); with one, its loss
        ;(p * p):sum():backward()
        assert.equals(0, select("#", opt:step()))
        assert.equals(0, select("#", adam:step()))
        assert.equals(7, opt:step(function() return 7 end))
        -- in a REPL table: its first line
        local shown = require("ordo.repl").format({adam})
        assert.truthy(shown:find("\n  optim.Adam(2 parameters, lr = 0.05, amsgrad = false, beta1 = 0.9, beta2 = 0.999, " ..
                                 "eps = 1e-08, maximize = false, weight_decay = 0) {...}\n", 1, true), shown)
    end)

    it("SGD dampening scales each new gradient in the momentum buffer (not the first), as Torch", function()
        local G = {{0.5, -1.2}, {0.1, 0.4}, {-2, 0.2}, {0.3, 0.3}}
        for _, strided in ipairs({false, true}) do -- the fused kernel has no dampening: the elementwise form runs
            local p = strided and ordo.tensor({{1, 0}, {-0.5, 0}}, D):select(2, 1):requires_grad()
                or ordo.tensor({1, -0.5}, D):requires_grad()
            local o = optim.SGD({p}, {lr = 0.1, momentum = 0.9, dampening = 0.3, weight_decay = 0.01})
            for s = 1, 4 do
                o:zero_grad()
                ;(p * ordo.tensor(G[s], D)):sum():backward()
                o:step()
            end
            local r, buf = {1, -0.5}, {}
            for s = 1, 4 do
                for i = 1, 2 do
                    local g = G[s][i] + 0.01 * r[i]
                    buf[i] = s == 1 and g or 0.9 * buf[i] + 0.7 * g
                    r[i] = r[i] - 0.1 * buf[i]
                end
            end
            close(p:totable(), r, 1e-12)
        end
        local q = ordo.zeros({1}):requires_grad()
        H.raises(function() optim.SGD({q}, {momentum = 0.9, nesterov = true, dampening = 0.1}) end,
                 "nesterov needs a dampening of 0")
        H.raises(function() optim.SGD({q}, {dampening = 2}) end, "dampening must be in [0, 1]")
    end)

    it("SGD with momentum follows Torch's buffer", function()
        local p = ordo.tensor({1}, D):requires_grad()
        local opt = optim.SGD({p}, {lr = 0.1, momentum = 0.9})
        local want, buf = 1, nil
        for _ = 1, 3 do
            opt:zero_grad()
            ;(p * p):sum():backward()
            opt:step()
            local g = 2 * want
            buf = buf and 0.9 * buf + g or g
            want = want - 0.1 * buf
        end
        close(p:item(), want, 1e-12)
    end)

    -- Five steps of Adam (decay > 0: AdamW's decoupled decay first) on
    -- p = {1, -2} with g = 3p^2, by the optimiser and by hand.
    local function check_adam(make, decay)
        local p = ordo.tensor({1, -2}, D):requires_grad()
        local opt = make({p})
        local w = {1, -2}
        local m, v = {0, 0}, {0, 0}
        for t = 1, 5 do
            opt:zero_grad()
            ;(p * p * p):sum():backward() -- g = 3p^2
            opt:step()
            for i = 1, 2 do
                local g = 3 * w[i] * w[i]
                w[i] = w[i] * (1 - 0.01 * decay)
                m[i] = 0.9 * m[i] + 0.1 * g
                v[i] = 0.999 * v[i] + 0.001 * g * g
                local mh, vh = m[i] / (1 - 0.9 ^ t), v[i] / (1 - 0.999 ^ t)
                w[i] = w[i] - 0.01 * mh / (math.sqrt(vh) + 1e-8)
            end
        end
        close(p:totable(), w, 1e-9)
    end

    it("Adam matches the bias-corrected update computed by hand", function()
        check_adam(function(ps) return optim.Adam(ps, {lr = 0.01}) end, 0)
    end)

    it("AdamW decays the parameter itself, then takes Adam's step (by hand)", function()
        check_adam(function(ps) return optim.AdamW(ps, {lr = 0.01, weight_decay = 0.1}) end, 0.1)
    end)

    it("Adagrad, plain, with lr_decay, weight decay and a starting accumulator, matches Torch's update (by hand)",
       function()
        for _, o in ipairs({{}, {lr_decay = 0.5}, {weight_decay = 0.1, initial_accumulator_value = 0.3}}) do
            local p = ordo.tensor({1, -2}, D):requires_grad()
            local opts = {lr = 0.05}
            for k, val in pairs(o) do opts[k] = val end
            local opt = optim.Adagrad({p}, opts)
            local w, sum = {1, -2}, {o.initial_accumulator_value or 0, o.initial_accumulator_value or 0}
            for t = 1, 4 do
                opt:zero_grad()
                ;(p * p * p):sum():backward()
                opt:step()
                local clr = 0.05 / (1 + (t - 1) * (o.lr_decay or 0))
                for i = 1, 2 do
                    local g = 3 * w[i] * w[i] + (o.weight_decay or 0) * w[i]
                    sum[i] = sum[i] + g * g
                    w[i] = w[i] - clr * g / (math.sqrt(sum[i]) + 1e-10)
                end
            end
            close(p:totable(), w, 1e-9)
        end
        local q = ordo.tensor({1}, D):requires_grad()
        H.raises(function() optim.Adagrad({q}, {lr_decay = -1}) end, "Adagrad", "lr_decay")
        H.raises(function() optim.Adagrad({q}, {momentum = 0.9}) end, "Adagrad", "unknown option 'momentum'")
    end)

    it("RMSprop, plain, with momentum and centered, matches Torch's update (by hand)", function()
        for _, o in ipairs({{}, {momentum = 0.9}, {centered = true, weight_decay = 0.1}}) do
            local p = ordo.tensor({1, -2}, D):requires_grad()
            local opts = {lr = 0.01, alpha = 0.9}
            for k, val in pairs(o) do opts[k] = val end
            local opt = optim.RMSprop({p}, opts)
            local w, sq, avg, buf = {1, -2}, {0, 0}, {0, 0}, {0, 0}
            for _ = 1, 4 do
                opt:zero_grad()
                ;(p * p * p):sum():backward()
                opt:step()
                for i = 1, 2 do
                    local g = 3 * w[i] * w[i] + (o.weight_decay or 0) * w[i]
                    sq[i] = 0.9 * sq[i] + 0.1 * g * g
                    local var = sq[i]
                    if o.centered then
                        avg[i] = 0.9 * avg[i] + 0.1 * g
                        var = var - avg[i] * avg[i]
                    end
                    local step = g / (math.sqrt(var) + 1e-8)
                    if o.momentum then
                        buf[i] = o.momentum * buf[i] + step
                        step = buf[i]
                    end
                    w[i] = w[i] - 0.01 * step
                end
            end
            close(p:totable(), w, 1e-9)
        end
        local q = ordo.tensor({1}, D):requires_grad()
        H.raises(function() optim.RMSprop({q}, {alpha = 1}) end, "RMSprop", "alpha")
        H.raises(function() optim.AdamW({q}, {beta1 = 1}) end, "AdamW", "beta1")
        H.raises(function() optim.RMSprop({q}, {centered = 1}) end, "RMSprop", "centered", "boolean")
    end)

    it("Adamax, NAdam, RAdam, Adadelta and Rprop match Torch's updates step by step (by hand, float64)", function()
        -- Torch's update of one element, g = 3 w^2 - 1 (maximize: -g), st this element's state
        local function ref(name, o, w, g, st, t)
            local b1, b2, eps, wd = o.beta1 or 0.9, o.beta2 or 0.999, o.eps, o.weight_decay or 0
            if o.maximize then g = -g end
            if wd ~= 0 then
                if o.decoupled_weight_decay then w = w * (1 - o.lr * wd) else g = g + wd * w end
            end
            if name == "Adamax" then
                st.m = b1 * (st.m or 0) + (1 - b1) * g
                st.u = math.max(b2 * (st.u or 0), math.abs(g) + eps)
                return w - o.lr / (1 - b1 ^ t) * st.m / st.u
            elseif name == "NAdam" then
                local md = o.momentum_decay or 4e-3
                local mu, mu_next = b1 * (1 - 0.5 * 0.96 ^ (t * md)), b1 * (1 - 0.5 * 0.96 ^ ((t + 1) * md))
                st.mp = (st.mp or 1) * mu
                st.m = b1 * (st.m or 0) + (1 - b1) * g
                st.v = b2 * (st.v or 0) + (1 - b2) * g * g
                local den = math.sqrt(st.v / (1 - b2 ^ t)) + eps
                return w - o.lr * (1 - mu) / (1 - st.mp) * g / den - o.lr * mu_next / (1 - st.mp * mu_next) * st.m / den
            elseif name == "RAdam" then
                st.m = b1 * (st.m or 0) + (1 - b1) * g
                st.v = b2 * (st.v or 0) + (1 - b2) * g * g
                local c1, c2 = 1 - b1 ^ t, 1 - b2 ^ t
                local rho_inf = 2 / (1 - b2) - 1
                local rho_t = rho_inf - 2 * t * b2 ^ t / c2
                st.rectified = st.rectified or rho_t > 5
                if rho_t <= 5 then return w - o.lr * st.m / c1 end
                local r = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                return w - st.m / c1 * o.lr * math.sqrt(c2) / (math.sqrt(st.v) + eps) * r
            elseif name == "Adadelta" then
                local rho = o.rho or 0.9
                st.v = rho * (st.v or 0) + (1 - rho) * g * g
                local d = math.sqrt((st.u or 0) + eps) / math.sqrt(st.v + eps) * g
                st.u = rho * (st.u or 0) + (1 - rho) * d * d
                return w - o.lr * d
            else -- Rprop, etas {0.5, 1.2}, step sizes {1e-6, 50}
                local s = g * (st.prev or 0)
                st.size = math.min(math.max((st.size or o.lr) * (s > 0 and 1.2 or s < 0 and 0.5 or 1), 1e-6), 50)
                if s < 0 then g = 0 end
                st.flipped = st.flipped or s < 0
                st.prev = g
                return w - (g > 0 and 1 or g < 0 and -1 or 0) * st.size
            end
        end
        local cases = {
            {"Adamax", {lr = 0.01}}, {"Adamax", {lr = 0.01, weight_decay = 0.1, maximize = true}},
            {"NAdam", {lr = 0.01}}, {"NAdam", {lr = 0.01, weight_decay = 0.1, maximize = true}},
            {"NAdam", {lr = 0.01, weight_decay = 0.1, decoupled_weight_decay = true, momentum_decay = 0.01}},
            {"RAdam", {lr = 0.01}}, {"RAdam", {lr = 0.01, beta2 = 0.5, weight_decay = 0.1}},
            {"RAdam", {lr = 0.01, beta2 = 0.5, weight_decay = 0.1, decoupled_weight_decay = true, maximize = true}},
            {"Adadelta", {}}, {"Adadelta", {lr = 0.5, rho = 0.5, weight_decay = 0.1, maximize = true}},
            {"Rprop", {lr = 0.1}}, {"Rprop", {lr = 0.3, maximize = true}},
        }
        local defaults = {Adamax = {lr = 2e-3, eps = 1e-8}, NAdam = {lr = 2e-3, eps = 1e-8},
                          RAdam = {lr = 1e-3, eps = 1e-8}, Adadelta = {lr = 1, eps = 1e-6}, Rprop = {lr = 1e-2}}
        local rectified, flipped = false, false
        for _, c in ipairs(cases) do
            local name, opts = c[1], c[2]
            local full = {}
            for k, v in pairs(defaults[name]) do full[k] = v end
            for k, v in pairs(opts) do full[k] = v end
            local P0 = {0.5, -1, 0.3}
            local p = ordo.tensor(P0, D):requires_grad()
            local opt = optim[name]({p}, opts)
            local w, st = {P0[1], P0[2], P0[3]}, {{}, {}, {}}
            for t = 1, 8 do
                opt:zero_grad()
                ;(p * p * p - p):sum():backward()
                opt:step()
                for i = 1, 3 do
                    w[i] = ref(name, full, w[i], 3 * w[i] * w[i] - 1, st[i], t)
                    rectified = rectified or st[i].rectified
                    flipped = flipped or st[i].flipped
                end
                close(p:totable(), w, 1e-12)
            end
            assert.same({8, 8}, {opt.t, opt.steps[1]}, name)
        end
        assert.is_true(rectified) -- RAdam took both branches (beta2 = 0.5: rho_t > 5 from step 3)
        assert.is_true(flipped)   -- Rprop met a sign change
        -- Torch's defaults
        local q = ordo.tensor({1}, D):requires_grad()
        assert.same({2e-3, 0.9, 0.999, 1e-8, 0}, (function(o) return {o.lr, o.beta1, o.beta2, o.eps, o.weight_decay} end)(
            optim.Adamax({q})))
        local na = optim.NAdam({q})
        assert.same({2e-3, 4e-3, false}, {na.lr, na.momentum_decay, na.decoupled_weight_decay})
        local ad = optim.Adadelta({q})
        assert.same({1, 0.9, 1e-6, 0}, {ad.lr, ad.rho, ad.eps, ad.weight_decay})
        local rp = optim.Rprop({q})
        assert.same({1e-2, {0.5, 1.2}, {1e-6, 50}}, {rp.lr, rp.etas, rp.step_sizes})
        assert.equals(1e-3, optim.RAdam({q}).lr)
        assert.equals("optim.Rprop(1 parameter, lr = 0.01, etas = {0.5, 1.2}, maximize = false, " ..
                      "step_sizes = {1e-06, 50})", tostring(rp))
        -- options validation
        H.raises(function() optim.Adamax({q}, {beta1 = 1}) end, "Adamax", "beta1 and beta2 must be < 1")
        H.raises(function() optim.NAdam({q}, {betas = {0.9, 0.99}}) end, "NAdam", "unknown option 'betas'", "beta1")
        H.raises(function() optim.NAdam({q}, {momentum_decay = "0.1"}) end, "NAdam", "momentum_decay", "number")
        H.raises(function() optim.RAdam({q}, {decoupled_weight_decay = 1}) end, "RAdam", "decoupled_weight_decay",
                 "boolean")
        H.raises(function() optim.RAdam({q}, {eps = -1}) end, "RAdam", "eps must be >= 0")
        H.raises(function() optim.Adadelta({q}, {rho = 1.5}) end, "Adadelta", "rho must be in [0, 1]")
        H.raises(function() optim.Adadelta({q}, {momentum = 0.9}) end, "Adadelta", "unknown option 'momentum'")
        H.raises(function() optim.Rprop({q}, {etas = {1.2, 0.5}}) end, "Rprop", "0 < etaminus < 1 < etaplus")
        H.raises(function() optim.Rprop({q}, {etas = {0.5}}) end, "Rprop", "etas must be a list of two finite")
        H.raises(function() optim.Rprop({q}, {step_sizes = {1, 0 / 0}}) end, "Rprop", "step_sizes", "two finite")
        H.raises(function() optim.Rprop({q}, {step_sizes = {2, 1}}) end, "Rprop", "0 <= min <= max")
        H.raises(function() optim.Rprop({q}, {weight_decay = 0.1}) end, "Rprop", "unknown option 'weight_decay'")
        -- an option set wrong between steps raises at the step, changing nothing
        q.grad = ordo.ones({1}, D)
        rp.etas = {0.5, 0.9}
        H.raises(function() rp:step() end, "step", "etas")
        assert.same({{1}, 0}, {q:totable(), rp.t})
        -- the default etas are the optimiser's own: changing one optimiser's leaves the next's
        local r1 = optim.Rprop({q})
        r1.etas[2] = 1.5
        assert.same({0.5, 1.2}, optim.Rprop({q}).etas)
    end)

    it("LBFGS: Torch's two-loop step (by hand), strong Wolfe converges, resume bit-identical, bad input raises",
       function()
        -- f(x) = 0.5 x'Ax - b'x over two parameters (x1 of one element, x2 of one), g = Ax - b
        local A, b = {{3, 1}, {1, 2}}, {1, -1}
        local function grad(x) return {A[1][1] * x[1] + A[1][2] * x[2] - b[1], A[2][1] * x[1] + A[2][2] * x[2] - b[2]} end
        local function dotl(u, v) return u[1] * v[1] + u[2] * v[2] end
        local function problem(opts, x0)
            local x1, x2 = ordo.tensor({x0[1]}, D):requires_grad(), ordo.tensor({x0[2]}, D):requires_grad()
            local opt = optim.LBFGS({x1, x2}, opts)
            local evals = 0
            local function closure()
                evals = evals + 1
                opt:zero_grad()
                local x = ordo.cat({x1, x2}, 1)
                local Ax = ordo.tensor(A, D):matmul(x)
                local loss = (x * Ax):sum() * 0.5 - (x * ordo.tensor(b, D)):sum()
                loss:backward()
                return loss
            end
            return opt, closure, function() return {x1:item(), x2:item()} end, function() return evals end
        end
        -- one step of two iterations without a line search, by hand
        local x0, lr = {1, 1}, 0.5
        -- (max_eval given: max_iter 2's default, 2 * 5 / 4 floored, would stop after the first iteration)
        local opt, closure, X, evals = problem({lr = lr, max_iter = 2, max_eval = 10}, x0)
        local loss = opt:step(closure)
        close(loss:item(), 0.5 * dotl(x0, {A[1][1] + A[1][2], A[2][1] + A[2][2]}) - dotl(b, x0), 1e-12)
        local g0 = grad(x0)
        local d0 = {-g0[1], -g0[2]}
        local t1 = math.min(1, 1 / (math.abs(g0[1]) + math.abs(g0[2]))) * lr
        local x1 = {x0[1] + t1 * d0[1], x0[2] + t1 * d0[2]}
        local g1 = grad(x1)
        local y, s = {g1[1] - g0[1], g1[2] - g0[2]}, {d0[1] * t1, d0[2] * t1}
        local ys = dotl(y, s)
        local ro, hdiag = 1 / ys, ys / dotl(y, y)
        local q = {-g1[1], -g1[2]}
        local al = dotl(s, q) * ro
        q = {q[1] - al * y[1], q[2] - al * y[2]}
        local r = {q[1] * hdiag, q[2] * hdiag}
        local be = dotl(y, r) * ro
        r = {r[1] + s[1] * (al - be), r[2] + s[2] * (al - be)}
        close(X(), {x1[1] + lr * r[1], x1[2] + lr * r[2]}, 1e-12)
        assert.equals(2, evals()) -- the last iteration's point is not evaluated (Torch's)
        assert.same({1, 1, 1}, {opt.t, opt.steps[1], opt.steps[2]})
        -- with the strong Wolfe line search it reaches the minimum A^-1 b
        local det = A[1][1] * A[2][2] - A[1][2] * A[2][1]
        local xs = {(A[2][2] * b[1] - A[1][2] * b[2]) / det, (A[1][1] * b[2] - A[2][1] * b[1]) / det}
        opt, closure, X = problem({line_search_fn = "strong_wolfe"}, {3, -4})
        opt:step(closure)
        close(X(), xs, 1e-5) -- (to tolerance_change: the loss then changes by less than 1e-9)
        -- a checkpoint after 1 step, resumed: the same next steps to the bit (history kept)
        for _, ls in ipairs({"none", "strong_wolfe"}) do
            local o1, c1, X1 = problem({lr = 0.3, max_iter = 3, history_size = 2, line_search_fn = ls}, {2, 2})
            o1:step(c1)
            local sd = o1:state_dict()
            local path = os.tmpname()
            o1:save(path)
            o1:step(c1)
            o1:step(c1)
            for _, how in ipairs({"sd", "file"}) do
                local o2, c2, X2 = problem({lr = 0.3, max_iter = 3, history_size = 2, line_search_fn = ls}, {2, 2})
                local o0 = optim.LBFGS(o2.params, {lr = 0.3, max_iter = 3, history_size = 2, line_search_fn = ls})
                o0:step(c2) -- (the parameters as at the checkpoint; c2 zeroes o2's grads, the same tensors)
                if how == "sd" then o2:load_state_dict(sd) else o2:load(path) end
                o2:step(c2)
                o2:step(c2)
                assert.same(X1(), X2(), ls .. " " .. how)
            end
            os.remove(path)
        end
        -- a closure raising at a trial point of the line search: the parameters are put back, the
        -- history is left as it was (the next step goes on as if that one had not been)
        do
            local o1, c1, X1 = problem({line_search_fn = "strong_wolfe", max_iter = 2}, {2, 2})
            o1:step(c1)
            local before = X1()
            local calls = 0
            H.raises(function()
                o1:step(function()
                    calls = calls + 1
                    if calls == 2 then error("data loader failed") end
                    return c1()
                end)
            end, "data loader failed")
            assert.same(before, X1())
            local o2, c2, X2 = problem({line_search_fn = "strong_wolfe", max_iter = 2}, {2, 2})
            o2:step(c2)
            o1:step(c1)
            o2:step(c2)
            assert.same(X2(), X1())
        end
        -- bad input
        local p = ordo.tensor({1, 2}, D):requires_grad()
        local lb = optim.LBFGS({p})
        assert.same({1, 20, 25, 1e-7, 1e-9, 100, "none"}, {lb.lr, lb.max_iter, lb.max_eval, lb.tolerance_grad,
                                                          lb.tolerance_change, lb.history_size, lb.line_search_fn})
        assert.equals(12, optim.LBFGS({p}, {max_iter = 10}).max_eval) -- max_iter * 5 / 4, floored (Torch's)
        H.raises(function() lb:step() end, "step", "LBFGS needs a closure")
        H.raises(function() lb:step(function() (p * p):sum():backward() end) end, "step",
                 "closure must return the loss", "nil")
        H.raises(function() lb:step(function() p.grad = nil; return p * 2 end) end, "step",
                 "closure returned a tensor of shape 2")
        H.raises(function() optim.LBFGS({p}, {line_search_fn = "wolfe"}) end, "LBFGS", "line_search_fn", "strong_wolfe")
        H.raises(function() optim.LBFGS({p}, {max_iter = 0}) end, "LBFGS", "max_iter must be a whole number >= 1")
        H.raises(function() optim.LBFGS({p}, {history_size = 2.5}) end, "LBFGS", "history_size")
        H.raises(function() optim.LBFGS({p}, {momentum = 0.9}) end, "LBFGS", "unknown option 'momentum'")
        H.raises(function() optim.LBFGS({{params = {p}}}) end, "LBFGS", "does not take param groups")
        H.raises(function() lb:add_param_group({params = {ordo.ones({1}, D):requires_grad()}}) end,
                 "add_param_group", "LBFGS")
        H.raises(function() optim.LBFGS({p, ordo.ones({1}):requires_grad()}) end, "LBFGS", "parameter 2 is float32",
                 "one dtype")
        assert.same({1, 2}, p:totable())
        assert.equals(0, lb.t)
        -- a checkpoint of other parameters is refused
        local other = optim.LBFGS({ordo.tensor({1, 2, 3}, D):requires_grad()})
        opt, closure = problem({}, {1, 1})
        opt:step(closure)
        H.raises(function() other:load_state_dict(opt:state_dict()) end, "load_state_dict", "is for 2 parameters")
    end)

    it("Adamax, NAdam, RAdam, Adadelta and Rprop: param groups, state_dict resume bit-identical", function()
        for _, name in ipairs({"Adamax", "NAdam", "RAdam", "Adadelta", "Rprop"}) do
            local function make()
                local a, b = ordo.tensor({0.5, -1}, D):requires_grad(), ordo.tensor({2, 0.25, -0.5}, D):requires_grad()
                return a, b, optim[name]({{params = {a}, lr = 0.05}, {params = {b}}}, {lr = 0.01})
            end
            local function run(a, b, o, k)
                for s = 1, k do
                    o:zero_grad()
                    ;((a * a * a):sum() * s + (b * b):sum()):backward()
                    o:step()
                end
            end
            local a, b, o = make()
            run(a, b, o, 3)
            -- group 1 (lr 0.05) moved its parameter further than a lone optimiser at lr 0.01 would
            local a1 = ordo.tensor({0.5, -1}, D):requires_grad()
            local lone = optim[name]({a1}, {lr = 0.01})
            run(a1, ordo.zeros({3}, D):requires_grad(), lone, 3)
            assert.is_true(math.abs(a:totable()[1] - 0.5) > math.abs(a1:totable()[1] - 0.5), name)
            local sd = o:state_dict()
            local path = os.tmpname()
            o:save(path)
            run(a, b, o, 3)
            for _, resume in ipairs({"sd", "file"}) do
                -- the parameters as they were at the checkpoint (the first 3 steps again), a fresh optimiser
                local a2, b2, o2 = make()
                run(a2, b2, optim[name]({{params = {a2}, lr = 0.05}, {params = {b2}}}, {lr = 0.01}), 3)
                if resume == "sd" then o2:load_state_dict(sd) else o2:load(path) end
                assert.equals(3, o2.t, name)
                run(a2, b2, o2, 3)
                assert.same(a:totable(), a2:totable(), name .. " " .. resume)
                assert.same(b:totable(), b2:totable(), name .. " " .. resume)
            end
            os.remove(path)
            -- another kind's state is refused, the optimiser left as it was
            local _, _, other = make()
            local wrong = name == "Adamax" and optim.NAdam(other.params) or optim.Adamax(other.params)
            H.raises(function() wrong:load_state_dict(sd) end, "load_state_dict", "holds the state of optim." .. name)
            assert.equals(0, wrong.t)
        end
    end)

    it("lr schedulers set opt.lr from their closed forms, epoch by epoch", function()
        local S = optim.lr_scheduler
        local function run(make, n)
            local p = ordo.tensor({1}, D):requires_grad()
            local opt = optim.SGD({p}, {lr = 0.1})
            local s = make(opt)
            local lrs = {opt.lr}
            for e = 1, n do
                assert.equals(s:step(), opt.lr)
                lrs[e + 1] = s:get_last_lr()
            end
            return lrs
        end
        close(run(function(o) return S.StepLR(o, {step_size = 2, gamma = 0.5}) end, 5),
              {0.1, 0.1, 0.05, 0.05, 0.025, 0.025}, 1e-15)
        close(run(function(o) return S.MultiStepLR(o, {milestones = {1, 3}}) end, 4),
              {0.1, 0.01, 0.01, 0.001, 0.001}, 1e-15)
        close(run(function(o) return S.ExponentialLR(o, {gamma = 0.5}) end, 3), {0.1, 0.05, 0.025, 0.0125}, 1e-15)
        local cos = {}
        for e = 0, 6 do cos[e + 1] = 0.01 + 0.09 * (1 + math.cos(math.pi * e / 4)) / 2 end
        close(run(function(o) return S.CosineAnnealingLR(o, {T_max = 4, eta_min = 0.01}) end, 6), cos, 1e-15)
        -- warm restarts: cycles of 2, 4, 8 epochs (T_mult = 2), each from the base down towards eta_min
        local wr, t, len = {}, 0, 2
        for e = 0, 10 do
            wr[e + 1] = 0.01 + 0.09 * (1 + math.cos(math.pi * t / len)) / 2
            t = t + 1
            if t == len then t, len = 0, len * 2 end
        end
        close(run(function(o) return S.CosineAnnealingWarmRestarts(o, {T_0 = 2, T_mult = 2, eta_min = 0.01}) end, 10),
              wr, 1e-15)
        close(run(function(o) return S.CosineAnnealingWarmRestarts(o, {T_0 = 3}) end, 4),
              {0.1, 0.075, 0.025, 0.1, 0.075}, 1e-15)
        do
            local q = ordo.tensor({1}, D):requires_grad()
            local o = optim.SGD({q}, {lr = 0.1})
            local w = S.CosineAnnealingWarmRestarts(o, {T_0 = 2, T_mult = 2})
            for _ = 1, 5 do w:step() end
            local again = S.CosineAnnealingWarmRestarts(optim.SGD({q}, {lr = 0.1}), {T_0 = 2, T_mult = 2})
            again:load_state_dict(w:state_dict())
            assert.equal(5, again.epoch)
            close(again:get_last_lr(), o.lr, 1e-15)
            H.raises(function() S.CosineAnnealingWarmRestarts(o, {T_0 = 2, T_mult = 1.5}) end, "T_mult", "integer")
            -- step(epoch) with a fractional epoch, stepped per batch (Torch's form for this scheduler),
            -- checked against Torch's formula: n = floor(log_T_mult(e / T_0 * (T_mult - 1) + 1))
            local function torch_wr(e, T_0, T_mult, base)
                local T_cur, T_i = e, T_0
                if e >= T_0 then
                    local n = math.floor(math.log(e / T_0 * (T_mult - 1) + 1) / math.log(T_mult) + 1e-12)
                    T_cur, T_i = e - T_0 * (T_mult ^ n - 1) / (T_mult - 1), T_0 * T_mult ^ n
                end
                return base * (1 + math.cos(math.pi * T_cur / T_i)) / 2
            end
            local o4 = optim.SGD({q}, {lr = 0.1})
            local fr = S.CosineAnnealingWarmRestarts(o4, {T_0 = 2, T_mult = 2})
            for _, e in ipairs({0.25, 1.5, 2.5, 5.75, 7, 13.5}) do
                close(fr:step(e), torch_wr(e, 2, 2, 0.1), 1e-12, "epoch " .. e)
                close(o4.lr, torch_wr(e, 2, 2, 0.1), 1e-12)
            end
            close(fr:step(), torch_wr(14.5, 2, 2, 0.1), 1e-12) -- step() goes on by 1
            assert.equal(14.5, fr.epoch)
            local back = S.CosineAnnealingWarmRestarts(optim.SGD({q}, {lr = 0.1}), {T_0 = 2, T_mult = 2})
            local path = os.tmpname()
            fr:save(path)
            back:load(path)
            os.remove(path)
            assert.equal(14.5, back.epoch)
            assert.equal(fr:step(3.25), back:step(3.25))
            H.raises(function() fr:step(-1) end, "CosineAnnealingWarmRestarts", "epoch", "-1")
            -- a far epoch with T_mult = 1 is a remainder, not a loop of 1e15 turns
            local far = S.CosineAnnealingWarmRestarts(optim.SGD({q}, {lr = 0.1}), {T_0 = 3})
            close(far:step(1e15), 0.075, 1e-12) -- 1e15 = 1 (mod 3)
            H.raises(function() fr:step("x") end, "CosineAnnealingWarmRestarts", "epoch", "string")
            H.raises(function() fr:step(0 / 0) end, "CosineAnnealingWarmRestarts", "nan")
            H.raises(function() S.StepLR(o4, {step_size = 1}):step(2) end, "StepLR", "takes no argument")
            H.raises(function() S.CosineAnnealingWarmRestarts(o, {}) end, "T_0", "required")
        end
        -- ConstantLR and PolynomialLR, Torch's closed forms
        close(run(function(o) return S.ConstantLR(o, {factor = 0.5, total_iters = 2}) end, 3),
              {0.05, 0.05, 0.1, 0.1}, 1e-15)
        close(run(function(o) return S.ConstantLR(o, {}) end, 6), {0.1 / 3, 0.1 / 3, 0.1 / 3, 0.1 / 3, 0.1 / 3, 0.1, 0.1},
              1e-15)
        local poly = {}
        for e = 0, 6 do poly[e + 1] = 0.1 * (1 - math.min(e, 4) / 4) ^ 2 end
        close(run(function(o) return S.PolynomialLR(o, {total_iters = 4, power = 2}) end, 6), poly, 1e-15)
        close(run(function(o) return S.PolynomialLR(o, {}) end, 6), {0.1, 0.08, 0.06, 0.04, 0.02, 0, 0}, 1e-15)
        do
            local q = ordo.tensor({1}, D):requires_grad()
            local o = optim.SGD({q}, {lr = 0.1})
            H.raises(function() S.ConstantLR(o, {factor = 1.5}) end, "ConstantLR", "factor", "[0, 1]")
            H.raises(function() S.ConstantLR(o, {total_iters = 0}) end, "ConstantLR", "total_iters", "integer >= 1")
            H.raises(function() S.PolynomialLR(o, {power = -1}) end, "PolynomialLR", "power", ">= 0")
            local pl = S.PolynomialLR(o, {total_iters = 4, power = 2})
            pl:step(); pl:step()
            local again = S.PolynomialLR(optim.SGD({q}, {lr = 0.1}), {total_iters = 4, power = 2})
            again:load_state_dict(pl:state_dict())
            assert.equal(2, again.epoch)
            assert.equal(pl:step(), again:step())
            H.raises(function() S.PolynomialLR(optim.SGD({q}, {lr = 0.1}), {power = 3}):load_state_dict(pl:state_dict()) end,
                     "total_iters")
        end
        do
            -- a rate that overflows to inf is refused where it is made, changing nothing
            local q = ordo.tensor({1}, D):requires_grad()
            local o = optim.SGD({q}, {lr = 0.1})
            local ex = S.ExponentialLR(o, {gamma = 10})
            for _ = 1, 300 do ex:step() end
            local lr = o.lr
            H.raises(function() for _ = 1, 20 do ex:step() end end, "ExponentialLR", "inf", "finite")
            assert.is_true(o.lr < math.huge and o.lr == ex:get_last_lr() and ex.epoch < 320)
            H.raises(function() S.LambdaLR(optim.SGD({q}, {lr = 1e300}), {lr_lambda = function() return 1e10 end}) end,
                     "LambdaLR", "epoch 0", "inf")
            assert.is_true(lr > 0)
            -- get_last_lr is the rate the scheduler set, not an lr set by hand since
            local st = S.StepLR(o, {step_size = 1, gamma = 0.5})
            st:step()
            local set = o.lr
            o.lr = 123
            assert.equal(set, st:get_last_lr())
        end
        do
            -- CyclicLR: up from 0.1 to 1 in 2 steps, down in 3, again and again (the optimiser's lr unused)
            local tri = {0, 0.5, 1, 2 / 3, 1 / 3}
            local function want(mode)
                local w = {}
                for e = 0, 12 do
                    local cyc = math.floor(e / 5) + 1
                    local scale = mode == "triangular2" and 0.5 ^ (cyc - 1) or mode == "exp_range" and 0.9 ^ e or 1
                    w[e + 1] = 0.1 + 0.9 * tri[e % 5 + 1] * scale
                end
                return w
            end
            for _, mode in ipairs({"triangular", "triangular2", "exp_range"}) do
                close(run(function(o) return S.CyclicLR(o, {base_lr = 0.1, max_lr = 1, step_size_up = 2,
                                                            step_size_down = 3, mode = mode, gamma = 0.9}) end, 12),
                      want(mode), 1e-12, mode)
            end
            -- scale_fn of the cycle (as triangular2), and step_size_down defaulting to step_size_up
            close(run(function(o) return S.CyclicLR(o, {base_lr = 0, max_lr = 1, step_size_up = 2,
                                                        scale_fn = function(c) return 1 / c end}) end, 8),
                  {0, 0.5, 1, 0.5, 0, 0.25, 0.5, 0.25, 0}, 1e-15)
            local q = ordo.tensor({1}, D):requires_grad()
            local o = optim.SGD({q}, {lr = 0.1})
            H.raises(function() S.CyclicLR(o, {base_lr = 0.1, max_lr = 1, mode = "triangle"}) end, "CyclicLR", "mode",
                     "triangle")
            H.raises(function() S.CyclicLR(o, {base_lr = 0.1, max_lr = 1, step_size_up = 0}) end, "step_size_up",
                     "positive")
            H.raises(function() S.CyclicLR(o, {base_lr = 0.1}) end, "CyclicLR", "max_lr", "required")
            H.raises(function() S.CyclicLR(o, {base_lr = 0.1, max_lr = 1, scale_mode = "cycle"}) end, "scale_fn")
            local c = S.CyclicLR(o, {base_lr = 0.1, max_lr = 1, step_size_up = 2, mode = "exp_range", gamma = 0.5})
            c:step(); c:step(); c:step()
            local again = S.CyclicLR(optim.SGD({q}, {lr = 0.1}), {base_lr = 0.1, max_lr = 1, step_size_up = 2,
                                                                  mode = "exp_range", gamma = 0.5})
            again:load_state_dict(c:state_dict())
            assert.equal(c:step(), again:step())
            H.raises(function() S.CyclicLR(optim.SGD({q}, {lr = 0.1}), {base_lr = 0.1, max_lr = 1, step_size_up = 2})
                                 :load_state_dict(c:state_dict()) end, "mode")
        end
        do
            -- MultiplicativeLR: the lr times lr_lambda(epoch) at each step, the function called once a step
            local calls = 0
            local function f(e) calls = calls + 1; return e % 2 == 1 and 0.5 or 0.9 end
            close(run(function(o) return S.MultiplicativeLR(o, {lr_lambda = f}) end, 4),
                  {0.1, 0.05, 0.045, 0.0225, 0.02025}, 1e-15)
            assert.equal(4, calls)
            local q = ordo.tensor({1}, D):requires_grad()
            local o = optim.SGD({q}, {lr = 0.1})
            local m = S.MultiplicativeLR(o, {lr_lambda = f})
            m:step(); m:step(); m:step()
            local again = S.MultiplicativeLR(optim.SGD({q}, {lr = 0.1}), {lr_lambda = f})
            again:load_state_dict(m:state_dict())
            close(again:get_last_lr(), 0.0225, 1e-15)
            assert.equal(m:step(), again:step())
            local bad = S.MultiplicativeLR(o, {lr_lambda = function(e) return e == 2 and -1 or 1 end})
            bad:step()
            local lr = o.lr
            H.raises(function() bad:step() end, "MultiplicativeLR", "lr_lambda(2)", "-1")
            assert.equal(lr, o.lr)
            assert.equal(1, bad.epoch)
        end
        -- a warm-up: the epoch-0 rate is set when the scheduler is made
        close(run(function(o) return S.LambdaLR(o, {lr_lambda = function(e) return math.min(1, (e + 1) / 4) end}) end, 4),
              {0.025, 0.05, 0.075, 0.1, 0.1}, 1e-15)
        local p = ordo.tensor({1}, D):requires_grad()
        local opt = optim.SGD({p}, {lr = 0.1})
        H.raises(function() S.StepLR(opt, {}) end, "StepLR", "step_size", "required")
        H.raises(function() S.StepLR(opt, {step_size = 0}) end, "StepLR", "step_size", "integer >= 1")
        H.raises(function() S.StepLR(opt, {step_size = 1, gama = 2}) end, "StepLR", "unknown option 'gama'")
        H.raises(function() S.MultiStepLR(opt, {milestones = {3, 2}}) end, "MultiStepLR", "milestone 2")
        -- a milestone listed twice cuts twice (Torch's Counter: gamma^2 there)
        close(run(function(o) return S.MultiStepLR(o, {milestones = {1, 3, 3}, gamma = 0.5}) end, 4),
              {0.1, 0.05, 0.05, 0.0125, 0.0125}, 1e-15)
        -- milestones (and SequentialLR's lists) must be lists: keys ipairs never sees were dropped unseen
        H.raises(function() S.MultiStepLR(opt, {milestones = {a = 3}}) end, "MultiStepLR", "milestones", "list")
        H.raises(function() S.MultiStepLR(opt, {milestones = {2, nil, 5}}) end, "MultiStepLR", "milestones", "list")
        do
            local w = S.LinearLR(opt, {total_iters = 2})
            local d = S.ExponentialLR(opt, {gamma = 0.5})
            H.raises(function() S.SequentialLR(opt, {schedulers = {w, d}, milestones = {2, x = 4}}) end,
                     "SequentialLR", "milestones", "list")
            H.raises(function() S.SequentialLR(opt, {schedulers = {w, d, [4] = w}, milestones = {2}}) end,
                     "SequentialLR", "schedulers", "list")
            opt.lr = 0.1
        end
        -- patience and cooldown may be 0: a negative one is refused saying so
        H.raises(function() S.ReduceLROnPlateau(opt, {patience = -1}) end, "patience", "integer >= 0")
        H.raises(function() S.ReduceLROnPlateau(opt, {cooldown = 1.5}) end, "cooldown", "integer >= 0")
        H.raises(function() S.CosineAnnealingLR({}, {T_max = 3}) end, "CosineAnnealingLR", "optimiser")
        -- an optimiser whose lr was set to a string was said not to be one ("got optim.SGD"); NaN was taken
        do
            local bad_lr = optim.SGD({ordo.tensor({1}, D):requires_grad()})
            bad_lr.lr = "0.1"
            H.raises(function() S.StepLR(bad_lr, {step_size = 1}) end, "StepLR", "opt.lr must be a finite number >= 0",
                     "string")
            bad_lr.lr = 0 / 0
            H.raises(function() S.ReduceLROnPlateau(bad_lr) end, "ReduceLROnPlateau", "opt.lr must be a finite number")
        end
        H.raises(function() S.ExponentialLR(opt, {gamma = "x"}) end, "ExponentialLR", "gamma", "string")
        local bad = S.LambdaLR(opt, {lr_lambda = function(e) return e == 0 and 1 or "x" end})
        H.raises(function() bad:step() end, "LambdaLR", "lr_lambda(1)", "string")

        -- LinearLR: a factor from 0.25 to 1 over 3 epochs, then 1
        close(run(function(o) return S.LinearLR(o, {start_factor = 0.25, total_iters = 3}) end, 5),
              {0.025, 0.05, 0.075, 0.1, 0.1, 0.1}, 1e-15)
        -- OneCycleLR (10 steps, max 0.1): 0.1/25 at step 0, the peak at step
        -- 0.3 * 10 - 1 = 2, 0.1/25/1e4 at the last; Torch's values for the first three
        local one = run(function(o) return S.OneCycleLR(o, {max_lr = 0.1, total_steps = 10}) end, 9)
        close({0.004, 0.052, 0.1}, {one[1], one[2], one[3]}, 1e-12)
        close(0.004 / 1e4, one[10], 1e-12)
        for k = 4, 10 do
            local pct = (k - 3) / 7
            close(one[k], 0.004 / 1e4 + (0.1 - 0.004 / 1e4) * (1 + math.cos(math.pi * pct)) / 2, 1e-12, "step " .. k - 1)
        end
        local lin = run(function(o) return S.OneCycleLR(o, {max_lr = 1, total_steps = 5, pct_start = 0.6,
                                                            div_factor = 4, anneal_strategy = "linear"}) end, 4)
        close({0.25, 0.625, 1, (1 + 0.25 / 1e4) / 2, 0.25 / 1e4}, lin, 1e-12)
        -- total_steps steps are allowed (Torch raises only past them); the last goes on along the curve
        local oc = S.OneCycleLR(opt, {max_lr = 0.1, total_steps = 2})
        oc:step()
        oc:step()
        H.raises(function() oc:step() end, "OneCycleLR", "stepped 3 times", "total_steps = 2")
        local ten = run(function(o) return S.OneCycleLR(o, {max_lr = 0.1, total_steps = 10}) end, 10)
        close(ten[11], 0.004 / 1e4 + (0.1 - 0.004 / 1e4) * (1 + math.cos(math.pi * 8 / 7)) / 2, 1e-12)
        H.raises(function() S.OneCycleLR(opt, {max_lr = 0.1}) end, "OneCycleLR", "total_steps", "required")
        -- epochs * steps_per_epoch in place of total_steps (Torch's other form)
        close(run(function(o) return S.OneCycleLR(o, {max_lr = 0.1, epochs = 2, steps_per_epoch = 5}) end, 10), ten,
              1e-15)
        H.raises(function() S.OneCycleLR(opt, {max_lr = 0.1, epochs = 2}) end, "OneCycleLR", "steps_per_epoch",
                 "required")
        H.raises(function() S.OneCycleLR(opt, {max_lr = 0.1, epochs = 2, steps_per_epoch = 5, total_steps = 10}) end,
                 "OneCycleLR", "not both")
        H.raises(function() S.OneCycleLR(opt, {max_lr = 0.1, epochs = 0, steps_per_epoch = 5}) end, "OneCycleLR",
                 "epochs", "integer >= 1")
        -- three_phase: up to max_lr at step 2, back to the start at step 4, down to the end at step 9
        do
            local a, z, mx = 0.04, 0.04 / 1e4, 1
            local function c(from, to, pct) return to + (from - to) * (1 + math.cos(math.pi * pct)) / 2 end
            local want = {a, c(a, mx, 0.5), mx, c(mx, a, 0.5), a}
            for e = 5, 10 do want[e + 1] = c(a, z, (e - 4) / 5) end
            close(run(function(o) return S.OneCycleLR(o, {max_lr = 1, total_steps = 10, three_phase = true}) end, 10),
                  want, 1e-12)
            local lin = run(function(o) return S.OneCycleLR(o, {max_lr = 1, total_steps = 10, three_phase = true,
                                                                anneal_strategy = "linear"}) end, 9)
            close({a, (a + mx) / 2, mx, (a + mx) / 2, a, a + (z - a) * 0.2}, {lin[1], lin[2], lin[3], lin[4], lin[5], lin[6]},
                  1e-12)
            close(z, lin[10], 1e-12)
            -- saved and loaded: three_phase must match
            local q = ordo.tensor({1}, D):requires_grad()
            local o3 = optim.SGD({q}, {lr = 0.1})
            local s3 = S.OneCycleLR(o3, {max_lr = 1, total_steps = 10, three_phase = true})
            s3:step(); s3:step(); s3:step()
            local st = s3:state_dict()
            local again = S.OneCycleLR(optim.SGD({q}, {lr = 0.1}), {max_lr = 1, total_steps = 10, three_phase = true})
            again:load_state_dict(st)
            assert.equal(s3:step(), again:step())
            H.raises(function() S.OneCycleLR(optim.SGD({q}, {lr = 0.1}), {max_lr = 1, total_steps = 10}):load_state_dict(st) end,
                     "three_phase")
            -- a state saved before three_phase existed loads as two phases
            st.three_phase = nil
            S.OneCycleLR(optim.SGD({q}, {lr = 0.1}), {max_lr = 1, total_steps = 10}):load_state_dict(st)
            -- so does a SequentialLR's OneCycleLR (it raised "saved with s2.three_phase = nil"); one saved
            -- before momentum was cycled loads into one made with cycle_momentum = false
            local function seq(cm)
                local o = optim.SGD({q}, {lr = 0.1})
                local w = S.LinearLR(o, {total_iters = 2})
                local one = S.OneCycleLR(o, {max_lr = 1, total_steps = 10, cycle_momentum = cm})
                return S.SequentialLR(o, {schedulers = {w, one}, milestones = {2}})
            end
            local sst = seq(false):state_dict()
            sst["s2.three_phase"], sst["s2.cycle_momentum"] = nil, nil
            seq(false):load_state_dict(sst)
            H.raises(function() seq(true):load_state_dict(sst) end, "s2.cycle_momentum")
            H.raises(function() S.OneCycleLR(o3, {max_lr = 1, total_steps = 10, three_phase = 1}) end,
                     "three_phase", "boolean")
            -- past half the steps for the climb and the way back, the final fall never came (it ended at 0.04)
            H.raises(function() S.OneCycleLR(o3, {max_lr = 1, total_steps = 10, three_phase = true, pct_start = 0.6}) end,
                     "OneCycleLR", "three_phase with pct_start = 0.6 leaves no step for the final fall",
                     "pct_start <= 0.5")
            S.OneCycleLR(optim.SGD({q}, {lr = 0.1}), {max_lr = 1, total_steps = 10, three_phase = true, pct_start = 0.5})
        end
        H.raises(function() S.LinearLR(opt, {start_factor = 0}) end, "LinearLR", "start_factor")

        -- SequentialLR: a 3-epoch linear warm-up from 0.1 of the base, then a cosine over 4 epochs
        local seq = run(function(o)
            local warm = S.LinearLR(o, {start_factor = 0.1, total_iters = 3})
            local decay = S.CosineAnnealingLR(o, {T_max = 4})
            return S.SequentialLR(o, {schedulers = {warm, decay}, milestones = {3}})
        end, 7)
        local want = {0.01, 0.04, 0.07}
        for e = 0, 4 do want[4 + e] = 0.1 * (1 + math.cos(math.pi * e / 4)) / 2 end
        close(seq, want, 1e-15)
        local o2 = optim.SGD({p}, {lr = 0.1})
        local s1 = S.StepLR(o2, {step_size = 1})
        H.raises(function() S.SequentialLR(o2, {schedulers = {s1}, milestones = {2}}) end, "SequentialLR",
                 "n - 1 milestones")
        H.raises(function() S.SequentialLR(o2, {schedulers = {s1, {}}, milestones = {2}}) end, "SequentialLR",
                 "scheduler 2")
        H.raises(function() S.SequentialLR(o2, {schedulers = {s1, s1}, milestones = {0}}) end, "SequentialLR",
                 "milestone 1")
        do
            -- a SequentialLR's state holds its schedulers' kinds and options: loaded into one made with
            -- other schedulers, it raises naming the field (it went on with their rates, unseen)
            local function make(gamma, second)
                local q = ordo.tensor({1}, D):requires_grad()
                local o = optim.SGD({q}, {lr = 0.1})
                local w = S.LinearLR(o, {total_iters = 2})
                local d = second == "step" and S.StepLR(o, {step_size = 1, gamma = gamma})
                          or S.MultiStepLR(o, {milestones = {1, 2}, gamma = gamma})
                return S.SequentialLR(o, {schedulers = {w, d}, milestones = {2}}), o
            end
            local a = make(0.5)
            for _ = 1, 4 do a:step() end
            local st = a:state_dict()
            local b, ob = make(0.5)
            b:load_state_dict(st)
            assert.equal(a:step(), b:step())
            assert.equal(a:get_last_lr(), ob.lr)
            local c, oc = make(0.9)
            local before = oc.lr
            H.raises(function() c:load_state_dict(st) end, "SequentialLR", "s2.gamma", "0.5", "0.9")
            assert.equal(before, oc.lr)
            assert.equal(0, c.epoch)
            H.raises(function() make(0.5, "step"):load_state_dict(st) end, "s2.kind", "MultiStepLR", "StepLR")
            -- through a file too
            local path = os.tmpname()
            a:save(path)
            local d = make(0.5)
            d:load(path)
            assert.equal(a.epoch, d.epoch)
            H.raises(function() make(0.9):load(path) end, "s2.gamma")
            os.remove(path)
            -- a state saved without them (before they were saved) still loads
            for k in pairs(st) do if k:find("^s%d") then st[k] = nil end end
            make(0.9):load_state_dict(st)
        end
        do
            -- a SequentialLR inside another, second: all of them count from the first one's base
            local q = ordo.tensor({1}, D):requires_grad()
            local o = optim.SGD({q}, {lr = 1})
            local w = S.ConstantLR(o, {factor = 0.5, total_iters = 2})
            local inner = S.SequentialLR(o, {schedulers = {S.ExponentialLR(o, {gamma = 0.5}),
                                                           S.StepLR(o, {step_size = 1, gamma = 0.1})}, milestones = {2}})
            local outer = S.SequentialLR(o, {schedulers = {w, inner}, milestones = {2}})
            local got = {o.lr}
            for e = 1, 6 do got[e + 1] = outer:step() end
            close(got, {0.5, 0.5, 1, 0.5, 1, 0.1, 0.01}, 1e-15)
        end
    end)

    it("schedulers refuse options and rates that would set opt.lr to inf, NaN or below 0; a failed step changes nothing",
       function()
        local S = optim.lr_scheduler
        local p = ordo.zeros({2}):requires_grad()
        local opt = optim.SGD({p}, {lr = 0.1})
        local bad = {
            {"StepLR", {step_size = 1, gamma = math.huge}, "option gamma must be a finite number, got inf"},
            {"ExponentialLR", {gamma = math.huge}, "option gamma must be a finite number"},
            {"CosineAnnealingLR", {T_max = 3, eta_min = math.huge}, "option eta_min must be a finite number"},
            {"CosineAnnealingWarmRestarts", {T_0 = 3, eta_min = 0 / 0}, "option eta_min must be a finite number"},
            {"OneCycleLR", {max_lr = math.huge, total_steps = 4}, "option max_lr must be a finite number"},
            {"OneCycleLR", {max_lr = 1, total_steps = 4, div_factor = 0}, "div_factor must be positive, got 0"},
            {"OneCycleLR", {max_lr = 1, total_steps = 4, div_factor = -5}, "div_factor must be positive, got -5"},
            {"OneCycleLR", {max_lr = 1, total_steps = 4, final_div_factor = 0}, "final_div_factor must be positive"},
            {"LambdaLR", {lr_lambda = function() return 0 / 0 end}, "lr_lambda(0) returned nan"},
            {"LambdaLR", {lr_lambda = function() return -1 end}, "lr_lambda(0) returned -1, expected a finite number >= 0"},
            {"LambdaLR", {lr_lambda = function() return math.huge end}, "lr_lambda(0) returned inf"},
            {"ReduceLROnPlateau", {min_lr = math.huge}, "option min_lr must be a finite number"},
            {"ReduceLROnPlateau", {threshold = math.huge}, "option threshold must be a finite number"},
            {"ReduceLROnPlateau", {eps = -1}, "eps must be >= 0, got -1"},
            {"ReduceLROnPlateau", {eps = 0 / 0}, "option eps must be a finite number"},
        }
        for _, c in ipairs(bad) do
            H.raises(function() S[c[1]](opt, c[2]) end, c[1] .. ": ", c[3])
            assert.equal(0.1, opt.lr, c[1])
        end
        -- a rate that raises at a step leaves the epoch count and opt.lr as they were
        local lam = S.LambdaLR(opt, {lr_lambda = function(e) return e < 2 and 1 / (e + 1) or -1 end})
        lam:step()
        H.raises(function() lam:step() end, "lr_lambda(2) returned -1")
        assert.equal(1, lam.epoch)
        close(opt.lr, 0.05, 1e-15)
        opt.lr = 0.1
        local oc = S.OneCycleLR(opt, {max_lr = 0.1, total_steps = 2})
        oc:step()
        oc:step()
        local lr = opt.lr
        H.raises(function() oc:step() end, "OneCycleLR", "stepped 3 times")
        H.raises(function() oc:step() end, "OneCycleLR", "stepped 3 times") -- (not 4: the count stayed)
        assert.equal(2, oc.epoch)
        assert.equal(lr, opt.lr)
        local st = oc:state_dict() -- still a state that loads
        S.OneCycleLR(opt, {max_lr = 0.1, total_steps = 2}):load_state_dict(st)
    end)

    it("a scheduler's step raises when opt.lr is not what it set (schedulers do not chain; an lr set by hand)", function()
        local S = optim.lr_scheduler
        local p = ordo.zeros({2}):requires_grad()
        local opt = optim.SGD({p}, {lr = 0.1})
        local warm = S.LambdaLR(opt, {lr_lambda = function(e) return math.min(1, (e + 1) / 3) end})
        local decay = S.ExponentialLR(opt, {gamma = 0.5}) -- a second one on opt: would silently override warm
        warm:step()
        H.raises(function() decay:step() end, "ExponentialLR: opt.lr is 0.0666", "not the 0.0333",
                 "SequentialLR")
        assert.equal(0, decay.epoch)
        local plateau = S.ReduceLROnPlateau(opt, {patience = 0})
        plateau:step(1)
        plateau:step(2) -- cuts opt.lr
        H.raises(function() warm:step() end, "LambdaLR: opt.lr is", "this scheduler set")
        opt.lr = 0.1
        local s = S.StepLR(opt, {step_size = 1, gamma = 0.5})
        s:step()
        opt.lr = 0.3 -- by hand
        H.raises(function() s:step() end, "StepLR: opt.lr is 0.3, not the 0.05 this scheduler set")
        -- load_state_dict sets opt.lr: stepping goes on from there
        local st = s:state_dict()
        s:load_state_dict(st)
        s:step()
        close(opt.lr, 0.025, 1e-15)
        -- SequentialLR steps its schedulers' closed forms itself
        local o2 = optim.SGD({p}, {lr = 0.1})
        local seq = S.SequentialLR(o2, {schedulers = {S.LinearLR(o2, {total_iters = 2}), S.ExponentialLR(o2, {gamma = 0.5})},
                                        milestones = {2}})
        for _ = 1, 4 do seq:step() end
        close(o2.lr, 0.025, 1e-15)
    end)

    it("opt:state_dict / opt:load_state_dict: the checkpoint in memory, a snapshot, copied in; mismatches raise", function()
        for _, name in ipairs({"SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam", "Adadelta",
                               "Rprop"}) do
            local function make()
                local p = ordo.tensor({1, 2}, D):requires_grad()
                local mom = (name == "SGD" or name == "RMSprop") and 0.9 or nil
                return p, optim[name]({p}, {lr = 0.1, momentum = mom})
            end
            local function run(p, o, k)
                for s = 1, k do
                    o:zero_grad()
                    ;(p * p * s):sum():backward()
                    o:step()
                end
            end
            local p, o = make()
            run(p, o, 3)
            local sd = o:state_dict()
            local p2, o2 = make()
            ordo.no_grad(function() p2:copy_(p) end)
            o2:load_state_dict(sd)
            run(p, o, 2)
            run(p2, o2, 2) -- resumed from the state dict: exactly the original run
            assert.same(p:totable(), p2:totable(), name)
            -- sd was a snapshot and o2 copied it: neither run changed it, so it resumes step 3 again
            local p3, o3 = make()
            local before = p:totable()
            ordo.no_grad(function() p3:copy_(p2) end)
            o3:load_state_dict(sd)
            assert.equal(3, o3.t)
            run(p3, o3, 1)
            assert.are_not.same(before, p3:totable())
        end
        local p = ordo.zeros({2}):requires_grad()
        local o = optim.SGD({p}, {lr = 0.1})
        H.raises(function() o:load_state_dict(5) end, "load_state_dict", "expected a state dict")
        H.raises(function() o:load_state_dict({5}) end, "load_state_dict", "entry 1")
        H.raises(function() o:load_state_dict(optim.Adam({p}):state_dict()) end, "state of optim.Adam, not optim.SGD")
        local q = ordo.zeros({3}):requires_grad()
        H.raises(function() optim.SGD({q}):load_state_dict(o:state_dict()) end, "parameter 1 of shape 2", "is 3")
    end)

    it("opt:save / opt:load resume a run exactly (every optimiser), and refuse a mismatch changing nothing", function()
        local X, Y = ordo.randn({8, 3}, D), ordo.randn({8, 2}, D)
        local function model()
            ordo.manual_seed(5)
            return nn.Sequential(nn.Linear(3, 4, D), nn.Tanh(), nn.Linear(4, 2, D))
        end
        local function steps(m, opt, n)
            for _ = 1, n do
                opt:zero_grad()
                F.mse_loss(m(X), Y):backward()
                opt:step()
            end
        end
        local makers = {
            SGD = function(ps) return optim.SGD(ps, {lr = 0.05, momentum = 0.9, nesterov = true}) end,
            Adam = function(ps) return optim.Adam(ps, {lr = 0.01}) end,
            AdamW = function(ps) return optim.AdamW(ps, {lr = 0.01}) end,
            RMSprop = function(ps) return optim.RMSprop(ps, {lr = 0.01, momentum = 0.5, centered = true}) end,
            Adagrad = function(ps) return optim.Adagrad(ps, {lr = 0.05, lr_decay = 0.1}) end,
            Adamax = function(ps) return optim.Adamax(ps, {lr = 0.01, weight_decay = 0.1}) end,
            NAdam = function(ps) return optim.NAdam(ps, {lr = 0.01, weight_decay = 0.1}) end,
            RAdam = function(ps) return optim.RAdam(ps, {lr = 0.01, beta2 = 0.5}) end,
            Adadelta = function(ps) return optim.Adadelta(ps, {rho = 0.8}) end,
            Rprop = function(ps) return optim.Rprop(ps, {lr = 0.01}) end,
        }
        for name, make in pairs(makers) do
            local mpath, opath = os.tmpname(), os.tmpname()
            -- 3 steps, a checkpoint, 3 more: the reference
            local m = model()
            local opt = make(m:parameters())
            steps(m, opt, 3)
            opt.lr = opt.lr / 2 -- as a scheduler would
            m:save(mpath)
            opt:save(opath)
            steps(m, opt, 3)
            -- a fresh model and optimiser resumed from the checkpoint
            local m2 = model()
            local opt2 = make(m2:parameters())
            m2:load(mpath)
            opt2:load(opath)
            assert.equals(3, opt2.t, name)
            assert.equals(opt.lr, opt2.lr, name)
            steps(m2, opt2, 3)
            local a, b = m:parameters(), m2:parameters()
            for i = 1, #a do assert.same(a[i]:totable(), b[i]:totable(), name .. " parameter " .. i) end
            -- a mismatch raises and leaves the optimiser as it was
            local other = name == "SGD" and optim.Adam(m2:parameters()) or optim.SGD(m2:parameters(), {momentum = 0.9})
            H.raises(function() other:load(opath) end, "optimizer load", "holds the state of optim." .. name)
            local fewer = make({m2:parameters()[1]})
            H.raises(function() fewer:load(opath) end, "optimizer load", "is for 4 parameters", "has 1")
            local wider = nn.Sequential(nn.Linear(3, 5, D), nn.Tanh(), nn.Linear(5, 2, D))
            local wopt = make(wider:parameters())
            H.raises(function() wopt:load(opath) end, "optimizer load", "of shape", "this optimiser's is")
            assert.equals(0, wopt.t)
            assert.is_nil(next(wopt[wopt.state_field]))
            os.remove(mpath)
            os.remove(opath)
        end
        -- state this configuration has no place for
        local m = model()
        local opt = optim.RMSprop(m:parameters(), {centered = true})
        steps(m, opt, 1)
        local path = os.tmpname()
        opt:save(path)
        H.raises(function() optim.RMSprop(m:parameters()):load(path) end, "optimizer load", "state.1.mean",
                 "does not have")
        os.remove(path)
    end)

    it("opt:load of a file that is not a checkpoint, or a damaged one, says so and changes nothing", function()
        local m = nn.Linear(3, 2)
        local opt = optim.Adam(m:parameters(), {lr = 0.01})
        m:forward(ordo.randn(4, 3)):sum():backward()
        opt:step()
        local path = os.tmpname()
        m:save(path) -- was: "holds the state of ?, not optim.Adam"
        H.raises(function() opt:load(path) end, "optimizer load", "holds no optimiser state", "no 'kind'")
        ordo.save({kind = ordo.tensor({{65, 66}}, "uint8")}, path) -- was: a Lua error inside optim.lua
        H.raises(function() opt:load(path) end, "optimizer load", "damaged 'kind'", "uint8 of shape 1x2")
        os.remove(path)
        local function with(name, t)
            local sd = opt:state_dict()
            for _, e in ipairs(sd) do if e.name == name then e.tensor = t end end
            return sd
        end
        -- were accepted: opt.t = 2.5, opt.lr = nan
        H.raises(function() opt:load_state_dict(with("step", ordo.tensor(2.5, "float64"))) end, "load_state_dict",
                 "damaged step", "whole number")
        H.raises(function() opt:load_state_dict(with("lr", ordo.tensor(0 / 0, "float64"))) end, "load_state_dict",
                 "damaged lr", "finite")
        H.raises(function() opt:load_state_dict(with("step", ordo.tensor(-3, "int64"))) end, "load_state_dict",
                 "damaged step")
        assert.equals(1, opt.t)
        assert.equals(0.01, opt.lr)
        opt:load_state_dict(opt:state_dict())
        -- a scheduler's file with a 2-d kind or list: was a Lua error inside lr_scheduler.lua
        local sched = optim.lr_scheduler.MultiStepLR(opt, {milestones = {2, 4}})
        sched:save(path)
        local t = ordo.load(path)
        t["milestones.list"] = ordo.tensor({{2, 4}}, "float64")
        ordo.save(t, path)
        H.raises(function() sched:load(path) end, "scheduler load", "milestones.list of shape 1x2")
        t.kind = t.kind:view(1, -1)
        ordo.save(t, path)
        H.raises(function() sched:load(path) end, "scheduler load", "holds no scheduler state")
        os.remove(path)
    end)

    it("ReduceLROnPlateau cuts the lr when the metric stops improving (patience, cooldown, min_lr, mode)", function()
        local S = optim.lr_scheduler
        local function run(opts, metrics)
            local p = ordo.tensor({1}, D):requires_grad()
            local opt = optim.SGD({p}, {lr = 0.1})
            local s = S.ReduceLROnPlateau(opt, opts)
            local lrs = {}
            for i, m in ipairs(metrics) do
                lrs[i] = s:step(m)
                assert.equals(opt.lr, lrs[i])
            end
            return lrs
        end
        close(run({patience = 2, factor = 0.5, threshold = 0}, {5, 5, 5, 5, 4, 4.5, 4.5, 4.5}),
              {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.025}, 1e-15)
        -- cooldown 1: the epoch after a cut counts for nothing
        close(run({patience = 1, factor = 0.5, cooldown = 1, threshold = 0}, {5, 5, 5, 5, 5, 5}),
              {0.1, 0.1, 0.05, 0.05, 0.05, 0.025}, 1e-15)
        -- not below min_lr, and a change smaller than eps is no change
        close(run({patience = 0, min_lr = 0.02}, {1, 1, 1, 1}), {0.1, 0.02, 0.02, 0.02}, 1e-15)
        -- mode max with an absolute threshold, the metric as a tensor
        close(run({mode = "max", patience = 0, threshold = 0.5, threshold_mode = "abs"},
                  {ordo.tensor(1), ordo.tensor(1.4), ordo.tensor(2)}), {0.1, 0.01, 0.01}, 1e-15)
        -- rel: 1e-4 of the best is not an improvement
        close(run({patience = 0}, {1, 0.99995, 0.9}), {0.1, 0.01, 0.01}, 1e-15)
        local p = ordo.tensor({1}, D):requires_grad()
        local opt = optim.SGD({p}, {lr = 0.1})
        H.raises(function() S.ReduceLROnPlateau(opt, {mode = "up"}) end, "ReduceLROnPlateau", "mode")
        H.raises(function() S.ReduceLROnPlateau(opt, {factor = 1}) end, "ReduceLROnPlateau", "factor")
        H.raises(function() S.ReduceLROnPlateau(opt, {patience = 1.5}) end, "ReduceLROnPlateau", "patience")
        H.raises(function() S.ReduceLROnPlateau(opt):step() end, "ReduceLROnPlateau", "metric")
        H.raises(function() S.ReduceLROnPlateau(opt):step(ordo.ones({2})) end, "ReduceLROnPlateau",
                 "a one-element tensor, got a tensor of 2 elements")
        -- param groups: each group's lr is cut on its own, not below its min_lr (a number, or one per group);
        -- a group already below it stays (it was cut to 1e-5, under min_lr, following opt.lr)
        local a, b, c = ordo.tensor({1}, D):requires_grad(), ordo.tensor({1}, D):requires_grad(),
            ordo.tensor({1}, D):requires_grad()
        local g = optim.SGD({{params = {a}, lr = 1e-4}, {params = {b}}}, {lr = 1e-2})
        local pl = S.ReduceLROnPlateau(g, {patience = 0, min_lr = 1e-3})
        close(pl:step(1), {1e-4, 1e-2}, 1e-15)
        close(pl:step(1), {1e-4, 1e-3}, 1e-15)
        close(pl:get_last_lr(), {1e-4, 1e-3}, 1e-15)
        assert.equal(1e-2, g.lr)
        a.grad, b.grad = ordo.ones({1}, D), ordo.ones({1}, D)
        g:step()
        close({a:item(), b:item()}, {1 - 1e-4, 1 - 1e-3}, 1e-15)
        local g3 = optim.SGD({{params = {a}, lr = 0.1}, {params = {b}, lr = 0.2}, {params = {c}}}, {lr = 1})
        local pl3 = S.ReduceLROnPlateau(g3, {patience = 0, factor = 0.5, min_lr = {0.08, 0, 0.4}})
        pl3:step(1)
        for _ = 1, 3 do pl3:step(1) end
        close(pl3:get_last_lr(), {0.08, 0.025, 0.4}, 1e-15)
        -- the state holds the list; a list of the wrong length or a bad value raises
        local st = pl3:state_dict()
        close(st.min_lr, {0.08, 0, 0.4}, 0)
        H.raises(function() S.ReduceLROnPlateau(g3, {min_lr = {0.1}}) end, "ReduceLROnPlateau",
                 "expected 3 values for min_lr", "got 1")
        H.raises(function() S.ReduceLROnPlateau(g3, {min_lr = {0.1, -1, 0}}) end, "min_lr[2] must be a finite number >= 0")
        H.raises(function() S.ReduceLROnPlateau(g3, {min_lr = "x"}) end, "min_lr must be a number or a list")
        H.raises(function() S.ReduceLROnPlateau(g3, {patience = 0, factor = 0.5, min_lr = {0, 0, 0}}):load_state_dict(st) end,
                 "saved with min_lr = {0.08, 0, 0.4}")
        local path = tmpname()
        pl3:save(path)
        local g4 = optim.SGD({{params = {a}, lr = 0.1}, {params = {b}, lr = 0.2}, {params = {c}}}, {lr = 1})
        local pl4 = S.ReduceLROnPlateau(g4, {patience = 0, factor = 0.5, min_lr = {0.08, 0, 0.4}})
        pl4:load(path)
        assert.equal(pl3.num_bad, pl4.num_bad)
        os.remove(path)
        -- one group (a plain list): a list of one
        close(run({patience = 0, min_lr = {0.02}}, {1, 1, 1}), {0.1, 0.02, 0.02}, 1e-15)
        -- an lr set by hand to a string or NaN raises naming it, counting nothing (a Lua error in the cut)
        local o5 = optim.SGD({a}, {lr = 0.1})
        local pl5 = S.ReduceLROnPlateau(o5, {patience = 0})
        pl5:step(1)
        o5.lr = "x"
        H.raises(function() pl5:step(1) end, "ReduceLROnPlateau", "opt.lr must be a finite number >= 0, got string")
        o5.lr = 0 / 0
        H.raises(function() pl5:step(1) end, "opt.lr must be a finite number >= 0, got")
        assert.equal(1, pl5.epoch)
        assert.equal(0, pl5.num_bad)
        g3.param_groups[2].lr = "x"
        H.raises(function() pl3:step(1) end, "opt.param_groups[2].lr must be a finite number >= 0, got string")
        H.raises(function() pl3:get_last_lr() end, "opt.param_groups[2].lr")
    end)

    it("OneCycleLR and CyclicLR cycle the momentum (SGD, RMSprop) or beta1 (Adam) inversely to the lr, as Torch's",
       function()
        local S = optim.lr_scheduler
        local function c(from, to, pct) return to + (from - to) * (1 + math.cos(math.pi * pct)) / 2 end
        local p, q = ordo.tensor({1}, D):requires_grad(), ordo.tensor({1}, D):requires_grad()
        -- OneCycleLR (10 steps, peak at step 2): momentum 0.95 down to 0.85 at the peak, back up to 0.95
        local opt = optim.SGD({p}, {lr = 0.1})
        local s = S.OneCycleLR(opt, {max_lr = 1, total_steps = 10})
        local got, want = {}, {0.95, 0.9, 0.85}
        for e = 0, 9 do
            got[e + 1] = opt.momentum
            if e >= 3 then want[e + 1] = c(0.85, 0.95, (e - 2) / 7) end
            if e < 9 then s:step() end
        end
        close(got, want, 1e-12)
        -- the momentum is used by the step (a buffer started at step 1 goes on with 0.9)
        p.grad = ordo.ones({1}, D)
        opt:step()
        assert.is_not_nil(opt.buf[1])
        -- three phases: down, up, then staying at max_momentum; linear
        local o3 = optim.SGD({p}, {lr = 0.1})
        local s3 = S.OneCycleLR(o3, {max_lr = 1, total_steps = 10, three_phase = true, anneal_strategy = "linear",
                                     base_momentum = 0.5, max_momentum = 0.7})
        got = {}
        for e = 0, 9 do
            got[e + 1] = o3.momentum
            if e < 9 then s3:step() end
        end
        close(got, {0.7, 0.6, 0.5, 0.6, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7}, 1e-12)
        -- CyclicLR on Adam: beta1 0.9 at base_lr, 0.8 at max_lr (Torch's betas[0]); beta2 untouched
        local a = optim.Adam({p}, {lr = 0.1, beta2 = 0.99})
        local cy = S.CyclicLR(a, {base_lr = 0.1, max_lr = 1, step_size_up = 2})
        got = {}
        for e = 0, 4 do
            got[e + 1] = a.beta1
            cy:step()
        end
        close(got, {0.9, 0.85, 0.8, 0.85, 0.9}, 1e-12)
        assert.equal(0.99, a.beta2)
        -- RMSprop's momentum; triangular2 halves the swing of the momentum too
        local r = optim.RMSprop({p}, {lr = 0.1})
        local cr = S.CyclicLR(r, {base_lr = 0.1, max_lr = 1, step_size_up = 1, mode = "triangular2"})
        got = {}
        for e = 0, 4 do
            got[e + 1] = r.momentum
            cr:step()
        end
        close(got, {0.9, 0.8, 0.9, 0.85, 0.9}, 1e-12)
        -- cycle_momentum = false leaves it alone; an optimiser with neither momentum nor beta1 raises (Torch's rule)
        local o4 = optim.SGD({p}, {lr = 0.1, momentum = 0.5})
        S.OneCycleLR(o4, {max_lr = 1, total_steps = 10, cycle_momentum = false}):step()
        assert.equal(0.5, o4.momentum)
        H.raises(function() S.OneCycleLR(optim.Adagrad({p}), {max_lr = 1, total_steps = 10}) end, "OneCycleLR",
                 "neither momentum nor beta1", "cycle_momentum = false")
        H.raises(function() S.CyclicLR(optim.Adagrad({p}), {base_lr = 0.1, max_lr = 1}) end, "CyclicLR",
                 "neither momentum nor beta1")
        S.CyclicLR(optim.Adagrad({p}), {base_lr = 0.1, max_lr = 1, cycle_momentum = false}):step()
        H.raises(function() S.OneCycleLR(o4, {max_lr = 1, total_steps = 10, cycle_momentum = false, max_momentum = 0.9}) end,
                 "max_momentum is used only with cycle_momentum")
        H.raises(function() S.OneCycleLR(optim.Adam({p}), {max_lr = 1, total_steps = 10, max_momentum = 1}) end,
                 "max_momentum must be in [0, 1)", "beta1")
        H.raises(function() S.CyclicLR(o4, {base_lr = 0.1, max_lr = 1, base_momentum = -0.1}) end,
                 "base_momentum must be a finite number >= 0, got -0.1")
        H.raises(function() S.CyclicLR(o4, {base_lr = 0.1, max_lr = 1, base_momentum = "x"}) end,
                 "base_momentum must be a number or a list")
        -- a scale_fn taking Adam's beta1 to 1 or beyond raises at the step, changing nothing
        local a2 = optim.Adam({p}, {lr = 0.1})
        local wild = S.CyclicLR(a2, {base_lr = 0.1, max_lr = 1, step_size_up = 1, scale_fn = function() return 20 end})
        H.raises(function() wild:step() end, "CyclicLR", "beta1 of param group 1 at epoch 1")
        assert.equal(0.9, a2.beta1)
        assert.equal(0.1, a2.lr)
        assert.equal(0, wild.epoch)
        -- per-group lists, one per param group (a wrong length raises); each group's momentum cycles
        local g = optim.SGD({{params = {p}}, {params = {q}, lr = 0.5}}, {lr = 0.1, momentum = 0.9})
        H.raises(function() S.OneCycleLR(g, {max_lr = 1, total_steps = 10, base_momentum = {0.8}}) end,
                 "expected 2 values for base_momentum", "got 1")
        local sg = S.OneCycleLR(g, {max_lr = 1, total_steps = 10, base_momentum = {0.8, 0.5}, max_momentum = {0.9, 0.6}})
        close({g.param_groups[1].momentum, g.param_groups[2].momentum}, {0.9, 0.6}, 1e-12)
        sg:step()
        sg:step()
        close({g.param_groups[1].momentum, g.param_groups[2].momentum}, {0.8, 0.5}, 1e-12)
        -- the state holds the momentum options; loading sets the momentum of the restored epoch
        sg:step()
        local st = sg:state_dict()
        local g2 = optim.SGD({{params = {p}}, {params = {q}, lr = 0.5}}, {lr = 0.1, momentum = 0.9})
        local sg2 = S.OneCycleLR(g2, {max_lr = 1, total_steps = 10, base_momentum = {0.8, 0.5},
                                      max_momentum = {0.9, 0.6}})
        sg2:load_state_dict(st)
        close({g2.param_groups[1].momentum, g2.param_groups[2].momentum},
              {g.param_groups[1].momentum, g.param_groups[2].momentum}, 1e-15)
        assert.equal(sg:step(), sg2:step())
        assert.equal(g.param_groups[2].momentum, g2.param_groups[2].momentum)
        local path = tmpname()
        sg:save(path)
        local g3 = optim.SGD({{params = {p}}, {params = {q}, lr = 0.5}}, {lr = 0.1, momentum = 0.9})
        local sg3 = S.OneCycleLR(g3, {max_lr = 1, total_steps = 10, base_momentum = {0.8, 0.5},
                                      max_momentum = {0.9, 0.6}})
        sg3:load(path)
        assert.equal(g.param_groups[2].momentum, g3.param_groups[2].momentum)
        local g4 = optim.SGD({{params = {p}}, {params = {q}, lr = 0.5}}, {lr = 0.1, momentum = 0.9})
        H.raises(function() S.OneCycleLR(g4, {max_lr = 1, total_steps = 10}):load(path) end,
                 "saved with base_momentum = {0.8, 0.5}", "{0.85, 0.85}")
        os.remove(path)
        -- a state saved before cycle_momentum existed left the momentum alone: it loads into one made so
        local old = S.CyclicLR(optim.SGD({p}, {lr = 0.1}), {base_lr = 0.1, max_lr = 1}):state_dict()
        old.cycle_momentum, old.base_momentum, old.max_momentum = nil, nil, nil
        H.raises(function() S.CyclicLR(optim.SGD({p}, {lr = 0.1}), {base_lr = 0.1, max_lr = 1}):load_state_dict(old) end,
                 "cycle_momentum")
        S.CyclicLR(optim.SGD({p}, {lr = 0.1}), {base_lr = 0.1, max_lr = 1, cycle_momentum = false}):load_state_dict(old)
        -- in a SequentialLR, a OneCycleLR in charge cycles the momentum
        local o5 = optim.SGD({p}, {lr = 0.1, momentum = 0.3})
        local warm = S.ConstantLR(o5, {factor = 0.5, total_iters = 2})
        local one = S.OneCycleLR(o5, {max_lr = 1, total_steps = 10})
        o5.momentum = 0.3
        local seq = S.SequentialLR(o5, {schedulers = {warm, one}, milestones = {2}})
        assert.equal(0.3, o5.momentum)
        seq:step()
        seq:step()
        close(o5.momentum, 0.95, 1e-12)
        seq:step()
        close(o5.momentum, 0.9, 1e-12)
    end)

    it("OneCycleLR's max_lr and CyclicLR's base_lr and max_lr may be lists, one per param group (Torch's)", function()
        local S = optim.lr_scheduler
        local p, q = ordo.tensor({0}, D):requires_grad(), ordo.tensor({0}, D):requires_grad()
        local function groups() return optim.SGD({{params = {p}}, {params = {q}, lr = 0.5}}, {lr = 0.1}) end
        -- Torch's closed forms, for one group
        local function cos_anneal(from, to, pct) return to + (from - to) / 2 * (math.cos(math.pi * pct) + 1) end
        local function torch_one(max_lr, total, e)
            local init = max_lr / 25
            local low, peak = init / 1e4, 0.3 * total - 1
            if e <= peak then return cos_anneal(init, max_lr, e / peak) end
            return cos_anneal(max_lr, low, (e - peak) / (total - 1 - peak))
        end
        local function torch_cyc(base, max_lr, up, down, e)
            local total = up + down
            local cycle = math.floor(1 + e / total)
            local x = 1 + e / total - cycle
            local ratio = up / total
            local sf = x <= ratio and x / ratio or (x - 1) / (ratio - 1)
            return base + (max_lr - base) * sf
        end
        -- each group climbs to its own max_lr and falls, step by step; the update uses it
        local opt = groups()
        local s = S.OneCycleLR(opt, {max_lr = {0.1, 0.01}, total_steps = 10, cycle_momentum = false})
        close(s:get_last_lr(), {0.004, 0.0004}, 1e-15)
        for e = 1, 9 do
            local lrs = s:step()
            local want = {torch_one(0.1, 10, e), torch_one(0.01, 10, e)}
            close(lrs, want, 1e-12)
            close(s:get_last_lr(), want, 1e-12)
            close({opt.param_groups[1].lr, opt.param_groups[2].lr}, want, 1e-12)
            local p0, q0 = p:item(), q:item()
            p.grad, q.grad = ordo.ones({1}, D), ordo.ones({1}, D)
            opt:step()
            close({p0 - p:item(), q0 - q:item()}, want, 1e-12)
        end
        -- get_last_lr is a copy
        s:get_last_lr()[1] = 7
        close(s:get_last_lr()[1], torch_one(0.1, 10, 9), 1e-12)
        -- an optimiser made with a plain list: a list of one
        local single = optim.SGD({p}, {lr = 0.1})
        local s1 = S.OneCycleLR(single, {max_lr = {0.2}, total_steps = 10, cycle_momentum = false})
        s1:step()
        close(single.lr, torch_one(0.2, 10, 1), 1e-12)
        close(s1:get_last_lr(), {torch_one(0.2, 10, 1)}, 1e-12)
        -- CyclicLR: a list for either or both (a number stands for each group's)
        local opt2 = groups()
        local c = S.CyclicLR(opt2, {base_lr = {0.01, 0.001}, max_lr = {0.1, 0.02}, step_size_up = 2,
                                    step_size_down = 3, cycle_momentum = false})
        for e = 1, 11 do
            local want = {torch_cyc(0.01, 0.1, 2, 3, e), torch_cyc(0.001, 0.02, 2, 3, e)}
            close(c:step(), want, 1e-12)
            close({opt2.param_groups[1].lr, opt2.param_groups[2].lr}, want, 1e-12)
        end
        local c2 = S.CyclicLR(groups(), {base_lr = 0.01, max_lr = {0.1, 0.02}, step_size_up = 2})
        c2:step()
        close(c2:get_last_lr(), {torch_cyc(0.01, 0.1, 2, 2, 1), torch_cyc(0.01, 0.02, 2, 2, 1)}, 1e-12)
        -- a wrong length or a bad value raises, naming it
        H.raises(function() S.OneCycleLR(groups(), {max_lr = {0.1}, total_steps = 10}) end, "OneCycleLR",
                 "expected 2 values for max_lr (one per param group), got 1")
        H.raises(function() S.OneCycleLR(groups(), {max_lr = {0.1, 0.2, 0.3}, total_steps = 10}) end,
                 "expected 2 values for max_lr", "got 3")
        H.raises(function() S.OneCycleLR(groups(), {max_lr = {0.1, 0}, total_steps = 10}) end,
                 "max_lr[2] must be a finite number > 0, got 0")
        H.raises(function() S.OneCycleLR(groups(), {max_lr = {0.1, math.huge}, total_steps = 10}) end,
                 "max_lr[2] must be a finite number > 0, got inf")
        H.raises(function() S.OneCycleLR(groups(), {max_lr = {0.1, "x"}, total_steps = 10}) end,
                 "max_lr[2]", "got string")
        H.raises(function() S.CyclicLR(groups(), {base_lr = {0.1, 0.2, 0.3}, max_lr = 1}) end, "CyclicLR",
                 "expected 2 values for base_lr (one per param group), got 3")
        H.raises(function() S.CyclicLR(groups(), {base_lr = 0.1, max_lr = {1}}) end, "expected 2 values for max_lr")
        H.raises(function() S.CyclicLR(groups(), {base_lr = {0.1, -1}, max_lr = 1}) end,
                 "base_lr[2] must be a finite number >= 0, got -1")
        H.raises(function() S.CyclicLR(groups(), {base_lr = -1, max_lr = {1, 1}}) end, "base_lr must be >= 0")
        -- a group added after the scheduler was made: its step raises, changing nothing
        local r = ordo.tensor({0}, D):requires_grad()
        local o3 = groups()
        local s3 = S.OneCycleLR(o3, {max_lr = {0.1, 0.01}, total_steps = 10, cycle_momentum = false})
        o3:add_param_group({params = {r}})
        H.raises(function() s3:step() end, "the optimiser has 3 param groups, this scheduler was made for 2")
        assert.equal(0, s3.epoch)
        -- a group's lr changed by hand (or opt.lr) is caught at the next step
        local o4 = groups()
        local s4 = S.OneCycleLR(o4, {max_lr = {0.1, 0.01}, total_steps = 10, cycle_momentum = false})
        s4:step()
        o4.param_groups[2].lr = 1
        H.raises(function() s4:step() end, "OneCycleLR", "param group 2's lr is 1")
        o4.param_groups[2].lr = s4:get_last_lr()[2]
        o4.lr = 1
        H.raises(function() s4:step() end, "param group 1's lr")
    end)

    it("OneCycleLR and CyclicLR with per-group lists: save and load, and inside a SequentialLR", function()
        local S = optim.lr_scheduler
        local p, q = ordo.tensor({0}, D):requires_grad(), ordo.tensor({0}, D):requires_grad()
        local function groups() return optim.SGD({{params = {p}}, {params = {q}, lr = 0.5}}, {lr = 0.1, momentum = 0.9}) end
        local function lrs(o) return {o.param_groups[1].lr * o.lr / 0.1, o.param_groups[2].lr * o.lr / 0.1} end
        for _, make in ipairs({
            function(o) return S.OneCycleLR(o, {max_lr = {0.1, 0.01}, total_steps = 10, base_momentum = {0.8, 0.7}}) end,
            function(o) return S.CyclicLR(o, {base_lr = {0.01, 0.001}, max_lr = {0.1, 0.01}, step_size_up = 2}) end,
        }) do
            local o = groups()
            local s = make(o)
            for _ = 1, 3 do s:step() end
            local st, path = s:state_dict(), tmpname()
            s:save(path)
            local o2 = groups()
            local s2 = make(o2)
            s2:load_state_dict(st)
            assert.equal(3, s2.epoch)
            close(lrs(o2), lrs(o), 0)
            close({o2.param_groups[1].momentum, o2.param_groups[2].momentum},
                  {o.param_groups[1].momentum, o.param_groups[2].momentum}, 0)
            local o3 = groups()
            local s3 = make(o3)
            s3:load(path)
            os.remove(path)
            close(lrs(o3), lrs(o), 0)
            close(s:step(), s3:step(), 0)
            close(lrs(o3), lrs(o), 0)
            -- made with other values, or with numbers: the load raises, naming max_lr
            local kind = s.__name:gsub("^lr_scheduler%.", "")
            local other = kind == "OneCycleLR" and S.OneCycleLR(groups(), {max_lr = 0.1, total_steps = 10})
                or S.CyclicLR(groups(), {base_lr = {0.01, 0.001}, max_lr = {0.1, 0.02}, step_size_up = 2})
            H.raises(function() other:load_state_dict(st) end, "saved with max_lr = {0.1, 0.01}")
        end
        -- SequentialLR: a LinearLR of opt.lr (the groups follow in proportion), then a OneCycleLR of lists
        local o = groups()
        local warm = S.LinearLR(o, {start_factor = 0.5, total_iters = 2})
        local one = S.OneCycleLR(o, {max_lr = {0.2, 0.02}, total_steps = 5, cycle_momentum = false})
        local seq = S.SequentialLR(o, {schedulers = {warm, one}, milestones = {2}})
        close(lrs(o), {0.05, 0.25}, 1e-15)
        seq:step()
        close(lrs(o), {0.075, 0.375}, 1e-15)
        close(seq:step(), {0.008, 0.0008}, 1e-15)
        close(lrs(o), {0.008, 0.0008}, 1e-15)
        -- and the other way: a OneCycleLR of lists, then a StepLR of opt.lr from the groups' own lrs again
        local o5 = groups()
        local one5 = S.OneCycleLR(o5, {max_lr = {0.2, 0.02}, total_steps = 3, cycle_momentum = false})
        local step5 = S.StepLR(o5, {step_size = 1, gamma = 0.5})
        local seq5 = S.SequentialLR(o5, {schedulers = {one5, step5}, milestones = {3}})
        assert.equal("table", type(seq5:get_last_lr()))
        seq5:step()
        seq5:step()
        close(seq5:step(), 0.1, 1e-15)
        close(lrs(o5), {0.1, 0.5}, 1e-15)
        assert.is_nil(rawget(o5.param_groups[1], "lr"))
        seq5:step()
        close(lrs(o5), {0.05, 0.25}, 1e-15)
        -- its state loads back either side of the milestone
        local st = seq5:state_dict()
        local o6 = groups()
        local seq6 = S.SequentialLR(o6, {schedulers = {S.OneCycleLR(o6, {max_lr = {0.2, 0.02}, total_steps = 3,
                                                                         cycle_momentum = false}),
                                                      S.StepLR(o6, {step_size = 1, gamma = 0.5})}, milestones = {3}})
        st.epoch = 1
        seq6:load_state_dict(st)
        close(lrs(o6), seq6:get_last_lr(), 1e-15)
        st.epoch = 4
        seq6:load_state_dict(st)
        close(lrs(o6), {0.05, 0.25}, 1e-15)
        -- a LambdaLR of lists after a OneCycleLR of lists: its bases are the groups' lrs before either set them
        -- (Torch's initial_lr), also when resumed with the schedulers made after opt:load
        local fns = {function(e) return 0.5 ^ e end, function(e) return e + 1 end}
        local function build(o7)
            local w = S.LinearLR(o7, {start_factor = 0.5, total_iters = 2})
            local oc = S.OneCycleLR(o7, {max_lr = {0.2, 0.02}, total_steps = 3, cycle_momentum = false})
            return S.SequentialLR(o7, {schedulers = {w, oc, S.LambdaLR(o7, {lr_lambda = fns})}, milestones = {2, 5}})
        end
        local o7 = groups()
        local seq7 = build(o7)
        for _ = 1, 3 do seq7:step() end
        local op, sp = tmpname(), tmpname()
        o7:save(op)
        seq7:save(sp)
        local o8 = groups()
        o8:load(op)
        local seq8 = build(o8)
        seq8:load(sp)
        os.remove(op)
        os.remove(sp)
        close(lrs(o8), lrs(o7), 0)
        seq7:step()
        seq8:step()
        close(seq7:step(), {0.1, 0.5}, 1e-15)
        close(seq8:step(), {0.1, 0.5}, 1e-15)
        close(seq8:step(), {0.05, 1}, 1e-15)
        close(lrs(o8), {0.05, 1}, 1e-15)
    end)

    it("LambdaLR and MultiplicativeLR take a list of functions, one per param group (Torch's)", function()
        local S = optim.lr_scheduler
        local p, q = ordo.tensor({0}, D):requires_grad(), ordo.tensor({0}, D):requires_grad()
        local function groups() return optim.SGD({{params = {p}}, {params = {q}, lr = 0.001}}, {lr = 0.01}) end
        local fns = {function(e) return 0.5 ^ e end, function(e) return e + 1 end}
        local opt = groups()
        local s = S.LambdaLR(opt, {lr_lambda = fns})
        close(s:get_last_lr(), {0.01, 0.001}, 1e-15)
        for e = 1, 3 do
            local want = {0.01 * 0.5 ^ e, 0.001 * (e + 1)}
            close(s:step(), want, 1e-15)
            local p0, q0 = p:item(), q:item()
            p.grad, q.grad = ordo.ones({1}, D), ordo.ones({1}, D)
            opt:step()
            close({p0 - p:item(), q0 - q:item()}, want, 1e-12)
        end
        -- a wrong length, a non-function, a bad factor raise naming it
        H.raises(function() S.LambdaLR(groups(), {lr_lambda = {fns[1]}}) end, "LambdaLR",
                 "expected 2 functions for lr_lambda (one per param group), got 1")
        H.raises(function() S.LambdaLR(groups(), {lr_lambda = {fns[1], 3}}) end, "lr_lambda[2] must be a function")
        H.raises(function() S.LambdaLR(groups(), {lr_lambda = 3}) end, "lr_lambda must be a function or a list")
        H.raises(function() S.LambdaLR(groups(), {lr_lambda = {fns[1], function() return -1 end}}) end,
                 "lr_lambda[2](0) returned -1")
        -- save and load: the groups' bases travel with the state (a scheduler made after opt:load resumes)
        local op, sp = tmpname(), tmpname()
        opt:save(op)
        s:save(sp)
        local o2 = groups()
        o2:load(op)
        local s2 = S.LambdaLR(o2, {lr_lambda = fns})
        s2:load(sp)
        os.remove(op)
        os.remove(sp)
        close(s2:get_last_lr(), s:get_last_lr(), 0)
        close(s2:step(), s:step(), 0)
        H.raises(function() S.LambdaLR(groups(), {lr_lambda = fns[1]}):load_state_dict(s:state_dict()) end,
                 "saved by a LambdaLR of a rate per param group (group_own)")
        -- in a SequentialLR after a warm-up of opt.lr, the bases are the groups' lrs before the warm-up
        local o4 = groups()
        local warm = S.LinearLR(o4, {start_factor = 0.5, total_iters = 2})
        local lam = S.LambdaLR(o4, {lr_lambda = fns})
        local seq = S.SequentialLR(o4, {schedulers = {warm, lam}, milestones = {2}})
        close(seq:get_last_lr(), 0.005, 1e-15)
        seq:step()
        close(seq:step(), {0.01, 0.001}, 1e-15)
        close(seq:step(), {0.005, 0.002}, 1e-15)
        -- after a OneCycleLR of lists, lrs set by hand are the new bases (to go on from them)
        local o9 = groups()
        local one9 = S.OneCycleLR(o9, {max_lr = {0.1, 0.01}, total_steps = 3, cycle_momentum = false})
        one9:step()
        o9.param_groups[1].lr, o9.param_groups[2].lr = 0.02, 0.002
        close(S.LambdaLR(o9, {lr_lambda = fns}):step(), {0.01, 0.004}, 1e-15)
        -- MultiplicativeLR too: each group's lr times its own function's factors
        local o5 = groups()
        local mul = S.MultiplicativeLR(o5, {lr_lambda = {function() return 0.5 end, function(e) return e end}})
        close(mul:get_last_lr(), {0.01, 0.001}, 1e-15)
        close(mul:step(), {0.005, 0.001}, 1e-15)
        close(mul:step(), {0.0025, 0.002}, 1e-15)
        close(mul:step(), {0.00125, 0.006}, 1e-15)
        close({o5.param_groups[1].lr * o5.lr / 0.01, o5.param_groups[2].lr * o5.lr / 0.01}, {0.00125, 0.006}, 1e-15)
        local mul2 = S.MultiplicativeLR(groups(), {lr_lambda = {function() return 0.5 end, function(e) return e end}})
        mul2:load_state_dict(mul:state_dict())
        close(mul2:get_last_lr(), {0.00125, 0.006}, 1e-15)
        H.raises(function() S.MultiplicativeLR(groups(), {lr_lambda = {fns[1]}}) end, "MultiplicativeLR",
                 "expected 2 functions for lr_lambda")
        H.raises(function() S.MultiplicativeLR(groups(), {lr_lambda = {fns[1], function() return 0 / 0 end}}):step() end,
                 "MultiplicativeLR", "lr_lambda[2](1) returned nan")
    end)

    it("CosineAnnealingLR and CosineAnnealingWarmRestarts anneal each param group from its own lr to eta_min (Torch's)",
       function()
        local S = optim.lr_scheduler
        local p, q = ordo.tensor({0}, D):requires_grad(), ordo.tensor({0}, D):requires_grad()
        local function groups() return optim.SGD({{params = {p}}, {params = {q}, lr = 0.001}}, {lr = 0.01}) end
        local function torch_cos(base, eta, t, len) return eta + (base - eta) * (1 + math.cos(math.pi * t / len)) / 2 end
        local opt = groups()
        local s = S.CosineAnnealingLR(opt, {T_max = 4, eta_min = 0.002})
        close(s:get_last_lr(), {0.01, 0.001}, 1e-15)
        for e = 1, 6 do
            local want = {torch_cos(0.01, 0.002, e, 4), torch_cos(0.001, 0.002, e, 4)}
            close(s:step(), want, 1e-15)
            local p0, q0 = p:item(), q:item()
            p.grad, q.grad = ordo.ones({1}, D), ordo.ones({1}, D)
            opt:step()
            close({p0 - p:item(), q0 - q:item()}, want, 1e-12)
        end
        -- (at T_max both groups are at eta_min: in proportion to opt.lr the second was at 0.0002)
        local w = S.CosineAnnealingWarmRestarts(groups(), {T_0 = 2, eta_min = 0.002})
        close(w:step(), {torch_cos(0.01, 0.002, 1, 2), torch_cos(0.001, 0.002, 1, 2)}, 1e-15)
        close(w:step(), {0.01, 0.001}, 1e-15)
        close(w:step(0.5), {torch_cos(0.01, 0.002, 0.5, 2), torch_cos(0.001, 0.002, 0.5, 2)}, 1e-15)
        -- without eta_min, or without groups of their own lrs, opt.lr's rate as before
        assert.equal("number", type(S.CosineAnnealingLR(groups(), {T_max = 4}):get_last_lr()))
        assert.equal("number", type(S.CosineAnnealingLR(optim.SGD({{params = {p}}, {params = {q}}}, {lr = 0.01}),
                                                        {T_max = 4, eta_min = 0.002}):get_last_lr()))
        -- resumed with the scheduler made after opt:load: the groups' lrs come from the state
        local op, sp = tmpname(), tmpname()
        opt:save(op)
        s:save(sp)
        local o2 = groups()
        o2:load(op)
        local s2 = S.CosineAnnealingLR(o2, {T_max = 4, eta_min = 0.002})
        s2:load(sp)
        os.remove(op)
        os.remove(sp)
        close(s2:step(), s:step(), 0)
        H.raises(function() S.CosineAnnealingLR(groups(), {T_max = 4}):load_state_dict(s:state_dict()) end,
                 "saved with eta_min = 0.002")
    end)

    it("clip_grad_norm_ scales all gradients to the norm, on the device, without a wait; clip_grad_value_ clamps", function()
        local a = ordo.tensor({3, 0}, D):requires_grad()
        local b = ordo.tensor({{0, 4}}, D):requires_grad()
        local c = ordo.tensor({1}, D):requires_grad() -- no gradient: left out
        ;((a * a):sum() / 2 + (b * b):sum() / 2):backward() -- g = p: the norm is 5
        local n = nn.utils.clip_grad_norm_({a, b, c}, 1)
        assert.equals(0, n:dim())
        close(5, n:item(), 1e-12)
        close({0.6, 0}, a.grad:totable(), 1e-6)
        close({0, 0.8}, b.grad:totable()[1], 1e-6)
        assert.is_nil(c.grad)
        -- already under the limit: unchanged
        close(1, nn.utils.clip_grad_norm_({a, b}, 10):item(), 1e-5)
        close({0.6, 0}, a.grad:totable(), 1e-6)
        -- the largest magnitude, and another p
        close(0.8, nn.utils.clip_grad_norm_({a, b}, 0.4, "inf"):item(), 1e-6)
        close({0.3, 0}, a.grad:totable(), 1e-6)
        close({0, 0.4}, b.grad:totable()[1], 1e-6)
        close((0.3 + 0.4), nn.utils.clip_grad_norm_({a, b}, 100, 1):item(), 1e-6)
        assert.equals(0, nn.utils.clip_grad_norm_({c}, 1):item())
        nn.utils.clip_grad_value_({a, b}, 0.35)
        close({0.3, 0}, a.grad:totable(), 1e-6)
        close({0, 0.35}, b.grad:totable()[1], 1e-6)
        H.raises(function() nn.utils.clip_grad_norm_({a}, -1) end, "clip_grad_norm_", "max_norm")
        H.raises(function() nn.utils.clip_grad_norm_({a}, 1, 0) end, "clip_grad_norm_", "norm_type")
        H.raises(function() nn.utils.clip_grad_norm_("x", 1) end, "clip_grad_norm_", "list", "string")
        H.raises(function() nn.utils.clip_grad_value_({a, 3}, 1) end, "clip_grad_value_", "parameter 2", "number")
        -- a parameter listed twice (two modules' lists joined, sharing it) counts once and is scaled once
        local w = ordo.tensor({3, 4}, D):requires_grad()
        ;((w * w):sum() / 2):backward()
        close(5, nn.utils.clip_grad_norm_({w, w}, 1):item(), 1e-12)
        close({0.6, 0.8}, w.grad:totable(), 1e-6)
        -- float32 gradients of an exploding model: their squares overflowed float32, the norm was inf and every
        -- gradient was scaled to 0 (Torch's norm is 5e19 and clips them to 0.6, 0.8); tiny ones squared to 0
        local f = ordo.zeros({3}, {requires_grad = true})
        f.grad = ordo.tensor({3e19, 4e19, 0}, {dtype = "float32"})
        close(1, nn.utils.clip_grad_norm_({f}, 1):item() / 5e19, 1e-6)
        close({0.6, 0.8, 0}, f.grad:totable(), 1e-6)
        f.grad = ordo.tensor({3e-25, 4e-25, 0}, {dtype = "float32"})
        close(1, nn.utils.clip_grad_norm_({f}, 1):item() / 5e-25, 1e-6)
        f.grad = ordo.tensor({3e19, -4e19, 0}, {dtype = "float32"})
        close(4e19, nn.utils.clip_grad_norm_({f}, 2, "inf"):item(), 1e13)
        close({1.5, -2, 0}, f.grad:totable(), 1e-6)
    end)

    it("clip_grad_norm_ takes Torch's error_if_nonfinite and foreach, and refuses other trailing arguments", function()
        local a = ordo.tensor({3, 0}, D):requires_grad()
        ;((a * a):sum() / 2):backward()
        -- finite: clipped as without the check, positional or as options
        close(3, nn.utils.clip_grad_norm_({a}, 1.5, 2, true):item(), 1e-12)
        close({1.5, 0}, a.grad:totable(), 1e-6)
        close(1.5, nn.utils.clip_grad_norm_({a}, 1, 2, {error_if_nonfinite = true, foreach = true}):item(), 1e-6)
        close({1, 0}, a.grad:totable(), 1e-6)
        -- a NaN or inf norm raises, the gradients left as they were (the default scales them by it, as Torch)
        a.grad = ordo.tensor({0 / 0, 1}, D)
        H.raises(function() nn.utils.clip_grad_norm_({a}, 1, 2, true) end, "clip_grad_norm_", "non-finite", "nan")
        assert.equals(1, a.grad:totable()[2])
        a.grad = ordo.tensor({math.huge, 1}, D)
        H.raises(function() nn.utils.clip_grad_norm_({a}, 1, "inf", {error_if_nonfinite = true}) end,
                 "clip_grad_norm_", "order inf", "inf")
        assert.equals(1, a.grad:totable()[2])
        a.grad = ordo.tensor({2, 0}, D)
        -- not dropped unseen: a misspelt option, a non-boolean, one argument too many
        H.raises(function() nn.utils.clip_grad_norm_({a}, 1, 2, {error_if_non_finite = true}) end,
                 "clip_grad_norm_", "unknown option 'error_if_non_finite'")
        H.raises(function() nn.utils.clip_grad_norm_({a}, 1, 2, 1) end, "clip_grad_norm_", "error_if_nonfinite", "1")
        H.raises(function() nn.utils.clip_grad_norm_({a}, 1, 2, false, nil, 3) end, "clip_grad_norm_",
                 "too many arguments")
        H.raises(function() nn.utils.clip_grad_value_({a}, 1, {error_if_nonfinite = true}) end, "clip_grad_value_",
                 "unknown option")
        H.raises(function() nn.utils.clip_grad_value_({a}, 1, true, 2) end, "clip_grad_value_", "too many")
        assert.same({2, 0}, a.grad:totable())
        nn.utils.clip_grad_value_({a}, 1, false)
        assert.same({1, 0}, a.grad:totable())
    end)

    it("updates parameters that live on an engine of their own", function()
        local e = ordo.engine.new({kind = "pooled", cpu_workers = 1})
        for _, make in ipairs({
            function(ps) return optim.Adam(ps, {lr = 0.1}) end,
            function(ps) return optim.SGD(ps, {lr = 0.1, momentum = 0.5}) end,
        }) do
            local p = ordo.tensor({1, -2}, {dtype = "float64", engine = e}):requires_grad()
            local opt = make({p})
            ;(p * p):sum():backward()
            opt:step()
            local v = p:totable()
            assert.is_true(math.abs(v[1]) < 1 and math.abs(v[2]) < 2)
        end
        e:close()
    end)

    it("the fused update kernels and the elementwise fallback (non-contiguous parameters) agree", function()
        for _, make in ipairs({
            function(ps) return optim.Adam(ps, {lr = 0.01, weight_decay = 0.1}) end,
            function(ps) return optim.SGD(ps, {lr = 0.05, momentum = 0.9, nesterov = true, weight_decay = 0.1}) end,
            function(ps) return optim.SGD(ps, {lr = 0.05}) end,
        }) do
            ordo.manual_seed(9)
            local base = ordo.randn({3, 2}, D)
            local fused = base:clone():requires_grad()                     -- contiguous: one kernel
            local plain = base:t():contiguous():t():requires_grad()         -- transposed view: elementwise ops
            assert.is_false(plain:is_contiguous())
            local x = ordo.randn({4, 3}, D)
            local of, op = make({fused}), make({plain})
            for _ = 1, 4 do
                for _, pair in ipairs({{of, fused}, {op, plain}}) do
                    pair[1]:zero_grad()
                    x:matmul(pair[2]):tanh():sum():backward()
                    pair[1]:step()
                end
            end
            close(plain:reshape(-1):totable(), fused:reshape(-1):totable(), 1e-12)
        end
    end)

    it("parameters without a gradient are skipped; bad options raise", function()
        local p, q = ordo.tensor({1}, D):requires_grad(), ordo.tensor({1}, D):requires_grad()
        local opt = optim.SGD({p, q}, {lr = 1})
        ;(p * 2):sum():backward()
        opt:step()
        assert.same({-1}, p:totable())
        assert.same({1}, q:totable())
        local ok, err = pcall(optim.SGD, {p}, {lr = 0.1, momentom = 0.9})
        assert.is_false(ok)
        assert.matches("unknown option 'momentom'", err)
        ok, err = pcall(optim.SGD, {ordo.ones({1}, {dtype = "int32"})})
        assert.is_false(ok)
        assert.matches("parameter 1 is int32, expected a float32 or float64 tensor", err)
        ok, err = pcall(optim.Adam, {})
        assert.is_false(ok)
        assert.matches("non%-empty list of parameters", err)
        -- a hole in a list ({w, lin.bias, w2} with bias = false) left the entries after it out: they never trained
        H.raises(function() optim.SGD({p, nil, q}, {lr = 1}) end, "SGD: entry 2 is nil", "hole")
        H.raises(function() optim.Adam({nil, p}) end, "Adam: entry 1 is nil")
        H.raises(function() optim.SGD({{params = {p, nil, q}}}, {lr = 1}) end, "SGD: group 1: parameter 2 is nil")
        H.raises(function() optim.SGD({{params = {p}}, nil, {params = {q}}}, {lr = 1}) end, "SGD: entry 2 is nil")
        -- and clip_grad_norm_ / clip_grad_value_ left them unclipped
        p.grad, q.grad = ordo.tensor({3}, D), ordo.tensor({4}, D)
        H.raises(function() nn.utils.clip_grad_norm_({p, nil, q}, 1) end, "clip_grad_norm_", "parameter 2 is nil")
        H.raises(function() nn.utils.clip_grad_value_({p, nil, q}, 1) end, "clip_grad_value_", "parameter 2 is nil")
        assert.same({4}, q.grad:totable())
    end)

    it("a checkpoint keeps each group's own lr (changed by hand between steps) and checks the groups", function()
        local function params()
            return ordo.tensor({1, 2}, D):requires_grad(), ordo.tensor({3, -1}, D):requires_grad(),
                ordo.tensor({0.5, 2}, D):requires_grad()
        end
        local function make(a, b, c) return optim.SGD({{params = {a}}, {params = {b, c}, lr = 0.05}}, {lr = 0.1}) end
        local function step(opt, a, b, c)
            opt:zero_grad()
            ;((a * a):sum() + (b * b * b):sum() + (c * c):sum()):backward()
            opt:step()
        end
        local a, b, c = params()
        local opt = make(a, b, c)
        step(opt, a, b, c)
        opt.param_groups[2].lr = opt.param_groups[2].lr * 0.1 -- a decay by hand
        step(opt, a, b, c)
        local sd = opt:state_dict()
        local path = os.tmpname()
        opt:save(path)
        -- resumed: made as before, then loaded (the lr of group 2 was the one it was made with)
        for _, load in ipairs({function(o) o:load_state_dict(sd) end, function(o) o:load(path) end}) do
            local a2, b2, c2 = params()
            ordo.no_grad(function() a2:copy_(a); b2:copy_(b); c2:copy_(c) end)
            local opt2 = make(a2, b2, c2)
            load(opt2)
            close(0.005, opt2.param_groups[2].lr, 1e-15)
            assert.is_nil(rawget(opt2.param_groups[1], "lr")) -- (it reads through to the optimiser's)
            local a3, b3, c3 = params()
            ordo.no_grad(function() a3:copy_(a); b3:copy_(b); c3:copy_(c) end)
            local opt3 = make(a3, b3, c3) -- (the same, then compared with the original going on)
            opt3:load_state_dict(sd)
            step(opt2, a2, b2, c2)
            step(opt3, a3, b3, c3)
            assert.same(b3:totable(), b2:totable())
        end
        os.remove(path)
        step(opt, a, b, c)
        -- other groups of the same shapes, or a plain list, raise naming them and change nothing
        local x, y, z = params()
        local y2 = ordo.tensor({1, 1}, D):requires_grad()
        local same_shapes = optim.SGD({{params = {x}}, {params = {y2, z}, lr = 0.05}}, {lr = 0.1})
        same_shapes:load_state_dict(sd)
        H.raises(function() optim.SGD({x, y, z}, {lr = 0.1}):load_state_dict(sd) end, "load_state_dict",
                 "saved for 2 parameter groups of 1, 2 parameters", "a plain list of 3")
        local z3 = ordo.tensor({1, 1}, D):requires_grad()
        local swapped = optim.SGD({{params = {x, z3}}, {params = {y}, lr = 0.05}}, {lr = 0.1})
        H.raises(function() swapped:load_state_dict(sd) end, "load_state_dict", "groups of 1, 2", "2 groups of 2, 1")
        assert.equals(0.05, swapped.param_groups[2].lr)
        assert.equals(0, swapped.t)
    end)

    it("parameter groups: each group's options override the optimiser's; a scheduler moves group lrs too", function()
        -- group 1: the optimiser's lr 0.1, no momentum; group 2: lr 0.01 with momentum 0.9
        local a, b = ordo.tensor({1, 2}, D):requires_grad(), ordo.tensor({3}, D):requires_grad()
        local opt = optim.SGD({{params = {a}}, {params = {b}, lr = 0.01, momentum = 0.9}}, {lr = 0.1})
        assert.equal(2, #opt.params)
        for _ = 1, 3 do
            opt:zero_grad()
            ;((a * a):sum() + (b * b):sum()):backward()
            opt:step()
        end
        local ra, rb, buf = {1, 2}, 3, nil
        for _ = 1, 3 do
            for i = 1, 2 do ra[i] = ra[i] - 0.1 * 2 * ra[i] end
            local g = 2 * rb
            buf = buf and 0.9 * buf + g or g
            rb = rb - 0.01 * buf
        end
        close(a:totable(), ra, 1e-12)
        close(b:item(), rb, 1e-12)
        -- a scheduler sets opt.lr; a group's own lr follows in proportion (Torch: each group's lr is scheduled)
        local c, d = ordo.tensor({1}, D):requires_grad(), ordo.tensor({1}, D):requires_grad()
        local o2 = optim.SGD({{params = {c}}, {params = {d}, lr = 0.5}}, {lr = 1})
        optim.lr_scheduler.StepLR(o2, {step_size = 1, gamma = 0.1}):step()
        ;(c + d):sum():backward()
        o2:step()
        close(c:item(), 0.9, 1e-12)
        close(d:item(), 0.95, 1e-12)
        -- AdamW without weight decay on the biases' group
        local w, bias = ordo.tensor({1, 1}, D):requires_grad(), ordo.tensor({1}, D):requires_grad()
        local o3 = optim.AdamW({{params = {w}}, {params = {bias}, weight_decay = 0}}, {lr = 0.1, weight_decay = 0.5})
        ;(w * 0):sum():backward()
        ;(bias * 0):sum():backward()
        o3:step()
        close(w:totable(), {0.95, 0.95}, 1e-12)
        close(bias:item(), 1, 1e-12)
        -- param_groups[k] may change between steps (checked like opt.lr)
        local q = ordo.tensor({0}, D):requires_grad()
        local o4 = optim.SGD({{params = {q}, lr = 0.1}})
        o4.param_groups[1].lr = 2
        q.grad = ordo.ones({1}, D)
        o4:step()
        close(q:item(), -2, 1e-12)
        o4.param_groups[1].lr = -1
        H.raises(function() o4:step() end, "step", "param_groups[1].lr must be a finite number >= 0")
        -- a plain list makes one group, as Torch's: param_groups[1] is the optimiser's own options
        -- (param_groups was nil: Torch's `for g in opt.param_groups: g.lr = ...` raised a Lua error)
        local r = ordo.tensor({0}, D):requires_grad()
        local o6 = optim.SGD({r}, {lr = 0.5, momentum = 0.9})
        assert.equals(1, #o6.param_groups)
        assert.equals(0.5, o6.param_groups[1].lr)
        assert.equals(0.9, o6.param_groups[1].momentum)
        assert.are.equal(r, o6.param_groups[1].params[1])
        for _, g in ipairs(o6.param_groups) do g.lr = g.lr * 0.5 end
        assert.equals(0.25, o6.lr)
        r.grad = ordo.ones({1}, D)
        o6:step()
        close(r:item(), -0.25, 1e-12)
        o6.param_groups[1].momentum = -1
        H.raises(function() o6:step() end, "step", "momentum must be >= 0")
        o6.param_groups[1].momentum = 0.9
        H.raises(function() o6.param_groups[1].params = {} end, "param_groups[1].params", "make a new optimiser")
        local sched = optim.lr_scheduler.StepLR(o6, {step_size = 1, gamma = 0.1})
        sched:step()
        close(o6.param_groups[1].lr, 0.025, 1e-15)
        -- checkpoints: a group's momentum decides the state its parameters keep
        local p1, p2 = ordo.tensor({1}, D):requires_grad(), ordo.tensor({1}, D):requires_grad()
        local o5 = optim.SGD({{params = {p1}}, {params = {p2}, momentum = 0.9}}, {lr = 0.1})
        ;(p1 + p2):sum():backward()
        o5:step()
        local path = tmpname()
        o5:save(path)
        local o6 = optim.SGD({{params = {p1}}, {params = {p2}, momentum = 0.9}}, {lr = 0.1})
        o6:load(path)
        assert.equal(1, o6.buf[2]:item())
        -- (made with other groups: the groups are named, where the momentum buffer was)
        H.raises(function() optim.SGD({p1, p2}, {lr = 0.1}):load(path) end, "saved for 2 parameter groups",
                 "a plain list of 2")
        H.raises(function() optim.SGD({{params = {p1}}, {params = {p2}}}, {lr = 0.1}):load(path) end,
                 "buf.2 that this optimiser does not have")
        os.remove(path)
        -- bad groups raise naming the group
        H.raises(function() optim.SGD({p1, {params = {p2}}}) end, "SGD: parameter 2 is table", "not both")
        H.raises(function() optim.SGD({{params = {p1}, lrr = 1}}) end, "SGD: group 1: unknown option 'lrr'")
        H.raises(function() optim.SGD({{params = {}}}) end, "SGD: group 1 needs params")
        H.raises(function() optim.SGD({{params = {p1}, nesterov = true}}) end, "group 1: nesterov needs a momentum")
        H.raises(function() optim.SGD({{params = {p1}}, {params = {p1}}}) end, "parameter 2 is the same tensor")
        H.raises(function() optim.Adam({{params = {p1}, lr = 0 / 0}}) end, "Adam: group 1: option lr must be a finite number")
        -- a group reads the options it does not set through to the optimiser's (Torch's groups hold them all):
        -- Torch's loop `for g in param_groups: g.lr *= 0.1` raised a Lua error on a group without an lr of its own
        local e, f = ordo.tensor({1}, D):requires_grad(), ordo.tensor({1}, D):requires_grad()
        local og0 = optim.SGD({{params = {e}}, {params = {f}, lr = 0.5}}, {lr = 0.2, momentum = 0.9})
        assert.equal(0.9, og0.param_groups[1].momentum)
        assert.equal(0.2, og0.param_groups[1].lr)
        assert.is_nil(og0.param_groups[1].bogus)
        optim.lr_scheduler.StepLR(og0, {step_size = 1, gamma = 0.5}):step() -- opt.lr 0.1: groups at 0.1 and 0.25
        for _, grp in ipairs(og0.param_groups) do grp.lr = grp.lr * 0.1 end -- each group's rate / 10
        assert.equal(0.9, og0.momentum)
        e.grad, f.grad = ordo.ones({1}, D), ordo.ones({1}, D)
        og0:step()
        close({e:item(), f:item()}, {1 - 0.01, 1 - 0.025}, 1e-12)
        -- checkpoints hold each group's own lr (changed by hand or by ReduceLROnPlateau): it was lost on load
        local function two() return optim.SGD({{params = {p1}, lr = 1e-4}, {params = {p2}}}, {lr = 1e-2}) end
        local og = two()
        og.param_groups[1].lr = 5e-5
        og.param_groups[2].lr = 3e-3
        local sd = og:state_dict()
        local back = two()
        back:load_state_dict(sd)
        assert.equal(5e-5, back.param_groups[1].lr)
        assert.equal(3e-3, back.param_groups[2].lr)
        local gpath = tmpname()
        og.param_groups[2].lr = nil
        og:save(gpath)
        back:load(gpath)
        assert.equal(5e-5, back.param_groups[1].lr)
        assert.is_nil(rawget(back.param_groups[2], "lr"))
        -- another number of groups, or a group's own lr into a plain list's optimiser, raises changing nothing
        H.raises(function() optim.SGD({{params = {p1, p2}}}, {lr = 1e-2}):load(gpath) end,
                 "saved for 2 parameter groups of 1, 1 parameters, this optimiser has 1 group of 2")
        local plain = optim.SGD({p1, p2}, {lr = 1e-2})
        H.raises(function() plain:load(gpath) end, "2 parameter groups of 1, 1 parameters", "a plain list of 2")
        local one = optim.SGD({{params = {p1, p2}, lr = 0.5}}, {lr = 1e-2})
        one:save(gpath)
        H.raises(function() plain:load(gpath) end, "param group 1 has an lr of its own", "plain list")
        assert.equal(1e-2, plain.lr)
        plain:save(gpath)
        one:load(gpath)
        assert.is_nil(rawget(one.param_groups[1], "lr"))
        os.remove(gpath)
    end)

    it("add_param_group adds a group (Torch's): its options, its lr following opt.lr; bad ones change nothing",
       function()
        local S = optim.lr_scheduler
        local p, q, r = ordo.tensor({1}, D):requires_grad(), ordo.tensor({1}, D):requires_grad(),
            ordo.tensor({1}, D):requires_grad()
        -- a plain list's optimiser becomes two groups; the first keeps its momentum buffer
        local opt = optim.SGD({p}, {lr = 0.1, momentum = 0.9})
        p.grad = ordo.ones({1}, D)
        opt:step()
        assert.equal(opt, opt:add_param_group({params = {q}, lr = 0.01, momentum = 0}))
        assert.equal(2, #opt.param_groups)
        assert.equal(2, #opt.params)
        assert.are.equal(q, opt.params[2])
        assert.is_nil(rawget(opt.param_groups[1], "lr"))
        p.grad, q.grad = ordo.ones({1}, D), ordo.ones({1}, D)
        opt:step()
        close({p:item(), q:item()}, {0.9 - 0.1 * 1.9, 0.99}, 1e-12)
        assert.is_nil(opt.buf[2])
        -- a lone tensor for params (Torch's); a scheduler moves the new group's lr too
        opt:add_param_group({params = r})
        S.StepLR(opt, {step_size = 1, gamma = 0.5}):step()
        p.grad, q.grad, r.grad = nil, ordo.ones({1}, D), ordo.ones({1}, D)
        opt:step()
        close({q:item(), r:item()}, {0.99 - 0.005, 1 - 0.05}, 1e-12)
        -- a lone tensor for a group's params when the optimiser is made too (it raised "needs params")
        local og = optim.SGD({{params = p}, {params = q, lr = 0.5}}, {lr = 0.1})
        assert.equal(2, #og.params)
        p.grad, q.grad = ordo.ones({1}, D), ordo.ones({1}, D)
        local p0, q0 = p:item(), q:item()
        og:step()
        close({p:item(), q:item()}, {p0 - 0.1, q0 - 0.5}, 1e-12)
        -- bad groups raise, changing nothing
        local s = ordo.tensor({1}, D):requires_grad()
        H.raises(function() opt:add_param_group({params = {s, p}}) end, "add_param_group",
                 "parameter 2 of the group is already in the optimiser (opt.params[1])")
        H.raises(function() opt:add_param_group({params = {s, s}}) end, "add_param_group", "same tensor")
        H.raises(function() opt:add_param_group({params = {s}, lrr = 1}) end, "group 4: unknown option 'lrr'")
        H.raises(function() opt:add_param_group({params = {s}, momentum = -1}) end, "momentum must be >= 0")
        H.raises(function() opt:add_param_group({params = {s}, momentum = 0, nesterov = true}) end, "nesterov")
        H.raises(function() opt:add_param_group({params = {}}) end, "needs params", "an empty list")
        H.raises(function() opt:add_param_group(s) end, "expected a group", "Tensor")
        H.raises(function() opt:add_param_group({params = {ordo.tensor({1}, D):requires_grad() * 2}}) end, "not a leaf")
        H.raises(function() opt.add_param_group({params = {s}}) end, "as self")
        assert.equal(3, #opt.params)
        assert.equal(3, #opt.param_groups)
        -- a checkpoint loads into an optimiser given the same groups
        local sd = opt:state_dict()
        local o2 = optim.SGD({p}, {lr = 0.1, momentum = 0.9})
        H.raises(function() o2:load_state_dict(sd) end, "for 3 parameters")
        o2:add_param_group({params = {q}, lr = 0.01, momentum = 0})
        o2:add_param_group({params = {r}})
        o2:load_state_dict(sd)
        assert.equal(opt.lr, o2.lr)
        -- schedulers with a value per group, made before the group was added, raise naming the cause
        local o3 = optim.SGD({p}, {lr = 0.1})
        local one = S.OneCycleLR(o3, {max_lr = 1, total_steps = 10, base_momentum = {0.8}})
        local pl = S.ReduceLROnPlateau(o3, {min_lr = {0.01}})
        o3:add_param_group({params = {q}})
        H.raises(function() one:step() end, "OneCycleLR", "2 param groups", "made for 1", "add_param_group")
        assert.equal(0, one.epoch)
        H.raises(function() pl:step(1) end, "ReduceLROnPlateau", "2 param groups", "min_lr has 1")
        assert.equal(0, pl.epoch)
    end)

    it("step checks opt.lr and each gradient first; NaN options and a parameter given twice raise", function()
        for _, name in ipairs({"SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam", "Adadelta",
                               "Rprop"}) do
            local p = ordo.zeros({2, 3}, D):requires_grad()
            local opt = optim[name]({p}, {lr = 0.1})
            -- as many elements in another shape: the fused kernels would take it silently
            p.grad = ordo.arange(1, 7, D)
            H.raises(function() opt:step() end, "step", "gradient of parameter 1", "shape 6", "2x3")
            p.grad = ordo.ones({3}, D) -- broadcasts in the elementwise forms, fails in the kernels
            H.raises(function() opt:step() end, "step", "gradient of parameter 1", "shape 3")
            p.grad = ordo.ones({2, 3}, {dtype = "int64"})
            H.raises(function() opt:step() end, "step", "gradient of parameter 1 is int64")
            p.grad = 3
            H.raises(function() opt:step() end, "step", "gradient of parameter 1 is number")
            p.grad = ordo.ones({2, 3}, D)
            opt.lr = 0 / 0
            H.raises(function() opt:step() end, "step", "opt.lr must be a finite number", "nan")
            opt.lr = "0.1"
            H.raises(function() opt:step() end, "step", "opt.lr", "string")
            assert.same({{0, 0, 0}, {0, 0, 0}}, p:totable()) -- nothing was changed
            assert.equal(0, opt.t)
            opt.lr = 0.1
            opt:step()
            assert.is_true(p:sum():item() < 0)
            H.raises(function() optim[name]({p}, {lr = 0 / 0}) end, name, "lr must be a finite number")
            H.raises(function() optim[name]({p}, {lr = math.huge}) end, name, "lr must be a finite number")
            H.raises(function() optim[name]({p, p}) end, name, "parameter 2 is the same tensor as parameter 1")
        end
    end)

    it("optimisers refuse a non-leaf or non-float parameter; bad values of a wrong type are named by their type",
       function()
        for _, name in ipairs({"SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam", "Adadelta",
                               "Rprop"}) do
            -- computed from a leaf: it never gets a .grad, so it would never be trained
            local w = ordo.randn({3}, D):requires_grad() * 0.01
            H.raises(function() optim[name]({w}) end, name .. ": parameter 1 is not a leaf", "mul")
            H.raises(function() optim[name]({{params = {ordo.ones({1}, D):requires_grad(), w}}}) end,
                     name .. ": parameter 2 is not a leaf")
            H.raises(function() optim[name]({ordo.ones({2}, {dtype = "int32"})}) end,
                     name .. ": parameter 1 is int32, expected a float32 or float64 tensor")
        end
        local p = ordo.ones({2}, D):requires_grad()
        p.grad = ordo.ones({2}, D)
        H.raises(function() nn.utils.clip_grad_value_({p}, "1") end, "clip_value must be a number >= 0, got string")
        H.raises(function() nn.utils.clip_grad_norm_({p}, "1") end, "max_norm must be a number >= 0, got string")
        H.raises(function() nn.utils.clip_grad_norm_({p}, 1, "2") end, "norm_type", "got string")
        local plateau = optim.lr_scheduler.ReduceLROnPlateau(optim.SGD({p}))
        H.raises(function() plateau:step("0.5") end, "step expects the metric (a number), got string")
        assert.same({1, 1}, p.grad:totable())
    end)

    it("maximize (every optimiser) and amsgrad (Adam, AdamW) follow Torch's updates (by hand, fused and not)",
       function()
        local P0 = {1, -2, 0.5}
        local G = {{0.5, -1.2, 0.3}, {0.1, 0.4, -0.7}, {-2, 0.2, 0.9}, {0.3, 0.3, 0.3}, {1, -1, 2}}
        -- Torch's update of one element for each optimiser, g already negated when maximizing
        local refs = {
            SGD = function(o, w, g, st, t)
                g = g + o.weight_decay * w
                st.buf = t == 1 and g or o.momentum * st.buf + g
                return w - o.lr * (g + o.momentum * st.buf) -- (nesterov)
            end,
            Adam = function(o, w, g, st, t, decoupled)
                if decoupled then w = w * (1 - o.lr * o.weight_decay) else g = g + o.weight_decay * w end
                st.m = 0.9 * (st.m or 0) + 0.1 * g
                st.v = 0.999 * (st.v or 0) + 0.001 * g * g
                st.vmax = math.max(st.vmax or 0, st.v)
                local v = o.amsgrad and st.vmax or st.v
                return w - o.lr / (1 - 0.9 ^ t) * st.m / (math.sqrt(v) / math.sqrt(1 - 0.999 ^ t) + 1e-8)
            end,
            RMSprop = function(o, w, g, st)
                g = g + o.weight_decay * w
                st.v = 0.99 * (st.v or 0) + 0.01 * g * g
                return w - o.lr * g / (math.sqrt(st.v) + 1e-8)
            end,
            Adagrad = function(o, w, g, st)
                g = g + o.weight_decay * w
                st.sum = (st.sum or 0) + g * g
                return w - o.lr * g / (math.sqrt(st.sum) + 1e-10)
            end,
        }
        local cases = {
            {"SGD", {lr = 0.1, momentum = 0.9, nesterov = true, weight_decay = 0.1, maximize = true}},
            {"Adam", {lr = 0.1, weight_decay = 0.1, maximize = true}},
            {"Adam", {lr = 0.1, weight_decay = 0.1, amsgrad = true}},
            {"Adam", {lr = 0.1, amsgrad = true, maximize = true}},
            {"AdamW", {lr = 0.1, weight_decay = 0.1, amsgrad = true, maximize = true}},
            {"RMSprop", {lr = 0.1, weight_decay = 0.1, maximize = true}},
            {"Adagrad", {lr = 0.1, weight_decay = 0.1, maximize = true}},
        }
        for _, c in ipairs(cases) do
            local name, opts = c[1], c[2]
            local full = {weight_decay = 0, momentum = 0}
            for k, v in pairs(opts) do full[k] = v end
            for _, strided in ipairs({false, true}) do
                local p = strided and ordo.tensor({{1, 0}, {-2, 0}, {0.5, 0}}, D):select(2, 1):requires_grad()
                    or ordo.tensor(P0, D):requires_grad()
                local opt = optim[name]({p}, opts)
                local w, st = {P0[1], P0[2], P0[3]}, {{}, {}, {}}
                for t = 1, #G do
                    opt:zero_grad()
                    ;(p * ordo.tensor(G[t], D)):sum():backward()
                    opt:step()
                    for i = 1, 3 do
                        local g = opts.maximize and -G[t][i] or G[t][i]
                        w[i] = (refs[name] or refs.Adam)(full, w[i], g, st[i], t, name == "AdamW")
                    end
                end
                close(p:totable(), w, 1e-10)
            end
            local p = ordo.tensor(P0, D):requires_grad()
            ;(p * p):sum():backward()
            local before = p.grad:totable()
            optim[name]({p}, opts):step()
            assert.same(before, p.grad:totable()) -- (maximize negates a copy, not p.grad)
        end
        -- amsgrad set after some steps: the largest v is tracked from then on (from zeros, as
        -- Torch starts it), and dropped when unset; the state saves and loads with its rows
        local p = ordo.tensor(P0, D):requires_grad()
        local opt = optim.Adam({p}, {lr = 0.1})
        local w, st = {P0[1], P0[2], P0[3]}, {{}, {}, {}}
        local full = {lr = 0.1, weight_decay = 0}
        for t = 1, #G do
            full.amsgrad = t >= 2 and t <= 4
            opt.amsgrad = full.amsgrad
            if t == 2 then for i = 1, 3 do st[i].vmax = 0 end end
            opt:zero_grad()
            ;(p * ordo.tensor(G[t], D)):sum():backward()
            opt:step()
            for i = 1, 3 do w[i] = refs.Adam(full, w[i], G[t][i], st[i], t) end
            assert.same({full.amsgrad and 3 or 2, 3}, opt.state[1]:shape())
            if t == 3 then
                local q = ordo.tensor(p:totable(), D):requires_grad()
                local o2 = optim.Adam({q}, {lr = 0.1, amsgrad = true})
                o2:load_state_dict(opt:state_dict())
                H.raises(function() optim.Adam({q}, {lr = 0.1}):load_state_dict(opt:state_dict()) end,
                         "load_state_dict", "shape 3x3", "shape 2x3")
            end
        end
        close(p:totable(), w, 1e-10)
        H.raises(function() optim.Adam({p}, {betas = {0.9, 0.99}}) end, "unknown option 'betas'", "beta1 = 0.9")
        H.raises(function() optim.SGD({p}, {maximize = 1}) end, "option maximize must be a boolean")
    end)

    it("zero_grad(false) zeroes each gradient in place (Torch's set_to_none); zero_grad() drops them", function()
        local a, b = ordo.ones({2}, D):requires_grad(), ordo.ones({3}, D):requires_grad()
        local opt = optim.SGD({a, b}, {lr = 0.1})
        ;(a * 3):sum():backward()
        local ga = a.grad
        opt:zero_grad(false)
        assert.equal(ga, a.grad)
        assert.same({0, 0}, a.grad:totable())
        assert.is_nil(b.grad)
        ;(a * 2):sum():backward()
        assert.same({2, 2}, a.grad:totable())
        H.raises(function() opt:zero_grad("no") end, "zero_grad: set_to_none must be a boolean, got string")
        a.grad = 5
        H.raises(function() opt:zero_grad(false) end, "zero_grad: the gradient of parameter 1 is number")
        opt:zero_grad()
        assert.is_nil(a.grad)
    end)

    it("clip_grad_* check every gradient before clipping any: an expanded view or a non-tensor raises, none clipped",
       function()
        for _, clip in ipairs({function(ps) return nn.utils.clip_grad_norm_(ps, 1) end,
                               function(ps) return nn.utils.clip_grad_value_(ps, 1) end}) do
            local a, b = ordo.ones({2}, D):requires_grad(), ordo.ones({3}, D):requires_grad()
            a.grad = ordo.tensor({3, 4}, D)
            b.grad = ordo.tensor({2}, D):expand(3) -- (set by hand: one memory location for 3 elements)
            H.raises(function() clip({a, b}) end, "the gradient of parameter 2 is an expanded view", "contiguous()")
            assert.same({3, 4}, a.grad:totable())
            b.grad = 3
            H.raises(function() clip({a, b}) end, "the gradient of parameter 2 is number, expected a tensor")
            assert.same({3, 4}, a.grad:totable())
            b.grad = ordo.tensor({2}, D):expand(3):contiguous()
            clip({a, b})
            assert.is_true(a.grad:totable()[1] <= 1 + 1e-12)
        end
    end)

    it("RMSprop's momentum or centered and SGD's momentum set or unset between steps take effect; checkpoints load",
       function()
        local G = {{1, -1}, {0.5, 2}, {-0.3, 0.7}, {1, 1}}
        -- RMSprop by hand, the options of step t from opts_at(t); mean and buf start at zeros when turned on
        local function rms_ref(opts_at)
            local w, v, mean, buf = {1, 2}, {0, 0}, {}, {}
            for t = 1, #G do
                local o = opts_at(t)
                for i = 1, 2 do
                    local g = G[t][i]
                    v[i] = 0.99 * v[i] + 0.01 * g * g
                    local var = v[i]
                    if o.centered then
                        mean[i] = 0.99 * (mean[i] or 0) + 0.01 * g
                        var = var - mean[i] * mean[i]
                    else
                        mean[i] = nil
                    end
                    local step = g / (math.sqrt(var) + 1e-8)
                    if (o.momentum or 0) ~= 0 then
                        buf[i] = o.momentum * (buf[i] or 0) + step
                        step = buf[i]
                    else
                        buf[i] = nil
                    end
                    w[i] = w[i] - 0.1 * step
                end
            end
            return w
        end
        local schedules = {
            function(t) return t >= 2 and {momentum = 0.9} or {} end,
            function(t) return t >= 2 and {centered = true} or {} end,
            function(t) return t == 2 and {} or {momentum = 0.5, centered = true} end,
        }
        for _, at in ipairs(schedules) do
            local p = ordo.tensor({1, 2}, D):requires_grad()
            local opt = optim.RMSprop({p}, {lr = 0.1})
            for t = 1, #G do
                local o = at(t)
                opt.momentum, opt.centered = o.momentum or 0, o.centered or false
                p.grad = ordo.tensor(G[t], D)
                opt:step()
            end
            close(p:totable(), rms_ref(at), 1e-12)
            -- the state is what these options keep: it loads into an RMSprop made with them
            local last = at(#G)
            local q = ordo.tensor({1, 2}, D):requires_grad()
            optim.RMSprop({q}, {lr = 0.1, momentum = last.momentum, centered = last.centered})
                :load_state_dict(opt:state_dict())
        end
        -- SGD: momentum unset, then set again (its buffer restarts from the gradient, as at a first step)
        local p = ordo.tensor({1, 2}, D):requires_grad()
        local opt = optim.SGD({p}, {lr = 0.1, momentum = 0.9})
        local w, buf = {1, 2}, {}
        for t = 1, #G do
            opt.momentum = t == 2 and 0 or 0.9
            p.grad = ordo.tensor(G[t], D)
            opt:step()
            if t == 2 then
                optim.SGD({ordo.tensor({1, 2}, D):requires_grad()}, {lr = 0.1}):load_state_dict(opt:state_dict())
            end
            for i = 1, 2 do
                local g = G[t][i]
                if t == 2 then
                    buf[i] = nil
                else
                    buf[i] = buf[i] and 0.9 * buf[i] + g or g
                    g = buf[i]
                end
                w[i] = w[i] - 0.1 * g
            end
        end
        close(p:totable(), w, 1e-12)
    end)

    it("step(closure) runs the closure with grad mode on, then steps, and returns its loss (Torch's form)", function()
        local p = ordo.tensor({1, 2}, D):requires_grad()
        local opt = optim.SGD({p}, {lr = 0.1})
        local calls = 0
        local function closure()
            calls = calls + 1
            opt:zero_grad()
            local loss = (p * p):sum()
            loss:backward()
            return loss
        end
        local loss = opt:step(closure)
        assert.equal(1, calls)
        close(loss:item(), 5, 1e-12)
        close(p:totable(), {0.8, 1.6}, 1e-12)
        loss = ordo.no_grad(function() return opt:step(closure) end) -- (grad mode on inside the closure)
        close(loss:item(), 0.64 + 2.56, 1e-12)
        close(p:totable(), {0.64, 1.28}, 1e-12)
        assert.is_nil(opt:step())
        H.raises(function() opt:step(5) end, "step: expected no argument or a closure", "got number")
        close(p:totable(), {0.64 - 0.1 * 1.6, 1.28 - 0.1 * 3.2}, 1e-12) -- the bare step used the gradient kept
    end)

    it("step checks every option again (plain fields, groups' too), changing nothing on a bad one", function()
        local cases = {
            {"Adam", "beta1", 1, "beta1 and beta2 must be < 1"},
            {"AdamW", "beta2", 1.5, "beta1 and beta2 must be < 1"},
            {"Adam", "eps", -1e-8, "eps must be >= 0"},
            {"SGD", "weight_decay", 0 / 0, "weight_decay must be a finite number"},
            {"SGD", "momentum", "0.9", "momentum must be a number, got string"},
            {"SGD", "momentum", -1, "momentum must be >= 0"},
            {"SGD", "nesterov", true, "nesterov needs a momentum > 0"},
            {"RMSprop", "alpha", 1, "alpha must be in [0, 1)"},
            {"RMSprop", "centered", nil, "opt.centered must be a boolean, got nil"},
            {"Adagrad", "lr_decay", -0.5, "lr_decay and initial_accumulator_value must be >= 0"},
        }
        for _, c in ipairs(cases) do
            local name, key, val, msg = c[1], c[2], c[3], c[4]
            for _, grouped in ipairs({false, true}) do
                local p = ordo.ones({2}, D):requires_grad()
                local opt = optim[name](grouped and {{params = {p}}} or {p}, {lr = 0.1})
                if grouped then opt.param_groups[1][key] = val else opt[key] = val end
                p.grad = ordo.ones({2}, D)
                if not (grouped and val == nil) then -- (a group without the key takes the optimiser's)
                    H.raises(function() opt:step() end, "step", grouped and "param_groups[1]" or "", msg)
                    assert.same({1, 1}, p:totable())
                    assert.equal(0, opt.t)
                end
            end
        end
        -- a group whose params were changed after the optimiser was made
        local a, b = ordo.ones({2}, D):requires_grad(), ordo.ones({3}, D):requires_grad()
        local opt = optim.SGD({{params = {a}}, {params = {b}, lr = 0.5}}, {lr = 0.1})
        local c = ordo.ones({1}, D):requires_grad()
        opt.param_groups[2].params = {b, c}
        H.raises(function() opt:step() end, "step: param_groups[2].params is not the list")
        opt.param_groups[2].params = {b}
        opt.param_groups[3] = {params = {c}}
        H.raises(function() opt:step() end, "step: param_groups[3].params is not the list")
        opt.param_groups[3] = nil
        opt.param_groups[1].momentun = 0.9 -- a typo
        H.raises(function() opt:step() end, "step: param_groups[1]: unknown option 'momentun'")
        opt.param_groups[1].momentun = nil
        a.grad, b.grad = ordo.ones({2}, D), ordo.ones({3}, D)
        opt:step()
        close(a:totable(), {0.9, 0.9}, 1e-12)
        close(b:totable(), {0.5, 0.5, 0.5}, 1e-12)
    end)

    it("Adam's bias correction and Adagrad's lr_decay count each parameter's own updates (fused and not)", function()
        local function late_first_step(make, contiguous)
            -- p gets a gradient from step 1, q from step 3: q's first update is a first update
            local p = ordo.tensor({1, 2}, D):requires_grad()
            local base = ordo.tensor({{0.5, -1}, {2, 3}}, D)
            local q = (contiguous and base:clone() or base:t():contiguous():t()):requires_grad()
            assert.equals(contiguous, q:is_contiguous())
            local opt = make({p, q})
            for step = 1, 3 do
                opt:zero_grad()
                local l = (p * p):sum()
                if step == 3 then l = l + (q * 3):sum() end
                l:backward()
                opt:step()
            end
            assert.equals(3, opt.t)
            return (q - base):reshape(-1):totable()
        end
        for _, contiguous in ipairs({true, false}) do
            -- Adam's first step is lr * g / (|g| + eps): -lr for any positive g
            local d = late_first_step(function(ps) return optim.Adam(ps, {lr = 0.1}) end, contiguous)
            close(d, {-0.1, -0.1, -0.1, -0.1}, 1e-8)
            d = late_first_step(function(ps) return optim.AdamW(ps, {lr = 0.1, weight_decay = 0}) end, contiguous)
            close(d, {-0.1, -0.1, -0.1, -0.1}, 1e-8)
            -- Adagrad's first step: lr * g / sqrt(g^2) at lr / (1 + 0 * lr_decay)
            d = late_first_step(function(ps) return optim.Adagrad(ps, {lr = 0.1, lr_decay = 0.5}) end, contiguous)
            close(d, {-0.1, -0.1, -0.1, -0.1}, 1e-8)
        end
    end)

    it("a frozen parameter (requires_grad(false)) is taken and skipped; unfrozen, it is updated with fresh state",
       function()
        -- the backbone frozen, every parameter given (Torch's optim.SGD(model.parameters()))
        local function model()
            ordo.manual_seed(11)
            local m = nn.Sequential(nn.Linear(3, 4, D), nn.Tanh(), nn.Linear(4, 1, D))
            m:get(1):requires_grad_(false)
            return m
        end
        local x, y = ordo.randn({5, 3}, D), ordo.randn({5, 1}, D)
        local function run(m, opt, from, to)
            for t = from, to do
                if t == 4 then m:get(1):requires_grad_(true) end -- unfrozen after 3 steps
                opt:zero_grad()
                F.mse_loss(m(x), y):backward()
                opt:step()
            end
        end
        for _, mk in ipairs({
            function(ps) return optim.SGD(ps, {lr = 0.1, momentum = 0.9, dampening = 0.5}) end,
            function(ps) return optim.Adam(ps, {lr = 0.1, amsgrad = true}) end,
            function(ps) return optim.RMSprop(ps, {lr = 0.01, momentum = 0.5, centered = true}) end,
            function(ps) return optim.Adagrad(ps, {lr = 0.1}) end,
        }) do
            -- frozen: the parameters stay as they were, the head moves as with trainable_parameters()
            local m, twin = model(), model()
            local w0 = m:get(1).weight:totable()
            local opt, ref = mk(m:parameters()), mk(twin:trainable_parameters())
            run(m, opt, 1, 2)
            for t = 1, 2 do
                ref:zero_grad()
                F.mse_loss(twin(x), y):backward()
                ref:step()
            end
            assert.same(w0, m:get(1).weight:totable())
            assert.same(twin:get(3).weight:totable(), m:get(3).weight:totable())
            assert.same({0, 0, 2, 2}, {opt.steps[1] or 0, opt.steps[2] or 0, opt.steps[3], opt.steps[4]})
            assert.is_nil(opt[opt.state_field][1])
            -- a checkpoint taken while frozen (in memory and in a file) resumes exactly, through
            -- the unfreezing: the unfrozen parameters' state starts fresh at their first update
            run(m, opt, 3, 3)
            local sd, path = opt:state_dict(), tmpname()
            opt:save(path)
            local m2, m3 = model(), model()
            for i, p in ipairs(m:parameters()) do
                ordo.no_grad(function() m2:parameters()[i]:copy_(p); m3:parameters()[i]:copy_(p) end)
            end
            local o2, o3 = mk(m2:parameters()), mk(m3:parameters())
            o2:load_state_dict(sd)
            o3:load(path)
            os.remove(path)
            run(m, opt, 4, 6)
            run(m2, o2, 4, 6)
            run(m3, o3, 4, 6)
            assert.same({3, 3, 6, 6}, opt.steps)
            assert.are_not.same(w0, m:get(1).weight:totable())
            for i, p in ipairs(m:parameters()) do
                assert.same(p:totable(), m2:parameters()[i]:totable())
                assert.same(p:totable(), m3:parameters()[i]:totable())
            end
        end
        -- the unfrozen weight's first Adam step is lr times the sign of its gradient (its own count)
        local w = ordo.tensor({1, 1}, D):requires_grad(false)
        local b = ordo.tensor({1}, D):requires_grad()
        local opt = optim.Adam({w, b}, {lr = 0.1})
        for _ = 1, 3 do
            opt:zero_grad()
            ;(w:sum() * b):sum():backward()
            opt:step()
        end
        assert.same({1, 1}, w:totable())
        w:requires_grad_(true)
        opt:zero_grad()
        ;(w:sum() * b):sum():backward()
        opt:step()
        close(w:totable(), {0.9, 0.9}, 1e-7)
    end)

    it("an option that keeps state switched on or off while a parameter has no gradient: checkpoints load and " ..
       "resume exactly", function()
        -- a's gradient at every step, b's at steps 1-2 and 6; the option switched on at step 3
        -- (off again at step 5 for the second case); a checkpoint after each step is loaded into
        -- a new optimiser made with the options of that moment, whose run then matches the original
        local G = {{0.5, -1}, {0.25, 2}, {-1, 0.5}, {1, 1}, {-0.5, 0.75}, {2, -0.25}}
        local cases = {
            {"SGD", {lr = 0.1, dampening = 0.5}, "momentum", 0, 0.9},
            {"SGD", {lr = 0.1}, "momentum", 0, 0.9},
            {"Adam", {lr = 0.1}, "amsgrad", false, true},
            {"AdamW", {lr = 0.1}, "amsgrad", false, true},
            {"RMSprop", {lr = 0.01}, "momentum", 0, 0.9},
            {"RMSprop", {lr = 0.01}, "centered", false, true},
        }
        for _, c in ipairs(cases) do
            local name, base, key, off, on = c[1], c[2], c[3], c[4], c[5]
            for _, switch_off in ipairs({false, true}) do
                local function value(t)
                    if t >= 3 and not (switch_off and t >= 5) then return on end
                    return off
                end
                local function make(t) -- the optimiser of step t's options, over new parameters
                    local o = {}
                    for k, v in pairs(base) do o[k] = v end
                    o[key] = value(t)
                    local a, b = ordo.tensor({1, 2}, D):requires_grad(), ordo.tensor({3}, D):requires_grad()
                    return optim[name]({a, b}, o)
                end
                local function step(opt, t)
                    opt[key] = value(t)
                    local a, b = opt.params[1], opt.params[2]
                    opt:zero_grad()
                    local l = (a * ordo.tensor({G[t][1], G[t][2]}, D)):sum()
                    if t <= 2 or t >= 6 then l = l + (b * (b * G[t][2])):sum() end
                    l:backward()
                    opt:step()
                end
                local ref = make(1)
                for t = 1, #G do step(ref, t) end
                for cut = 1, #G - 1 do
                    local opt = make(1)
                    for t = 1, cut do step(opt, t) end
                    local resumed = make(cut)
                    for i, p in ipairs(opt.params) do
                        ordo.no_grad(function() resumed.params[i]:copy_(p) end)
                    end
                    local ok, err = pcall(resumed.load_state_dict, resumed, opt:state_dict())
                    assert(ok, string.format("%s %s (off again: %s) at step %d: %s", name, key, tostring(switch_off),
                                             cut, tostring(err)))
                    for t = cut + 1, #G do step(resumed, t) end
                    for i = 1, 2 do
                        assert.same(ref.params[i]:totable(), resumed.params[i]:totable())
                    end
                end
            end
        end
        -- SGD with dampening: b's buffer, started at step 5, is b's gradient itself, not a damped one
        local a, b = ordo.tensor({1}, D):requires_grad(), ordo.tensor({1}, D):requires_grad()
        local opt = optim.SGD({a, b}, {lr = 0.1, dampening = 0.5})
        a.grad, b.grad = ordo.tensor({1}, D), ordo.tensor({1}, D)
        opt:step()
        opt.momentum, b.grad = 0.9, nil
        opt:step()
        assert.is_nil(opt.buf[2])
        local o2 = optim.SGD({ordo.tensor({1}, D):requires_grad(), ordo.tensor({1}, D):requires_grad()},
                             {lr = 0.1, dampening = 0.5, momentum = 0.9})
        o2:load_state_dict(opt:state_dict())
        o2.params[2].grad = ordo.tensor({4}, D)
        o2:step()
        assert.same({4}, o2.buf[2]:totable())
        -- RMSprop: the state of a parameter without a gradient follows the options too
        local r = optim.RMSprop({ordo.tensor({1, 2}, D):requires_grad(), ordo.tensor({3}, D):requires_grad()})
        r.params[1].grad, r.params[2].grad = ordo.tensor({1, 1}, D), ordo.tensor({1}, D)
        r:step()
        r.momentum, r.centered, r.params[2].grad = 0.9, true, nil
        r:step()
        assert.same({0}, r.state[2].buf:totable())
        assert.same({0}, r.state[2].mean:totable())
        r.momentum, r.centered = 0, false
        r:step()
        assert.is_nil(r.state[2].buf)
        assert.is_nil(r.state[2].mean)
    end)

    it("opt:load checks the state each parameter needs and the parameters' shapes; old checkpoints load", function()
        local serialize = require "ordo.serialize"
        local function stepped(opt, n)
            for _ = 1, n or 1 do
                opt:zero_grad()
                local l = 0
                for _, p in ipairs(opt.params) do l = (p * p):sum() + l end
                l:backward()
                opt:step()
            end
            return opt
        end
        local path = os.tmpname()
        -- state saved without momentum and centring, loaded into an RMSprop with them
        stepped(optim.RMSprop({ordo.ones({3}, D):requires_grad()}, {lr = 0.1})):save(path)
        local rich = optim.RMSprop({ordo.ones({3}, D):requires_grad()}, {lr = 0.1, momentum = 0.9, centered = true})
        H.raises(function() rich:load(path) end, "optimizer load", "no state.1.mean", "other options")
        assert.equals(0, rich.t)
        assert.is_nil(next(rich.state))
        -- SGD: a parameter updated without momentum has no buffer; with momentum, its buffer starts
        -- at its next gradient (the gradient itself, Torch's), as when momentum is set between steps
        stepped(optim.SGD({ordo.ones({3}, D):requires_grad()}, {lr = 0.1})):save(path)
        local sgdm = optim.SGD({ordo.ones({3}, D):requires_grad()}, {lr = 0.1, momentum = 0.9})
        sgdm:load(path)
        assert.same({1}, sgdm.steps)
        assert.is_nil(sgdm.buf[1])
        stepped(sgdm)
        assert.same({2, 2, 2}, sgdm.buf[1]:totable())
        -- ... but a buffer is refused by an SGD without momentum
        stepped(optim.SGD({ordo.ones({3}, D):requires_grad()}, {momentum = 0.9})):save(path)
        H.raises(function() optim.SGD({ordo.ones({3}, D):requires_grad()}):load(path) end,
                 "optimizer load", "buf.1", "does not have")
        -- Adam's moments of a 2x3 parameter (2 x 6 numbers) for a 3x2 one
        stepped(optim.Adam({ordo.ones({2, 3}, D):requires_grad()})):save(path)
        local t32 = optim.Adam({ordo.ones({3, 2}, D):requires_grad()})
        H.raises(function() t32:load(path) end, "optimizer load", "parameter 1 of shape 2x3", "this optimiser's is 3x2")
        assert.equals(0, t32.t)
        assert.is_nil(next(t32.state))
        optim.Adam({ordo.ones({2, 3}, D):requires_grad()}):load(path) -- the right shape loads
        -- a checkpoint from before per-parameter counts and shapes: each parameter with state
        -- counts the optimiser's steps, and the run resumes as it would have
        local function pair()
            local a, b = ordo.tensor({1, -2}, D):requires_grad(), ordo.tensor({{3}, {0.5}}, D):requires_grad()
            return optim.Adam({a, b}, {lr = 0.05})
        end
        local ref = stepped(pair(), 2)
        ref:save(path)
        local old = {}
        for _, e in ipairs(serialize.read("spec", path)) do
            if e.name ~= "steps" and not e.name:match("^shape%.") then old[#old + 1] = e end
        end
        serialize.write("spec", path, old)
        local resumed = pair()
        for i, p in ipairs(resumed.params) do ordo.no_grad(function() p:copy_(ref.params[i]) end) end
        resumed:load(path)
        assert.same({2, 2}, resumed.steps)
        stepped(ref, 2)
        stepped(resumed, 2)
        for i = 1, 2 do assert.same(ref.params[i]:totable(), resumed.params[i]:totable()) end
        -- per-parameter counts are saved: a parameter first updated late resumes with its own count
        local a, b = ordo.tensor({1, 2}, D):requires_grad(), ordo.tensor({3}, D):requires_grad()
        local late = optim.Adam({a, b}, {lr = 0.1})
        for step = 1, 3 do
            late:zero_grad()
            local l = (a * a):sum()
            if step == 3 then l = l + (b * b):sum() end
            l:backward()
            late:step()
        end
        late:save(path)
        local again = optim.Adam({a:detach():clone():requires_grad(), b:detach():clone():requires_grad()}, {lr = 0.1})
        again:load(path)
        assert.same({3, 1}, again.steps)
        os.remove(path)
    end)

    it("a short training run: an MLP learns a non-linear rule (loss falls below 0.15)", function()
        ordo.manual_seed(5)
        local x = ordo.randn({512, 2})
        -- class 2 inside the circle of radius 1, class 1 outside
        local y = (x * x):sum(2):lt(1):long() + 1
        local model = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 2))
        local opt = optim.Adam(model:parameters(), {lr = 0.02})
        local lossf = nn.CrossEntropyLoss()
        local first, last
        for step = 1, 300 do
            opt:zero_grad()
            local loss = lossf(model(x), y)
            loss:backward()
            opt:step()
            if step == 1 then first = loss:item() end
            last = loss
        end
        last = last:item()
        assert.is_true(first > 0.5, "first loss " .. first)
        assert.is_true(last < 0.15, "final loss " .. last)
    end)
end)

-- A further positional argument (m:train(true, 5), opt:step(nil, 5),
-- optim.SGD(params, opts, 5), StepLR(opt, opts, 5), profiler.start(nil, 5))
-- was dropped unseen, where Torch raises a TypeError.  Every public method
-- of a module, an optimiser and a scheduler, and the functions of
-- ordo.profiler, ordo.progress and ordo.data, raise naming it.
describe("a further positional argument", function()
    local jutil = require "jit.util"
    -- the hooks a class defines for the methods around them (not called by users)
    local HOOKS = {init = true, _describe = true, _has = true, new_state = true, idle_state = true, keep_state = true,
                   state_keys = true, state_shape = true, update = true, lr_at = true, momentum_at = true,
                   phase_at = true, anneal_of = true, height_at = true, child_at = true, better = true, reduce = true,
                   extend = true, extra_repr = true, state_of = true, pack_state = true, check_loaded = true}
    -- those taking any number of arguments: a further one must still raise
    local m0 = nn.Linear(2, 2)
    local x = ordo.ones({2})
    local VARARGS = {
        parameters = function() return m0:parameters(5) end,
        buffers = function() return m0:buffers(5) end,
        num_parameters = function() return m0:num_parameters(5) end,
        eval = function() return m0:eval(5) end,
        register_forward_hook = function() return m0:register_forward_hook(function() end, 5) end,
        register_forward_pre_hook = function() return m0:register_forward_pre_hook(function() end, 5) end,
        step = function()
            return optim.lr_scheduler.StepLR(optim.SGD(nn.Linear(2, 2):parameters(), {lr = 0.1}), {step_size = 1}):step(5)
        end,
        loader = function() return ordo.data.loader(ordo.data.TensorDataset(x), {batch_size = 1}, 5) end,
        Subset = function() return ordo.data.Subset(ordo.data.TensorDataset(x), {1}, 5) end,
        random_split = function() return ordo.data.random_split(ordo.data.TensorDataset(x), {1, 1}, 5) end,
        ConcatDataset = function() return ordo.data.ConcatDataset({ordo.data.TensorDataset(x)}, 5) end,
        TensorDataset = function() return ordo.data.TensorDataset(x, 5) end, -- (any number of tensors)
    }
    -- forward: a module's own, called through m(x, ...), which checks the inputs against it (nn_spec above)
    -- new: a class's constructor, passing its arguments to init (nn.Linear(2, 3, {}, x) raises: nn_spec above)
    local PASS = {forward = true, new = true}

    local function own_params(fn)
        local n = jutil.funcinfo(fn).params
        local last = n > 0 and debug.getlocal(fn, n)
        if last == "extra" then n = n - 1 end
        return n
    end

    local function check(where, name, fn, self)
        if HOOKS[name] or PASS[name] or name:match("^_") then return end -- (_name: internal)
        local fi = jutil.funcinfo(fn)
        if not fi.source then return end -- (a C function)
        if fi.isvararg then
            assert(VARARGS[name], where .. name .. " takes any number of arguments: list it in VARARGS, with a call")
            assert(not pcall(VARARGS[name]), where .. name .. ": accepted a further argument")
            return
        end
        H.refuses_further(where, name, fn, self, own_params(fn))
    end

    -- a class's methods and those it inherits (through __index tables)
    local function walk(where, obj, fresh)
        local seen, cls = {}, getmetatable(obj)
        while cls do
            for name, fn in pairs(cls) do
                if type(fn) == "function" and not seen[name] then
                    seen[name] = true
                    check(where, name, fn, fresh())
                end
            end
            local mt = getmetatable(cls)
            cls = mt and type(mt.__index) == "table" and mt.__index or nil
        end
    end

    local function sgd() return optim.SGD(nn.Linear(2, 2):parameters(), {lr = 0.1}) end

    it("every method of a module, an optimiser and a scheduler raises, naming it", function()
        walk("m:", nn.Linear(2, 2), function() return nn.Linear(2, 2) end)
        walk("opt:", sgd(), sgd)
        walk("seq:", nn.Sequential(nn.Linear(2, 2)), function() return nn.Sequential(nn.Linear(2, 2)) end)
        walk("list:", nn.ModuleList({nn.Linear(2, 2)}), function() return nn.ModuleList({nn.Linear(2, 2)}) end)
        walk("dict:", nn.ModuleDict({a = nn.Linear(2, 2)}), function() return nn.ModuleDict({a = nn.Linear(2, 2)}) end)
        local function plist() return nn.ParameterList({ordo.zeros({2})}) end
        local function pdict() return nn.ParameterDict({a = ordo.zeros({2})}) end
        walk("plist:", plist(), plist)
        walk("pdict:", pdict(), pdict)
        walk("handle:", nn.Linear(2, 2):register_forward_hook(function() end),
             function() return nn.Linear(2, 2):register_forward_hook(function() end) end)
        for _, name in ipairs({"Adam", "NAdam", "Rprop", "LBFGS"}) do
            local function make() return optim[name](nn.Linear(2, 2):parameters()) end
            walk("opt " .. name .. ":", make(), make)
        end
        walk("sched:", optim.lr_scheduler.StepLR(sgd(), {step_size = 1}),
             function() return optim.lr_scheduler.StepLR(sgd(), {step_size = 1}) end)
        walk("plateau:", optim.lr_scheduler.ReduceLROnPlateau(sgd()),
             function() return optim.lr_scheduler.ReduceLROnPlateau(sgd()) end)
    end)

    it("the constructors of optimisers and schedulers, and ordo.profiler, ordo.progress and ordo.data, raise", function()
        local p = nn.Linear(2, 2):parameters()
        -- every optimiser class, so that one added later is checked too
        local n = 0
        for name, cls in pairs(optim) do
            if type(cls) == "table" and type(rawget(cls, "new")) == "function" then
                n = n + 1
                H.raises(function() return optim[name](p, {lr = 0.1}, 5) end,
                         name .. ": takes (params, opts), got a further argument 5")
            end
        end
        assert.is_true(n >= 11, "optimiser classes found: " .. n)
        for name, cls in pairs(optim.lr_scheduler) do
            if type(cls) == "table" and getmetatable(cls) and getmetatable(cls).__call then
                local ok, err = pcall(cls, sgd(), {}, 5)
                assert(not ok and tostring(err):find("takes (optimizer, opts), got a further argument 5", 1, true),
                       name .. ": " .. tostring(err))
            end
        end
        for _, sub in ipairs({"profiler", "progress", "data"}) do
            for name, fn in pairs(ordo[sub]) do
                if type(fn) == "function" then check("ordo." .. sub .. ".", name, fn, nil) end
            end
        end
        H.raises(function() return ordo.progress.bar({total = 3}, {}) end, "progress.bar: takes (opts), got a further argument (a table)")
        -- a dataset's and a progress bar's methods
        local function ds() return ordo.data.TensorDataset(ordo.ones({4, 2}), ordo.ones({4})) end
        for name, fn in pairs(getmetatable(ds()).__index) do
            if type(fn) == "function" then check("ds:", name, fn, ds()) end
        end
        local path = os.tmpname()
        local out = io.open(path, "w")
        local function bar() return ordo.progress.bar({total = 3, out = out}) end
        walk("bar:", bar(), bar)
        out:close()
        os.remove(path)
    end)

    it("nn.init, nn.save and nn.load, autograd.grad and gradcheck, and ordo.engine's functions raise", function()
        -- the internal helpers modules and ops are made with, not for scripts
        local INTERNAL = {needs = true, partial = true, partial_into = true, default = true, default_if_running = true,
                          is_engine = true, key = true, of_pointer = true, on_close = true, run_close_hooks = true,
                          shell_running = true, record = true, list_needs = true, sum_to = true, has_kernel = true,
                          push = true, is_module = true, fan_in_out = true}
        VARARGS.config = function() return ordo.engine.config(5) end
        VARARGS.kind = function() return ordo.engine.kind(5) end
        VARARGS.cpu_workers = function() return ordo.engine.cpu_workers(5) end
        VARARGS.gpu_workers = function() return ordo.engine.gpu_workers(5) end
        VARARGS.pending = function() return ordo.engine.pending(5) end
        VARARGS.wait_for_all = function() return ordo.engine.wait_for_all(5) end
        VARARGS.new_variable = function() return ordo.engine.new_variable(5) end
        PASS.no_grad, PASS.enable_grad = true, true -- (fn, ...): the further arguments go to fn
        -- nn.init's take Torch's keywords as a last options table: (tensor, ...); nils stand for defaults
        for name, fn in pairs(nn.init) do
            if type(fn) == "function" and jutil.funcinfo(fn).isvararg then
                VARARGS[name] = function() return fn(ordo.empty({3, 4}), nil, nil, nil, nil, 4242.5) end
            end
        end
        for _, t in ipairs({{"nn.init.", nn.init}, {"nn.", {save = nn.save, load = nn.load, accuracy = nn.accuracy}},
                            {"autograd.", ordo.autograd}, {"engine.", ordo.engine}}) do
            for name, fn in pairs(t[2]) do
                if type(fn) == "function" and not INTERNAL[name] then check(t[1], name, fn, nil) end
            end
        end
        H.raises(function() return nn.init.kaiming_uniform_(ordo.empty({3, 4}), 0, "fan_in", "relu", 5) end,
                 "init.kaiming_uniform_: takes (tensor, a, mode, nonlinearity), got a further argument 5")
    end)
end)
