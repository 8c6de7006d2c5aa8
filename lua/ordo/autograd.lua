-- ordo.autograd: reverse-mode automatic differentiation over tensor ops.
--
--   local w = ordo.randn({3, 2}):requires_grad()
--   local loss = (x:matmul(w) - y):pow(2):mean()
--   loss:backward()            -- pushes the backward ops, returns at once
--   print(w.grad)              -- waits for them like any other tensor
--
-- The tape is the graph itself: an op whose inputs need a gradient gives
-- its result a node (the op's name, its inputs, a backward function, the
-- tensors it saved).  backward() walks the nodes from the output in reverse
-- topological order and calls each backward function, whose work is plain
-- tensor ops: pushes, so the backward pass runs on the engine's workers and
-- overlaps with whatever else is queued, and Lua returns before it is done.
--
-- Rules:
--  * Only float tensors (float32, float64) can require a gradient.
--  * Gradients accumulate: leaf.grad += each backward's contribution, until
--    the user (or an optimiser's zero_grad) clears it.
--  * backward() frees the graph it walked (the saved tensors go back to
--    the allocator); a second backward through it raises, unless the first
--    one was given {retain_graph = true}.
--  * In-place ops may not touch a tensor that requires a gradient, nor take
--    one as input, while grad mode is on (ordo.no_grad turns it off): the
--    gradient would be wrong or lost.  Changing in place a tensor that a
--    node saved (e.g. mul saves its inputs) is caught at backward time
--    through the storage's count of pushed writes.
--  * Backward ops run in no-grad mode: no gradients of gradients.
--
-- For op authors (nn, new kernels): autograd.record(name, out, inputs,
-- backward, saved) attaches a node when needed; backward(g) returns one
-- gradient per input (nil where none), each of that input's shape.
local cdef = require "ordo.cdef"
local util = require "ordo.util"
local extra_arg = util.extra_arg -- a further positional argument: an error naming it
local tensor = require "ordo.tensor"

local ffi, C = cdef.ffi, cdef.C
local fail, typename = util.fail, util.typename
local Tensor = tensor.Tensor
local is_tensor, shape_of = tensor.is_tensor, tensor.shape_of
local check_self = tensor.check_self
local shape_str = tensor.shape_str_of
local fmt, concat = string.format, table.concat
local getmetatable, type, tonumber, select, pcall, unpack = getmetatable, type, tonumber, select, pcall, unpack

local M = {}

-- ---------------------------------------------------------------- grad mode

local enabled = true

function M.is_enabled(extra)
    if extra ~= nil then extra_arg("is_grad_enabled", "()", extra) end
    return enabled
end

-- Sets grad mode (a boolean: nil or a typo must not turn it off for the
-- rest of the program); returns the previous one.  ordo.set_grad_enabled.
function M.set_enabled(on, extra)
    if extra ~= nil then extra_arg("set_grad_enabled", "(on)", extra) end
    if type(on) ~= "boolean" then fail("set_grad_enabled: expected a boolean, got " .. typename(on)) end
    local old = enabled
    enabled = on
    return old
end

-- fn's results passed on as they are, trailing nils included (a table
-- of them lost those: no_grad(f) gave 1 value where f returned 1, nil)
local function restore(old, ok, ...)
    enabled = old
    if not ok then error((...), 0) end
    return ...
end

local function with_mode(on, fname, fn, ...)
    if type(fn) ~= "function" then fail(fmt("%s: expected a function, got %s", fname, typename(fn))) end
    local old = enabled
    enabled = on
    return restore(old, pcall(fn, ...))
end

-- ordo.no_grad(fn, ...): calls fn(...) with grad mode off (no nodes are
-- recorded) and returns its results; the mode is restored on errors too.
function M.no_grad(fn, ...) return with_mode(false, "no_grad", fn, ...) end
function M.enable_grad(fn, ...) return with_mode(true, "enable_grad", fn, ...) end

-- ---------------------------------------------------------------- recording

local FLOAT = {[cdef.F32] = true, [cdef.F64] = true}

-- The count of nodes recorded: a node's serial says whether it was made
-- before a tensor it takes was detached in place (detach_).
local serial = 0

local function writes_of(t) return t._c.storage.writes end

-- True when grad mode is on and one of the values (tensors or not) needs a
-- gradient: the cheap test wrappers make before building a node.  At most
-- three: a fourth would be ignored, and its gradient lost without a word,
-- so it raises (list_needs takes any number).
local function needs(a, b, c, d)
    if d ~= nil then fail("needs: takes at most three values, got a fourth; use autograd.list_needs({...})") end
    if not enabled then return false end
    return (type(a) == "table" and a._rg == true) or (type(b) == "table" and b._rg == true)
        or (type(c) == "table" and c._rg == true)
end
M.needs = needs

local function list_needs(list)
    if type(list) ~= "table" then fail("list_needs: expected a list, got " .. typename(list)) end
    if not enabled then return false end
    for i = 1, #list do
        local t = list[i]
        if type(t) == "table" and t._rg == true then return true end
    end
    return false
end
M.list_needs = list_needs

-- Attaches a node to out when grad mode is on and an input needs a gradient.
-- inputs: list (holes allowed for non-tensor arguments; give n = count);
-- backward(g, node): returns one gradient per input -- or, for an op of
-- many inputs (Lua returns at most a few thousand values), one plain table
-- holding them (holes for inputs without one); saved: tensors the
-- backward will read, checked for in-place changes.  Returns out.
function M.record(name, out, inputs, backward, saved)
    if type(inputs) ~= "table" or type(backward) ~= "function" then
        fail(fmt("record: expected a list of inputs and a backward function, got %s and %s", typename(inputs),
                 typename(backward)))
    end
    -- the name goes into backward's errors, out gets the node: both are
    -- checked here, where a mistake is the op author's, not at backward
    if type(name) ~= "string" then fail("record: the op's name must be a string, got " .. typename(name)) end
    if not is_tensor(out) then fail("record: out must be a tensor, got " .. typename(out)) end
    if saved ~= nil and (type(saved) ~= "table" or is_tensor(saved)) then
        fail("record: saved must be a list of tensors, got " .. typename(saved))
    end
    if not enabled then return out end
    local n = inputs.n or #inputs
    local any = false
    for i = 1, n do
        local t = inputs[i]
        if type(t) == "table" and t._rg == true then any = true break end
    end
    if not any then return out end
    if not FLOAT[out._c.dtype] then return out end -- integer results carry no gradient
    -- out an input itself (an op that returns its input as it is) or another leaf that requires a
    -- gradient: the node made it a non-leaf (into a loop, for an input), which never got its .grad
    -- again.  (A result of the graph may take a new node: ops made of others name themselves so.)
    local which
    for i = 1, n do if rawequal(inputs[i], out) then which = i break end end
    if which or (out._rg and out._node == nil) then
        fail(fmt("record: out of %s %s; give a new tensor (computed under ordo.no_grad; the input as it is: " ..
                 "t:view_as(t))", name, which and fmt("is its input %d itself", which)
                 or "is a leaf that requires a gradient"))
    end
    serial = serial + 1
    local node = {name = name, inputs = inputs, n = n, backward = backward, serial = serial}
    if saved then
        local v = {}
        for i = 1, #saved do
            local s = saved[i]
            if not is_tensor(s) then fail(fmt("record: saved[%d] must be a tensor, got %s", i, typename(s))) end
            v[i] = writes_of(s)
        end
        node.saved, node.versions = saved, v
    end
    out._rg = true
    out._node = node
    return out
end

-- ---------------------------------------------------------------- helpers for backward functions

-- g summed over the dims broadcasting added or stretched, back to shape.
function M.sum_to(g, shape)
    tensor.check_tensor("sum_to", "the gradient", g)
    if type(shape) ~= "table" then fail("sum_to: expected a shape table, got " .. typename(shape)) end
    local gs = shape_of(g)
    local n, m = #gs, #shape
    if n == m then
        local same = true
        for i = 1, n do if gs[i] ~= shape[i] then same = false break end end
        if same then return g end
    end
    -- only what broadcasting makes can be undone: shape, padded with
    -- leading 1s, has g's size or 1 in every dim
    local ok = m <= n
    for i = 1, m do
        local s = shape[i]
        if not ok then break end
        if type(s) ~= "number" or (s ~= 1 and s ~= gs[n - m + i]) then ok = false end
    end
    if not ok then
        fail(fmt("sum_to: a gradient of shape %s cannot be summed to shape %s (not a shape it broadcasts from)",
                 shape_str(g), tensor.shape_str(shape)))
    end
    local r = g
    -- leading dims broadcasting added
    for _ = 1, n - m do r = r:sum(1) end
    for i = 1, m do
        if shape[i] == 1 and gs[n - m + i] ~= 1 then r = r:sum(i, true) end
    end
    return r
end

-- ---------------------------------------------------------------- tensor methods

-- t:requires_grad([flag]): marks a leaf tensor as one whose gradient
-- backward() computes (flag defaults to true); returns t.
-- (requires_grad_, Torch's name, the same, its errors under that name)
local function set_requires_grad(fname, self, flag)
    check_self(fname, self)
    if flag == nil then flag = true end
    if type(flag) ~= "boolean" then fail(fname .. ": expected a boolean, got " .. typename(flag)) end
    if flag and not FLOAT[self._c.dtype] then
        fail(fmt("%s: only float tensors (float32, float64) can require a gradient, got %s", fname, self:dtype()))
    end
    if not flag and self._node then
        fail(fname .. ": a tensor computed from tensors that require a gradient cannot stop requiring it; use " ..
             "t:detach()")
    end
    self._rg = flag or nil
    return self
end
function Tensor:requires_grad(flag, extra)
    if extra ~= nil then extra_arg("requires_grad", "(flag)", extra) end
    return set_requires_grad("requires_grad", self, flag)
end
function Tensor:requires_grad_(flag, extra)
    if extra ~= nil then extra_arg("requires_grad_", "(flag)", extra) end
    return set_requires_grad("requires_grad_", self, flag)
end

-- true when backward() will compute (leaf) or pass through (non-leaf) a gradient for t.
function Tensor:needs_grad(extra)
    if extra ~= nil then extra_arg("needs_grad", "()", extra) end
    check_self("needs_grad", self)
    return self._rg == true
end

-- true for tensors not computed by a recorded op.
function Tensor:is_leaf(extra)
    if extra ~= nil then extra_arg("is_leaf", "()", extra) end
    check_self("is_leaf", self)
    return self._node == nil
end

-- the name of the op that computed t ("mul", "matmul"...) or nil for a leaf.
function Tensor:grad_fn(extra)
    if extra ~= nil then extra_arg("grad_fn", "()", extra) end
    check_self("grad_fn", self)
    return self._node and self._node.name or nil
end

-- A tensor sharing t's storage that is out of the graph (no gradient).
function Tensor:detach(extra)
    if extra ~= nil then extra_arg("detach", "()", extra) end
    check_self("detach", self)
    local c = C.ordo_tensor_alias(self._c)
    if c == nil then util.fail_c() end
    return setmetatable({_c = ffi.gc(c, C.ordo_tensor_free)}, Tensor)
end

-- t:detach_(): t itself taken out of the graph, in place (Torch's): a
-- leaf that requires no gradient from then on (its hooks dropped), while
-- the graph that made it keeps its own tensors.  A truncated
-- backpropagation through time detaches its hidden state so between chunks.
--
-- A node recorded before, that took t as an input, still needs the way
-- through t's node (Torch's graph reaches it there): a backward that meets
-- one raises, where it found no way on and gave the leaves behind t no
-- gradient without a word.  (A leaf detached so gets none, as in Torch.)
function Tensor:detach_(extra)
    if extra ~= nil then extra_arg("detach_", "()", extra) end
    check_self("detach_", self)
    local node = self._node
    if node and node.inputs then self._detached_at = serial end
    self._node, self._rg, self._retain, self._hooks = nil, nil, nil, nil
    return self
end

-- Keeps the gradient of a non-leaf tensor in t.grad at backward.
function Tensor:retain_grad(extra)
    if extra ~= nil then extra_arg("retain_grad", "()", extra) end
    check_self("retain_grad", self)
    if not self._rg then fail("retain_grad: the tensor does not require a gradient") end
    self._retain = true
    return self
end

-- t:register_hook(fn): fn(grad) is called with t's gradient each time a
-- backward (or autograd.grad) computes it, before it goes on (into t.grad
-- for a leaf, to the op that made t otherwise); a tensor returned replaces
-- the gradient (same shape), nil keeps it.  Returns a handle:
-- handle:remove() takes the hook off.  As Torch's Tensor.register_hook.
-- Each registration is an entry of its own ({fn}), so that a handle takes
-- off its own one only: the same function registered twice, one handle
-- removed twice, took off the other registration too.
function Tensor:register_hook(fn, extra)
    if extra ~= nil then extra_arg("register_hook", "(fn)", extra) end
    check_self("register_hook", self)
    if type(fn) ~= "function" then fail("register_hook: expected a function, got " .. typename(fn)) end
    if not self._rg then
        fail("register_hook: the tensor does not require a gradient (hooks see gradients: call requires_grad() first)")
    end
    local hooks = self._hooks
    if hooks == nil then
        hooks = {}
        self._hooks = hooks
    end
    local entry = {fn}
    hooks[#hooks + 1] = entry
    return util.hook_handle(hooks, entry)
end

-- g passed through t's hooks, in the order they were registered.  Each
-- gradient a hook saw or returned is marked taken: a hook may keep it (a
-- list for logging) or return one the caller holds, so a leaf's .grad is
-- then a copy, never that tensor (accumulation would change it in place).
local function run_hooks(t, g, taken)
    -- the hooks registered when the gradient arrived: a hook that removes
    -- itself (or adds one) while they run neither skips nor adds one
    local hooks = {unpack(t._hooks)}
    for i = 1, #hooks do
        taken[g] = true
        local r = hooks[i][1](g)
        if r ~= nil then
            if not is_tensor(r) then
                fail(fmt("backward: a hook of a tensor of shape %s returned %s (expected a tensor or nothing)",
                         shape_str(t), typename(r)))
            end
            local a, b = shape_of(t), shape_of(r)
            local same = #a == #b
            if same then for k = 1, #a do if a[k] ~= b[k] then same = false break end end end
            if not same then
                fail(fmt("backward: a hook of a tensor of shape %s returned a gradient of shape %s", shape_str(t),
                         shape_str(r)))
            end
            if not util.same_device_ctx(r._c.ctx, t._c.ctx) then
                fail(fmt("backward: a hook of a tensor on %s returned a gradient on %s", tostring(t:device()),
                         tostring(r:device())))
            end
            if r._c.dtype ~= t._c.dtype then r = r:to(t:dtype()) end
            taken[r] = true
            g = r
        end
    end
    return g
end

-- ---------------------------------------------------------------- backward

-- A leaf's first gradient: g itself when nothing else can see its bytes
-- (a contiguous tensor alone on its storage, not given to another leaf,
-- not the caller's seed), else a copy, so that accumulating into .grad in
-- place never changes another tensor.  Backward functions return new
-- tensors or their incoming g, never a tensor the user holds.
local function own_grad(g, taken)
    local c = g._c
    local st = c.storage
    if taken[g] or st.refs ~= 1 or c.offset ~= 0 or C.ordo_tensor_is_contiguous(c) == 0
        or C.ordo_tensor_numel(c) * C.ordo_dtype_size(c.dtype) ~= st.nbytes then
        return g:clone() -- backward runs in no-grad mode: a plain copy
    end
    taken[g] = true
    return g
end

-- The tensors reachable from root through nodes, in reverse topological
-- order (every tensor before the inputs of its node).
local function topo_order(root)
    local order, state = {}, {[root] = 1}
    local stack = {root}
    local idx = {1}
    while #stack > 0 do
        local top = #stack
        local t = stack[top]
        local node = t._node
        local i = idx[top]
        local pushed = false
        if node and node.inputs then
            while i <= node.n do
                local x = node.inputs[i]
                i = i + 1
                if type(x) == "table" and x._detached_at and node.serial <= x._detached_at then
                    fail(fmt("backward: a tensor (shape %s) that %s took was detached in place (detach_) " ..
                             "after, cutting the graph through it; call detach_ after backward, or use " ..
                             "detach() (a new tensor)", shape_str(x), node.name))
                end
                if type(x) == "table" and x._rg and not state[x] then
                    state[x] = 1
                    idx[top] = i
                    stack[top + 1], idx[top + 1] = x, 1
                    pushed = true
                    break
                end
            end
        end
        if not pushed then
            stack[top], idx[top] = nil, nil
            order[#order + 1] = t
        end
    end
    -- post-order puts inputs first: reverse it
    local n = #order
    for i = 1, math.floor(n / 2) do order[i], order[n + 1 - i] = order[n + 1 - i], order[i] end
    return order
end

-- A gradient for a part of its input, from the backward of a view that
-- takes part of it (narrow, select): op(z, a, b, c) is that part of a
-- tensor z of the input's shape, g its gradient.  The walk adds g into that
-- part of the input's gradient in place, where a dense one (zeros of the
-- input's shape around g) cost a full-size tensor and a full-size addition
-- per view: a backward through the n rows of x taken one by one (x[i],
-- split, chunk) took time quadratic in n.  partial_into: the gradient of a
-- selection (gather, index_select), added by its adjoint into(z, a, b, g, c)
-- (scatter_add_, index_add_) straight into the input's gradient z.
local PARTIAL = {}
function M.partial(op, g, a, b, c) return setmetatable({op = op, g = g, a = a, b = b, c = c}, PARTIAL) end
function M.partial_into(into, g, a, b, c) return setmetatable({into = into, g = g, a = a, b = b, c = c}, PARTIAL) end

-- Adds the gradient v (a tensor, or a partial one) of input x into grads[x];
-- owned[x]: the gradient this walk made for x itself, which nothing else
-- holds until x's turn comes (then it may go on to x's inputs as it is, or
-- into a capture), so it may be changed in place until then.
local function accumulate(grads, owned, x, v)
    local prev = grads[x]
    if getmetatable(v) == PARTIAL then
        if prev == nil or owned[x] ~= prev then
            prev = prev and prev:clone() or tensor.zeros_like(x)
            owned[x] = prev
            grads[x] = prev
        end
        if v.into then v.into(prev, v.a, v.b, v.g, v.c) else v.op(prev, v.a, v.b, v.c):add_(v.g) end
    elseif owned[x] == prev and prev ~= nil then
        prev:add_(v) -- (a weight used at every step of a sequence: no new tensor per step)
    elseif prev then
        local sum = prev + v
        owned[x] = sum
        grads[x] = sum
    else
        grads[x] = v
    end
end

local function check_grad(node, i, x, gi)
    if not is_tensor(gi) then
        fail(fmt("backward: the backward of %s returned %s for input %d (expected a tensor)", node.name,
                 typename(gi), i))
    end
    local xs, gs = shape_of(x), shape_of(gi)
    local ok = #xs == #gs
    if ok then for k = 1, #xs do if xs[k] ~= gs[k] then ok = false break end end end
    if not ok then
        fail(fmt("backward: the backward of %s returned a gradient of shape %s for input %d of shape %s",
                 node.name, shape_str(gi), i, shape_str(x)))
    end
    if not util.same_device_ctx(gi._c.ctx, x._c.ctx) then
        fail(fmt("backward: the backward of %s returned a gradient on %s for input %d on %s", node.name,
                 tostring(gi:device()), i, tostring(x:device())))
    end
    if gi._c.dtype ~= x._c.dtype then gi = gi:to(x:dtype()) end
    return gi
end

-- Raises when node's backward returned a gradient past its inputs (Torch's
-- "returned an incorrect number of gradients"): one too many, dropped
-- unseen, meant the backward's gradients were off by one for an input it
-- skipped (an ordo.autograd.record of (x, w) whose backward returned the
-- gradients of (x, w, b)).  count: how many values it returned (trailing
-- nils are no gradients), or nil for the one-table form, whose border is used.
local function check_grad_count(node, gi, count)
    local n = node.n
    local last = n
    if count then
        for i = n + 1, count do if gi[i] ~= nil then last = i end end
    elseif gi[n + 1] ~= nil or #gi > n then
        last = math.max(n + 1, #gi)
    end
    if last > n then
        fail(fmt("backward: the backward of %s returned %d gradients for its %d input%s (one per input, nil for " ..
                 "one without; none past them)", node.name, last, n, n == 1 and "" or "s"))
    end
end

-- The values returned, as a list, and their count.
local function packed(...) return {...}, select("#", ...) end

-- Raises when node's graph was freed or a tensor it saved was changed in
-- place since the op (the storage's count of pushed writes moved).
local function check_node(node)
    if not node.inputs then
        fail(fmt("backward: the graph through %s was freed by an earlier backward; " ..
                 "give the first one {retain_graph = true} to go through it twice", node.name))
    end
    local saved = node.saved
    if saved then
        for i = 1, #saved do
            local s = saved[i]
            local now = writes_of(s)
            if now ~= node.versions[i] then
                fail(fmt("backward: a tensor (shape %s) saved by %s was changed in place after the op " ..
                         "(%d writes since); compute the update out of place, or after backward",
                         shape_str(s), node.name, tonumber(now - node.versions[i])))
            end
        end
    end
end

-- Raises unless t.grad (set by hand: backward accumulates into it in
-- place) is a tensor of t's shape, dtype and device, as Torch refuses to
-- take one: a larger one took the gradient broadcast into all of it, a
-- float32 one for a float64 t stayed float32, a number failed half-way.
local function check_dot_grad(t)
    local g = t.grad
    local what
    if not is_tensor(g) then
        what = typename(g)
    else
        local a, b = shape_of(t), shape_of(g)
        local same = #a == #b
        if same then for i = 1, #a do if a[i] ~= b[i] then same = false break end end end
        if not same then
            what = "a tensor of shape " .. shape_str(g)
        elseif g._c.dtype ~= t._c.dtype then
            what = "a tensor of dtype " .. g:dtype()
        elseif not util.same_device_ctx(g._c.ctx, t._c.ctx) then
            what = "a tensor on " .. tostring(g:device())
        elseif g == t or g._c.storage == t._c.storage then
            what = "the tensor itself (or a view of it)"
        else
            local st = g:stride()
            for i = 1, #a do
                if st[i] == 0 and a[i] > 1 then
                    what = "an expanded view (a stride of 0), which cannot be added into"
                end
            end
        end
    end
    if what then
        fail(fmt("backward: the .grad of a %s tensor of shape %s on %s is %s; it must be nil or a tensor of the " ..
                 "same shape, dtype and device (backward adds into it)", t:dtype(), shape_str(t),
                 tostring(t:device()), what))
    end
end

-- capture: nil for backward() (gradients accumulate into the leaves'
-- .grad and retained non-leaves'), or the set of tensors autograd.grad
-- asked for: their gradients are collected into the returned table and no
-- .grad is touched, and only the nodes on a path to one of them run (the
-- rest of the graph may be large, and its backward would be wasted pushes).
local function run_backward(root, grad, retain, capture)
    local order = topo_order(root)
    local through, captured
    if capture then
        -- order lists a tensor before its node's inputs: walked from the end,
        -- every input is settled before the tensors computed from it.
        -- leads[t]: t is captured or one of its node's inputs leads;
        -- through[t]: t's node must run (one of its inputs leads)
        local leads = {}
        through, captured = {}, {}
        for k = #order, 1, -1 do
            local t = order[k]
            local node = t._node
            local via = false
            if node and not node.inputs then
                via = true -- freed: walk it, so that the error below says so
            elseif node then
                for i = 1, node.n do
                    local x = node.inputs[i]
                    if x ~= nil and leads[x] then via = true break end
                end
            end
            through[t] = via
            leads[t] = via or capture[t] == true
        end
    end
    -- every node about to run checked first, so that a freed graph or a
    -- saved tensor changed in place raises before any .grad is touched or
    -- any of the graph freed (a retry after fixing the cause would
    -- otherwise add to gradients the failed pass had already accumulated);
    -- checked again as each node runs: the pass itself may write a saved
    -- tensor (a .grad the forward read)
    for k = 1, #order do
        local t = order[k]
        local node = t._node
        if node and not (capture and not through[t]) then check_node(node) end
        if not capture and (node == nil or t._retain) and t.grad ~= nil then check_dot_grad(t) end
    end
    local grads = {[root] = grad}
    local taken = {[grad] = true}
    local owned = {}
    for k = 1, #order do
        local t = order[k]
        local g = grads[t]
        grads[t] = nil
        local node = t._node
        if g ~= nil then
            if t._hooks and #t._hooks > 0 then g = run_hooks(t, g, taken) end
            if capture then
                if capture[t] then captured[t] = g end
                if not through[t] then node = nil end
            elseif node == nil or t._retain then
                if t.grad == nil then
                    t.grad = t._node and g:clone() or own_grad(g, taken)
                else
                    t.grad:add_(g)
                end
            end
            if node then
                check_node(node)
                local gi, count = packed(node.backward(g, node))
                -- the gradients as one list (a gradient itself is a tensor)
                local g1 = gi[1]
                if type(g1) == "table" and not is_tensor(g1) and getmetatable(g1) ~= PARTIAL and gi[2] == nil then
                    gi, count = g1, nil
                end
                check_grad_count(node, gi, count)
                for i = 1, node.n do
                    local x = node.inputs[i]
                    local v = gi[i]
                    if type(x) == "table" and x._rg and v ~= nil then
                        accumulate(grads, owned, x, getmetatable(v) == PARTIAL and v or check_grad(node, i, x, v))
                    end
                end
                -- freed: the backward function too, whose closure holds the
                -- op's operands (a loss kept for logging kept every
                -- activation of its step alive through them)
                if not retain then node.inputs, node.saved, node.backward = nil, nil, nil end
            end
        end
    end
    return captured, taken
end

-- The seed of a backward from out: grad (a tensor of out's shape, cast to
-- its dtype) or, for a one-element out, ones.
local function seed_of(fname, out, grad)
    if not out._rg then
        fail(fname .. ": the tensor does not require a gradient " ..
             "(call requires_grad() on the inputs it was computed from, and compute it outside ordo.no_grad)")
    end
    if grad == nil then
        if out:numel() ~= 1 then
            fail(fmt("%s: a gradient must be given for an output of shape %s (only one-element outputs default to 1)",
                     fname, shape_str(out)))
        end
        return tensor.ones_like(out)
    end
    if not is_tensor(grad) then fail(fmt("%s: grad must be a tensor, got %s", fname, typename(grad))) end
    local a, b = shape_of(out), shape_of(grad)
    local same = #a == #b
    if same then for i = 1, #a do if a[i] ~= b[i] then same = false break end end end
    if not same then
        fail(fmt("%s: grad has shape %s but the output has shape %s", fname, shape_str(grad), shape_str(out)))
    end
    if not util.same_device_ctx(grad._c.ctx, out._c.ctx) then
        fail(fmt("%s: grad is on %s but the output on %s", fname, tostring(grad:device()), tostring(out:device())))
    end
    if grad._c.dtype ~= out._c.dtype then grad = grad:to(out:dtype()) end
    return grad
end

-- The options of backward and grad: retain_graph (a boolean).  create_graph
-- is refused by name: backward runs in no-grad mode and never builds a graph
-- of the gradients, and ignoring it would give gradients that look right
-- but cannot be differentiated again.
local BACKWARD_OPTS = {retain_graph = true, create_graph = true}
local function check_backward_opts(fname, opts)
    opts = util.check_opts(fname, opts, BACKWARD_OPTS)
    local r = opts.retain_graph
    if r ~= nil and type(r) ~= "boolean" then
        fail(fmt("%s: retain_graph must be a boolean, got %s", fname, typename(r)))
    end
    if opts.create_graph then
        fail(fname .. ": create_graph is not supported (no gradients of gradients: backward runs in no-grad mode)")
    end
    return r == true
end

-- backward(grad, opts) and backward(opts): a plain table in grad's place
-- is the options, unless it holds values (a gradient written as a Lua
-- list, which read as options was "unknown option '1'")
local function grad_or_opts(fname, grad, opts)
    if type(grad) == "table" and not is_tensor(grad) and opts == nil then
        if grad[1] ~= nil then
            fail(fmt("%s: grad must be a tensor, got a table of values (make it one: ordo.tensor({...}))", fname))
        end
        return nil, grad
    end
    return grad, opts
end

-- t:backward([grad] [, {retain_graph = bool}]): accumulates d t / d leaf
-- into every leaf's .grad.  grad defaults to 1 for a one-element t.
function Tensor:backward(grad, opts, extra)
    if extra ~= nil then extra_arg("backward", "(grad, opts)", extra) end
    check_self("backward", self)
    grad, opts = grad_or_opts("backward", grad, opts)
    local retain = check_backward_opts("backward", opts)
    grad = seed_of("backward", self, grad)
    M.no_grad(run_backward, self, grad, retain)
end

-- ordo.autograd.grad(output, inputs [, grad] [, {retain_graph = bool}]):
-- the gradients of output with respect to inputs (a list of tensors that
-- require a gradient, leaves or not), returned as a list, nil for an input
-- that output does not depend on.  No .grad is read or written, the
-- leaves' included (Torch's autograd.grad); only the part of the graph
-- between output and the inputs runs, and is freed unless retain_graph.
function M.grad(output, inputs, grad, opts, extra)
    if extra ~= nil then extra_arg("grad", "(outputs, inputs, grad_outputs, opts)", extra) end
    -- (check_self's advice, "call it as t:grad(...)", names no method)
    if not is_tensor(output) then
        fail(fmt("grad: the output must be a tensor, got %s%s", typename(output),
                 type(output) == "table" and " (one output: for several, take the gradient of their sum, " ..
                 "(y1 * g1):sum() + (y2 * g2):sum())" or ""))
    end
    if type(inputs) ~= "table" or is_tensor(inputs) then
        fail("grad: inputs must be a list of tensors, got " .. typename(inputs))
    end
    grad, opts = grad_or_opts("grad", grad, opts)
    local n = #inputs
    for i = 1, n do
        local x = inputs[i]
        if not is_tensor(x) then fail(fmt("grad: input %d must be a tensor, got %s", i, typename(x))) end
    end
    -- an input that does not require a gradient has no place in any graph:
    -- asking for its gradient is a mistake (Torch refuses it too), not a nil
    local capture = {}
    for i = 1, n do
        local x = inputs[i]
        if not x._rg then
            fail(fmt("grad: input %d (shape %s) does not require a gradient", i, shape_str(x)))
        end
        capture[x] = true
    end
    local retain = check_backward_opts("grad", opts)
    grad = seed_of("grad", output, grad)
    local captured, taken = M.no_grad(run_backward, output, grad, retain, capture)
    -- each result a tensor of its own: one gradient can reach several
    -- inputs (add passes g to both operands; an input listed twice) and the
    -- seed is the caller's, so a later in-place change to one result must
    -- not show in another
    local r = {}
    for i = 1, n do
        local g = captured[inputs[i]]
        if g ~= nil then r[i] = M.no_grad(own_grad, g, taken) end
    end
    return r
end

-- ---------------------------------------------------------------- gradient check

-- Deterministic weights in [0.5, 1.5): the checked scalar is sum(out * w),
-- so every output element counts and errors cannot cancel out.
local function check_weights(out, k)
    local n = out:numel()
    local w, seed = {}, 12345 + 7919 * ((k or 1) - 1) -- (each output its own weights: no cancelling across them)
    for i = 1, n do
        seed = (seed * 1103515245 + 12345) % 2147483648
        w[i] = 0.5 + seed / 2147483648
    end
    -- beside out (its device and engine): the weights multiply out (a GPU
    -- function's output, one on an engine of its own, too)
    local like = tensor.like(out, "float64")
    local wt = n > 0 and tensor.tensor(w, like) or tensor.zeros({0}, like)
    return wt:reshape(shape_of(out)):to(out:dtype())
end

-- ordo.autograd.gradcheck(fn, inputs [, opts]): compares the gradients
-- backward() computes for fn(unpack(inputs)) with central differences,
-- for every element of every input tensor that needs a gradient (make them
-- float64), through every float output fn returns.  inputs: a list, or one
-- tensor.  opts: eps (1e-6), atol (1e-5), rtol (1e-3), name,
-- raise_exception (true).  Returns true, or raises naming the input, the
-- element, and both values (returns false with raise_exception = false).
function M.gradcheck(fn, inputs, opts, extra)
    if extra ~= nil then extra_arg("gradcheck", "(fn, inputs, opts)", extra) end
    opts = util.check_opts("gradcheck", opts, {eps = true, atol = true, rtol = true, name = true,
                                               raise_exception = true})
    local raise = opts.raise_exception
    if raise ~= nil and type(raise) ~= "boolean" then
        fail("gradcheck: raise_exception must be true or false, got " .. typename(raise))
    end
    local eps, atol, rtol = opts.eps or 1e-6, opts.atol or 1e-5, opts.rtol or 1e-3
    if type(eps) ~= "number" or not (eps > 0 and eps < math.huge) then
        fail("gradcheck: eps must be a positive finite number, got " .. tostring(eps))
    end
    if type(atol) ~= "number" or not (atol >= 0) then
        fail("gradcheck: atol must be a number >= 0, got " .. tostring(atol))
    end
    if type(rtol) ~= "number" or not (rtol >= 0) then
        fail("gradcheck: rtol must be a number >= 0, got " .. tostring(rtol))
    end
    if opts.name ~= nil and type(opts.name) ~= "string" then
        fail("gradcheck: name must be a string, got " .. typename(opts.name))
    end
    local label = opts.name and (opts.name .. ": ") or ""
    if type(fn) ~= "function" then fail("gradcheck: expected a function, got " .. typename(fn)) end
    if is_tensor(inputs) then inputs = {inputs} end -- (one tensor for a list of one, as Torch's)
    if type(inputs) ~= "table" then fail("gradcheck: inputs must be a tensor or a list, got " .. typename(inputs)) end
    local n = inputs.n or #inputs
    -- every output is checked, as Torch's: sum_k sum(out_k * w_k) (only
    -- the first was, so a wrong gradient of a second output passed)
    local outs, nout = packed(M.enable_grad(fn, unpack(inputs, 1, n)))
    while nout > 1 and outs[nout] == nil do nout = nout - 1 end -- (trailing nils are no outputs)
    local ws, float_outs = {}, false
    for k = 1, nout do
        local o = outs[k]
        if not is_tensor(o) then
            fail(fmt("gradcheck: fn must return a tensor (or several), got %s%s", typename(o),
                     nout > 1 and fmt(" as output %d", k) or ""))
        end
        -- (an integer output carries no gradient: left out, as Torch's)
        if FLOAT[o._c.dtype] then ws[k], float_outs = check_weights(o, k), true end
    end
    local function weighted(list)
        local total
        for k = 1, nout do
            if ws[k] then
                local part = (list[k] * ws[k]):sum()
                total = total and total + part:to(total:dtype()) or part
            end
        end
        return total
    end
    local any_rg = false
    for k = 1, nout do if ws[k] and outs[k]._rg then any_rg = true end end
    local checked = {}
    for i = 1, n do
        local x = inputs[i]
        if is_tensor(x) and x._rg then
            if x._node then fail(fmt("gradcheck: input %d is not a leaf", i)) end
            if C.ordo_tensor_is_contiguous(x._c) == 0 then fail(fmt("gradcheck: input %d is not contiguous", i)) end
            checked[#checked + 1] = i
        end
    end
    if #checked == 0 then fail("gradcheck: no input requires a gradient") end
    if not float_outs then fail("gradcheck: fn returned no float tensor: nothing to check") end
    -- through autograd.grad: no .grad changes, neither the inputs' (a
    -- backward wiped them) nor those of the leaves fn closes over (a
    -- model's parameters got the check's gradient added to theirs)
    local analytic_of = {}
    if any_rg then
        local xs = {}
        for k, i in ipairs(checked) do xs[k] = inputs[i] end
        local gs = M.enable_grad(function() return M.grad(weighted(outs), xs) end)
        for k, i in ipairs(checked) do analytic_of[i] = gs[k] end
    end
    local function value()
        return M.no_grad(function()
            local again, count = packed(fn(unpack(inputs, 1, n)))
            while count > 1 and again[count] == nil do count = count - 1 end
            if count ~= nout then
                fail(fmt("gradcheck: fn returned %d outputs, then %d for the same inputs", nout, count))
            end
            return weighted(again):item()
        end)
    end
    local v1, v2 = value(), value()
    if v1 ~= v1 or v2 ~= v2 then -- (NaN ~= NaN: it would read as a non-deterministic fn below)
        fail(fmt("%sgradcheck: fn's output holds NaN (its weighted sum is %s): no numerical gradient to compare with",
                 label, tostring(v1 ~= v1 and v1 or v2)))
    end
    if v1 ~= v2 then
        fail(fmt("%sgradcheck: fn gave %.17g then %.17g for the same inputs; it must be deterministic " ..
                 "(draw random tensors outside it)", label, v1, v2))
    end
    for _, i in ipairs(checked) do
        local x = inputs[i]
        local flat = x:view(-1)
        local orig = flat:totable()
        local analytic = analytic_of[i] and analytic_of[i]:reshape(-1):totable() or {}
        for j = 1, #orig do
            local cell = flat:narrow(1, j, 1)
            M.no_grad(function() cell:fill_(orig[j] + eps) end)
            local lp = value()
            M.no_grad(function() cell:fill_(orig[j] - eps) end)
            local lm = value()
            M.no_grad(function() cell:fill_(orig[j]) end)
            local num = (lp - lm) / (2 * eps)
            local ana = analytic[j] or 0
            if not (math.abs(ana - num) <= atol + rtol * math.abs(num)) then
                if raise == false then return false end -- (Torch's raise_exception = False: the answer)
                -- float32 cannot resolve a step of eps: say so, or the
                -- mismatch reads as a wrong backward
                local note = x:dtype() ~= "float64"
                    and fmt(" (input %d is %s: central differences need float64)", i, x:dtype()) or ""
                fail(fmt("%sgradcheck: input %d (shape %s), element %d: backward gives %.10g, numerical %.10g%s",
                         label, i, shape_str(x), j, ana, num, note))
            end
        end
    end
    return true
end

-- every differentiable tensor op gets its backward (lua/ordo/grad_ops.lua)
require("ordo.grad_ops").install(M)

return M
