-- examples/fashion_mlp.lua: a multi-layer perceptron trained on Fashion-MNIST.
--
-- usage: build/ordo examples/fashion_mlp.lua [options]      (or: make demo)
--
-- 784 -> 512 -> 256 -> 10, ReLU and dropout 0.2 between the layers, Adam
-- with a cosine learning-rate schedule; about 90% test accuracy in 12
-- epochs (a minute on 2 cores).
--
--   --epochs N       passes over the training set (default 12)
--   --batch N        batch size (default 128)
--   --lr X           Adam's initial learning rate (default 1e-3, cosine decay)
--   --hidden A,B     hidden layer sizes, one or more (default 512,256)
--   --limit N        train on the first N images only (quick runs, CI)
--   --test-limit N   evaluate on the first N test images only
--   --device D       cpu (default) or gpu
--   --save PATH      write the trained parameters to PATH
--   --checkpoint P   save the run after every epoch (P, P.adam, P.sched);
--                    run again with the same options, it goes on from there
--   --seed N         the engine RNG's seed (default 1): same seed, same run
--
-- Data: Debian's dataset-fashion-mnist package (make demo installs it).
-- The training loop is in fashion_train.lua, beside this file.
local ordo = require "ordo"
local nn = ordo.nn

local here = debug.getinfo(1, "S").source:sub(2):match("^(.*[/\\])") or "./"
local train = dofile(here .. "fashion_train.lua")

train({
    name = "fashion_mlp", title = "MLP", script = here .. "fashion_mlp.lua", flatten = true,
    defaults = {epochs = 12, batch = 128, sizes = {512, 256}}, sizes_flag = "--hidden",
    model = function(opt)
        local layers, width = {}, 784
        for _, h in ipairs(opt.sizes) do
            layers[#layers + 1] = nn.Linear(width, h)
            layers[#layers + 1] = nn.ReLU()
            layers[#layers + 1] = nn.Dropout(0.2)
            width = h
        end
        layers[#layers + 1] = nn.Linear(width, 10)
        return nn.Sequential(layers)
    end,
})
