-- The REPL on a real terminal: build/ordo inside a detached tmux session,
-- driven with send-keys and read back with capture-pane (polled, with a
-- timeout).  Tab completion, multi-line input, Ctrl-C at the prompt and
-- during a long wait, history across restarts.  Without tmux every test
-- is pending (skipped), never passed.
local root = os.getenv("PWD") or "."
local ORDO = root .. "/build/ordo"
local TIMEOUT = 10 -- seconds for one expected screen

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function capture(cmd)
    local f = assert(io.popen(cmd .. " 2>/dev/null"))
    local s = f:read("*a")
    f:close()
    return s
end

local have_tmux = os.execute("command -v tmux >/dev/null 2>&1") == 0

-- A private tmux server (its own socket, no config file), one session per
-- test; the socket's name is unique as a temp file's is.
local unique = os.tmpname()
os.remove(unique)
local socket = "ordo_spec_" .. unique:match("([^/]*)$"):gsub("[^%w_]", "_")
local function tmux(args) return "tmux -L " .. socket .. " -f /dev/null " .. args end

local Term = {}
Term.__index = Term

local function sleep(s) os.execute("sleep " .. s) end

local function start(history)
    local name = ("s%d"):format(math.random(1, 1e9))
    local cmd = ("env ORDO_HISTORY=%s INPUTRC=/dev/null %s"):format(q(history), q(ORDO))
    -- The private server exits when the previous test's session is killed;
    -- a new session started while it is still exiting fails ("server exited
    -- unexpectedly"), more often on a loaded machine: try again.
    local ok = false
    for attempt = 1, 5 do
        ok = os.execute(tmux(("new-session -d -s %s -x 160 -y 50 %s"):format(name, q(cmd)))) == 0
        if ok then break end
        sleep(0.2 * attempt)
    end
    assert(ok, "tmux new-session failed (5 attempts)")
    local t = setmetatable({name = name}, Term)
    t:wait_for(function() return t:prompts() >= 1 end, "the first prompt")
    return t
end

function Term:screen()
    return capture(tmux("capture-pane -p -t " .. self.name))
end

-- Polls the screen until pred(screen) holds; fails with the screen after TIMEOUT.
function Term:wait_for(pred, what)
    local deadline = os.time() + TIMEOUT
    local s
    repeat
        s = self:screen()
        if pred(s) then return s end
        sleep(0.05)
    until os.time() > deadline
    error(("timed out waiting for %s; the screen:\n%s"):format(what, s), 2)
end

-- Until a line of the screen equals `line` exactly.
function Term:wait_line(line)
    return self:wait_for(function(s)
        for l in (s .. "\n"):gmatch("([^\n]*)\n") do
            if l:gsub("%s+$", "") == line then return true end
        end
    end, ("a line %q"):format(line))
end

function Term:wait_text(text)
    return self:wait_for(function(s) return s:find(text, 1, true) end, ("%q"):format(text))
end

-- Literal text (no key names), then the keys (Enter, Tab, C-c...).
function Term:type(text, ...)
    if text and text ~= "" then os.execute(tmux(("send-keys -t %s -l %s"):format(self.name, q(text)))) end
    for _, k in ipairs({...}) do os.execute(tmux(("send-keys -t %s %s"):format(self.name, k))) end
end

-- The number of prompts on the screen ("ordo> " at the start of a line, or
-- the continuation prompt "....> "; capture-pane drops trailing blanks).
function Term:prompts()
    local n = 0
    for l in (self:screen() .. "\n"):gmatch("([^\n]*)\n") do
        local p = l:sub(1, 5)
        if (p == "ordo>" or p == "....>") and (#l == 5 or l:sub(6, 6) == " ") then n = n + 1 end
    end
    return n
end

-- Types a line and waits for the next prompt, so that nothing is typed
-- while a command runs.
function Term:enter(text)
    local n = self:prompts()
    self:type(text, "Enter")
    self:wait_for(function() return self:prompts() > n end, ("the prompt after %q"):format(text))
end

function Term:alive()
    return os.execute(tmux("has-session -t " .. self.name .. " 2>/dev/null")) == 0
end

function Term:kill()
    os.execute(tmux("kill-session -t " .. self.name .. " 2>/dev/null"))
end

describe("ordo REPL on a terminal (tmux)", function()
    local history

    before_each(function()
        if not have_tmux then return end
        history = os.tmpname()
    end)

    after_each(function()
        if history then os.remove(history) end
    end)

    teardown(function()
        if have_tmux then os.execute(tmux("kill-server 2>/dev/null")) end
    end)

    local function need_tmux()
        if not have_tmux then pending("tmux is not installed") end
        assert.is_truthy(io.open(ORDO, "rb"), ORDO .. " is missing: run make")
    end

    it("completes a tensor method with Tab", function()
        need_tmux()
        local t = start(history)
        t:enter("t = ordo.zeros({2,2})")
        t:type("t:resh", "Tab")
        t:wait_text("ordo> t:reshape")
        t:enter("({4}):numel()")
        t:wait_line("4")
        -- a field path: ordo.engine.wait_for_a<Tab>
        t:type("ordo.engine.wait_for_a", "Tab")
        t:wait_text("ordo> ordo.engine.wait_for_all")
        t:kill()
    end)

    it("continues an unfinished chunk on the next lines", function()
        need_tmux()
        local t = start(history)
        t:enter("function sq(x)")
        t:wait_text("....>")
        t:enter("return x * x")
        t:enter("end")
        t:enter("sq(7)")
        t:wait_line("49")
        t:kill()
    end)

    it("a paste of several lines runs them one by one, as typed", function()
        need_tmux()
        local t = start(history)
        -- bracketed paste: readline hands the lines over at once, newlines and all
        os.execute(tmux("set-buffer -b ordo_paste " .. q("pa = 1\npb = pa + 1\nfunction psq(x)\n  return x * x\nend\npsq(pb) * 10\n")))
        local n = t:prompts()
        os.execute(tmux("paste-buffer -p -b ordo_paste -t " .. t.name))
        t:type(nil, "Enter")
        t:wait_line("40")
        t:wait_for(function() return t:prompts() > n end, "the prompt after the paste")
        assert.is_falsy(t:screen():find("expected", 1, true), t:screen())
        t:kill()
        local f = assert(io.open(history))
        assert.is_truthy(f:read("*a"):find("\npb = pa + 1\n", 1, true)) -- each line in the history
        f:close()
    end)

    it("Ctrl-Z at the prompt and fg: the prompt and the line typed so far come back, keys echo once", function()
        need_tmux()
        -- a shell with job control runs ordo, as at a terminal
        local name = ("z%d"):format(math.random(1, 1e9))
        assert.is_true(os.execute(tmux(("new-session -d -s %s -x 160 -y 50 %s"):format(name,
            q("env -i TERM=xterm PATH=/usr/bin:/bin bash --norc --noprofile")))) == 0)
        local t = setmetatable({name = name}, Term)
        t:type(("ORDO_HISTORY=%s INPUTRC=/dev/null %s"):format(q(history), q(ORDO)), "Enter")
        t:wait_for(function() return t:prompts() >= 1 end, "the first prompt")
        t:enter("zx = 4")
        -- Ctrl-Z once the line is shown, so read: the terminal flushes input
        -- not yet read when it stops a job (a loaded machine lost "zx +")
        t:type("zx +")
        t:wait_text("ordo> zx +")
        t:type("", "C-z")
        t:wait_text("Stopped")
        local n = t:prompts()
        t:type("fg", "Enter")
        t:wait_for(function() return t:prompts() > n end, "the prompt again after fg")
        t:wait_for(function(s) return select(2, s:gsub("ordo> zx %+", "")) >= 2 end, "\"ordo> zx +\" again after fg")
        t:type(" 1", "Enter")
        t:wait_line("5")
        assert.is_falsy(t:screen():find("zx + 1\nzx + 1", 1, true), t:screen()) -- not echoed twice
        t:kill()
    end)

    it("Ctrl-C at the prompt clears the line and the unfinished chunk", function()
        need_tmux()
        local t = start(history)
        t:enter("if true then")
        t:wait_text("....>")
        local n = t:prompts()
        t:type("this is not lua", "C-c")
        t:wait_for(function() return t:prompts() > n end, "a fresh prompt")
        t:enter("1 + 2")
        t:wait_line("3")
        assert.is_falsy(t:screen():find("expected", 1, true), t:screen())
        t:kill()
    end)

    it("Ctrl-C during a long wait returns to the prompt; the engine keeps working", function()
        need_tmux()
        local t = start(history)
        -- seconds of matmuls on any CPU, pushed at once; then a wait on the last
        t:enter("a = ordo.rand({1000,1000}):mul_(0.001) x = ordo.rand({1000,1000}) y = ordo.empty({1000,1000})")
        t:enter("for i = 1, 500 do ordo.engine.push('matmul', {x, a}, {y}) ordo.engine.push('matmul', {y, a}, {x}) end")
        local n = t:prompts()
        t:type("x:sum():item()", "Enter")
        sleep(0.5)
        assert.are.equal(n, t:prompts()) -- still waiting
        t:type(nil, "C-c")
        t:wait_text("stdin:1: interrupted")
        t:wait_for(function() return t:prompts() > n end, "the prompt after Ctrl-C")
        t:enter("ordo.engine.pending() > 0") -- the wait was cut short, the ops go on
        t:wait_line("true")
        t:enter("ordo.ones({3}):sum():item()")
        t:wait_line("3")
        t:kill()
    end)

    it("keeps history across restarts", function()
        need_tmux()
        local t = start(history)
        t:enter("hist_marker = 12345")
        t:type(nil, "C-d")
        local deadline = os.time() + TIMEOUT
        while t:alive() and os.time() <= deadline do sleep(0.05) end
        assert.is_false(t:alive(), "Ctrl-D did not end the session")
        local f = assert(io.open(history))
        assert.is_truthy(f:read("*a"):find("hist_marker = 12345", 1, true))
        f:close()
        local t2 = start(history)
        t2:type(nil, "Up")
        t2:wait_text("ordo> hist_marker = 12345")
        t2:enter("")
        t2:enter("hist_marker")
        t2:wait_line("12345")
        t2:kill()
    end)

    it("says so when the history file cannot be written, and goes on without it", function()
        need_tmux()
        local dir = os.tmpname() -- a directory where the file should be
        os.remove(dir)
        assert.is_true(os.execute("mkdir " .. q(dir)) == 0)
        local t = start(dir)
        t:wait_text("ordo: cannot write the history file " .. dir .. ": Is a directory")
        t:enter("1 + 2")
        t:wait_line("3")
        t:kill()
        t = start(dir .. "/missing/hist")
        t:wait_text("ordo: cannot write the history file " .. dir .. "/missing/hist: No such file or directory")
        t:kill()
        os.execute("rmdir " .. q(dir))
    end)
end)
