-- ordo.repl: the REPL's Lua half.  The launcher (src/launcher/repl.c)
-- reads lines -- GNU readline on a terminal, plain reads on a pipe -- and
-- calls, on the main Lua state:
--
--   repl.start(interactive)   globals `ordo` and `help`; the banner on a terminal
--   repl.feed(line)           -> "ok" | "more" (chunk incomplete) | "error" | "quit"
--   repl.prompt()             "ordo> ", or "....> " inside an unfinished chunk
--   repl.reset()              Ctrl-C at the prompt: forget the unfinished chunk
--   repl.complete(word)       Tab: candidates for "pri", "ordo.engine.wa", "t:resh"
--   repl.finish()             end of input: waits for the engine, -> exit status
--
-- A line is first compiled as `return <line>`, so expressions print their
-- values (a trailing `;` keeps them quiet; `_` holds the first one), then
-- as a statement; a chunk whose error is at '<eof>' waits for more lines
-- (lua.c's test).  Errors print a message and a short traceback on stderr
-- and the loop goes on.  Lines starting with ':' are commands (:help,
-- :time on|off, :quit).  The functions here work without the launcher too
-- (the specs call them directly).
local M = {}

local PROMPT, PROMPT2 = "ordo> ", "....> "
local MAX_DEPTH = 3  -- nested tables shown; deeper ones print as {...}
local MAX_ITEMS = 40 -- entries shown per table
local WIDTH = 78     -- a table that fits on one line of this width stays on one

local type, tostring, select, next, rawget, rawset, pairs, ipairs, pcall, xpcall, getmetatable =
    type, tostring, select, next, rawget, rawset, pairs, ipairs, pcall, xpcall, getmetatable
local concat, sort, floor = table.concat, table.sort, math.floor
local fmt = string.format
local getmt = debug.getmetatable

local S = {
    buf = nil,          -- the unfinished chunk, lines joined by "\n"
    time = false,       -- :time on
    interactive = false,
    errors = 0,         -- commands that failed (the exit status on a pipe)
}
M.state = S

local host = package.loaded["ordo.launcher"]

local function clock()
    if host then return host.now() end
    return os.clock()
end

-- ---------------------------------------------------------------- printing values

local KEYWORDS = {"and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto",
                  "if", "in", "local", "nil", "not", "or", "repeat", "return", "then", "true",
                  "until", "while"}
local IS_KEYWORD = {}
for _, k in ipairs(KEYWORDS) do IS_KEYWORD[k] = true end

local function is_ident(k)
    return type(k) == "string" and k:match("^[%a_][%w_]*$") ~= nil and not IS_KEYWORD[k]
end

-- (util.quote is the same, for the values error messages show)
local function quote(s)
    return (fmt("%q", s):gsub("\\\n", "\\n"))
end

local function has_tostring(v)
    local mt = getmetatable(v)
    return type(mt) == "table" and rawget(mt, "__tostring") ~= nil
end

local render

local function render_table(t, depth, path, indent)
    if path[t] then return "{<cycle>}" end
    if depth > MAX_DEPTH then return "{...}" end
    path[t] = true
    local items, shown, more = {}, 0, 0
    local inner = indent .. "  "
    local n = 0
    while rawget(t, n + 1) ~= nil do
        n = n + 1
        if shown < MAX_ITEMS then
            shown = shown + 1
            items[shown] = render(rawget(t, n), depth + 1, path, inner)
        else
            more = more + 1
        end
    end
    -- a key that is a tensor or a module shows as inside a table (a
    -- tensor key printed its values over several lines, and sorting the
    -- keys read them: a wait, and a failed op's error instead of the table)
    local keys, text = {}, {}
    for k in next, t do
        if not (type(k) == "number" and k >= 1 and k <= n and k == floor(k)) then
            keys[#keys + 1] = k
            local tk = type(k)
            text[k] = is_ident(k) and k or tk == "string" and "[" .. quote(k) .. "]"
                or (tk == "table" or tk == "userdata") and "[" .. render(k, depth + 1, path, inner) .. "]"
                or "[" .. tostring(k) .. "]"
        end
    end
    sort(keys, function(a, b)
        local ta, tb = type(a), type(b)
        if ta ~= tb then return ta < tb end
        if ta == "number" or ta == "string" then return a < b end
        return text[a] < text[b]
    end)
    for _, k in ipairs(keys) do
        if shown < MAX_ITEMS then
            shown = shown + 1
            items[shown] = text[k] .. " = " .. render(rawget(t, k), depth + 1, path, inner)
        else
            more = more + 1
        end
    end
    path[t] = nil
    if more > 0 then items[#items + 1] = fmt("... (%d more)", more) end
    if #items == 0 then return "{}" end
    local one = "{" .. concat(items, ", ") .. "}"
    if #indent + #one <= WIDTH and not one:find("\n", 1, true) then return one end
    return "{\n" .. inner .. concat(items, ",\n" .. inner) .. "\n" .. indent .. "}"
end

-- One line for a value whose tostring spans several, inside a table: a
-- tensor's last line is its summary ("[ordo.FloatTensor of size 2x3 on
-- cpu(0)]"); anything else (a Sequential: "Sequential\n  (1): Linear...")
-- is named by its first line, its last being only a part of it.
local function one_line(s)
    local last = s:match("([^\n]*)\n*$")
    if last:match("^%[.*%]$") then return last end
    return s:match("^\n*([^\n]*)") .. " {...}"
end

-- A value as the REPL shows it: strings as they are at the top and quoted
-- inside tables; tensors (and anything with __tostring) by tostring --
-- inside a table on one line (one_line; a tensor its summary, values not
-- read); plain tables to MAX_DEPTH levels.
function render(v, depth, path, indent)
    local tv = type(v)
    if tv == "string" then return depth == 0 and v or quote(v) end
    -- a whole number from 1e14 on with all its digits (tostring's 14 showed
    -- an int64 sum 123456789012345 as 1.2345678901235e+14, and two counts
    -- that differ as the same); up to 2^63, past which it is no int64
    if tv == "number" and v == floor(v) and (v >= 1e14 or v <= -1e14) and v < 2 ^ 63 and v >= -2 ^ 63 then
        return fmt("%.0f", v)
    end
    if depth > 0 and tv == "table" then
        -- a tensor inside a table: its summary line, its values not read
        -- (a tensor whose op failed made the whole table fail to show)
        local tensor = package.loaded["ordo.tensor"]
        if tensor and tensor.is_tensor(v) then return tensor.summary(v) end
    end
    if (tv == "table" or tv == "userdata") and has_tostring(v) then
        local s = tostring(v)
        if depth > 0 and type(s) == "string" and s:find("\n", 1, true) then s = one_line(s) end
        return s
    end
    if tv == "table" then return render_table(v, depth, path or {}, indent or "") end
    return tostring(v)
end

function M.format(v) return render(v, 0, {}, "") end

local function show(silent, res)
    if res.n == 0 then return end
    rawset(_G, "_", res[1])
    if silent then return end
    local parts, lines = {}, false
    for i = 1, res.n do
        parts[i] = render(res[i], 0, {}, "")
        lines = lines or (type(parts[i]) == "string" and parts[i]:find("\n", 1, true) ~= nil)
    end
    -- tab-separated, as print; one below the other when a value spans
    -- lines (t:max(2)'s two tensors: the second began after the first's
    -- footer and a tab)
    io.stdout:write(concat(parts, lines and "\n" or "\t"), "\n")
end

-- ---------------------------------------------------------------- errors

local MAX_FRAMES = 10
local SELF = debug.getinfo(1, "S").source -- frames from here down are the REPL's
local PKG = SELF:match("^(@.*[/\\])") or "@" -- the package's files (lua/ordo/)

-- xpcall's handler: the message and the frames of the user's code (the
-- frames below it are this file's and the launcher's).
local function on_error(e)
    local msg = e
    if type(e) ~= "string" then
        if has_tostring(e) then
            local ok, s = pcall(tostring, e)
            msg = ok and s or fmt("(error object is a %s value)", type(e))
        else
            msg = fmt("(error object is a %s value)", type(e))
        end
    end
    -- An error the package raised at the user's line (util.fail) needs no
    -- frames from inside the package; an error raised in it keeps them.
    local user_level = type(msg) == "string" and not msg:match("^[^\n]-ordo/[%w_]+%.lua:%d+:")
    local frames = {}
    for level = 2, 200 do
        local info = debug.getinfo(level, "Snl")
        if not info or info.source == SELF then break end
        if user_level and info.source:sub(1, #PKG) == PKG then
            if frames[#frames] == "\t[C]: in function 'error'" then frames[#frames] = nil end
            goto next
        end
        local where = info.what == "C" and "[C]" or
                      (info.currentline > 0 and info.short_src .. ":" .. info.currentline or info.short_src)
        local what
        if info.what == "main" then what = "in main chunk"
        elseif info.name then what = fmt("in function '%s'", info.name)
        elseif info.what == "C" then what = "?"
        else what = fmt("in function <%s:%d>", info.short_src, info.linedefined) end
        frames[#frames + 1] = "\t" .. where .. ": " .. what
        ::next::
    end
    if #frames > MAX_FRAMES then
        local n = #frames
        for i = MAX_FRAMES, n do frames[i] = nil end
        frames[MAX_FRAMES] = fmt("\t... (%d more)", n - MAX_FRAMES + 1)
    end
    return {msg = msg, frames = frames}
end

local function print_error(err, prefix)
    if type(err) ~= "table" then err = {msg = tostring(err)} end -- an error in on_error itself
    io.stdout:flush()
    local out = io.stderr
    -- the terminal echoed "^C" where the cursor was
    if S.interactive and tostring(err.msg):match("interrupted$") then out:write("\n") end
    out:write(prefix or "", err.msg, "\n")
    if err.frames and #err.frames > 0 then
        out:write("stack traceback:\n", concat(err.frames, "\n"), "\n")
    end
    out:flush()
end

-- ---------------------------------------------------------------- running

local function incomplete(msg)
    return msg:sub(-7) == "'<eof>'"
end

local function pack(...) return {n = select("#", ...), ...} end

-- fn, silent | nil, "more" | nil, message.  fn() returns the chunk's
-- values packed ({n = count, ...}).  An expression is compiled as the
-- arguments of a call, not as `return <expr>`: a call there would be a tail
-- call, and error("x") in it would name the REPL's line instead of stdin's.
local function compile(src)
    local body, silent = src, false
    local stripped = src:match("^(.-);%s*$")
    if stripped then body, silent = stripped, true end
    if body:match("^%s*=") then body = body:gsub("^%s*=", "", 1) end -- the old "=expr"
    local fn = loadstring("local pack_ = ...; return pack_(" .. body .. "\n)", "=stdin")
    if fn then return function() return fn(pack) end, silent end
    local err
    fn, err = loadstring(src, "=stdin")
    if fn then return function() return pack(fn()) end, silent end
    if incomplete(err) then return nil, "more" end
    -- an expression left open ("{1,", "(x +") is no statement at all, so
    -- the statement's error does not end at <eof>: ask the expression
    local _, eerr = loadstring("return " .. body, "=stdin")
    if eerr and incomplete(eerr) then return nil, "more" end
    return nil, err
end
M.compile = compile

local function fmt_time(s)
    if s < 1e-3 then return fmt("%.1f us", s * 1e6) end
    if s < 1 then return fmt("%.3f ms", s * 1e3) end
    return fmt("%.3f s", s)
end

local function run(fn, silent)
    local t0 = clock()
    local ok, err = xpcall(function() show(silent, fn()) end, on_error)
    local dt = clock() - t0
    if not ok then
        S.errors = S.errors + 1
        print_error(err)
    end
    if S.time then io.stdout:write("time: ", fmt_time(dt), "\n") end
    io.stdout:flush()
    return ok and "ok" or "error"
end

-- ---------------------------------------------------------------- help

local HELP = [[
ordo REPL: LuaJIT with the ordo package loaded as `ordo`.
  An expression prints its value (a trailing ; keeps it quiet); _ is the last value.
  An unfinished chunk (function ... end) continues on the next lines.
  Tab completes globals, fields and methods: ordo.ze<Tab>, t:resh<Tab>.
  Ctrl-C stops a running command or a wait (pending ops finish in the
  background) and clears the line at the prompt; Ctrl-D waits for the engine and quits.
  History: ~/.ordo_history (ORDO_HISTORY=path; empty for none).
Commands:  :help   :time on|off (wall time of each command)   :quit
Tensors:   ordo.tensor(data [, opts])  zeros ones full empty arange rand randn
           bernoulli  zeros_like ones_like full_like  manual_seed(n)  cat stack where
           opts: {dtype = "float32"|"float64"|"int32"|"int64"|"uint8", device = ordo.cpu(0)}
  about:   t:shape() size dim numel dtype device is_contiguous
  reading: t:item() t:totable() print(t) t:wait()      (these wait for t)
           ordo.set_printoptions{precision = 4, threshold = 1000, edgeitems = 3, profile = "full"}
  views:   view reshape flatten transpose t permute narrow select squeeze unsqueeze expand
           view_as reshape_as swapaxes movedim unbind diagonal unfold
           t[i] (row i)  t[{i, {}, {a, b}}] (several dims: index, all, range)
  copies:  contiguous clone to(dtype|device) float double int long byte
  math:    + - * / ^  add sub mul div pow maximum minimum clamp  eq ne lt le gt ge
           neg abs relu sign square exp log sqrt rsqrt reciprocal tanh sigmoid sin cos log1p expm1
           floor ceil round trunc  log2 log10 isnan isinf isfinite nan_to_num lerp fmod remainder
           masked_fill  logical_not logical_and logical_or logical_xor  (in place: add_ ... fill_ zero_ copy_)
  reduce:  sum mean prod max min argmax argmin var std norm logsumexp (dim, keepdim)  softmax log_softmax
           cumsum(dim) cumprod(dim)  sort(dim, descending) argsort topk(k, dim, largest) kthvalue(k, dim)
           median(dim) (values, indices)  cummax(dim) cummin(dim) logcumsumexp(dim)
           ordo.allclose(a, b) ordo.equal(a, b) t:all() t:any() (Lua booleans)  t:chunk(n) t:split(size)
           ordo.eye(n) linspace(a, b, n) logspace meshgrid(x, y) randint([lo,] hi, shape) randperm(n)
  files:   ordo.save(value, path) (a tensor, nested tables)  ordo.load(path [, {device = d}])
  linalg:  matmul mm bmm mv addmm baddbmm addmv addr addbmm einsum tensordot dot outer kron cross cdist
           trace tril triu diag
           ordo.linalg.solve(A, B) inv det slogdet (square float matrices, batches); A:det() A:inverse() A:logdet()
  rearranging: flip roll tile
  indexing: gather index_select scatter masked_select masked_scatter nonzero unique unique_consecutive
           searchsorted bucketize histc   nn.functional.one_hot(indices, n)
Models:    ordo.nn: Linear Conv1d/2d ConvTranspose1d/2d MaxPool1d/2d AvgPool1d/2d AdaptiveAvg/MaxPool1d/2d Upsample
           BatchNorm1d/2d InstanceNorm1d/2d LayerNorm RMSNorm GroupNorm Embedding Dropout ReLU ...
           Sequential ModuleList ModuleDict,
           LSTM GRU RNN (and their cells: LSTMCell GRUCell RNNCell),
           MultiheadAttention TransformerEncoderLayer TransformerDecoderLayer TransformerEncoder Transformer,
           nn.functional.scaled_dot_product_attention(q, k, v, {is_causal = true}),
           nn.functional.pad normalize cosine_similarity cdist pixel_shuffle, ReflectionPad2d ...,
           losses (CrossEntropyLoss MSELoss ...), nn.utils.clip_grad_norm_(params, max)
           ordo.optim: SGD Adam AdamW RMSprop Adagrad (opt:zero_grad() opt:step() opt:save(p) opt:load(p)),
           optim.lr_scheduler.StepLR ... OneCycleLR SequentialLR ReduceLROnPlateau
           t:requires_grad() loss:backward() t.grad ordo.no_grad(fn)
Data:      ordo.data.read_csv(path) read_idx(path) fashion_mnist{...} loader(x, y, {batch_size = n})
           TensorDataset(x, y) Subset(ds, idx) ConcatDataset{...} random_split(ds, {0.9, 0.1}) loader(ds, opts)
Engine:    ordo.engine.wait_for_all() pending() kind() config() new{kind = ...}
Profiler:  ordo.profiler.start() stop() summary() dump("trace.json") clear()
Memory:    ordo.memory.live_bytes() live_count()    Devices: ordo.cpu(n) ordo.gpu(n)
help(x) lists the fields and methods of x (help(ordo), help(t)).
]]

-- ---------------------------------------------------------------- completion

-- The table a metatable finds methods in: its __index when that is a
-- table, or __methods beside an __index function (a tensor's: t[i]).
local function methods_of(mt)
    if type(mt) ~= "table" then return nil end
    local idx = rawget(mt, "__index")
    if type(idx) ~= "table" then idx = rawget(mt, "__methods") end
    return type(idx) == "table" and idx or nil
end

-- v[k] without running code: raw fields, then __index tables.
local function peek(v, k)
    if type(v) == "table" then
        local x = rawget(v, k)
        if x ~= nil then return x end
    end
    local mt = getmt(v)
    for _ = 1, 16 do
        local idx = methods_of(mt)
        if not idx then return nil end
        local x = rawget(idx, k)
        if x ~= nil then return x end
        mt = getmt(idx)
    end
    return nil
end

local function is_callable(x)
    if type(x) == "function" then return true end
    local mt = getmt(x)
    return type(mt) == "table" and rawget(mt, "__call") ~= nil
end

-- The identifier keys of v and of the tables its metatables index through
-- (so a tensor lists Tensor's methods); methods_only keeps callables.
local function names_of(v, methods_only)
    local out, seen = {}, {}
    local function add(t)
        for k, x in next, t do
            if is_ident(k) and not seen[k] and (not methods_only or is_callable(x)) then
                seen[k] = true
                out[#out + 1] = k
            end
        end
    end
    if type(v) == "table" then add(v) end
    local mt = getmt(v)
    for _ = 1, 16 do
        local idx = methods_of(mt)
        if not idx then break end
        add(idx)
        mt = getmt(idx)
    end
    sort(out)
    return out
end
M.names_of = names_of

-- Candidates for the word before the cursor: "pri" -> print, "ordo.ze" ->
-- ordo.zeros, ordo.zeros_like, "t:resh" -> t:reshape.  Names starting with
-- "_" only when the word does.  Nothing is called or indexed through a
-- function, so completing never runs user code.
function M.complete(word)
    local out = {}
    local head, sep, part = word:match("^(.-)([%.:])([%w_]*)$")
    local v, names
    if not head then
        if not word:match("^[%a_]?[%w_]*$") then return out end
        part, head, sep = word, "", ""
        names = names_of(_G, false)
        for _, k in ipairs(KEYWORDS) do names[#names + 1] = k end
    else
        if head == "" then return out end
        v = _G
        for seg in (head .. "."):gmatch("([^.]*)%.") do
            if not is_ident(seg) then return out end
            v = peek(v, seg)
            if v == nil then return out end
        end
        names = names_of(v, sep == ":")
    end
    local hidden = part:sub(1, 1) ~= "_"
    local seen = {}
    for _, k in ipairs(names) do
        if k:sub(1, #part) == part and not (hidden and k:sub(1, 1) == "_") and not seen[k] then
            seen[k] = true
            out[#out + 1] = head .. sep .. k
        end
    end
    sort(out)
    return out
end

local function columns(names)
    local w = 0
    for _, n in ipairs(names) do w = math.max(w, #n) end
    w = w + 2
    local per = math.max(1, floor(WIDTH / w))
    local lines, line = {}, {}
    for i, n in ipairs(names) do
        line[#line + 1] = n .. string.rep(" ", w - #n)
        if #line == per or i == #names then
            lines[#lines + 1] = concat(line):gsub("%s+$", "")
            line = {}
        end
    end
    return concat(lines, "\n")
end

-- help() prints the tour above; help(x) the names x offers (fields and methods).
function M.help(x)
    if x == nil then
        io.stdout:write(HELP)
        return
    end
    local names = {} -- internals (_c) and metamethods (__add) are not for the user
    for _, k in ipairs(names_of(x, false)) do
        if k:sub(1, 1) ~= "_" then names[#names + 1] = k end
    end
    if #names == 0 then
        io.stdout:write(fmt("(%s: no fields or methods)\n", type(x)))
    else
        io.stdout:write(columns(names), "\n")
    end
end

-- ---------------------------------------------------------------- the loop

local function command(name, rest)
    if name == "help" or name == "h" then
        io.stdout:write(HELP)
    elseif name == "time" then
        if rest == "on" then S.time = true
        elseif rest == "off" then S.time = false
        elseif rest == "" then S.time = not S.time
        else
            io.stderr:write(":time on|off\n")
            S.errors = S.errors + 1
            return "error"
        end
        io.stdout:write("time ", S.time and "on" or "off", "\n")
    elseif name == "quit" or name == "q" or name == "exit" then
        return "quit"
    else
        io.stdout:flush()
        io.stderr:write(fmt("unknown command :%s (try :help, :time on|off, :quit)\n", name))
        S.errors = S.errors + 1
        return "error"
    end
    io.stdout:flush()
    return "ok"
end

-- Loads the package; true when a Ctrl-C stopped that (the launcher then
-- quits, as from an interrupted script: the package is not broken, and a
-- plain LuaJIT session was not what the Ctrl-C asked for).
function M.start(interactive)
    S.interactive = interactive and true or false
    local ok, ordo = pcall(require, "ordo")
    if ok then
        rawset(_G, "ordo", ordo)
    elseif tostring(ordo):match("interrupted$") then
        return true
    else
        io.stderr:write("ordo: the ordo package did not load; plain LuaJIT from here:\n  ", tostring(ordo), "\n")
    end
    if rawget(_G, "help") == nil then rawset(_G, "help", M.help) end
    if S.interactive then
        io.stdout:write(fmt("ordo %s (%s)  :help for help, Ctrl-D to quit\n",
                            host and host.version or "?", host and host.luajit_version or jit.version))
        io.stdout:flush()
    end
end

function M.prompt() return S.buf and PROMPT2 or PROMPT end

function M.reset() S.buf = nil end

function M.feed(line)
    if not S.buf then
        local name, rest = line:match("^%s*:(%a+)%s*(.-)%s*$")
        if name then return command(name, rest) end
        if not line:find("%S") then return "ok" end
        S.buf = line
    else
        S.buf = S.buf .. "\n" .. line
    end
    local fn, how = compile(S.buf)
    if how == "more" then return "more" end
    S.buf = nil
    if not fn then
        S.errors = S.errors + 1
        print_error({msg = how})
        return "error"
    end
    return run(fn, how)
end

function M.finish()
    if S.buf then -- input ended inside a chunk
        local _, err = loadstring(S.buf, "=stdin")
        if err and not incomplete(err) then -- an open expression ("{1,"): its own error
            local _, eerr = loadstring("return " .. S.buf, "=stdin")
            if eerr and incomplete(eerr) then err = eerr end
        end
        S.buf = nil
        S.errors = S.errors + 1
        print_error({msg = err or "unfinished chunk at the end of input"})
    end
    local ordo = package.loaded.ordo
    -- A default engine that cannot start (ORDO_CPU_WORKER_NTHREADS=5000)
    -- has nothing to wait for: the commands that needed it said so.
    local eng = type(ordo) == "table" and ordo.engine and ordo.engine.default_if_running()
    if eng then
        local ok, err = xpcall(function() return eng:wait_for_all() end, on_error)
        if not ok then
            S.errors = S.errors + 1
            if tostring(err.msg):match("interrupted$") then
                print_error({msg = "exiting without waiting for the engine's pending ops: interrupted"}, "ordo: ")
                return 130
            end
            print_error({msg = err.msg}, "ordo: at exit: ")
        end
    end
    io.stdout:flush()
    return (not S.interactive and S.errors > 0) and 1 or 0
end

return M
