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
        H.raises(function() ordo.save({a = ordo.ones(1), b = "x"}, path) end, "ordo.save", "b", "string")
        H.raises(function() ordo.save({["two words"] = ordo.ones(1)}, path) end, "ordo.save", "white space")
        H.raises(function() ordo.save({[0.5] = ordo.ones(1)}, path) end, "ordo.save", "keys")
        H.raises(function() ordo.save("x", path) end, "ordo.save", "string")
        H.raises(function() ordo.save(ordo.ones(1), 3) end, "ordo.save", "file path")
        H.raises(function() ordo.save(ordo.ones(1), "/no/such/dir/file") end, "ordo.save", "cannot open")
        assert.equals(before, slurp(path))
        assert.is_nil(io.open(path .. ".tmp", "rb"))
        os.remove(path)
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
        -- 1 and "1" are both written as the name 1, which loads as the number 1
        H.raises(function() ordo.save({[1] = a, ["1"] = b}, path) end, "ordo.save", "1", "both")
        H.raises(function() ordo.save({[2 ^ 53] = a, ["9007199254740992"] = b}, path) end, "ordo.save", "both")
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

    it("the key '.' is refused (it marks a lone tensor); old files with '.' among other names still load", function()
        local path = tmp()
        local t = ordo.arange(3)
        H.raises(function() ordo.save({["."] = t}, path) end, "ordo.save", '"."', "reserved")
        H.raises(function() ordo.save({["."] = t, a = t}, path) end, "ordo.save", '"."', "reserved")
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
