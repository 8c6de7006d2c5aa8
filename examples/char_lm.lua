-- examples/char_lm.lua: a character-level language model, an LSTM or a
-- small transformer.
--
-- usage: build/ordo examples/char_lm.lua [options]
--
-- Learns to predict each character of a text (by default this checkout's
-- README.md) from the characters before it, then writes new text with
-- what it learned, one sampled character at a time.  Over the V distinct
-- bytes of the text:
--   lstm (default):  Embedding(V, 32) -> LSTM(32, hidden) -> Linear(hidden, V)
--   transformer:     Embedding(V, hidden) + a learned position embedding ->
--                    2 blocks of causal MultiheadAttention (4 heads) and an
--                    MLP (hidden -> 4 hidden -> hidden, GELU), each behind a
--                    LayerNorm with a residual connection -> LayerNorm ->
--                    Linear(hidden, V)
-- Cross-entropy at every position, Adam, gradients clipped to norm 1.
-- Each step trains on batch sequences drawn at random places in the text.
-- On the README (V about 110, 2 cores), from log V = 4.7 nats per
-- character (guessing), the LSTM gets to about 2.3 in the default 400
-- steps (20 s) and 1.8 in 1000, the transformer to 2.2 and 1.65 in the
-- same times; by then the samples look like words and markdown.
--
--   --model M        lstm (default) or transformer
--   --text PATH      the text to learn (default: the README.md beside examples/)
--   --steps N        training steps (default 400)
--   --seq N          characters per training sequence, and the context when writing (default 32)
--   --batch N        sequences per step (default 32)
--   --hidden N       the model's width (default 128 for lstm, 64 for transformer; a multiple of 4 for it)
--   --lr X           Adam's learning rate (default 3e-3)
--   --sample N       characters to write at the end (default 300; 0: none)
--   --temperature X  sampling temperature: below 1 safer, above 1 wilder (default 0.8)
--   --device D       cpu (default) or gpu
--   --seed N         the engine RNG's seed (default 1): same seed, same run
--
-- Every op of a step is pushed at once: the batch's gather, the forward
-- pass, the backward pass, clipping and Adam queue up by their data
-- dependencies, and Lua waits only when it prints a loss.
local ordo = require "ordo"
local nn, optim = ordo.nn, ordo.optim
local F = nn.functional
local fmt = string.format

local here = debug.getinfo(1, "S").source:sub(2):match("^(.*[/\\])") or "./"

local cli = dofile(here .. "cli.lua")

-- Every value is checked before any work (examples/cli.lua), each error
-- naming its option: zero steps would print the loss of no step, and a
-- nan temperature would sample from nan probabilities.
local function parse_args(argv)
    local o = cli.parse(argv, {
        name = "char_lm", script = here .. "char_lm.lua",
        options = {
            {"--model", "model", "choice", "lstm", choices = {"lstm", "transformer"}},
            {"--text", "text", "file", here .. "../README.md"},
            {"--steps", "steps", "count", 400},
            {"--seq", "seq", "count", 32},
            {"--batch", "batch", "count", 32},
            {"--hidden", "hidden", "count"},
            {"--lr", "lr", "positive", 3e-3},
            {"--sample", "sample", "natural", 300},
            {"--temperature", "temperature", "positive", 0.8},
            {"--device", "device", "choice", "cpu", choices = {"cpu", "gpu"}},
            {"--seed", "seed", "seed", 1},
        },
    })
    o.hidden = o.hidden or (o.model == "lstm" and 128 or 64)
    if o.model == "transformer" and o.hidden % 4 ~= 0 then
        cli.die("char_lm", fmt("--hidden must be a multiple of 4 for the transformer (4 heads), got %d", o.hidden))
    end
    return o
end

local opt = parse_args(arg or {})
local device = cli.device("char_lm", opt.device)
ordo.manual_seed(opt.seed)
math.randomseed(opt.seed) -- the sampling at the end draws in Lua

local f, err = io.open(opt.text, "rb")
if not f then cli.die("char_lm", "--text: cannot read " .. tostring(err)) end
local text, rerr = f:read("*a")
f:close()
if not text then cli.die("char_lm", fmt("--text: cannot read %s: %s", opt.text, tostring(rerr))) end
if #text < opt.seq + 2 then
    cli.die("char_lm", fmt("--text %s has %d characters, fewer than --seq + 2 = %d", opt.text, #text, opt.seq + 2))
end

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

-- Both models map T x N character ids to T x N x V logits.
local LSTM_LM = nn.Module:extend("LSTMLM")
function LSTM_LM:init(vocab, hidden)
    self.embed = nn.Embedding(vocab, 32)
    self.lstm = nn.LSTM(32, hidden)
    self.head = nn.Linear(hidden, vocab)
end
function LSTM_LM:forward(x)
    local out = self.lstm(self.embed(x))
    local T, N = out:size(1), out:size(2)
    return self.head(out:reshape(T * N, out:size(3))):view(T, N, -1)
end

-- A pre-norm transformer block: x + attention(norm(x)), then x + mlp(norm(x)).
local Block = nn.Module:extend("Block")
function Block:init(width, heads)
    self.norm1 = nn.LayerNorm(width)
    self.attn = nn.MultiheadAttention(width, heads)
    self.norm2 = nn.LayerNorm(width)
    self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
end
function Block:forward(x)
    local h = self.norm1(x)
    x = x + self.attn(h, h, h, {is_causal = true, need_weights = false})
    return x + self.mlp(self.norm2(x))
end

local Transformer_LM = nn.Module:extend("TransformerLM")
function Transformer_LM:init(vocab, width, context)
    self.embed = nn.Embedding(vocab, width)
    self.position = nn.Embedding(context, width)
    self.blocks = nn.Sequential(Block(width, 4), Block(width, 4))
    self.norm = nn.LayerNorm(width)
    self.head = nn.Linear(width, vocab)
end
function Transformer_LM:forward(x)
    local T = x:size(1)
    local pos = ordo.arange(1, T + 1, {dtype = "int64", device = x:device()}):view(T, 1)
    local h = self.norm(self.blocks(self.embed(x) + self.position(pos)))
    return self.head(h)
end

local model = (opt.model == "lstm" and LSTM_LM(V, opt.hidden) or Transformer_LM(V, opt.hidden, opt.seq)):to(device)
local params = model:parameters()
local adam = optim.Adam(params, {lr = opt.lr})
print(fmt("char_lm: %s model, %s, %d characters, %d distinct; %d parameters; %d steps of %d x %d characters, "
          .. "Adam lr %g, on %s", opt.model, opt.text, #text, V, model:num_parameters(), opt.steps, opt.batch, opt.seq,
          opt.lr, tostring(device)))

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

-- Writing: run the model on the last seq characters written and draw the
-- next one from softmax(logits / temperature) at the last position.
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
    local ids_out = {}
    for i = 1, #prompt do ids_out[i] = id_of[prompt:sub(i, i)] end
    ordo.no_grad(function()
        for _ = 1, opt.sample do
            local first = math.max(1, #ids_out - opt.seq + 1)
            local window = {}
            for i = first, #ids_out do window[#window + 1] = {ids_out[i]} end
            local logits = model(ordo.tensor(window, {dtype = "int64", device = device}))
            local probs = (logits[#window]:view(V) / opt.temperature):softmax(1):totable()
            ids_out[#ids_out + 1] = draw(probs)
        end
    end)
    local chars = {}
    for i, k in ipairs(ids_out) do chars[i] = char_of[k] end
    print(fmt("sample (temperature %g):\n%s", opt.temperature, table.concat(chars)))
end
