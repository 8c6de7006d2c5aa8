-- ordo.linalg: solve, inv, det, slogdet against plain-Lua Gaussian
-- elimination on random well-conditioned matrices, batches (broadcast),
-- transposed views, singular matrices, bad inputs, and gradients.
local ordo = require "ordo"

local abs, log, huge = math.abs, math.log, math.huge
local fmt = string.format

-- ---------------------------------------------------------------- plain Lua

-- A random n x n matrix (a Lua table of rows) with a heavy diagonal.
local function rand_matrix(n, seed)
    local m = {}
    local x = seed
    for i = 1, n do
        m[i] = {}
        for j = 1, n do
            x = (x * 1103515245 + 12345) % 2147483648
            m[i][j] = x / 2147483648 * 2 - 1 + (i == j and n or 0)
        end
    end
    return m
end

local function rand_rows(r, c, seed)
    local m, x = {}, seed
    for i = 1, r do
        m[i] = {}
        for j = 1, c do
            x = (x * 69069 + 1) % 4294967296
            m[i][j] = x / 4294967296 * 4 - 2
        end
    end
    return m
end

local function copy2(m)
    local o = {}
    for i = 1, #m do o[i] = {unpack(m[i])} end
    return o
end

-- Gaussian elimination with partial pivoting: X with A X = B (B a table of
-- rows), and det A.
local function ref_solve(A, B)
    local n, k = #A, B[1] and #B[1] or 0
    local a, b = copy2(A), copy2(B)
    for j = 1, n do
        local p = j
        for i = j + 1, n do if abs(a[i][j]) > abs(a[p][j]) then p = i end end
        a[j], a[p] = a[p], a[j]
        b[j], b[p] = b[p], b[j]
        for i = j + 1, n do
            local f = a[i][j] / a[j][j]
            for c = j, n do a[i][c] = a[i][c] - f * a[j][c] end
            for c = 1, k do b[i][c] = b[i][c] - f * b[j][c] end
        end
    end
    for i = n, 1, -1 do
        for c = 1, k do
            local s = b[i][c]
            for j = i + 1, n do s = s - a[i][j] * b[j][c] end
            b[i][c] = s / a[i][i]
        end
    end
    return b
end

local function ref_det(A)
    local n = #A
    local a, d = copy2(A), 1
    for j = 1, n do
        local p = j
        for i = j + 1, n do if abs(a[i][j]) > abs(a[p][j]) then p = i end end
        if a[p][j] == 0 then return 0 end
        if p ~= j then a[j], a[p], d = a[p], a[j], -d end
        d = d * a[j][j]
        for i = j + 1, n do
            local f = a[i][j] / a[j][j]
            for c = j, n do a[i][c] = a[i][c] - f * a[j][c] end
        end
    end
    return d
end

local function eye_rows(n)
    local m = {}
    for i = 1, n do
        m[i] = {}
        for j = 1, n do m[i][j] = i == j and 1 or 0 end
    end
    return m
end

local function close2(got, want, tol, what)
    assert.are.equal(#want, #got, what)
    for i = 1, #want do
        for j = 1, #want[i] do
            local g, w = got[i][j], want[i][j]
            if not (abs(g - w) <= tol * (1 + abs(w))) then
                error(fmt("%s: [%d][%d] is %.17g, expected %.17g", what, i, j, g, w), 2)
            end
        end
    end
end

local function raises(pattern, fn)
    local ok, err = pcall(fn)
    assert.is_false(ok, "expected an error matching " .. pattern)
    assert.truthy(tostring(err):find(pattern, 1, true), tostring(err))
end

local DT = {float32 = 1e-5, float64 = 1e-12}

-- ---------------------------------------------------------------- specs

describe("ordo.linalg", function()
    for dt, tol in pairs(DT) do
        it("solve, inv, det, slogdet of one matrix agree with Gaussian elimination (" .. dt .. ")", function()
            for n = 1, 6 do
                local a, b = rand_matrix(n, n * 7), rand_rows(n, 3, n)
                local A, B = ordo.tensor(a, {dtype = dt}), ordo.tensor(b, {dtype = dt})
                a, b = A:totable(), B:totable() -- (float32's rounded values)
                local X = ordo.linalg.solve(A, B)
                assert.are.equal(dt, X:dtype())
                assert.are.same({n, 3}, X:shape())
                close2(X:totable(), ref_solve(a, b), tol, "solve n=" .. n)
                close2(ordo.linalg.inv(A):totable(), ref_solve(a, eye_rows(n)), tol, "inv n=" .. n)
                local d = ref_det(a)
                local D = ordo.linalg.det(A)
                assert.are.same({}, D:shape())
                assert.is_true(abs(D:item() - d) <= tol * abs(d), fmt("det %g vs %g", D:item(), d))
                local s, l = ordo.linalg.slogdet(A)
                assert.are.equal(d < 0 and -1 or 1, s:item())
                assert.is_true(abs(l:item() - log(abs(d))) <= tol * (1 + abs(log(abs(d)))))
                -- a vector right-hand side gives a vector
                local v = ordo.tensor({unpack(b[1])}, {dtype = dt})
                if n == 3 then
                    local xv = ordo.linalg.solve(A, v)
                    assert.are.same({3}, xv:shape())
                    local want = ref_solve(a, {{b[1][1]}, {b[1][2]}, {b[1][3]}})
                    for i = 1, 3 do assert.is_true(abs(xv:totable()[i] - want[i][1]) <= tol * 10) end
                end
            end
        end)
    end

    it("det of small integer matrices is exact, a singular one 0", function()
        assert.are.equal(-2, ordo.linalg.det(ordo.tensor({{1, 2}, {3, 4}}, {dtype = "float64"})):item())
        assert.are.equal(0, ordo.linalg.det(ordo.tensor({{1, 2}, {2, 4}}, {dtype = "float64"})):item())
        assert.are.equal(1, ordo.linalg.det(ordo.empty({0, 0}, {dtype = "float64"})):item())
        local s, l = ordo.linalg.slogdet(ordo.tensor({{1, 2}, {2, 4}}, {dtype = "float32"}))
        assert.are.equal(0, s:item())
        assert.are.equal(-huge, l:item())
        -- a batch: only the singular one is 0
        local A = ordo.tensor({{{2, 0}, {0, 3}}, {{1, 1}, {1, 1}}, {{0, 1}, {1, 0}}}, {dtype = "float64"})
        assert.are.same({6, 0, -1}, ordo.linalg.det(A):totable())
        local s3, l3 = ordo.linalg.slogdet(A)
        assert.are.same({1, 0, -1}, s3:totable())
        assert.are.same({log(6), -huge, 0}, l3:totable())
    end)

    it("a NaN in A gives NaN, never 'singular', wherever it sits (a column of zeros and a NaN)", function()
        local nan = 0 / 0
        local function isnan(v) return v ~= v end
        for _, dt in ipairs({"float64", "float32"}) do
            local f = {dtype = dt}
            -- the NaN is the only nonzero of its column below the diagonal:
            -- the zero pivot search passed over it (det 0, inv "singular")
            for _, m in ipairs({{{0, 1}, {nan, 0}}, {{0, 0}, {nan, 1}}, {{1, 2, 3}, {2, 4, 6}, {nan, 1, 0}}, {{nan, 1}, {0, 0}}}) do
                local A = ordo.tensor(m, f)
                assert(isnan(ordo.linalg.det(A):item()), dt .. ": det is not NaN")
                local s, l = ordo.linalg.slogdet(A)
                assert(isnan(s:item()) and isnan(l:item()), dt .. ": slogdet is not NaN")
                assert(isnan(ordo.linalg.inv(A):sum():item()), dt .. ": inv is not NaN")
                assert(isnan(ordo.linalg.solve(A, ordo.ones({#m}, f)):sum():item()), dt .. ": solve is not NaN")
                -- and the gradient of det is NaN too
                local x = A:clone():requires_grad()
                ordo.linalg.det(x):backward()
                for _, row in ipairs(x.grad:totable()) do
                    for _, v in ipairs(row) do assert(isnan(v), dt .. ": det's gradient is not NaN") end
                end
            end
        end
    end)

    it("batches broadcast as Torch's and every matrix agrees with the reference", function()
        -- A 2x1x3x3, B 4x3x2 -> X 2x4x3x2
        local as, bs = {}, {}
        for i = 1, 2 do as[i] = {rand_matrix(3, 11 * i)} end
        for j = 1, 4 do bs[j] = rand_rows(3, 2, 5 * j) end
        local A, B = ordo.tensor(as, {dtype = "float64"}), ordo.tensor(bs, {dtype = "float64"})
        local X = ordo.linalg.solve(A, B)
        assert.are.same({2, 4, 3, 2}, X:shape())
        local x = X:totable()
        for i = 1, 2 do
            for j = 1, 4 do close2(x[i][j], ref_solve(as[i][1], bs[j]), 1e-12, fmt("X[%d][%d]", i, j)) end
        end
        -- a batch of vectors (B of A's shape without its last dim)
        local A3 = ordo.tensor({rand_matrix(4, 1), rand_matrix(4, 2)}, {dtype = "float64"})
        local b3 = rand_rows(2, 4, 9)
        local xv = ordo.linalg.solve(A3, ordo.tensor(b3, {dtype = "float64"}))
        assert.are.same({2, 4}, xv:shape())
        for i = 1, 2 do
            local col = {}
            for r = 1, 4 do col[r] = {b3[i][r]} end
            local want = ref_solve(A3:totable()[i], col)
            for r = 1, 4 do assert.is_true(abs(xv:totable()[i][r] - want[r][1]) <= 1e-12) end
        end
        -- inv and det of a batch
        local inv = ordo.linalg.inv(A3):totable()
        local det = ordo.linalg.det(A3):totable()
        for i = 1, 2 do
            local a = A3:totable()[i]
            close2(inv[i], ref_solve(a, eye_rows(4)), 1e-12, "inv " .. i)
            assert.is_true(abs(det[i] - ref_det(a)) <= 1e-12 * abs(ref_det(a)))
        end
    end)

    it("reads transposed and other strided views", function()
        local a, b = rand_matrix(5, 3), rand_rows(2, 5, 4) -- B given as 2x5, used transposed
        local A = ordo.tensor(a, {dtype = "float64"})
        local At = A:t() -- a view
        assert.is_false(At:is_contiguous())
        local Bt = ordo.tensor(b, {dtype = "float64"}):t()
        local at = At:totable()
        close2(ordo.linalg.solve(At, Bt):totable(), ref_solve(at, Bt:totable()), 1e-12, "solve of views")
        close2(ordo.linalg.inv(At):totable(), ref_solve(at, eye_rows(5)), 1e-12, "inv of a view")
        assert.is_true(abs(ordo.linalg.det(At):item() - ref_det(at)) <= 1e-12 * abs(ref_det(at)))
        -- a batch of transposed matrices, every other one of a larger batch
        local big = ordo.tensor({rand_matrix(3, 1), rand_matrix(3, 2), rand_matrix(3, 3)}, {dtype = "float64"})
        local sel = big:transpose(2, 3):narrow(1, 2, 2)
        local d = ordo.linalg.det(sel):totable()
        for i = 1, 2 do
            local m = sel:totable()[i]
            assert.is_true(abs(d[i] - ref_det(m)) <= 1e-12 * abs(ref_det(m)))
        end
    end)

    it("a singular matrix fails solve and inv naming the matrix; the inputs stay intact", function()
        local A = ordo.tensor({{{2, 0}, {0, 2}}, {{1, 0}, {0, 1}}, {{1, 2}, {2, 4}}, {{3, 0}, {0, 1}}},
                              {dtype = "float64"})
        local before = A:totable()
        raises("linalg.solve: matrix 3 of the batch (of 4, counting from 1) is singular", function()
            ordo.linalg.solve(A, ordo.ones({4, 2, 1}, {dtype = "float64"})):totable()
        end)
        raises("linalg.inv: matrix 3 of the batch (of 4, counting from 1) is singular", function()
            ordo.linalg.inv(A):totable()
        end)
        raises("linalg.inv: the matrix is singular", function()
            ordo.linalg.inv(ordo.zeros({3, 3}, {dtype = "float32"})):totable()
        end)
        local ok, err = pcall(function() return ordo.linalg.solve(A, A):totable() end)
        assert.is_false(ok)
        assert.is_nil(tostring(err):find("linalg_lu", 1, true), "named after the op, not its kernel: " .. tostring(err))
        assert.are.same(before, A:totable())
        -- the engine goes on
        assert.are.same({{0.5, 0}, {0, 0.5}}, ordo.linalg.inv(A:select(1, 1)):totable())
    end)

    it("bad inputs get clear errors", function()
        local f = {dtype = "float64"}
        raises("linalg.solve: A must be a square matrix or a batch of them (... x n x n), got shape 2x3",
               function() ordo.linalg.solve(ordo.zeros({2, 3}, f), ordo.zeros({2}, f)) end)
        raises("linalg.inv: A must be a square matrix or a batch of them (... x n x n), got shape scalar",
               function() ordo.linalg.inv(ordo.tensor(3, f)) end)
        raises("linalg.det: A must be a square matrix or a batch of them (... x n x n), got shape 4",
               function() ordo.linalg.det(ordo.zeros({4}, f)) end)
        raises("linalg.slogdet: A must be float32 or float64, got int64",
               function() ordo.linalg.slogdet(ordo.zeros({2, 2}, {dtype = "int64"})) end)
        raises("linalg.inv: A must be a tensor, got table", function() ordo.linalg.inv({{1}}) end)
        raises("linalg.solve: B must be a tensor, got nil", function() ordo.linalg.solve(ordo.eye(2, f)) end)
        raises("linalg.solve: A and B must have one dtype, got float64 and float32",
               function() ordo.linalg.solve(ordo.eye(2, f), ordo.ones({2})) end)
        raises("linalg.solve: A must be float32 or float64, got int32", function()
            ordo.linalg.solve(ordo.eye(2, {dtype = "int32"}), ordo.ones({2}, {dtype = "int32"}))
        end)
        raises("linalg.solve: B must have at least 1 dim, got a scalar",
               function() ordo.linalg.solve(ordo.eye(2, f), ordo.tensor(1, f)) end)
        raises("linalg.solve: A of shape 3x3 and B of shape 4x2 do not fit (B must have 3 rows, as A is 3 x 3)",
               function() ordo.linalg.solve(ordo.eye(3, f), ordo.ones({4, 2}, f)) end)
        raises("linalg.solve: the batch dims of A (shape 2x3x3) and B (shape 3x3x1) do not broadcast (2 against 3)",
               function() ordo.linalg.solve(ordo.eye(3, f):expand(2, 3, 3), ordo.ones({3, 3, 1}, f)) end)
        -- a Torch keyword (out = ..., left = ...) is not dropped without a word
        local A2, B2 = ordo.eye(2, f), ordo.ones({2, 2}, f)
        raises("linalg.det: takes A alone, got 2 arguments", function() ordo.linalg.det(A2, {out = B2}) end)
        raises("linalg.inv: takes A alone, got 2 arguments", function() ordo.linalg.inv(A2, {out = B2}) end)
        raises("linalg.slogdet: takes A alone, got 2 arguments", function() ordo.linalg.slogdet(A2, 1) end)
        raises("linalg.solve: takes A, B and an options table, got 4 arguments",
               function() ordo.linalg.solve(A2, B2, nil, {out = B2}) end)
        raises("linalg.solve: unknown option 'out' (expected left)", function() ordo.linalg.solve(A2, B2, {out = B2}) end)
        raises("linalg.solve: left must be a boolean, got number", function() ordo.linalg.solve(A2, B2, {left = 0}) end)
        raises("linalg.solve: left = false needs B of ... x k x n, not a vector or a batch of vectors (B of shape 2, A 2x2)",
               function() ordo.linalg.solve(A2, ordo.ones({2}, f), {left = false}) end)
        raises("linalg.solve: A of shape 2x2 and B of shape 2x3 do not fit (B must have 2 columns with left = false, " ..
               "as A is 2 x 2)", function() ordo.linalg.solve(A2, ordo.ones({2, 3}, f), {left = false}) end)
        assert.are.same({{1, 1}, {1, 1}}, B2:totable())
    end)

    it("solve with left = false gives X with X A = B, as Torch's (batches, gradients)", function()
        for _, dt in ipairs({"float64", "float32"}) do
            local f = {dtype = dt}
            local A = ordo.tensor({{2, 1}, {0, 4}}, f)
            local B = ordo.tensor({{2, 5}, {4, 2}, {-2, 3}}, f)
            -- X A = B row by row: x1 = b1 / 2, x2 = (b2 - x1) / 4
            assert.are.same({{1, 1}, {2, 0}, {-1, 1}}, ordo.linalg.solve(A, B, {left = false}):totable())
            -- left = true is the default
            assert.are.same(ordo.linalg.solve(A, B:t()):totable(), ordo.linalg.solve(A, B:t(), {left = true}):totable())
            -- a batch of A against one B: X of the broadcast batch shape
            local Ab = ordo.stack({A, A * 2})
            local X = ordo.linalg.solve(Ab, B, {left = false})
            assert.are.same({2, 3, 2}, X:shape())
            close2(X[2]:totable(), {{0.5, 0.5}, {1, 0}, {-0.5, 0.5}}, DT[dt], dt .. " batch")
        end
        local f = {dtype = "float64"}
        local A = ordo.tensor({rand_matrix(3, 9), rand_matrix(3, 10)}, f):requires_grad()
        local B = ordo.tensor(rand_rows(4, 3, 11), f):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(a, b) return ordo.linalg.solve(a, b, {left = false}) end,
                                               {A, B}))
    end)

    it("gradients match central differences (gradcheck, float64)", function()
        local f = {dtype = "float64"}
        local function leaf(rows) return ordo.tensor(rows, f):requires_grad() end
        local A, B = leaf(rand_matrix(3, 2)), leaf(rand_rows(3, 2, 3))
        assert.is_true(ordo.autograd.gradcheck(ordo.linalg.solve, {A, B}))
        assert.is_true(ordo.autograd.gradcheck(ordo.linalg.inv, {A}))
        assert.is_true(ordo.autograd.gradcheck(ordo.linalg.det, {A}))
        assert.is_true(ordo.autograd.gradcheck(function(x) local _, l = ordo.linalg.slogdet(x) return l end, {A}))
        -- a negative determinant: log|det| still
        local N = leaf({{0, 2, 1}, {3, 1, 0}, {1, 0, 4}})
        assert.are.equal(-1, ordo.linalg.slogdet(N):item())
        assert.is_true(ordo.autograd.gradcheck(function(x) local _, l = ordo.linalg.slogdet(x) return l end, {N}))
        assert.is_true(ordo.autograd.gradcheck(ordo.linalg.det, {N}))
        -- batches, broadcast, and a vector right-hand side
        local Ab = leaf({rand_matrix(3, 5), rand_matrix(3, 6)})
        local v = leaf({0.5, -1, 2})
        assert.is_true(ordo.autograd.gradcheck(ordo.linalg.solve, {Ab, v}))
        assert.is_true(ordo.autograd.gradcheck(ordo.linalg.solve, {A, leaf({rand_rows(3, 2, 7), rand_rows(3, 2, 8)})}))
        assert.is_true(ordo.autograd.gradcheck(ordo.linalg.inv, {Ab}))
        assert.is_true(ordo.autograd.gradcheck(ordo.linalg.det, {Ab}))
        -- at a singular matrix det is a polynomial all the same: its
        -- gradient (the cofactor matrix) matches central differences
        assert.is_true(ordo.autograd.gradcheck(ordo.linalg.det, {leaf({{1, 2}, {2, 4}})}))
        assert.is_true(ordo.autograd.gradcheck(ordo.linalg.det, {leaf({{1, 2, 3}, {4, 5, 6}, {7, 8, 9}})}))
        assert.is_true(ordo.autograd.gradcheck(ordo.linalg.det, {leaf({{0, 1, 0}, {0, 0, 1}, {0, 0, 0}})}))
        assert.is_true(ordo.autograd.gradcheck(ordo.linalg.det, {leaf({{{1, 1}, {1, 1}}, {{0, 0}, {0, 0}}})}))
        -- only B needs a gradient
        local Ac = ordo.tensor(rand_matrix(3, 4), f)
        assert.is_true(ordo.autograd.gradcheck(ordo.linalg.solve, {Ac, B}))
    end)

    -- d det(A) / dA is the cofactor matrix adj(A)^T: det(A) A^-T for an
    -- invertible A, and defined (nonzero at rank n-1, zero below) for a
    -- singular one, as Torch's
    it("det's gradient is the cofactor matrix, at singular matrices too (closed forms)", function()
        for _, dt in ipairs({"float64", "float32"}) do
            local f = {dtype = dt}
            local function grad_of(rows)
                local A = ordo.tensor(rows, f):requires_grad()
                ordo.linalg.det(A):sum():backward()
                return A.grad:totable()
            end
            -- 2 x 2: the gradient of ad - bc is {{d, -c}, {-b, a}}, singular or not
            for _, m in ipairs({{1, 2, 3, 4}, {1, 2, 2, 4}, {3, -1, 6, -2}, {0, 0, 0, 5}, {0, 0, 0, 0}}) do
                local a, b, c, d = unpack(m)
                close2(grad_of({{a, b}, {c, d}}), {{d, -c}, {-b, a}}, 0, dt .. " 2 x 2 " .. table.concat(m, ","))
            end
            -- a batch of them, singular and not, each its own
            local Bt = ordo.tensor({{{1, 2}, {2, 4}}, {{2, 0}, {0, 3}}, {{0, 0}, {0, 0}}}, f):requires_grad()
            ordo.linalg.det(Bt):sum():backward()
            assert.are.same({{{4, -2}, {-2, 1}}, {{3, 0}, {0, 2}}, {{0, 0}, {0, 0}}}, Bt.grad:totable())
            -- rank 2 of 3: every cofactor of {{1,2,3},{4,5,6},{7,8,9}}
            close2(grad_of({{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}), {{-3, 6, -3}, {6, -12, 6}, {-3, 6, -3}}, DT[dt],
                   dt .. " rank 2 of 3")
            -- a shift matrix: partial pivoting meets a zero pivot in two
            -- columns though the rank is 2; the one nonzero cofactor is C31
            close2(grad_of({{0, 1, 0}, {0, 0, 1}, {0, 0, 0}}), {{0, 0, 0}, {0, 0, 0}, {1, 0, 0}}, 0, dt .. " shift")
            -- rank 1 of 3: every cofactor is 0
            close2(grad_of({{1, 2, 3}, {2, 4, 6}, {-1, -2, -3}}), {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}, 0, dt .. " rank 1")
            -- upstream gradients scale each matrix's; a transposed view's is transposed
            local A = ordo.tensor({{1, 2}, {2, 4}}, f):requires_grad()
            local d3 = ordo.linalg.det(A) * 3
            d3:backward()
            assert.are.same({{12, -6}, {-6, 3}}, A.grad:totable())
            local T = ordo.tensor({{1, 3}, {2, 4}}, f):requires_grad()
            ordo.linalg.det(T:t()):backward()
            assert.are.same({{4, -2}, {-3, 1}}, T.grad:totable())
        end
    end)

    it("det's gradient at random singular matrices matches the cofactors of a plain-Lua reference", function()
        -- A = U V with U n x (n-1): rank n-1, each cofactor the determinant
        -- of a minor (by the reference's elimination)
        local function minor(m, r, c)
            local o = {}
            for i = 1, #m do
                if i ~= r then
                    local row = {}
                    for j = 1, #m do if j ~= c then row[#row + 1] = m[i][j] end end
                    o[#o + 1] = row
                end
            end
            return o
        end
        for _, n in ipairs({2, 3, 5, 8}) do
            local U, V = rand_rows(n, n - 1, 3 * n), rand_rows(n - 1, n, 5 * n)
            local A = ordo.matmul(ordo.tensor(U, {dtype = "float64"}), ordo.tensor(V, {dtype = "float64"}))
            local rows = A:totable()
            local want, scale = {}, 0
            for i = 1, n do
                want[i] = {}
                for j = 1, n do
                    want[i][j] = ((i + j) % 2 == 0 and 1 or -1) * ref_det(minor(rows, i, j))
                    scale = math.max(scale, abs(want[i][j]))
                end
            end
            for _, dt in ipairs({"float64", "float32"}) do
                local x = A:to(dt):detach():requires_grad_()
                ordo.linalg.det(x):backward()
                local got = x.grad:totable()
                -- float32: A itself is rounded, so the cofactors move by
                -- about its rounding times their size
                local tol = dt == "float64" and 1e-9 or 1e-4
                for i = 1, n do
                    for j = 1, n do
                        local g, w = got[i][j], want[i][j]
                        if not (abs(g - w) <= tol * scale) then
                            error(fmt("%s n = %d: [%d][%d] is %.17g, expected %.17g", dt, n, i, j, g, w))
                        end
                    end
                end
            end
        end
    end)

    it("slogdet's gradient at a singular matrix is inf and NaN (adj(A)^T / 0), never a failure", function()
        for _, dt in ipairs({"float64", "float32"}) do
            local f = {dtype = dt}
            local function grad_of(rows)
                local A = ordo.tensor(rows, f):requires_grad()
                local sign, logabs = ordo.linalg.slogdet(A)
                assert.are.equal(0, sign:sum():item())
                assert.are.equal(-huge, logabs:sum():item())
                logabs:sum():backward()
                return A.grad:totable()
            end
            assert.are.same({{huge, -huge}, {-huge, huge}}, grad_of({{1, 2}, {2, 4}}))
            -- rank 1 of 3: every cofactor is 0, so every entry is NaN
            for _, row in ipairs(grad_of({{1, 2, 3}, {2, 4, 6}, {-1, -2, -3}})) do
                for _, v in ipairs(row) do assert(v ~= v, dt .. ": expected NaN, got " .. tostring(v)) end
            end
            -- an invertible matrix of the same batch is not touched: A^-T
            local B = ordo.tensor({{{1, 2}, {2, 4}}, {{2, 0}, {0, 4}}}, f):requires_grad()
            local _, l = ordo.linalg.slogdet(B)
            l:sum():backward()
            local g = B.grad:totable()
            assert.are.same({{0.5, 0}, {0, 0.25}}, g[2])
            assert.are.same({{huge, -huge}, {-huge, huge}}, g[1])
        end
    end)

    it("Torch's other names: A:det(), A:inverse(), A:slogdet(), ordo.det..., and logdet", function()
        local f = {dtype = "float64"}
        local A = ordo.tensor({{{2, 1}, {1, 3}}, {{0, 1}, {1, 0}}, {{1, 2}, {2, 4}}}, f)
        assert.are.same({5, -1, 0}, A:det():totable())
        assert.are.same({5, -1, 0}, ordo.det(A):totable())
        close2(A[1]:inverse():totable(), {{0.6, -0.2}, {-0.2, 0.4}}, 1e-15, "inverse")
        assert.are.same(ordo.linalg.inv(A[1]):totable(), ordo.inverse(A[1]):totable())
        local s, l = A:slogdet()
        assert.are.same({1, -1, 0}, s:totable())
        assert.are.equal(-huge, l:totable()[3])
        -- logdet: -inf for a singular matrix, NaN for a negative determinant
        local ld = ordo.logdet(A):totable()
        assert(abs(ld[1] - log(5)) < 1e-14, "logdet: " .. ld[1])
        assert(ld[2] ~= ld[2], "logdet of a negative determinant: " .. tostring(ld[2]))
        assert.are.equal(-huge, ld[3])
        -- its gradient is A^-T, and 0 where the value is NaN (Torch's)
        local Ag = A:narrow(1, 1, 2):clone():requires_grad()
        Ag:logdet():sum():backward()
        close2(Ag.grad[1]:totable(), {{0.6, -0.2}, {-0.2, 0.4}}, 1e-15, "logdet's gradient")
        assert.are.same({{0, 0}, {0, 0}}, Ag.grad[2]:totable())
        assert.is_true(ordo.autograd.gradcheck(ordo.logdet, {ordo.tensor(rand_matrix(3, 12), f):requires_grad()}))
        raises("logdet: takes A alone, got 2 arguments", function() ordo.logdet(A, 1) end)
        raises("linalg.slogdet: A must be float32 or float64, got int32",
               function() ordo.ones({2, 2}, {dtype = "int32"}):logdet() end)
    end)
    -- (on a GPU: spec/gpu_spec.lua, "linalg solve, inv, det and slogdet match the cpu")
end)
