-- ordo.format: tensors printed Torch-style (internal to the package).
--
--  1  2  3
--  4  5  6
-- [ordo.FloatTensor of size 2x3 on cpu(0)]
--
-- Every element shown shares one format: integers when all of them are
-- integral (and below 1e9), else fixed point with `precision` (4)
-- decimals, else (very large or small magnitudes, or a span of more than
-- 1000x) scientific.  Rows wider than `linewidth` go in pieces of columns.
-- Past `threshold` elements the middle of every dim longer than 2*edge is
-- elided ("...").
local util = require "ordo.util"
local extra_arg = util.extra_arg -- a further positional argument: an error naming it

local floor, abs, huge = math.floor, math.abs, math.huge
local fmt, rep, concat = string.format, string.rep, table.concat

-- The print options (ordo.set_printoptions): edge is Torch's edgeitems.
local M = {threshold = 1000, edge = 3, linewidth = 80, precision = 4, sci_mode = "auto"}

local PROFILES = {
    default = {precision = 4, threshold = 1000, edgeitems = 3, linewidth = 80, sci_mode = "auto"},
    short = {precision = 2, threshold = 1000, edgeitems = 2, linewidth = 80, sci_mode = "auto"},
    full = {precision = 4, threshold = huge, edgeitems = 3, linewidth = 80, sci_mode = "auto"},
}

local function print_value(v)
    if type(v) == "string" then return fmt("%q", v) end
    if type(v) == "number" then return tostring(v) end
    return util.typename(v)
end

-- set_printoptions{precision =, threshold =, edgeitems =, linewidth =,
-- sci_mode =, profile =}, as PyTorch's: decimals shown, the element count
-- past which the middle of each dim is elided (math.huge: never), the
-- elements shown at each end then, the characters per line, scientific
-- notation always (true), never (false) or as the values need ("auto");
-- profile "default", "short" or "full" sets them all first.  Options not
-- given keep their values.  Returns the options as they were, a table
-- that set_printoptions takes back.
function M.set_printoptions(opts, extra)
    if extra ~= nil then extra_arg("set_printoptions", "(opts)", extra) end
    local fname = "set_printoptions"
    if type(opts) ~= "table" or getmetatable(opts) ~= nil then
        util.fail(fmt("%s: expected an options table, got %s", fname, util.typename(opts)))
    end
    local known = {precision = true, threshold = true, edgeitems = true, linewidth = true, sci_mode = true,
                   profile = true}
    for k in pairs(opts) do
        if not known[k] then
            util.fail(fmt("%s: unknown option '%s' (expected edgeitems, linewidth, precision, profile, sci_mode, " ..
                          "threshold)", fname, tostring(k)))
        end
    end
    local new = {precision = M.precision, threshold = M.threshold, edgeitems = M.edge, linewidth = M.linewidth,
                 sci_mode = M.sci_mode}
    local old = {precision = M.precision, threshold = M.threshold, edgeitems = M.edge, linewidth = M.linewidth,
                 sci_mode = M.sci_mode}
    if opts.profile ~= nil then
        local p = PROFILES[opts.profile]
        if not p then
            util.fail(fmt("%s: profile must be \"default\", \"short\" or \"full\", got %s", fname,
                          print_value(opts.profile)))
        end
        for k, v in pairs(p) do new[k] = v end
    end
    local function int_in(k, lo, hi, what)
        local v = opts[k]
        if v == nil then return end
        if type(v) ~= "number" or not (v >= lo and v <= hi) or (v ~= floor(v) and v ~= huge) or
           (v == huge and k ~= "threshold") then
            util.fail(fmt("%s: %s must be %s, got %s", fname, k, what, print_value(v)))
        end
        new[k] = v
    end
    int_in("precision", 0, 16, "an integer from 0 to 16")
    int_in("threshold", 0, huge, "an integer >= 0 (or math.huge: never elide)")
    -- (no upper bound: edgeitems = 2^32 was refused as "must be an integer
    -- >= 1", and a large one only means nothing is elided)
    int_in("edgeitems", 1, huge, "an integer >= 1")
    int_in("linewidth", 1, huge, "an integer >= 1")
    if opts.sci_mode ~= nil then
        local v = opts.sci_mode
        if v ~= true and v ~= false and v ~= "auto" then
            util.fail(fmt("%s: sci_mode must be true, false or \"auto\", got %s", fname, print_value(v)))
        end
        new.sci_mode = v
    end
    M.precision, M.threshold, M.edge, M.linewidth, M.sci_mode =
        new.precision, new.threshold, new.edgeitems, new.linewidth, new.sci_mode
    return old
end

-- Index lists per dim: all of them, or the edges with false marking "...".
local function shown(size, elide, edge)
    local idx = {}
    if elide and size > 2 * edge then
        for i = 1, edge do idx[#idx + 1] = i end
        idx[#idx + 1] = false
        for i = size - edge + 1, size do idx[#idx + 1] = i end
    else
        for i = 1, size do idx[i] = i end
    end
    return idx
end

local function number_str(v, mode)
    if v ~= v then return "nan" end
    if v == huge then return "inf" end
    if v == -huge then return "-inf" end
    if mode == "int" then
        if v == 0 then return 1 / v < 0 and "-0" or "0" end -- a float -0.0 keeps its sign, as in the other modes
        return fmt("%.0f", v)
    end
    return fmt(mode, v)
end

-- The dims of shape whose middle is elided (a list of booleans), or nil
-- when every element shows.  A caller may copy only the shown elements: in
-- each elided dim the first and the last `edge` (compact, in format).
function M.elided(shape)
    local numel = 1
    for i = 1, #shape do numel = numel * shape[i] end
    if numel <= M.threshold then return nil end
    local dims, any = {}, false
    for d = 1, #shape do
        dims[d] = shape[d] > 2 * M.edge
        any = any or dims[d]
    end
    return any and dims or nil
end

-- info: shape (Lua table), strides (Lua table), get(offset) -> number or
-- string, isfloat, header (footer text without brackets); compact: the
-- values hold only the shown elements of each elided dim (M.elided), the
-- first `edge` then the last `edge`, and strides are theirs.
function M.format(info)
    local shape, strides, get = info.shape, info.strides, info.get
    local nd = #shape
    local footer = "[" .. info.header .. "]"
    local numel = 1
    for i = 1, nd do numel = numel * shape[i] end
    if numel == 0 then return footer end

    local elide = numel > M.threshold
    local idx = {}
    for d = 1, nd do idx[d] = shown(shape[d], elide, M.edge) end
    -- the position of index i of dim d in the values (0-based)
    local function pos(d, i)
        if info.compact and i > M.edge and elide and shape[d] > 2 * M.edge then
            return i - 1 - (shape[d] - 2 * M.edge)
        end
        return i - 1
    end

    -- every shown value once, to choose the format
    local vals = {}
    local function collect(d, off)
        if d > nd then
            vals[#vals + 1] = get(off)
            return
        end
        for _, i in ipairs(idx[d]) do
            if i then collect(d + 1, off + pos(d, i) * strides[d]) end
        end
    end
    collect(1, 0)

    local mode = "int"
    if info.isfloat then
        local maxabs, minabs, integral = 0, huge, true
        for _, v in ipairs(vals) do
            if v == v and v ~= huge and v ~= -huge then
                local a = abs(v)
                if a > maxabs then maxabs = a end
                if a > 0 and a < minabs then minabs = a end
                if v ~= floor(v) then integral = false end
            end
        end
        -- as Torch: integral values up to 1e9 as integers (a float32 1e14
        -- showed as 100000000376832); fractions in fixed point unless a
        -- magnitude is extreme or they span more than 1000x, where 4
        -- decimals would drop the small ones' digits (0.00012 beside 0.5
        -- showed as 0.0001)
        -- (precision 0 keeps the point, "2.", as PyTorch: 1.5 and 2.5 showed
        -- as 2 and 3, as if the tensor held those integers)
        local sci, fixed = "%." .. M.precision .. "e", (M.precision == 0 and "%#." or "%.") .. M.precision .. "f"
        if M.sci_mode == true then
            mode = sci
        elseif integral then
            if maxabs >= 1e9 and M.sci_mode == "auto" then mode = sci end
        elseif M.sci_mode == false then
            mode = fixed
        else
            mode = (maxabs >= 1e6 or minabs < 1e-4 or maxabs > 1000 * minabs) and sci or fixed
        end
    end
    local width = 1
    for i, v in ipairs(vals) do
        local s = type(v) == "string" and v or number_str(v, mode)
        vals[i] = s
        if #s > width then width = #s end
    end
    local cell = "%" .. (width + 1) .. "s"

    local k = 0
    local function nextval()
        k = k + 1
        return fmt(cell, vals[k])
    end

    local out = {}
    if nd == 0 then
        out[1] = nextval()
    elseif nd == 1 then
        for _, i in ipairs(idx[1]) do out[#out + 1] = i and nextval() or fmt(cell, "...") end
    else
        -- leading dims: one 2-D block per shown index combination.  Rows
        -- wider than M.linewidth go in pieces of columns, each headed
        -- "Columns a to b", as Torch (a 5x200 tensor printed 1600-character
        -- lines)
        local rows, cols = idx[nd - 1], idx[nd]
        local nc = 0
        for _, c in ipairs(cols) do if c then nc = nc + 1 end end
        -- columns per line (all of them when their middle is elided: at most
        -- 2*edge + 1 cells, which stay on one line)
        local per = nc < #cols and #cols or floor((M.linewidth + 1) / (width + 2))
        if per < 1 then per = 1 end
        local function matrix()
            local k0 = k
            local from = 1
            local ci0 = 0 -- shown columns before this piece
            while from <= #cols do
                local to = #cols <= per and #cols or from + per - 1
                if to > #cols then to = #cols end
                if #cols > per then
                    if from > 1 then out[#out + 1] = "" end
                    local a, b = cols[from] or cols[from + 1], cols[to] or cols[to - 1]
                    out[#out + 1] = a == b and fmt("Column %d", a) or fmt("Columns %d to %d", a, b)
                end
                local ri = 0
                for _, r in ipairs(rows) do
                    if not r then
                        out[#out + 1] = fmt(cell, "...")
                    else
                        local row, ci = {}, ci0
                        for j = from, to do
                            if cols[j] then
                                ci = ci + 1
                                row[#row + 1] = fmt(cell, vals[k0 + ri * nc + ci])
                            else
                                row[#row + 1] = fmt(cell, "...")
                            end
                        end
                        out[#out + 1] = concat(row, " ")
                        ri = ri + 1
                    end
                end
                for j = from, to do if cols[j] then ci0 = ci0 + 1 end end
                from = to + 1
            end
            local nr = 0
            for _, r in ipairs(rows) do if r then nr = nr + 1 end end
            k = k0 + nr * nc
        end
        if nd == 2 then
            matrix()
        else
            local prefix = {}
            local function blocks(d)
                if d > nd - 2 then
                    if #out > 0 then out[#out + 1] = "" end
                    out[#out + 1] = "(" .. concat(prefix, ",") .. ",.,.) = "
                    matrix()
                    return
                end
                for _, i in ipairs(idx[d]) do
                    if i then
                        prefix[d] = i
                        blocks(d + 1)
                    else
                        out[#out + 1] = ""
                        out[#out + 1] = rep(" ", 1) .. "..."
                    end
                end
            end
            blocks(1)
        end
    end
    out[#out + 1] = footer
    return concat(out, "\n")
end

return M
