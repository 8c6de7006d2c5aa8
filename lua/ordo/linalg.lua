-- ordo.linalg: solve, inv, det and slogdet of square float32/float64
-- matrices and batches of them (... x n x n), as torch.linalg; logdet (as
-- torch.logdet) and the methods A:det(), A:inverse(), A:logdet(),
-- A:slogdet().
--
-- One kernel, linalg_lu (kernels/cpu/linalg.c, kernels/cuda/linalg.cu),
-- factorises each matrix by LU with partial pivoting and gives the
-- solution of A X = B (inv solves against I), the determinant, or its sign
-- and log|det|.  The batch dims of A and B broadcast as Torch's.
-- Gradients (Torch's formulas): solve, X = A^-1 B: gB = A^-T G,
-- gA = -gB X^T (inv: -A^-T G A^-T); det: G adj(A)^T (the cofactor matrix,
-- det A^-T for an invertible A, and defined at a singular one too);
-- slogdet: G_logabs A^-T (sign carries none; at a singular A, where
-- log|det| is -inf, adj(A)^T / 0: +-inf and NaN, never a failure).  The
-- kernel's modes 3 and 4 give adj(A)^T and A^-T from one factorisation.
local util = require "ordo.util"
local tensor = require "ordo.tensor"
local autograd = require "ordo.autograd"
local eye = require("ordo.derived").eye

local fail = util.fail
local fmt = string.format
local is_tensor, shape_of, shape_str = tensor.is_tensor, tensor.shape_of, tensor.shape_str
local K = tensor.kernel_ids
local NAMED = require("ordo.cdef").TP_NAMED -- the engine op (and its failure) named after the linalg op
local push, new_on = tensor.push, tensor.new_on
local record, needs = autograd.record, autograd.needs
local type, unpack = type, unpack

local M = {}

-- the kernel's name codes (iparam 1)
local NAME = {["linalg.solve"] = 0, ["linalg.inv"] = 1, ["linalg.slogdet"] = 2, ["linalg.det"] = 3}

local function typename(v) return is_tensor(v) and "tensor" or type(v) end

-- Raises unless A is a float32/float64 tensor of shape ... x n x n; returns n.
local function check_square(fname, A, what)
    what = what or "A"
    if not is_tensor(A) then fail(fmt("%s: %s must be a tensor, got %s", fname, what, typename(A))) end
    local dt = A:dtype()
    if dt ~= "float32" and dt ~= "float64" then
        fail(fmt("%s: %s must be float32 or float64, got %s", fname, what, dt))
    end
    local s = shape_of(A)
    if #s < 2 or s[#s] ~= s[#s - 1] then
        fail(fmt("%s: %s must be a square matrix or a batch of them (... x n x n), got shape %s", fname, what,
                 shape_str(s)))
    end
    return s[#s]
end

local function batch_of(s, drop)
    local b = {}
    for i = 1, #s - drop do b[i] = s[i] end
    return b
end

local function with(b, ...)
    local s = {unpack(b)}
    for _, v in ipairs({...}) do s[#s + 1] = v end
    return s
end

local function mT(t) return t:transpose(-1, -2) end

-- X = A^-1 B for A (... x n x n) and B (... x n x k) of one batch shape.
local solve_core
local function rec_solve(fname, A, B, X)
    record(fname, X, {A, B, n = 2}, function(g)
        local gB = solve_core(fname, mT(A), g)
        local gA = A._rg and -tensor.matmul(gB, mT(X)) or nil
        return gA, B._rg and gB or nil
    end, {A, X})
end
solve_core = function(fname, A, B)
    local X = new_on(fname, B, shape_of(B), B._c.dtype)
    push(K.linalg_lu, fname, NAMED, {A, B}, {X}, nil, {0, NAME[fname]})
    if needs(A, B) then rec_solve(fname, A, B, X) end
    return X
end

-- adj(A)^T (mode 3, det's gradient) or A^-T (mode 4, slogdet's): never
-- fails, a singular A included (kernels/cpu/linalg.c).
local function cofactor_t(fname, A, mode)
    local C = new_on(fname, A, shape_of(A), A._c.dtype)
    push(K.linalg_lu, fname, NAMED, {A}, {C}, nil, {mode, NAME[fname]})
    return C
end

-- Raises unless the call had no arguments past its first nmax (a Torch
-- keyword such as out = ... would otherwise be dropped without a word).
local function check_nargs(fname, nargs, nmax, what)
    if nargs > nmax then fail(fmt("%s: takes %s, got %d arguments", fname, what, nargs)) end
end

-- solve(A, B [, {left = true}]): X with A X = B.  B is ... x n x k, or a
-- batch of vectors (B of 1 dim, or A's shape without its last dim), X then
-- of B's shape.  left = false: X with X A = B (B ... x k x n), as Torch's.
function M.solve(A, B, opts, ...)
    local fname = "linalg.solve"
    check_nargs(fname, select("#", ...) + 3, 3, "A, B and an options table")
    opts = util.check_opts(fname, opts, {left = true})
    local left = opts.left
    if left == nil then left = true end
    if type(left) ~= "boolean" then fail(fmt("%s: left must be a boolean, got %s", fname, typename(left))) end
    local n = check_square(fname, A)
    if not is_tensor(B) then fail(fmt("%s: B must be a tensor, got %s", fname, typename(B))) end
    if B:dtype() ~= A:dtype() then
        fail(fmt("%s: A and B must have one dtype, got %s and %s", fname, A:dtype(), B:dtype()))
    end
    tensor.check_devices(fname, A, B)
    local sa, sb = shape_of(A), shape_of(B)
    if #sb == 0 then fail(fmt("%s: B must have at least 1 dim, got a scalar", fname)) end
    local vector = #sb == 1
    if #sb == #sa - 1 then
        vector = true
        for i = 1, #sb do if sb[i] ~= sa[i] then vector = false end end
    end
    if vector and not left then -- (Torch refuses it too)
        fail(fmt("%s: left = false needs B of ... x k x n, not a vector or a batch of vectors (B of shape %s, A %s)",
                 fname, shape_str(sb), shape_str(sa)))
    end
    -- X A = B is A^T X^T = B^T
    local Bm = vector and B:unsqueeze(#sb + 1) or left and B or mT(B)
    local sm = shape_of(Bm)
    if sm[#sm - 1] ~= n then
        fail(fmt("%s: A of shape %s and B of shape %s do not fit (B must have %d %s, as A is %d x %d)", fname,
                 shape_str(sa), shape_str(sb), n, left and "rows" or "columns with left = false", n, n))
    end
    local ba, bb = batch_of(sa, 2), batch_of(sm, 2)
    local nbatch = math.max(#ba, #bb)
    local batch = {}
    for i = 1, nbatch do
        local x, y = ba[i - (nbatch - #ba)] or 1, bb[i - (nbatch - #bb)] or 1
        if x ~= y and x ~= 1 and y ~= 1 then
            fail(fmt("%s: the batch dims of A (shape %s) and B (shape %s) do not broadcast (%d against %d)", fname,
                     shape_str(sa), shape_str(sb), x, y))
        end
        batch[i] = x == 1 and y or x
    end
    local k = sm[#sm]
    local X = solve_core(fname, (left and A or mT(A)):expand(with(batch, n, n)), Bm:expand(with(batch, n, k)))
    if vector then X = X:squeeze(X:dim()) end
    return left and X or mT(X)
end

-- inv(A): the inverse of each matrix.
function M.inv(A, ...)
    local fname = "linalg.inv"
    check_nargs(fname, select("#", ...) + 1, 1, "A alone")
    local n = check_square(fname, A)
    local I = eye(n, tensor.like(A)):expand(shape_of(A))
    return solve_core(fname, A, I)
end

local function rec_slogdet(fname, A, logabs)
    record(fname, logabs, {A, n = 1}, function(g)
        return g:reshape(with(shape_of(g), 1, 1)) * cofactor_t(fname, A, 4)
    end, {A})
end

-- slogdet(A): sign, logabsdet, det = sign * exp(logabsdet); a singular
-- matrix gives 0 and -inf.
function M.slogdet(A, ...)
    local fname = "linalg.slogdet"
    check_nargs(fname, select("#", ...) + 1, 1, "A alone")
    check_square(fname, A)
    local b = batch_of(shape_of(A), 2)
    local sign, logabs = new_on(fname, A, b, A._c.dtype), new_on(fname, A, b, A._c.dtype)
    push(K.linalg_lu, fname, NAMED, {A}, {sign, logabs}, nil, {1, NAME[fname]})
    if needs(A) then rec_slogdet(fname, A, logabs) end
    return sign, logabs
end

local function rec_det(fname, A, det)
    record(fname, det, {A, n = 1}, function(g)
        return g:reshape(with(shape_of(g), 1, 1)) * cofactor_t(fname, A, 3)
    end, {A})
end

-- det(A): the determinant of each matrix (0 for a singular one).
function M.det(A, ...)
    local fname = "linalg.det"
    check_nargs(fname, select("#", ...) + 1, 1, "A alone")
    check_square(fname, A)
    local det = new_on(fname, A, batch_of(shape_of(A), 2), A._c.dtype)
    push(K.linalg_lu, fname, NAMED, {A}, {det}, nil, {2, NAME[fname]})
    if needs(A) then rec_det(fname, A, det) end
    return det
end

-- logdet(A): log det A, as torch.logdet: -inf for a singular matrix, NaN
-- for a negative determinant (whose gradient is then 0, as Torch's).
function M.logdet(A, ...)
    check_nargs("logdet", select("#", ...) + 1, 1, "A alone")
    local sign, logabs = M.slogdet(A)
    return tensor.where(sign:eq(-1), 0 / 0, logabs)
end

-- Torch's other names: A:det(), A:inverse(), A:logdet(), A:slogdet() (and
-- ordo.det, ordo.inverse... as every method)
local Tensor = tensor.Tensor
Tensor.det, Tensor.inverse, Tensor.logdet, Tensor.slogdet = M.det, M.inv, M.logdet, M.slogdet

return M
