-- spec/support/helpers.lua: making ordo tensors from refs in several
-- layouts, random shapes, checking results against refs, and a random
-- program of in-place ops for the asynchrony specs.
local R = require "support.ref"

local H = {}

H.LAYOUTS = {"contiguous", "transposed", "narrowed"}

-- An ordo tensor with the values of ref r, laid out as asked:
--   contiguous: ordo.tensor(...)
--   transposed: a permuted view of a tensor holding the permuted data
--               (non-contiguous strides); 0/1-d tensors stay contiguous
--   narrowed:   a narrow view into a padded tensor (an offset and a
--               stride that skips padding); the padding holds 77s
function H.make(ordo, r, layout)
    local opts = {dtype = r.dtype}
    local nd = #r.shape
    if R.numel(r.shape) == 0 then return ordo.zeros(r.shape, opts) end
    if layout == "transposed" and nd >= 2 then
        local perm = {}
        for i = 1, nd do perm[i] = nd - i + 1 end
        local base = ordo.tensor(R.totable(R.permute(r, perm)), opts)
        return base:permute(perm)
    elseif layout == "narrowed" and nd >= 1 then
        local shape = R.copy_shape(r.shape)
        shape[nd] = shape[nd] + 3
        local data = {}
        local pos = 0
        R.each_index(shape, function(idx)
            local j = idx[nd]
            if j >= 2 and j < 2 + r.shape[nd] then
                local src = {}
                for k = 1, nd do src[k] = idx[k] end
                src[nd] = j - 1
                data[#data + 1] = R.get(r, src)
            else
                data[#data + 1] = 77
            end
            pos = pos + 1
        end)
        local base = ordo.tensor(R.totable(R.new(shape, data, r.dtype)), opts)
        return base:narrow(nd, 2, r.shape[nd])
    end
    local t = R.totable(r)
    return ordo.tensor(t, opts)
end

-- A random shape of 0..maxdim dims with sizes 1..maxsize; sometimes a 0.
function H.rand_shape(maxdim, maxsize, allow_empty)
    local nd = math.random(0, maxdim)
    local s = {}
    for i = 1, nd do s[i] = math.random(1, maxsize) end
    if allow_empty and nd > 0 and math.random() < 0.1 then s[math.random(1, nd)] = 0 end
    return s
end

-- b's shape: a's shape with some dims set to 1 or dropped in front (broadcastable)
function H.broadcast_partner(shape)
    local s = {}
    local drop = math.random(0, #shape)
    for i = drop + 1, #shape do
        s[#s + 1] = math.random() < 0.35 and 1 or shape[i]
    end
    return s
end

H.TOL = {float32 = {1e-5, 1e-6}, float64 = {1e-12, 1e-12}}

-- Asserts t (ordo) has ref's shape, dtype and values (tolerance for floats).
function H.check(t, ref, rtol, atol, what)
    local prefix = what and (what .. ": ") or ""
    local shape = t:shape()
    assert(R.shape_str(shape) == R.shape_str(ref.shape),
           prefix .. "shape " .. R.shape_str(shape) .. ", expected " .. R.shape_str(ref.shape))
    assert(t:dtype() == ref.dtype, prefix .. "dtype " .. t:dtype() .. ", expected " .. ref.dtype)
    local tol = H.TOL[ref.dtype] or {0, 0}
    local ok, msg = R.compare(t:totable(), ref, rtol or tol[1], atol or tol[2])
    assert(ok, prefix .. (msg or ""))
end

function H.promote(a, b) return R.RANK[a] >= R.RANK[b] and a or b end

-- Asserts that number (or nested list of numbers) got is within
-- tol * (1 + |want|) of want (tol 1e-10 by default).
function H.close(want, got, tol, what)
    tol = tol or 1e-10
    if type(want) == "table" then
        assert(type(got) == "table" and #got == #want,
               ("%s: %d values expected, got %s"):format(what or "", #want, type(got) == "table" and #got or type(got)))
        for i = 1, #want do H.close(want[i], got[i], tol, what) end
        return
    end
    if want ~= want then return assert(got ~= got, ("%s: want NaN, got %.15g"):format(what or "", got)) end
    assert(math.abs(want - got) <= tol * (1 + math.abs(want)), ("%s: want %.15g, got %.15g"):format(what or "", want, got))
end

-- Raises unless fn raises an error containing every string in patterns (plain find).
function H.raises(fn, ...)
    local ok, err = pcall(fn)
    assert(not ok, "expected an error, got none")
    err = tostring(err)
    for i = 1, select("#", ...) do
        local p = select(i, ...)
        assert(err:find(p, 1, true), ("error %q does not mention %q"):format(err, p))
    end
    return err
end

-- Runs a random program of n in-place ops (seeded) through overlapping views
-- of shared storages and returns the final values of the base tensors and
-- every value read along the way.  opts: engine, device, sync (wait for
-- everything after every op), with_host (two more ops: a copy to the cpu
-- with a cpu op on it, and a copy back).
function H.random_program(ordo, seed, n, opts)
    math.randomseed(seed)
    local eng = opts.engine
    local topts = {dtype = "float64", engine = eng, device = opts.device}
    local A = ordo.arange(16, topts):view(4, 4)
    local B = ordo.full({4, 4}, 0.5, topts)
    local D = ordo.arange(32, topts):view(8, 4):mul_(0.1)
    local E = ordo.zeros({4}, topts)
    -- 4x4 slots: bases, a transposed view, two overlapping windows of D
    local slots = {A, B, A:t(), D:narrow(1, 1, 4), D:narrow(1, 3, 4), D:narrow(1, 5, 4):t()}
    local host = opts.with_host and ordo.zeros({4, 4}, {dtype = "float64", engine = eng}) or nil
    local reads = {}
    for _ = 1, n do
        local dst = slots[math.random(#slots)]
        local src = slots[math.random(#slots)]
        local op = math.random(host and 11 or 9)
        if op == 1 then dst:add_(src):mul_(0.5)
        elseif op == 2 then dst:copy_(src)
        elseif op == 3 then dst:sub_(src:tanh())
        elseif op == 4 then dst:mul_(0.75):add_(math.random())
        elseif op == 5 then dst:copy_(src:t())
        elseif op == 6 then reads[#reads + 1] = src:sum()
        elseif op == 7 then E:copy_(src:sum(1)):div_(4)
        elseif op == 8 then dst:add_(E):mul_(0.5)
        elseif op == 9 then reads[#reads + 1] = (src:matmul(dst) * 0.01):max(2)
        elseif op == 10 then host:mul_(0.5):add_(src:to(ordo.cpu(0)))
        else dst:copy_(host):mul_(0.25) end
        if opts.sync then
            if eng then eng:wait_for_all() else ordo.engine.wait_for_all() end
        end
    end
    local out = {A = A:totable(), B = B:totable(), D = D:totable(), E = E:totable(),
                 host = host and host:totable(), reads = {}}
    for i, r in ipairs(reads) do out.reads[i] = r:totable() end
    return out
end

-- The bytes of the file at path, or "" when it cannot be read.
function H.slurp(path)
    local f = io.open(path, "rb")
    if not f then return "" end
    local s = f:read("*a")
    f:close()
    return s
end

-- A further positional argument (the extra-argument specs): fn(self, nil,
-- ..., further) with further just past its n own parameters must raise an
-- error that shows further (4242.5: a value no call takes by chance, and a
-- number, so that the functions taking an internal name last refuse it too).
H.FURTHER = 4242.5
function H.refuses_further(where, name, fn, self, n)
    local args = {self}
    args[n + 1] = H.FURTHER
    local ok, err = pcall(fn, unpack(args, 1, n + 1))
    assert(not ok, ("%s%s: accepted a further argument after its %d parameters"):format(where, name, n))
    assert(tostring(err):find("4242.5", 1, true),
           ("%s%s: the error does not name the further argument: %s"):format(where, name, tostring(err)))
end

return H
