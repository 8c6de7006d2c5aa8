-- ordo.serialize: named tensors to and from a file, the format of
-- ordo.save / ordo.load and of a module's save / load.
--
-- The file: a line "ORDO-PARAMS 1", then per tensor a header line
-- "name dtype ndim size1 size2 ..." followed by its bytes (row-major, the
-- machine's byte order), and a last line "end".  Names are written as they
-- are, so they must not hold white space.
--
-- Writing goes to path .. ".tmp" first, which then replaces path: a failed
-- or interrupted save (a full disk, an error in a tensor) leaves the old
-- file as it was.  Reading checks every header before it allocates and
-- reads one tensor at a time.
local cdef = require "ordo.cdef"
local util = require "ordo.util"
local tensor = require "ordo.tensor"

local ffi = cdef.ffi
local fail, typename = util.fail, util.typename
local is_int = util.is_int
local fmt, concat = string.format, table.concat
local type, ipairs, pairs, tonumber, tostring, pcall, error, getmetatable =
    type, ipairs, pairs, tonumber, tostring, pcall, error, getmetatable
local floor = math.floor

local M = {}

local MAGIC = "ORDO-PARAMS 1"
local DTYPES = {float32 = true, float64 = true, int32 = true, int64 = true, uint8 = true}
local MAX_DIMS = 8

-- entries: a list of {name = string, tensor = tensor}.  fname names the
-- caller in errors ("save", "ordo.save").
function M.write(fname, path, entries)
    if type(path) ~= "string" then fail(fmt("%s: expected a file path, got %s", fname, typename(path))) end
    for _, e in ipairs(entries) do
        if type(e.name) ~= "string" or e.name == "" or e.name:find("%s") then
            fail(fmt("%s: tensor names must be non-empty and without white space, got %q", fname, tostring(e.name)))
        end
        if not tensor.is_tensor(e.tensor) then
            fail(fmt("%s: %s is not a tensor (%s)", fname, e.name, typename(e.tensor)))
        end
    end
    local tmp = path .. ".tmp"
    local f, err = io.open(tmp, "wb")
    if not f then fail(fmt("%s: cannot open %s: %s", fname, tmp, tostring(err))) end
    local ok, werr = pcall(function()
        local function put(s)
            local r, e = f:write(s)
            if not r then error(fmt("%s: writing %s failed: %s", fname, tmp, tostring(e)), 0) end
        end
        put(MAGIC .. "\n")
        for _, e in ipairs(entries) do
            local c = e.tensor:detach():to(util.cpu(0)):contiguous()
            c:wait()
            local s = c:shape()
            put(fmt("%s %s %d%s%s\n", e.name, c:dtype(), #s, #s > 0 and " " or "", concat(s, " ")))
            local nbytes = c:numel() * c:element_size()
            if nbytes > 0 then put(ffi.string(util.host_ptr(c), nbytes)) end
        end
        put("end\n")
        local r, e = f:close()
        f = nil
        if not r then error(fmt("%s: writing %s failed: %s", fname, tmp, tostring(e)), 0) end
    end)
    if not ok then
        if f then f:close() end
        os.remove(tmp)
        error(werr, 0)
    end
    local r, rerr = os.rename(tmp, path)
    if not r then
        os.remove(tmp)
        fail(fmt("%s: cannot replace %s: %s", fname, path, tostring(rerr)))
    end
end

-- The tensors of a file, as a list of {name =, tensor =} in file order
-- (new cpu(0) tensors).
function M.read(fname, path)
    if type(path) ~= "string" then fail(fmt("%s: expected a file path, got %s", fname, typename(path))) end
    local f, err = io.open(path, "rb")
    if not f then fail(fmt("%s: cannot open %s: %s", fname, path, tostring(err))) end
    local ok, res = pcall(function()
        if f:read("*l") ~= MAGIC then error(fmt("%s: %s is not an ordo tensor file", fname, path), 0) end
        local entries, seen = {}, {}
        while true do
            local line = f:read("*l")
            if not line then error(fmt("%s: %s is truncated (no end line)", fname, path), 0) end
            if line == "end" then break end
            local words = {}
            for w in line:gmatch("%S+") do words[#words + 1] = w end
            local name, dt, nd = words[1], words[2], tonumber(words[3])
            local good = name and DTYPES[dt] and nd and nd == floor(nd) and nd >= 0 and nd <= MAX_DIMS
                and #words == 3 + nd
            local shape = {}
            for i = 1, good and nd or 0 do
                shape[i] = tonumber(words[3 + i])
                if not shape[i] or shape[i] < 0 or not is_int(shape[i]) then good = false end
            end
            if not good then error(fmt("%s: bad header line in %s: %q", fname, path, line:sub(1, 200)), 0) end
            if seen[name] then error(fmt("%s: %s holds two tensors named %s", fname, path, name), 0) end
            seen[name] = true
            local t = tensor.empty(shape, {dtype = dt})
            local nbytes = t:numel() * t:element_size()
            if nbytes > 0 then
                local bytes = f:read(nbytes)
                if not bytes or #bytes < nbytes then
                    error(fmt("%s: %s is truncated in %s", fname, path, name), 0)
                end
                ffi.copy(util.host_ptr(t), bytes, nbytes)
            end
            entries[#entries + 1] = {name = name, tensor = t}
        end
        return entries
    end)
    f:close()
    if not ok then fail(res) end
    return res
end

-- ordo.save(x, path): x a tensor, or a table of tensors (keys: names
-- without white space, or 1..n).  Returns x.
function M.save(x, path)
    local entries = {}
    if tensor.is_tensor(x) then
        entries[1] = {name = ".", tensor = x} -- a lone tensor
    elseif type(x) == "table" and getmetatable(x) == nil then
        local keys = {}
        for k in pairs(x) do keys[#keys + 1] = k end
        table.sort(keys, function(a, b)
            if type(a) == type(b) then return a < b end
            return type(a) == "number"
        end)
        for _, k in ipairs(keys) do
            if type(k) ~= "string" and not (type(k) == "number" and k >= 1 and k == floor(k)) then
                fail(fmt("ordo.save: table keys must be names or positive integers, got %s", tostring(k)))
            end
            entries[#entries + 1] = {name = tostring(k), tensor = x[k]}
        end
    else
        fail("ordo.save: expected a tensor or a table of tensors, got " .. typename(x))
    end
    M.write("ordo.save", path, entries)
    return x
end

-- ordo.load(path [, {device =}]): what ordo.save wrote: a tensor, or a
-- table of them (integer keys come back as numbers).
function M.load(path, opts)
    local entries = M.read("ordo.load", path)
    local device = opts and opts.device
    local function place(t) return device and t:to(device) or t end
    if #entries == 1 and entries[1].name == "." then return place(entries[1].tensor) end
    local out = {}
    for _, e in ipairs(entries) do
        local k = e.name
        local n = tonumber(k)
        if n and n >= 1 and n == floor(n) and tostring(n) == k then k = n end
        out[k] = place(e.tensor)
    end
    return out
end

return M
