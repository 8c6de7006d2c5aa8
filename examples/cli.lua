-- examples/cli.lua: the command line shared by the examples, which load it
-- with dofile from beside themselves:
--
--   local cli = dofile(here .. "cli.lua")
--   local opt = cli.parse(arg, {
--       name = "fashion_mlp", script = here .. "fashion_mlp.lua",
--       options = {                                  -- flag, key, kind, default
--           {"--epochs", "epochs", "count", 12},
--           {"--device", "device", "choice", "cpu", choices = {"cpu", "gpu"}},
--           {"--hidden", "sizes", "sizes", {512, 256}},
--       },
--       positional = {{"steps", "count", 300}},     -- values given in order: name, kind, default
--   })
--
-- Kinds: count (an integer >= 1), natural (an integer >= 0), seed (an
-- integer >= 0), positive (a finite number > 0), choice (one of
-- choices), path (a non-empty string), file (a file that can be read),
-- outfile (a file that can be written), sizes (comma-separated integers
-- >= 1; n = k asks for exactly k).
-- `--flag value` and `--flag=value` both work; `--` ends the options (a
-- value after it may start with '-').
--
-- -h or --help anywhere prints the script's head comment (its usage line
-- and options) and exits 0.  An unknown option, a missing or bad value, or
-- a value too many prints one line naming the option to stderr and exits
-- 2, before any work: a Lua error would add a traceback into this file
-- instead of pointing at the command line.
local fmt, concat = string.format, table.concat
local floor = math.floor

local M = {}

-- name: message on stderr, exit status 2 (a usage error, as getopt tools do).
function M.die(name, msg)
    io.stderr:write(fmt("%s: %s\n", name, msg))
    os.exit(2)
end
local die = M.die

-- The head comment of script, up to its first line of code, without "-- ".
function M.help_text(script)
    local f = io.open(script, "rb")
    if not f then return "" end
    local src = f:read("*a")
    f:close()
    local lines = {}
    for line in src:gmatch("([^\n]*)\n") do
        if not line:match("^%-%-") then break end
        lines[#lines + 1] = (line:gsub("^%-%- ?", ""))
    end
    return concat(lines, "\n")
end

local function is_help(a) return a == "-h" or a == "--help" end

-- (a finite integer: nan fails x == floor(x), inf fails the bounds)
local function is_int(x) return x == floor(x) and x > -2 ^ 53 and x < 2 ^ 53 end

-- A number written in decimal, as a user types one: tonumber alone would
-- also take "0x10", " 3", "3 " and "inf", which no one means as a count.
local function decimal(s)
    if s:match("^[+-]?%d+%.?%d*$") or s:match("^[+-]?%.%d+$") or s:match("^[+-]?%d+%.?%d*[eE][+-]?%d+$") or
        s:match("^[+-]?%.%d+[eE][+-]?%d+$") then
        return tonumber(s)
    end
end
-- An integer written as one: digits only (no "2.0", no "1e3").
local function integer(s)
    if s:match("^%+?%d+$") then return tonumber(s) end
end

-- kind -> function(text, def) returning the value, or nil and what was expected
local KINDS = {}
function KINDS.count(s)
    local x = integer(s)
    if x and is_int(x) and x >= 1 then return x end
    return nil, "an integer >= 1"
end
function KINDS.natural(s)
    local x = integer(s)
    if x and is_int(x) and x >= 0 then return x end
    return nil, "an integer >= 0"
end
KINDS.seed = KINDS.natural
function KINDS.positive(s)
    local x = decimal(s)
    if x and x > 0 and x < math.huge then return x end
    return nil, "a finite number > 0"
end
function KINDS.choice(s, def)
    for _, c in ipairs(def.choices) do
        if s == c then return s end
    end
    local cs = def.choices
    return nil, #cs == 1 and cs[1] or concat(cs, ", ", 1, #cs - 1) .. " or " .. cs[#cs]
end
function KINDS.path(s)
    if s ~= "" then return s end
    return nil, "a non-empty path"
end
-- io's reason for a failed open, without the path its message repeats.
-- (file and outfile return a whole message as a third value, with it.)
local function io_reason(s, err)
    err = tostring(err)
    if err:sub(1, #s + 2) == s .. ": " then err = err:sub(#s + 3) end
    return err
end
-- What is at s (ordo.file_kind: looked at, not opened), or the whole
-- message when it cannot be looked at.
local function kind_of(s, verb)
    local kind, why = require("ordo").file_kind(s)
    if not kind then return nil, fmt("cannot %s %s: %s", verb, s, why) end
    if kind == "directory" then return nil, s .. " is a directory, not a file" end
    return kind
end
-- A file that can be read.  A regular one is opened and read from once (a
-- file without read permission fails then); a FIFO, a pipe (bash's
-- <(command), /dev/stdin) or a device is only looked at: opening a FIFO
-- waits for a writer, and a read here would take bytes the script then
-- never sees.
function KINDS.file(s)
    if s == "" then return nil, "a non-empty path" end
    local kind, msg = kind_of(s, "read")
    if not kind then return nil, nil, msg end
    if kind == "none" then return nil, nil, fmt("cannot read %s: No such file or directory", s) end
    if kind == "other" then return s end
    local f, err = io.open(s, "rb")
    if not f then return nil, nil, fmt("cannot read %s: %s", s, io_reason(s, err)) end
    local ok, rerr = f:read(0)
    f:close()
    if ok == nil and rerr then return nil, nil, fmt("cannot read %s: %s", s, rerr) end
    return s
end
-- A file to write at the end (a trace, saved parameters): checked now, not
-- after the run.  Opening a file that exists to append changes nothing.
-- Where nothing is yet, the probe makes and removes PATH.tmp (the name
-- ordo.save writes first): opening PATH itself would follow a dangling
-- symbolic link and make the file it names, and the remove would then
-- delete the link.  A FIFO or a device (/dev/null) is not opened: that
-- would wait for a reader, and the reader would see the probe's close as
-- the end of the data; ordo.save writes one directly.
function KINDS.outfile(s)
    if s == "" then return nil, "a non-empty path" end
    local kind, msg = kind_of(s, "write")
    if not kind then return nil, nil, msg end
    if kind == "other" then return s end
    local probe = kind == "none" and s .. ".tmp" or s
    -- (a stale PATH.tmp: the save replaces it)
    if kind == "none" and require("ordo").file_kind(probe) ~= "none" then return s end
    local w, err = io.open(probe, "ab")
    if not w then return nil, nil, fmt("cannot write %s: %s", s, io_reason(probe, err)) end
    w:close()
    if kind == "none" then os.remove(probe) end -- (the probe made it)
    return s
end
function KINDS.sizes(s, def)
    local list = {}
    for part in (s .. ","):gmatch("([^,]*),") do
        local x = integer(part)
        if not (x and is_int(x) and x >= 1) then list = nil break end
        list[#list + 1] = x
    end
    if list and #list > 0 and (def.n == nil or #list == def.n) then return list end
    if def.n then return nil, fmt("%d comma-separated integers >= 1 (e.g. 32,64)", def.n) end
    return nil, "comma-separated integers >= 1 (e.g. 512,256)"
end

local function convert(name, what, def, kind, text)
    local conv = KINDS[kind] or error("cli: unknown kind " .. tostring(kind))
    local v, expected, msg = conv(text, def)
    if msg then die(name, what .. ": " .. msg) end
    if v == nil then die(name, fmt("%s must be %s, got %s", what, expected, text == "" and "''" or text)) end
    return v
end

-- parse(argv, spec): the options table (defaults, then argv's values); see
-- the head of this file.
function M.parse(argv, spec)
    argv = argv or {}
    local name = spec.name
    for i = 1, #argv do
        if is_help(argv[i]) then
            io.write(M.help_text(spec.script), "\n")
            os.exit(0)
        end
    end
    local o, by_flag, positional = {}, {}, spec.positional or {}
    for _, d in ipairs(spec.options or {}) do
        by_flag[d[1]] = d
        o[d[2]] = d[4]
    end
    for _, d in ipairs(positional) do o[d[1]] = d[3] end
    local npos, i, only_values = 0, 1, false
    while i <= #argv do
        local a = argv[i]
        local flag, inline = a:match("^(%-%-[^=]+)=(.*)$")
        local d = not only_values and by_flag[flag or a]
        if a == "--" and not only_values then
            only_values = true -- (getopt's rule: what follows is values, `-- -odd-name`)
        elseif d then
            local v = inline
            if v == nil then
                i = i + 1
                v = argv[i]
                -- `--save --epochs 3` is a forgotten value, not a file named --epochs
                if v == nil or v:match("^%-%-") then
                    die(name, fmt("%s needs a value%s (see --help)", a, v and ", got the option " .. v or ""))
                end
            end
            o[d[2]] = convert(name, d[1], d, d[3], v)
        elseif a:match("^%-") and not only_values and not (npos < #positional and tonumber(a)) then
            -- (a negative number is a positional value, for its own message)
            die(name, fmt("unknown option %s (see --help)", a))
        elseif npos < #positional then
            npos = npos + 1
            local p = positional[npos]
            o[p[1]] = convert(name, p[1], p, p[2], a)
        else
            die(name, fmt("unexpected argument %s (see --help)", a))
        end
        i = i + 1
    end
    return o
end

-- The device --device chose ("cpu" or "gpu"): gpu(0) on a machine without
-- a GPU is a bad value like any other (one line naming the option, exit
-- 2, before any work), not a traceback from deep in the script.
function M.device(name, choice)
    local ordo = require "ordo"
    -- so is an engine that cannot start (a bad ORDO_ENGINE_TYPE...), named
    -- here rather than by the first op that needed it
    local started, why = pcall(ordo.engine.config)
    if not started then die(name, (tostring(why):gsub("^[^\n]-:%d+: ", ""):gsub("^ordo%.engine: ", ""))) end
    if choice ~= "gpu" then return ordo.cpu(0) end
    local ok, d = pcall(ordo.gpu, 0)
    if not ok then die(name, "--device gpu: " .. (tostring(d):gsub("^[^\n]-:%d+: ", ""))) end
    return d
end

-- data.fashion_mnist(opts), or, when its files are missing, one line
-- saying where they were looked for and how to get them (exit 1) instead
-- of a traceback.
function M.fashion_mnist(name, opts)
    local data = require("ordo").data
    local ok, msg = data.fashion_mnist_available(opts and opts.dir)
    if not ok then
        io.stderr:write(fmt("%s: %s\n", name, (msg:gsub("point opts%.dir or ORDO_FASHION_MNIST at",
                                                          "point the environment variable ORDO_FASHION_MNIST at"))))
        os.exit(1)
    end
    return data.fashion_mnist(opts)
end

-- Run directly, this helper says what it is for.
if arg and type(arg[0]) == "string" and debug.getinfo(1, "S").source == "@" .. arg[0] then
    local help = false
    for i = 1, #arg do help = help or is_help(arg[i]) end
    local out = help and io.stdout or io.stderr
    out:write("examples/cli.lua is the command-line parser the examples share; run an example " ..
              "(e.g. build/ordo examples/fashion_mlp.lua --help)\n")
    os.exit(help and 0 or 2)
end

return M
