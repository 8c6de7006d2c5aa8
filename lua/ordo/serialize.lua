-- ordo.serialize: named tensors to and from a file, the format of
-- ordo.save / ordo.load and of a module's save / load.
--
-- The file: a line "ORDO-PARAMS 2", then per tensor a header line
-- "name dtype ndim size1 size2 ... crc32=xxxxxxxx" followed by its bytes
-- (row-major, the machine's byte order), and a last line "end".  The
-- CRC-32 (zlib's) covers the header line before " crc32=" and the bytes:
-- a damaged byte, in a name, a size or the data, fails the load naming the
-- tensor.  Files of version 1 (the same without the checksums) still load.
-- Names are written as they are, so they must not hold white space (nor
-- control characters), and no two may be the same.
-- ordo.save writes a lone tensor as the single name "." and an integer key
-- as its decimal digits (which ordo.load turns back into a number).  A
-- value version 2 cannot hold as it is (nested tables, numbers, strings,
-- booleans, int64 cdata; a key of digits or "."; 1 and "1" together) is
-- written as version 3: see decode_tree.
--
-- Writing goes to path .. ".tmp" first, which then replaces path: a failed
-- or interrupted save (a full disk, an error in a tensor) leaves the old
-- file as it was.  Reading checks every header, and that the file still
-- holds the bytes it claims, before it allocates; it reads one tensor at a
-- time.
local cdef = require "ordo.cdef"
local util = require "ordo.util"
local extra_arg = util.extra_arg -- a further positional argument: an error naming it
local tensor = require "ordo.tensor"

local ffi, C = cdef.ffi, cdef.C
local fail, typename = util.fail, util.typename
local is_int = util.is_int
local fmt, concat = string.format, table.concat
local type, ipairs, pairs, tonumber, tostring, pcall, error, getmetatable, rawget =
    type, ipairs, pairs, tonumber, tostring, pcall, error, getmetatable, rawget
local min, max = math.min, math.max
local bit = require "bit"

local M = {}

local MAGIC, MAGIC_V1, MAGIC_V3 = "ORDO-PARAMS 2", "ORDO-PARAMS 1", "ORDO-PARAMS 3"
local ELEMENT_SIZE = {float32 = 4, float64 = 8, int32 = 4, int64 = 8, uint8 = 1}
local MAX_DIMS = 8
local LONE = "." -- the name of a lone tensor (ordo.save(t, path))
-- Integer keys past 2^53 are not all representable, so "%d" of one may not
-- be the key the user meant; sizes past 2^63 do not fit the C side.
local MAX_KEY, MAX_SIZE = 2 ^ 53, 2 ^ 63
-- Bytes move in pieces: LuaJIT's f:read(n) allocates all n up front and its
-- strings stop short of 2 GiB, so a tensor never goes through one string.
local PIECE = 16 * 1024 * 1024

-- LuaJIT's incremental collector does not keep up with dead strings this
-- large: saving a 512 MB tensor left its 32 pieces, 512 MB, in the heap (and
-- as much again in a load).  So a full collection frees them once the
-- pieces since the last one reach the heap's own size, at least 4 pieces:
-- the dead pieces stay below that, and the collections cost in proportion
-- to the bytes moved.  Returns the function to call after each piece.
local function piece_pacer()
    local since, limit = 0, max(4 * PIECE, collectgarbage("count") * 1024)
    return function(n)
        since = since + n
        if since >= limit then
            collectgarbage()
            since, limit = 0, max(4 * PIECE, collectgarbage("count") * 1024)
        end
    end
end

-- io's reason for a failed open, without the path its message starts with
-- (the callers name the path once themselves).
local function io_reason(path, err)
    err = tostring(err)
    if err:sub(1, #path + 2) == path .. ": " then err = err:sub(#path + 3) end
    return err
end

-- Re-raises what a pcall caught: our own messages (raised without a
-- position, starting with fname) get the caller's position through fail;
-- the others (a failed tensor op, raised through util.fail) carry one
-- already, and a second would double it.
local function reraise(fname, msg)
    msg = tostring(msg)
    if msg:sub(1, #fname + 2) == fname .. ": " then fail(msg) end
    error(msg, 0)
end

-- Where a save writes: {target =, direct =, mode =}.  A regular file (or
-- nothing yet) is replaced through target .. ".tmp"; a symbolic link is
-- followed, so the file it names is replaced and the link stays; a device,
-- FIFO or socket (/dev/null) is written directly (direct): a rename would
-- replace the node itself.  mode: the old file's permission bits, which
-- the new file keeps (a checkpoint made private stays private).
local PATH_BUF = 4096 -- PATH_MAX
local function save_target(fname, path)
    local mode = ffi.new("unsigned[1]")
    local kind = C.ordo_file_kind(path, mode)
    if kind == 2 then fail(fmt("%s: %s is a directory, not a file", fname, path)) end
    if kind == 3 then return {target = path, direct = true} end
    if kind ~= 1 then return {target = path} end -- nothing there yet (or it cannot be looked at: open says why)
    local buf = ffi.new("char[?]", PATH_BUF)
    local real = ffi.C.realpath(path, buf) ~= nil and ffi.string(buf) or path
    -- the rename needs only the directory's permission: a file made
    -- read-only (chmod a-w, to keep it) would be replaced all the same
    local w, err = io.open(real, "r+b") -- (changes nothing)
    if not w then fail(fmt("%s: cannot write %s: %s", fname, path, io_reason(real, err))) end
    w:close()
    return {target = real, mode = mode[0]}
end

-- The failure a tensor's bytes carry: the message of the op that should
-- have written them and failed (or was skipped), also once a wait has
-- reported it -- reported, the engine lets later ops use the bytes again,
-- but they are still stale or garbage.  nil when they are good.
local function failed_bytes(t)
    local s = t._c.storage
    if C.ordo_var_failed(s.var) == 0 then return nil end
    return (util.op_message(ffi.string(C.ordo_last_error())))
end

-- Writes path through body(put), put(s) adding bytes: to path .. ".tmp",
-- which then replaces path, so an error raised by body (or by a write: a
-- full disk) leaves the old file whole; see save_target for links,
-- devices and permissions.  fname names the caller in errors.
function M.write_file(fname, path, body)
    if type(path) ~= "string" then fail(fmt("%s: expected a file path, got %s", fname, typename(path))) end
    if path == "" then fail(fname .. ": the file path is empty") end
    local where = save_target(fname, path) -- a directory: said before writing anything
    local tmp = where.direct and path or where.target .. ".tmp"
    -- a stale path.tmp goes first: were it a symbolic link, "wb" would
    -- write through it into whatever file it names
    if not where.direct then os.remove(tmp) end
    local f, err = io.open(tmp, "wb")
    if not f then
        -- the path asked for first: the temporary file alone read as if the wrong file had been tried
        fail(fmt("%s: cannot open %s%s: %s", fname, path, tmp ~= path and (" (written through " .. tmp .. ")") or "",
                 io_reason(tmp, err)))
    end
    -- before any byte is written: the old file's readers only may read the new one
    if where.mode then ffi.C.chmod(tmp, where.mode) end
    local ok, werr = pcall(function()
        body(function(s)
            local r, e = f:write(s)
            if not r then error(fmt("%s: writing %s failed: %s", fname, tmp, tostring(e)), 0) end
        end)
        local r, e = f:close()
        f = nil
        if not r then error(fmt("%s: writing %s failed: %s", fname, tmp, tostring(e)), 0) end
    end)
    if not ok then
        if f then f:close() end
        if not where.direct then os.remove(tmp) end
        reraise(fname, werr)
    end
    if where.direct then return end
    local r, rerr = os.rename(tmp, where.target)
    if not r then
        os.remove(tmp)
        fail(fmt("%s: cannot replace %s: %s", fname, path, tostring(rerr)))
    end
end

-- t as a contiguous cpu(0) tensor whose bytes are good to write (waited
-- for); raises, naming what (e.g. "tensor w"), when an op that should have
-- written them failed.
function M.host_copy(fname, t, what)
    local c = t:detach():to(util.cpu(0)):contiguous()
    -- the wait raises for a tensor never computed, even once its failure
    -- was reported (void): the same refusal, naming what
    local waited, werr = pcall(c.wait, c)
    if not waited and tostring(werr):find("interrupted", 1, true) then error(werr, 0) end -- (Ctrl-C in the wait)
    local why = not waited and tostring(werr):gsub("^[^:\n]*:%d+: ", ""):gsub(" %(reported before: [^)]*%)$", "")
    why = why or failed_bytes(t) or failed_bytes(c)
    if why then error(fmt("%s: %s holds the result of an op that failed (%s); nothing saved", fname, what, why), 0) end
    return c
end

-- entries: a list of {name = string, tensor = tensor [, what = string]}
-- (what: how an error names the tensor).  fname names the caller in errors
-- ("save", "ordo.save").  tree: the encoded structure of a version 3 file
-- (ordo.save of nested values), written before the tensors; nil: version 2.
function M.write(fname, path, entries, tree)
    if type(path) ~= "string" then fail(fmt("%s: expected a file path, got %s", fname, typename(path))) end
    local seen = {}
    for _, e in ipairs(entries) do
        if type(e.name) ~= "string" or e.name == "" or e.name:find("[%s%c]") then
            fail(fmt("%s: tensor names must be non-empty, without white space or control characters, got %q", fname,
                     tostring(e.name)))
        end
        -- read refuses a file with a name twice: never write one
        if seen[e.name] then fail(fmt("%s: two tensors named %s", fname, e.name)) end
        seen[e.name] = true
        if not tensor.is_tensor(e.tensor) then
            fail(fmt("%s: %s is not a tensor (%s)", fname, e.name, typename(e.tensor)))
        end
    end
    M.write_file(fname, path, function(put)
        put((tree and MAGIC_V3 or MAGIC) .. "\n")
        if tree then
            local head = fmt("tree %d %d", #tree, #entries)
            put(fmt("%s crc32=%08x\n", head, C.ordo_crc32(C.ordo_crc32(0, head, #head), tree, #tree)))
            put(tree)
        end
        for _, e in ipairs(entries) do
            local c = M.host_copy(fname, e.tensor, e.what or (e.name == LONE and "the tensor" or "tensor " .. e.name))
            local s = c:shape()
            local dims = {}
            for i = 1, #s do dims[i] = fmt(" %d", s[i]) end -- exact: tostring would give 1e+15
            local head = fmt("%s %s %d%s", e.name, c:dtype(), #s, concat(dims))
            local nbytes = c:numel() * c:element_size()
            local src = ffi.cast("const uint8_t *", util.host_ptr(c))
            local crc = C.ordo_crc32(C.ordo_crc32(0, head, #head), src, nbytes)
            put(fmt("%s crc32=%08x\n", head, crc))
            local off, paced = 0, piece_pacer()
            while off < nbytes do
                local n = min(PIECE, nbytes - off)
                put(ffi.string(src + off, n))
                off = off + n
                paced(n)
            end
        end
        put("end\n")
    end)
end

-- Reads n bytes of f in pieces, handing each to put(s, offset); false and
-- the count read if the file ends first.
local function read_pieces(f, n, put, paced)
    local off = 0
    while off < n do
        local want = min(PIECE, n - off)
        local s = f:read(want)
        if not s or #s < want then return false, off + (s and #s or 0) end
        put(s, off)
        off = off + want
        if paced then
            s = nil
            paced(want)
        end
    end
    return true
end

-- A header line's fields (name, dtype, shape, byte count), or nil if it is
-- not one.  Sizes must be plain digits: tonumber would also take "1e18",
-- "0x10" or "inf".
local function parse_header(line)
    local words = {}
    for w in line:gmatch("%S+") do words[#words + 1] = w end
    local name, dt, nd = words[1], words[2], words[3]
    -- (a name has no control characters: a header read from the middle of
    -- a tensor's bytes, after a damaged size, would mostly have some)
    if not (name and not name:find("%c") and ELEMENT_SIZE[dt] and nd and nd:find("^%d$")) then return nil end
    nd = tonumber(nd)
    if nd > MAX_DIMS or #words ~= 3 + nd then return nil end
    local shape, numel = {}, 1
    for i = 1, nd do
        local w = words[3 + i]
        local s = w:find("^%d+$") and tonumber(w)
        if not s or not is_int(s) or s >= MAX_SIZE then return nil end
        shape[i] = s
        numel = numel * s -- a double: a huge claim overflows to a huge number, never wraps
    end
    return name, dt, shape, numel * ELEMENT_SIZE[dt]
end

-- Version 3 (ordo.save of nested values): after the first line, a record
-- "tree NBYTES NTENSORS crc32=xxxxxxxx" and NBYTES bytes encoding the value
-- (the CRC covers the record's line before " crc32=" and the bytes), then
-- the value's tensors as in version 2, named 1..NTENSORS in order, then
-- "end".  The encoding, one value after another with no separators:
--   t<n>:  a table of n pairs, each a key (s or n) then its value
--   s<n>:  a string of n bytes (any bytes), the bytes following
--   n<16 hex digits>  a number, the bits of its double (NaN, -0.0 exact)
--   i<16 hex> / u<16 hex>  an int64_t / uint64_t cdata (exact)
--   T, F  true, false
--   x<k>:  the tensor k (one tensor saved in two places is written once)
local function show_key(k) return type(k) == "string" and fmt("%q", k) or fmt("%d", k) end
local MAX_DEPTH = 100 -- tables nested deeper are refused (a save) or damaged (a load)
local BITS = ffi.new("union { double d; uint64_t u; }")
local U32 = 4294967296ULL

-- The value a tree's bytes encode, its tensors left as placeholders: the
-- value and a list of {table, key, k} (table nil: the value is tensor k).
-- bad(why) raises, naming the file.
local function decode_tree(s, ntensors, bad)
    local pos, refs = 1, {}
    local function count()
        local d = s:match("^(%d+):", pos)
        if not d or #d > 15 then bad(fmt("a bad count at byte %d", pos)) end
        pos = pos + #d + 1
        return tonumber(d)
    end
    local function bits64()
        local h = s:sub(pos, pos + 15)
        if #h ~= 16 or not h:find("^%x+$") then bad(fmt("a bad number at byte %d", pos)) end
        pos = pos + 16
        return tonumber(h:sub(1, 8), 16) * U32 + tonumber(h:sub(9), 16)
    end
    local value
    function value(depth, parent, key)
        local tag = s:sub(pos, pos)
        pos = pos + 1
        if tag == "n" then
            BITS.u = bits64()
            return BITS.d
        elseif tag == "i" then
            return ffi.cast("int64_t", bits64())
        elseif tag == "u" then
            return bits64()
        elseif tag == "T" then
            return true
        elseif tag == "F" then
            return false
        elseif tag == "s" then
            local n = count()
            if pos + n - 1 > #s then bad(fmt("a string of %d bytes past its end", n)) end
            local v = s:sub(pos, pos + n - 1)
            pos = pos + n
            return v
        elseif tag == "x" then
            local k = count()
            if k < 1 or k > ntensors then bad(fmt("tensor %d of %d", k, ntensors)) end
            refs[#refs + 1] = {parent, key, k}
            return true -- (replaced once the tensors are read)
        elseif tag == "t" then
            if depth >= MAX_DEPTH then bad(fmt("tables nested deeper than %d levels", MAX_DEPTH)) end
            local n, t = count(), {}
            for _ = 1, n do
                local kt = s:sub(pos, pos)
                if kt == "" then bad("its end too early") end
                if kt ~= "s" and kt ~= "n" then bad(fmt("a key that is not a string or a number at byte %d", pos)) end
                local k = value(depth + 1)
                if type(k) == "number" and not (is_int(k) and k >= 1 and k <= MAX_KEY) then
                    bad(fmt("a number key %.17g (keys are strings or integers 1..2^53)", k))
                end
                if t[k] ~= nil then bad(fmt("a table with the key %s twice", show_key(k))) end
                t[k] = value(depth + 1, t, k)
            end
            return t
        end
        bad(pos - 1 > #s and "its end too early" or fmt("a bad tag at byte %d", pos - 1))
    end
    local root = value(0)
    if pos <= #s then bad(fmt("%d bytes after the value", #s - pos + 1)) end
    return root, refs
end

-- Reads a file: the list of its tensors, {name =, tensor =} in file order
-- (new cpu(0) tensors), and for a version 3 file the value, its tensors
-- put in place.
local function read_file(fname, path)
    if type(path) ~= "string" then fail(fmt("%s: expected a file path, got %s", fname, typename(path))) end
    if path == "" then fail(fname .. ": the file path is empty") end
    local f, err = io.open(path, "rb")
    if not f then fail(fmt("%s: cannot open %s: %s", fname, path, io_reason(path, err))) end
    -- io.open opens a directory on Linux; only its first read fails (EISDIR)
    local can, rerr, code = f:read(0)
    if can == nil and rerr then
        f:close()
        if code == 21 then fail(fmt("%s: %s is a directory, not a file", fname, path)) end
        fail(fmt("%s: cannot read %s: %s", fname, path, tostring(rerr)))
    end
    local ok, res = pcall(function()
        -- The file's size, to refuse a header that claims more bytes than
        -- are there before allocating them; nil for a pipe, which is read
        -- into pieces first instead.
        local size = f:seek("end")
        if size and not f:seek("set", 0) then size = nil end
        local first = f:read("*l")
        local v1, v3 = first == MAGIC_V1, first == MAGIC_V3
        if first ~= MAGIC and not v1 and not v3 then
            -- two ways a good file goes bad in transit, said as such
            local why = ""
            if first == MAGIC .. "\r" or first == MAGIC_V1 .. "\r" then
                why = " (its line ends were changed to CRLF: a text-mode copy, or git's autocrlf, damaged it)"
            elseif first and first:sub(1, 2) == "\31\139" then
                why = " (it is gzip-compressed: gunzip it first)"
            end
            error(fmt("%s: %s is not an ordo tensor file%s", fname, path, why), 0)
        end
        local root, refs, ntensors
        if v3 then
            local line = f:read("*l")
            if not line then error(fmt("%s: %s is truncated (no end line)", fname, path), 0) end
            local head, nb, nt, want = line:match("^(tree (%d+) (%d+)) crc32=(%x%x%x%x%x%x%x%x)$")
            nb, nt = tonumber(nb), tonumber(nt)
            if not (head and #line < 80 and is_int(nb) and is_int(nt)) then
                error(fmt("%s: bad header line in %s: %q", fname, path, line:sub(1, 200)), 0)
            end
            if size and nb > size - f:seek() then
                error(fmt("%s: %s: its structure claims %.0f bytes but only %.0f remain (file truncated or damaged)",
                          fname, path, nb, size - f:seek()), 0)
            end
            local pieces = {}
            local whole, got = read_pieces(f, nb, function(s) pieces[#pieces + 1] = s end)
            if not whole then
                error(fmt("%s: %s: its structure claims %.0f bytes but only %.0f remain (file truncated or damaged)",
                          fname, path, nb, got), 0)
            end
            local bytes = concat(pieces)
            pieces = nil
            local crc = C.ordo_crc32(C.ordo_crc32(0, head, #head), bytes, #bytes)
            if crc ~= tonumber(want, 16) then
                error(fmt("%s: %s: its structure does not match its checksum (crc32 %08x, the file says %s): " ..
                          "the file is damaged", fname, path, crc, want), 0)
            end
            ntensors = nt
            root, refs = decode_tree(bytes, nt, function(why)
                error(fmt("%s: %s: its structure is damaged (%s)", fname, path, why), 0)
            end)
        end
        local entries, seen = {}, {}
        while true do
            local line = f:read("*l")
            if not line then error(fmt("%s: %s is truncated (no end line)", fname, path), 0) end
            if v3 and line == "end" and #entries ~= ntensors then
                error(fmt("%s: %s holds %d tensors, its structure names %d (damaged)", fname, path, #entries,
                          ntensors), 0)
            end
            if line == "end" then
                -- more after the end: a damaged header (a size too small
                -- leaves bytes over), or two files joined
                if f:read(1) then
                    error(fmt("%s: %s has bytes after its end line (damaged, or not one ordo file)", fname, path), 0)
                end
                break
            end
            local head, want = line, nil
            if not v1 then
                head, want = line:match("^(.*) crc32=(%x%x%x%x%x%x%x%x)$")
                want = want and tonumber(want, 16)
            end
            local name, dt, shape, nbytes
            if head then name, dt, shape, nbytes = parse_header(head) end
            if not name then error(fmt("%s: bad header line in %s: %q", fname, path, line:sub(1, 200)), 0) end
            if seen[name] then error(fmt("%s: %s holds two tensors named %s", fname, path, name), 0) end
            if v3 and name ~= fmt("%d", #entries + 1) then
                error(fmt("%s: %s: tensor '%s' where tensor %d of %d belongs (damaged)", fname, path, name,
                          #entries + 1, ntensors), 0)
            end
            seen[name] = true
            local function short(left)
                error(fmt("%s: %s: tensor '%s' claims %.0f bytes but only %.0f remain (file truncated or damaged)",
                          fname, path, name, nbytes, left), 0)
            end
            local pieces
            if size then
                local left = size - f:seek()
                if nbytes > left then short(left) end
            elseif nbytes > 0 then
                pieces = {}
                local whole, got = read_pieces(f, nbytes, function(s) pieces[#pieces + 1] = s end)
                if not whole then short(got) end
            end
            local t = tensor.empty(shape, {dtype = dt})
            C.ordo_tensor_host_written(t._c) -- (written below: as if an op made it)
            if nbytes > 0 then
                local dst = ffi.cast("uint8_t *", util.host_ptr(t))
                local function put(s, off) ffi.copy(dst + off, s, #s) end
                if pieces then
                    local off = 0
                    for _, s in ipairs(pieces) do
                        put(s, off)
                        off = off + #s
                    end
                else
                    local whole, got = read_pieces(f, nbytes, put, piece_pacer())
                    if not whole then short(got) end -- the file shrank since we measured it
                end
            end
            if want then
                local crc = C.ordo_crc32(C.ordo_crc32(0, head, #head), util.host_ptr(t), nbytes)
                if crc ~= want then
                    error(fmt("%s: %s: tensor '%s' does not match its checksum (crc32 %08x, the file says %08x): " ..
                              "the file is damaged", fname, path, name, crc, want), 0)
                end
            end
            entries[#entries + 1] = {name = name, tensor = t}
        end
        return {entries = entries, root = root, refs = refs}
    end)
    f:close()
    if not ok then reraise(fname, res) end
    return res
end

-- A name from a file as ordo.load's key: the digits ordo.save writes for an
-- integer key become that number again; every other name stays a string.
local function name_key(name)
    local n = tonumber(name)
    if n and n >= 1 and n <= MAX_KEY and name:find("^[1-9]%d*$") and fmt("%d", n) == name then return n end
    return name
end


-- x's entries when x is what version 2 holds (and loads back the same):
-- a state dict (a list of {name =, tensor =}, saved by its names), or a
-- table of tensors whose keys are names without white space or integers
-- 1..2^53.  nil for anything else.
local function v2_name(name)
    return type(name) == "string" and name ~= "" and name ~= LONE and not name:find("[%s%c]") and
        name_key(name) == name
end
local function flat_entries(x)
    local n, entries, seen = #x, {}, {}
    local first = x[1]
    if n > 0 and type(first) == "table" and not tensor.is_tensor(first) then
        for k in pairs(x) do
            if not (type(k) == "number" and k >= 1 and k <= n and k % 1 == 0) then return nil end
        end
        for i = 1, n do
            local e = x[i]
            if type(e) ~= "table" or getmetatable(e) ~= nil or not v2_name(e.name) or seen[e.name] or
                not tensor.is_tensor(e.tensor) then
                return nil
            end
            for k in pairs(e) do if k ~= "name" and k ~= "tensor" then return nil end end
            seen[e.name] = true
            entries[i] = {name = e.name, tensor = e.tensor}
        end
        return entries
    end
    local keys, tensors = {}, {}
    for k, v in pairs(x) do
        if not tensor.is_tensor(v) then return nil end
        -- one tensor under two names: version 3, which loads it as one (version 2 made two copies)
        if tensors[v] then return nil end
        tensors[v] = true
        if type(k) == "number" then
            if not (is_int(k) and k >= 1 and k <= MAX_KEY) then return nil end
        elseif not v2_name(k) then
            return nil
        end
        keys[#keys + 1] = k
    end
    table.sort(keys, function(a, b)
        if type(a) == type(b) then return a < b end
        return type(a) == "number"
    end)
    for i, k in ipairs(keys) do entries[i] = {name = type(k) == "number" and fmt("%d", k) or k, tensor = x[k]} end
    return entries
end

-- A version 3 file whose value is a flat table of tensors (ordo.save of
-- one tensor under two names, tied weights) as version 2's entries, each
-- name with its tensor; nil for any other value.
local function flat_tree(r)
    local root = r.root
    if type(root) ~= "table" then return nil end
    local n = 0
    for _, v in pairs(root) do -- (each tensor a placeholder true until placed)
        if v ~= true then return nil end
        n = n + 1
    end
    if n ~= #r.refs then return nil end -- (a boolean true beside the tensors)
    local entries = {}
    for i, ref in ipairs(r.refs) do
        local k = ref[2]
        if ref[1] ~= root or not (type(k) == "number" or v2_name(k)) then return nil end
        entries[i] = {name = type(k) == "number" and fmt("%d", k) or k, tensor = r.entries[ref[3]].tensor}
    end
    return entries
end

-- The tensors of a file, as a list of {name =, tensor =} in file order
-- (new cpu(0) tensors): m:load, opt:load, sched:load.
function M.read(fname, path)
    local r = read_file(fname, path)
    if r.refs then
        local flat = flat_tree(r)
        if flat then return flat end
        fail(fmt("%s: %s holds a nested value (a checkpoint written by ordo.save), not a set of named tensors: " ..
                 "read it with ordo.load(path) and load its parts with load_state_dict", fname, path))
    end
    return r.entries
end

-- Where a value sits inside what ordo.save was given: value.model[1].name.
local function child_path(path, k)
    if type(k) == "number" then return fmt("%s[%d]", path, k) end
    if k:find("^[%a_][%w_]*$") then return path .. "." .. k end
    return fmt("%s[%q]", path, k)
end

local function sort_keys(a, b)
    if type(a) == type(b) then return a < b end
    return type(a) == "number"
end

-- Encodes x (see decode_tree): the bytes and the list of its tensors
-- (entries named 1..n).  Raises, naming the path inside x, for what a file
-- cannot hold.
local function encode_tree(fname, x)
    local parts, entries, index_of, on_path = {}, {}, {}, {}
    local function put(p) parts[#parts + 1] = p end
    local function refuse(path, what) fail(fmt("%s: %s is %s", fname, path, what)) end
    local enc
    function enc(v, path, depth)
        local tv = type(v)
        if tv == "number" then
            BITS.d = v
            put("n" .. bit.tohex(BITS.u, 16))
        elseif tv == "string" then
            put(fmt("s%d:", #v))
            put(v)
        elseif tv == "boolean" then
            put(v and "T" or "F")
        elseif tensor.is_tensor(v) then
            local k = index_of[v]
            if not k then
                k = #entries + 1
                entries[k] = {name = fmt("%d", k), tensor = v, what = path}
                index_of[v] = k
            end
            put(fmt("x%d:", k))
        elseif tv == "table" then
            local mt = getmetatable(v)
            if mt ~= nil then
                local name = typename(v)
                local how = ""
                if type(mt) == "table" and rawget(mt, "_class_name") ~= nil then
                    name, how = "a module", ": save its m:state_dict()"
                elseif name:find("^optim%.") then
                    how = ": save its opt:state_dict()"
                elseif name:find("^lr_scheduler%.") then
                    how = ": save its sched:state_dict()"
                end
                refuse(path, fmt("%s (a table with a metatable; ordo.save writes plain tables)%s",
                                 name == "table" and "a table" or name, how))
            end
            if on_path[v] then refuse(path, fmt("%s again (a cycle: a table inside itself)", on_path[v])) end
            if depth >= MAX_DEPTH then refuse(path, fmt("nested deeper than %d tables", MAX_DEPTH)) end
            local keys = {}
            for k in pairs(v) do
                local tk = type(k)
                if tk == "number" then
                    if not (is_int(k) and k >= 1 and k <= MAX_KEY) then
                        fail(fmt("%s: %s has the key %.17g: number keys must be integers 1..2^53", fname, path, k))
                    end
                elseif tk ~= "string" then
                    fail(fmt("%s: %s has a %s key (%s): keys must be strings or integers 1..2^53", fname, path,
                             typename(k), tostring(k)))
                end
                keys[#keys + 1] = k
            end
            table.sort(keys, sort_keys)
            on_path[v] = path
            put(fmt("t%d:", #keys))
            for _, k in ipairs(keys) do
                enc(k, path, depth)
                enc(v[k], child_path(path, k), depth + 1)
            end
            on_path[v] = nil
        elseif tv == "cdata" and (ffi.istype("int64_t", v) or ffi.istype("uint64_t", v)) then
            put((ffi.istype("int64_t", v) and "i" or "u") .. bit.tohex(v, 16))
        elseif tv == "cdata" then
            refuse(path, fmt("a cdata (%s): only int64_t and uint64_t ones are saved", tostring(ffi.typeof(v))))
        elseif tv == "function" then
            refuse(path, "a function")
        else
            refuse(path, fmt("a %s", tv))
        end
    end
    enc(x, "value", 0)
    return concat(parts), entries
end

-- ordo.save(x, path): x a tensor, or a table of them, or a nested value
-- (tables of tables, tensors, numbers, strings, booleans, int64 cdata).
-- Returns x.  A tensor and a table of tensors keyed by plain names are
-- written as version 2 (what older ordo reads); the rest as version 3.
function M.save(x, path, extra)
    if extra ~= nil then
        fail(fmt("ordo.save: takes (x, path) and no options, got a third argument (%s)", typename(extra)))
    end
    if type(path) ~= "string" then fail(fmt("ordo.save: expected a file path, got %s", typename(path))) end
    if tensor.is_tensor(x) then
        M.write("ordo.save", path, {{name = LONE, tensor = x}})
        return x
    end
    local entries = type(x) == "table" and getmetatable(x) == nil and flat_entries(x)
    if entries then
        M.write("ordo.save", path, entries)
        return x
    end
    if x == nil then fail("ordo.save: expected a value to save (a tensor, or a table), got nil") end
    local tree, tensors = encode_tree("ordo.save", x)
    M.write("ordo.save", path, tensors, tree)
    return x
end

local LOAD_OPTS = {device = true}

local function show_device(d) return type(d) == "string" and fmt("%q", d) or tostring(d) end

-- The device of ordo.load's options (nil: leave the tensors on cpu(0)),
-- checked before the file is read; every problem is ordo.load's error.
local function load_device(opts)
    if opts == nil then return nil end
    if type(opts) ~= "table" or getmetatable(opts) ~= nil then
        fail(fmt("ordo.load: options must be a table {device = d}, got %s%s", typename(opts),
                 type(opts) == "string" and fmt(" (%q)", opts) or ""))
    end
    util.check_opts("ordo.load", opts, LOAD_OPTS)
    local d = opts.device
    if d == nil then return nil end
    -- ordo.gpu(5) and friends raise under their own names; said again as ours
    local ok, dev = pcall(util.parse_device, "ordo.load", d)
    if not ok then
        local msg = tostring(dev):gsub("^.-:%d+: ", "", 1) -- its position; fail gives ours
        if msg:sub(1, 11) ~= "ordo.load: " then msg = fmt("ordo.load: bad device %s: %s", show_device(d), msg) end
        fail(msg)
    end
    if not dev then
        fail(fmt("ordo.load: unknown device %s (expected ordo.cpu(n), ordo.gpu(n) or \"cpu\", \"gpu:0\")",
                 show_device(d)))
    end
    return dev
end

-- ordo.load(path [, {device =}]): what ordo.save wrote: a tensor, or a
-- table of them (integer keys come back as numbers).
function M.load(path, opts, extra)
    if extra ~= nil then extra_arg("load", "(path, opts)", extra) end
    local device = load_device(opts)
    local r = read_file("ordo.load", path)
    local entries = r.entries
    local function place(t) return device and t:to(device) or t end
    if r.refs then
        local placed = {}
        for i, e in ipairs(entries) do placed[i] = place(e.tensor) end
        local root = r.root
        for _, ref in ipairs(r.refs) do
            if ref[1] == nil then root = placed[ref[3]] else ref[1][ref[2]] = placed[ref[3]] end
        end
        return root
    end
    if #entries == 1 and entries[1].name == LONE then return place(entries[1].tensor) end
    local out = {}
    for _, e in ipairs(entries) do out[name_key(e.name)] = place(e.tensor) end
    return out
end

return M
