-- ordo.engine and ordo.profiler from Lua.
local ordo = require "ordo"
local H = require "support.helpers"

describe("ordo.engine", function()
    it("tells its kind and thread counts", function()
        local kind = ordo.engine.kind()
        local want = os.getenv("ORDO_ENGINE_TYPE")
        if want and want ~= "" then assert.equals(want, kind) else assert.equals("perdevice", kind) end
        local cfg = ordo.engine.config()
        assert.is_true(cfg.cpu_workers >= 1)
        assert.equals(cfg.cpu_workers, ordo.engine.cpu_workers())
        assert.is_true(cfg.max_inflight > 0)
        assert.is_number(ordo.engine.pending())
        assert.truthy(tostring(ordo.engine.default()):find("ordo.Engine(" .. kind, 1, true))
    end)

    it("variables: new_variable, wait_for_var, wait_to_write, version", function()
        local v = ordo.engine.new_variable()
        assert.equals(0, v:version())
        ordo.engine.wait_for_var(v)
        ordo.engine.wait_to_write(v)
        local t = ordo.zeros({3})
        t:add_(1)
        ordo.engine.wait_for_var(t)
        ordo.engine.wait_to_write(t)
        ordo.engine.wait_for_all()
        assert.same({1, 1, 1}, t:totable())
    end)

    it("has_kernel and push of names no device has a kernel for use up none of the 512 kernel ids", function()
        -- they were interned: 600 such names filled the table for good, and
        -- no kernel not yet pushed could be pushed after them
        local ffi = require "ffi"
        local C = require("ordo.cdef").C
        local c = ordo.empty({3})
        for i = 1, 600 do
            assert.is_false(ordo.engine.has_kernel("no_such_kernel_" .. i))
            local ok, err = pcall(ordo.engine.push, "no_such_kernel_b" .. i, {}, {c})
            assert.is_false(ok)
            assert.truthy(tostring(err):find("no kernel 'no_such_kernel_b" .. i .. "' registered", 1, true), err)
        end
        local kid = C.ordo_tensor_kernel_id("capi_spec_fresh_name")
        assert.is_true(kid >= 0, kid >= 0 or ffi.string(C.ordo_tensor_error()))
    end)

    it("pushes a registered kernel by name", function()
        assert.is_true(ordo.engine.has_kernel("add"))
        assert.is_false(ordo.engine.has_kernel("no_such_kernel"))
        local a, b, c = ordo.tensor({1, 2, 3}), ordo.tensor({10, 20, 30}), ordo.empty({3})
        assert.equals(c, ordo.engine.push("add", {a, b}, {c}))
        assert.same({11, 22, 33}, c:totable())
        ordo.engine.push("fill", {}, {c}, {4})
        assert.same({4, 4, 4}, c:totable())
        ordo.engine.push("mul", {ordo.tensor({2}), a}, {c}, nil, nil, {broadcast = true})
        assert.same({2, 4, 6}, c:totable())
        local s = ordo.empty({1})
        ordo.engine.push("sum", {a}, {s}, nil, {-1})
        assert.equals(6, s:item())
    end)

    it("a kernel that fails at run time fails the wait on its output", function()
        local a = ordo.tensor({1, 2}, {dtype = "int64"})
        local z = ordo.zeros({2}, {dtype = "int64"})
        local c = ordo.empty({2}, {dtype = "int64"})
        ordo.engine.push("div", {a, z}, {c})
        H.raises(function() ordo.engine.wait_for_var(c) end, "div")
        ordo.engine.wait_for_var(c)
        -- a NaN in a kernel's message reads nan, not -nan (Lua's 0/0 has the sign bit set)
        local i = ordo.empty({2}, {dtype = "int32"})
        ordo.engine.push("fill", {}, {i}, {0 / 0})
        local ok, err = pcall(ordo.engine.wait_for_var, i)
        assert.is_false(ok)
        assert.truthy(tostring(err):find("fill: value nan does not fit in int32", 1, true), err)
        local r = ordo.empty({2})
        ordo.engine.push("arange", {}, {r}, {0 / 0, 1})
        ok, err = pcall(ordo.engine.wait_for_var, r)
        assert.is_false(ok)
        assert.truthy(tostring(err):find("arange: start nan, step 1", 1, true), err)
    end)

    it("push: opts and iparams are checked at the call, not cut or ignored", function()
        local a, b, c = ordo.tensor({1, 2, 3}), ordo.tensor({10, 20, 30}), ordo.empty({3})
        H.raises(function() ordo.engine.push("add", {a, b}, {c}, nil, nil, 5) end,
                 "push: opts must be a table ({broadcast = true}), got number")
        H.raises(function() ordo.engine.push("add", {a, b}, {c}, nil, nil, {broadcst = true}) end,
                 "push: unknown option 'broadcst' (expected broadcast)")
        -- iparams go to the kernel as int64_t: -1.5 was taken as -1 (a sum
        -- over the last dim), 2^70 as whatever the conversion gave
        local s = ordo.empty({1})
        for _, bad in ipairs({-1.5, 2^70, 0/0, 1/0}) do
            H.raises(function() ordo.engine.push("sum", {a}, {s}, nil, {bad}) end,
                     "push: iparams[1] must be an integer from -2^53 to 2^53, got " .. tostring(bad))
        end
        ordo.engine.push("sum", {a}, {s}, nil, {-1})
        assert.equals(6, s:item())
        ordo.engine.push("fill", {}, {c}, {0 / 0}) -- scalars are any number
        assert.is_true(c:totable()[1] ~= c:totable()[1])
    end)

    it("a closed engine's handle refuses push, and its vars refuse to be read (the engine may be freed)", function()
        local e = ordo.engine.new({cpu_workers = 1})
        local t = ordo.zeros({2}, {engine = e})
        local v = e:new_variable()
        e:shell("true", {writes = {v}})
        e:wait_for_var(v)
        assert.equals(1, v:version())
        e:close()
        -- push went on through the closed handle (tensors keep the engine)
        H.raises(function() e:push("fill", {}, {t}, {2}) end, "push: the engine was closed")
        -- each names itself (kind() said "engine:config: ...")
        for _, m in ipairs({"config", "kind", "cpu_workers", "gpu_workers", "pending"}) do
            H.raises(function() return e[m](e) end, "engine:" .. m .. ": the engine was closed")
        end
        assert.same({0, 0}, t:totable())
        -- the engine without tensors is destroyed at close, its vars with
        -- it: version() read freed memory (0, or garbage)
        local e2 = ordo.engine.new({cpu_workers = 1})
        local v2 = e2:new_variable()
        e2:shell("true", {writes = {v2}})
        e2:wait_for_var(v2)
        e2:close()
        H.raises(function() return v2:version() end, "var:version: the engine was closed")
        assert.equals("ordo.Var(engine closed)", tostring(v2))
        H.raises(function() ordo.engine.wait_for_var(v2) end, "wait_for_var: the engine was closed")
    end)

    it("an engine's methods called with a dot say so; has_kernel is a method too and checks its arguments", function()
        local e = ordo.engine.new({cpu_workers = 1})
        for _, m in ipairs({"kind", "config", "cpu_workers", "gpu_workers", "pending", "wait_for_all",
                            "new_variable", "close"}) do
            H.raises(function() e[m]() end, "expected an engine as self, got nil (call it as e:" .. m .. "(...))")
        end
        H.raises(function() e.wait_for_var(ordo.zeros({1})) end,
                 "wait_for_var: expected an engine as self, got ordo.Tensor (call it as e:wait_for_var(...))")
        H.raises(function() e.push("add", {}, {}) end, "push: expected an engine as self")
        H.raises(function() e.has_kernel("add") end, "has_kernel: expected an engine as self")
        assert.is_true(e:has_kernel("add"))
        assert.is_false(e:has_kernel("no_such_kernel"))
        assert.equals(ordo.engine.has_kernel("add", "gpu"), e:has_kernel("add", "gpu"))
        H.raises(function() ordo.engine.has_kernel(nil) end, "has_kernel: expected a kernel name, got nil")
        H.raises(function() e:has_kernel("add", "tpu") end, 'has_kernel: device must be "cpu" or "gpu", got "tpu"')
        assert.equals("pooled", ordo.engine.new({kind = "pooled", cpu_workers = 1}):kind())
        e:close()
    end)

    it("settings: bulk_op_max_ns and push_inline_after take negative values; config() reads them back", function()
        local e = ordo.engine.new({cpu_workers = 1, bulk_op_max_ns = -1, push_inline_after = -1, max_inflight = 100})
        local c = e:config()
        assert.equals(-1, c.bulk_op_max_ns)
        assert.equals(-1, c.push_inline_after)
        assert.equals(100, c.max_inflight)
        e:close()
        assert.equals(500, ordo.engine.new({cpu_workers = 1}):config().bulk_op_max_ns) -- the default
    end)

    it("settings: run_now_max_elements round-trips; negative turns it off; 1024 by default", function()
        local e = ordo.engine.new({cpu_workers = 1, run_now_max_elements = -1})
        assert.equals(-1, e:config().run_now_max_elements)
        e:close()
        e = ordo.engine.new({cpu_workers = 1, run_now_max_elements = 64})
        assert.equals(64, e:config().run_now_max_elements)
        e:close()
        assert.equals(1024, ordo.engine.new({cpu_workers = 1}):config().run_now_max_elements)
    end)

    it("a bad ORDO_* setting fails engine.new with a message naming it, its value and the range", function()
        local C = require("ordo.cdef").C
        for name, case in pairs({ORDO_SPIN_US = {"-1", "expected an integer from 0 to 1000000"},
                                 ORDO_ENGINE_TYPE = {"bogus", "expected naive, pooled or perdevice"},
                                 ORDO_MAX_INFLIGHT = {"1", "expected an integer from 16 to"}}) do
            local saved = os.getenv(name)
            C.setenv(name, case[1], 1)
            local ok, err = pcall(ordo.engine.new, {cpu_workers = 1})
            C.setenv(name, saved or "", 1) -- empty is unset
            assert.is_false(ok, name)
            assert.truthy(tostring(err):find(name .. "=" .. case[1] .. ": " .. case[2], 1, true), err)
        end
        -- a field given in the settings is not read from the environment
        local saved = os.getenv("ORDO_SPIN_US")
        C.setenv("ORDO_SPIN_US", "abc", 1)
        local ok, e = pcall(ordo.engine.new, {cpu_workers = 1, spin_us = 5})
        C.setenv("ORDO_SPIN_US", saved or "", 1)
        assert.is_true(ok, e)
        e:close()
    end)

    it("more engines: naive, pooled, perdevice; tensors follow their engine", function()
        for _, kind in ipairs({"naive", "pooled", "perdevice"}) do
            local e = ordo.engine.new({kind = kind, cpu_workers = 2})
            assert.equals(kind, e:kind())
            assert.equals(2, e:cpu_workers())
            local a = ordo.ones({4, 4}, {engine = e})
            local b = (a + a):matmul(a):sum(1)
            assert.same({32, 32, 32, 32}, b:totable())
            local v = e:new_variable()
            e:wait_for_var(v)
            e:push("fill", {}, {a}, {3})
            e:wait_for_all()
            assert.same({3, 3, 3, 3}, a:select(1, 2):totable())
            -- tables and numbers given to ops become tensors on the same engine
            local m = ordo.zeros({2, 2}, {engine = e}):copy_({{1, 2}, {3, 4}})
            assert.same({{3, 4}}, m:index_select(1, {2}):totable())
            assert.same({{2, 1}, {4, 3}}, m:gather(2, ordo.tensor({{2, 1}, {2, 1}}, {dtype = "int64", engine = e})):totable())
            assert.same({{0, 2}, {3, 4}}, ordo.where(m:gt(1), m, 0):totable())
            assert.equals(4, m:max():item())
            ordo.manual_seed(5)
            local r1 = ordo.rand({3}, {engine = e}):totable()
            ordo.manual_seed(5)
            assert.same(r1, ordo.rand({3}, {engine = e}):totable())
            e:close()
            assert.truthy(tostring(e):find("closed"))
            H.raises(function() e:wait_for_all() end, "closed")
            assert.same({32, 32, 32, 32}, b:totable()) -- tensors keep their engine alive
        end
    end)

    -- The GC sees an engine's small handle and tensors, not its threads:
    -- engines made and dropped without close(), or closed with a small
    -- tensor left for the GC, once piled up (200 of them: 600 threads)
    -- before a collection came.  A count of threads, not a timing.
    it("engines dropped without close(), or closed with tensors left, do not pile up threads: engine.new collects", function()
        local function threads()
            for l in io.lines("/proc/self/status") do
                local n = l:match("^Threads:%s+(%d+)")
                if n then return tonumber(n) end
            end
        end
        collectgarbage()
        collectgarbage()
        local base, most = threads(), 0
        for _ = 1, 200 do
            local e = ordo.engine.new({kind = "pooled", cpu_workers = 2})
            assert.equals(3, ordo.ones({3}, {engine = e}):sum():item())
            most = math.max(most, threads() - base)
        end
        assert.is_true(most < 200, ("%d threads more at most"):format(most))
        collectgarbage()
        collectgarbage()
        base, most = threads(), 0
        for _ = 1, 200 do
            local e = ordo.engine.new({kind = "pooled", cpu_workers = 2})
            local t = ordo.ones({3}, {engine = e})
            assert.equals(3, t:sum():item())
            e:close() -- t keeps the engine until the GC takes it
            most = math.max(most, threads() - base)
        end
        assert.is_true(most < 200, ("closed engines with tensors: %d threads more at most"):format(most))
        -- engines kept open stay open
        local kept = {}
        for i = 1, 40 do kept[i] = ordo.engine.new({kind = "naive"}) end
        for i = 1, 40 do assert.equals(4, ordo.full({2}, 2, {engine = kept[i]}):sum():item()) end
        for i = 1, 40 do kept[i]:close() end
    end)
end)

describe("ordo.profiler", function()
    it("records tensor ops under their kernel names; dump and summary", function()
        ordo.engine.wait_for_all()
        ordo.profiler.clear()
        ordo.profiler.start()
        local a = ordo.ones({64, 64})
        local b = a:matmul(a):add(1):relu()
        b:sum():item()
        ordo.engine.wait_for_all()
        ordo.profiler.stop()
        local s = ordo.profiler.summary()
        for _, name in ipairs({"matmul", "add_scalar", "relu", "sum", "fill"}) do
            assert.truthy(s:find(name, 1, true), "summary lacks " .. name .. ":\n" .. s)
        end
        local path = os.tmpname()
        ordo.profiler.dump(path)
        local f = assert(io.open(path))
        local json = f:read("*a")
        f:close()
        os.remove(path)
        assert.truthy(json:find("\"matmul\"", 1, true))
        assert.truthy(json:find("traceEvents", 1, true))
        ordo.profiler.clear()
    end)

    -- An op's name is the user's bytes: bytes that are not UTF-8 went into
    -- the trace as they were (no JSON reader took it), and a newline split
    -- the summary's row.
    it("the summary keeps its columns for names longer than 24 characters", function()
        ordo.engine.wait_for_all()
        ordo.profiler.clear()
        ordo.profiler.start()
        local v = ordo.engine.new_variable()
        ordo.engine.shell("true", {writes = {v}, name = "a_rather_long_op_name_of_31_ch"})
        ordo.engine.shell("true", {writes = {v}, name = "short"})
        ordo.engine.wait_for_var(v)
        ordo.profiler.stop()
        local s = ordo.profiler.summary()
        ordo.profiler.clear()
        -- the count column ends where the header's "count" ends, on every row
        local head = s:match("^[^\n]*")
        local _, count_end = head:find("count", 1, true)
        local rows = 0
        for line in s:gmatch("\n([^\n]+)") do
            local _, e = line:find("^.-%s+%d+", 1)
            assert.are.equal(count_end, e, "misaligned row:\n" .. s)
            rows = rows + 1
        end
        assert.are.equal(2, rows, s)
    end)

    it("a trace stays JSON and the summary one row a name, whatever the names", function()
        ordo.engine.wait_for_all()
        ordo.profiler.clear()
        ordo.profiler.start()
        local v = ordo.engine.new_variable()
        ordo.engine.shell("true", {writes = {v}, name = "bad\255\254utf"})
        ordo.engine.shell("true", {writes = {v}, name = "two\nlines"})
        ordo.engine.wait_for_var(v)
        ordo.profiler.stop()
        local s = ordo.profiler.summary()
        assert.truthy(s:find("\nbad\\xff\\xfeutf +1 "), s)
        assert.truthy(s:find("\ntwo\\nlines +1 "), s)
        local path = os.tmpname()
        ordo.profiler.dump(path)
        local json = H.slurp(path)
        ordo.profiler.clear()
        assert.truthy(json:find('"bad\\\\xff\\\\xfeutf"', 1, true), json)
        assert.truthy(json:find('"two\\nlines"', 1, true), json)
        -- every byte sequence in it is UTF-8
        local i, n = 1, #json
        while i <= n do
            local c = json:byte(i)
            local len = c < 0x80 and 1 or c >= 0xC2 and c <= 0xDF and 2 or c >= 0xE0 and c <= 0xEF and 3 or
                        c >= 0xF0 and c <= 0xF4 and 4 or 0
            assert.is_true(len > 0, "byte " .. c .. " at " .. i)
            for k = 1, len - 1 do
                local b = json:byte(i + k) or 0
                assert.is_true(b >= 0x80 and b < 0xC0, "byte " .. b .. " at " .. (i + k))
            end
            i = i + len
        end
        -- and a JSON reader takes it, where there is one
        local have = os.execute("command -v python3 > /dev/null 2>&1")
        if have == 0 or have == true then
            local ok = os.execute("python3 -m json.tool " .. path .. " > /dev/null")
            assert.is_true(ok == 0 or ok == true, "python3 -m json.tool rejects the trace")
        end
        os.remove(path)
    end)
end)

describe("ordo.engine at Lua shutdown", function()
    -- lua_close runs every finalizer in no set order: a bare var's may come
    -- after its engine's, when the engine (and the var with it, rule 11) is
    -- gone.  Before the fix this hung or aborted in ordo_delete_variable on
    -- the freed engine, every run.
    it("engines and their bare vars finalized in any order exit cleanly", function()
        local script = os.tmpname()
        local f = assert(io.open(script, "w"))
        f:write([[
local ordo = require "ordo"
local keep = {}
for i = 1, 30 do
    local eng = ordo.engine.new{kind = (i % 3 == 0) and "naive" or "perdevice", cpu_workers = 2}
    for _ = 1, 40 do keep[#keep + 1] = eng:new_variable() end
    keep[#keep + 1] = eng
    keep[#keep + 1] = ordo.zeros({4}, {engine = eng}):add_(1)
end
print("done")
]])
        f:close()
        for _ = 1, 3 do
            local p = io.popen("LUA_PATH='lua/?.lua;lua/?/init.lua;;' timeout 60 luajit " .. script .. " 2>&1; echo rc=$?")
            local out = p:read("*a")
            p:close()
            assert.truthy(out:find("done\nrc=0\n", 1, true), out)
        end
        os.remove(script)
    end)

    -- A program that drops the package (busted does, between spec files)
    -- made the library's namespace garbage with its tensors: LuaJIT unloaded
    -- libordo.so, then the tensors' finalizers jumped into it (a segfault).
    it("the package dropped and collected with its tensors: the library stays loaded, and loads again", function()
        local script = os.tmpname()
        local f = assert(io.open(script, "w"))
        f:write([[
do
    local ordo = require "ordo"
    local ts = {}
    for i = 1, 50 do ts[i] = ordo.ones({4}) + i end
    ordo.engine.wait_for_all()
end
for name in pairs(package.loaded) do
    if name == "ordo" or name:match("^ordo%.") then package.loaded[name] = nil end
end
collectgarbage()
collectgarbage()
print("survived")
-- and loaded again (a reload): its declarations are made once
local ordo = require "ordo"
print((ordo.ones({3}) + 1):sum():item())
]])
        f:close()
        local p = io.popen("LUA_PATH='lua/?.lua;lua/?/init.lua;;' timeout 60 luajit " .. script .. " 2>&1; echo rc=$?")
        local out = p:read("*a")
        p:close()
        os.remove(script)
        assert.are.equal("survived\n6\nrc=0\n", out)
    end)
end)

describe("libordo.so", function()
    it("exports its public API, the names declared in src/ordo*.h, and nothing else (src/libordo.map)", function()
        local cdef = require "ordo.cdef"
        local headers = ""
        for _, h in ipairs({"ordo.h", "ordo_tensor.h", "ordo_kernel.h", "ordo_shell.h"}) do
            local f = assert(io.open(cdef.lua_dir .. "/../../src/" .. h, "r"))
            headers = headers .. f:read("*a")
            f:close()
        end
        local p = assert(io.popen("nm -D --defined-only '" .. cdef.lib_path .. "' 2>&1"))
        local out = p:read("*a")
        p:close()
        local n, stray = 0, {}
        for name in out:gmatch("%x+ %a ([%w_@.]+)") do
            n = n + 1
            if not headers:find("%f[%w_]" .. name .. "%f[^%w_]") then stray[#stray + 1] = name end
        end
        assert.is_true(n >= 80, "nm " .. cdef.lib_path .. ": " .. out:sub(1, 300))
        assert.same({}, stray)
    end)
end)
