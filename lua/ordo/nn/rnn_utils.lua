-- ordo.nn.utils.rnn: batches of sequences of different lengths, as Torch's
-- torch.nn.utils.rnn.
--
--   local x = rnn.pad_sequence({a, b, c}, {batch_first = true})   -- N x T x F, zeros after each end
--   local packed = rnn.pack_padded_sequence(x, {5, 3, 2}, {batch_first = true})
--   local out, h_n = gru(packed)            -- RNN, LSTM, GRU take it: each sequence
--                                           -- stops at its own length
--   local y, lengths = rnn.pad_packed_sequence(out, {batch_first = true})
--
-- A PackedSequence holds the padded batch time first (T x N x ...) and the
-- lengths; the recurrent modules step every sequence but keep a finished
-- one's state as it was at its last element (h_n is that state, the
-- reverse direction starts at each sequence's own end) and give zeros as
-- its outputs after it -- what Torch's packed layout computes.  Its `data`
-- (the elements of every step, longest sequences first: sum(lengths) x
-- ...) and `batch_sizes` are Torch's, for reading.
local util = require "ordo.util"
local tensor = require "ordo.tensor"

local fail, typename = util.fail, util.typename
local is_tensor = tensor.is_tensor
local fmt = string.format
local type, ipairs, pairs, select, getmetatable, setmetatable, rawget, rawset, tostring =
    type, ipairs, pairs, select, getmetatable, setmetatable, rawget, rawset, tostring

local M = {}

local PackedSequence = {}
M.PackedSequence = PackedSequence

local function is_packed(x) return type(x) == "table" and getmetatable(x) == PackedSequence end
M.is_packed = is_packed

local function shape_str(t) return tensor.shape_str(t:shape()) end

-- Torch's packed data, made when first read: step t's elements of the
-- sequences longer than t - 1, longest first.
local function packed_data(p)
    local pieces, order = {}, rawget(p, "sorted_indices") or tensor.arange(1, p.padded:size(2) + 1,
                                                                          {dtype = "int64"})
    order = order:to(p.padded:device())
    local bs = p.batch_sizes:totable()
    for t, n in ipairs(bs) do pieces[t] = p.padded:select(1, t):index_select(1, order:narrow(1, 1, n)) end
    return tensor.cat(pieces, 1)
end

PackedSequence.__index = function(p, k)
    if k == "data" then
        local d = packed_data(p)
        rawset(p, "data", d)
        return d
    end
    return PackedSequence[k]
end
PackedSequence.__name = "ordo.nn.utils.rnn.PackedSequence"
PackedSequence.__tostring = function(p)
    return fmt("PackedSequence(%d sequences of lengths %s, padded %s)", #p.lengths,
               table.concat(p.lengths, ", "), shape_str(p.padded))
end

-- The lengths, from 1..T each: a list of integers or a 1-dim integer tensor.
local function lengths_of(fname, lengths, N, T)
    local list
    if is_tensor(lengths) then
        local dt = lengths:dtype()
        if lengths:dim() ~= 1 or (dt ~= "int64" and dt ~= "int32") then
            fail(fmt("%s: lengths must be a list of integers or a 1-dim int64 tensor, got %s of shape %s", fname, dt,
                     shape_str(lengths)))
        end
        list = lengths:totable()
    elseif type(lengths) == "table" and getmetatable(lengths) == nil then
        list = {}
        local count = 0
        for k in pairs(lengths) do if type(k) == "number" and k > count then count = k end end
        for i = 1, count do list[i] = lengths[i] end
    else
        fail(fmt("%s: lengths must be a list of integers or a 1-dim int64 tensor, got %s", fname, typename(lengths)))
    end
    local count = 0
    for k in pairs(list) do if k > count then count = k end end
    if count ~= N then
        fail(fmt("%s: %d lengths for a batch of %d sequences", fname, count, N))
    end
    for i = 1, count do
        local v = list[i]
        if not util.is_int(v) or v < 1 or v > T then
            fail(fmt("%s: length %d is %s, expected an integer in 1..%d (every sequence has at least one " ..
                     "element, and at most the padded length)", fname, i, tostring(v), T))
        end
    end
    return list
end

-- Positional booleans, as Torch's, or one options table.
local function opts_of(fname, known, names, ...)
    local a = ...
    if select("#", ...) == 1 and type(a) == "table" and getmetatable(a) == nil then
        return util.check_opts(fname, a, known)
    end
    local o = {}
    for i = 1, select("#", ...) do
        local v = select(i, ...)
        if i > #names then
            if v ~= nil then fail(fmt("%s: too many arguments (an options table {%s} or Torch's positional ones)", fname,
                                      table.concat(names, ", "))) end
        else
            o[names[i]] = v
        end
    end
    return o
end

local function check_bool(fname, name, v)
    if v ~= nil and type(v) ~= "boolean" then fail(fmt("%s: %s must be true or false, got %s", fname, name, typename(v))) end
    return v
end

local function make(padded, lengths, sorted_indices, unsorted_indices)
    local T = 0
    for _, v in ipairs(lengths) do if v > T then T = v end end
    local bs = {}
    for t = 1, T do
        local n = 0
        for _, v in ipairs(lengths) do if v >= t then n = n + 1 end end
        bs[t] = n
    end
    return setmetatable({padded = padded, lengths = lengths, batch_sizes = tensor.tensor(bs, {dtype = "int64"}),
                         sorted_indices = sorted_indices, unsorted_indices = unsorted_indices}, PackedSequence)
end

-- pack_padded_sequence(input, lengths [, batch_first [, enforce_sorted]]),
-- or (input, lengths, {batch_first = false, enforce_sorted = true}):
-- input T x N x ... (N x T x ... with batch_first), lengths one a
-- sequence, in 1..T; enforce_sorted: they must not increase (false: any
-- order; the results keep the batch's order).
function M.pack_padded_sequence(input, lengths, ...)
    local fname = "pack_padded_sequence"
    local o = opts_of(fname, {batch_first = true, enforce_sorted = true}, {"batch_first", "enforce_sorted"}, ...)
    local bf = check_bool(fname, "batch_first", o.batch_first)
    local enforce = check_bool(fname, "enforce_sorted", o.enforce_sorted) ~= false
    if not is_tensor(input) or input:dim() < 2 then
        fail(fmt("%s: input must be a tensor of at least 2 dims (%s x ...), got %s", fname, bf and "N x T" or "T x N",
                 is_tensor(input) and shape_str(input) or typename(input)))
    end
    local x = bf and input:transpose(1, 2) or input
    local T, N = x:size(1), x:size(2)
    local lens = lengths_of(fname, lengths, N, T)
    local sorted_idx, unsorted_idx
    if enforce then
        for i = 2, N do
            if lens[i] > lens[i - 1] then
                fail(fmt("%s: lengths must not increase (length %d is %d after %d): sort the batch by length, " ..
                         "longest first, or give enforce_sorted = false", fname, i, lens[i], lens[i - 1]))
            end
        end
    else
        local idx = {}
        for i = 1, N do idx[i] = i end
        table.sort(idx, function(a, b) if lens[a] ~= lens[b] then return lens[a] > lens[b] end return a < b end)
        local inv = {}
        for k, i in ipairs(idx) do inv[i] = k end
        sorted_idx, unsorted_idx = tensor.tensor(idx, {dtype = "int64"}), tensor.tensor(inv, {dtype = "int64"})
    end
    local maxlen = 0
    for _, v in ipairs(lens) do if v > maxlen then maxlen = v end end
    return make(x:narrow(1, 1, maxlen), lens, sorted_idx, unsorted_idx)
end

-- The uint8 mask T x N of the steps past each sequence's end, on padded's device.
local function pad_mask(padded, lengths)
    local T, N = padded:size(1), #lengths
    local steps = tensor.arange(1, T + 1, {dtype = "int64"}):view(T, 1)
    return steps:gt(tensor.tensor(lengths, {dtype = "int64"}):view(1, N)):to(padded:device())
end
M._pad_mask = pad_mask

-- pad_packed_sequence(sequence [, {batch_first = false, padding_value = 0,
-- total_length}]) (or Torch's positional arguments): the padded batch, T x
-- N x ... (N x T x ... with batch_first; T the longest length, or
-- total_length), padding_value after each sequence's end, and the lengths
-- (int64, in the batch's order).
function M.pad_packed_sequence(sequence, ...)
    local fname = "pad_packed_sequence"
    local o = opts_of(fname, {batch_first = true, padding_value = true, total_length = true},
                      {"batch_first", "padding_value", "total_length"}, ...)
    if not is_packed(sequence) then
        fail(fmt("%s: expected a PackedSequence (pack_padded_sequence, or an RNN's output for one), got %s", fname,
                 typename(sequence)))
    end
    local bf = check_bool(fname, "batch_first", o.batch_first)
    local value = o.padding_value == nil and 0 or o.padding_value
    if type(value) ~= "number" then fail(fmt("%s: padding_value must be a number, got %s", fname, typename(value))) end
    local x = sequence.padded
    local T = x:size(1)
    local total = o.total_length
    if total ~= nil then
        if not util.is_int(total) or total < T then
            fail(fmt("%s: total_length must be an integer >= the longest length %d, got %s", fname, T, tostring(total)))
        end
    end
    local m = pad_mask(x, sequence.lengths)
    for _ = 3, x:dim() do m = m:unsqueeze(-1) end
    local out = x:masked_fill(m, value)
    if total and total > T then
        local s = out:shape()
        s[1] = total - T
        out = tensor.cat({out, tensor.full(s, value, tensor.like(out))}, 1)
    end
    if bf then out = out:transpose(1, 2) end
    return out, tensor.tensor(sequence.lengths, {dtype = "int64"})
end

-- The PackedSequence of an RNN's output over a packed input p (out: T x N x ...).
function M._repack(p, out)
    return make(out, p.lengths, rawget(p, "sorted_indices"), rawget(p, "unsorted_indices"))
end

-- pad_sequence(sequences [, {batch_first = false, padding_value = 0,
-- padding_side = "right"}]) (or Torch's positional arguments): a list of
-- tensors L_i x ... (the same trailing dims, dtype and device) as one
-- T x N x ... tensor (N x T x ... with batch_first), T the longest,
-- padding_value after each (before, with padding_side = "left").
function M.pad_sequence(sequences, ...)
    local fname = "pad_sequence"
    local o = opts_of(fname, {batch_first = true, padding_value = true, padding_side = true},
                      {"batch_first", "padding_value", "padding_side"}, ...)
    local bf = check_bool(fname, "batch_first", o.batch_first)
    local value = o.padding_value == nil and 0 or o.padding_value
    if type(value) ~= "number" then fail(fmt("%s: padding_value must be a number, got %s", fname, typename(value))) end
    local side = o.padding_side or "right"
    if side ~= "right" and side ~= "left" then
        fail(fmt("%s: padding_side must be \"right\" or \"left\", got %s", fname, tostring(side)))
    end
    if is_tensor(sequences) or type(sequences) ~= "table" or getmetatable(sequences) ~= nil or #sequences == 0 then
        fail(fmt("%s: expected a non-empty list of tensors, got %s", fname,
                 (type(sequences) == "table" and not is_tensor(sequences) and getmetatable(sequences) == nil)
                     and "an empty list" or typename(sequences)))
    end
    local count = 0 -- (ipairs would stop at a hole, leaving the sequences after it out)
    for k in pairs(sequences) do if type(k) == "number" and k > count then count = k end end
    local first = sequences[1]
    local T = 0
    for i = 1, count do
        local s = sequences[i]
        if not is_tensor(s) or s:dim() < 1 then
            fail(fmt("%s: sequence %d must be a tensor of at least 1 dim (length x ...), got %s", fname, i,
                     is_tensor(s) and "a 0-dim tensor" or typename(s)))
        end
        local a, b = s:shape(), first:shape()
        local same = #a == #b and s:dtype() == first:dtype() and s:device() == first:device()
        for k = 2, #a do if a[k] ~= b[k] then same = false end end
        if not same then
            fail(fmt("%s: sequence %d is %s of shape %s on %s, sequence 1 %s of shape %s on %s: all must have the " ..
                     "same dims after the first, dtype and device", fname, i, s:dtype(), shape_str(s),
                     tostring(s:device()), first:dtype(), shape_str(first), tostring(first:device())))
        end
        if s:size(1) > T then T = s:size(1) end
    end
    local rows = {}
    for i = 1, count do
        local s = sequences[i]
        local L = s:size(1)
        if L < T then
            local sh = s:shape()
            sh[1] = T - L
            local pad = tensor.full(sh, value, tensor.like(s))
            s = tensor.cat(side == "right" and {s, pad} or {pad, s}, 1)
        end
        rows[i] = s
    end
    return tensor.stack(rows, bf and 1 or 2)
end

-- pack_sequence(sequences [, enforce_sorted | {enforce_sorted = true}]):
-- pad_sequence, then pack_padded_sequence with their lengths.
function M.pack_sequence(sequences, ...)
    local fname = "pack_sequence"
    local o = opts_of(fname, {enforce_sorted = true}, {"enforce_sorted"}, ...)
    local padded = M.pad_sequence(sequences)
    local lens = {}
    for i = 1, padded:size(2) do lens[i] = sequences[i]:size(1) end
    return M.pack_padded_sequence(padded, lens, {enforce_sorted = o.enforce_sorted})
end

return M
