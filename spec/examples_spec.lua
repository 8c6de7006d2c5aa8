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

    it("dependency_dag.lua: D = 12, B and C independent, branches overlap in the trace", function()
        local trace_path = os.tmpname()
        local out, code = run(("cd %s && %s luajit examples/dependency_dag.lua %s")
            :format(os.getenv("PWD") or ".", lua_path, trace_path))
        assert.are.equal(0, code, out)
        -- part 1: the seeds' program and its dependency steps
        assert.is_truthy(out:find("D = 12\n", 1, true), out)
        assert.is_truthy(out:find("step 1: A = 2\n", 1, true), out)
        assert.is_truthy(out:find("step 2: B = A + 1   ||   C = A + 2\n", 1, true), out)
        assert.is_truthy(out:find("step 3: D = B * C\n", 1, true), out)
        assert.is_truthy(out:find("can run in parallel: B = A + 1  and  C = A + 2", 1, true), out)
        local _, pairs_n = out:gsub("can run in parallel:", "")
        assert.are.equal(1, pairs_n, out)
        -- part 2: the trace was written and is a Chrome trace of the four branches
        local trace = require "ordo.trace"
        local ops = trace.load(trace_path)
        os.remove(trace_path)
        for _, name in ipairs({"matmul", "tanh", "sigmoid", "sqrt", "sum"}) do
            assert.is_true(#trace.select(ops, name) > 0, name .. " missing from the trace")
            assert.is_truthy(out:find("\n" .. name .. " ", 1, true), "summary lists " .. name .. ":\n" .. out)
        end
        assert.are.equal(2, #trace.select(ops, "tanh"))
        assert.are.equal(6, #trace.select(ops, "sigmoid"))
        assert.are.equal(8, #trace.select(ops, "sqrt"))
        -- the analysis: six branch pairs, wall vs op time, and parallelism
        -- wherever the engine has two workers or more
        local _, nlines = out:gsub("\n  %w+ +x %w+ +[%d.]+ ms  ", "")
        assert.are.equal(6, nlines, out)
        local wall, busy, par = out:match("wall time ([%d.]+) ms, sum of op times ([%d.]+) ms: parallelism ([%d.]+)")
        assert.is_not_nil(wall, out)
        assert.is_true(tonumber(busy) > 0 and tonumber(wall) > 0, out)
        local kind, workers = out:match("engine: (%w+), (%d+) cpu workers")
        assert.is_not_nil(kind, out)
        if kind ~= "naive" and tonumber(workers) >= 2 then
            assert.is_truthy(out:find("parallel: yes", 1, true), out)
            assert.is_true(tonumber(par) > 1.05, "parallelism " .. par .. ":\n" .. out)
        end
        assert.is_truthy(out:find("same result", 1, true), out)
    end)

    it("build_graph.lua: parallel commands, incremental rebuilds, a failing rule", function()
        local out, code = run(("cd %s && %s luajit examples/build_graph.lua")
            :format(os.getenv("PWD") or ".", lua_path))
        assert.are.equal(0, code, out)
        assert.is_truthy(out:find("build_graph: all checks passed", 1, true), out)
        -- build 1: seven commands; the program ran; the two `sleep 1` rules
        -- overlapped (however few workers: a command holds none), except on
        -- the naive engine, which runs each op inside its push
        assert.is_truthy(out:find("out.txt: app 1.0: Hello, ordo!", 1, true), out)
        local kind = out:match("engine: (%w+), %d+ cpu workers")
        assert.is_not_nil(kind, out)
        if kind ~= "naive" then
            local overlap = tonumber(out:match("docs.txt and lint.txt overlapped for ([%d.]+) s"))
            assert.is_not_nil(overlap, out)
            assert.is_true(overlap > 0.8, "the 1 s commands overlapped only " .. overlap .. " s:\n" .. out)
            local both = tonumber(out:match("the two 1 s commands finished ([%d.]+) s after"))
            assert.is_true(both ~= nil and both >= 0.95 and both < 1.8, out)
            assert.is_truthy(out:find("they ran in parallel", 1, true), out)
        end
        assert.is_truthy(out:find("7 commands: wall", 1, true), out)
        -- builds 2 and 3: mtimes decide what runs again
        assert.is_truthy(out:find("make: 'all' is up to date", 1, true), out)
        assert.is_truthy(out:find("commands run: greet.o app out.txt lint.txt", 1, true), out)
        -- build 4: the failure names the rule, the exit status and the command,
        -- is reported once, and skips only the rule that needs it
        assert.is_truthy(out:find("the wait raised: [^\n]*broken.o: command failed with exit status 1: [^\n]*cc %-c broken.c"), out)
        assert.is_truthy(out:find("skipped: broken\n", 1, true), out)
        assert.is_truthy(out:find("broken exists: false; notes.txt exists: true", 1, true), out)
        assert.is_truthy(out:find("a second wait: no error", 1, true), out)
    end)

    -- The MLP on a subset (the full run is `make demo`: about 90% in a minute).
    it("fashion_mlp.lua learns Fashion-MNIST (subset: 2 epochs of 6,000 images, > 75% on 2,000 test images)", function()
        local ok_data = require("ordo").data.fashion_mnist_available()
        if not ok_data then
            pending("the dataset-fashion-mnist package is not installed (scripts/deps.sh installs it)")
            return
        end
        local save = os.tmpname()
        local out, code = run(("cd %s && %s luajit examples/fashion_mlp.lua --epochs 2 --limit 6000 --test-limit 2000 --save %s")
            :format(os.getenv("PWD") or ".", lua_path, save))
        assert.are.equal(0, code, out)
        local l1 = tonumber(out:match("epoch  1  loss ([%d.]+)"))
        local l2 = tonumber(out:match("epoch  2  loss ([%d.]+)"))
        assert.is_truthy(l1 and l2, out)
        assert.is_true(l2 < l1, "the loss fell:\n" .. out)
        local acc = tonumber(out:match("final test accuracy ([%d.]+)%%"))
        assert.is_not_nil(acc, out)
        assert.is_true(acc > 75, out)
        -- the saved parameters load into the same architecture
        local ordo = require "ordo"
        local nn = ordo.nn
        local m = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 256), nn.ReLU(),
                                nn.Dropout(0.2), nn.Linear(256, 10))
        m:load(save)
        os.remove(save)
    end)

    it("fashion_cnn.lua trains the CNN (subset: 1 epoch of 2,000 images, > 60% on 1,000 test images)", function()
        if not require("ordo").data.fashion_mnist_available() then
            pending("the dataset-fashion-mnist package is not installed (scripts/deps.sh installs it)")
            return
        end
        local out, code = run(("cd %s && %s luajit examples/fashion_cnn.lua --epochs 1 --limit 2000 --test-limit 1000")
            :format(os.getenv("PWD") or ".", lua_path))
        assert.are.equal(0, code, out)
        assert.is_truthy(out:find("Fashion-MNIST CNN: 2000 train / 1000 test images", 1, true), out)
        local acc = tonumber(out:match("final test accuracy ([%d.]+)%%"))
        assert.is_not_nil(acc, out)
        assert.is_true(acc > 60, out)
    end)

    it("fashion_autoencoder.lua reconstructs better than the mean image (1 epoch of 6,000 images)", function()
        if not require("ordo").data.fashion_mnist_available() then
            pending("the dataset-fashion-mnist package is not installed (scripts/deps.sh installs it)")
            return
        end
        local out, code = run(("cd %s && %s luajit examples/fashion_autoencoder.lua --epochs 1 --limit 6000 "
            .. "--test-limit 1000 --show 1"):format(os.getenv("PWD") or ".", lua_path))
        assert.are.equal(0, code, out)
        local err, base = out:match("final test reconstruction error ([%d.]+), [%d.]+x below the mean image's ([%d.]+)")
        err, base = tonumber(err), tonumber(base)
        assert.is_truthy(err and base, out)
        assert.is_true(err < 0.75 * base, "it learned more than the mean image:\n" .. out)
        assert.is_truthy(out:find("test images (left) and their reconstructions (right):", 1, true), out)
    end)

    it("char_lm.lua learns a text with each model (the loss falls below guessing) and writes a sample", function()
        for _, model in ipairs({"lstm", "transformer"}) do
            local out, code = run(("cd %s && %s luajit examples/char_lm.lua --model %s --steps 80 --hidden 64 --sample 40")
                :format(os.getenv("PWD") or ".", lua_path, model))
            assert.are.equal(0, code, out)
            assert.is_truthy(out:find("char_lm: " .. model .. " model", 1, true), out)
            local first, last, guess = out:match("loss ([%d.]+) %-> ([%d.]+) nats per character %(guessing: ([%d.]+)%)")
            first, last, guess = tonumber(first), tonumber(last), tonumber(guess)
            assert.is_truthy(first and last and guess, out)
            assert.is_true(math.abs(first - guess) < 0.5, "it starts from guessing:\n" .. out)
            assert.is_true(last < guess - 1, "the loss fell well below guessing:\n" .. out)
            local sample = out:match("sample %(temperature 0.8%):\n(.*)$")
            assert.is_truthy(sample and #sample >= 40, out)
        end
        local out, code = run(("cd %s && %s luajit examples/char_lm.lua --temperature 0"):format(os.getenv("PWD") or ".",
                                                                                             lua_path))
        assert.are_not.equal(0, code, out)
        assert.is_truthy(out:find("char_lm: --temperature must be positive", 1, true), out)
        out, code = run(("cd %s && %s luajit examples/char_lm.lua --model gru"):format(os.getenv("PWD") or ".", lua_path))
        assert.are_not.equal(0, code, out)
        assert.is_truthy(out:find("char_lm: --model must be lstm or transformer, got gru", 1, true), out)
    end)

    it("the training examples reject unknown options and print --help", function()
        local out, code = run(("cd %s && %s luajit examples/fashion_mlp.lua --epoch 3")
            :format(os.getenv("PWD") or ".", lua_path))
        assert.are_not.equal(0, code, out)
        assert.is_truthy(out:find("fashion_mlp: unknown option --epoch (see --help)", 1, true), out)
        out, code = run(("cd %s && %s luajit examples/fashion_cnn.lua --help"):format(os.getenv("PWD") or ".", lua_path))
        assert.are.equal(0, code, out)
        assert.is_truthy(out:find("--width A,B", 1, true), out)
    end)
end)
