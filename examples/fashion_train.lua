-- examples/fashion_train.lua: the command line and training loop shared by
-- fashion_mlp.lua and fashion_cnn.lua (they load it with dofile and give
-- it their model).
--
-- Every op is pushed onto the engine and returns at once: the next batch's
-- gather (ordo.data prefetches it), the forward pass, the backward pass and
-- Adam's in-place updates queue up behind each other by their data
-- dependencies.  Lua only waits when it reads a number (the loss shown in
-- the progress bar every few batches, the accuracy at the end of an epoch).
local ordo = require "ordo"
local nn, optim, data = ordo.nn, ordo.optim, ordo.data

local here = debug.getinfo(1, "S").source:sub(2):match("^(.*[/\\])") or "./"
local cli = dofile(here .. "cli.lua")

-- Run directly, this file says what it is for (it only defines the loop).
if arg and type(arg[0]) == "string" and debug.getinfo(1, "S").source == "@" .. arg[0] then
    local help = false
    for i = 1, #arg do help = help or arg[i] == "-h" or arg[i] == "--help" end
    local out = help and io.stdout or io.stderr
    out:write("examples/fashion_train.lua is the training loop of fashion_mlp.lua and fashion_cnn.lua; run one " ..
              "of those (e.g. build/ordo examples/fashion_mlp.lua --help)\n")
    os.exit(help and 0 or 2)
end

-- Options common to both examples (see examples/cli.lua); spec.sizes_flag
-- ("--hidden", "--width") fills opt.sizes with a comma-separated list of
-- spec.sizes_count sizes (any number when nil).  Every value is checked
-- here, before the data loads: an empty training or test set would give
-- a loss and an accuracy of nothing (0/0), and a device other than cpu or
-- gpu would quietly run on the CPU.
local function parse_args(spec, argv)
    local d = spec.defaults
    return cli.parse(argv, {
        name = spec.name, script = spec.script,
        options = {
            {"--epochs", "epochs", "count", d.epochs},
            {"--batch", "batch", "count", d.batch},
            {"--lr", "lr", "positive", 1e-3},
            {spec.sizes_flag, "sizes", "sizes", d.sizes, n = spec.sizes_count},
            {"--limit", "limit", "count"},
            {"--test-limit", "test_limit", "count"},
            {"--device", "device", "choice", "cpu", choices = {"cpu", "gpu"}},
            {"--save", "save", "outfile"},
            {"--checkpoint", "checkpoint", "outfile"},
            {"--seed", "seed", "seed", 1},
        },
    })
end

-- spec: name, title, script (its path, for --help), defaults (epochs,
-- batch, sizes), sizes_flag, sizes_count, flatten (images as N x 784),
-- model(opt) (returns the module on the CPU).
return function(spec)
    local opt = parse_args(spec, arg or {})
    if opt.checkpoint and ordo.file_kind(opt.checkpoint) == "other" then
        cli.die(spec.name, string.format("--checkpoint: %s is not a regular file (a run reads it back)",
                                         opt.checkpoint))
    end
    local device = cli.device(spec.name, opt.device)
    ordo.manual_seed(opt.seed)

    local ds = cli.fashion_mnist(spec.name, {flatten = spec.flatten, normalize = true, limit_train = opt.limit,
                                   limit_test = opt.test_limit})
    local train_x, train_y = ds.train.images:to(device), ds.train.labels:to(device)
    local test_x, test_y = ds.test.images:to(device), ds.test.labels:to(device)

    local model = spec.model(opt):to(device)
    local adam = optim.Adam(model:parameters(), {lr = opt.lr})
    -- cosine learning-rate schedule over the run: big steps first, small ones to settle
    local schedule = optim.lr_scheduler.CosineAnnealingLR(adam, {T_max = opt.epochs})
    local criterion = nn.CrossEntropyLoss()
    print(string.format("Fashion-MNIST %s: %d train / %d test images, %d parameters, batch %d, Adam lr %g, on %s",
                        spec.title, train_x:size(1), test_x:size(1), model:num_parameters(), opt.batch, opt.lr,
                        tostring(device)))

    -- --checkpoint PATH: the parameters (PATH), Adam's state (PATH.adam) and
    -- the schedule (PATH.sched, which counts the epochs done) are saved after
    -- every epoch, each file whole or not at all, with the random generators'
    -- states (PATH.rng: the batches' order, dropout); started again with the
    -- same options (after a Ctrl-C, a crash), the run goes on from the last
    -- epoch saved, bit for bit as the run that was not stopped.
    local ck, first_epoch = opt.checkpoint, 1
    if ck and ordo.file_kind(ck) == "file" then
        local ok, err = pcall(function()
            model:load(ck)
            adam:load(ck .. ".adam")
            schedule:load(ck .. ".sched")
            if ordo.file_kind(ck .. ".rng") == "file" then -- (checkpoints from before it go on without)
                local rng = ordo.load(ck .. ".rng")
                ordo.set_rng_state(rng.cpu)
                if rng.device then ordo.set_rng_state(rng.device, device) end
            end
        end)
        if not ok and tostring(err):find("interrupted!?$") then error(err, 0) end -- (Ctrl-C: not a bad file)
        if not ok then
            cli.die(spec.name, string.format("--checkpoint: cannot resume from %s (same options?): %s", ck,
                                             (tostring(err):gsub("^[^\n]-:%d+: ", ""))))
        end
        first_epoch = schedule:state_dict().epoch + 1
        print(string.format("resuming from %s: %d of %d epochs done", ck, first_epoch - 1, opt.epochs))
    end

    local wall = ordo.progress.now -- seconds, monotonic
    local loader = data.loader(train_x, train_y, {batch_size = opt.batch, shuffle = true})
    local total_start = wall()
    local acc
    for epoch = first_epoch, opt.epochs do
        local start = wall()
        local bar = ordo.progress.bar({total = loader:num_batches(),
                                       label = string.format("epoch %d/%d", epoch, opt.epochs)})
        local loss_sum = ordo.zeros({}, {device = device})
        local shown
        for i, xb, yb in loader:iter() do
            adam:zero_grad()
            local loss = criterion(model(xb), yb)
            loss:backward()
            adam:step()
            loss_sum = loss_sum + loss:detach()
            -- reading the loss waits for this batch: only now and then
            if i % 50 == 0 then shown = loss:item() end
            bar:update(i, shown and {loss = string.format("%.4f", shown)} or nil)
        end
        local mean_loss = loss_sum:item() / loader:num_batches()
        bar:finish()
        acc = nn.accuracy(model, test_x, test_y)
        local secs = wall() - start
        print(string.format("epoch %2d  loss %.4f  test accuracy %.2f%%  %.1f s  (%.0f images/s)", epoch, mean_loss,
                            100 * acc, secs, train_x:size(1) / secs))
        schedule:step()
        if ck then -- (the schedule last: it says which epochs are done)
            model:save(ck)
            adam:save(ck .. ".adam")
            local rng = {cpu = ordo.get_rng_state()}
            if opt.device == "gpu" then rng.device = ordo.get_rng_state(device) end
            ordo.save(rng, ck .. ".rng")
            schedule:save(ck .. ".sched")
        end
    end
    acc = acc or nn.accuracy(model, test_x, test_y) -- (a checkpoint that had every epoch done)
    print(string.format("final test accuracy %.2f%% after %d epoch%s in %.1f s", 100 * acc, opt.epochs,
                        opt.epochs == 1 and "" or "s", wall() - total_start))
    if opt.save then
        model:save(opt.save)
        print("parameters saved to " .. opt.save)
    end
    return model, acc
end
