-- examples/fashion_mlp.lua: a multi-layer perceptron trained on Fashion-MNIST.
--
--   build/ordo examples/fashion_mlp.lua [options]      (or: make demo)
--
--   --epochs N       passes over the training set (default 12)
--   --batch N        batch size (default 128)
--   --lr X           Adam's initial learning rate (default 1e-3, cosine decay)
--   --hidden A,B     hidden layer sizes (default 512,256)
--   --limit N        train on the first N images only (quick runs, CI)
--   --test-limit N   evaluate on the first N test images only
--   --device D       cpu (default) or gpu
--   --save PATH      write the trained parameters to PATH
--   --seed N         the engine RNG's seed (default 1): same seed, same run
--
-- Every op is pushed onto the engine and returns at once: the next batch's
-- gather (ordo.data prefetches it), the forward pass, the backward pass and
-- Adam's in-place updates queue up behind each other by their data
-- dependencies.  Lua only waits when it reads a number (the loss shown in
-- the progress bar every few batches, the accuracy at the end of an epoch).
-- Data: Debian's dataset-fashion-mnist package (make demo installs it).
local ordo = require "ordo"
local nn, optim, data = ordo.nn, ordo.optim, ordo.data

local function parse_args(argv)
    local o = {epochs = 12, batch = 128, lr = 1e-3, hidden = {512, 256}, device = "cpu", seed = 1}
    local i = 1
    while i <= #argv do
        local k, v = argv[i], argv[i + 1]
        local function num()
            local n = tonumber(v)
            if not n then error(string.format("fashion_mlp: %s expects a number, got %s", k, tostring(v)), 0) end
            return n
        end
        if k == "--epochs" then o.epochs = num()
        elseif k == "--batch" then o.batch = num()
        elseif k == "--lr" then o.lr = num()
        elseif k == "--limit" then o.limit = num()
        elseif k == "--test-limit" then o.test_limit = num()
        elseif k == "--seed" then o.seed = num()
        elseif k == "--device" then o.device = v
        elseif k == "--save" then o.save = v
        elseif k == "--hidden" then
            o.hidden = {}
            for h in tostring(v):gmatch("%d+") do o.hidden[#o.hidden + 1] = tonumber(h) end
        elseif k == "-h" or k == "--help" then
            io.write((io.open(debug.getinfo(1, "S").source:sub(2)):read("*a"):match("^(.-)\nlocal")), "\n")
            os.exit(0)
        else
            error("fashion_mlp: unknown option " .. tostring(k) .. " (see --help)", 0)
        end
        i = i + 2
    end
    return o
end

local opt = parse_args(arg or {})
local device = opt.device == "gpu" and ordo.gpu(0) or ordo.cpu(0)
ordo.manual_seed(opt.seed)

local ds = data.fashion_mnist({flatten = true, normalize = true, limit_train = opt.limit, limit_test = opt.test_limit})
local train_x, train_y = ds.train.images:to(device), ds.train.labels:to(device)
local test_x, test_y = ds.test.images:to(device), ds.test.labels:to(device)

local layers, width = {}, 784
for _, h in ipairs(opt.hidden) do
    layers[#layers + 1] = nn.Linear(width, h)
    layers[#layers + 1] = nn.ReLU()
    layers[#layers + 1] = nn.Dropout(0.2)
    width = h
end
layers[#layers + 1] = nn.Linear(width, 10)
local model = nn.Sequential(layers):to(device)
local adam = optim.Adam(model:parameters(), {lr = opt.lr})
local criterion = nn.CrossEntropyLoss()

print(string.format("Fashion-MNIST MLP: %d train / %d test images, %d parameters, batch %d, Adam lr %g, on %s",
                    train_x:size(1), test_x:size(1), model:num_parameters(), opt.batch, opt.lr, tostring(device)))

-- Accuracy on (x, y) in eval mode, batch by batch; one wait at the end.
local function accuracy(x, y)
    model:eval()
    local correct = ordo.no_grad(function()
        local total = ordo.zeros({}, {dtype = "int64"})
        for _, xb, yb in data.loader(x, y, {batch_size = 1000}):iter() do
            total = total + model(xb):argmax(2):eq(yb):sum()
        end
        return total:item()
    end)
    model:train()
    return correct / y:size(1)
end

local wall = ordo.progress.now -- seconds, monotonic

local loader = data.loader(train_x, train_y, {batch_size = opt.batch, shuffle = true})
local total_start = wall()
local acc
for epoch = 1, opt.epochs do
    local start = wall()
    -- cosine learning-rate schedule: big steps first, small ones to settle
    adam.lr = opt.lr * 0.5 * (1 + math.cos(math.pi * (epoch - 1) / opt.epochs))
    local bar = ordo.progress.bar({total = loader:num_batches(), label = string.format("epoch %d/%d", epoch, opt.epochs)})
    local loss_sum = ordo.zeros({})
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
    acc = accuracy(test_x, test_y)
    local secs = wall() - start
    print(string.format("epoch %2d  loss %.4f  test accuracy %.2f%%  %.1f s  (%.0f images/s)", epoch, mean_loss,
                        100 * acc, secs, train_x:size(1) / secs))
end
print(string.format("final test accuracy %.2f%% after %d epochs in %.1f s", 100 * acc, opt.epochs, wall() - total_start))
if opt.save then
    model:save(opt.save)
    print("parameters saved to " .. opt.save)
end
