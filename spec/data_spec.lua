-- ordo.data: IDX files (plain and gzip), Fashion-MNIST, the DataLoader.
local ordo = require "ordo"
local cdef = require "ordo.cdef"
local ffi = require "ffi"

local data = ordo.data

-- ---------------------------------------------------------------- IDX writing

local CODE = {u8 = 0x08, i8 = 0x09, i16 = 0x0B, i32 = 0x0C, f32 = 0x0D, f64 = 0x0E}
local CTYPE = {u8 = "uint8_t", i8 = "int8_t", i16 = "int16_t", i32 = "int32_t", f32 = "float", f64 = "double"}

local function be32(n)
    return string.char(math.floor(n / 2 ^ 24) % 256, math.floor(n / 2 ^ 16) % 256, math.floor(n / 2 ^ 8) % 256, n % 256)
end

-- the big-endian bytes of v as ctype (the host is little-endian)
local function be_bytes(ctype, v)
    local size = ffi.sizeof(ctype)
    local box = ffi.new(ctype .. "[1]", v)
    local p = ffi.cast("uint8_t *", box)
    local s = {}
    for i = size - 1, 0, -1 do s[#s + 1] = string.char(p[i]) end
    return table.concat(s)
end

local function idx_bytes(kind, shape, flat)
    local parts = {"\0\0", string.char(CODE[kind]), string.char(#shape)}
    for _, d in ipairs(shape) do parts[#parts + 1] = be32(d) end
    for _, v in ipairs(flat) do parts[#parts + 1] = be_bytes(CTYPE[kind], v) end
    return table.concat(parts)
end

local function write_plain(path, bytes)
    local f = assert(io.open(path, "wb"))
    f:write(bytes)
    f:close()
end

local function write_gz(path, bytes)
    local z = assert(cdef.zlib())
    local gz = z.gzopen(path, "wb")
    assert(gz ~= nil, "gzopen " .. path)
    assert(z.gzwrite(gz, bytes, #bytes) == #bytes)
    assert(z.gzclose(gz) == 0)
end

local function write_idx(path, kind, shape, flat, gz)
    local bytes = idx_bytes(kind, shape, flat)
    if gz then write_gz(path, bytes) else write_plain(path, bytes) end
end

local function flatten(t, out)
    out = out or {}
    if type(t) ~= "table" then
        out[#out + 1] = t
        return out
    end
    for _, v in ipairs(t) do flatten(v, out) end
    return out
end

local tmpdir
local function tmp(name) return tmpdir .. "/" .. name end

-- caught error messages
local function err_of(fn, ...)
    local ok, e = pcall(fn, ...)
    assert(not ok, "expected an error")
    return tostring(e)
end

setup(function()
    local base = os.tmpname()
    os.remove(base)
    tmpdir = base .. "_ordo_data"
    assert(os.execute("mkdir -p '" .. tmpdir .. "'") == 0)
end)

teardown(function()
    if tmpdir then os.execute("rm -rf '" .. tmpdir .. "'") end
end)

-- ---------------------------------------------------------------- read_idx

describe("data.read_idx", function()
    -- The first tensor of a run is often the data: an engine that cannot
    -- start was reported as the file's fault ("... declares uint8 data of
    -- shape 3: cannot start the default engine ...").
    it("an engine that cannot start is named as such, not as a fault of the file", function()
        local path = os.tmpname()
        local f = assert(io.open(path, "wb"))
        f:write("\0\0\8\1\0\0\0\3", "\1\2\3")
        f:close()
        local p = io.popen(("ORDO_ENGINE_TYPE=bogus LUA_PATH='lua/?.lua;lua/?/init.lua;;' luajit -e " ..
                            "'print(pcall(require(\"ordo\").data.read_idx, \"%s\"))' 2>&1"):format(path))
        local out = p:read("*a")
        p:close()
        os.remove(path)
        assert.is_truthy(out:find("read_idx: cannot start the default engine: ordo_engine_create: " ..
                                  "ORDO_ENGINE_TYPE=bogus", 1, true), out)
        assert.is_nil(out:find("declares", 1, true), out)
    end)

    local cases = {
        {kind = "u8", dtype = "uint8", shape = {2, 3, 4}, gen = function(i) return (i * 37) % 256 end},
        {kind = "i8", dtype = "int32", shape = {5}, flat = {-128, -1, 0, 1, 127}},
        {kind = "i16", dtype = "int32", shape = {2, 3}, flat = {-32768, -300, -1, 0, 258, 32767}},
        {kind = "i32", dtype = "int32", shape = {3, 1}, flat = {-2147483648, 16909060, 2147483647}},
        {kind = "f32", dtype = "float32", shape = {2, 2}, flat = {1.5, -2.25, 0, 3e-5}},
        {kind = "f64", dtype = "float64", shape = {3}, flat = {1 / 3, -1e300, 2 ^ -1000}},
    }
    for _, c in ipairs(cases) do
        for _, gz in ipairs({false, true}) do
            it(("reads %s files (%s) with the right shape, dtype and values"):format(c.kind, gz and "gzip" or "plain"),
               function()
                local flat = c.flat
                if not flat then
                    flat = {}
                    local n = 1
                    for _, d in ipairs(c.shape) do n = n * d end
                    for i = 1, n do flat[i] = c.gen(i) end
                end
                local path = tmp(c.kind .. (gz and ".idx.gz" or ".idx"))
                write_idx(path, c.kind, c.shape, flat, gz)
                local t = data.read_idx(path)
                assert.are.same(c.shape, t:shape())
                assert.are.equal(c.dtype, t:dtype())
                local got = flatten(t:totable())
                if c.kind == "f32" then
                    for i, v in ipairs(flat) do flat[i] = tonumber(ffi.new("float", v)) end
                end
                assert.are.same(flat, got)
            end)
        end
    end

    it("reads a large uint8 file exactly (more than one piece of the plain reader)", function()
        local n = 3 * 2 ^ 20 + 5
        local parts = {}
        for i = 0, 255 do parts[#parts + 1] = string.char(i) end
        local block = table.concat(parts)
        local body = string.rep(block, math.ceil(n / 256)):sub(1, n)
        for _, gz in ipairs({false, true}) do
            local path = tmp(gz and "big.gz" or "big")
            local bytes = "\0\0\8\1" .. be32(n) .. body
            if gz then write_gz(path, bytes) else write_plain(path, bytes) end
            local t = data.read_idx(path)
            assert.are.same({n}, t:shape())
            assert.are.equal("uint8", t:dtype())
            -- the sum of 0..255 repeated, then a partial block
            local full, rest = math.floor(n / 256), n % 256
            assert.are.equal(full * 255 * 256 / 2 + (rest - 1) * rest / 2, t:sum():item())
            for _, i in ipairs({1, 256, 257, 2 ^ 20, 2 ^ 20 + 1, 3 * 2 ^ 20, n}) do
                assert.are.equal((i - 1) % 256, t:narrow(1, i, 1):item())
            end
        end
    end)

    it("limit reads only the first entries of dim 1", function()
        local flat = {}
        for i = 1, 24 do flat[i] = i end
        local path = tmp("limit.idx.gz")
        write_idx(path, "u8", {4, 2, 3}, flat, true)
        local t = data.read_idx(path, {limit = 2})
        assert.are.same({2, 2, 3}, t:shape())
        assert.are.same({{{1, 2, 3}, {4, 5, 6}}, {{7, 8, 9}, {10, 11, 12}}}, t:totable())
        assert.are.same({4, 2, 3}, data.read_idx(path, {limit = 10}):shape())
        assert.are.same({0, 2, 3}, data.read_idx(path, {limit = 0}):shape())
    end)

    it("reads a file with an empty first dim", function()
        local path = tmp("empty.idx")
        write_idx(path, "u8", {0, 28, 28}, {}, false)
        local t = data.read_idx(path)
        assert.are.same({0, 28, 28}, t:shape())
    end)

    it("raises clear errors for missing, truncated and non-IDX files", function()
        local e = err_of(data.read_idx, tmp("no_such_file.gz"))
        assert.matches("read_idx: cannot open .*no_such_file.gz", e)

        local path = tmp("trunc.idx.gz")
        write_gz(path, idx_bytes("u8", {10, 10}, {1, 2, 3}))
        e = err_of(data.read_idx, path)
        assert.matches("read_idx: .*trunc.idx.gz is truncated", e)
        assert.matches("100 bytes", e)

        path = tmp("trunc_header.idx")
        write_plain(path, "\0\0\8")
        assert.matches("truncated", err_of(data.read_idx, path))

        -- a damaged header declaring a huge shape: refused before any allocation of that size
        path = tmp("huge.idx")
        write_plain(path, "\0\0\8\2\0\61\9\0\0\61\9\0xx")
        e = err_of(data.read_idx, path)
        assert.matches("read_idx: .*huge.idx is truncated: uint8 data of shape 4000000x4000000 needs 16000000000000 bytes, the file has 2", e)
        -- past 2^63 bytes the count is still a count (%d wrapped it to -9223372036854775808)
        write_plain(path, "\0\0\8\2\255\255\255\255\255\255\255\255")
        e = err_of(data.read_idx, path)
        assert.matches("needs 18446744065119617024 bytes, the file has 0", e, 1, true)
        path = tmp("huge.idx.gz") -- compressed: the size is unknown, so the allocation says it
        write_gz(path, "\0\0\8\2\0\61\9\0\0\61\9\0xx")
        e = err_of(data.read_idx, path)
        assert.matches("read_idx: .*huge.idx.gz declares uint8 data of shape 4000000x4000000: out of memory", e)

        -- bytes past the declared data: a wrong header or two files joined, not a tensor to trust
        path = tmp("extra.idx")
        write_plain(path, idx_bytes("u8", {2, 3}, {1, 2, 3, 4, 5, 6}) .. "\7\7")
        e = err_of(data.read_idx, path)
        assert.matches("read_idx: .*extra.idx has 2 bytes after the uint8 data of shape 2x3 its header declares", e)
        assert.same({{1, 2, 3}}, data.read_idx(path, {limit = 1}):totable()) -- a limit reads a prefix
        path = tmp("extra.idx.gz")
        write_gz(path, idx_bytes("f32", {2}, {1.5, 2.5}) .. "\0")
        e = err_of(data.read_idx, path)
        assert.matches("read_idx: .*extra.idx.gz has bytes after the float32 data of shape 2 its header", e)

        path = tmp("notidx.txt")
        write_plain(path, "hello world")
        e = err_of(data.read_idx, path)
        assert.matches("read_idx: .*notidx.txt is not an IDX file", e)

        assert.matches("read_idx: expected a file path, got number", err_of(data.read_idx, 3))
        assert.matches("read_idx: limit must be", err_of(data.read_idx, path, {limit = -1}))
        assert.matches("read_idx: unknown option 'lim'", err_of(data.read_idx, path, {lim = 1}))
    end)

    it("a gzip file cut anywhere raises, its 8-byte trailer (CRC and size) included", function()
        local path = tmp("whole.idx.gz")
        write_gz(path, idx_bytes("f32", {3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}))
        local f = assert(io.open(path, "rb"))
        local whole = f:read("*a")
        f:close()
        assert.same({1, 2, 3, 4}, data.read_idx(path):totable()[1])
        local cut = tmp("cut.idx.gz")
        for n = 0, #whole - 1 do -- was: a file missing only its trailer read as whole
            write_plain(cut, whole:sub(1, n))
            local ok, e = pcall(data.read_idx, cut)
            assert(not ok, "a gzip file cut to " .. n .. " of " .. #whole .. " bytes was read")
            assert.matches("read_idx: .*cut.idx.gz", tostring(e))
        end
        write_plain(cut, whole:sub(1, #whole - 4))
        assert.matches("cut.idx.gz is truncated %(the gzip stream ends early%)", err_of(data.read_idx, cut))
    end)

    it("reads a plain IDX file from a pipe (a FIFO); a gzip one there is refused, never a hang", function()
        local fifo = tmp("idx.fifo")
        if os.execute("mkfifo '" .. fifo .. "' 2>/dev/null") ~= 0 then return end
        local plain, gz = tmp("piped.idx"), tmp("piped.idx.gz")
        write_plain(plain, idx_bytes("i16", {2, 2}, {1, -2, 300, -400}))
        write_gz(gz, idx_bytes("u8", {2}, {1, 2}))
        -- Each writer runs in the background and is waited for before the
        -- next one starts: a reader that stops at the data's end closes
        -- the FIFO while its writer may still hold it open, and the next
        -- reader would then meet that writer's end of file, not the next.
        local done = tmp("writer.done")
        local function feed(cmd)
            os.remove(done)
            os.execute("(" .. cmd .. " > '" .. fifo .. "' 2>/dev/null; : > '" .. done .. "') &")
        end
        local function fed()
            for _ = 1, 2000 do
                local f = io.open(done, "rb")
                if f then f:close() return end
                os.execute("sleep 0.01")
            end
            error("the FIFO's writer did not finish")
        end
        -- was: the two bytes read to look for gzip's magic were lost: "not an IDX file (magic bytes 0b 02 00 00...)"
        feed("cat '" .. plain .. "'")
        assert.same({{1, -2}, {300, -400}}, data.read_idx(fifo):totable())
        fed()
        feed("cat '" .. plain .. "'")
        assert.same({{1, -2}}, data.read_idx(fifo, {limit = 1}):totable())
        fed()
        feed("head -c 16 '" .. plain .. "'")
        assert.matches("is truncated: int16 data of shape 2x2 needs 8 bytes, the file has 4", err_of(data.read_idx, fifo))
        fed()
        -- was: zlib reopened the FIFO and waited for a writer that was gone
        feed("cat '" .. gz .. "'")
        assert.matches("read_idx: .*idx.fifo is gzip%-compressed and not a regular file", err_of(data.read_idx, fifo))
        fed()
        os.remove(fifo)
        os.remove(done)
    end)

    it("says a directory is one, and names a missing file once", function()
        local dir = os.tmpname()
        os.remove(dir)
        assert(os.execute("mkdir '" .. dir .. "'") == 0)
        local e = err_of(data.read_idx, dir)
        assert.matches("read_idx: " .. dir:gsub("%p", "%%%0") .. " is a directory, not a file", e)
        assert.is_nil(e:find("truncated", 1, true))
        os.remove(dir)
        local missing = tmp("no_such_file.idx")
        e = err_of(data.read_idx, missing)
        assert.matches("read_idx: cannot open [^:]*no_such_file.idx: No such file or directory$", e)
        assert.matches("read_idx: the file path is empty", err_of(data.read_idx, ""))
    end)

    it("names the caller's line in its errors", function()
        local ok, e = pcall(function() return data.read_idx(tmp("nothing_here")) end)
        assert.is_false(ok)
        assert.matches("data_spec.lua:%d+: read_idx:", e)
    end)
end)

-- ---------------------------------------------------------------- Fashion-MNIST

-- A small fake Fashion-MNIST directory: n28 images of 28x28 with known pixels.
local function fake_fmnist(dir, ntrain, ntest, gz)
    assert(os.execute("mkdir -p '" .. dir .. "'") == 0)
    local function images(n, seed)
        local flat = {}
        for i = 1, n * 784 do flat[i] = (i * seed) % 256 end
        return flat
    end
    local function labels(n, seed)
        local flat = {}
        for i = 1, n do flat[i] = (i * seed) % 10 end
        return flat
    end
    local ext = gz and ".gz" or ""
    write_idx(dir .. "/train-images-idx3-ubyte" .. ext, "u8", {ntrain, 28, 28}, images(ntrain, 7), gz)
    write_idx(dir .. "/train-labels-idx1-ubyte" .. ext, "u8", {ntrain}, labels(ntrain, 3), gz)
    write_idx(dir .. "/t10k-images-idx3-ubyte" .. ext, "u8", {ntest, 28, 28}, images(ntest, 11), gz)
    write_idx(dir .. "/t10k-labels-idx1-ubyte" .. ext, "u8", {ntest}, labels(ntest, 7), gz)
end

-- A temporary file holding text, and the error a read_csv call raises.
local function csv_file(text)
    local path = os.tmpname()
    local f = assert(io.open(path, "wb"))
    f:write(text)
    f:close()
    return path
end
local function csv_err(...)
    local ok, e = pcall(data.read_csv, ...)
    assert.is_false(ok)
    return tostring(e)
end

describe("data.read_csv", function()
    local file, err = csv_file, csv_err

    it("reads numbers, a header (auto, forced, none), quotes, nan/inf, CRLF and other delimiters", function()
        local p = file('x, y ,"label, name"\r\n1, 2.5, 3\r\n4,-5e2,"6"\r\n\r\nnan, inf, -inf\r\n')
        local t, names = data.read_csv(p)
        assert.same({"x", "y", "label, name"}, names)
        assert.same({3, 3}, t:shape())
        assert.equals("float32", t:dtype())
        local v = t:totable()
        assert.same({1, 2.5, 3}, v[1])
        assert.same({4, -500, 6}, v[2])
        assert.is_true(v[3][1] ~= v[3][1] and v[3][2] == math.huge and v[3][3] == -math.huge)
        os.remove(p)
        p = file("1;2\n3;4\n")
        local n, nn_ = data.read_csv(p, {delimiter = ";", dtype = "float64"})
        assert.same({{1, 2}, {3, 4}}, n:totable())
        assert.equals("float64", n:dtype())
        assert.is_nil(nn_)
        -- no dtype: the default float dtype, as the makers' (float32 read into a float64 script's model failed)
        local prev = ordo.get_default_dtype()
        ordo.set_default_dtype("float64")
        local okd, d = pcall(data.read_csv, p, {delimiter = ";"})
        ordo.set_default_dtype(prev)
        assert.is_true(okd, d)
        assert.equals("float64", d:dtype())
        assert.equals("float32", data.read_csv(p, {delimiter = ";"}):dtype())
        local h, hn = data.read_csv(p, {delimiter = ";", header = true}) -- the first line as names, though numeric
        assert.same({"1", "2"}, hn)
        assert.same({{3, 4}}, h:totable())
        os.remove(p)
        p = file('"a ""quoted"" name"\tb\n1\t2\n')
        local q, qn = data.read_csv(p, {delimiter = "\t"})
        assert.same({'a "quoted" name', "b"}, qn)
        assert.same({{1, 2}}, q:totable())
        os.remove(p)
        p = file("")
        assert.same({0, 0}, data.read_csv(p):shape())
        os.remove(p)
        p = file("a,b\n")
        assert.same({0, 2}, data.read_csv(p):shape())
        os.remove(p)
    end)

    it("skips a UTF-8 byte-order mark at the start (numbers stay data, a header keeps its names)", function()
        local p = file("\239\187\1911,2\n3,4\n")
        local t, names = data.read_csv(p)
        assert.is_nil(names)
        assert.same({{1, 2}, {3, 4}}, t:totable())
        os.remove(p)
        p = file("\239\187\191a,b\r\n1,2\r\n")
        t, names = data.read_csv(p)
        assert.same({"a", "b"}, names)
        assert.same({{1, 2}}, t:totable())
        os.remove(p)
        p = file("\239\187\191\n1,2\n") -- a mark alone on the first line: a blank line
        assert.same({{1, 2}}, data.read_csv(p):totable())
        os.remove(p)
        -- only at the start of the file: later, those bytes are not a number
        p = file("1,2\n\239\187\1913,4\n")
        assert.matches("line 2, column 1", err(p), 1, true)
        os.remove(p)
    end)

    it("names the line and column of what it cannot read; missing fills empty fields", function()
        local p = file("a,b\n1,2\n3,\n")
        assert.matches("line 3, column 2 (b): an empty field", err(p), 1, true)
        local t = data.read_csv(p, {missing = -1})
        assert.same({{1, 2}, {3, -1}}, t:totable())
        os.remove(p)
        p = file("1,2\n3,4,5\n")
        assert.matches("line 2 has 3 fields, expected 2", err(p), 1, true)
        os.remove(p)
        p = file("1,2\n3,abc\n")
        assert.matches('line 2, column 2: "abc" is not a number', err(p), 1, true)
        local named = file("x,2\n")
        assert.matches('line 1, column 1: "x" is not a number', err(named, {header = false}), 1, true)
        os.remove(named)
        os.remove(p)
        -- LuaJIT's tonumber reads binary literals: 0b101 was read as 5 (hex stays a number)
        p = file("1,2\n0b101,-0B1\n0x10,3\n")
        assert.matches('line 2, column 1: "0b101" is not a number', err(p), 1, true)
        os.remove(p)
        p = file("0x10,3\n")
        assert.same({{16, 3}}, data.read_csv(p):totable())
        os.remove(p)
        -- numbers split by another delimiter: the error says which to give
        p = file("1;2\n3;4\n")
        assert.matches('line 2, column 1 (1;2): "3;4" is not a number (the file\'s delimiter may be ";": ' ..
                       'give {delimiter = ";"})', err(p), 1, true)
        os.remove(p)
        p = file("1\t2.5\n")
        assert.matches('(the file\'s delimiter may be "\\t": give {delimiter = "\\t"})', err(p, {header = false}), 1,
                       true)
        os.remove(p)
        p = file("1,2\nx;y,3\n")
        assert.matches('"x;y" is not a number\n', err(p) .. "\n", 1, true) -- (no hint: not numbers)
        os.remove(p)
        p = file('1,"2\n')
        assert.matches("line 1: an unclosed quote", err(p), 1, true)
        os.remove(p)
        assert.matches("cannot open", err("/nonexistent/x.csv"), 1, true)
        -- the path once, then io's reason
        assert.matches("read_csv: cannot open /nonexistent/x.csv: No such file or directory$",
                       err("/nonexistent/x.csv"))
        assert.matches("read_csv: the file path is empty", err(""), 1, true)
        assert.matches("read_csv: expected a file path, got nil", err(nil), 1, true)
        local dir = os.tmpname()
        os.remove(dir)
        assert(os.execute("mkdir '" .. dir .. "'") == 0)
        local e = err(dir)
        assert.matches("spec/data_spec.lua:%d+: read_csv: " .. dir:gsub("%p", "%%%0") .. " is a directory, not a file", e)
        os.remove(dir)
        p = file("1,2\n")
        assert.matches("read_csv: unknown dtype 'bogus'", err(p, {dtype = "bogus"}), 1, true)
        assert.matches("read_csv: unknown dtype 'bogus'", err("/nonexistent/x.csv", {dtype = "bogus"}), 1, true)
        os.remove(p)
        assert.matches("delimiter must be one character", err("x.csv", {delimiter = ";;"}), 1, true)
        assert.matches("header must be", err("x.csv", {header = "yes"}), 1, true)
        assert.matches("unknown option", err("x.csv", {sep = ";"}), 1, true)
    end)
end)

describe("data.read_csv: what does not read exactly is an error", function()
    local file, err = csv_file, csv_err

    it("a NUL byte, or a carriage return inside a line (CR line ends), names its line", function()
        -- was: the NUL and what followed it were dropped ("1,2\0junk" read as 1, 2)
        local p = file("1,2\n3,4\0junk\n")
        assert.matches(p .. " line 2: a NUL byte", err(p), 1, true)
        os.remove(p)
        -- was: one line whose fields made a header: a 0x3 tensor and no error
        p = file("1,2\r3,4\r")
        assert.matches(p .. " line 1: a carriage return inside the line", err(p), 1, true)
        os.remove(p)
        p = file("1,2\r\n3,4\r\n") -- CRLF is fine
        assert.same({{1, 2}, {3, 4}}, data.read_csv(p):totable())
        os.remove(p)
    end)

    it("a finite field past float32's range is an error with float32 (it was inf), read with float64", function()
        local p = file("x,y\n1,3.4e38\n2,-1e39\n")
        assert.matches(p .. ' line 3, column 2 (y): "-1e39" does not fit in float32', err(p), 1, true)
        assert.equals(-1e39, data.read_csv(p, {dtype = "float64"}):totable()[2][2])
        os.remove(p)
        p = file("3.4028235e38,inf,-inf,nan,1e-50\n") -- FLT_MAX (rounded), infinities and underflow are fine
        local v = data.read_csv(p):totable()[1]
        assert.is_true(v[1] < math.huge and v[2] == math.huge and v[3] == -math.huge and v[4] ~= v[4] and v[5] == 0)
        os.remove(p)
        assert.matches("missing = 1e+39 does not fit in float32", err(p, {missing = 1e39}), 1, true)
    end)

    it("digits past float64's range are an error in either float dtype (1e400 was read as inf)", function()
        local p = file("x,y\n1,1e400\n")
        assert.matches(p .. ' line 2, column 2 (y): "1e400" does not fit in float32 (it would be inf)', err(p), 1, true)
        assert.matches(p .. ' line 2, column 2 (y): "1e400" does not fit in float64 (it would be inf)',
                       err(p, {dtype = "float64"}), 1, true)
        os.remove(p)
        p = file("-1e999\n")
        assert.matches('"-1e999" does not fit in float64', err(p, {dtype = "float64"}), 1, true)
        os.remove(p)
        -- the words stay infinities, in any case and with a sign
        p = file("INF,-Infinity,+inf\n")
        assert.same({{math.huge, -math.huge, math.huge}}, data.read_csv(p, {dtype = "float64"}):totable())
        os.remove(p)
    end)

    it("int64 fields written with a point or an exponent are exact past 2^53 too", function()
        -- was: read through a Lua number, each of these became 9007199254740992
        local p = file("9007199254740993.0,9.007199254740993e15,90071992547409930e-1, 9007199254740993.000 \n")
        local s = tostring(data.read_csv(p, {dtype = "int64"}))
        os.remove(p)
        local _, n = s:gsub("9007199254740993", "")
        assert.equals(4, n, s)
        p = file("1e18,-2.5e3,0.0e5,1200e-2,-0\n")
        assert.same({{1e18, -2500, 0, 12, 0}}, data.read_csv(p, {dtype = "int64"}):totable())
        os.remove(p)
        for _, c in ipairs({{"1.5e0", "is not a whole number"}, {"12e-2", "is not a whole number"},
                            {"9.3e18", "does not fit in int64"}, {"1e400", "does not fit in int64"},
                            {"0x20000000000001", "cannot be read exactly as int64"}}) do
            p = file("1," .. c[1] .. "\n")
            assert.matches(p .. ' line 1, column 2: "' .. c[1] .. '" ' .. c[2], err(p, {dtype = "int64"}), 1, true)
            os.remove(p)
        end
    end)

    it("a file of many rows reads every value in order (the buffer grows past its first size)", function()
        local lines = {"a,b,c"}
        for i = 1, 5000 do lines[#lines + 1] = string.format("%d, %d.5 ,\"%d\"", i, i, -3 * i) end
        local p = file(table.concat(lines, "\n") .. "\n")
        local t, names = data.read_csv(p, {dtype = "float64"})
        os.remove(p)
        assert.same({"a", "b", "c"}, names)
        assert.same({5000, 3}, t:shape())
        local v = t:totable()
        for i = 1, 5000 do assert(v[i][1] == i and v[i][2] == i + 0.5 and v[i][3] == -3 * i, "row " .. i) end
    end)
end)

describe("data.read_csv with an integer dtype", function()
    local file, err = csv_file, csv_err

    it("reads whole numbers exactly", function()
        local p = file("a,b\n1,-2\n2147483647,-2147483648\n")
        local t = data.read_csv(p, {dtype = "int64"})
        assert.equals("int64", t:dtype())
        assert.same({{1, -2}, {2147483647, -2147483648}}, t:totable())
        assert.same({{1, -2}, {2147483647, -2147483648}}, data.read_csv(p, {dtype = "int32"}):totable())
        os.remove(p)
        p = file("0,255\n")
        assert.same({{0, 255}}, data.read_csv(p, {dtype = "uint8"}):totable())
        os.remove(p)
    end)

    it("reads int64 fields past 2^53 exactly, and all of int64's range", function()
        -- a Lua number holds integers exactly only up to 2^53: these were rounded (and 2^63 - 1 refused)
        local p = file("9007199254740993,-9223372036854775808\n9223372036854775807,1e3\n 0012 ,\"-5\"\n")
        local t = data.read_csv(p, {dtype = "int64"})
        os.remove(p)
        local s = tostring(t)
        for _, digits in ipairs({"9007199254740993", "-9223372036854775808", "9223372036854775807"}) do
            assert.truthy(s:find(digits, 1, true), s)
        end
        local I = function(x) return ordo.tensor(x, "int64") end
        assert.equals(1, (t[{1, {1}}] - I({2 ^ 53})):item()) -- exact int64 arithmetic
        assert.equals(1023, (t[{2, {1}}] - I({2 ^ 62}) - I({2 ^ 62 - 1024})):item())
        assert.same({1000, 12, -5}, {t[2][2], t[3][1], t[3][2]})
        for _, bad in ipairs({"9223372036854775808", "-9223372036854775809", "99999999999999999999"}) do
            p = file(bad .. "\n")
            assert.matches(p .. ' line 1, column 1: "' .. bad .. '" does not fit in int64', err(p, {dtype = "int64"}), 1, true)
            os.remove(p)
        end
    end)

    it("refuses a fraction, nan, inf or a value out of range, naming the file, line and column", function()
        local p = file("a,b\n1,2\n3,1.5\n")
        for _, dt in ipairs({"int32", "int64", "uint8"}) do
            local e = err(p, {dtype = dt})
            assert.matches("read_csv: " .. p .. " line 3, column 2 (b): \"1.5\" is not a whole number (dtype " .. dt .. ")",
                           e, 1, true)
        end
        os.remove(p)
        p = file("1,nan\n")
        assert.matches(p .. ' line 1, column 2: "nan" is not a whole number (dtype int64)', err(p, {dtype = "int64"}), 1,
                       true)
        os.remove(p)
        p = file("1\n-inf\n")
        assert.matches(p .. ' line 2, column 1: "-inf" does not fit in int32', err(p, {dtype = "int32"}), 1, true)
        os.remove(p)
        p = file("255,256\n")
        assert.matches(p .. ' line 1, column 2: "256" does not fit in uint8', err(p, {dtype = "uint8"}), 1, true)
        os.remove(p)
        p = file("-1\n")
        assert.matches(p .. ' line 1, column 1: "-1" does not fit in uint8', err(p, {dtype = "uint8"}), 1, true)
        os.remove(p)
        p = file("2147483648\n")
        assert.matches(p .. ' line 1, column 1: "2147483648" does not fit in int32', err(p, {dtype = "int32"}), 1, true)
        os.remove(p)
        -- missing fills with a value the dtype holds
        p = file("1,\n")
        assert.same({{1, -1}}, data.read_csv(p, {dtype = "int32", missing = -1}):totable())
        assert.matches("read_csv: missing = -1 is not a whole number that fits in dtype uint8",
                       err(p, {dtype = "uint8", missing = -1}), 1, true)
        assert.matches("read_csv: missing = nan is not a whole number that fits in dtype int64",
                       err(p, {dtype = "int64", missing = 0 / 0}), 1, true)
        os.remove(p)
    end)
end)

describe("data.write_csv", function()
    -- the raw bytes of a tensor, to compare bit for bit
    local function raw(t)
        local c = t:contiguous()
        c:wait()
        return ffi.string(require("ordo.util").host_ptr(c), c:numel() * c:element_size())
    end

    it("writes what read_csv reads back bit for bit, in every dtype, with a header", function()
        local path = os.tmpname()
        ordo.manual_seed(3)
        local cases = {
            float32 = ordo.cat({ordo.randn(50, 3) * 1e30, ordo.randn(50, 3) * 1e-30,
                                ordo.tensor({{1 / 3, -0.0, 0 / 0}, {math.huge, -math.huge, 1e-45}}, "float32")}, 1),
            float64 = ordo.cat({ordo.randn(50, 3, "float64") * 1e300,
                                ordo.tensor({{0.1, 5e-324, -0.0}, {2 ^ 53 + 2, -1e-310, 1.7976931348623157e308}},
                                            "float64")}, 1),
            int32 = ordo.tensor({{-2 ^ 31, 2 ^ 31 - 1, 0}}, "int32"),
            uint8 = ordo.tensor({{0, 255, 7}}, "uint8"),
        }
        for dt, t in pairs(cases) do
            assert.equals(t, data.write_csv(path, t, {header = {"a", "b", "c"}}))
            local back, names = data.read_csv(path, {dtype = dt})
            assert.same({"a", "b", "c"}, names)
            assert.same(t:shape(), back:shape())
            if dt:find("float") then -- nan's sign is not kept: compare the rest
                local m = t:ne(t)
                assert.same(raw(t:masked_fill(m, 0)), raw(back:masked_fill(m, 0)))
                assert.same(m:totable(), back:ne(back):totable())
            else
                assert.equals(raw(t), raw(back))
            end
        end
        -- int64 past 2^53, and a 1-d tensor as one column
        local i64 = data.read_csv(csv_file("9223372036854775807\n-9223372036854775808\n9007199254740993\n"),
                                  {dtype = "int64"}):view(3)
        data.write_csv(path, i64)
        local f = assert(io.open(path, "rb"))
        assert.equals("9223372036854775807\n-9223372036854775808\n9007199254740993\n", f:read("*a"))
        f:close()
        assert.equals(raw(i64), raw(data.read_csv(path, {dtype = "int64"})))
        -- names with the delimiter, quotes or white space at an end are quoted; a non-contiguous view is fine
        local v = ordo.arange(6, "float64"):view(2, 3):transpose(1, 2)
        data.write_csv(path, v, {header = {"x,y", 'say "hi"'}, delimiter = ","})
        local back, names = data.read_csv(path, {dtype = "float64"})
        assert.same({"x,y", 'say "hi"'}, names)
        assert.same(v:totable(), back:totable())
        data.write_csv(path, v, {delimiter = "\t"})
        assert.same(v:totable(), data.read_csv(path, {delimiter = "\t", dtype = "float64"}):totable())
        os.remove(path)
    end)

    it("checks its arguments before writing, refuses a failed op's tensor, and leaves the old file whole", function()
        local path = os.tmpname()
        data.write_csv(path, ordo.ones(2, 2))
        local f = assert(io.open(path, "rb"))
        local before = f:read("*a")
        f:close()
        assert.matches("write_csv: expected a 1%-d or 2%-d tensor", err_of(data.write_csv, path, ordo.ones(2, 2, 2)))
        assert.matches("write_csv: header must be a list of 2 names", err_of(data.write_csv, path, ordo.ones(2, 2),
                                                                           {header = {"a"}}))
        assert.matches("header name 2 %(\"b\\\nc\"%) holds a line break",
                       err_of(data.write_csv, path, ordo.ones(2, 2), {header = {"a", "b\nc"}}))
        assert.matches("write_csv: delimiter must be one character that is no part of a number",
                       err_of(data.write_csv, path, ordo.ones(2, 2), {delimiter = "."}))
        assert.matches("write_csv: expected a tensor second", err_of(data.write_csv, path, {{1}}))
        assert.matches("write_csv: unknown option 'sep'", err_of(data.write_csv, path, ordo.ones(1), {sep = ";"}))
        -- rows of no columns were blank lines, read back as no rows (3x0 became 0x0)
        assert.matches("write_csv: a tensor of shape 3x0 has rows of no columns",
                       err_of(data.write_csv, path, ordo.zeros(3, 0)), 1, true)
        local x, z = ordo.tensor({1, 2}, "int64"), ordo.zeros(2, "int64")
        local c = ordo.empty({2}, {dtype = "int64"})
        ordo.engine.push("div", {x, z}, {c})
        pcall(function() c:wait() end)
        assert.matches("write_csv: the tensor holds the result of an op that failed", err_of(data.write_csv, path, c))
        f = assert(io.open(path, "rb"))
        assert.equals(before, f:read("*a"))
        f:close()
        assert.is_nil(io.open(path .. ".tmp", "rb"))
        os.remove(path)
    end)
end)

describe("data.fashion_mnist", function()
    it("raises an error naming the directory and the Debian package when the files are missing", function()
        local dir = tmp("no_fashion_here")
        local e = err_of(data.fashion_mnist, {dir = dir})
        assert.matches("fashion_mnist: ", e, 1, true)
        assert.matches(dir, e, 1, true)
        assert.matches("install the Debian package dataset-fashion-mnist (apt-get install dataset-fashion-mnist)", e,
                       1, true)
        local ok, msg = data.fashion_mnist_available(dir)
        assert.is_false(ok)
        assert.matches(dir, msg, 1, true)
        assert.matches("train-images-idx3-ubyte.gz", msg, 1, true)
    end)

    it("loads a directory's files: images in [0, 1], labels from 1, limits, flatten, normalize", function()
        local dir = tmp("fake_fmnist")
        fake_fmnist(dir, 5, 3, true)
        assert.is_true((data.fashion_mnist_available(dir)))
        local ds = data.fashion_mnist({dir = dir})
        assert.are.same({5, 1, 28, 28}, ds.train.images:shape())
        assert.are.same({3, 1, 28, 28}, ds.test.images:shape())
        assert.are.equal("float32", ds.train.images:dtype())
        assert.are.equal("int64", ds.train.labels:dtype())
        assert.are.same({4, 7, 10, 3, 6}, ds.train.labels:totable()) -- (3i mod 10) + 1
        assert.are.same({8, 5, 2}, ds.test.labels:totable())          -- (7i mod 10) + 1
        assert.are.equal(data.fashion_mnist_classes, ds.classes)
        local px = ds.train.images:view({5 * 784}):totable()
        for i = 1, #px do
            assert.are.equal(tonumber(ffi.new("float", ((i * 7) % 256) / 255)), px[i])
        end

        ds = data.fashion_mnist({dir = dir, limit_train = 2, limit_test = 1, flatten = true})
        assert.are.same({2, 784}, ds.train.images:shape())
        assert.are.same({1, 784}, ds.test.images:shape())
        assert.are.same({4, 7}, ds.train.labels:totable())
        assert.are.same({8}, ds.test.labels:totable())

        ds = data.fashion_mnist({dir = dir, limit_train = 1, limit_test = 0, normalize = true})
        local v = ds.train.images:view({784}):totable()
        for i = 1, 784 do
            local want = (((i * 7) % 256) / 255 - 0.2860) / 0.3530
            assert.is_true(math.abs(v[i] - want) < 1e-5)
        end
        assert.are.same({0, 1, 28, 28}, ds.test.images:shape())
    end)

    it("reads plain (unpacked) files too, and ORDO_FASHION_MNIST overrides the default directory", function()
        local dir = tmp("fake_fmnist_plain")
        fake_fmnist(dir, 2, 2, false)
        local before = os.getenv("ORDO_FASHION_MNIST")
        ffi.C.setenv("ORDO_FASHION_MNIST", dir, 1)
        local ok, res = pcall(data.fashion_mnist)
        ffi.C.setenv("ORDO_FASHION_MNIST", before or "", 1)
        assert(ok, res)
        assert.are.same({2, 1, 28, 28}, res.train.images:shape())
        assert.are.same({4, 7}, res.train.labels:totable())
    end)

    it("refuses a labels file holding a label past 9, naming the file and the entry", function()
        local dir = tmp("fake_fmnist_badlabel")
        fake_fmnist(dir, 4, 2, false)
        write_idx(dir .. "/train-labels-idx1-ubyte", "u8", {4}, {1, 2, 200, 3}, false)
        -- was: loaded, with a class 201 that broke the loss or one_hot far from here
        local e = err_of(data.fashion_mnist, {dir = dir})
        assert.matches("fashion_mnist: .*train%-labels%-idx1%-ubyte holds label 200 at entry 3 %(Fashion%-MNIST labels are 0..9%)", e)
        os.execute("rm -rf '" .. dir .. "'")
    end)

    it("checks its options", function()
        assert.matches("fashion_mnist: unknown option 'limit'", err_of(data.fashion_mnist, {limit = 3}))
        assert.matches("fashion_mnist: limit_train must be an integer >= 0",
                       err_of(data.fashion_mnist, {limit_train = 1.5}))
        assert.matches("fashion_mnist: dir must be a directory path", err_of(data.fashion_mnist, {dir = 3}))
        assert.matches("fashion_mnist: unknown device tpu", err_of(data.fashion_mnist, {device = "tpu"}))
        -- any value was taken as true: normalize = 0 normalized, flatten = "false" flattened
        assert.matches("fashion_mnist: normalize must be true or false, got 0", err_of(data.fashion_mnist, {normalize = 0}))
        assert.matches('fashion_mnist: flatten must be true or false, got the string "false"',
                       err_of(data.fashion_mnist, {flatten = "false"}), 1, true)
    end)

    it("has the ten class names, in label order", function()
        assert.are.equal(10, #data.fashion_mnist_classes)
        assert.are.equal("T-shirt/top", data.fashion_mnist_classes[1])
        assert.are.equal("Ankle boot", data.fashion_mnist_classes[10])
    end)

    it("loads the installed Fashion-MNIST (/usr/share/datasets/fashion-mnist)", function()
        local dir = "/usr/share/datasets/fashion-mnist"
        if not data.fashion_mnist_available(dir) then
            pending("Fashion-MNIST is not installed in " .. dir .. " (apt-get install dataset-fashion-mnist)")
        end
        local ds = data.fashion_mnist({dir = dir, limit_train = 500, limit_test = 200})
        assert.are.same({500, 1, 28, 28}, ds.train.images:shape())
        assert.are.same({500}, ds.train.labels:shape())
        assert.are.same({200, 1, 28, 28}, ds.test.images:shape())
        assert.are.same({200}, ds.test.labels:shape())
        -- the first training image is an ankle boot (label 9 in the file)
        assert.are.equal(10, ds.train.labels:narrow(1, 1, 1):item())
        assert.are.equal("Ankle boot", ds.classes[ds.train.labels:narrow(1, 1, 1):item()])
        -- and so is the first test image; then a pullover and two trousers
        assert.are.same({10, 3, 2, 2}, ds.test.labels:narrow(1, 1, 4):totable())
        for _, split in ipairs({ds.train, ds.test}) do
            assert.is_true(split.labels:min():item() >= 1)
            assert.are.equal(10, split.labels:max():item())
            assert.are.equal(0, split.images:min():item())
            assert.are.equal(1, split.images:max():item())
        end
        local m = ds.train.images:mean():item()
        assert.is_true(m > 0.2 and m < 0.4, "mean pixel " .. m)
        -- every class shows up among 500 examples
        local seen = {}
        for _, l in ipairs(ds.train.labels:totable()) do seen[l] = true end
        for k = 1, 10 do assert.is_true(seen[k], "class " .. k) end
    end)
end)

-- ---------------------------------------------------------------- DataLoader

-- the batches of one epoch as Lua tables
local function epoch(loader)
    local xs, ys, sizes = {}, {}, {}
    for i, xb, yb in loader:iter() do
        assert.are.equal(#sizes + 1, i)
        sizes[#sizes + 1] = xb:size(1)
        for _, v in ipairs(flatten(xb:totable())) do xs[#xs + 1] = v end
        if yb then for _, v in ipairs(yb:totable()) do ys[#ys + 1] = v end end
    end
    return xs, ys, sizes
end

local function is_permutation(list, n)
    if #list ~= n then return false end
    local seen = {}
    for _, v in ipairs(list) do
        if v < 1 or v > n or v ~= math.floor(v) or seen[v] then return false end
        seen[v] = true
    end
    return true
end

describe("data.loader", function()
    it("batches in order without shuffle; the last batch holds the rest", function()
        local x = ordo.arange(1, 11) -- 1..10
        local y = ordo.arange(1, 11):long():mul_(10)
        local loader = data.loader(x, y, {batch_size = 3})
        assert.are.equal(4, loader:num_batches())
        assert.are.equal(4, #loader)
        local xs, ys, sizes = epoch(loader)
        assert.are.same({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, xs)
        assert.are.same({10, 20, 30, 40, 50, 60, 70, 80, 90, 100}, ys)
        assert.are.same({3, 3, 3, 1}, sizes)
        -- again: the same epoch
        local xs2 = epoch(loader)
        assert.are.same(xs, xs2)
        assert.are.equal(2, loader.epoch)
    end)

    it("drop_last leaves out the short batch; an exact split keeps every batch", function()
        local x = ordo.arange(1, 11)
        local loader = data.loader(x, {batch_size = 3, drop_last = true})
        assert.are.equal(3, #loader)
        local xs, _, sizes = epoch(loader)
        assert.are.same({3, 3, 3}, sizes)
        assert.are.same({1, 2, 3, 4, 5, 6, 7, 8, 9}, xs)

        loader = data.loader(x, {batch_size = 5, drop_last = true})
        assert.are.same({5, 5}, select(3, epoch(loader)))
        loader = data.loader(x, {batch_size = 20})
        assert.are.same({10}, select(3, epoch(loader)))
        loader = data.loader(x, {batch_size = 20, drop_last = true})
        assert.are.equal(0, #loader)
        assert.are.same({}, select(3, epoch(loader)))
    end)

    it("yields only the batch of x when there is no y", function()
        local loader = data.loader(ordo.arange(1, 5), {batch_size = 2})
        local n = 0
        for i, xb, yb in loader:iter() do
            n = n + 1
            assert.are.equal(n, i)
            assert.is_nil(yb)
            assert.are.same({2 * i - 1, 2 * i}, xb:totable())
        end
        assert.are.equal(2, n)
    end)

    it("batches tensors on another cpu, shuffled or not, on that cpu", function()
        local dev = ordo.cpu(1)
        local x = ordo.arange(1, 11):view({5, 2}):to(dev)
        local y = ordo.arange(1, 6):long():to(dev)
        local rows = {}
        for i, xb, yb in data.loader(x, y, {batch_size = 2}):iter() do
            assert.are.equal(dev, xb:device())
            assert.are.equal(dev, yb:device())
            for r, row in ipairs(xb:totable()) do rows[#rows + 1] = {row, yb:totable()[r], i} end
        end
        assert.are.same({{{1, 2}, 1, 1}, {{3, 4}, 2, 1}, {{5, 6}, 3, 2}, {{7, 8}, 4, 2}, {{9, 10}, 5, 3}}, rows)
        -- shuffled (a new order each epoch, moved over each time); mixed with a cpu(0) y
        ordo.manual_seed(4)
        local seen = {}
        for _, xb, yb in data.loader(x, ordo.arange(1, 6):long(), {batch_size = 3, shuffle = true}):iter() do
            assert.are.equal(dev, xb:device())
            assert.are.equal(ordo.cpu(0), yb:device())
            for r, row in ipairs(xb:totable()) do
                local k = yb:totable()[r]
                assert.are.same({2 * k - 1, 2 * k}, row)
                seen[k] = (seen[k] or 0) + 1
            end
        end
        assert.are.same({1, 1, 1, 1, 1}, seen)
    end)

    it("is callable like iter (for i, xb, yb in loader() do)", function()
        local loader = data.loader(ordo.arange(1, 4), {batch_size = 2})
        local got = {}
        for i, xb in loader() do got[i] = xb:numel() end
        assert.are.same({2, 1}, got)
        assert.matches("DataLoader%(3 examples, batch_size=2, 2 batches%)", tostring(loader))
        assert.matches("DataLoader%(1 example, batch_size=4, 1 batch%)", tostring(data.loader(ordo.zeros(1), {batch_size = 4})))
        -- `in loader` without (), as Python's `for x, y in loader`: each step
        -- of the for started a new epoch, forever; now it is one epoch
        local steps = 0
        for _ in loader do
            steps = steps + 1
            if steps > 10 then break end
        end
        assert.equals(2, steps)
        assert.equals(2, loader.epoch)
    end)

    it("is itself a generic-for iterator (for i, xb, yb in loader do): one epoch per loop", function()
        -- it used to begin a new epoch at every step and hand back its
        -- iterator function as i: a loop that never ended
        local loader = data.loader(ordo.arange(1, 6), ordo.arange(1, 6):long(), {batch_size = 2})
        for epoch = 1, 2 do
            local got = {}
            for i, xb, yb in loader do
                assert.are.equal(#got + 1, i)
                got[i] = xb:totable()
                assert.are.same(got[i], yb:totable())
                if i > 3 then break end
            end
            assert.are.same({{1, 2}, {3, 4}, {5}}, got)
            assert.are.equal(epoch, loader.epoch)
        end
        for i in loader do if i == 2 then break end end -- a loop left early; the next one starts afresh
        local n = 0
        for i in loader do n = n + 1; assert.are.equal(n, i) end
        assert.are.equal(3, n)
        assert.has_error(function() for _ in loader do for _ in loader do end end end,
                         "DataLoader: another `for ... in loader do` over this loader began since this one " ..
                         "(one such loop at a time: loops side by side each take their own loader:iter())")
        assert.has_error(function() loader(3) end,
                         "DataLoader: loader() takes no arguments (for i, xb, yb in loader do, in loader() do, " ..
                         "or in loader:iter() do)")
    end)

    it("shuffles: every example once per epoch, a new order each epoch, set only by the seed", function()
        local n = 103
        local x = ordo.arange(1, n + 1):view({n, 1}):expand({n, 2}):contiguous() -- row i = {i, i}
        local y = ordo.arange(1, n + 1):long()
        local function orders(seed, epochs)
            ordo.manual_seed(seed)
            local loader = data.loader(x, y, {batch_size = 10, shuffle = true})
            local out = {}
            for e = 1, epochs do
                local xs, ys, sizes = epoch(loader)
                assert.are.same({10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 3}, sizes)
                -- rows stay whole and x and y follow the same order
                for i = 1, n do assert.are.equal(xs[2 * i - 1], xs[2 * i]) end
                local order = {}
                for i = 1, n do order[i] = xs[2 * i] end
                assert.are.same(order, ys)
                assert.is_true(is_permutation(order, n), "epoch " .. e .. " is not a permutation")
                out[e] = order
            end
            return out
        end
        local a = orders(7, 3)
        local b = orders(7, 3)
        assert.are.same(a, b) -- the seed alone decides
        assert.are_not.same(a[1], a[2]) -- a new draw each epoch
        assert.are_not.same(a[2], a[3])
        local identity = {}
        for i = 1, n do identity[i] = i end
        assert.are_not.same(identity, a[1])
        local c = orders(8, 1)
        assert.are_not.same(a[1], c[1])
    end)

    it("prefetches: each batch holds its rows of the order, whatever the loop body did before", function()
        local n, bs = 50, 8
        ordo.manual_seed(3)
        local x = ordo.randn({n, 3, 2})
        local y = ordo.arange(1, n + 1):long()
        local rows = x:totable()
        local loader = data.loader(x, y, {batch_size = bs, shuffle = true})
        local seen, nb = {}, 0
        for i, xb, yb in loader:iter() do
            nb = i
            assert.are.equal(math.min(bs, n - (i - 1) * bs), xb:size(1))
            -- the loop body's ops, queued while the next batch is already
            -- gathered: one reading the batch, then one changing it in place
            local z = (xb * 2):relu():sum()
            xb:mul_(0)
            local want = 0
            for _, v in ipairs(yb:totable()) do -- y = 1..n: the batch's slice of the order
                assert.is_nil(seen[v])
                seen[v] = true
                for _, r in ipairs(rows[v]) do
                    for _, e in ipairs(r) do want = want + math.max(2 * e, 0) end
                end
            end
            assert.is_true(math.abs(z:item() - want) < 1e-4, ("batch %d: %g vs %g"):format(i, z:item(), want))
            for _, r in ipairs(flatten(xb:totable())) do assert.are.equal(0, r) end
        end
        assert.are.equal(7, nb)
        local count = 0
        for _ in pairs(seen) do count = count + 1 end
        assert.are.equal(n, count)
        assert.are.same(rows, x:totable()) -- the dataset is untouched
    end)

    it("batch contents equal x:index_select of the order (checked before any change)", function()
        local n = 20
        ordo.manual_seed(11)
        local x = ordo.randn({n, 4})
        local y = ordo.arange(1, n + 1):long()
        local loader = data.loader(x, y, {batch_size = 6, shuffle = true})
        local rows = x:totable()
        for _, xb, yb in loader:iter() do
            local got = xb:totable()
            for k, v in ipairs(yb:totable()) do assert.are.same(rows[v], got[k]) end
        end
    end)

    it("handles an empty dataset", function()
        local x = ordo.zeros({0, 3})
        local loader = data.loader(x, {batch_size = 4, shuffle = true})
        assert.are.equal(0, #loader)
        for _ in loader:iter() do error("no batch expected") end
    end)

    it("refuses arguments past the options and a third tensor instead of dropping or misnaming them", function()
        local x, y = ordo.zeros(4), ordo.zeros(4)
        -- a second options table was dropped: the loader was not shuffled
        assert.matches("DataLoader: expected at most 3 arguments %(x, y, opts%), got table after the options",
                       err_of(data.loader, x, y, {batch_size = 2}, {shuffle = true}))
        -- was "the targets must be a tensor, got a Lua list"
        assert.matches("DataLoader: got an options table second and table third",
                       err_of(data.loader, x, {batch_size = 2}, {shuffle = true}))
        -- was "expected an options table, got ordo.Tensor"
        assert.matches("DataLoader: takes at most two tensors, x and y, then the options; got a third tensor",
                       err_of(data.loader, x, y, y))
        assert.are.equal(2, #data.loader(x, y, {batch_size = 2}, nil)) -- a trailing nil is no argument
    end)

    it("batches a TensorDataset of three tensors (x, y, the sequences' lengths)", function()
        local x = ordo.arange(1, 8):view(7, 1)
        local y = ordo.arange(11, 18):long()
        local lens = ordo.arange(21, 28, {dtype = "int32"})
        ordo.manual_seed(3)
        local seen = {}
        local loader = data.loader(data.TensorDataset(x, y, lens), {batch_size = 3, shuffle = true})
        for i, xb, yb, lb, none in loader:iter() do
            assert.is_nil(none)
            assert.equals("int32", lb:dtype())
            for k, v in ipairs(xb:view(-1):totable()) do
                assert.equals(v + 10, yb:totable()[k])
                assert.equals(v + 20, lb:totable()[k])
                seen[#seen + 1] = v
            end
            assert.equals(i == 3 and 1 or 3, xb:size(1))
        end
        assert.is_true(is_permutation(seen, 7))
        local n = 0
        for _, xb, yb, lb in data.loader(data.TensorDataset(x, y, lens), {batch_size = 4}) do
            n = n + 1
            assert.same({xb:size(1), xb:size(1)}, {yb:size(1), lb:size(1)})
        end
        assert.equals(2, n)
        -- a third tensor given to the loader itself names the way
        assert.matches("got a third tensor %(more tensors: data.loader%(data.TensorDataset%(x, y, z, ...%), opts%)%)",
                       err_of(data.loader, x, y, lens))
    end)

    it("batches tensors on an engine of their own, shuffled or not", function()
        -- the order was made on the default engine: index_select raised
        -- "the tensors belong to different engines" at the first batch
        local eng = ordo.engine.new{kind = "naive"}
        local x = ordo.arange(1, 6, {engine = eng})
        local y = ordo.arange(1, 6, {engine = eng}):long()
        for _, shuffle in ipairs({false, true}) do
            local xs, ys, sizes = epoch(data.loader(x, y, {batch_size = 2, shuffle = shuffle}))
            assert.are.same({2, 2, 1}, sizes)
            assert.are.same(xs, ys)
            assert.is_true(is_permutation(xs, 5))
        end
        assert.matches("DataLoader: x and y belong to different engines",
                       err_of(data.loader, x, ordo.arange(1, 6)))
        eng:close()
    end)

    it("ordo.data.DataLoader(x, y, opts) is the same as data.loader", function()
        local loader = data.DataLoader(ordo.arange(1, 6), ordo.arange(1, 6), {batch_size = 2})
        assert.are.equal(3, loader:num_batches())
    end)

    it("raises errors naming DataLoader for bad inputs", function()
        assert.matches("DataLoader: the targets must be a tensor, got a Lua list",
                       err_of(data.loader, ordo.ones(3, 2), {1, 2, 3})) -- was "unknown option '1'"
        local x, y = ordo.zeros({10, 2}), ordo.zeros({9})
        local e = err_of(data.loader, x, y, {batch_size = 2})
        assert.matches("DataLoader: x has 10 examples %(shape 10x2%) but y has 9", e)
        assert.matches("first dims must match", e, 1, true)
        for _, bad in ipairs({0, -1, 1.5, "4", math.huge}) do
            e = err_of(data.loader, x, {batch_size = bad})
            assert.matches("DataLoader: batch_size must be a positive integer", e)
        end
        -- a string is named as one ("got 4" read as if 4 were refused)
        assert.matches('batch_size must be a positive integer, got the string "4"',
                       err_of(data.loader, x, {batch_size = "4"}), 1, true)
        assert.matches("batch_size must be a positive integer, got boolean", err_of(data.loader, x, {batch_size = true}),
                       1, true)
        assert.matches('read_idx: limit must be an integer >= 0, got the string "5"',
                       err_of(data.read_idx, "x.idx", {limit = "5"}), 1, true)
        e = err_of(data.loader, {1, 2})
        assert.matches("DataLoader: expected a tensor of examples or a dataset", e, 1, true)
        assert.matches("got table$", e)
        assert.matches("DataLoader: x has no dims", err_of(data.loader, ordo.tensor(1)))
        assert.matches("DataLoader: unknown option 'batchsize'", err_of(data.loader, x, {batchsize = 2}))
        assert.matches("DataLoader: shuffle must be true or false", err_of(data.loader, x, {shuffle = 1}))
        assert.matches("DataLoader: expected a tensor of targets", err_of(data.loader, x, 3))
        local loader = data.loader(x)
        assert.matches("read%-only", err_of(function() loader.batch_size = 3 end))
        assert.matches("iter: expected a DataLoader as self", err_of(loader.iter, {}))
        local ok, msg = pcall(function() return data.loader(x, y) end)
        assert.is_false(ok)
        assert.matches("data_spec.lua:%d+: DataLoader:", msg)
    end)
end)

-- ---------------------------------------------------------------- datasets

-- the values of a tensor as a flat Lua list
local function flat(t) return flatten(t:totable()) end

-- rows i of x (n x 2, row i = {i, 10 i}) and y (n, y[i] = i) as a dataset
local function numbered(n)
    local x = ordo.stack({ordo.arange(1, n + 1), ordo.arange(1, n + 1):mul(10)}, 2)
    return data.TensorDataset(x, ordo.arange(1, n + 1):long()), x
end

-- the y of each example of ds, in order
local function labels(ds)
    local out = {}
    for i = 1, #ds do
        local _, y = ds:get(i)
        out[i] = y:item()
    end
    return out
end

-- a user's dataset: a table with __len and __index, example i = {x_i, i}
local function user_dataset(n)
    return setmetatable({}, {
        __len = function() return n end,
        __index = function(_, i)
            if type(i) ~= "number" then return nil end
            return {ordo.full({2}, i), i}
        end,
    })
end

describe("data.TensorDataset", function()
    it("gives rows i of its tensors: ds:get(i) as values, ds[i] as a list, negative from the end", function()
        local ds, x = numbered(5)
        assert.are.equal(5, #ds)
        local xi, yi = ds:get(2)
        assert.are.same({2, 20}, xi:totable())
        assert.are.equal(0, yi:dim())
        assert.are.equal(2, yi:item())
        local item = ds[2]
        assert.are.same({2, 20}, item[1]:totable())
        assert.are.equal(2, item[2]:item())
        assert.are.same({5, 50}, ds[-1][1]:totable())
        assert.are.same({1, 10}, ds:get(-5):totable())
        assert.are.equal(x, ds.tensors[1])
        -- one tensor: ds[i] is its row itself
        local one = data.TensorDataset(x)
        assert.is_true(ordo.is_tensor(one[3]))
        assert.are.same({3, 30}, one[3]:totable())
        assert.matches("TensorDataset%(5 examples: 5x2 float32, 5 int64%)", tostring(ds))
        -- the REPL's help(ds) and completion find its method (it said "userdata: no fields or methods")
        assert.are.same({"get"}, require("ordo.repl").names_of(ds))
    end)

    it("refuses tensors whose first dims differ, non-tensors, 0-dim tensors and bad indices", function()
        local e = err_of(data.TensorDataset, ordo.zeros(10, 2), ordo.zeros(9))
        assert.matches("TensorDataset: tensor 1 has 10 examples (shape 10x2) but tensor 2 has 9 (shape 9)", e, 1, true)
        assert.matches("TensorDataset: expected at least one tensor", err_of(data.TensorDataset))
        assert.matches("TensorDataset: argument 2 must be a tensor, got number",
                       err_of(data.TensorDataset, ordo.zeros(3), 3))
        assert.matches("TensorDataset: argument 2 must be a tensor, got nil",
                       err_of(data.TensorDataset, ordo.zeros(3), nil))
        assert.matches("TensorDataset: tensor 1 has no dims", err_of(data.TensorDataset, ordo.tensor(3)))
        local ds = numbered(10)
        for _, bad in ipairs({0, 11, -11}) do
            assert.matches(("TensorDataset: index %d out of range for 10 examples"):format(bad),
                           err_of(function() return ds[bad] end), 1, true)
            assert.matches(("index %d out of range"):format(bad), err_of(ds.get, ds, bad), 1, true)
        end
        assert.matches("TensorDataset: an index must be an integer, got 1.5", err_of(function() return ds[1.5] end))
        assert.matches('an index must be an integer, got the string "1"', err_of(ds.get, ds, "1"), 1, true)
        assert.matches("get: expected a dataset as self", err_of(ds.get, 3))
        assert.matches("read%-only", err_of(function() ds.tensors = {} end))
        local ok, msg = pcall(function() return ds[0] end)
        assert.is_false(ok)
        assert.matches("data_spec.lua:%d+: TensorDataset:", msg)
    end)
end)

describe("data.Subset, random_split and ConcatDataset", function()
    it("Subset picks examples by a list or an integer tensor of indices; nested subsets compose", function()
        local ds = numbered(10)
        local sub = data.Subset(ds, {10, 1, 5})
        assert.are.equal(3, #sub)
        assert.are.same({10, 1, 5}, labels(sub))
        assert.are.same({5, 50}, sub[3][1]:totable())
        assert.are.same({5, 10}, labels(data.Subset(sub, {3, 1})))
        assert.are.same({4, 2}, labels(data.Subset(ds, ordo.tensor({4, 2}, "int64"))))
        assert.are.equal(0, #data.Subset(ds, {}))
        assert.are.equal(ds, sub.dataset)
        assert.are.same({10, 1, 5}, sub.indices)
        -- its lists are copies: a change to one does not reach the subset (or skip its checks)
        sub.indices[1] = 99
        assert.are.same({10, 1, 5}, sub.indices)
        assert.are.same({10, 1, 5}, labels(sub))
        ds.tensors[2] = ordo.zeros(3)
        assert.are.equal(10, ds.tensors[2]:size(1))
    end)

    it("Subset refuses indices out of range, a table that is not a list, and a non-dataset", function()
        local ds = numbered(10)
        assert.matches("Subset: index 11 at position 2 is out of range for a dataset of 10 examples",
                       err_of(data.Subset, ds, {1, 11}))
        assert.matches("Subset: index 0 at position 1 is out of range", err_of(data.Subset, ds, {0}))
        -- (1.5 or "2" was reported "out of range for a dataset of 10 examples")
        assert.matches("Subset: index 1.5 at position 1 is not an integer", err_of(data.Subset, ds, {1.5}))
        assert.matches('Subset: index the string "2" at position 2 is not an integer',
                       err_of(data.Subset, ds, {1, "2"}), 1, true)
        assert.matches("indices must be a list, got a table with a hole at 2", err_of(data.Subset, ds, {1, nil, 3}))
        assert.matches('indices must be a list, got a table with key the string "a"',
                       err_of(data.Subset, ds, {a = 1}), 1, true)
        assert.matches("indices must be a Lua list or a 1%-dim integer tensor, got float32",
                       err_of(data.Subset, ds, ordo.tensor({1, 2})))
        assert.matches("indices must be a Lua list or a 1%-dim integer tensor, got number", err_of(data.Subset, ds, 3))
        local e = err_of(data.Subset, {1, 2, 3}, {1})
        assert.matches("Subset: expected a dataset", e)
        assert.matches("got table$", e)
        assert.matches("got ordo.Tensor", err_of(data.Subset, ordo.zeros(3), {1}))
    end)

    it("random_split: counts or fractions (Torch's remainder rule), every example once", function()
        local ds = numbered(10)
        local parts = data.random_split(ds, {3, 7})
        assert.are.equal(3, #parts[1])
        assert.are.equal(7, #parts[2])
        local all = {}
        for _, p in ipairs(parts) do
            for _, v in ipairs(labels(p)) do all[#all + 1] = v end
        end
        assert.is_true(is_permutation(all, 10))
        local function sizes(n, lengths)
            local out = {}
            for k, p in ipairs(data.random_split(numbered(n), lengths)) do out[k] = #p end
            return out
        end
        assert.are.same({4, 2, 1}, sizes(7, {0.5, 0.25, 0.25})) -- 3, 1, 1 and the 2 left to the first two
        assert.are.same({4, 3, 3}, sizes(10, {0.33, 0.33, 0.34}))
        assert.are.same({7, 2, 1}, sizes(10, {0.7, 0.2, 0.1})) -- (they sum to 0.9999999999999999)
        assert.are.same({1}, sizes(1, {1}))
        assert.are.same({0, 0}, sizes(0, {0, 0}))
        assert.are.same({0, 0}, sizes(0, {0.5, 0.5}))
    end)

    it("random_split: the same seed, the same split; seed and generator leave the engine's generator alone",
       function()
        local ds = numbered(20)
        ordo.manual_seed(3)
        local a = labels(data.random_split(ds, {10, 10})[1])
        ordo.manual_seed(3)
        assert.are.same(a, labels(data.random_split(ds, {10, 10})[1]))
        local s1 = labels(data.random_split(ds, {0.5, 0.5}, {seed = 42})[1])
        assert.are.same(s1, labels(data.random_split(ds, {0.5, 0.5}, {seed = 42})[1]))
        assert.are_not.same(s1, labels(data.random_split(ds, {0.5, 0.5}, {seed = 43})[1]))
        -- a seed's draw does not move the engine generator
        ordo.manual_seed(5)
        local r1 = ordo.rand({4}):totable()
        ordo.manual_seed(5)
        data.random_split(ds, {10, 10}, {seed = 1})
        assert.are.same(r1, ordo.rand({4}):totable())
        -- a generator state is advanced in place, as Torch's generator
        local g = ordo.get_rng_state()
        local g0 = g:clone()
        local first = labels(data.random_split(ds, {10, 10}, {generator = g})[1])
        local second = labels(data.random_split(ds, {10, 10}, {generator = g})[1])
        assert.are_not.same(first, second)
        assert.are.same(first, labels(data.random_split(ds, {10, 10}, {generator = g0})[1]))
    end)

    it("random_split refuses lengths that do not fit the dataset, bad options and non-datasets", function()
        local ds = numbered(10)
        assert.matches("random_split: the lengths sum to 6, but the dataset has 10 examples",
                       err_of(data.random_split, ds, {3, 3}))
        assert.matches("random_split: length 1 is 0.5: counts must be integers %(fractions must sum to 1, these sum " ..
                       "to 1.1%)", err_of(data.random_split, ds, {0.5, 0.6}))
        assert.matches("length 1 must be a count or a fraction >= 0, got %-1", err_of(data.random_split, ds, {-1, 11}))
        assert.matches("length 2 must be a count or a fraction >= 0, got nan",
                       err_of(data.random_split, ds, {1, 0 / 0}))
        assert.matches("lengths must be a non%-empty list", err_of(data.random_split, ds, {}))
        assert.matches("lengths must be a non%-empty list", err_of(data.random_split, ds, 5))
        assert.matches("random_split: expected an integer seed, got 1.5",
                       err_of(data.random_split, ds, {5, 5}, {seed = 1.5}))
        assert.matches("random_split: unknown option 'sed'", err_of(data.random_split, ds, {5, 5}, {sed = 1}))
        assert.matches("generator must be a generator state", err_of(data.random_split, ds, {5, 5}, {generator = 3}))
        assert.matches("random_split: generator: not a generator state",
                       err_of(data.random_split, ds, {5, 5}, {generator = ordo.zeros(32, {dtype = "uint8"})}), 1, true)
        assert.matches("give seed or generator, not both",
                       err_of(data.random_split, ds, {5, 5}, {seed = 1, generator = ordo.get_rng_state()}))
        assert.matches("random_split: expected a dataset", err_of(data.random_split, ordo.zeros(10), {5, 5}))
    end)

    it("ConcatDataset: the examples of each dataset in turn, any kind of dataset", function()
        local a, b = numbered(3), numbered(4)
        local cat = data.ConcatDataset({a, data.Subset(b, {4, 2}), user_dataset(2)})
        assert.are.equal(7, #cat)
        local ys = {}
        for i = 1, 5 do ys[i] = cat[i][2]:item() end
        assert.are.same({1, 2, 3, 4, 2}, ys)
        assert.are.equal(1, cat[6][2])
        assert.are.same({2, 2}, cat[-1][1]:totable())
        assert.are.same({3, 5, 7}, cat.cumulative_sizes)
        assert.matches("ConcatDataset: index 8 out of range for 7 examples", err_of(function() return cat[8] end))
        assert.matches("ConcatDataset: the list of datasets is empty", err_of(data.ConcatDataset, {}))
        assert.matches("expected a dataset .* as dataset 2, got number", err_of(data.ConcatDataset, {a, 3}))
        assert.matches("expected one list of datasets, {ds1, ds2, ...}, got ordo.data.TensorDataset",
                       err_of(data.ConcatDataset, a), 1, true)
    end)
end)

describe("data.loader over a dataset", function()
    it("a TensorDataset batches as its tensors do, the same batches under the same seed", function()
        local ds, x = numbered(23)
        local y = ds.tensors[2]
        for _, shuffle in ipairs({false, true}) do
            ordo.manual_seed(11)
            local a = data.loader(x, y, {batch_size = 5, shuffle = shuffle})
            local xa, ya = epoch(a)
            ordo.manual_seed(11)
            local b = data.loader(ds, {batch_size = 5, shuffle = shuffle})
            assert.are.equal(5, #b)
            assert.are.equal(ds, b.dataset)
            assert.is_nil(a.dataset)
            local xb, yb, sizes = epoch(b)
            assert.are.same(xa, xb)
            assert.are.same(ya, yb)
            assert.are.same({5, 5, 5, 5, 3}, sizes)
            b.tensors[1] = ordo.zeros(2) -- the loader's list, not the dataset's
            assert.are.equal(23, ds.tensors[1]:size(1))
            assert.are.same({23, 23}, {ds[-1][1][1], ds[-1][2]:item()})
        end
        -- three tensors give three batches each step
        local three = data.TensorDataset(x, y, y:mul(2))
        for i, xb, yb, zb in data.loader(three, {batch_size = 4}) do
            assert.are.same({4 * i - 3, 40 * i - 30}, xb[1]:totable())
            assert.are.same(flat(yb:mul(2)), flat(zb))
            if i == 1 then break end
        end
    end)

    it("a Subset of a TensorDataset gathers its rows; drop_last and shuffle as with tensors", function()
        local ds = numbered(10)
        local sub = data.Subset(data.Subset(ds, {10, 9, 8, 7, 6, 5, 4}), {1, 3, 5, 7, 2})
        local _, ys, sizes = epoch(data.loader(sub, {batch_size = 2}))
        assert.are.same({10, 8, 6, 4, 9}, ys)
        assert.are.same({2, 2, 1}, sizes)
        _, ys, sizes = epoch(data.loader(sub, {batch_size = 2, drop_last = true}))
        assert.are.same({10, 8, 6, 4}, ys)
        assert.are.same({2, 2}, sizes)
        ordo.manual_seed(2)
        local shuffled = data.loader(sub, {batch_size = 3, shuffle = true})
        local xs
        xs, ys = epoch(shuffled)
        table.sort(ys)
        assert.are.same({4, 6, 8, 9, 10}, ys)
        for i = 1, 5 do assert.are.equal(xs[2 * i - 1] * 10, xs[2 * i]) end -- rows stay whole
        -- random_split's parts are loaded as they are
        local train = data.random_split(ds, {8, 2}, {seed = 1})[1]
        _, ys = epoch(data.loader(train, {batch_size = 3}))
        assert.are.same(labels(train), ys)
    end)

    it("collates any dataset's examples: tensors stacked, numbers as a float64 tensor (exact past 2^24)", function()
        local loader = data.loader(user_dataset(5), {batch_size = 2})
        local got = {}
        for i, xb, yb in loader do
            got[i] = {xb:shape(), yb:dtype(), flat(yb)}
        end
        assert.are.same({{{2, 2}, "float64", {1, 2}}, {{2, 2}, "float64", {3, 4}}, {{1, 2}, "float64", {5}}}, got)
        local big = setmetatable({}, {__len = function() return 1 end, __index = function() return 2 ^ 24 + 1 end})
        for _, yb in data.loader(big) do assert.are.equal(2 ^ 24 + 1, yb[1]) end
        local cat = data.ConcatDataset({(numbered(2)), (numbered(3))})
        local xs, ys, sizes = epoch(data.loader(cat, {batch_size = 4}))
        assert.are.same({1, 2, 1, 2, 3}, ys)
        assert.are.same({1, 10, 2, 20, 1, 10, 2, 20, 3, 30}, xs)
        assert.are.same({4, 1}, sizes)
        -- a get method, several values
        local getter = setmetatable({get = function(_, i) return ordo.full({3}, i), ordo.tensor(i, "int64") end},
                                    {__len = function() return 3 end})
        for _, xb, yb in data.loader(getter, {batch_size = 3}) do
            assert.are.same({3, 3}, xb:shape())
            assert.are.equal("int64", yb:dtype())
            assert.are.same({1, 2, 3}, flat(yb))
        end
        -- the same order as a TensorDataset's under the same seed
        ordo.manual_seed(4)
        local _, a = epoch(data.loader(user_dataset(9), {batch_size = 4, shuffle = true}))
        ordo.manual_seed(4)
        local _, b = epoch(data.loader(numbered(9), {batch_size = 4, shuffle = true}))
        assert.are.same(b, a)
    end)

    it("collates tables of values key by key, records and lists, nested, as Torch's default_collate", function()
        local records = setmetatable({}, {
            __len = function() return 3 end,
            __index = function(_, i)
                if type(i) ~= "number" then return nil end
                return {image = ordo.full({2, 2}, i), label = ordo.tensor(i, "int64"), meta = {id = i, pair = {i, -i}}}
            end,
        })
        local seen = 0
        for i, batch in data.loader(records, {batch_size = 2}) do
            seen = seen + 1
            if i == 1 then
                assert.are.same({2, 2, 2}, batch.image:shape())
                assert.are.same({1, 2}, flat(batch.label))
                assert.are.equal("int64", batch.label:dtype())
                assert.are.same({1, 2}, flat(batch.meta.id))
                assert.are.same({1, 2}, flat(batch.meta.pair[1]))
                assert.are.same({-1, -2}, flat(batch.meta.pair[2]))
            end
        end
        assert.are.equal(2, seen)
        local function bad(item)
            return setmetatable({}, {__len = function() return 2 end,
                                     __index = function(_, i) if type(i) == "number" then return item(i) end end})
        end
        local function first_batch(d) return data.loader(d, {batch_size = 2}):iter()() end
        assert.matches("value 1.y of the dataset's example 2 has key z, that of example 1 has not",
                       err_of(first_batch, bad(function(i) return {x = 1, y = i == 1 and {a = 1} or {z = 1}} end)),
                       1, true)
        assert.matches("value 1 of the dataset's example 2 has 1 key, that of example 1 has 2",
                       err_of(first_batch, bad(function(i) return i == 1 and {x = 1, y = 2} or {x = 1} end)), 1, true)
        assert.matches("value 1.x of the dataset's example 1 is boolean",
                       err_of(first_batch, bad(function() return {x = true} end)), 1, true)
        -- strings (a file name) go into a list, as Torch's default_collate keeps them (they raised "is string")
        local _, b = first_batch(bad(function(i) return {x = ordo.full({2}, i), name = "img" .. i .. ".png"} end))
        assert.are.same({"img1.png", "img2.png"}, b.name)
        assert.are.same({2, 2}, b.x:shape())
        local _, xb, names = first_batch(bad(function(i) return {ordo.full({2}, i), "s" .. i} end))
        assert.are.same({"s1", "s2"}, names)
        assert.are.same({2, 2}, xb:shape())
        assert.matches("value 1.x of the dataset's example 2 is string, of example 1 number",
                       err_of(first_batch, bad(function(i) return {x = i == 1 and 1 or "a"} end)), 1, true)
    end)

    it("collate_fn makes each batch from the list of its examples (padding sequences of several lengths)", function()
        local seqs = setmetatable({}, {
            __len = function() return 5 end,
            __index = function(_, i) if type(i) == "number" then return ordo.arange(1, i + 1) end end,
        })
        local function pad(examples)
            local longest = 0
            for _, e in ipairs(examples) do longest = math.max(longest, e:size(1)) end
            local out = ordo.zeros(#examples, longest)
            local lens = {}
            for j, e in ipairs(examples) do
                out[j]:narrow(1, 1, e:size(1)):copy_(e)
                lens[j] = e:size(1)
            end
            return out, ordo.tensor(lens, "int64")
        end
        local got = {}
        for i, xb, lens in data.loader(seqs, {batch_size = 2, collate_fn = pad}) do got[i] = {xb:totable(), flat(lens)} end
        assert.are.same({{{{1, 0}, {1, 2}}, {1, 2}}, {{{1, 2, 3, 0}, {1, 2, 3, 4}}, {3, 4}}, {{{1, 2, 3, 4, 5}}, {5}}},
                        got)
        -- a TensorDataset's examples come as lists of its rows
        local ds = numbered(4)
        local sizes = {}
        for i, n in data.loader(ds, {batch_size = 3, collate_fn = function(ex)
            assert.are.equal(2, #ex[1])
            assert.is_true(ordo.is_tensor(ex[1][2]))
            return #ex
        end}) do sizes[i] = n end
        assert.are.same({3, 1}, sizes)
        assert.matches("DataLoader: collate_fn must be a function", err_of(data.loader, ds, {collate_fn = 3}))
        assert.matches("DataLoader: collate_fn takes a dataset's examples",
                       err_of(data.loader, ordo.zeros(3), {collate_fn = pad}))
        assert.matches("DataLoader: collate_fn takes a dataset's examples",
                       err_of(data.loader, ordo.zeros(3), ordo.zeros(3), {collate_fn = pad}))
    end)

    it("empty datasets give no batches", function()
        local empty = data.TensorDataset(ordo.zeros(0, 3))
        assert.are.equal(0, #empty)
        assert.are.equal(0, #data.loader(empty, {batch_size = 2}))
        for _ in data.loader(empty) do error("a batch of an empty dataset") end
        for _ in data.loader(data.Subset(numbered(3), {})) do error("a batch of an empty subset") end
        for _ in data.loader(user_dataset(0)) do error("a batch of an empty user dataset") end
    end)

    it("refuses a non-dataset, targets beside a dataset, bad examples and examples that do not stack", function()
        local ds = numbered(4)
        local e = err_of(data.loader, setmetatable({}, {__index = function() return 1 end}))
        assert.matches("DataLoader: expected a tensor of examples or a dataset", e, 1, true)
        assert.matches("a dataset holds its targets", err_of(data.loader, ds, ordo.zeros(4)))
        -- a loader has __len and __index, but is no dataset
        local loader = data.loader(ds, {batch_size = 2})
        assert.matches("DataLoader: the dataset is a DataLoader, not a dataset", err_of(data.loader, loader), 1, true)
        assert.matches("Subset: the dataset is a DataLoader", err_of(data.Subset, loader, {1}), 1, true)
        assert.is_nil(data.loader(user_dataset(2)).get)
        assert.matches("data.loader%(ds, opts%) takes one options table",
                       err_of(data.loader, ds, {batch_size = 2}, {shuffle = true}))
        assert.matches("DataLoader: batch_size must be a positive integer, got 0", err_of(data.loader, ds, {batch_size = 0}))
        assert.matches("DataLoader: unknown option 'batchsize'", err_of(data.loader, ds, {batchsize = 2}))
        assert.matches("the dataset's __len gave %-1",
                       err_of(data.loader, setmetatable({}, {__len = function() return -1 end, __index = {}})))
        local function bad(item)
            return setmetatable({}, {__len = function() return 2 end,
                                     __index = function(_, i) if type(i) == "number" then return item(i) end end})
        end
        local function first_batch(d) return data.loader(d, {batch_size = 2}):iter()() end
        assert.matches("DataLoader: the dataset's example 1 is nil", err_of(first_batch, bad(function() return nil end)))
        assert.matches('value 1 of the dataset\'s example 1 is boolean',
                       err_of(first_batch, bad(function() return true end)), 1, true)
        assert.matches("the dataset's example 2 has 1 value, example 1 had 2",
                       err_of(first_batch, bad(function(i) return i == 1 and {1, 2} or {1} end)), 1, true)
        assert.matches("value 1 of the examples of batch 1 cannot be stacked",
                       err_of(first_batch, bad(function(i) return ordo.zeros(i) end)), 1, true)
        assert.matches("value 1 of the dataset's example 2 is ordo.Tensor, of example 1 number",
                       err_of(first_batch, bad(function(i) return i == 1 and 1 or ordo.zeros(1) end)), 1, true)
        -- a TensorDataset's rows are unchanged by it all
        assert.are.same({1, 2, 3, 4}, labels(ds))
    end)
end)
