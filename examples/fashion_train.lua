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

-- Options common to both examples; spec.sizes_flag ("--hidden",
-- "--width") fills opt.sizes with a comma-separated list.
local function parse_args(spec, argv)
    local o = {device = "cpu", seed = 1, lr = 1e-3}
    for k, v in pairs(spec.defaults) do o[k] = v end
    local numeric = {["--epochs"] = "epochs", ["--batch"] = "batch", ["--lr"] = "lr", ["--limit"] = "limit",
                     ["--test-limit"] = "test_limit", ["--seed"] = "seed"}
    local i = 1
    while i <= #argv do
        local k, v = argv[i], argv[i + 1]
        if numeric[k] then
            o[numeric[k]] = tonumber(v) or error(string.format("%s: %s expects a number, got %s", spec.name, k,
                                                               tostring(v)), 0)
        elseif k == "--device" then o.device = v
        elseif k == "--save" then o.save = v
        elseif k == spec.sizes_flag then
            o.sizes = {}
            for h in tostring(v):gmatch("%d+") do o.sizes[#o.sizes + 1] = tonumber(h) end
        elseif k == "-h" or k == "--help" then
            local f = io.open(spec.script)
            io.write((f:read("*a"):match("^(.-)\nlocal")), "\n")
            f:close()
            os.exit(0)
        else
            error(spec.name .. ": unknown option " .. tostring(k) .. " (see --help)", 0)
        end
        i = i + 2
    end
    return o
end

-- spec: name, title, script (its path, for --help), defaults (epochs,
-- batch, sizes), sizes_flag, flatten (images as N x 784), model(opt)
-- (returns the module on the CPU).
return function(spec)
    local opt = parse_args(spec, arg or {})
    local device = opt.device == "gpu" and ordo.gpu(0) or ordo.cpu(0)
    ordo.manual_seed(opt.seed)

    local ds = data.fashion_mnist({flatten = spec.flatten, normalize = true, limit_train = opt.limit,
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

    local wall = ordo.progress.now -- seconds, monotonic
    local loader = data.loader(train_x, train_y, {batch_size = opt.batch, shuffle = true})
    local total_start = wall()
    local acc
    for epoch = 1, opt.epochs do
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
    end
    print(string.format("final test accuracy %.2f%% after %d epochs in %.1f s", 100 * acc, opt.epochs,
                        wall() - total_start))
    if opt.save then
        model:save(opt.save)
        print("parameters saved to " .. opt.save)
    end
    return model, acc
end
