-- Every public function, called with odd arguments (spec/support/odd_args.lua
-- draws them), either works or raises an error that names it: never a
-- crash, never a raw Lua error from inside ordo ("attempt to index a nil
-- value"), and the engine still runs ops afterwards.  The calls run in a
-- process of their own, from a scratch directory, so a crash is reported
-- here with the call that caused it instead of ending the test run.
local root = os.getenv("PWD") or "."
local ORDO = root .. "/build/ordo"
local DRIVER = root .. "/spec/support/odd_args.lua"

local slurp = require("support.helpers").slurp

local function last_line(text)
    local last
    for line in text:gmatch("[^\n]+") do last = line end
    return last
end

describe("odd arguments to every public function", function()
    -- the last run mixes in tensors on the simulated GPU (device code paths, devices mixed)
    for _, run in ipairs({{seed = 1}, {seed = 2}, {seed = 3},
                          {seed = 4, gpu = "ORDO_SIMULATED_GPUS=1 ORDO_SIMULATED_GPU_MEM_MB=64 "}}) do
        local seed = run.seed
        it(("raise a clear error or work, and leave the engine running (seed %d%s)"):format(seed,
            run.gpu and ", with tensors on a simulated GPU" or ""), function()
            local dir = os.tmpname()
            os.remove(dir)
            assert(os.execute("mkdir -p " .. dir) == 0)
            local log, out = dir .. "/calls.log", dir .. "/out.txt"
            local cmd = ("cd %s && %s%s %s %d 20 %s %s > %s 2>&1"):format(dir, run.gpu or "", ORDO, DRIVER, seed, log,
                                                                     run.gpu and "gpu" or "", out)
            local rc = os.execute(cmd)
            local output, calls = slurp(out), slurp(log)
            os.execute("rm -rf " .. dir)
            assert(rc == 0, ("the driver died (status %s) in the call %s\n%s"):format(tostring(rc),
                tostring(last_line(calls)), output:sub(-2000)))
            local problems = {}
            for line in output:gmatch("[^\n]+") do
                if line:match("^RAW ") or line:match("^NONSTRING ") or line:match("^UNHEALTHY ") then
                    problems[#problems + 1] = line
                end
            end
            assert(#problems == 0, #problems .. " calls without a clear error:\n" .. table.concat(problems, "\n"))
            local n = tonumber(output:match("done (%d+) calls"))
            assert(n and n > 10000, "the driver did not finish its calls:\n" .. output:sub(-2000))
        end)
    end
end)
