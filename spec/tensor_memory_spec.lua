-- Memory: storages live outside the Lua heap; the Lua GC is told about them
-- (src/storage.c, ordo_storage_gc_due) so loops that drop big tensors run in
-- bounded memory, and the bytes go only after the ops that use them.
local ordo = require "ordo"

local page = 4096
local function rss_mb()
    local f = io.open("/proc/self/statm")
    if not f then return 0 end
    local line = f:read("*l")
    f:close()
    local resident = tonumber(line:match("^%d+%s+(%d+)"))
    return resident * page / 2 ^ 20
end

describe("storage memory", function()
    it("100,000 tensors of 1 MB created and dropped run in bounded memory", function()
        ordo.engine.wait_for_all()
        collectgarbage()
        local rss0 = rss_mb()
        local live_max, rss_max = 0, 0
        for i = 1, 100000 do
            local t = ordo.empty({262144}) -- 1 MiB of float32
            t:narrow(1, 1 + (i % 1000) * 256, 256):fill_(i) -- touch it through an op
            if i % 1000 == 0 then
                live_max = math.max(live_max, ordo.memory.live_bytes())
                rss_max = math.max(rss_max, rss_mb())
            end
        end
        ordo.engine.wait_for_all()
        assert.is_true(live_max < 400 * 2 ^ 20, ("live storage reached %.0f MB"):format(live_max / 2 ^ 20))
        assert.is_true(rss_max - rss0 < 400, ("RSS grew by %.0f MB"):format(rss_max - rss0))
    end)

    it("fully written 1 MB tensors and temporaries of ops stay bounded too", function()
        ordo.engine.wait_for_all()
        collectgarbage()
        local rss0 = rss_mb()
        local rss_max = 0
        local a = ordo.ones({262144})
        for i = 1, 3000 do
            local b = ordo.ones({262144})
            local c = (a + b) * 0.5
            if i % 100 == 0 then rss_max = math.max(rss_max, rss_mb()) end
            a = c
        end
        assert.equals(1, a:narrow(1, 7, 1):item())
        assert.is_true(rss_max - rss0 < 400, ("RSS grew by %.0f MB"):format(rss_max - rss0))
    end)

    it("a dropped tensor's bytes are freed only after its pending ops", function()
        local keep = ordo.zeros({4})
        for _ = 1, 200 do
            local tmp = ordo.ones({4096})
            keep:add_(tmp:narrow(1, 1, 4))
            tmp = nil
            collectgarbage() -- the storage's last reference goes while add_ may be pending
        end
        assert.same({200, 200, 200, 200}, keep:totable())
    end)

    it("memory counters fall back after the tensors are gone", function()
        ordo.engine.wait_for_all()
        collectgarbage()
        ordo.engine.wait_for_all()
        local before = ordo.memory.live_bytes()
        do
            local ts = {}
            for i = 1, 10 do ts[i] = ordo.zeros({1024, 256}) end
            assert.is_true(ordo.memory.live_bytes() >= before + 10 * 2 ^ 20)
        end
        collectgarbage()
        collectgarbage()
        ordo.engine.wait_for_all()
        assert.is_true(ordo.memory.live_bytes() <= before + 2 ^ 20)
    end)

    it("set_gc_threshold takes a whole number of bytes >= 1, and refuses 0, fractions and non-numbers", function()
        for _, bad in ipairs({0, -1, 1.5, 0 / 0, 2 ^ 60}) do
            local ok, err = pcall(ordo.memory.set_gc_threshold, bad)
            assert.is_false(ok)
            assert.matches("memory.set_gc_threshold: expected a number of bytes, an integer from 1 to 2^53, got "
                           .. tostring(bad), err, 1, true)
        end
        for _, bad in ipairs({"64", false}) do
            local ok, err = pcall(ordo.memory.set_gc_threshold, bad)
            assert.is_false(ok)
            assert.matches("memory.set_gc_threshold: expected a number of bytes", err, 1, true)
        end
        ordo.memory.set_gc_threshold(64 * 2 ^ 20) -- the default
    end)
    it("the mean of uint8 and int32 tensors reads them as they are: no float32 copy", function()
        local n = 2 ^ 22 -- a float32 copy would be 16 MiB
        for _, dt in ipairs({"uint8", "int32"}) do
            local x = ordo.full({1}, 3, dt):expand({n})
            local y = ordo.tensor({{1, 2, 3}, {250, 5, 6}}, dt)
            ordo.engine.wait_for_all()
            local before = ordo.memory.total_bytes()
            local m = x:mean()
            local allocated = ordo.memory.total_bytes() - before
            assert.is_true(allocated < 2 ^ 20, ("%s mean allocated %d bytes"):format(dt, allocated))
            assert.equal("float32", m:dtype())
            assert.equal(3, m:item())
            assert.same({125.5, 3.5, 4.5}, y:mean(1):totable())
            assert.same({{2}, {87}}, y:mean(2, true):totable())
            assert.equal(44.5, y:mean():item())
        end
        assert.is_true(ordo.zeros({0}, "uint8"):mean():item() ~= ordo.zeros({0}, "uint8"):mean():item()) -- NaN
    end)

    it("an integer sum reads its input as it is: no int64 copy, even of an expanded view", function()
        local n = 2 ^ 22 -- 4 Mi elements: a copy would be 32 MiB
        for _, dt in ipairs({"uint8", "int32", "int64"}) do
            local x = ordo.full({1}, 3, dt):expand({n})
            local y = ordo.full({64, 1}, 2, dt):expand({64, 65536}):t() -- strided
            ordo.engine.wait_for_all()
            local before = ordo.memory.total_bytes()
            local s, s1, s2 = x:sum(), y:sum(2), y:sum(1, true)
            local allocated = ordo.memory.total_bytes() - before
            assert.is_true(allocated < 2 ^ 20, ("%s sum allocated %d bytes"):format(dt, allocated))
            assert.equal("int64", s:dtype())
            assert.equal(3 * n, s:item())
            assert.same({65536}, s1:shape())
            assert.equal(128, s1[65536])
            assert.same({1, 64}, s2:shape())
            assert.equal("int64", s2:dtype())
            assert.equal(131072, s2[{1, 64}])
        end
    end)
end)

-- Host memory under a limit (ulimit -v, a container's, strict overcommit):
-- an allocation the system refuses first frees what it can - the freed
-- blocks the host cache keeps, tensors Lua no longer references - and asks
-- once more, so the cache and the GC's pacing never make a program fail
-- that would run without them.
describe("host memory: out of memory", function()
    local function sanitized()
        local preload = os.getenv("LD_PRELOAD") or ""
        return preload:find("asan") or preload:find("tsan") or preload:find("valgrind")
    end

    it("cached_bytes counts the freed blocks kept for reuse; empty_cache gives them back", function()
        ordo.engine.wait_for_all()
        collectgarbage()
        collectgarbage()
        ordo.engine.wait_for_all()
        ordo.memory.empty_cache()
        assert.equal(0, ordo.memory.cached_bytes())
        do local t = ordo.empty({1024, 1024}) end -- 4 MiB
        collectgarbage()
        collectgarbage()
        ordo.engine.wait_for_all()
        if os.getenv("ORDO_HOST_CACHE_MB") == "0" then
            assert.equal(0, ordo.memory.cached_bytes()) -- the cache is off
        else
            assert.is_true(ordo.memory.cached_bytes() >= 4 * 2 ^ 20)
        end
        ordo.memory.empty_cache()
        assert.equal(0, ordo.memory.cached_bytes())
    end)

    -- In a child under `ulimit -v`: every byte of address space counts, so
    -- the tensors need not be touched (no real memory is used).  The
    -- requests leave 96 MiB of the limit unused; what they need beyond it
    -- (192 MiB) is held by the cache, then by garbage: counts of bytes,
    -- not timings.
    it("a refused host allocation empties the cache and collects garbage, then retries", function()
        if sanitized() then
            pending("a sanitizer's shadow memory does not fit under ulimit -v")
            return
        end
        local dir = os.tmpname()
        os.remove(dir)
        assert(os.execute("mkdir -p " .. dir))
        local script = dir .. "/child.lua"
        local f = assert(io.open(script, "w"))
        f:write([=[
local ordo = require "ordo"
local MiB = 2 ^ 20
local function vm_bytes()
    for l in io.lines("/proc/self/status") do
        local kb = l:match("^VmSize:%s+(%d+)")
        if kb then return tonumber(kb) * 1024 end
    end
end
local function limit_bytes()
    for l in io.lines("/proc/self/limits") do
        local b = l:match("^Max address space%s+(%d+)")
        if b then return tonumber(b) end
    end
end
local function settle()
    collectgarbage() collectgarbage()
    ordo.engine.wait_for_all()
end
for _ = 1, 20 do (ordo.randn({1000}) + 1):sum():item() end -- the workers are up
settle()
io.write("started\n")
ordo.memory.empty_cache()
local out = {}
-- 1. three freed 64 MiB blocks in the cache
do
    local ts = {}
    for i = 1, 3 do ts[i] = ordo.empty({16 * MiB}) end
end
settle()
out[#out + 1] = "cached " .. math.floor(ordo.memory.cached_bytes() / MiB)
local free = limit_bytes() - vm_bytes()
local ok, t = pcall(ordo.empty, {math.floor((free - 96 * MiB) / 4)})
out[#out + 1] = "after the cache " .. tostring(ok) .. (ok and "" or " " .. tostring(t))
t = nil
settle()
ordo.memory.empty_cache()
-- 2. three 64 MiB tensors dropped, not yet collected
ordo.memory.set_gc_threshold(2 ^ 50)
do
    local ts = {}
    for i = 1, 3 do ts[i] = ordo.empty({16 * MiB}) end
end
free = limit_bytes() - vm_bytes() + 192 * MiB
ok, t = pcall(ordo.empty, {math.floor((free - 96 * MiB) / 4)})
out[#out + 1] = "after garbage " .. tostring(ok) .. (ok and "" or " " .. tostring(t))
t = nil
settle()
-- 3. a request that cannot fit: the error names the op, the size and what was tried
local n = math.floor((limit_bytes() - vm_bytes() + 512 * MiB) / 4)
ok, t = pcall(function() return ordo.zeros({n}) + 1 end)
out[#out + 1] = "too big " .. tostring(ok) .. " " .. tostring(t)
ok, t = pcall(function() return ordo.ones({n}) end)
out[#out + 1] = "too big " .. tostring(ok) .. " " .. tostring(t)
out[#out + 1] = "still usable " .. (ordo.ones({3}) + 1):sum():item()
io.write(table.concat(out, "\n"), "\n")
]=])
        f:close()
        -- (no CUDA device in the child: a CUDA context reserves more
        -- address space than the limit leaves)
        local cmd = ("ulimit -v 4194304 && CUDA_VISIBLE_DEVICES= timeout 120 luajit -e %q %s 2>&1"):format(
            "package.path = [[" .. package.path .. "]]", script)
        local p = assert(io.popen("sh -c '" .. cmd:gsub("'", "'\\''") .. "'"))
        local text = p:read("*a")
        p:close()
        os.remove(script)
        os.remove(dir)
        if not text:find("started\n", 1, true) then
            pending("the library does not start under ulimit -v 4 GiB here: " .. text:sub(1, 300))
            return
        end
        if os.getenv("ORDO_HOST_CACHE_MB") ~= "0" then
            assert.truthy(text:find("cached 192\n", 1, true), text)
        end
        assert.truthy(text:find("after the cache true\n", 1, true), text)
        assert.truthy(text:find("after garbage true\n", 1, true), text)
        local ones = "ones: out of memory allocating %d+ bytes %(after freeing unreferenced tensors and emptying the allocator's cache%)"
        assert.truthy(text:find("too big false [^\n]*zeros: out of memory allocating %d+ bytes %(after freeing"), text)
        assert.truthy(text:find("too big false [^\n]*" .. ones), text)
        assert.truthy(text:find("still usable 6\n", 1, true), text)
    end)
end)
