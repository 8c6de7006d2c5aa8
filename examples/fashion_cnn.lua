-- examples/fashion_cnn.lua: a small convolutional network trained on Fashion-MNIST.
--
-- usage: build/ordo examples/fashion_cnn.lua [options]
--
-- conv 3x3 (1 -> 32) + batch norm + ReLU + max pool 2, conv 3x3 (32 -> 64)
-- + batch norm + ReLU + max pool 2, then 3136 -> 128 -> 10 with dropout
-- 0.3; Adam with a cosine schedule.  Convolutions are im2col + BLAS
-- (kernels/cpu/conv.c).
--
--   --epochs N       passes over the training set (default 6)
--   --batch N        batch size (default 64)
--   --lr X           Adam's initial learning rate (default 1e-3, cosine decay)
--   --width A,B      channels of the two conv layers (default 32,64)
--   --limit N        train on the first N images only (quick runs, CI)
--   --test-limit N   evaluate on the first N test images only
--   --device D       cpu (default) or gpu
--   --save PATH      write the trained parameters to PATH
--   --checkpoint P   save the run after every epoch (P, P.adam, P.sched);
--                    run again with the same options, it goes on from there
--   --seed N         the engine RNG's seed (default 1): same seed, same run
--
-- The training loop is in fashion_train.lua, beside this file.
local ordo = require "ordo"
local nn = ordo.nn

local here = debug.getinfo(1, "S").source:sub(2):match("^(.*[/\\])") or "./"
local train = dofile(here .. "fashion_train.lua")

train({
    name = "fashion_cnn", title = "CNN", script = here .. "fashion_cnn.lua", flatten = false,
    defaults = {epochs = 6, batch = 64, sizes = {32, 64}}, sizes_flag = "--width", sizes_count = 2,
    model = function(opt)
        local c1, c2 = opt.sizes[1], opt.sizes[2]
        return nn.Sequential(
            nn.Conv2d(1, c1, 3, {padding = 1}), nn.BatchNorm2d(c1), nn.ReLU(), nn.MaxPool2d(2),  -- 28 -> 14
            nn.Conv2d(c1, c2, 3, {padding = 1}), nn.BatchNorm2d(c2), nn.ReLU(), nn.MaxPool2d(2), -- 14 -> 7
            nn.Flatten(),
            nn.Linear(c2 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.3),
            nn.Linear(128, 10))
    end,
})
