-- ordo.save / ordo.load (lua/ordo/serialize.lua): tensors and tables of
-- tensors round-trip bit for bit in every dtype; a bad file or a failed
-- save raises, names what was wrong, and leaves what was there intact.
local ordo = require "ordo"
local H = require "support.helpers"

local function tmp() return os.tmpname() end

local function slurp(path)
    local f = assert(io.open(path, "rb"))
    local s = f:read("*a")
    f:close()
    return s
end

local function spit(path, s)
    local f = assert(io.open(path, "wb"))
    f:write(s)
    f:close()
end

describe("ordo.save and ordo.load", function()
    it("a lone tensor round-trips in every dtype, views and 0-dim and empty ones too", function()
        local path = tmp()
        for _, dt in ipairs({"float32", "float64", "int32", "int64", "uint8"}) do
            local t = ordo.arange(24, dt):view(2, 3, 4):transpose(1, 3) -- saved as it reads, contiguous
            assert.equals(t, ordo.save(t, path))
            local back = ordo.load(path)
            assert.equals(dt, back:dtype())
            assert.same(t:shape(), back:shape())
            assert.same(t:totable(), back:totable())
        end
        local f = ordo.tensor({1 / 3, -0.0, 1e-40, math.huge, 0 / 0}, "float64")
        ordo.save(f, path)
        local g = ordo.load(path):totable()
        assert.equals(1 / 3, g[1])
        assert.equals(-math.huge, 1 / g[2]) -- -0.0 kept
        assert.equals(1e-40, g[3])
        assert.equals(math.huge, g[4])
        assert.is_true(g[5] ~= g[5])
        ordo.save(ordo.tensor(2.5), path)
        assert.equals(2.5, ordo.load(path):item())
        ordo.save(ordo.zeros(0, 3), path)
        assert.same({0, 3}, ordo.load(path):shape())
        os.remove(path)
    end)

    it("tables of tensors: names and 1..n come back as they were", function()
        local path = tmp()
        local w, b = ordo.randn(3, 2), ordo.tensor({1, 2}, "int64")
        ordo.save({weight = w, bias = b, ["layer.1"] = w}, path)
        local back = ordo.load(path)
        assert.same(w:totable(), back.weight:totable())
        assert.same(b:totable(), back.bias:totable())
        assert.same(w:totable(), back["layer.1"]:totable())
        ordo.save({w, b}, path)
        back = ordo.load(path)
        assert.equals(2, #back)
        assert.same(b:totable(), back[2]:totable())
        local moved = ordo.load(path, {device = ordo.cpu(1)})
        assert.equals(ordo.cpu(1), moved[1]:device())
        os.remove(path)
    end)

    it("bad arguments raise before anything is written; the old file stays whole", function()
        local path = tmp()
        ordo.save(ordo.ones(2), path)
        local before = slurp(path)
        H.raises(function() ordo.save({a = ordo.ones(1), b = print}, path) end, "ordo.save", "value.b is a function")
        H.raises(function() ordo.save({["two words"] = {io.stdout}}, path) end, "ordo.save",
                 'value["two words"][1] is a userdata')
        H.raises(function() ordo.save({[0.5] = ordo.ones(1)}, path) end, "ordo.save", "keys")
        H.raises(function() ordo.save(print, path) end, "ordo.save", "value is a function")
        H.raises(function() ordo.save(nil, path) end, "ordo.save", "got nil")
        H.raises(function() ordo.save(ordo.ones(1), 3) end, "ordo.save", "file path")
        H.raises(function() ordo.save(ordo.ones(1), "/no/such/dir/file") end, "ordo.save", "cannot open /no/such/dir/file (")
        assert.equals(before, slurp(path))
        assert.is_nil(io.open(path .. ".tmp", "rb"))
        os.remove(path)
    end)

    it("file_kind says what is at a path without opening it (a FIFO's open would wait)", function()
        local dir = os.tmpname()
        os.remove(dir)
        assert(os.execute("mkdir '" .. dir .. "' && mkfifo '" .. dir .. "/f' && touch '" .. dir .. "/r' && ln -s loop '"
                          .. dir .. "/loop'") == 0)
        assert.are.equal("directory", ordo.file_kind(dir))
        assert.are.equal("file", ordo.file_kind(dir .. "/r"))
        assert.are.equal("other", ordo.file_kind(dir .. "/f"))
        assert.are.equal("other", ordo.file_kind("/dev/null"))
        assert.are.equal("none", ordo.file_kind(dir .. "/missing"))
        assert.are.equal("none", ordo.file_kind(dir .. "/r/below"))
        assert.are.equal("none", ordo.file_kind(""))
        local k, why = ordo.file_kind(dir .. "/loop")
        assert.is_nil(k)
        assert.is_truthy(why:find("symbolic links", 1, true), why)
        assert.has_error(function() ordo.file_kind(3) end, "file_kind: expected a path (a string), got number")
        os.execute("rm -rf '" .. dir .. "'")
    end)

    it("a directory, an empty path or a missing file: the path once, io's reason, nothing written", function()
        local dir = tmp()
        os.remove(dir)
        assert(os.execute("mkdir '" .. dir .. "'") == 0)
        local function msg(fn, ...)
            local ok, e = pcall(fn, ...)
            assert.is_false(ok)
            return tostring(e)
        end
        assert.matches("ordo.load: " .. dir .. " is a directory, not a file", msg(ordo.load, dir), 1, true)
        assert.matches("ordo.save: " .. dir .. " is a directory, not a file", msg(ordo.save, ordo.ones(1), dir), 1, true)
        assert.is_nil(io.open(dir .. ".tmp", "rb"))
        assert.matches("ordo.load: the file path is empty", msg(ordo.load, ""), 1, true)
        assert.matches("ordo.save: the file path is empty", msg(ordo.save, ordo.ones(1), ""), 1, true)
        local m = ordo.nn.Linear(2, 2)
        assert.matches("load: " .. dir .. " is a directory, not a file", msg(m.load, m, dir), 1, true)
        -- io's message starts with the path: it is given once
        local e = msg(ordo.load, "/no/such/file")
        assert.matches("ordo.load: cannot open /no/such/file: No such file or directory", e, 1, true)
        assert.is_nil(e:find("/no/such/file: /no/such/file", 1, true), e)
        os.execute("rmdir '" .. dir .. "'")
    end)

    it("a damaged file raises naming the problem: not ours, bad header, truncated, duplicate names", function()
        local path = tmp()
        ordo.save({a = ordo.arange(10)}, path)
        local good = slurp(path)
        spit(path, "garbage")
        H.raises(function() ordo.load(path) end, "ordo.load", "not an ordo tensor file")
        spit(path, (good:gsub("\n", "\r\n")))
        H.raises(function() ordo.load(path) end, "ordo.load", "not an ordo tensor file", "changed to CRLF")
        spit(path, "\31\139\8\0\0\0\0\0")
        H.raises(function() ordo.load(path) end, "ordo.load", "not an ordo tensor file", "gzip-compressed")
        spit(path, good:sub(1, #good - 10))
        H.raises(function() ordo.load(path) end, "ordo.load", "truncated")
        spit(path, "ORDO-PARAMS 1\na float32 1 -4\nend\n")
        H.raises(function() ordo.load(path) end, "ordo.load", "bad header")
        spit(path, "ORDO-PARAMS 1\na complex 1 4\nend\n")
        H.raises(function() ordo.load(path) end, "ordo.load", "bad header")
        spit(path, "ORDO-PARAMS 1\na float32 9 1 1 1 1 1 1 1 1 1\nend\n")
        H.raises(function() ordo.load(path) end, "ordo.load", "bad header")
        spit(path, "ORDO-PARAMS 1\na uint8 1 1\nxa uint8 1 1\nyend\n")
        H.raises(function() ordo.load(path) end, "ordo.load", "two tensors named a")
        H.raises(function() ordo.load("/no/such/file") end, "ordo.load", "cannot open")
        os.remove(path)
    end)
    it("keys that would read back as one are refused before anything is written; integer keys are exact", function()
        local path = tmp()
        local a, b = ordo.ones(2), ordo.zeros(2)
        ordo.save(a, path)
        local before = slurp(path)
        -- keys past 2^53 (not all representable), fractions, inf, 0 and negatives are refused
        H.raises(function() ordo.save({[2 ^ 53 + 2] = a}, path) end, "ordo.save", "keys", "9007199254740994")
        H.raises(function() ordo.save({[math.huge] = a}, path) end, "ordo.save", "keys", "inf")
        H.raises(function() ordo.save({[0] = a}, path) end, "ordo.save", "keys")
        H.raises(function() ordo.save({[-3] = a}, path) end, "ordo.save", "keys")
        assert.equals(before, slurp(path))
        assert.is_nil(io.open(path .. ".tmp", "rb"))
        -- tostring's %.14g made these two the same name; they are exact now
        ordo.save({[123456789012345] = a, [123456789012346] = b, [2 ^ 53] = a}, path)
        local back = ordo.load(path)
        assert.same(a:totable(), back[123456789012345]:totable())
        assert.same(b:totable(), back[123456789012346]:totable())
        assert.is_not_nil(back[2 ^ 53])
        local n = 0
        for _ in pairs(back) do n = n + 1 end
        assert.equals(3, n)
        -- names that are not the digits of an integer key stay strings
        ordo.save({["007"] = a, ["9007199254740993"] = b, ["1e3"] = a}, path)
        back = ordo.load(path)
        assert.is_not_nil(back["007"])
        assert.is_not_nil(back["9007199254740993"])
        assert.is_not_nil(back["1e3"])
        assert.is_nil(back[7])
        assert.is_nil(back[1000])
        -- 1 and "1" (the name 1 in a version 2 file, which loads as the
        -- number): a version 3 file keeps them apart, and "12" a string
        ordo.save({[1] = a, ["1"] = b, ["12"] = a}, path)
        assert.equals("ORDO-PARAMS 3\n", slurp(path):sub(1, 14))
        back = ordo.load(path)
        assert.same(a:totable(), back[1]:totable())
        assert.same(b:totable(), back["1"]:totable())
        assert.is_not_nil(back["12"])
        assert.is_nil(back[12])
        os.remove(path)
    end)

    it("boolean, table and function keys raise naming the key's type, not a Lua comparison error", function()
        local path = tmp()
        local t = ordo.ones(1)
        local err = H.raises(function() ordo.save({[true] = t, [false] = t}, path) end, "ordo.save", "boolean")
        assert.is_nil(err:find("compare", 1, true))
        H.raises(function() ordo.save({[{}] = t, [{}] = t}, path) end, "ordo.save", "table key")
        H.raises(function() ordo.save({a = t, [print] = t}, path) end, "ordo.save", "function key")
        assert.is_nil(io.open(path .. ".tmp", "rb"))
        os.remove(path)
    end)

    it("the key '.' (a lone tensor in version 2) is kept by version 3; old files with '.' still load", function()
        local path = tmp()
        local t = ordo.arange(3)
        ordo.save({["."] = t}, path)
        local one = ordo.load(path)
        assert.is_false(ordo.is_tensor(one))
        assert.same(t:totable(), one["."]:totable())
        ordo.save({["."] = t, a = t}, path)
        assert.same(t:totable(), ordo.load(path)["."]:totable())
        spit(path, "ORDO-PARAMS 1\n. uint8 1 2\nxya uint8 1 1\nzend\n")
        local back = ordo.load(path)
        assert.same({120, 121}, back["."]:totable())
        assert.same({122}, back.a:totable())
        spit(path, "ORDO-PARAMS 1\n. uint8 1 2\nxyend\n") -- a lone tensor, as ordo.save(t) writes it
        assert.same({120, 121}, ordo.load(path):totable())
        os.remove(path)
    end)

    it("a header claiming more bytes than the file holds raises before allocating them", function()
        local path = tmp()
        spit(path, "ORDO-PARAMS 1\nx float32 1 4294967297\nabcd") -- was a 16 GB allocation
        H.raises(function() ordo.load(path) end, "ordo.load", "'x'", "claims 17179869188 bytes", "only 4 remain",
                 "truncated")
        spit(path, "ORDO-PARAMS 1\nx float64 3 100000 100000 100000\nabcdefgh")
        H.raises(function() ordo.load(path) end, "ordo.load", "claims 8000000000000000 bytes", "only 8 remain")
        -- sizes are plain digits: not 1e18, 0x10, inf or fractions (an error with one position)
        for _, size in ipairs({"1e18", "0x10", "inf", "2.5", "+4", "99999999999999999999"}) do
            spit(path, "ORDO-PARAMS 1\nx float32 1 " .. size .. "\n")
            local err = H.raises(function() ordo.load(path) end, "ordo.load", "bad header")
            assert.is_nil(err:find("empty", 1, true))
            assert.is_nil(err:find(":%d+:.*:%d+:"))
        end
        -- a tensor with no elements is fine whatever its other sizes
        spit(path, "ORDO-PARAMS 1\nx float32 2 0 9007199254740992\nend\n")
        assert.same({0, 2 ^ 53}, ordo.load(path).x:shape())
        os.remove(path)
    end)

    it("a tensor bigger than one read piece (16 MiB) round-trips; so does a file read through a pipe", function()
        local path = tmp()
        local big = ordo.randn(4500000) -- 18 MB of float32
        ordo.save({big = big, small = ordo.arange(5, "int64")}, path)
        local back = ordo.load(path)
        assert.equals(0, (back.big - big):abs():max():item())
        assert.same({0, 1, 2, 3, 4}, back.small:totable())
        local fifo = path .. ".fifo"
        local made = os.execute("mkfifo " .. fifo .. " 2>/dev/null")
        if made == 0 or made == true then -- a number, or true under Lua 5.2 compat
            os.execute("cat " .. path .. " > " .. fifo .. " &") -- blocks until the load opens it
            back = ordo.load(fifo)
            assert.equals(0, (back.big - big):abs():max():item())
            os.execute("printf 'ORDO-PARAMS 1\\nx float32 1 4294967297\\nabcd' > " .. fifo .. " &")
            H.raises(function() ordo.load(fifo) end, "ordo.load", "claims 17179869188 bytes", "only 4 remain")
            os.remove(fifo)
        end
        os.remove(path)
    end)

    it("saving and loading a large tensor leaves no pile of dead pieces in the Lua heap", function()
        local path = tmp()
        local big = ordo.rand(32 * 2 ^ 20) -- 128 MiB: 8 pieces, each its own (not interned) string
        big:wait()
        collectgarbage()
        local heap0 = collectgarbage("count") / 1024
        ordo.save(big, path)
        local after_save = collectgarbage("count") / 1024 - heap0
        local back = ordo.load(path)
        local after_load = collectgarbage("count") / 1024 - heap0
        os.remove(path)
        assert.is_true(ordo.equal(back, big))
        -- at most 4 pieces (64 MiB) wait for a collection; all 8 did before
        assert.is_true(after_save < 96, ("the save left %.0f MB in the Lua heap"):format(after_save))
        assert.is_true(after_load < 96, ("the load left %.0f MB in the Lua heap"):format(after_load))
    end)

    it("a save failing midway (a tensor whose op failed) leaves the old file whole and no .tmp", function()
        local path = tmp()
        ordo.save({a = ordo.ones(3)}, path)
        local before = slurp(path)
        local x, z = ordo.tensor({1, 2}, "int64"), ordo.zeros(2, "int64")
        local c = ordo.empty({2}, {dtype = "int64"})
        ordo.engine.push("div", {x, z}, {c})
        local err = H.raises(function() ordo.save({a = ordo.ones(3), b = c}, path) end, "div")
        assert.is_nil(err:find(":%d+:.*:%d+:")) -- one position, not two
        assert.equals(before, slurp(path))
        assert.is_nil(io.open(path .. ".tmp", "rb"))
        os.remove(path)
    end)

    it("a tensor whose op failed is refused even after a wait reported the failure; a good write clears it", function()
        local path = tmp()
        ordo.save({a = ordo.ones(3)}, path)
        local before = slurp(path)
        local x, z = ordo.tensor({1, 2}, "int64"), ordo.zeros(2, "int64")
        local c = ordo.empty({2}, {dtype = "int64"})
        ordo.engine.push("div", {x, z}, {c})
        local y = ordo.zeros(2, "int64")
        y:copy_(c) -- pushed before the failure is reported: skipped, y carries it too
        local m = ordo.nn.Linear(2, 1)
        ordo.autograd.no_grad(function() m.weight:view(2):copy_(c) end) -- the same, in a module
        H.raises(function() c:wait() end, "div") -- reported here, once
        y:wait() -- (the same failure: not reported again)
        -- was: saved c's garbage bytes without a word
        H.raises(function() ordo.save(c, path) end, "ordo.save", "the tensor holds the result of an op that failed",
                 "integer division by zero")
        H.raises(function() ordo.save({b = c}, path) end, "ordo.save", "tensor b holds")
        H.raises(function() ordo.save(c:narrow(1, 2, 1), path) end, "ordo.save", "failed") -- a view of it
        H.raises(function() ordo.save({y = y}, path) end, "ordo.save", "tensor y holds")
        H.raises(function() m:save(path) end, "save", "tensor weight holds", "division by zero")
        assert.equals(before, slurp(path))
        assert.is_nil(io.open(path .. ".tmp", "rb"))
        y:fill_(5) -- a write that succeeds: y is good again
        ordo.save({y = y}, path)
        assert.same({5, 5}, ordo.load(path).y:totable())
        os.remove(path)
    end)

    it("a symbolic link is followed (the link stays), the old file's permissions are kept", function()
        local dir = tmp()
        os.remove(dir)
        assert(os.execute("mkdir '" .. dir .. "'") == 0)
        local real, link = dir .. "/real.bin", dir .. "/link.bin"
        spit(real, "old")
        assert(os.execute("ln -s real.bin '" .. link .. "'") == 0)
        ordo.save(ordo.arange(3), link)
        -- was: the link was replaced by a new file and real.bin kept "old"
        assert.same({0, 1, 2}, ordo.load(real):totable())
        local p = io.popen("stat -c '%F %a' '" .. link .. "' '" .. real .. "'")
        local kinds = p:read("*a")
        p:close()
        assert.matches("^symbolic link %d+\nregular file 644\n$", kinds)
        assert(os.execute("chmod 600 '" .. real .. "'") == 0)
        ordo.save(ordo.arange(4), link)
        p = io.popen("stat -c '%a' '" .. real .. "'")
        assert.equals("600\n", p:read("*a")) -- was 644: a private checkpoint became world-readable
        p:close()
        assert.equals(4, ordo.load(link):numel())
        -- a stale real.bin.tmp that is a link to another file: that file is not written through
        local other = dir .. "/other"
        spit(other, "keep me")
        assert(os.execute("ln -s other '" .. real .. ".tmp'") == 0)
        ordo.save(ordo.arange(5), real)
        assert.equals("keep me", slurp(other))
        assert.equals(5, ordo.load(real):numel())
        assert.is_nil(io.open(real .. ".tmp", "rb"))
        os.execute("rm -r '" .. dir .. "'")
    end)

    it("a read-only file is not replaced (as a user without root's bypass)", function()
        local p = io.popen("id -u")
        local uid = p:read("*l")
        p:close()
        if uid ~= "0" or os.execute("command -v runuser >/dev/null 2>&1") ~= 0 then return end
        local dir = tmp()
        os.remove(dir)
        assert(os.execute("mkdir -m 777 '" .. dir .. "'") == 0)
        local path = dir .. "/ck.bin"
        ordo.save(ordo.ones(2), path)
        assert(os.execute("chmod 444 '" .. path .. "'") == 0)
        local before = slurp(path)
        -- was: the rename replaced it, as the directory allowed
        local cmd = "runuser -u nobody -- build/ordo -e 'local ordo = require \"ordo\" " ..
                    "local ok, e = pcall(ordo.save, ordo.zeros(3), \"" .. path .. "\") print(ok, e)' 2>&1"
        p = io.popen(cmd)
        local out = p:read("*a")
        p:close()
        assert.matches("false.*ordo.save: cannot write " .. path:gsub("%p", "%%%0") .. ": Permission denied", out)
        assert.equals(before, slurp(path))
        os.execute("rm -r '" .. dir .. "'")
    end)

    it("a device or FIFO is written directly, never replaced; a write error there raises", function()
        -- was: /dev/full.tmp renamed over /dev/full (as root), and a FIFO hung the save at its first open.
        -- Private device nodes (made when root can), so that code without the fix replaces only them.
        local dir = tmp()
        os.remove(dir)
        assert(os.execute("mkdir '" .. dir .. "'") == 0)
        local null, full = dir .. "/null", dir .. "/full"
        if os.execute("mknod -m 666 '" .. null .. "' c 1 3 2>/dev/null && mknod -m 666 '" .. full ..
                      "' c 1 7 2>/dev/null") == 0 then
            ordo.save(ordo.ones(1000), null)
            H.raises(function() ordo.save(ordo.ones(10), full) end, "ordo.save", "writing " .. full .. " failed",
                     "No space left on device")
            local p = io.popen("stat -c '%F' '" .. null .. "' '" .. full .. "'")
            assert.equals("character special file\ncharacter special file\n", p:read("*a"))
            p:close()
            assert.is_nil(io.open(full .. ".tmp", "rb"))
        end
        os.execute("rm -rf '" .. dir .. "'")
        local fifo = tmp()
        os.remove(fifo)
        if os.execute("mkfifo '" .. fifo .. "' 2>/dev/null") == 0 then
            local out = fifo .. ".out"
            os.execute("cat '" .. fifo .. "' > '" .. out .. "' &") -- the reader the save's open waits for
            ordo.save(ordo.arange(5, "int64"), fifo)
            local back
            for _ = 1, 200 do -- cat may still be writing
                local ok, t = pcall(ordo.load, out)
                if ok then back = t break end
                os.execute("sleep 0.01")
            end
            assert.same({0, 1, 2, 3, 4}, back:totable())
            os.remove(fifo)
            os.remove(out)
        end
    end)

    it("bytes after the end line, or a header with control characters, are damage; such names are refused", function()
        local path = tmp()
        ordo.save({a = ordo.arange(6, "float64"):view(2, 3), b = ordo.tensor(7, "int64")}, path)
        local good = slurp(path)
        spit(path, good .. "x")
        H.raises(function() ordo.load(path) end, "ordo.load", "bytes after its end line")
        -- a size damaged to a smaller one: the rest of the bytes read as a header line
        spit(path, (good:gsub("float64 2 2 3", "float64 2 2 0")))
        H.raises(function() ordo.load(path) end, "ordo.load", "tensor 'a' does not match its checksum")
        spit(path, (good:gsub("float64 2 2 3", "float64 2 2 1")))
        H.raises(function() ordo.load(path) end, "ordo.load")
        spit(path, good)
        -- a name with control characters: kept by version 3
        ordo.save({["a\1b"] = ordo.ones(1)}, path)
        assert.same({1}, ordo.load(path)["a\1b"]:totable())
        os.remove(path)
    end)

    it("each tensor carries a CRC-32: any byte changed, in a name, a size or the data, raises naming the tensor", function()
        local path = tmp()
        local x = {w = ordo.arange(6, "float64"):view(2, 3), b = ordo.tensor(7, "int64"), e = ordo.zeros(0, 2),
                   u = ordo.arange(3, "uint8")}
        ordo.save(x, path)
        local good = slurp(path)
        assert.equals("ORDO-PARAMS 2\n", good:sub(1, 14))
        -- the checksum is zlib's crc32 of the header before " crc32=" and the bytes
        local z = require("ordo.cdef").zlib()
        if z then
            local head, crc, bytes = good:match("\n(b int64 0) crc32=(%x+)\n(........)")
            local c = z.crc32(z.crc32(0, head, #head), bytes, 8)
            assert.equals(tonumber(crc, 16), tonumber(c))
        end
        local start = #"ORDO-PARAMS 2\n"
        for i = start + 1, #good - #"end\n" do
            local c = good:byte(i)
            -- every byte of every header and of the data, changed: was loaded (a name, a value) or misread
            local bad = good:sub(1, i - 1) .. string.char(c == 48 and 49 or 48) .. good:sub(i + 1)
            spit(path, bad)
            local ok = pcall(ordo.load, path)
            assert(not ok, "a file changed at byte " .. i .. " loaded")
        end
        local flipped = good:gsub("(w float64 2 2 3 crc32=%x+\n)(.)", function(h, b) return h .. string.char(b:byte() + 1) end)
        assert.are_not.equal(good, flipped)
        spit(path, flipped)
        H.raises(function() ordo.load(path) end, "ordo.load", "tensor 'w' does not match its checksum", "damaged")
        spit(path, (good:gsub("u uint8 1 3 crc32=", "v uint8 1 3 crc32=")))
        H.raises(function() ordo.load(path) end, "ordo.load", "tensor 'v' does not match its checksum")
        spit(path, (good:gsub(" crc32=%x+\n", "\n", 1)))
        H.raises(function() ordo.load(path) end, "ordo.load", "bad header")
        -- files of the first format, without checksums, still load
        spit(path, "ORDO-PARAMS 1\na uint8 1 2\nxyb float32 0\n\0\0\128\63end\n")
        local old = ordo.load(path)
        assert.same({120, 121}, old.a:totable())
        assert.equals(1, old.b:item())
        os.remove(path)
    end)

    it("a state dict (m:state_dict(), opt:state_dict()) saves by its names and loads back into load_state_dict", function()
        local path = tmp()
        local nn, optim = ordo.nn, ordo.optim
        ordo.manual_seed(1)
        local function net() return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)) end
        local m = net()
        local opt = optim.Adam(m:parameters(), {lr = 0.01})
        local function step(model, o, x)
            o:zero_grad()
            model:forward(x):sum():backward()
            o:step()
        end
        for _ = 1, 3 do step(m, opt, ordo.randn(5, 3)) end
        -- was: "ordo.save: 1 is not a tensor (table)", the way torch.save(model.state_dict()) is written
        ordo.save(m:state_dict(), path)
        local sd = ordo.load(path)
        assert.is_true(ordo.is_tensor(sd["1.weight"]) and ordo.is_tensor(sd["3.bias"]))
        local m2 = net()
        m2:load_state_dict(sd)
        ordo.save(opt:state_dict(), path)
        local opt2 = optim.Adam(m2:parameters(), {lr = 0.01})
        opt2:load_state_dict(ordo.load(path)) -- (name = tensor, as ordo.load gives it)
        assert.equals(3, opt2.t)
        for _ = 1, 2 do
            local x = ordo.randn(5, 3)
            step(m, opt, x)
            step(m2, opt2, x)
        end
        local x = ordo.randn(2, 3)
        assert.same(m:forward(x):totable(), m2:forward(x):totable()) -- resumed to the bit
        -- lists of records that are not a state dict are saved as they are (version 3)
        for _, v in ipairs({{{name = "12", tensor = ordo.ones(1)}}, {{name = "a", tensor = 3}},
                            {{name = "a", tensor = ordo.ones(1)}, b = ordo.ones(1)}}) do
            ordo.save(v, path)
            local back = ordo.load(path)
            assert.equals(v[1].name, back[1].name)
            assert.equals(type(v[1].tensor), type(back[1].tensor))
        end
        H.raises(function() ordo.save({model = m}, path) end, "ordo.save", "value.model is a module",
                 "save its m:state_dict()")
        H.raises(function() ordo.save({opt = opt}, path) end, "ordo.save", "value.opt is optim.Adam",
                 "save its opt:state_dict()")
        H.raises(function() opt2:load_state_dict({a = 3}) end, "load_state_dict", "an entry a = number")
        os.remove(path)
    end)

    it("options: unknown keys, non-tables and bad devices raise as ordo.load's errors; ordo.save takes none", function()
        local path = tmp()
        ordo.save(ordo.ones(2), path)
        H.raises(function() ordo.load(path, {devce = ordo.cpu(1)}) end, "ordo.load", "unknown option 'devce'", "device")
        H.raises(function() ordo.load(path, "cpu:1") end, "ordo.load", "options must be a table", "string")
        H.raises(function() ordo.load(path, ordo.cpu(1)) end, "ordo.load", "options must be a table")
        H.raises(function() ordo.load(path, 3) end, "ordo.load", "options must be a table", "number")
        local err = H.raises(function() ordo.load(path, {device = "tpu"}) end, "ordo.load", "unknown device", "tpu")
        assert.is_nil(err:find("to:", 1, true))
        H.raises(function() ordo.load(path, {device = 1}) end, "ordo.load", "unknown device")
        err = H.raises(function() ordo.load(path, {device = "cpu:99"}) end, "ordo.load", "cpu:99", "0..63")
        assert.is_nil(err:find(":%d+:.*:%d+: ")) -- one position, not two
        if not ordo.cuda.is_available() then
            H.raises(function() ordo.load(path, {device = "gpu:0"}) end, "ordo.load", "no CUDA device")
        end
        -- the options are checked before the file is opened
        H.raises(function() ordo.load("/no/such/file", {devce = 1}) end, "ordo.load", "devce")
        assert.equals(ordo.cpu(1), ordo.load(path, {device = "cpu:1"}):device())
        assert.equals(ordo.cpu(0), ordo.load(path, {}):device())
        H.raises(function() ordo.save(ordo.ones(1), path, {device = "cpu"}) end, "ordo.save", "third argument")
        os.remove(path)
    end)
end)

-- ordo.save of nested values (version 3 of the file): a Torch-style one-file
-- checkpoint {epoch =, model = m:state_dict(), optimizer =, scheduler =}.
describe("ordo.save and ordo.load of nested values", function()
    local nn, optim = ordo.nn, ordo.optim
    local S = optim.lr_scheduler
    local ffi = require "ffi"

    -- the same bits: a tensor's values (NaN-free here) and shape
    local function same_tensor(a, b, what)
        assert(ordo.is_tensor(a) and ordo.is_tensor(b), what)
        assert.equals(a:dtype(), b:dtype(), what)
        assert.same(a:shape(), b:shape(), what)
        assert.same(a:totable(), b:totable(), what)
    end

    local function resume(make_opt, make_sched, step_sched)
        local path = tmp()
        ordo.manual_seed(11)
        local X, Y = ordo.randn({16, 4}), ordo.randn({16, 2})
        local function fresh()
            ordo.manual_seed(5)
            local m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
            local opt = make_opt(m:parameters())
            return m, opt, make_sched(opt)
        end
        local function step(m, opt, sched)
            opt:zero_grad()
            local loss = nn.functional.mse_loss(m:forward(X), Y)
            loss:backward()
            opt:step()
            step_sched(sched, loss:item())
        end
        local m, opt, sched = fresh()
        for _ = 1, 6 do step(m, opt, sched) end
        local m1, opt1, sched1 = fresh()
        for _ = 1, 3 do step(m1, opt1, sched1) end
        ordo.save({epoch = 3, model = m1:state_dict(), optimizer = opt1:state_dict(), scheduler = sched1:state_dict(),
                   note = "run 7"}, path)
        assert.equals("ORDO-PARAMS 3\n", slurp(path):sub(1, 14))
        local m2, opt2, sched2 = fresh()
        step(m2, opt2, sched2) -- (moved on: the load must set everything back)
        local ck = ordo.load(path)
        assert.equals(3, ck.epoch)
        assert.equals("run 7", ck.note)
        m2:load_state_dict(ck.model)
        opt2:load_state_dict(ck.optimizer)
        sched2:load_state_dict(ck.scheduler)
        for _ = 1, 3 do step(m2, opt2, sched2) end
        local a, b = m:state_dict(), m2:state_dict()
        assert.equals(#a, #b)
        for i = 1, #a do same_tensor(a[i].tensor, b[i].tensor, a[i].name) end
        a, b = opt:state_dict(), opt2:state_dict()
        assert.equals(#a, #b)
        for i = 1, #a do
            assert.equals(a[i].name, b[i].name)
            same_tensor(a[i].tensor, b[i].tensor, a[i].name)
        end
        assert.same(sched:state_dict(), sched2:state_dict())
        assert.equals(opt.lr, opt2.lr)
        os.remove(path)
    end

    it("a checkpoint of model, optimiser and scheduler in one file resumes training bit for bit", function()
        resume(function(ps) return optim.Adam(ps, {lr = 0.05, weight_decay = 0.01}) end,
               function(o) return S.StepLR(o, {step_size = 2, gamma = 0.5}) end,
               function(s) s:step() end)
        resume(function(ps) return optim.SGD(ps, {lr = 0.1, momentum = 0.9, nesterov = true}) end,
               function(o) return S.ReduceLROnPlateau(o, {patience = 0, factor = 0.5}) end,
               function(s, loss) s:step(loss) end)
        resume(function(ps) return optim.RMSprop(ps, {lr = 0.01, momentum = 0.5}) end,
               function(o) return S.MultiStepLR(o, {milestones = {2, 4}}) end,
               function(s) s:step() end)
    end)

    it("numbers (inf, NaN, -0.0, 2^53), any bytes, booleans, int64 cdata and nested tables round-trip exactly", function()
        local path = tmp()
        local bytes = {}
        for i = 0, 255 do bytes[#bytes + 1] = string.char(i) end
        bytes = table.concat(bytes)
        local t = ordo.arange(6, "float64"):view(2, 3)
        local v = {nums = {1 / 0, -1 / 0, 0 / 0, -0.0, 2 ^ 53, 2 ^ 53 - 1, -(2 ^ 53), 0.1, 5e-324, 1.7976931348623157e308},
                   s = bytes, empty = "", yes = true, no = false,
                   i = ffi.new("int64_t", -9007199254740993LL), u = ffi.new("uint64_t", 18446744073709551615ULL),
                   [1] = "one", ["1"] = "the string 1", [2 ^ 53] = {}, ["a b\n"] = {{{x = t}}},
                   again = t, list = {t, ordo.tensor({1, 2}, "uint8")}}
        ordo.save(v, path)
        local w = ordo.load(path)
        for i = 1, 10 do
            local a, b = v.nums[i], w.nums[i]
            if a ~= a then assert.is_true(b ~= b) else assert.equals(a, b) end
        end
        assert.equals(-1 / 0, 1 / w.nums[4]) -- -0.0 kept
        assert.equals(bytes, w.s)
        assert.equals("", w.empty)
        assert.is_true(w.yes)
        assert.is_false(w.no)
        assert.is_true(ffi.istype("int64_t", w.i) and w.i == -9007199254740993LL)
        assert.is_true(ffi.istype("uint64_t", w.u) and w.u == 18446744073709551615ULL)
        assert.equals("one", w[1])
        assert.equals("the string 1", w["1"])
        assert.same({}, w[2 ^ 53])
        same_tensor(t, w["a b\n"][1][1].x)
        assert.is_true(rawequal(w.again, w["a b\n"][1][1].x)) -- one tensor in two places stays one
        -- in a flat table of tensors too (tied weights): one tensor, not two copies
        local tied = ordo.arange(4)
        for _, x in ipairs({{a = tied, b = tied}, {tied, tied}, {a = tied, [3] = tied, c = ordo.ones(2)}}) do
            ordo.save(x, path)
            local y = ordo.load(path)
            local first, second = y.a or y[1], y.b or y[2] or y[3]
            same_tensor(tied, first)
            assert.is_true(rawequal(first, second))
        end
        -- such a file (version 3, for the tie) is still a set of named tensors to m:load
        local lin = ordo.nn.Linear(2, 2)
        local tw = ordo.ones(2, 2)
        ordo.save({weight = tw, bias = ordo.zeros(2), extra = tw}, path)
        local f = io.open(path, "rb")
        assert.equals("ORDO-PARAMS 3", f:read("*l"))
        f:close()
        local ok, err = pcall(function() lin:load(path) end)
        assert.is_false(ok) -- (strict: extra is no name of the module's, and says so, not "a nested value")
        assert.matches("extra", tostring(err))
        local two = ordo.nn.Sequential(ordo.nn.Linear(2, 2), ordo.nn.Linear(2, 2))
        ordo.save({["1.weight"] = tw, ["2.weight"] = tw, ["1.bias"] = ordo.zeros(2), ["2.bias"] = ordo.ones(2)}, path)
        two:load(path)
        assert.same({{1, 1}, {1, 1}}, two:get(2).weight:totable())
        assert.same({1, 1}, two:get(2).bias:totable())
        -- a value with more than tensors in it is still refused as nested
        ordo.save({["1.weight"] = tw, ["2.weight"] = tw, note = true}, path)
        H.raises(function() two:load(path) end, "nested value")
        same_tensor(v.list[2], w.list[2])
        -- a lone value, and the device option
        for _, x in ipairs({42, "str", true, ffi.new("int64_t", 7)}) do
            ordo.save(x, path)
            assert.equals(x, ordo.load(path))
        end
        ordo.save({a = {t}}, path)
        assert.equals(ordo.cpu(1), ordo.load(path, {device = "cpu:1"}).a[1]:device())
        -- what version 2 holds is still written as version 2 (older ordo reads it)
        ordo.save({w = t, [3] = t:clone()}, path)
        assert.equals("ORDO-PARAMS 2\n", slurp(path):sub(1, 14))
        ordo.save({}, path)
        assert.equals("ORDO-PARAMS 2\n", slurp(path):sub(1, 14))
        assert.same({}, ordo.load(path))
        os.remove(path)
    end)

    it("what a file cannot hold is refused naming where it is, before anything is written", function()
        local path = tmp()
        ordo.save({a = 1}, path)
        local before = slurp(path)
        local m = nn.Linear(2, 2)
        local opt = optim.SGD(m:parameters(), {lr = 0.1})
        local cyc = {}
        cyc.a = {b = {cyc}}
        local deep = {}
        local d = deep
        for _ = 1, 150 do
            d.x = {}
            d = d.x
        end
        local cases = {
            {{optimizer = {state = {[3] = print}}}, "ordo.save: value.optimizer.state[3] is a function"},
            {{f = io.stdout}, "value.f is a userdata"},
            {{c = coroutine.create(print)}, "value.c is a thread"},
            {{x = ffi.new("int32_t", 3)}, "value.x is a cdata (ctype<int>)"},
            {cyc, "value.a.b[1] is value again (a cycle"},
            {{m = m}, "value.m is a module", "m:state_dict()"},
            {{o = opt}, "value.o is optim.SGD", "opt:state_dict()"},
            {{s = setmetatable({}, {})}, "value.s is a table (a table with a metatable"},
            {{a = {[1.5] = 1}}, "value.a has the key 1.5", "integers 1..2^53"},
            {{a = {[0] = 1}}, "value.a has the key 0"},
            {{a = {[-1 / 0] = 1}}, "value.a has the key -inf"},
            {{a = {[2 ^ 53 + 2] = 1}}, "value.a has the key 9007199254740994"},
            {{[{}] = 1}, "value has a table key"},
            {{a = {[true] = 1}}, "value.a has a boolean key"},
            {deep, "nested deeper than 100 tables"},
        }
        for _, c in ipairs(cases) do
            H.raises(function() ordo.save(c[1], path) end, unpack(c, 2))
            assert.equals(before, slurp(path))
            assert.is_nil(io.open(path .. ".tmp", "rb"))
        end
        os.remove(path)
    end)

    it("files of version 2 written before nested values load exactly as before", function()
        -- written by the version 2 writer (spec/fixtures, made with ordo.save at 393b949)
        local lone = ordo.load("spec/fixtures/params_v2_lone.ordo")
        assert.equals("float64", lone:dtype())
        assert.same({2, 2}, lone:shape())
        local g = lone:totable()
        assert.equals(1.5, g[1][1])
        assert.equals(-1 / 0, 1 / g[1][2])
        assert.equals(1 / 0, g[2][1])
        assert.is_true(g[2][2] ~= g[2][2])
        local t = ordo.load("spec/fixtures/params_v2_table.ordo")
        local keys = {}
        for k in pairs(t) do keys[#keys + 1] = tostring(k) end
        table.sort(keys)
        assert.same({"2", "bytes", "i", "layer.1.bias", "w"}, keys)
        same_tensor(ordo.tensor({0.25, -2, 3e-39}, "float32"), t.w)
        same_tensor(ordo.tensor({-9007199254740992, 7}, "int64"):add(ordo.tensor({-1, 0}, "int64")), t[2])
        assert.is_true(ordo.equal(ordo.tensor({-9007199254740992, 7}, "int64"):add(ordo.tensor({-1, 0}, "int64")), t[2]))
        assert.is_false(ordo.equal(ordo.tensor({-9007199254740992, 7}, "int64"), t[2])) -- (equal tells them apart)
        same_tensor(ordo.tensor({0, 255, 10}, "uint8"), t.bytes)
        same_tensor(ordo.tensor(-5, "int32"), t.i)
        assert.equals("float32", t["layer.1.bias"]:dtype())
        assert.same({0, 3}, t["layer.1.bias"]:shape())
        -- the same values saved again give the same bytes (the writer of flat tables is unchanged)
        local path = tmp()
        ordo.save(t, path)
        assert.equals(slurp("spec/fixtures/params_v2_table.ordo"), slurp(path))
        ordo.save(lone, path)
        assert.equals(slurp("spec/fixtures/params_v2_lone.ordo"), slurp(path))
        os.remove(path)
    end)

    it("a damaged or truncated checkpoint raises naming the file, never half a table", function()
        local path, bad = tmp(), tmp()
        ordo.save({epoch = 3, a = {1, 2, {x = "hi\n", y = ordo.tensor({1, 2, 3})}}, t = ordo.tensor({{1}}, "int64"),
                   b = true, i = ffi.new("int64_t", 5)}, path)
        local good = slurp(path)
        local function refused(s)
            spit(bad, s)
            local ok, err = pcall(ordo.load, bad)
            if ok then return false end
            assert(tostring(err):find("ordo.load: ", 1, true) and tostring(err):find(bad, 1, true), tostring(err))
            return true
        end
        for len = 0, #good - 2 do assert(refused(good:sub(1, len)), "truncated to " .. len) end
        local crc_hex = {} -- (a checksum's hex digits read the same in capitals)
        for a, b in good:gmatch("crc32=()%x+()") do for i = a, b - 1 do crc_hex[i] = true end end
        for i = 1, #good - 1 do
            local c = string.char(bit.bxor(good:byte(i), 1))
            assert(refused(good:sub(1, i - 1) .. c .. good:sub(i + 1)), "byte " .. i)
            if not crc_hex[i] then
                c = string.char(bit.bxor(good:byte(i), 32))
                assert(refused(good:sub(1, i - 1) .. c .. good:sub(i + 1)), "byte " .. i)
            end
        end
        -- structures with a good checksum that no save writes (a crafted file)
        local C = require("ordo.cdef").C
        local function v3(tree, n)
            local head = string.format("tree %d %d", #tree, n or 0)
            return string.format("ORDO-PARAMS 3\n%s crc32=%08x\n", head, C.ordo_crc32(C.ordo_crc32(0, head, #head),
                                 tree, #tree)) .. tree .. "end\n"
        end
        spit(bad, v3("t1:s1:an4000000000000000"))
        assert.same({a = 2}, ordo.load(bad)) -- (the helper writes good files)
        local nan = "n7ff8000000000000"
        for _, c in ipairs({
            {"t1:s1:aQ", "a bad tag"}, {"t1:s1:a", "its end too early"}, {"t2:s1:aT", "its end too early"},
            {"t2:s1:aTs1:aF", "the key \"a\" twice"}, {"t1:" .. nan .. "T", "a number key nan"},
            {"t1:n3ff8000000000000T", "a number key 1.5"}, {"t1:TT", "a key that is not a string"},
            {"t1:x1:T", "a key that is not a string"}, {"t1:s1:ax1:", "tensor 1 of 0"},
            {"s9:abc", "past its end"}, {"TT", "1 bytes after the value"}, {"n12", "a bad number"},
            {string.rep("t1:s1:a", 101) .. "T", "nested deeper than 100"}, {"t99999999999999999:", "a bad count"},
        }) do
            spit(bad, v3(c[1]))
            H.raises(function() ordo.load(bad) end, "ordo.load: " .. bad, "structure is damaged", c[2])
        end
        spit(bad, v3("x1:", 1))
        H.raises(function() ordo.load(bad) end, "ordo.load: " .. bad, "holds 0 tensors, its structure names 1")
        -- m:load, opt:load and sched:load read flat files: a checkpoint is said to be one
        local m = nn.Linear(2, 2)
        for _, f in ipairs({function() m:load(path) end,
                            function() optim.SGD(m:parameters(), {lr = 0.1}):load(path) end}) do
            H.raises(f, path, "a checkpoint written by ordo.save", "ordo.load(path)")
        end
        os.remove(path)
        os.remove(bad)
    end)
end)

