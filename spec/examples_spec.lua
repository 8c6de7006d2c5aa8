-- Every example under examples/ runs as a user would run it, on small sizes.
local function run(cmd)
    local f = assert(io.popen(cmd .. " 2>&1; echo \"exit=$?\""))
    local out = f:read("*a")
    f:close()
    return out, tonumber(out:match("exit=(%d+)%s*$"))
end

local lua_path = 'LUA_PATH="lua/?.lua;lua/?/init.lua;;"'

describe("examples", function()
    it("linear_regression.lua converges and writes a trace", function()
        local trace = os.tmpname()
        os.remove(trace)
        local out, code = run(("cd %s && %s luajit examples/linear_regression.lua 4000 16 200")
            :format(os.getenv("PWD") or ".", lua_path))
        assert.are.equal(0, code, out)
        local dist = tonumber(out:match("|w %- w_true| = ([%d%.e%-]+)"))
        assert.is_not_nil(dist, out)
        assert.is_true(dist < 0.01, out)
        assert.is_truthy(out:find("matmul", 1, true), "profiler summary lists matmul:\n" .. out)
        os.remove("linear_regression.trace.json")
        os.remove(trace)
    end)
end)
