-- examples/char_lstm.lua: a character-level LSTM language model.
--
--   build/ordo examples/char_lstm.lua [options]
--
-- Learns to predict each character of a text (by default this checkout's
-- README.md) from the characters before it, then writes new text with
-- what it learned, one sampled character at a time.  Embedding(V, 32) ->
-- LSTM(32, hidden) -> Linear(hidden, V) over the V distinct bytes of the
-- text; cross-entropy at every position, Adam, gradients clipped to norm
-- 1.  Each step trains on batch sequences drawn at random places in the
-- text.  On the README (V about 110, on 2 cores): from log V = 4.7 nats
-- per character (guessing) to about 2.3 in the default 400 steps (20 s),
-- 1.8 in 1000, when the samples start to look like words and markdown.
--
--   --text PATH      the text to learn (default: the README.md beside examples/)
--   --steps N        training steps (default 400)
--   --seq N          characters per training sequence (default 32)
--   --batch N        sequences per step (default 32)
--   --hidden N       LSTM width (default 128)
--   --lr X           Adam's learning rate (default 3e-3)
--   --sample N       characters to write at the end (default 300)
--   --temperature X  sampling temperature: below 1 safer, above 1 wilder (default 0.8)
--   --device D       cpu (default) or gpu
--   --seed N         the engine RNG's seed (default 1): same seed, same run
--
-- Every op of a step is pushed at once: the batch's gather, the unrolled
-- LSTM, the backward pass through time, clipping and Adam queue up by
-- their data dependencies, and Lua waits only when it prints a loss.
local ordo = require "ordo"
local nn, optim = ordo.nn, ordo.optim
local F = nn.functional
local fmt = string.format

local here = debug.getinfo(1, "S").source:sub(2):match("^(.*[/\\])") or "./"

local function parse_args(argv)
    local o = {text = here .. "../README.md", steps = 400, seq = 32, batch = 32, hidden = 128, lr = 3e-3,
               sample = 300, temperature = 0.8, device = "cpu", seed = 1}
    local numeric = {["--steps"] = "steps", ["--seq"] = "seq", ["--batch"] = "batch", ["--hidden"] = "hidden",
                     ["--lr"] = "lr", ["--sample"] = "sample", ["--temperature"] = "temperature", ["--seed"] = "seed"}
    local i = 1
    while i <= #argv do
        local k, v = argv[i], argv[i + 1]
        if numeric[k] then
            o[numeric[k]] = tonumber(v) or error(fmt("char_lstm: %s expects a number, got %s", k, tostring(v)), 0)
        elseif k == "--text" then o.text = v
        elseif k == "--device" then o.device = v
        elseif k == "-h" or k == "--help" then
            local f = io.open(here .. "char_lstm.lua")
            io.write((f:read("*a"):match("^(.-)\nlocal")), "\n")
            f:close()
            os.exit(0)
        else
            error("char_lstm: unknown option " .. tostring(k) .. " (see --help)", 0)
        end
        i = i + 2
    end
    if o.temperature <= 0 then error("char_lstm: --temperature must be positive", 0) end
    return o
end

local opt = parse_args(arg or {})
local device = opt.device == "gpu" and ordo.gpu(0) or ordo.cpu(0)
ordo.manual_seed(opt.seed)
math.randomseed(opt.seed) -- the sampling at the end draws in Lua

local f = io.open(opt.text, "rb") or error("char_lstm: cannot read " .. opt.text, 0)
local text = f:read("*a")
f:close()
if #text < opt.seq + 2 then error(fmt("char_lstm: %s has %d characters, fewer than --seq + 2", opt.text, #text), 0) end

-- The vocabulary: the bytes the text uses, numbered from 1 (Embedding's
-- and cross_entropy's indices count from 1).
local id_of, char_of = {}, {}
for i = 1, #text do
    local ch = text:sub(i, i)
    if not id_of[ch] then
        char_of[#char_of + 1] = ch
        id_of[ch] = #char_of
    end
end
local V = #char_of
local ids = {}
for i = 1, #text do ids[i] = id_of[text:sub(i, i)] end
local data = ordo.tensor(ids, {dtype = "int64", device = device})

local LM = nn.Module:extend("CharLM")
function LM:init(vocab, hidden)
    self.embed = nn.Embedding(vocab, 32)
    self.lstm = nn.LSTM(32, hidden)
    self.head = nn.Linear(hidden, vocab)
end
-- x: T x N character ids -> T x N x V logits, and the LSTM's last state
function LM:forward(x, h, c)
    local out
    out, h, c = self.lstm(self.embed(x), h, c)
    local T, N = out:size(1), out:size(2)
    return self.head(out:reshape(T * N, out:size(3))):view(T, N, -1), h, c
end

local model = LM(V, opt.hidden):to(device)
local params = model:parameters()
local adam = optim.Adam(params, {lr = opt.lr})
print(fmt("char_lstm: %s, %d characters, %d distinct; %d parameters; %d steps of %d x %d characters, Adam lr %g, on %s",
          opt.text, #text, V, model:num_parameters(), opt.steps, opt.batch, opt.seq, opt.lr, tostring(device)))

-- A batch: opt.batch windows of seq + 1 characters at random places, as
-- one gather: inputs are the first seq, targets the last seq.
local offsets = ordo.arange(0, opt.seq + 1, {dtype = "int64", device = device}):view(opt.seq + 1, 1)
local function batch()
    local starts = ordo.randint(1, #text - opt.seq + 1, {1, opt.batch}, {device = device})
    local window = data:index_select(1, (starts + offsets):reshape(-1)):view(opt.seq + 1, opt.batch)
    return window:narrow(1, 1, opt.seq), window:narrow(1, 2, opt.seq)
end

local wall = ordo.progress.now
local start = wall()
local bar = ordo.progress.bar({total = opt.steps, label = "training"})
local first, last, shown
local every = math.max(1, math.floor(opt.steps / 20))
for step = 1, opt.steps do
    local x, y = batch()
    adam:zero_grad()
    local logits = model(x)
    local loss = F.cross_entropy(logits:reshape(opt.seq * opt.batch, V), y:reshape(-1))
    loss:backward()
    nn.utils.clip_grad_norm_(params, 1.0)
    adam:step()
    -- reading the loss waits for this step: only now and then
    if step == 1 or step % every == 0 or step == opt.steps then
        shown = loss:item()
        first = first or shown
        last = shown
    end
    bar:update(step, {loss = fmt("%.3f", shown)})
end
bar:finish()
local secs = wall() - start
print(fmt("loss %.3f -> %.3f nats per character (guessing: %.3f) in %.1f s, %.0f characters/s", first, last,
          math.log(V), secs, opt.steps * opt.batch * opt.seq / secs))

-- Writing: feed one character at a time, keeping the LSTM's state, and
-- draw the next from softmax(logits / temperature).
local function draw(probs)
    local r, acc = math.random(), 0
    for k = 1, #probs do
        acc = acc + probs[k]
        if r <= acc then return k end
    end
    return #probs
end

if opt.sample > 0 then
    model:eval()
    local prompt = text:match("%a+") or text:sub(1, 1)
    local out = {prompt}
    ordo.no_grad(function()
        local h, c
        local logits
        for i = 1, #prompt do
            local x = ordo.tensor({{id_of[prompt:sub(i, i)]}}, {dtype = "int64", device = device})
            logits, h, c = model(x, h, c)
        end
        for _ = 1, opt.sample do
            local probs = (logits:view(V) / opt.temperature):softmax(1):totable()
            local k = draw(probs)
            out[#out + 1] = char_of[k]
            logits, h, c = model(ordo.tensor({{k}}, {dtype = "int64", device = device}), h, c)
        end
    end)
    print(fmt("sample (temperature %g):\n%s", opt.temperature, table.concat(out)))
end
