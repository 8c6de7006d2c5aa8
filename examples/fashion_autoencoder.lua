-- examples/fashion_autoencoder.lua: a convolutional autoencoder on
-- Fashion-MNIST.
--
-- usage: build/ordo examples/fashion_autoencoder.lua [options]
--
-- Squeezes each 28x28 image through a code of 32 numbers and back:
--   encoder  Conv2d(1, 16, 3, stride 2) -> ReLU -> Conv2d(16, 32, 3, stride 2)
--            -> ReLU -> Linear(32*7*7, 32)
--   decoder  Linear(32, 32*7*7) -> ReLU -> ConvTranspose2d(32, 16, 3, stride 2)
--            -> ReLU -> ConvTranspose2d(16, 1, 3, stride 2) -> Sigmoid
-- trained to reproduce its input (mean squared error, Adam).  After each
-- epoch it prints the test images' reconstruction error beside that of
-- the best guess that ignores the image (the mean training image), and at
-- the end draws a few test images beside their reconstructions in text.
-- On 2 cores: 0.0111 after 2 epochs (29 s), 7.8 times below the mean
-- image's 0.0866.
--
--   --epochs N       passes over the training set (default 3)
--   --batch N        batch size (default 128)
--   --lr X           Adam's learning rate (default 2e-3)
--   --code N         the code's size (default 32)
--   --limit N        train on the first N images only (quick runs, CI)
--   --test-limit N   evaluate on the first N test images only
--   --show N         test images to draw at the end (default 3; 0: none)
--   --device D       cpu (default) or gpu
--   --seed N         the engine RNG's seed (default 1)
--
-- Data: Debian's dataset-fashion-mnist package (make demo installs it).
local ordo = require "ordo"
local nn, optim, data = ordo.nn, ordo.optim, ordo.data
local fmt = string.format

local here = debug.getinfo(1, "S").source:sub(2):match("^(.*[/\\])") or "./"

local cli = dofile(here .. "cli.lua")

-- Every value is checked before the data loads (examples/cli.lua): an
-- empty set or zero epochs would report the error of nothing (0/0).
local function parse_args(argv)
    return cli.parse(argv, {
        name = "fashion_autoencoder", script = here .. "fashion_autoencoder.lua",
        options = {
            {"--epochs", "epochs", "count", 3},
            {"--batch", "batch", "count", 128},
            {"--lr", "lr", "positive", 2e-3},
            {"--code", "code", "count", 32},
            {"--limit", "limit", "count"},
            {"--test-limit", "test_limit", "count"},
            {"--show", "show", "natural", 3},
            {"--device", "device", "choice", "cpu", choices = {"cpu", "gpu"}},
            {"--seed", "seed", "seed", 1},
        },
    })
end

local opt = parse_args(arg or {})
local device = cli.device("fashion_autoencoder", opt.device)
ordo.manual_seed(opt.seed)

local ds = cli.fashion_mnist("fashion_autoencoder", {limit_train = opt.limit, limit_test = opt.test_limit}) -- pixels in [0, 1]
local train_x, test_x = ds.train.images:to(device), ds.test.images:to(device)

local AE = nn.Module:extend("Autoencoder")
function AE:init(code)
    self.encoder = nn.Sequential(
        nn.Conv2d(1, 16, 3, {stride = 2, padding = 1}), nn.ReLU(),
        nn.Conv2d(16, 32, 3, {stride = 2, padding = 1}), nn.ReLU(),
        nn.Flatten(), nn.Linear(32 * 7 * 7, code))
    self.expand = nn.Sequential(nn.Linear(code, 32 * 7 * 7), nn.ReLU())
    self.decoder = nn.Sequential(
        nn.ConvTranspose2d(32, 16, 3, {stride = 2, padding = 1, output_padding = 1}), nn.ReLU(),
        nn.ConvTranspose2d(16, 1, 3, {stride = 2, padding = 1, output_padding = 1}), nn.Sigmoid())
end
function AE:forward(x)
    local h = self.expand(self.encoder(x))
    return self.decoder(h:view(x:size(1), 32, 7, 7))
end

local model = AE(opt.code):to(device)
local adam = optim.Adam(model:parameters(), {lr = opt.lr})
print(fmt("Fashion-MNIST autoencoder: %d train / %d test images, a code of %d, %d parameters, batch %d, on %s",
          train_x:size(1), test_x:size(1), opt.code, model:num_parameters(), opt.batch, tostring(device)))

-- The error of always answering the mean training image: what a model
-- that learned nothing about the image in front of it would get.
local mean_image = train_x:mean(1, true)
local baseline = ordo.nn.functional.mse_loss(mean_image:expand_as(test_x), test_x):item()

local function test_error()
    model:eval()
    local sum = ordo.zeros({}, {device = device})
    ordo.no_grad(function()
        local n = test_x:size(1)
        for first = 1, n, 500 do
            local xb = test_x:narrow(1, first, math.min(500, n - first + 1))
            sum = sum + nn.functional.mse_loss(model(xb), xb, {reduction = "sum"})
        end
    end)
    model:train()
    return sum:item() / test_x:numel()
end

local wall = ordo.progress.now
local start = wall()
local loader = data.loader(train_x, train_x, {batch_size = opt.batch, shuffle = true})
local err
for epoch = 1, opt.epochs do
    local bar = ordo.progress.bar({total = loader:num_batches(), label = fmt("epoch %d/%d", epoch, opt.epochs)})
    local shown
    for i, xb in loader:iter() do
        adam:zero_grad()
        local loss = nn.functional.mse_loss(model(xb), xb)
        loss:backward()
        adam:step()
        if i % 50 == 0 then shown = loss:item() end
        bar:update(i, shown and {mse = fmt("%.4f", shown)} or nil)
    end
    bar:finish()
    err = test_error()
    print(fmt("epoch %2d  test reconstruction error %.4f  (the mean image: %.4f)  %.1f s", epoch, err, baseline,
              wall() - start))
end
-- (a run too short to learn ends above the mean image's error: say so)
print(fmt("final test reconstruction error %.4f, %.1fx %s the mean image's %.4f", err,
          err <= baseline and baseline / err or err / baseline, err <= baseline and "below" or "above", baseline))

-- Images in text: one character per two pixels, one above the other (14
-- lines of 28: a character is about twice as tall as wide), darker for more ink.
local SHADES = {" ", ".", ":", "-", "=", "+", "*", "#", "%", "@"}
local function draw(img) -- 28 x 28 table
    local rows = {}
    for r = 1, 28, 2 do
        local line = {}
        for c = 1, 28 do
            local v = (img[r][c] + img[r + 1][c]) / 2
            line[c] = SHADES[math.min(#SHADES, math.floor(v * #SHADES) + 1)]
        end
        rows[#rows + 1] = table.concat(line)
    end
    return rows
end

if opt.show > 0 then
    model:eval()
    local shown = math.min(opt.show, test_x:size(1))
    local x = test_x:narrow(1, 1, shown)
    local y = ordo.no_grad(function() return model(x) end)
    local xs, ys = x:totable(), y:totable()
    print("test images (left) and their reconstructions (right):")
    for k = 1, shown do
        local a, b = draw(xs[k][1]), draw(ys[k][1])
        for r = 1, #a do print(a[r] .. "    " .. b[r]) end
        print()
    end
end
