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
-- ordo.save writes a lone tensor as the single name "." (so ordo.save
-- refuses "." as a table key: {["."] = t} would read back as t) and an
-- integer key as its decimal digits (which ordo.load turns back into a
-- number, so the keys 1 and "1" cannot both be saved).
--
-- Writing goes to path .. ".tmp" first, which then replaces path: a failed
-- or interrupted save (a full disk, an error in a tensor) leaves the old
-- file as it was.  Reading checks every header, and that the file still
-- holds the bytes it claims, before it allocates; it reads one tensor at a
-- time.
local cdef = require "ordo.cdef"
local util = require "ordo.util"
local tensor = require "ordo.tensor"

local ffi, C = cdef.ffi, cdef.C
local fail, typename = util.fail, util.typename
local is_int = util.is_int
local fmt, concat = string.format, table.concat
local type, ipairs, pairs, tonumber, tostring, pcall, error, getmetatable, rawget =
    type, ipairs, pairs, tonumber, tostring, pcall, error, getmetatable, rawget
local min, max = math.min, math.max

local M = {}

local MAGIC, MAGIC_V1 = "ORDO-PARAMS 2", "ORDO-PARAMS 1"
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
    if not f then fail(fmt("%s: cannot open %s: %s", fname, tmp, io_reason(tmp, err))) end
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

-- entries: a list of {name = string, tensor = tensor}.  fname names the
-- caller in errors ("save", "ordo.save").
function M.write(fname, path, entries)
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
        put(MAGIC .. "\n")
        for _, e in ipairs(entries) do
            local c = M.host_copy(fname, e.tensor, e.name == LONE and "the tensor" or "tensor " .. e.name)
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

-- The tensors of a file, as a list of {name =, tensor =} in file order
-- (new cpu(0) tensors).
function M.read(fname, path)
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
        local v1 = first == MAGIC_V1
        if first ~= MAGIC and not v1 then
            -- two ways a good file goes bad in transit, said as such
            local why = ""
            if first == MAGIC .. "\r" or first == MAGIC_V1 .. "\r" then
                why = " (its line ends were changed to CRLF: a text-mode copy, or git's autocrlf, damaged it)"
            elseif first and first:sub(1, 2) == "\31\139" then
                why = " (it is gzip-compressed: gunzip it first)"
            end
            error(fmt("%s: %s is not an ordo tensor file%s", fname, path, why), 0)
        end
        local entries, seen = {}, {}
        while true do
            local line = f:read("*l")
            if not line then error(fmt("%s: %s is truncated (no end line)", fname, path), 0) end
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
        return entries
    end)
    f:close()
    if not ok then reraise(fname, res) end
    return res
end

-- A key as the name ordo.save writes for it: a string as it is, an integer
-- in decimal digits (exact; tostring's "%.14g" rounds past 10^14).
local function key_name(k)
    local tk = type(k)
    if tk == "string" then
        if k == LONE then
            fail(fmt("ordo.save: the key %q is reserved (the file holds a lone tensor under that name); use another key",
                     LONE))
        end
        return k
    elseif tk == "number" then
        if not (is_int(k) and k >= 1 and k <= MAX_KEY) then
            fail(fmt("ordo.save: number keys must be integers in 1..2^53, got %.17g", k))
        end
        return fmt("%d", k)
    end
    fail(fmt("ordo.save: table keys must be names (strings) or positive integers, got a %s key (%s)",
             tk, tostring(k)))
end

-- A name from a file as ordo.load's key: the digits ordo.save writes for an
-- integer key become that number again; every other name stays a string.
local function name_key(name)
    local n = tonumber(name)
    if n and n >= 1 and n <= MAX_KEY and name:find("^[1-9]%d*$") and fmt("%d", n) == name then return n end
    return name
end

local function show_key(k) return type(k) == "string" and fmt("%q", k) or fmt("%d", k) end

-- ordo.save(x, path): x a tensor, or a table of tensors (keys: names
-- without white space, or integers 1..2^53).  Returns x.
function M.save(x, path, extra)
    if extra ~= nil then
        fail(fmt("ordo.save: takes (x, path) and no options, got a third argument (%s)", typename(extra)))
    end
    local entries = {}
    local first = type(x) == "table" and getmetatable(x) == nil and x[1]
    if tensor.is_tensor(x) then
        entries[1] = {name = LONE, tensor = x}
    elseif type(first) == "table" and getmetatable(first) == nil and first.name ~= nil then
        -- a state dict, m:state_dict() or opt:state_dict(): a list of {name
        -- =, tensor =}, saved by its names (ordo.load gives name = tensor,
        -- which load_state_dict takes); was "1 is not a tensor (table)"
        local n = #x
        for k in pairs(x) do
            if not (type(k) == "number" and k >= 1 and k <= n and k % 1 == 0) then
                fail(fmt("ordo.save: a state dict (a list of {name =, tensor =}) with another key too (%s)",
                         tostring(k)))
            end
        end
        for i = 1, n do
            local e = x[i]
            if type(e) ~= "table" or tensor.is_tensor(e) or type(e.name) ~= "string" then
                fail(fmt("ordo.save: entry %d of the state dict is %s, expected {name =, tensor =}", i, typename(e)))
            end
            if e.name == LONE or name_key(e.name) ~= e.name then
                fail(fmt("ordo.save: entry %d of the state dict is named %q, which would load back as %s", i, e.name,
                         e.name == LONE and "a lone tensor" or "a number"))
            end
            entries[i] = {name = e.name, tensor = e.tensor}
        end
    elseif type(x) == "table" and getmetatable(x) == nil then
        -- every key checked before sorting: the sort compares them
        local keys, by_name = {}, {}
        for k in pairs(x) do
            local name = key_name(k)
            local other = by_name[name]
            if other ~= nil then
                fail(fmt("ordo.save: keys %s and %s would both be saved as %s (a name of digits loads back as a number)",
                         show_key(other), show_key(k), name))
            end
            by_name[name] = k
            keys[#keys + 1] = k
        end
        table.sort(keys, function(a, b)
            if type(a) == type(b) then return a < b end
            return type(a) == "number"
        end)
        for _, k in ipairs(keys) do
            local v = x[k]
            -- Torch's checkpoint, {epoch = 5, model = m:state_dict(), ...}:
            -- say what ordo.save keeps and how to save the rest
            local mt = type(v) == "table" and getmetatable(v)
            if type(v) == "number" then
                fail(fmt("ordo.save: %s is not a tensor (number): ordo.save writes tensors only; save a number as a " ..
                         "tensor, ordo.tensor(%s)", key_name(k), tostring(v)))
            elseif mt and rawget(mt, "_class_name") ~= nil then
                fail(fmt("ordo.save: %s is not a tensor (a module): save a module with m:save(path), or its " ..
                         "m:state_dict() with ordo.save", key_name(k)))
            elseif type(v) == "table" and not mt then
                fail(fmt("ordo.save: %s is not a tensor (a table): ordo.save writes one level of tensors; save each " ..
                         "state dict to a file of its own (m:save(path), opt:save(path), sched:save(path), or " ..
                         "ordo.save(m:state_dict(), path))", key_name(k)))
            end
            entries[#entries + 1] = {name = key_name(k), tensor = v}
        end
    else
        fail("ordo.save: expected a tensor or a table of tensors, got " .. typename(x))
    end
    M.write("ordo.save", path, entries)
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
function M.load(path, opts)
    local device = load_device(opts)
    local entries = M.read("ordo.load", path)
    local function place(t) return device and t:to(device) or t end
    if #entries == 1 and entries[1].name == LONE then return place(entries[1].tensor) end
    local out = {}
    for _, e in ipairs(entries) do out[name_key(e.name)] = place(e.tensor) end
    return out
end

return M
