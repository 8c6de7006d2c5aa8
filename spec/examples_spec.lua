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
        assert.is_truthy(out:find("final test accuracy [%d.]+%% after 1 epoch in"), out) -- (not "1 epochs")
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
        -- one step of training: worse than the mean image, and it says "above", not "0.7x below"
        out, code = run(("cd %s && %s luajit examples/fashion_autoencoder.lua --epochs 1 --limit 8 "
            .. "--test-limit 20 --show 0"):format(os.getenv("PWD") or ".", lua_path))
        assert.are.equal(0, code, out)
        local e1, ratio, word, b1 = out:match("final test reconstruction error ([%d.]+), ([%d.]+)x (%a+) the mean image's ([%d.]+)")
        e1, ratio, b1 = tonumber(e1), tonumber(ratio), tonumber(b1)
        assert.is_truthy(e1 and b1, out)
        assert.is_true(e1 > b1, out)
        assert.are.equal("above", word, out)
        assert.is_true(ratio >= 1, out)
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
    end)

    -- The command lines (examples/cli.lua), checked before any work: each
    -- runs in an empty directory of its own, which must stay empty.
    local root = os.getenv("PWD") or "."
    local abs_path = ('LUA_PATH="%s/lua/?.lua;%s/lua/?/init.lua;;"'):format(root, root)
    local function in_empty_dir(script, args, env)
        local dir = os.tmpname()
        os.remove(dir)
        assert(os.execute("mkdir '" .. dir .. "'") == 0)
        local out, code = run(("cd '%s' && %s %sluajit %s/examples/%s %s"):format(dir, abs_path, env or "", root, script,
                                                                                  args))
        local f = io.popen("ls -A '" .. dir .. "'")
        local left = f:read("*a")
        f:close()
        os.execute("rm -rf '" .. dir .. "'")
        return out, code, left
    end
    local EXAMPLES = {"fashion_mlp.lua", "fashion_cnn.lua", "fashion_autoencoder.lua", "char_lm.lua",
                      "dependency_dag.lua", "build_graph.lua", "linear_regression.lua"}

    it("every example answers --help and -h with its usage, exit 0, and does nothing else", function()
        local listed = {}
        local f = io.popen("ls " .. root .. "/examples")
        for name in f:read("*a"):gmatch("[^\n]+") do listed[name] = true end
        f:close()
        for _, script in ipairs(EXAMPLES) do
            assert.is_true(listed[script], script)
            listed[script] = nil
            for _, flag in ipairs({"--help", "-h", "3 --help"}) do
                local out, code, left = in_empty_dir(script, flag)
                assert.are.equal(0, code, script .. " " .. flag .. ":\n" .. out)
                assert.is_truthy(out:find("usage: build/ordo examples/" .. script, 1, true), script .. ":\n" .. out)
                assert.are.equal("", left, script .. " " .. flag .. " wrote files")
                assert.is_nil(out:find("traceback", 1, true), out)
            end
        end
        -- the helpers say what they are, run alone
        for _, helper in ipairs({"fashion_train.lua", "cli.lua"}) do
            assert.is_true(listed[helper], helper)
            listed[helper] = nil
            local out, code, left = in_empty_dir(helper, "--help")
            assert.are.equal(0, code, out)
            assert.is_truthy(out:find("run one of those", 1, true) or out:find("run an example", 1, true), out)
            assert.are.equal("", left)
            out, code = in_empty_dir(helper, "")
            assert.are.equal(2, code, out)
        end
        assert.is_nil(next(listed), "an example without a check here: " .. tostring(next(listed)))
    end)

    it("every example rejects a bad option or value with one line naming it, exit 2, before any work", function()
        local cases = {
            {"fashion_mlp.lua", "--device bogus", "fashion_mlp: --device must be cpu or gpu, got bogus"},
            {"fashion_mlp.lua", "--hidden abc", "fashion_mlp: --hidden must be comma-separated integers >= 1"},
            {"fashion_mlp.lua", "--hidden 64,,32", "--hidden must be comma-separated integers >= 1"},
            {"fashion_mlp.lua", "--epochs 0", "fashion_mlp: --epochs must be an integer >= 1, got 0"},
            {"fashion_mlp.lua", "--epochs 1.5", "fashion_mlp: --epochs must be an integer >= 1, got 1.5"},
            -- written as a decimal integer: tonumber's hex, exponents and spaces are not counts
            {"fashion_mlp.lua", "--epochs 0x2", "fashion_mlp: --epochs must be an integer >= 1, got 0x2"},
            {"fashion_mlp.lua", "--epochs 1e1", "fashion_mlp: --epochs must be an integer >= 1, got 1e1"},
            {"fashion_mlp.lua", "--epochs 2.0", "fashion_mlp: --epochs must be an integer >= 1, got 2.0"},
            {"fashion_mlp.lua", "'--epochs= 2'", "fashion_mlp: --epochs must be an integer >= 1, got  2"},
            {"fashion_mlp.lua", "--hidden 0x10,8", "fashion_mlp: --hidden must be comma-separated integers >= 1"},
            {"fashion_mlp.lua", "--lr 0x1p-4", "fashion_mlp: --lr must be a finite number > 0, got 0x1p-4"},
            {"fashion_mlp.lua", "--test-limit 0", "fashion_mlp: --test-limit must be an integer >= 1, got 0"},
            {"fashion_mlp.lua", "--limit -3", "fashion_mlp: --limit must be an integer >= 1, got -3"},
            {"fashion_mlp.lua", "--batch x", "fashion_mlp: --batch must be an integer >= 1, got x"},
            {"fashion_mlp.lua", "--lr nan", "fashion_mlp: --lr must be a finite number > 0, got nan"},
            {"fashion_mlp.lua", "--lr -1", "fashion_mlp: --lr must be a finite number > 0, got -1"},
            {"fashion_mlp.lua", "--seed 1.5", "fashion_mlp: --seed must be an integer >= 0, got 1.5"},
            {"fashion_mlp.lua", "--epochs", "fashion_mlp: --epochs needs a value"},
            {"fashion_mlp.lua", "--save --epochs 1", "fashion_mlp: --save needs a value, got the option --epochs"},
            {"fashion_mlp.lua", "--save /nonexistent/dir/m.bin",
             "fashion_mlp: --save: cannot write /nonexistent/dir/m.bin: No such file or directory"},
            {"fashion_mlp.lua", "--save /tmp", "fashion_mlp: --save: /tmp is a directory, not a file"},
            {"fashion_mlp.lua", "--epoch 3", "fashion_mlp: unknown option --epoch (see --help)"},
            {"fashion_mlp.lua", "--checkpoint /dev/null", "fashion_mlp: --checkpoint: /dev/null is not a regular file"},
            {"fashion_cnn.lua", "--checkpoint /tmp", "fashion_cnn: --checkpoint: /tmp is a directory, not a file"},
            {"fashion_mlp.lua", "extra", "fashion_mlp: unexpected argument extra"},
            {"fashion_cnn.lua", "--width 16", "fashion_cnn: --width must be 2 comma-separated integers >= 1"},
            {"fashion_cnn.lua", "--device gpu0", "fashion_cnn: --device must be cpu or gpu, got gpu0"},
            {"fashion_autoencoder.lua", "--epochs 0", "fashion_autoencoder: --epochs must be an integer >= 1, got 0"},
            {"fashion_autoencoder.lua", "--show -1", "fashion_autoencoder: --show must be an integer >= 0, got -1"},
            {"fashion_autoencoder.lua", "--code 0", "fashion_autoencoder: --code must be an integer >= 1, got 0"},
            {"fashion_autoencoder.lua", "--device bogus", "fashion_autoencoder: --device must be cpu or gpu"},
            {"char_lm.lua", "--device bogus", "char_lm: --device must be cpu or gpu, got bogus"},
            {"char_lm.lua", "--steps 0", "char_lm: --steps must be an integer >= 1, got 0"},
            {"char_lm.lua", "--text /tmp", "char_lm: --text: /tmp is a directory, not a file"},
            {"char_lm.lua", "--text /nonexistent.txt", "char_lm: --text: cannot read /nonexistent.txt: No such file"},
            {"char_lm.lua", "--temperature nan", "char_lm: --temperature must be a finite number > 0, got nan"},
            {"char_lm.lua", "--temperature 0", "char_lm: --temperature must be a finite number > 0, got 0"},
            {"char_lm.lua", "--temperature=inf", "char_lm: --temperature must be a finite number > 0, got inf"},
            {"char_lm.lua", "--model gru", "char_lm: --model must be lstm or transformer, got gru"},
            {"char_lm.lua", "--model transformer --hidden 30", "char_lm: --hidden must be a multiple of 4"},
            {"char_lm.lua", "--sample -1", "char_lm: --sample must be an integer >= 0, got -1"},
            {"dependency_dag.lua", "--bogus", "dependency_dag: unknown option --bogus"},
            {"dependency_dag.lua", "/tmp", "dependency_dag: trace.json: /tmp is a directory, not a file"},
            {"dependency_dag.lua", "t.json 0", "dependency_dag: n must be an integer >= 1, got 0"},
            {"dependency_dag.lua", "t.json 8 9", "dependency_dag: unexpected argument 9"},
            {"build_graph.lua", "-x", "build_graph: unknown option -x"},
            {"build_graph.lua", "/tmp", "build_graph: dir must be a new or empty directory, got /tmp"},
            {"build_graph.lua", "a b", "build_graph: unexpected argument b"},
            -- mkdir's complaint on the same line, not one line of its own above ours
            {"build_graph.lua", "/dev/null", "build_graph: dir: cannot make the directory /dev/null (cannot create"},
            {"linear_regression.lua", "0 4 2", "linear_regression: n must be an integer >= 1, got 0"},
            {"linear_regression.lua", "10 4 -1", "linear_regression: steps must be an integer >= 1, got -1"},
            {"linear_regression.lua", "10 abc", "linear_regression: d must be an integer >= 1, got abc"},
            {"linear_regression.lua", "10 4 2 t.json 7", "linear_regression: unexpected argument 7"},
            -- the trace's path, checked before the run (it failed after it)
            {"linear_regression.lua", "10 4 2 /tmp", "linear_regression: trace.json: /tmp is a directory, not a file"},
            {"linear_regression.lua", "10 4 2 /nonexistent/t.json",
             "linear_regression: trace.json: cannot write /nonexistent/t.json: No such file or directory"},
            -- `--` ends the options: what follows is values
            {"fashion_mlp.lua", "-- --epochs 2", "fashion_mlp: unexpected argument --epochs (see --help)"},
            {"linear_regression.lua", "-- -3", "linear_regression: n must be an integer >= 1, got -3"},
        }
        for _, c in ipairs(cases) do
            local out, code, left = in_empty_dir(c[1], c[2])
            local what = c[1] .. " " .. c[2] .. ":\n" .. out
            assert.are.equal(2, code, what)
            assert.is_truthy(out:find(c[3], 1, true), "expected '" .. c[3] .. "' from " .. what)
            assert.is_nil(out:find("traceback", 1, true), what)
            assert.matches("^[^\n]*\n$", (out:gsub("exit=%d+%s*$", "")), what) -- one line (run adds exit=)
            assert.are.equal("", left, what .. " wrote files")
        end
    end)

    it("--device gpu without a GPU, and missing Fashion-MNIST files: one line, no traceback, before any work", function()
        -- without the simulated GPU: no device unless the machine has CUDA
        local no_sim = "env -u ORDO_SIMULATED_GPUS -u ORDO_SIMULATED_GPU_MEM_MB "
        local probe = run(("cd %s && %s %sluajit -e 'print(require(\"ordo\").cuda.is_available())'")
            :format(root, abs_path, no_sim))
        if probe:find("false", 1, true) then
            for _, script in ipairs({"fashion_mlp", "fashion_cnn", "fashion_autoencoder", "char_lm"}) do
                local out, code, left = in_empty_dir(script .. ".lua", "--device gpu", no_sim)
                local what = script .. " --device gpu:\n" .. out
                assert.are.equal(2, code, what)
                assert.is_truthy(out:find(script .. ": --device gpu: gpu(0): no CUDA device available", 1, true), what)
                assert.is_nil(out:find("traceback", 1, true), what)
                assert.matches("^[^\n]*\n$", (out:gsub("exit=%d+%s*$", "")), what)
                assert.are.equal("", left, what .. " wrote files")
            end
        end
        for _, script in ipairs({"fashion_mlp", "fashion_cnn", "fashion_autoencoder"}) do
            local out, code, left = in_empty_dir(script .. ".lua", "--epochs 1 --limit 10",
                                                 "env ORDO_FASHION_MNIST=/nonexistent/fmnist ")
            local what = script .. " without its data:\n" .. out
            assert.are.equal(1, code, what)
            assert.is_truthy(out:find(script .. ": Fashion-MNIST not found in /nonexistent/fmnist (missing " ..
                                      "train-images-idx3-ubyte.gz", 1, true), what)
            assert.is_truthy(out:find("apt-get install dataset-fashion-mnist", 1, true), what)
            assert.is_truthy(out:find("ORDO_FASHION_MNIST", 1, true), what)
            assert.is_nil(out:find("traceback", 1, true), what)
            assert.matches("^[^\n]*\n$", (out:gsub("exit=%d+%s*$", "")), what)
            assert.are.equal("", left, what .. " wrote files")
        end
    end)

    it("an engine that cannot start (a bad ORDO_* setting): one line naming it, exit 2, before any work", function()
        for _, script in ipairs({"fashion_mlp", "fashion_cnn", "fashion_autoencoder", "char_lm"}) do
            local out, code, left = in_empty_dir(script .. ".lua", "", "env ORDO_ENGINE_TYPE=bogus ")
            local what = script .. " with ORDO_ENGINE_TYPE=bogus:\n" .. out
            assert.are.equal(2, code, what)
            assert.is_truthy(out:find(script .. ": cannot start the default engine: ordo_engine_create: " ..
                                      "ORDO_ENGINE_TYPE=bogus: expected naive, pooled or perdevice", 1, true), what)
            assert.matches("^[^\n]*\n$", (out:gsub("exit=%d+%s*$", "")), what)
            assert.are.equal("", left, what .. " wrote files")
        end
    end)

    it("tiny runs of the fast examples still work with checked values", function()
        local out, code, left = in_empty_dir("linear_regression.lua", "64 4 2")
        assert.are.equal(1, code, out) -- two steps do not converge: exit 1, said so
        assert.is_truthy(out:find("after 2 steps", 1, true), out)
        assert.is_truthy(out:find("did not converge", 1, true), out)
        assert.are.equal("linear_regression.trace.json\n", left)
        out, code, left = in_empty_dir("linear_regression.lua", "2000 4 100 lr.json")
        assert.are.equal(0, code, out)
        assert.is_truthy(out:find("trace: lr.json", 1, true), out)
        assert.are.equal("lr.json\n", left)
        -- a directory whose name starts with '-', after `--`
        out, code, left = in_empty_dir("build_graph.lua", "-- -odd")
        assert.are.equal(0, code, out)
        assert.is_truthy(out:find("kept ./-odd\nbuild_graph: all checks passed", 1, true), out)
        assert.are.equal("-odd\n", left)
        out, code, left = in_empty_dir("dependency_dag.lua", "dag.json 16")
        assert.are.equal(0, code, out)
        assert.is_truthy(out:find("D = 12\n", 1, true), out)
        assert.are.equal("dag.json\n", left)
        out, code = in_empty_dir("char_lm.lua", ("--steps 2 --hidden 8 --seq 8 --batch 2 --sample 3 --text %s/README.md")
            :format(root))
        assert.are.equal(0, code, out)
        assert.is_truthy(out:find("2 steps of 2 x 8 characters", 1, true), out)
    end)

    -- A FIFO (or bash's <(command), /dev/stdin) as a path: the check before
    -- the run only looks at it; opening it there waited for its other end,
    -- and a read check took the first 4 KiB of a --text that came through one.
    it("a FIFO as an output or input path: not opened by the check, all its bytes reach the script", function()
        local dir = os.tmpname()
        os.remove(dir)
        assert(os.execute("mkdir '" .. dir .. "' && mkfifo '" .. dir .. "/trace' '" .. dir .. "/text'") == 0)
        -- the parameters through a FIFO to a reader: whole, and they load
        -- (the reader is waited for; timeouts: the old check never returned)
        local ordo = require "ordo"
        local out, code
        if ordo.data.fashion_mnist_available() then
            out, code = run(("cd %s && { timeout 60 cat '%s/trace' > '%s/m.bin' & %s timeout 60 luajit "
                .. "examples/fashion_mlp.lua --epochs 1 --limit 64 --test-limit 64 --hidden 8 --save '%s/trace'; "
                .. "rc=$?; wait; (exit $rc); }"):format(root, dir, dir, lua_path, dir))
            assert.are.equal(0, code, out)
            assert.is_truthy(out:find("parameters saved to " .. dir .. "/trace", 1, true), out)
            local nn = ordo.nn
            nn.Sequential(nn.Linear(784, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 10)):load(dir .. "/m.bin")
        end
        -- dependency_dag reads its trace back: a FIFO or a device is refused
        -- before any work (it hung, or failed decoding /dev/null's nothing)
        for _, path in ipairs({dir .. "/trace", "/dev/null"}) do
            out, code = run(("cd %s && %s timeout 60 luajit examples/dependency_dag.lua '%s' 16")
                :format(root, lua_path, path))
            assert.are.equal(2, code, out)
            assert.is_truthy(out:find("dependency_dag: trace.json: " .. path .. " is not a regular file", 1, true), out)
            assert.is_nil(out:find("D = 12", 1, true), out)
        end
        -- a dangling symbolic link as --save: the check leaves it as it was
        -- (it made the file the link names, then removed the link)
        assert(os.execute("ln -s target '" .. dir .. "/link'") == 0)
        out, code = run(("cd %s && %s luajit examples/fashion_mlp.lua --save '%s/link' --bogus"):format(root, lua_path,
                                                                                                      dir))
        assert.are.equal(2, code, out)
        local ls = io.popen("ls -A '" .. dir .. "'")
        local left = ls:read("*a")
        ls:close()
        assert.is_truthy(left:find("^link\n"), left)
        assert.is_nil(left:find("target", 1, true), left)
        -- the text through a FIFO from a writer: every character read
        local f = assert(io.open(root .. "/README.md", "rb"))
        local size = #f:read("*a")
        f:close()
        out, code = run(("cd %s && { timeout 60 cat README.md > '%s/text' & %s timeout 60 luajit examples/char_lm.lua "
            .. "--text '%s/text' --steps 1 --hidden 8 --sample 0; rc=$?; wait; (exit $rc); }"):format(root, dir, lua_path,
                                                                                                     dir))
        os.execute("rm -rf '" .. dir .. "'")
        assert.are.equal(0, code, out)
        assert.is_truthy(out:find(("%s/text, %d characters"):format(dir, size), 1, true), out)
    end)

    -- Ctrl-C during a build stops the script (exit status 130) and removes
    -- its temporary directory; the wait's "interrupted" was taken for a
    -- failed build, and the script went on to the next builds.
    it("build_graph.lua: Ctrl-C stops it, status 130, its temporary directory removed", function()
        local tmp = os.tmpname()
        os.remove(tmp)
        assert(os.execute("mkdir '" .. tmp .. "'") == 0)
        local cmd = ([[bash -c 'set -m; cd %s; TMPDIR=%s build/ordo examples/build_graph.lua > %s/out 2>&1 & p=$!;
            for i in $(seq 400); do grep -q "== build 1" %s/out && break; sleep 0.05; done;
            kill -INT $p; wait $p; echo "rc=$?"; sleep 1.3; ls -A %s' 2>/dev/null]]):format(root, tmp, tmp, tmp, tmp)
        local f = io.popen(cmd)
        local res = f:read("*a")
        f:close()
        local o = io.open(tmp .. "/out")
        local out = o and o:read("*a") or ""
        if o then o:close() end
        os.execute("rm -rf '" .. tmp .. "'")
        assert.is_truthy(res:find("^rc=130\nout\n$"), res .. out) -- nothing but the log left in TMPDIR
        assert.is_truthy(out:find("interrupted", 1, true), out)
        assert.is_nil(out:find("== build 2", 1, true), out)
    end)

    -- --checkpoint: Ctrl-C after an epoch, the same command again goes on
    -- from the next epoch; other options than the checkpoint's are refused.
    it("fashion_mlp.lua --checkpoint: stopped by Ctrl-C, run again, it resumes after the last epoch saved, bit for bit", function()
        if not require("ordo").data.fashion_mnist_available() then
            pending("the dataset-fashion-mnist package is not installed (scripts/deps.sh installs it)")
            return
        end
        local tmp = os.tmpname()
        os.remove(tmp)
        assert(os.execute("mkdir '" .. tmp .. "'") == 0)
        local args = ("--epochs 3 --limit 10000 --batch 1 --hidden 8 --test-limit 100 --checkpoint %s/ck"):format(tmp)
        local f = io.popen(([[bash -c 'set -m; cd %s; build/ordo examples/fashion_mlp.lua %s > %s/out 2>&1 & p=$!;
            for i in $(seq 1200); do grep -q "^epoch  1 " %s/out && break; sleep 0.05; done;
            kill -INT $p; wait $p; echo "rc=$?"; ls %s' 2>/dev/null]]):format(root, args, tmp, tmp, tmp))
        local res = f:read("*a")
        f:close()
        local o = io.open(tmp .. "/out")
        local out1 = o and o:read("*a") or ""
        if o then o:close() end
        local out2, code2 = run(("cd %s && %s luajit examples/fashion_mlp.lua %s"):format(root, lua_path, args))
        local out3, code3 = run(("cd %s && %s luajit examples/fashion_mlp.lua %s --hidden 4"):format(root, lua_path, args))
        local straight = run(("cd %s && %s luajit examples/fashion_mlp.lua %s"):format(root, lua_path,
                                                                                     args:gsub(" %-%-checkpoint .*", "")))
        os.execute("rm -rf '" .. tmp .. "'")
        assert.are.equal("rc=130\nck\nck.adam\nck.rng\nck.sched\nout\n", res, out1) -- (no .tmp file left)
        assert.is_nil(out1:find("epoch  3 ", 1, true), out1)
        local done = tonumber(out2:match("resuming from [^\n]*/ck: (%d) of 3 epochs done"))
        assert.are.equal(0, code2, out2)
        assert.is_true(done == 1 or done == 2, out2)
        assert.is_nil(out2:find("epoch  " .. done .. " ", 1, true), out2)
        assert.is_truthy(out2:find("epoch  3 ", 1, true), out2)
        assert.is_truthy(out2:find("final test accuracy [%d.]+%% after 3 epochs"), out2)
        -- the generators' states came back too (ck.rng): the epochs after the
        -- checkpoint are those of the run that was not stopped (loss, accuracy)
        for e = done + 1, 3 do
            local want = straight:match("\nepoch  " .. e .. "  loss [%d.]+  test accuracy [%d.]+%%")
            assert.is_not_nil(want, straight)
            assert.is_truthy(out2:find(want, 1, true), "resumed:\n" .. out2 .. "\nnot stopped:\n" .. straight)
        end
        assert.are.equal(2, code3, out3)
        assert.is_truthy(out3:find("fashion_mlp: --checkpoint: cannot resume from " .. tmp .. "/ck (same options?): ",
                                   1, true), out3)
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

-- Every ```lua block of README.md runs on its own, as a reader copies it
-- into a file, and prints what the README says it prints.
describe("README's Lua snippets", function()
    local root = os.getenv("PWD") or "."
    local function snippets()
        local f = assert(io.open(root .. "/README.md", "rb"))
        local text = f:read("*a")
        f:close()
        local list = {}
        for body in text:gmatch("\n```lua\n(.-)\n```\n") do list[#list + 1] = body end
        return list
    end
    -- runs the snippet (and an extra line after it, in the same chunk) in
    -- an empty directory: what it writes (trace.json) stays there
    local function run_snippet(body, extra, env)
        local dir = os.tmpname()
        os.remove(dir)
        assert(os.execute("mkdir " .. dir) == 0)
        local path = dir .. "/snippet.lua"
        local f = assert(io.open(path, "wb"))
        f:write(body, "\n", extra or "", "\n")
        f:close()
        local out, code = run(('cd %s && %s LUA_PATH="%s/lua/?.lua;%s/lua/?/init.lua;;" luajit snippet.lua')
            :format(dir, env or "", root, root))
        os.execute("rm -rf " .. dir)
        return out, code
    end
    local function find(pattern)
        for _, s in ipairs(snippets()) do
            if s:find(pattern, 1, true) then return s end
        end
        error("no README snippet holds " .. pattern)
    end

    it("each starts by requiring ordo (a reader copies one alone)", function()
        local list = snippets()
        assert.is_true(#list >= 3, "README's Lua snippets: " .. #list)
        for i, s in ipairs(list) do
            assert.is_truthy(s:find('^local ordo = require "ordo"\n'), "snippet " .. i .. ":\n" .. s)
        end
    end)

    it("the tensors snippet prints what its comments show", function()
        local out, code = run_snippet(find("ordo.arange(6):view(2, 3)"))
        assert.are.equal(0, code, out)
        assert.is_truthy(out:find(" 0  1  2\n 3  4  5\n[ordo.FloatTensor of size 2x3 on cpu(0)]\n", 1, true), out)
        assert.is_truthy(out:find(" 1010\n[ordo.FloatTensor of size () on cpu(0)]\n", 1, true), out)
        assert.is_truthy(out:find("\nmatmul ", 1, true), "the profiler's summary:\n" .. out)
    end)

    it("the custom module snippet prints its state dict's names and a gradient", function()
        local out, code = run_snippet(find('nn.Module:extend("Gated")'))
        assert.are.equal(0, code, out)
        local names = "1.gain 1.proj.weight 1.proj.bias 1.norm.weight 1.norm.bias 2.weight 2.bias 1.calls \n"
        assert.is_truthy(out:find(names .. "4\t1\n", 1, true), out)
    end)

    it("the GPU snippet runs on the simulated device", function()
        local out, code = run_snippet(find("ordo.gpu(0)"), "print(model.weight:device())",
                                      "ORDO_SIMULATED_GPUS=1 ORDO_SIMULATED_GPU_MEM_MB=256")
        assert.are.equal(0, code, out)
        assert.is_truthy(out:find("[ordo.FloatTensor of size 3 on cpu(0)]\ngpu(0)\n", 1, true), out)
    end)

    it("the training snippet trains its MLP on Fashion-MNIST", function()
        if not require("ordo").data.fashion_mnist_available() then
            pending("the dataset-fashion-mnist package is not installed (scripts/deps.sh installs it)")
            return
        end
        local out, code = run_snippet(find("data.fashion_mnist("),
            'print(("test accuracy %.3f"):format(nn.accuracy(model, ds.test.images, ds.test.labels)))')
        assert.are.equal(0, code, out)
        local acc = tonumber(out:match("test accuracy ([%d.]+)"))
        assert.is_truthy(acc and acc > 0.8, out)
    end)
end)
