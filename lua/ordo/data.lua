-- ordo.data: datasets and batches for training loops.
--
--   local data = ordo.data
--   local ds = data.fashion_mnist{limit_train = 1000}      -- {train = {images, labels}, test = ...}
--   local loader = data.loader(ds.train.images, ds.train.labels, {batch_size = 64, shuffle = true})
--   for epoch = 1, 3 do
--       for i, xb, yb in loader:iter() do ... end             -- a new permutation each epoch
--   end
--   local train, val = unpack(data.random_split(data.TensorDataset(x, y), {0.8, 0.2}, {seed = 1}))
--   for i, xb, yb in data.loader(train, {batch_size = 64, shuffle = true}) do ... end
--   local t = data.read_idx("train-labels-idx1-ubyte.gz")    -- any IDX file, gzip or plain
--   local x, names = data.read_csv("measurements.csv")       -- a numeric CSV file, header optional
--   data.write_csv("out.csv", x, {header = names})            -- and back, exactly
--
-- Labels count classes from 1, like every index in ordo (argmax returns
-- 1-based indices, gather takes them): Fashion-MNIST's label k in the file
-- is k + 1 here, and fashion_mnist_classes[k + 1] names it.
--
-- File bytes go straight into tensor storage (outside the Lua heap) through
-- zlib's gzread, or through io for plain files in 1 MiB pieces.
local cdef = require "ordo.cdef"
local util = require "ordo.util"
local extra_arg = util.extra_arg -- a further positional argument: an error naming it
local tensor = require "ordo.tensor"

local ffi, C = cdef.ffi, cdef.C
local fail, typename = util.fail, util.typename
local fmt, concat = string.format, table.concat
local floor, min = math.floor, math.min
local byte = string.byte
local bswap = require("bit").bswap
local type, tostring, pairs, ipairs, setmetatable, getmetatable, pcall, error, select =
    type, tostring, pairs, ipairs, setmetatable, getmetatable, pcall, error, select

local Tensor, is_tensor = tensor.Tensor, tensor.is_tensor

local M = {}

-- A bad option's value in an error: a number as itself, anything else with
-- its type (batch_size = "3" said "got 3", as if 3 were refused)
local function shown(v)
    if type(v) == "number" then return tostring(v) end
    if type(v) == "string" then return fmt("the string %q", v) end
    return typename(v)
end

local function is_posint(x) return type(x) == "number" and x == floor(x) and x >= 1 and x < 2 ^ 53 end
local function is_natural(x) return type(x) == "number" and x == floor(x) and x >= 0 and x < 2 ^ 53 end

local function check_opts(fname, opts, known)
    if opts == nil then return {} end
    if type(opts) ~= "table" or getmetatable(opts) ~= nil then
        fail(fmt("%s: expected an options table, got %s", fname, typename(opts)))
    end
    for k in pairs(opts) do
        if not known[k] then
            local names = {}
            for name in pairs(known) do names[#names + 1] = name end
            table.sort(names)
            fail(fmt("%s: unknown option '%s' (expected %s)", fname, tostring(k), concat(names, ", ")))
        end
    end
    return opts
end

-- The bytes of t's storage, for writing from the host.  Waits for every op
-- that reads or writes them first (a tensor fresh from ordo.empty has none,
-- so this returns at once; it keeps the rule for any other tensor).
local function host_bytes(fname, t)
    local c = t._c
    if c.ctx.dev_type ~= cdef.CPU then
        fail(fname .. ": internal: host write to a " .. tostring(t:device()) .. " tensor")
    end
    local s = c.storage
    if util.wait_ready then util.wait_ready(s.engine, s.var) end
    if C.ordo_wait_to_write(s.engine, s.var) ~= 0 then
        fail(fname .. ": " .. util.op_message(ffi.string(C.ordo_last_error())))
    end
    C.ordo_tensor_host_written(c) -- (its value will exist: as if an op made it)
    return ffi.cast("uint8_t *", util.host_ptr(c))
end

-- ---------------------------------------------------------------- byte sources

local PIECE = 2 ^ 20 -- bytes per io read of a plain file (a Lua string each)
local GZ_MAX = 2 ^ 30 -- gzread takes an unsigned count: read in pieces below 2^31

-- path opened for reading ("rb"), or an error naming fname, the path once
-- and io's reason (io's message starts with the path itself).  io.open
-- opens a directory on Linux and only the first read fails (EISDIR), so a
-- read of nothing checks that the bytes can be read at all.
local function open_file(fname, path)
    if type(path) ~= "string" then fail(fmt("%s: expected a file path, got %s", fname, typename(path))) end
    if path == "" then fail(fname .. ": the file path is empty") end
    local f, err = io.open(path, "rb")
    if not f then
        err = tostring(err)
        if err:sub(1, #path + 2) == path .. ": " then err = err:sub(#path + 3) end
        fail(fmt("%s: cannot open %s: %s", fname, path, err))
    end
    local ok, rerr, code = f:read(0) -- nil and no message: an empty file, which is for the caller to judge
    if ok == nil and rerr then
        f:close()
        if code == 21 then fail(fmt("%s: %s is a directory, not a file", fname, path)) end -- EISDIR
        fail(fmt("%s: cannot read %s: %s", fname, path, tostring(rerr)))
    end
    return f
end

-- A reader over path: src.read(ptr, n) fills up to n bytes and returns how
-- many it got (fewer only at the end of the file); src.close().  gzip files
-- (by their magic bytes, not the name) go through zlib, others through io.
local function open_source(fname, path)
    local f = open_file(fname, path)
    -- nil for a pipe or FIFO (/dev/stdin), which cannot go back: the bytes
    -- read to look for gzip's magic are then handed out first (they were
    -- lost: a plain IDX file from a pipe was "not an IDX file")
    local size = f:seek("end")
    if size then f:seek("set", 0) end
    local head = f:read(2)
    if head ~= "\31\139" then
        local pending = ""
        if size then f:seek("set", 0) else pending = head or "" end
        return {
            -- bytes not read yet: a header's sizes are checked against it before allocating
            left = size and function() return size - f:seek() end or nil,
            read = function(p, n)
                local got = 0
                if #pending > 0 then
                    got = min(#pending, n)
                    ffi.copy(p, pending, got)
                    pending = pending:sub(got + 1)
                end
                while got < n do
                    local s = f:read(min(PIECE, n - got))
                    if not s then break end
                    ffi.copy(p + got, s, #s)
                    got = got + #s
                end
                return got
            end,
            close = function() f:close() end,
        }
    end
    f:close()
    if not size then
        -- zlib reads by path: a pipe reopened has lost what was read (or
        -- waits for a writer that is gone)
        fail(fmt("%s: %s is gzip-compressed and not a regular file (a pipe?): decompress it first (zcat)", fname,
                 path))
    end
    local z, zerr = cdef.zlib()
    if not z then fail(fmt("%s: %s is gzip-compressed, but %s", fname, path, zerr)) end
    local gz = z.gzopen(path, "rb")
    if gz == nil then fail(fmt("%s: zlib cannot open %s", fname, path)) end
    z.gzbuffer(gz, 256 * 1024) -- fewer, larger reads of the compressed file
    local errnum = ffi.new("int[1]")
    return {
        read = function(p, n)
            local got = 0
            while got < n do
                local r = z.gzread(gz, p + got, min(GZ_MAX, n - got))
                if r < 0 then
                    local msg = ffi.string(z.gzerror(gz, errnum))
                    fail(fmt("%s: reading %s: %s", fname, path, msg))
                end
                if r == 0 then
                    -- zlib hands out what it has of a truncated file and
                    -- only says so in gzerror (Z_BUF_ERROR): a file cut
                    -- in its last 8 bytes (the CRC and size) read whole
                    z.gzerror(gz, errnum)
                    if errnum[0] == -5 then
                        fail(fmt("%s: %s is truncated (the gzip stream ends early)", fname, path))
                    end
                    break
                end
                got = got + r
            end
            return got
        end,
        close = function() z.gzclose(gz) end,
    }
end

-- ---------------------------------------------------------------- IDX files

-- IDX type code -> element size in the file, tensor dtype, how to convert
local IDX_TYPES = {
    [0x08] = {size = 1, dtype = "uint8", name = "uint8"},
    [0x09] = {size = 1, dtype = "int32", name = "int8"},
    [0x0B] = {size = 2, dtype = "int32", name = "int16"},
    [0x0C] = {size = 4, dtype = "int32", name = "int32"},
    [0x0D] = {size = 4, dtype = "float32", name = "float32"},
    [0x0E] = {size = 8, dtype = "float64", name = "float64"},
}

local function read_exact(fname, path, src, p, n, what)
    local got = src.read(p, n)
    if got ~= n then
        fail(fmt("%s: %s is truncated: %s needs %d bytes, the file has %d", fname, path, what, n, got))
    end
end

-- The data of an IDX file into t, converted to native order.
local function read_idx_data(fname, path, src, ty, t, numel, what)
    local p = host_bytes(fname, t)
    if ty.size == 1 and ty.dtype == "uint8" then
        read_exact(fname, path, src, p, numel, what)
    elseif ty.size == 4 then
        -- in place: the file's big-endian words become native ones
        read_exact(fname, path, src, p, numel * 4, what)
        local w = ffi.cast("int32_t *", p)
        for i = 0, numel - 1 do w[i] = bswap(w[i]) end
    elseif ty.size == 8 then
        read_exact(fname, path, src, p, numel * 8, what)
        local w = ffi.cast("int32_t *", p)
        for i = 0, 2 * numel - 1, 2 do w[i], w[i + 1] = bswap(w[i + 1]), bswap(w[i]) end
    else
        -- int8 and int16 widen to int32: through a staging buffer
        local size = ty.size
        local per = floor(PIECE / size)
        local buf = ffi.new("uint8_t[?]", per * size)
        local out = ffi.cast("int32_t *", p)
        local done = 0
        while done < numel do
            local k = min(per, numel - done)
            read_exact(fname, path, src, buf, k * size, what)
            if size == 1 then
                local sb = ffi.cast("int8_t *", buf)
                for i = 0, k - 1 do out[done + i] = sb[i] end
            else
                for i = 0, k - 1 do
                    local v = buf[2 * i] * 256 + buf[2 * i + 1]
                    out[done + i] = v >= 32768 and v - 65536 or v
                end
            end
            done = done + k
        end
    end
end

local function read_idx_body(fname, path, src, limit)
    local head = ffi.new("uint8_t[4]")
    read_exact(fname, path, src, head, 4, "the header")
    if head[0] ~= 0 or head[1] ~= 0 or not IDX_TYPES[head[2]] then
        fail(fmt("%s: %s is not an IDX file (magic bytes %02x %02x %02x %02x; expected 00 00, " ..
                 "a type code 08, 09, 0b, 0c, 0d or 0e, and a dim count)", fname, path, head[0], head[1], head[2],
                 head[3]))
    end
    local ty, nd = IDX_TYPES[head[2]], head[3]
    if nd < 1 or nd > 8 then
        fail(fmt("%s: %s has %d dims (ordo tensors have 1 to 8)", fname, path, nd))
    end
    local dims = ffi.new("uint8_t[?]", 4 * nd)
    read_exact(fname, path, src, dims, 4 * nd, "the dims")
    local shape, numel = {}, 1
    for i = 1, nd do
        local b = dims + 4 * (i - 1)
        shape[i] = ((b[0] * 256 + b[1]) * 256 + b[2]) * 256 + b[3] -- big-endian
        numel = numel * shape[i]
    end
    local cut = limit and limit < shape[1]
    if cut then
        numel = numel / shape[1] * limit
        shape[1] = limit
    end
    local what = fmt("%s data of shape %s", ty.name, tensor.shape_str(shape))
    if src.left and numel * ty.size > src.left() then -- a damaged header: no allocation of its size
        -- (%.0f: a damaged header's size can pass 2^63, which %d wraps to a negative count)
        fail(fmt("%s: %s is truncated: %s needs %.0f bytes, the file has %d", fname, path, what, numel * ty.size,
                 src.left()))
    end
    local made, t = pcall(tensor.empty, shape, {dtype = ty.dtype})
    if not made then
        local why = tostring(t)
        -- (an engine that cannot start, a bad ORDO_* setting, is not the file's fault)
        local engine_err = why:match("(cannot start the default engine: .*)$")
        if engine_err then fail(fmt("%s: %s", fname, engine_err)) end
        fail(fmt("%s: %s declares %s: %s", fname, path, what, (why:gsub("^.-empty: ", ""))))
    end
    if numel > 0 then read_idx_data(fname, path, src, ty, t, numel, what) end
    -- bytes past the data mean the header is not the file's (a wrong dim,
    -- two files joined): what was read would be a misshapen tensor
    if not cut then
        local extra = src.left and src.left() or src.read(ffi.new("uint8_t[1]"), 1)
        if extra > 0 then
            fail(fmt("%s: %s has %s after the %s its header declares (a damaged header, or not one IDX file)",
                     fname, path, src.left and fmt("%d bytes", extra) or "bytes", what))
        end
    end
    return t
end

-- read_idx(path [, {limit = n}]): the IDX file at path (gzip or plain) as a
-- tensor of the file's shape: uint8 (type 0x08), int32 (0x09 int8, 0x0B
-- int16, 0x0C int32), float32 (0x0D) or float64 (0x0E), on cpu(0).  limit
-- reads only the first n entries of dim 1.
function M.read_idx(path, opts, extra)
    if extra ~= nil then extra_arg("read_idx", "(path, opts)", extra) end
    opts = check_opts("read_idx", opts, {limit = true})
    if opts.limit ~= nil and not is_natural(opts.limit) then
        fail("read_idx: limit must be an integer >= 0, got " .. shown(opts.limit))
    end
    local src = open_source("read_idx", path)
    local ok, res = pcall(read_idx_body, "read_idx", path, src, opts.limit)
    src.close()
    if not ok then error(res, 0) end -- the message already names the user's line
    return res
end

-- ---------------------------------------------------------------- CSV

-- The fields of one CSV line: split at delim, surrounding white space and
-- one pair of double quotes taken off each ("" inside quotes is a quote).
-- Quoted fields may hold the delimiter.
local function quoted_fields(line, delim)
    local out, i, n = {}, 1, #line
    local function blank(c) return (c == " " or c == "\t") and c ~= delim end
    while true do
        while i <= n and blank(line:sub(i, i)) do i = i + 1 end
        local field
        if line:sub(i, i) == '"' then
            local j, parts = i + 1, {}
            while true do
                local q = line:find('"', j, true)
                if not q then return nil, "an unclosed quote" end
                parts[#parts + 1] = line:sub(j, q - 1)
                if line:sub(q + 1, q + 1) == '"' then
                    parts[#parts + 1] = '"'
                    j = q + 2
                else
                    i = q + 1
                    break
                end
            end
            field = concat(parts)
            while i <= n and blank(line:sub(i, i)) do i = i + 1 end
            if i <= n and line:sub(i, i) ~= delim then return nil, "text after a closing quote" end
        else
            local d = line:find(delim, i, true)
            field = line:sub(i, (d or n + 1) - 1):match("^(.-)[ \t]*$")
            i = d or n + 1
        end
        out[#out + 1] = field
        if i > n then return out end
        i = i + 1 -- past the delimiter
        if i > n then out[#out + 1] = "" return out end
    end
end

local function csv_fields(line, delim)
    if line:find('"', 1, true) then return quoted_fields(line, delim) end
    -- no quote: split at each delimiter, white space trimmed (most files;
    -- kept free of closures and patterns, so the JIT compiles it)
    local out, i = {}, 1
    while true do
        local d = line:find(delim, i, true)
        local field = line:sub(i, (d or 0) - 1)
        local b1, bn = byte(field, 1), byte(field, -1)
        if b1 == 32 or b1 == 9 or bn == 32 or bn == 9 then field = field:match("^[ \t]*(.-)[ \t]*$") end
        out[#out + 1] = field
        if not d then return out end
        i = d + 1
    end
end

local function csv_number(s)
    local v = tonumber(s)
    -- (LuaJIT's tonumber reads 0b101 as 5: a binary literal is no CSV number)
    if v then
        if s:find("^%s*[+-]?0[bB]") then return nil end
        return v
    end
    local l = s:lower()
    if l == "nan" then return 0 / 0 end
    if l == "inf" or l == "+inf" or l == "infinity" then return math.huge end
    if l == "-inf" or l == "-infinity" then return -math.huge end
end

-- The integer dtypes' value ranges, [lo, hi), by dtype code.
local CSV_INT_RANGE = {}
for _, d in ipairs({{"int32", -2 ^ 31, 2 ^ 31}, {"int64", -2 ^ 63, 2 ^ 63}, {"uint8", 0, 256}}) do
    CSV_INT_RANGE[tensor.parse_dtype("read_csv", d[1])] = {d[2], d[3], name = d[1]}
end
-- The C type of each dtype's elements: rows are gathered in one growing
-- buffer of them, never as a Lua table per row (which took ~8 times the
-- file's size in memory).
local CSV_CTYPE = {[cdef.F32] = "float", [cdef.F64] = "double", [cdef.I32] = "int32_t", [cdef.I64] = "int64_t",
                   [cdef.U8] = "uint8_t"}
-- float32's largest finite value and the first value that rounds past it
-- (FLT_MAX + half its ulp): a field at or past that would be stored as inf
local F32_OVER = 3.4028235677973366e38

-- A decimal field (an optional sign, digits with an optional point and
-- fraction, an optional exponent; white space around) as an exact int64:
-- a Lua number holds integers exactly only up to 2^53, so 9007199254740993
-- read through tonumber became ...992 (so did "9007199254740993.0" and
-- "9.007199254740993e15"), and 9223372036854775807 (2^63 - 1) rounded to
-- 2^63 and did not fit.  nil when the field is not decimal (0x10, nan:
-- read as numbers), false when it does not fit in int64, "fraction" when
-- it is not a whole number.
local INT64_MAX, INT64_MIN_ABS = 9223372036854775807ULL, 9223372036854775808ULL
local function exact_int64(s)
    local sign, rest = s:match("^%s*([+-]?)(.-)%s*$")
    local mant, ex = rest:match("^([%d%.]+)[eE]([+-]?%d+)$")
    if not mant then mant, ex = rest, "0" end
    local int, frac = mant:match("^(%d*)%.(%d*)$")
    if not int then int, frac = mant:match("^%d+$"), "" end
    if not int or int .. frac == "" then return nil end
    -- the value is digits * 10^e, digits without leading or trailing zeros
    local digits = (int .. frac):gsub("^0+", "")
    local e = tonumber(ex) - #frac
    local trimmed = digits:gsub("0+$", "")
    e, digits = e + (#digits - #trimmed), trimmed
    if digits == "" then return ffi.cast("int64_t", 0) end
    if e < 0 then return "fraction" end
    if #digits + e > 19 then return false end
    digits = digits .. string.rep("0", e)
    local v = 0ULL -- 19 digits stay below 2^64
    for i = 1, #digits do v = v * 10 + (digits:byte(i) - 48) end
    if sign == "-" then
        if v > INT64_MIN_ABS then return false end
        return -ffi.cast("int64_t", v) -- (2^63 casts to -2^63, whose negation is itself)
    end
    if v > INT64_MAX then return false end
    return ffi.cast("int64_t", v)
end

-- A hint for a field that is not a number but numbers split by another
-- common delimiter ("1;2" read with ","): the file's delimiter, likely.
local function other_delimiter(v, delim)
    for _, d in ipairs({";", "\t", "|", ",", " "}) do
        if d ~= delim and v:find(d, 1, true) then
            local all = true
            for part in (v .. d):gmatch("(.-)" .. (d == "|" and "%|" or d)) do
                if not csv_number(part) then all = false break end
            end
            if all then
                local q = d == "\t" and '"\\t"' or fmt("%q", d)
                return fmt(" (the file's delimiter may be %s: give {delimiter = %s})", q, q)
            end
        end
    end
    return ""
end

-- The lines of f (without their "\n"), read in pieces: LuaJIT's f:lines()
-- mangles a line holding a NUL byte (it cut "1,2\0junk" to 6 bytes).
local function csv_lines(f)
    local buf, pos = "", 1
    return function()
        while true do
            local nl = buf:find("\n", pos, true)
            if nl then
                local line = buf:sub(pos, nl - 1)
                pos = nl + 1
                return line
            end
            -- the rest of buf and pieces up to the next newline, joined once
            -- (a long line is not copied again for each piece)
            local parts = {buf:sub(pos)}
            local piece
            repeat
                piece = f:read(PIECE)
                parts[#parts + 1] = piece
            until not piece or piece:find("\n", 1, true)
            buf, pos = concat(parts), 1
            if not piece then
                if buf == "" then return nil end
                pos = #buf + 1
                return buf
            end
        end
    end
end

-- read_csv(path [, {delimiter = ",", header = "auto", dtype = default float dtype,
-- missing = nil}]): a numeric CSV file as a rows x columns tensor on
-- cpu(0), and the column names (a Lua list; nil without a header line).
-- header "auto": the first line is a header when a field of it is not a
-- number.  Fields may be quoted; nan and inf are read as such.  An empty
-- field is an error naming its line and column unless missing gives the
-- value to use (0 / 0 for NaN).  Blank lines and a UTF-8 byte-order
-- mark at the start are skipped.  Any other field that is not a number,
-- or a row of another length, is an error naming the line.  With an
-- integer dtype a field must be a whole number that fits it (1.5, nan or
-- 300 for uint8 is an error naming its line and column, not truncated);
-- with float32 a finite field past float32's range is an error, not inf,
-- and so is one past float64's (1e400) with either float dtype.
-- The file is read a line at a time into one buffer of the dtype.
function M.read_csv(path, opts, extra)
    if extra ~= nil then extra_arg("read_csv", "(path, opts)", extra) end
    local fname = "read_csv"
    opts = check_opts(fname, opts, {delimiter = true, header = true, dtype = true, missing = true})
    local delim = opts.delimiter or ","
    if type(delim) ~= "string" or #delim ~= 1 or delim == '"' then
        fail(fname .. ": delimiter must be one character (not a quote), got " .. tostring(delim))
    end
    local header = opts.header == nil and "auto" or opts.header
    if header ~= "auto" and type(header) ~= "boolean" then
        fail(fname .. ": header must be true, false or \"auto\", got " .. tostring(header))
    end
    if opts.missing ~= nil and type(opts.missing) ~= "number" then
        fail(fname .. ": missing must be a number, got " .. typename(opts.missing))
    end
    -- checked before the file is read, so the error names read_csv
    -- (no dtype: the default float dtype, float32 unless ordo.set_default_dtype changed it, as the makers)
    local dtype = opts.dtype == nil and tensor.get_default_dtype() or opts.dtype
    local code = tensor.parse_dtype(fname, dtype)
    local range = CSV_INT_RANGE[code]
    local exact64 = range and range.name == "int64"
    local f32 = code == cdef.F32
    if range and opts.missing ~= nil then
        local m = opts.missing
        if m ~= floor(m) or not (m >= range[1] and m < range[2]) then
            fail(fmt("%s: missing = %s is not a whole number that fits in dtype %s", fname, tostring(m), range.name))
        end
    end
    if f32 and opts.missing ~= nil and opts.missing == opts.missing and opts.missing ~= math.huge and
       opts.missing ~= -math.huge and math.abs(opts.missing) >= F32_OVER then
        fail(fmt("%s: missing = %s does not fit in float32 (it would be inf)", fname, tostring(opts.missing)))
    end
    local ctype = CSV_CTYPE[code]
    local esize = ffi.sizeof(ctype)
    local buf, cap, count = nil, 0, 0
    local f = open_file(fname, path)
    local names, ncol, nrows = nil, nil, 0
    local lineno = 0
    local function column_name(c) return fmt(", column %d%s", c, names and names[c] and " (" .. names[c] .. ")" or "") end
    local function bad(msg, ...)
        f:close()
        fail(fmt("%s: %s line %d" .. msg, fname, path, lineno, ...))
    end
    for line in csv_lines(f) do
        lineno = lineno + 1
        if byte(line, -1) == 13 then line = line:sub(1, -2) end -- CRLF
        -- a UTF-8 byte-order mark (spreadsheets write one) is no part of the
        -- first field: kept, it would make a number look like a header
        if lineno == 1 then line = line:gsub("^\239\187\191", "") end
        -- (tonumber read "2\0junk" as 2; a file with CR line ends came
        -- as one line, whose fields made a header and no rows)
        if line:find("\0", 1, true) then bad(": a NUL byte (not a text file?)") end
        if line:find("\r", 1, true) then
            bad(": a carriage return inside the line (a file with CR line ends? convert it to LF or CRLF)")
        end
        if (byte(line, 1) or 0) > 32 or line:find("%S") then -- (a blank line is skipped)
            local fields, why = csv_fields(line, delim)
            if not fields then bad(": %s", why) end
            local is_header = false
            if not names and nrows == 0 then
                if header == true then
                    is_header = true
                elseif header == "auto" then
                    for _, v in ipairs(fields) do
                        if v ~= "" and not csv_number(v) then is_header = true break end
                    end
                end
            end
            if is_header then
                names = fields
                ncol = #fields
            else
                if ncol and #fields ~= ncol then bad(" has %d fields, expected %d", #fields, ncol) end
                ncol = #fields
                if count + ncol > cap then
                    local ncap = math.max(4096, cap * 2, count + ncol)
                    local nbuf = ffi.new(ctype .. "[?]", ncap)
                    if count > 0 then ffi.copy(nbuf, buf, count * esize) end
                    buf, cap = nbuf, ncap
                end
                for c = 1, ncol do
                    local v = fields[c]
                    local x = csv_number(v)
                    if x == nil then
                        if v == "" and opts.missing ~= nil then
                            x = opts.missing
                        else
                            bad("%s: %s%s", column_name(c), v == "" and "an empty field (give {missing = value} to fill it)" or
                                fmt("%q is not a number", v), other_delimiter(v, delim))
                        end
                    end
                    local exact = nil
                    if exact64 and v ~= "" then exact = exact_int64(v) end
                    if exact == "fraction" then
                        bad("%s: %q is not a whole number (dtype int64)", column_name(c), v)
                    elseif exact == false then
                        bad("%s: %q does not fit in int64", column_name(c), v)
                    elseif exact then
                        x = exact -- (an int64 cdata, kept exact)
                    elseif range then
                        -- an integer dtype takes whole numbers in its range: a
                        -- fraction would be truncated, nan, inf or 300 (uint8) not stored
                        if x ~= floor(x) then -- (nan too)
                            bad("%s: %q is not a whole number (dtype %s)", column_name(c), v, range.name)
                        elseif not (x >= range[1] and x < range[2]) then
                            bad("%s: %q does not fit in %s", column_name(c), v, range.name)
                        elseif exact64 and (x >= 2 ^ 53 or x <= -2 ^ 53) then
                            -- (0x20000000000001: a Lua number past 2^53 may be rounded)
                            bad("%s: %q cannot be read exactly as int64 (past 2^53 write it in decimal)", column_name(c), v)
                        end
                    elseif f32 and x == x and x ~= math.huge and x ~= -math.huge and (x >= F32_OVER or x <= -F32_OVER) then
                        bad("%s: %q does not fit in float32 (it would be inf; give dtype = \"float64\")", column_name(c), v)
                    elseif (x == math.huge or x == -math.huge) and v:find("%d") then
                        -- digits past float64's range (1e400): tonumber gives inf
                        -- (only the words inf and infinity are read as inf)
                        bad("%s: %q does not fit in %s (it would be inf)", column_name(c), v, f32 and "float32" or "float64")
                    end
                    buf[count] = x
                    count = count + 1
                end
                nrows = nrows + 1
            end
        end
    end
    f:close()
    local t = tensor.empty({nrows, ncol or 0}, {dtype = dtype})
    -- a new tensor: no op uses its bytes yet
    if count > 0 then ffi.copy(util.host_ptr(t), buf, count * esize) end
    C.ordo_tensor_host_written(t._c)
    return t, names
end

-- write_csv(path, t [, {header = names, delimiter = ","}]): a 1-d (one
-- column) or 2-d tensor as a CSV file that read_csv reads back exactly:
-- float32 with 9 significant digits, float64 with 17, integers (int64
-- too) as their digits, nan, inf and -inf as such (-0.0 as -0).  header: a
-- list of one name per column (quoted where they hold the delimiter, a
-- quote or white space at an end).  The file is replaced as ordo.save
-- replaces one: whole or not at all.  Returns t.
local CSV_FORMAT = {float32 = "%.9g", float64 = "%.17g", int32 = "%d", uint8 = "%d"}
local CSV_WRITE_PTR = {float32 = "const float *", float64 = "const double *", int32 = "const int32_t *",
                       int64 = "const int64_t *", uint8 = "const uint8_t *"}
local function csv_name(fname, name, delim, i)
    if type(name) ~= "string" then
        fail(fmt("%s: header name %d is %s, expected a string", fname, i, typename(name)))
    end
    if name:find("[\r\n%z]") then
        fail(fmt("%s: header name %d (%q) holds a line break or NUL, which read_csv cannot read back", fname, i, name))
    end
    if name:find(delim, 1, true) or name:find('"', 1, true) or name:find("^[ \t]") or name:find("[ \t]$") then
        return '"' .. name:gsub('"', '""') .. '"'
    end
    return name
end

function M.write_csv(path, t, opts, extra)
    if extra ~= nil then extra_arg("write_csv", "(path, t, opts)", extra) end
    local fname = "write_csv"
    if not is_tensor(t) then fail(fmt("%s: expected a tensor second, got %s", fname, typename(t))) end
    opts = check_opts(fname, opts, {header = true, delimiter = true})
    local delim = opts.delimiter or ","
    if type(delim) ~= "string" or #delim ~= 1 or delim:find("[\"\r\n%d%.eE+%-]") then
        fail(fname .. ": delimiter must be one character that is no part of a number (not a quote), got " ..
             tostring(delim))
    end
    local nd = t:dim()
    if nd ~= 1 and nd ~= 2 then
        fail(fmt("%s: expected a 1-d or 2-d tensor (rows x columns), got shape %s", fname, tensor.shape_str(t:shape())))
    end
    local rows, cols = t:size(1), nd == 2 and t:size(2) or 1
    if cols == 0 and rows > 0 then
        -- (its rows were blank lines, which read_csv skips: 3x0 came back 0x0)
        fail(fmt("%s: a tensor of shape %s has rows of no columns, which a CSV file cannot hold", fname,
                 tensor.shape_str(t:shape())))
    end
    local head
    if opts.header ~= nil then
        local h = opts.header
        if type(h) ~= "table" or getmetatable(h) ~= nil or #h ~= cols then
            fail(fmt("%s: header must be a list of %d names (one per column), got %s", fname, cols,
                     type(h) == "table" and fmt("%d", #h) or typename(h)))
        end
        local parts = {}
        for i = 1, cols do parts[i] = csv_name(fname, h[i], delim, i) end
        head = concat(parts, delim) .. "\n"
    end
    local serialize = require "ordo.serialize"
    local dt = t:dtype()
    serialize.write_file(fname, path, function(put)
        if head then put(head) end
        local c = serialize.host_copy(fname, t, "the tensor")
        local p = ffi.cast(CSV_WRITE_PTR[dt], util.host_ptr(c))
        local form, i64 = CSV_FORMAT[dt], dt == "int64"
        local lines, size, k = {}, 0, 0
        local field = {}
        for _ = 1, rows do
            for j = 1, cols do
                local v = p[k]
                k = k + 1
                local s
                if i64 then
                    s = tostring(v):sub(1, -3) -- (tostring of an int64 ends in LL)
                elseif v ~= v then
                    s = "nan"
                elseif v == math.huge then
                    s = "inf"
                elseif v == -math.huge then
                    s = "-inf"
                else
                    s = fmt(form, v)
                end
                field[j] = s
            end
            local line = concat(field, delim, 1, cols)
            lines[#lines + 1] = line
            size = size + #line + 1
            if size >= PIECE then
                lines[#lines + 1] = ""
                put(concat(lines, "\n"))
                lines, size = {}, 0
            end
        end
        if #lines > 0 then
            lines[#lines + 1] = ""
            put(concat(lines, "\n"))
        end
    end)
    return t
end

-- ---------------------------------------------------------------- Fashion-MNIST

M.fashion_mnist_dir = "/usr/share/datasets/fashion-mnist"

M.fashion_mnist_classes = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"}

local FMNIST_FILES = {
    train = {images = "train-images-idx3-ubyte", labels = "train-labels-idx1-ubyte"},
    test = {images = "t10k-images-idx3-ubyte", labels = "t10k-labels-idx1-ubyte"},
}
local FMNIST_MEAN, FMNIST_STD = 0.2860, 0.3530

local function exists(path)
    local f = io.open(path, "rb")
    if f then f:close() end
    return f ~= nil
end

-- dir/base.gz, else dir/base (an unpacked copy); nil when neither is there
local function find_file(dir, base)
    for _, p in ipairs({dir .. "/" .. base .. ".gz", dir .. "/" .. base}) do
        if exists(p) then return p end
    end
    return nil
end

local function resolve_dir(dir)
    if dir ~= nil then return dir end
    local env = os.getenv("ORDO_FASHION_MNIST")
    if env and env ~= "" then return env end
    return M.fashion_mnist_dir
end

-- fashion_mnist_available([dir]): true, dir when the four files are in dir
-- (default: $ORDO_FASHION_MNIST, else /usr/share/datasets/fashion-mnist);
-- else false and a message saying what is missing and how to get it.
function M.fashion_mnist_available(dir, extra)
    if extra ~= nil then extra_arg("fashion_mnist_available", "(dir)", extra) end
    if dir ~= nil and type(dir) ~= "string" then
        fail("fashion_mnist_available: expected a directory path, got " .. typename(dir))
    end
    dir = resolve_dir(dir)
    local missing = {}
    for _, split in ipairs({"train", "test"}) do
        for _, kind in ipairs({"images", "labels"}) do
            local base = FMNIST_FILES[split][kind]
            if not find_file(dir, base) then missing[#missing + 1] = base .. ".gz" end
        end
    end
    if #missing == 0 then return true, dir end
    return false, fmt("Fashion-MNIST not found in %s (missing %s): install the Debian package dataset-fashion-mnist " ..
                      "(apt-get install dataset-fashion-mnist), or point opts.dir or ORDO_FASHION_MNIST at a " ..
                      "directory holding the four files", dir, concat(missing, ", "))
end

local FMNIST_OPTS = {dir = true, flatten = true, normalize = true, limit_train = true, limit_test = true,
                     device = true}

local function load_split(fname, dir, split, limit, opts)
    local files = FMNIST_FILES[split]
    local ipath, lpath = find_file(dir, files.images), find_file(dir, files.labels)
    local images = M.read_idx(ipath, {limit = limit})
    local labels = M.read_idx(lpath, {limit = limit})
    local s = images:shape()
    if images:dtype() ~= "uint8" or #s ~= 3 or s[2] ~= 28 or s[3] ~= 28 then
        fail(fmt("%s: %s holds %s %s, expected uint8 Nx28x28 images", fname, ipath, images:dtype(), tensor.shape_str(s)))
    end
    local n = s[1]
    if labels:dtype() ~= "uint8" or labels:dim() ~= 1 or labels:size(1) ~= n then
        fail(fmt("%s: %s holds %s %s, expected %d uint8 labels", fname, lpath, labels:dtype(),
                 tensor.shape_str(labels:shape()), n))
    end
    -- a damaged labels file would give classes past 10: one_hot or a loss
    -- would fail far from the cause, or a count of classes come out wrong
    if n > 0 then
        local top = labels:max():item()
        if top > 9 then
            local at = labels:gt(9):to("uint8"):argmax():item()
            fail(fmt("%s: %s holds label %d at entry %d (Fashion-MNIST labels are 0..9): a damaged file?", fname,
                     lpath, labels[at], at))
        end
    end
    if opts.device ~= nil then
        -- uint8 crosses to the device: a quarter of the float32 bytes
        images, labels = images:to(opts.device), labels:to(opts.device)
    end
    local x = images:to("float32"):div_(255)
    if opts.normalize then x:sub_(FMNIST_MEAN):div_(FMNIST_STD) end
    x = opts.flatten and x:view({n, 784}) or x:view({n, 1, 28, 28})
    local y = labels:to("int64"):add_(1) -- classes from 1, like argmax
    return {images = x, labels = y}
end

-- fashion_mnist([opts]): {train = {images =, labels =}, test = {...}, classes =}.
--   images  float32 Nx1x28x28 in [0, 1] (flatten = true: Nx784; normalize =
--           true: (x - 0.2860) / 0.3530 instead)
--   labels  int64 N, classes 1..10 (the file's 0..9 plus 1; classes[k] names k)
-- opts: dir (default $ORDO_FASHION_MNIST, else /usr/share/datasets/fashion-mnist),
-- limit_train / limit_test (the first n examples), device (where the
-- tensors go, default cpu(0)).
function M.fashion_mnist(opts, extra)
    if extra ~= nil then extra_arg("fashion_mnist", "(opts)", extra) end
    opts = check_opts("fashion_mnist", opts, FMNIST_OPTS)
    if opts.dir ~= nil and type(opts.dir) ~= "string" then
        fail("fashion_mnist: dir must be a directory path, got " .. typename(opts.dir))
    end
    for _, k in ipairs({"limit_train", "limit_test"}) do
        if opts[k] ~= nil and not is_natural(opts[k]) then
            fail(fmt("fashion_mnist: %s must be an integer >= 0, got %s", k, shown(opts[k])))
        end
    end
    for _, k in ipairs({"flatten", "normalize"}) do
        -- (any value counted as true: normalize = 0, flatten = "false" went through)
        if opts[k] ~= nil and type(opts[k]) ~= "boolean" then
            fail(fmt("fashion_mnist: %s must be true or false, got %s", k, shown(opts[k])))
        end
    end
    if opts.device ~= nil and not util.parse_device("fashion_mnist", opts.device) then
        fail("fashion_mnist: unknown device " .. tostring(opts.device) ..
             " (expected ordo.cpu(n), ordo.gpu(n) or \"gpu:0\")")
    end
    local ok, dir = M.fashion_mnist_available(opts.dir)
    if not ok then fail("fashion_mnist: " .. dir) end
    return {
        train = load_split("fashion_mnist", dir, "train", opts.limit_train, opts),
        test = load_split("fashion_mnist", dir, "test", opts.limit_test, opts),
        classes = M.fashion_mnist_classes,
    }
end

-- ---------------------------------------------------------------- Datasets

-- Torch's map-style datasets: data.TensorDataset(x, y, ...), Subset,
-- random_split, ConcatDataset.  Each is a userdata (newproxy), as the
-- loader, so that #ds works under LuaJIT; ds[i] and ds:get(i) give example
-- i (1-based, negative from the end, as t[i]).  A TensorDataset's example
-- is its tensors' rows i, views as t:select(1, i): ds:get(i) returns them
-- as separate values, ds[i] one value (a list when there are several).
local DS_STATE = setmetatable({}, {__mode = "k"}) -- proxy -> its state
local Dataset = {}

local unpack = unpack or table.unpack

local function ds_state(fname, self)
    local st = DS_STATE[self]
    if not st then
        fail(fmt("%s: expected a dataset as self, got %s (call it as ds:%s(...))", fname, typename(self), fname))
    end
    return st
end

local function check_index(st, i)
    if type(i) ~= "number" or i ~= floor(i) then
        fail(fmt("%s: an index must be an integer, got %s", st.kind, shown(i)))
    end
    local n = st.n
    local j = i < 0 and i + n + 1 or i
    if j < 1 or j > n then
        fail(fmt("%s: index %s out of range for %d example%s (indices count from 1, negative from the end)", st.kind,
                 shown(i), n, n == 1 and "" or "s"))
    end
    return j
end

-- ds:get(i): example i, as the values the dataset gives.
function Dataset.get(self, i, extra)
    if extra ~= nil then extra_arg("get", "(i)", extra) end
    local st = ds_state("get", self)
    return st.get(check_index(st, i))
end

local function ds_lookup(st, k)
    if type(k) == "number" then
        local r = {st.get(check_index(st, k))}
        if #r > 1 then return r end
        return r[1]
    end
    if Dataset[k] then return Dataset[k] end
    local v = st.fields[k]
    if type(v) == "table" then
        -- a copy: the dataset's own list changed from outside would skip
        -- its checks (an index past the end, a tensor of another length)
        local c = {}
        for j = 1, #v do c[j] = v[j] end
        return c
    end
    return v
end

local function ds_tostring(self)
    local st = DS_STATE[self]
    return fmt("ordo.data.%s(%d example%s%s)", st.kind, st.n, st.n == 1 and "" or "s", st.desc or "")
end

local function new_dataset(st)
    local proxy = newproxy(true)
    local mt = getmetatable(proxy)
    mt.__name = "ordo.data." .. st.kind
    -- a table of its methods (help(ds) and completion read it; they never
    -- call an __index function), then its examples and fields
    mt.__index = setmetatable({get = Dataset.get}, {__index = function(_, k) return ds_lookup(st, k) end})
    mt.__newindex = function(_, k)
        fail(fmt("%s: a dataset's fields are read-only (cannot set %s)", st.kind, tostring(k)))
    end
    mt.__len = function() return st.n end
    mt.__tostring = ds_tostring
    DS_STATE[proxy] = st
    return proxy
end

-- The size and a getter of any dataset: one made here, or a user's table or
-- userdata whose metatable has __len (called directly: LuaJIT's # skips it
-- on tables) and a get method or __index.  nil when x is none.
local function dataset_access(fname, x, what)
    local st = DS_STATE[x]
    if st then return st.n, st.get end
    if type(x) == "userdata" and typename(x) == "ordo.data.DataLoader" then
        -- (its __len and __index made it pass for a dataset of nil examples)
        fail(fmt("%s: %s is a DataLoader, not a dataset (make the loader from the dataset itself)", fname, what))
    end
    local mt = (type(x) == "table" or type(x) == "userdata") and not is_tensor(x) and getmetatable(x)
    if type(mt) ~= "table" or mt.__len == nil then return nil end
    local n = mt.__len(x)
    if not is_natural(n) then
        fail(fmt("%s: %s's __len gave %s, expected an integer >= 0", fname, what, shown(n)))
    end
    local okg, g = pcall(function() return x.get end)
    if okg and type(g) == "function" then return n, function(i) return g(x, i) end end
    if mt.__index == nil then return nil end
    return n, function(i) return x[i] end
end

local NOT_DATASET = "a dataset (data.TensorDataset, Subset, ConcatDataset, or a table whose metatable has " ..
                    "__len and __index, or a get method)"

local function dataset_arg(fname, x, what)
    local n, get = dataset_access(fname, x, what)
    if not n then fail(fmt("%s: expected %s as %s, got %s", fname, NOT_DATASET, what, typename(x))) end
    return n, get
end

-- data.TensorDataset(t1, t2, ...): example i is the rows i of every tensor
-- (first dims must agree; all on one engine).
function M.TensorDataset(...)
    local fname = "TensorDataset"
    local nargs = select("#", ...)
    if nargs == 0 then fail(fname .. ": expected at least one tensor") end
    local ts = {...}
    local n, shapes = nil, {}
    for k = 1, nargs do
        local t = ts[k]
        if not is_tensor(t) then fail(fmt("%s: argument %d must be a tensor, got %s", fname, k, typename(t))) end
        if t:dim() < 1 then fail(fmt("%s: tensor %d has no dims: the first dim counts the examples", fname, k)) end
        if t._c.storage.engine ~= ts[1]._c.storage.engine then
            fail(fmt("%s: tensors 1 and %d belong to different engines (make them on one, {engine = e})", fname, k))
        end
        n = n or t:size(1)
        if t:size(1) ~= n then
            fail(fmt("%s: tensor 1 has %d examples (shape %s) but tensor %d has %d (shape %s): the first dims " ..
                     "must match", fname, n, tensor.shape_str(ts[1]:shape()), k, t:size(1),
                     tensor.shape_str(t:shape())))
        end
        shapes[k] = tensor.shape_str(t:shape()) .. " " .. t:dtype()
    end
    return new_dataset({
        kind = fname,
        n = n,
        tensors = ts,
        fields = {tensors = ts},
        desc = ": " .. concat(shapes, ", "),
        get = function(i)
            local r = {}
            for k = 1, nargs do r[k] = ts[k]:select(1, i) end
            return unpack(r, 1, nargs)
        end,
    })
end

-- A list of indices (a Lua list or a 1-dim integer tensor), each in 1..n,
-- as a new Lua list.
local function index_list(fname, indices, n)
    local list
    if is_tensor(indices) then
        local dt = indices:dtype()
        if indices:dim() ~= 1 or not (dt == "int64" or dt == "int32" or dt == "uint8") then
            fail(fmt("%s: indices must be a Lua list or a 1-dim integer tensor, got %s of shape %s", fname, dt,
                     tensor.shape_str(indices:shape())))
        end
        list = indices:totable()
    elseif type(indices) == "table" and getmetatable(indices) == nil then
        list = {}
        local count = 0
        for k in pairs(indices) do
            if not is_posint(k) then
                fail(fmt("%s: indices must be a list, got a table with key %s", fname, shown(k)))
            end
            count = count + 1
        end
        for k = 1, count do
            if indices[k] == nil then fail(fmt("%s: indices must be a list, got a table with a hole at %d", fname, k)) end
            list[k] = indices[k]
        end
    else
        fail(fmt("%s: indices must be a Lua list or a 1-dim integer tensor, got %s", fname, typename(indices)))
    end
    for k, i in ipairs(list) do
        if type(i) ~= "number" or i ~= floor(i) then -- (1.5 or "3": not an index at all, not one out of range)
            fail(fmt("%s: index %s at position %d is not an integer (indices count from 1)", fname, shown(i), k))
        end
        if not is_posint(i) or i > n then
            fail(fmt("%s: index %s at position %d is out of range for a dataset of %d example%s (indices count " ..
                     "from 1)", fname, shown(i), k, n, n == 1 and "" or "s"))
        end
    end
    return list
end

local function subset(fname, ds, list)
    local _, get = dataset_arg(fname, ds, "the dataset")
    return new_dataset({
        kind = "Subset",
        n = #list,
        dataset = ds,
        indices = list,
        fields = {dataset = ds, indices = list},
        get = function(i) return get(list[i]) end,
    })
end

-- data.Subset(ds, indices): example i is ds's example indices[i].
function M.Subset(ds, indices, ...)
    local fname = "Subset"
    if select("#", ...) > 0 then fail(fname .. ": expected 2 arguments (ds, indices)") end
    local n = dataset_arg(fname, ds, "the dataset")
    return subset(fname, ds, index_list(fname, indices, n))
end

-- data.ConcatDataset({ds1, ds2, ...}): the examples of ds1, then ds2's...
function M.ConcatDataset(list, ...)
    local fname = "ConcatDataset"
    if select("#", ...) > 0 or type(list) ~= "table" or getmetatable(list) ~= nil then
        fail(fmt("%s: expected one list of datasets, {ds1, ds2, ...}, got %s%s", fname, typename(list),
                 select("#", ...) > 0 and " and more arguments" or ""))
    end
    if list[1] == nil then fail(fname .. ": the list of datasets is empty") end
    local gets, ends, total, dss = {}, {}, 0, {}
    for k, ds in ipairs(list) do
        local n, get = dataset_arg(fname, ds, fmt("dataset %d", k))
        total = total + n
        gets[k], ends[k], dss[k] = get, total, ds
    end
    for k in pairs(list) do
        if not (is_posint(k) and k <= #dss) then
            fail(fmt("%s: expected a list of datasets, got a table with key %s", fname, shown(k)))
        end
    end
    return new_dataset({
        kind = fname,
        n = total,
        fields = {datasets = dss, cumulative_sizes = ends},
        get = function(i)
            local lo, hi = 1, #ends -- the first part whose end is >= i
            while lo < hi do
                local mid = floor((lo + hi) / 2)
                if ends[mid] >= i then hi = mid else lo = mid + 1 end
            end
            return gets[lo](i - (ends[lo - 1] or 0))
        end,
    })
end

-- data.random_split(ds, lengths [, {seed = n} | {generator = state}]):
-- Subsets of ds that together hold each example once, in a random order.
-- lengths: counts summing to #ds, or fractions summing to 1 (Torch >= 1.13:
-- each gets floor(fraction * #ds), the rest one each from the first).  The
-- order comes from the engine generator (ordo.manual_seed), or from seed
-- alone, or from generator (a state from ordo.get_rng_state, advanced in
-- place as Torch's generator is), leaving the engine's as it was.
function M.random_split(ds, lengths, opts, ...)
    local fname = "random_split"
    if select("#", ...) > 0 then fail(fname .. ": expected at most 3 arguments (ds, lengths, opts)") end
    local n = dataset_arg(fname, ds, "the dataset")
    opts = check_opts(fname, opts, {seed = true, generator = true})
    if type(lengths) ~= "table" or getmetatable(lengths) ~= nil or lengths[1] == nil then
        fail(fmt("%s: lengths must be a non-empty list of counts or fractions, got %s", fname, typename(lengths)))
    end
    local counts, sum = {}, 0
    for k, v in pairs(lengths) do
        if not is_posint(k) or k > #lengths then
            fail(fmt("%s: lengths must be a list, got a table with key %s", fname, shown(k)))
        end
        if type(v) ~= "number" or v ~= v or v < 0 or v == math.huge then
            fail(fmt("%s: length %d must be a count or a fraction >= 0, got %s", fname, k, shown(v)))
        end
        sum = sum + v
    end
    if math.abs(sum - 1) <= 1e-9 then -- fractions (0.7 + 0.2 + 0.1 is 0.9999999999999999)
        local got = 0
        for k = 1, #lengths do
            counts[k] = floor(n * lengths[k])
            got = got + counts[k]
        end
        if got > n then fail(fmt("%s: the fractions ask for more than the %d examples", fname, n)) end
        for r = 0, n - got - 1 do
            local k = r % #counts + 1
            counts[k] = counts[k] + 1
        end
    else
        for k = 1, #lengths do
            if lengths[k] ~= floor(lengths[k]) then
                fail(fmt("%s: length %d is %s: counts must be integers (fractions must sum to 1, these sum to " ..
                         "%.10g)", fname, k, shown(lengths[k]), sum))
            end
            counts[k] = lengths[k]
        end
        if sum ~= n then
            fail(fmt("%s: the lengths sum to %.10g, but the dataset has %d example%s (give counts summing to %d, " ..
                     "or fractions summing to 1)", fname, sum, n, n == 1 and "" or "s", n))
        end
    end
    if opts.seed ~= nil and opts.generator ~= nil then fail(fname .. ": give seed or generator, not both") end
    local g = opts.generator
    if g ~= nil and not (is_tensor(g) and g:dtype() == "uint8" and g:dim() == 1 and g:numel() == 32 and
                         g:device().dev_type ~= cdef.GPU) then
        fail(fmt("%s: generator must be a generator state (a uint8 tensor of 32 elements from ordo.get_rng_state), " ..
                 "got %s", fname, is_tensor(g) and fmt("%s of shape %s", g:dtype(), tensor.shape_str(g:shape())) or
                 typename(g)))
    end
    local perm = {}
    if n > 0 then
        local derived = require "ordo.derived"
        if opts.seed == nil and g == nil then
            perm = derived.randperm(n):totable()
        else
            local state = g or tensor.seeded_state(fname, opts.seed)
            local saved = tensor.get_rng_state()
            local set, why = pcall(tensor.set_rng_state, state)
            if not set then
                fail(fmt("%s: generator: %s", fname, (tostring(why):gsub("^.-set_rng_state: ", ""))))
            end
            local ok, res = pcall(function() return derived.randperm(n):totable() end)
            if ok and g then g:copy_(tensor.get_rng_state()) end
            tensor.set_rng_state(saved)
            if not ok then error(res, 0) end
            perm = res
        end
    end
    local out, at = {}, 0
    for k, c in ipairs(counts) do
        local list = {}
        for j = 1, c do list[j] = perm[at + j] end
        at = at + c
        out[k] = subset(fname, ds, list)
    end
    return out
end

-- ---------------------------------------------------------------- DataLoader

-- A loader is a userdata (newproxy) so that #loader works under LuaJIT,
-- whose tables ignore __len; fields and methods read through to its state
-- table, so it reads like a table otherwise.
local Loader = {}
M.DataLoader = Loader

local LOADER_OPTS = {batch_size = true, shuffle = true, drop_last = true, pin_memory = true}
local DATASET_LOADER_OPTS = {batch_size = true, shuffle = true, drop_last = true, pin_memory = true,
                             collate_fn = true}

local I64P = ffi.typeof("int64_t *")
local F64P = ffi.typeof("double *")

-- The order of one epoch: an int64 tensor of 1..n (shuffle: a permutation
-- by Fisher-Yates from float64 keys drawn with the engine's generator, so
-- it depends only on ordo.manual_seed and the order of random calls).
local function epoch_order(st)
    local n = st.n
    -- on cpu(0) of the data's engine (the default one's was refused by
    -- index_select: "the tensors belong to different engines")
    local where = st.tensors[1] and tensor.like(st.tensors[1], "int64") or {dtype = "int64"}
    where.device = util.cpu(0)
    local perm = tensor.empty({n}, where)
    if n == 0 then return perm end
    local keys
    if st.shuffle then keys = tensor.rand({n}, {dtype = "float64"}):wait() end
    local p = ffi.cast(I64P, host_bytes("DataLoader", perm))
    for i = 0, n - 1 do p[i] = i + 1 end
    if keys then
        local u = ffi.cast(F64P, util.host_ptr(keys))
        for i = n - 1, 1, -1 do
            local j = floor(u[i] * (i + 1)) -- 0..i
            if j > i then j = i end
            p[i], p[j] = p[j], p[i]
        end
        C.ordo_tensor_numel(keys._c) -- keeps keys (and its bytes) alive until here
    end
    local index = st._index -- a Subset's rows of its TensorDataset
    if index then
        for i = 0, n - 1 do p[i] = index[tonumber(p[i])] end
    end
    return perm
end

local function plain(v) return type(v) == "table" and not is_tensor(v) and getmetatable(v) == nil end

-- One value of every example of a batch (vals[j] of example ids[j]) as a
-- batch: tensors by ordo.stack (a new first dim), numbers as a float64
-- tensor (a Lua number is a double: float32 would round 16777217, a label
-- or an index past 2^24, without a word), tables (lists or records) key by
-- key into a table of batches, as Torch's default_collate.
-- Strings (a file name, a caption) go into a list of the batch's strings,
-- as Torch's default_collate keeps them.
local function collate_value(vals, ids, what, b)
    local v1 = vals[1]
    local kind = is_tensor(v1) and "tensor" or type(v1) == "number" and "number" or plain(v1) and "table"
        or type(v1) == "string" and "string" or nil
    for j, v in ipairs(vals) do
        if not kind then
            fail(fmt("DataLoader: %s of the dataset's example %d is %s (expected a tensor, a number, a string, or a " ..
                     "table of them)", what, ids[j], typename(v)))
        end
        local vk = is_tensor(v) and "tensor" or type(v) == "number" and "number" or plain(v) and "table"
            or type(v) == "string" and "string" or typename(v)
        if vk ~= kind then
            fail(fmt("DataLoader: %s of the dataset's example %d is %s, of example %d %s: they cannot be batched " ..
                     "together", what, ids[j], is_tensor(v) and "ordo.Tensor" or typename(v), ids[1],
                     is_tensor(v1) and "ordo.Tensor" or typename(v1)))
        end
    end
    if kind == "tensor" then
        local ok, res = pcall(tensor.stack, vals, 1)
        if not ok then
            fail(fmt("DataLoader: %s of the examples of batch %d cannot be stacked: %s", what, b,
                     (tostring(res):gsub("^.-stack: ", ""))))
        end
        return res
    elseif kind == "number" then
        return tensor.tensor(vals, "float64")
    elseif kind == "string" then
        local list = {}
        for j, v in ipairs(vals) do list[j] = v end
        return list
    end
    local keys = {}
    for k in pairs(v1) do keys[#keys + 1] = k end
    for j = 2, #vals do
        local count = 0
        for k in pairs(vals[j]) do
            count = count + 1
            if v1[k] == nil then
                fail(fmt("DataLoader: %s of the dataset's example %d has key %s, that of example %d has not", what,
                         ids[j], tostring(k), ids[1]))
            end
        end
        if count ~= #keys then
            fail(fmt("DataLoader: %s of the dataset's example %d has %d key%s, that of example %d has %d", what, ids[j],
                     count, count == 1 and "" or "s", ids[1], #keys))
        end
    end
    local out = {}
    for _, k in ipairs(keys) do
        local sub = {}
        for j, v in ipairs(vals) do sub[j] = v[k] end
        out[k] = collate_value(sub, ids, what .. (type(k) == "string" and "." .. k or "[" .. tostring(k) .. "]"), b)
    end
    return out
end

-- The examples of a dataset's batch, collated value by value.  An example
-- is the values its get gives, or one list of them (a record, a table of
-- named values, is one value: the loop gets a table of batches).
local function collate(st, order, start, len)
    local p = ffi.cast(I64P, util.host_ptr(order[1]))
    if st._collate_fn then
        -- the user's: the list of examples (each a value, or a list of the
        -- values its get gives) to the batch's values
        local examples = {}
        for j = 1, len do
            local i = tonumber(p[start + j - 2])
            local item = {st._get(i)}
            if item[1] == nil then fail(fmt("DataLoader: the dataset's example %d is nil", i)) end
            examples[j] = table.maxn(item) > 1 and item or item[1]
        end
        local out = {st._collate_fn(examples)}
        out.n = table.maxn(out)
        return out
    end
    local fields, nf, ids = nil, nil, {}
    for j = 1, len do
        local i = tonumber(p[start + j - 2])
        ids[j] = i
        local item = {st._get(i)}
        if #item == 1 and plain(item[1]) and item[1][1] ~= nil then item = item[1] end
        if item[1] == nil then
            fail(fmt("DataLoader: the dataset's example %d is nil (expected tensors or numbers, or a list of them)", i))
        end
        if not fields then
            nf = #item
            fields = {}
            for k = 1, nf do fields[k] = {} end
        elseif #item ~= nf then
            fail(fmt("DataLoader: the dataset's example %d has %d value%s, example %d had %d", i, #item,
                     #item == 1 and "" or "s", ids[1], nf))
        end
        for k = 1, nf do fields[k][j] = item[k] end
    end
    local out = {n = nf}
    local b = floor((start - 1) / st.batch_size) + 1
    for k = 1, nf do out[k] = collate_value(fields[k], ids, "value " .. k, b) end
    return out
end

-- One batch (b from 1): index_select of every tensor at the order's slice
-- (a dataset that is not of tensors: its examples, collated).
local function make_batch(st, order, b)
    local start = (b - 1) * st.batch_size + 1
    local len = min(st.batch_size, st.n - start + 1)
    if st._get then
        local out = collate(st, order, start, len)
        if st.pin_memory then
            local function pin(v)
                if is_tensor(v) then
                    return v:device().dev_type ~= cdef.GPU and v:pin_memory() or v
                end
                if plain(v) then
                    for k, w in pairs(v) do v[k] = pin(w) end
                end
                return v
            end
            for k = 1, out.n do out[k] = pin(out[k]) end
        end
        return out
    end
    local out = {n = #st.tensors}
    for k, t in ipairs(st.tensors) do
        out[k] = t:index_select(1, order[k]:narrow(1, start, len))
        -- the gather writes pageable memory; one copy makes the batch pinned
        if st.pin_memory and t:device().dev_type ~= cdef.GPU then out[k] = out[k]:pin_memory() end
    end
    return out
end

local function state_of(fname, self)
    local st = type(self) == "userdata" and self._loader_state
    if not st then
        fail(fmt("%s: expected a DataLoader as self, got %s (call it as loader:%s(...))", fname, typename(self),
                 fname))
    end
    return st
end

-- loader:num_batches(): batches per epoch (also #loader).
function Loader.num_batches(self)
    return state_of("num_batches", self).nb
end

-- loader:iter(): for i, xb, yb in loader:iter() do ... end, one epoch.
-- Each call draws a new order when shuffle is set.  Batch i + 1 is pushed
-- before batch i is returned, so its gather is queued while the loop body's
-- ops for batch i run (ops return at once; the engine orders them).  So a
-- change to the dataset tensors themselves inside the loop shows from batch
-- i + 2 on; batches are copies, free to change in place.
function Loader.iter(self)
    local st = state_of("iter", self)
    st.epoch = st.epoch + 1
    local order = {}
    if st.shuffle or not st.order then
        local perm = epoch_order(st)
        -- the order goes to each tensor's device once per epoch (index_select
        -- takes its index from the data's device; for pinned data, from the
        -- cpu(n) beside it: the index needs no pinning)
        local on = {[perm:device()] = perm}
        if st._get then order[1] = perm end
        for k, t in ipairs(st.tensors) do
            local dev = t:device()
            if dev.dev_type == cdef.CPU_PINNED then dev = util.cpu(dev.id) end
            on[dev] = on[dev] or perm:to(dev)
            order[k] = on[dev]
        end
        if not st.shuffle then st.order = order end
    else
        order = st.order
    end
    local nb, b = st.nb, 0
    local nxt = nb > 0 and make_batch(st, order, 1) or nil
    return function()
        if b >= nb then return nil end
        b = b + 1
        local cur = nxt
        nxt = b < nb and make_batch(st, order, b + 1) or nil
        return b, unpack(cur, 1, cur.n)
    end
end

-- loader() is loader:iter(); the loader itself is also a generic-for
-- iterator, `for i, xb, yb in loader do` (a Torch user's `for xb, yb in
-- loader`): the for calls it with its state and control values, (nil, nil)
-- at the start, which begins an epoch, then (nil, i), which gives batch
-- i + 1 of that epoch.  (Before, that call began a new epoch every time and
-- returned its iterator function as i: an endless loop.)
local function loader_call(self, ...)
    local nargs = select("#", ...)
    if nargs == 0 then return Loader.iter(self) end
    local st = state_of("iter", self)
    local s, ctrl = ...
    if nargs ~= 2 or s ~= nil or (ctrl ~= nil and type(ctrl) ~= "number") then
        fail("DataLoader: loader() takes no arguments (for i, xb, yb in loader do, in loader() do, or in " ..
             "loader:iter() do)")
    end
    if ctrl == nil then
        st.for_iter = Loader.iter(self)
    elseif st.for_iter == nil or ctrl ~= st.for_b then
        fail("DataLoader: another `for ... in loader do` over this loader began since this one (one such loop at " ..
             "a time: loops side by side each take their own loader:iter())")
    end
    local r = {st.for_iter()}
    st.for_b = r[1]
    if r[1] == nil then
        st.for_iter = nil
        return nil
    end
    return unpack(r, 1, table.maxn(r))
end

local function loader_tostring(self)
    local st = self._loader_state
    return fmt("ordo.data.DataLoader(%d example%s, batch_size=%d, %d batch%s%s%s%s)", st.n, st.n == 1 and "" or "s",
               st.batch_size, st.nb, st.nb == 1 and "" or "es",
               st.shuffle and ", shuffle" or "", st.drop_last and ", drop_last" or "",
               st.pin_memory and ", pin_memory" or "")
end

local new_loader, dataset_loader

-- loader(x [, y] [, opts]): batches of x (and y) along dim 1.
--   opts.batch_size  examples per batch (default 1)
--   opts.shuffle     a new order each epoch (default false)
--   opts.drop_last   leave out a last batch smaller than batch_size (default false)
--   opts.pin_memory  batches of host tensors in pinned memory, so that their
--                    copies to a GPU run asynchronously (needs a CUDA device)
-- loader(ds [, opts]): batches of a dataset's examples (the same options,
-- and opts.collate_fn: the batch's values from the list of its examples).
-- The loader: loader:iter() (one epoch), loader:num_batches() or #loader,
-- loader.n, loader.batch_size, loader.epoch (epochs started), loader.dataset
-- (the dataset it was made from; nil for tensors).
function M.loader(x, y, opts, ...)
    local fname = "DataLoader"
    if not is_tensor(x) then
        if dataset_access(fname, x, "the dataset") then
            if opts ~= nil and not is_tensor(y) then
                fail(fmt("%s: got %s second and %s third: data.loader(ds, opts) takes one options table", fname,
                         typename(y), typename(opts)))
            end
            return dataset_loader(fname, x, y, opts, ...)
        end
        fail(fmt("%s: expected a tensor of examples or %s first, got %s", fname, NOT_DATASET, typename(x)))
    end
    if is_tensor(y) and is_tensor(opts) then
        -- (was "expected an options table, got ordo.Tensor")
        fail(fmt("%s: takes at most two tensors, x and y, then the options; got a third tensor (more tensors: " ..
                 "data.loader(data.TensorDataset(x, y, z, ...), opts))", fname))
    end
    -- (an argument past the options was dropped: a second options table,
    -- {shuffle = true}, left the loader unshuffled without a word)
    for i = 1, select("#", ...) do
        local extra = select(i, ...)
        if extra ~= nil then
            fail(fmt("%s: expected at most 3 arguments (x, y, opts), got %s after the options (one options " ..
                     "table holds them all)", fname, typename(extra)))
        end
    end
    if y ~= nil and not is_tensor(y) and type(y) == "table" and getmetatable(y) == nil and y[1] == nil and
        opts ~= nil then
        -- loader(x, opts, more): was "the targets must be a tensor, got a Lua list"
        fail(fmt("%s: got an options table second and %s third (data.loader(x, opts) or " ..
                 "data.loader(x, y, opts): one options table, last)", fname, typename(opts)))
    end
    if y ~= nil and not is_tensor(y) then
        if opts == nil and type(y) == "table" and getmetatable(y) == nil and y[1] == nil then
            y, opts = nil, y -- loader(x, opts)
        elseif type(y) == "table" and getmetatable(y) == nil then
            -- (was read as options: "unknown option '1'")
            fail(fmt("%s: the targets must be a tensor, got a Lua list (make it one: ordo.tensor(y, \"int64\"))", fname))
        else
            fail(fmt("%s: expected a tensor of targets (or options) second, got %s", fname, typename(y)))
        end
    end
    if type(opts) == "table" and getmetatable(opts) == nil and opts.collate_fn ~= nil then
        fail(fmt("%s: collate_fn takes a dataset's examples: data.loader(data.TensorDataset(x, y), " ..
                 "{collate_fn = f}) (batches of tensors are gathered whole)", fname))
    end
    opts = check_opts(fname, opts, LOADER_OPTS)
    if x:dim() < 1 then fail(fname .. ": x has no dims: the first dim counts the examples") end
    local n = x:size(1)
    if y then
        if y:dim() < 1 then fail(fname .. ": y has no dims: the first dim counts the examples") end
        if y:size(1) ~= n then
            fail(fmt("%s: x has %d examples (shape %s) but y has %d (shape %s): the first dims must match", fname, n,
                     tensor.shape_str(x:shape()), y:size(1), tensor.shape_str(y:shape())))
        end
    end
    if y and x._c.storage.engine ~= y._c.storage.engine then
        fail(fname .. ": x and y belong to different engines (make them on one, {engine = e})")
    end
    return new_loader(fname, opts, {tensors = {x, y}, n = n})
end

-- The rows of a TensorDataset, or of Subsets (of Subsets) of one, as its
-- tensors and the rows in order (nil: all of them), so that a batch is one
-- index_select per tensor; nil for any other dataset.
local function tensor_rows(ds)
    local st, index = DS_STATE[ds], nil
    while st and st.kind == "Subset" do
        local list = st.indices
        if index then
            for i = 1, #index do index[i] = list[index[i]] end
        else
            index = {}
            for i = 1, #list do index[i] = list[i] end
        end
        st = DS_STATE[st.dataset]
    end
    if st and st.kind == "TensorDataset" then return {unpack(st.tensors)}, index end -- (a copy: loader.tensors)
    return nil
end

-- loader(ds [, opts]): batches of a dataset's examples.
function dataset_loader(fname, ds, opts, ...)
    local n, get = dataset_access(fname, ds, "the dataset")
    if is_tensor(opts) then
        fail(fmt("%s: a dataset holds its targets: data.loader(ds, opts) (or data.loader(x, y, opts) for tensors), " ..
                 "got a tensor second", fname))
    end
    for i = 1, select("#", ...) do
        if select(i, ...) ~= nil then
            fail(fmt("%s: expected at most 2 arguments with a dataset (ds, opts), got %s after the options", fname,
                     typename(select(i, ...))))
        end
    end
    opts = check_opts(fname, opts, DATASET_LOADER_OPTS)
    local cf = opts.collate_fn
    if cf ~= nil then
        local mt = getmetatable(cf)
        if type(cf) ~= "function" and not (type(mt) == "table" and mt.__call) then
            fail(fmt("%s: collate_fn must be a function (of the list of a batch's examples), got %s", fname,
                     typename(cf)))
        end
        return new_loader(fname, opts, {tensors = {}, _get = get, _collate_fn = cf, n = n, dataset = ds})
    end
    local tensors, index = tensor_rows(ds)
    if tensors then return new_loader(fname, opts, {tensors = tensors, _index = index, n = n, dataset = ds}) end
    return new_loader(fname, opts, {tensors = {}, _get = get, n = n, dataset = ds})
end

-- The loader over st (tensors, n, and _index or _get), with opts checked.
function new_loader(fname, opts, st)
    local n = st.n
    local bs = opts.batch_size == nil and 1 or opts.batch_size
    if not is_posint(bs) then fail(fname .. ": batch_size must be a positive integer, got " .. shown(bs)) end
    for _, k in ipairs({"shuffle", "drop_last", "pin_memory"}) do
        if opts[k] ~= nil and type(opts[k]) ~= "boolean" then
            fail(fmt("%s: %s must be true or false, got %s", fname, k, typename(opts[k])))
        end
    end
    if opts.pin_memory then
        -- fails at once without a CUDA device (named as the loader's option:
        -- "cpu_pinned(0): ..." did not say which call)
        local ok, why = pcall(util.cpu_pinned, 0)
        if not ok then
            fail(fmt("%s: pin_memory = true: %s", fname, (tostring(why):gsub("^.-cpu_pinned%(0%): ", ""))))
        end
    end
    local drop = opts.drop_last == true
    st.batch_size = bs
    st.shuffle = opts.shuffle == true
    st.drop_last = drop
    st.pin_memory = opts.pin_memory == true
    st.nb = drop and floor(n / bs) or floor((n + bs - 1) / bs)
    st.epoch = 0
    setmetatable(st, {__index = Loader})
    st._loader_state = st
    local proxy = newproxy(true)
    local mt = getmetatable(proxy)
    mt.__name = "ordo.data.DataLoader"
    mt.__index = st
    mt.__newindex = function() fail(fname .. ": a loader's fields are read-only (make a new loader)") end
    mt.__len = function() return st.nb end
    mt.__call = loader_call -- for i, xb, yb in loader do (or loader() do)
    mt.__tostring = loader_tostring
    return proxy
end

setmetatable(Loader, {__call = function(_, ...) return M.loader(...) end}) -- ordo.data.DataLoader(x, y, opts)

return M
