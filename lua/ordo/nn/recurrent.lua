-- ordo.nn recurrent layers: RNNCell, LSTMCell, GRUCell (one time step) and
-- RNN, LSTM, GRU (a whole sequence, one or more layers).
--
-- The equations, gate order, initialisation and parameter names are
-- Torch's, so weights carry over by name: a cell's are weight_ih,
-- weight_hh, bias_ih, bias_hh; a sequence module's, layer k from 0,
-- weight_ih_l<k>, weight_hh_l<k>, bias_ih_l<k>, bias_hh_l<k> (and the same
-- with _reverse for the reverse direction), in Torch's order:
--   RNN   h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)    (or relu)
--   LSTM  i, f, g, o = the four quarters of x W_ih^T + b_ih + h W_hh^T + b_hh
--         c' = sigmoid(f) c + sigmoid(i) tanh(g);  h' = sigmoid(o) tanh(c')
--   GRU   r, z = sigmoid of the first two thirds of the sum of both
--         products; n = tanh(x's third + r (h's third));  h' = (1 - z) n + z h
-- every weight and bias drawn from U(-1/sqrt(hidden), 1/sqrt(hidden)).
-- Each is made of tensor ops (linear, views, elementwise), so it runs on
-- every device and autograd differentiates it through time.  A sequence
-- is (T, N, features), or (N, T, features) with batch_first; the state is
-- (layers, N, hidden).  (Before, a sequence module held its layers as
-- cells, children "cell1", "cell1_reverse", "cell2"...: checkpoints with
-- those names still load, renamed, see _old_state_names.)
local util = require "ordo.util"
local tensor = require "ordo.tensor"
local rnn_utils = require "ordo.nn.rnn_utils"

local fail, typename = util.fail, util.typename
local is_tensor, check_same_dtype = tensor.is_tensor, tensor.check_same_dtype
local fmt, sqrt = string.format, math.sqrt
local type, tostring, select, ipairs = type, tostring, select, ipairs

local M = {}

function M.install(nn)
    local F, Module, init = nn.functional, nn.Module, nn.init
    local check_int, opts_of = util.check_positive_int, util.check_opts

    local function shape_str(t) return tensor.shape_str(t:shape()) end

    -- ------------------------------------------------------------ cells

    local CELL_OPTS = {bias = true, dtype = true, device = true, nonlinearity = true}

    -- Registers on self the weights of one layer (one direction) whose
    -- products have `gates` blocks of hidden, named weight_ih..., each
    -- followed by suffix ("" for a cell, "_l0", "_l0_reverse"... for a
    -- sequence module: Torch's names and order).
    local function layer_params(self, suffix, nin, hidden, gates, opts)
        local topts = util.param_opts(opts, self)
        local b = 1 / sqrt(hidden)
        local function param(name, shape)
            self:register_parameter(name .. suffix, init.uniform_(tensor.empty(shape, topts), -b, b))
        end
        param("weight_ih", {gates * hidden, nin})
        param("weight_hh", {gates * hidden, hidden})
        if opts.bias ~= false then
            param("bias_ih", {gates * hidden})
            param("bias_hh", {gates * hidden})
        end
    end

    local function check_bias(fname, opts)
        if opts.bias ~= nil and type(opts.bias) ~= "boolean" then
            fail(fmt("%s: option bias must be a boolean, got %s", fname, typename(opts.bias)))
        end
    end

    local function check_nonlinearity(fname, nl)
        if nl ~= "tanh" and nl ~= "relu" then
            fail(fmt("%s: nonlinearity must be \"tanh\" or \"relu\", got %s", fname, tostring(nl)))
        end
        return nl
    end

    -- The parameters of a cell whose products have `gates` blocks of hidden.
    local function cell_init(self, fname, nin, hidden, gates, opts)
        check_int(fname, "input_size", nin)
        check_int(fname, "hidden_size", hidden)
        opts = opts_of(fname, opts, CELL_OPTS)
        check_bias(fname, opts)
        self.input_size, self.hidden_size = nin, hidden
        layer_params(self, "", nin, hidden, gates, opts)
        return opts
    end

    -- One step of each kind, on x (N, input) and the state (N, hidden),
    -- with the weights wi, wh and biases bi, bh (nil without bias).
    local function rnn_step(x, h, wi, wh, bi, bh, relu)
        local s = F.linear(x, wi, bi) + F.linear(h, wh, bh)
        return relu and s:relu() or s:tanh()
    end
    local function lstm_step(x, h, c, wi, wh, bi, bh)
        local H = h:size(2)
        local g = F.linear(x, wi, bi) + F.linear(h, wh, bh)
        local i, f = g:narrow(2, 1, H):sigmoid(), g:narrow(2, H + 1, H):sigmoid()
        local cand, o = g:narrow(2, 2 * H + 1, H):tanh(), g:narrow(2, 3 * H + 1, H):sigmoid()
        local c2 = f * c + i * cand
        return o * c2:tanh(), c2
    end
    local function gru_step(x, h, wi, wh, bi, bh)
        local H = h:size(2)
        local gi, gh = F.linear(x, wi, bi), F.linear(h, wh, bh)
        local r = (gi:narrow(2, 1, H) + gh:narrow(2, 1, H)):sigmoid()
        local z = (gi:narrow(2, H + 1, H) + gh:narrow(2, H + 1, H)):sigmoid()
        local n = (gi:narrow(2, 2 * H + 1, H) + r * gh:narrow(2, 2 * H + 1, H)):tanh()
        return (1 - z) * n + z * h
    end

    -- x (N, input) or (input), and the state tensors (h, c: N × hidden, or
    -- nil for zeros); returns x as 2-D and whether it was 1-D.
    local function cell_input(self, fname, x, ...)
        if not is_tensor(x) then fail(fmt("%s: input must be a tensor, got %s", fname, typename(x))) end
        local unbatched = x:dim() == 1
        if unbatched then x = x:unsqueeze(1) end
        if x:dim() ~= 2 or x:size(2) ~= self.input_size then
            fail(fmt("%s: input of shape %s, expected (N, %d) or (%d)", fname, shape_str(x), self.input_size,
                     self.input_size))
        end
        -- the weights' dtype (Torch's; mixed, the products promoted: a float64 state out of float32 weights)
        check_same_dtype(fname, x, "weight_ih", self.weight_ih)
        for i = 1, select("#", ...) do
            local s = select(i, ...)
            if s ~= nil then
                if not is_tensor(s) then fail(fmt("%s: state %d must be a tensor, got %s", fname, i, typename(s))) end
                local want = unbatched and {self.hidden_size} or {x:size(1), self.hidden_size}
                if tensor.shape_str(s:shape()) ~= tensor.shape_str(want) then
                    fail(fmt("%s: state %d of shape %s, expected %s", fname, i, shape_str(s), tensor.shape_str(want)))
                end
                check_same_dtype(fname, x, "state " .. i, s)
            end
        end
        return x, unbatched
    end

    -- Zeros of (n, hidden) like x (n: x's first size unless given).
    local function zeros_state(self, x, n)
        return tensor.zeros({n or x:size(1), self.hidden_size}, tensor.like(x))
    end

    local function as_2d(s, unbatched) return (s ~= nil and unbatched) and s:unsqueeze(1) or s end
    local function as_given(s, unbatched) return unbatched and s:squeeze(1) or s end

    -- RNNCell(input_size, hidden_size [, {nonlinearity = "tanh" | "relu", bias, dtype, device}])
    local RNNCell = Module:extend("RNNCell")
    nn.RNNCell = RNNCell
    function RNNCell:init(nin, hidden, opts)
        opts = cell_init(self, "RNNCell", nin, hidden, 1, opts)
        self.nonlinearity = check_nonlinearity("RNNCell", opts.nonlinearity or "tanh")
    end
    -- forward(x [, h]) -> h'
    function RNNCell:forward(x, h)
        local unbatched
        x, unbatched = cell_input(self, "RNNCell", x, h)
        h = as_2d(h, unbatched) or zeros_state(self, x)
        return as_given(rnn_step(x, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh,
                                 self.nonlinearity == "relu"), unbatched)
    end
    local function no_bias(self) return self.bias_ih == nil and ", no bias" or "" end
    function RNNCell:extra_repr()
        return fmt("%d -> %d, %s%s", self.input_size, self.hidden_size, self.nonlinearity, no_bias(self))
    end

    -- LSTMCell(input_size, hidden_size [, {bias, dtype, device}])
    local LSTMCell = Module:extend("LSTMCell")
    nn.LSTMCell = LSTMCell
    function LSTMCell:init(nin, hidden, opts)
        opts = opts_of("LSTMCell", opts, {bias = true, dtype = true, device = true})
        cell_init(self, "LSTMCell", nin, hidden, 4, opts)
    end
    -- forward(x [, h, c]) -> h', c'
    function LSTMCell:forward(x, h, c)
        local unbatched
        x, unbatched = cell_input(self, "LSTMCell", x, h, c)
        h = as_2d(h, unbatched) or zeros_state(self, x)
        c = as_2d(c, unbatched) or zeros_state(self, x)
        local h2, c2 = lstm_step(x, h, c, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        return as_given(h2, unbatched), as_given(c2, unbatched)
    end
    function LSTMCell:extra_repr() return fmt("%d -> %d%s", self.input_size, self.hidden_size, no_bias(self)) end

    -- GRUCell(input_size, hidden_size [, {bias, dtype, device}])
    local GRUCell = Module:extend("GRUCell")
    nn.GRUCell = GRUCell
    function GRUCell:init(nin, hidden, opts)
        opts = opts_of("GRUCell", opts, {bias = true, dtype = true, device = true})
        cell_init(self, "GRUCell", nin, hidden, 3, opts)
    end
    -- forward(x [, h]) -> h'
    function GRUCell:forward(x, h)
        local unbatched
        x, unbatched = cell_input(self, "GRUCell", x, h)
        h = as_2d(h, unbatched) or zeros_state(self, x)
        return as_given(gru_step(x, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh), unbatched)
    end
    function GRUCell:extra_repr() return fmt("%d -> %d%s", self.input_size, self.hidden_size, no_bias(self)) end

    -- ------------------------------------------------------------ sequences

    local SEQ_OPTS = {num_layers = true, batch_first = true, bias = true, dtype = true, device = true,
                      nonlinearity = true, bidirectional = true, dropout = true}

    -- The suffix of the parameters of layer l (from 1), direction d (2:
    -- reverse): Torch's "_l0", "_l0_reverse", "_l1"...
    local function layer_suffix(l, d) return "_l" .. (l - 1) .. (d == 2 and "_reverse" or "") end
    local PARAM_NAMES = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"}

    -- A sequence module of num_layers layers (two a layer, forward and
    -- reverse, when bidirectional), each with the weights of a cell of
    -- `gates` blocks, under Torch's names; kind: "rnn", "lstm" (the state
    -- is (h, c)) or "gru".
    local function sequence(name, gates, kind)
        local lstm = kind == "lstm"
        local cls = Module:extend(name)
        nn[name] = cls
        function cls:init(nin, hidden, opts)
            check_int(name, "input_size", nin)
            check_int(name, "hidden_size", hidden)
            opts = opts_of(name, opts, SEQ_OPTS)
            if opts.nonlinearity ~= nil and kind ~= "rnn" then
                fail(fmt("%s: unknown option 'nonlinearity' (RNN only)", name))
            end
            local layers = opts.num_layers or 1
            check_int(name, "num_layers", layers)
            local p = opts.dropout or 0
            if type(p) ~= "number" or not (p >= 0 and p < 1) then -- (NaN too)
                fail(fmt("%s: dropout must be a number in [0, 1), got %s", name, tostring(p)))
            end
            -- (batch_first = 1 was taken as false: the batch read as the time steps)
            for _, k in ipairs({"bidirectional", "batch_first"}) do
                if opts[k] ~= nil and type(opts[k]) ~= "boolean" then
                    fail(fmt("%s: %s must be a boolean, got %s", name, k, typename(opts[k])))
                end
            end
            check_bias(name, opts)
            if kind == "rnn" then self.nonlinearity = check_nonlinearity(name, opts.nonlinearity or "tanh") end
            self.input_size, self.hidden_size, self.num_layers = nin, hidden, layers
            self.batch_first, self.dropout = opts.batch_first == true, p
            self.directions = opts.bidirectional and 2 or 1
            self.bidirectional = self.directions == 2 -- (Torch's field: m.bidirectional and 2 or 1 was 1, nil)
            for l = 1, layers do
                local width = l == 1 and nin or hidden * self.directions
                for d = 1, self.directions do layer_params(self, layer_suffix(l, d), width, hidden, gates, opts) end
            end
        end
        -- The names this module's parameters had before they were Torch's
        -- ({old = new}, relative to the module): "cell1.weight_ih" was
        -- "weight_ih_l0", "cell2_reverse.bias_hh" "bias_hh_l1_reverse".
        -- load_state_dict and load take checkpoints written with them.
        function cls:_old_state_names()
            local r = {}
            for l = 1, self.num_layers do
                for d = 1, self.directions do
                    local cell = "cell" .. l .. (d == 2 and "_reverse" or "") .. "."
                    for _, n in ipairs(PARAM_NAMES) do r[cell .. n] = n .. layer_suffix(l, d) end
                end
            end
            return r
        end
        -- The state given for layer l, direction d (row (l-1)·D + d of the
        -- (layers·D, N, hidden) tensor, Torch's order).
        local function layer_state(self, s, l, d, what, n)
            if s == nil then return nil end
            local rows = self.num_layers * self.directions
            if not is_tensor(s) or s:dim() ~= 3 or s:size(1) ~= rows or s:size(2) ~= n
                or s:size(3) ~= self.hidden_size then
                fail(fmt("%s: %s must be a tensor of shape %dx%dx%d (layers%s, batch, hidden), got %s", name, what,
                         rows, n, self.hidden_size, self.directions == 2 and " x 2 directions" or "",
                         is_tensor(s) and shape_str(s) or typename(s)))
            end
            return s:select(1, (l - 1) * self.directions + d)
        end
        -- One direction of one layer (l, d) over the steps of seq: the
        -- outputs (a new list) and the last state (h, c: nil for zeros).
        -- keep: for a packed input, per step the uint8 (N, 1) mask of the
        -- sequences not yet ended (nil: all of them): an ended one keeps its
        -- state and outputs zeros, as Torch's packed layout computes.
        local function run(self, l, d, seq, h, c, keep)
            local sfx = layer_suffix(l, d)
            local wi, wh = self["weight_ih" .. sfx], self["weight_hh" .. sfx]
            local bi, bh = self["bias_ih" .. sfx], self["bias_hh" .. sfx]
            local relu = self.nonlinearity == "relu"
            local T, out = #seq, {}
            if T > 0 then
                h = h or zeros_state(self, seq[1])
                if lstm then c = c or zeros_state(self, seq[1]) end
            end
            for k = 1, T do
                local t = d == 2 and T - k + 1 or k
                local x = seq[t]
                local m = keep and keep.running[t]
                local h1, c1
                if lstm then h1, c1 = lstm_step(x, h, c, wi, wh, bi, bh)
                elseif kind == "gru" then h1 = gru_step(x, h, wi, wh, bi, bh)
                else h1 = rnn_step(x, h, wi, wh, bi, bh, relu) end
                if m then
                    h, out[t] = tensor.where(m, h1, h), h1:masked_fill(keep.ended[t], 0)
                    if lstm then c = tensor.where(m, c1, c) end
                else
                    h, c, out[t] = h1, c1, h1
                end
            end
            return out, h, c
        end
        -- forward(x [, h0] [, c0]) -> output (T, N, D·hidden; N first with
        -- batch_first), h_n (layers·D, N, hidden) [, c_n]
        -- The state given with an unbatched input, (layers·D, hidden), as a batch of one.
        local function batch_of_one(self, s, what)
            if s == nil then return nil end
            local rows = self.num_layers * self.directions
            if not is_tensor(s) or s:dim() ~= 2 or s:size(1) ~= rows or s:size(2) ~= self.hidden_size then
                fail(fmt("%s: %s for an unbatched input must be a tensor of shape %dx%d (layers%s, hidden), got %s",
                         name, what, rows, self.hidden_size, self.directions == 2 and " x 2 directions" or "",
                         is_tensor(s) and shape_str(s) or typename(s)))
            end
            return s:unsqueeze(2)
        end
        -- An unbatched sequence (T, features), Torch's, is a batch of one:
        -- its states (layers·D, hidden) and results come without the batch dim.
        local function forward(self, x, h0, c0)
            -- a PackedSequence (nn.utils.rnn): its padded batch, time first
            -- (batch_first does not apply, as in Torch), and per step the
            -- sequences still running
            local packed, keep = rnn_utils.is_packed(x) and x, nil
            if packed then
                x = packed.padded
                if x:dim() ~= 3 or x:size(3) ~= self.input_size then
                    fail(fmt("%s: the PackedSequence's elements must have %d features, got a padded batch of shape %s",
                             name, self.input_size, shape_str(x)))
                end
                local T = x:size(1)
                local short = false
                for _, len in ipairs(packed.lengths) do if len < T then short = true end end
                if short then
                    local ended = rnn_utils._pad_mask(x, packed.lengths)
                    local running = ended:logical_not()
                    keep = {running = {}, ended = {}}
                    for t = 1, T do
                        keep.running[t] = running:select(1, t):unsqueeze(2)
                        keep.ended[t] = ended:select(1, t):unsqueeze(2)
                    end
                end
            elseif is_tensor(x) and x:dim() == 2 and x:size(2) == self.input_size then
                local h1, c1 = batch_of_one(self, h0, "h0"), batch_of_one(self, c0, "c0")
                local bf = self.batch_first
                local out, hn, cn = forward(self, bf and x:unsqueeze(1) or x:unsqueeze(2), h1, c1)
                out, hn = out:squeeze(bf and 1 or 2), hn:squeeze(2)
                if lstm then return out, hn, cn:squeeze(2) end
                return out, hn
            end
            if not is_tensor(x) or x:dim() ~= 3 or x:size(3) ~= self.input_size then
                fail(fmt("%s: input must be a tensor of shape %s x %d (or T x %d unbatched), got %s", name,
                         self.batch_first and "N x T" or "T x N", self.input_size, self.input_size,
                         is_tensor(x) and shape_str(x) or typename(x)))
            end
            -- one dtype for the input, the weights and the states given
            check_same_dtype(name, x, "weight_ih_l0", self.weight_ih_l0)
            if is_tensor(h0) then check_same_dtype(name, x, "h0", h0) end
            if is_tensor(c0) then check_same_dtype(name, x, "c0", c0) end
            if self.batch_first and not packed then x = x:transpose(1, 2) end
            local T, N = x:size(1), x:size(2)
            local hs, cs = {}, {}
            local seq = {}
            for t = 1, T do seq[t] = x:select(1, t) end
            for l = 1, self.num_layers do
                local outs = {}
                for d = 1, self.directions do
                    local h = layer_state(self, h0, l, d, "h0", N)
                    local c = lstm and layer_state(self, c0, l, d, "c0", N) or nil
                    local o
                    o, h, c = run(self, l, d, seq, h, c, keep)
                    outs[d] = o
                    local k = (l - 1) * self.directions + d
                    hs[k], cs[k] = h or zeros_state(self, x, N), c or (lstm and zeros_state(self, x, N)) or nil
                end
                for t = 1, T do
                    seq[t] = self.directions == 2 and tensor.cat({outs[1][t], outs[2][t]}, 2) or outs[1][t]
                    if self.dropout > 0 and self.training and l < self.num_layers then
                        seq[t] = F.dropout(seq[t], self.dropout, true)
                    end
                end
            end
            local out = T > 0 and tensor.stack(seq, 1)
                or tensor.zeros({0, N, self.hidden_size * self.directions}, tensor.like(x))
            if packed then out = rnn_utils._repack(packed, out)
            elseif self.batch_first then out = out:transpose(1, 2) end
            local hn = tensor.stack(hs, 1)
            if lstm then return out, hn, tensor.stack(cs, 1) end
            return out, hn
        end
        -- (RNN and GRU take no c0: m(x, h0, c) raises, as a call with too many inputs)
        if lstm then
            cls.forward = forward
        else
            function cls:forward(x, h0) return forward(self, x, h0) end
        end
        function cls:extra_repr()
            return fmt("%d -> %d, %d layer%s%s%s%s%s%s", self.input_size, self.hidden_size, self.num_layers,
                       self.num_layers == 1 and "" or "s", self.nonlinearity == "relu" and ", relu" or "",
                       self.bias_ih_l0 == nil and ", no bias" or "", self.directions == 2 and ", bidirectional" or "",
                       self.dropout > 0 and fmt(", dropout %g", self.dropout) or "",
                       self.batch_first and ", batch_first" or "")
        end
        return cls
    end
    sequence("RNN", 1, "rnn")
    sequence("LSTM", 4, "lstm")
    sequence("GRU", 3, "gru")
end

return M
