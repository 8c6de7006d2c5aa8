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
end)
