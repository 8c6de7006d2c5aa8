-- ordo.progress: plain lines when the output is not a terminal, one
-- redrawn line (\r) on a terminal, throttled; the final line from finish().
local ordo = require "ordo"
local progress = ordo.progress

-- A stream that keeps what is written, and a clock the test moves.
local function sink()
    local s = {parts = {}}
    function s:write(...)
        for i = 1, select("#", ...) do self.parts[#self.parts + 1] = tostring((select(i, ...))) end
        return self
    end
    function s:text() return table.concat(self.parts) end
    return s
end

local function fake_clock()
    local c = {t = 100}
    c.fn = function() return c.t end
    return c
end

local function lines_of(text)
    local out = {}
    for l in text:gmatch("([^\n]*)\n") do out[#out + 1] = l end
    return out
end

local function count(text, pat)
    local n = 0
    for _ in text:gmatch(pat) do n = n + 1 end
    return n
end

describe("progress.bar, not a terminal", function()
    it("prints at most one line per tenth, then the final line from finish", function()
        local out, clock = sink(), fake_clock()
        local bar = progress.bar{total = 1000, label = "epoch 1", tty = false, out = out, clock = clock.fn}
        for i = 1, 1000 do
            clock.t = clock.t + 0.01
            bar:update(i, {loss = 1 / i, acc = "88.1%"})
        end
        local before = lines_of(out:text())
        assert.are.equal(9, #before) -- 10%, 20%, ..., 90%; 100% is finish's line
        bar:finish()
        local text = out:text()
        assert.is_nil(text:find("\r", 1, true))
        local lines = lines_of(text)
        assert.are.equal(10, #lines)
        assert.matches("^epoch 1%s+100/1000%s+10%%", lines[1])
        assert.matches("^epoch 1%s+1000/1000%s+100%%", lines[10])
        assert.matches("100 it/s", lines[10], 1, true)     -- 1000 items in 10 s
        assert.matches("00:10", lines[10], 1, true)        -- elapsed
        assert.matches("acc=88.1%% loss=0.001", lines[10]) -- the fields, sorted by name
        assert.matches("00:01<00:09", lines[1], 1, true)   -- elapsed<eta
        for _, l in ipairs(lines) do assert.is_nil(l:find("[#", 1, true)) end
    end)

    it("shows a one-element tensor field as its value and another tensor as its summary, on one line", function()
        local out, clock = sink(), fake_clock()
        local bar = progress.bar{total = 2, tty = false, out = out, clock = clock.fn}
        local loss = ordo.tensor({0.25, 0.5}):mean()
        bar:update(1, {loss = loss, n = ordo.tensor({7}, {dtype = "int64"})})
        bar:finish({w = ordo.ones({2, 3}), note = "a\nb"})
        local lines = lines_of(out:text())
        assert.are.equal(2, #lines, out:text())
        assert.matches("loss=0.375 n=7$", lines[1])
        assert.matches("  note=a b w=[ordo.FloatTensor of size 2x3 on cpu(0)]", lines[2], 1, true)
    end)

    it("prints no more lines for a short loop, and finish once only", function()
        local out, clock = sink(), fake_clock()
        local bar = progress.bar{total = 3, tty = false, out = out, clock = clock.fn}
        for i = 1, 3 do bar:update(i) end
        bar:finish()
        bar:finish()
        bar:update(3)
        local lines = lines_of(out:text())
        -- tenths 3 and 6 of 10 (items 1 and 2), then the final line
        assert.are.equal(3, #lines)
        assert.matches("^1/3%s+33%%", lines[1])
        assert.matches("^3/3%s+100%%", lines[3])
    end)

    it("with no total prints a count, a line at most every 10 s", function()
        local out, clock = sink(), fake_clock()
        local bar = progress.bar{label = "eval", tty = false, out = out, clock = clock.fn}
        for i = 1, 100 do
            clock.t = clock.t + 0.5
            bar:step()
        end
        bar:finish("done")
        local lines = lines_of(out:text())
        assert.are.equal(5 + 1, #lines) -- 50 s: at 10, 20, 30, 40, 50 s, then finish
        assert.matches("^eval%s+100%s+2.00 it/s%s+00:50%s+done$", lines[6])
    end)
end)

describe("progress.bar on a terminal", function()
    it("redraws one line with \\r, at most every interval, and ends it on finish", function()
        local out, clock = sink(), fake_clock()
        local bar = progress.bar{total = 200, label = "train", tty = true, out = out, clock = clock.fn, width = 10}
        for i = 1, 200 do
            clock.t = clock.t + 0.01 -- 100 updates a second: about 10 redraws a second
            bar:update(i, {{"loss", 0.25}, {"acc", "90%"}})
        end
        local text = out:text()
        local draws = count(text, "\r")
        assert.is_true(draws >= 19 and draws <= 22, "redraws: " .. draws)
        assert.is_nil(text:find("\n", 1, true))
        bar:finish()
        text = out:text()
        assert.are.equal("\n", text:sub(-1))
        assert.are.equal(1, count(text, "\n"))
        local last = text:match("\r([^\r]*)\n$")
        assert.matches("^train  %[##########%]  200/200  100%%", last)
        assert.matches("loss=0.25 acc=90%%%s*$", last) -- list fields keep their order
    end)

    it("draws the line that reaches total at once, but no more often than the interval past it", function()
        local out, clock = sink(), fake_clock()
        local bar = progress.bar{total = 10, tty = true, out = out, clock = clock.fn}
        for i = 1, 1000 do bar:update(i) end -- the clock stands still: a total set too low
        local draws = count(out:text(), "\r")
        assert.are.equal(2, draws) -- the first update and the one reaching 10, not 991 more
        clock.t = clock.t + 1
        bar:update(1001)
        assert.are.equal(3, count(out:text(), "\r"))
    end)

    it("blanks what is left of a longer earlier line", function()
        local out, clock = sink(), fake_clock()
        local bar = progress.bar{total = 10, tty = true, out = out, clock = clock.fn, interval = 0}
        bar:update(1, "a very long message that will be replaced")
        bar:update(2, "short")
        local draws = {}
        for d in out:text():gmatch("\r([^\r]*)") do draws[#draws + 1] = d end
        assert.are.equal(2, #draws)
        assert.are.equal(#draws[1], #draws[2])
        assert.matches("short%s+$", draws[2])
    end)

    it("shows a partial bar, the rate and the ETA", function()
        local out, clock = sink(), fake_clock()
        local bar = progress.bar{total = 4, tty = true, out = out, clock = clock.fn, width = 8}
        clock.t = clock.t + 2
        bar:update(1)
        assert.matches("%[##%.%.%.%.%.%.%]  1/4   25%%  2.00 s/it  00:02<00:06", out:text())
        clock.t = clock.t + 0.1
        bar:update(4)
        assert.matches("4/4  100%%  1.90 it/s  00:02<00:00", out:text())
        -- past a total set too low: no ETA below zero (it showed 59:59)
        clock.t = clock.t + 0.9
        bar:update(9)
        assert.matches("9/4  100%%  3.00 it/s  00:03<00:00$", out:text())
    end)
end)

describe("progress.bar options", function()
    it("chooses the mode from isatty for io.stdout; other streams are plain", function()
        local bar = progress.bar{total = 1, out = sink()}
        assert.is_false(bar.tty)
        assert.is_boolean(progress.bar{total = 1}.tty)
    end)

    it("raises clear errors for bad options and calls", function()
        local function err(fn, ...)
            local ok, e = pcall(fn, ...)
            assert.is_false(ok)
            return e
        end
        assert.matches("progress.bar: unknown option 'totl'", err(progress.bar, {totl = 3}))
        assert.matches("progress.bar: total must be an integer >= 0", err(progress.bar, {total = -1}))
        assert.matches("progress.bar: out must be a stream", err(progress.bar, {out = 3}))
        assert.matches("progress.bar: tty must be true or false", err(progress.bar, {tty = 1}))
        local bar = progress.bar{total = 3, out = sink()}
        assert.matches("update: expected a count", err(bar.update, bar, "x"))
        assert.matches("update: fields must be a table or a string", err(bar.update, bar, 1, 5))
        assert.matches("update: expected a progress bar as self", err(bar.update, {}, 1))
        assert.matches("progress_spec.lua:%d+: progress.bar:", err(function() return progress.bar{total = "x"} end))
    end)

    it("takes counts that are integers >= 0 only, and says which method got what", function()
        local function err(fn, ...)
            local ok, e = pcall(fn, ...)
            assert.is_false(ok)
            return e
        end
        local out = sink()
        local bar = progress.bar{total = 10, tty = false, out = out}
        -- inf printed through %d as -9223372036854775808; a negative count as -50%
        assert.matches("update: expected a count of items done %(an integer >= 0%), got inf",
                       err(bar.update, bar, math.huge))
        assert.matches("update: expected a count of items done %(an integer >= 0%), got %-5",
                       err(bar.update, bar, -5))
        assert.matches("got nan", err(bar.update, bar, 0 / 0), 1, true)
        assert.matches("got 2.5", err(bar.update, bar, 2.5), 1, true)
        assert.matches("update: expected a count of items done %(an integer >= 0%), got nil", err(bar.update, bar))
        -- step's k: checked before any arithmetic, naming step
        assert.matches("progress_spec.lua:%d+: step: expected a number of items to add %(an integer >= 0%), got string",
                       err(function() return bar:step("a") end))
        assert.matches("step: expected a number of items to add %(an integer >= 0%), got %-1", err(bar.step, bar, -1))
        assert.matches("got inf", err(bar.step, bar, math.huge), 1, true)
        assert.matches("step: fields must be a table or a string", err(bar.step, bar, 1, 5))
        assert.matches("step: expected a progress bar as self", err(bar.step, nil))
        assert.matches("finish: fields must be a table or a string", err(bar.finish, bar, 5))
        assert.matches("progress.bar: interval must be a number of seconds >= 0, got nan",
                       err(progress.bar, {interval = 0 / 0}))
        -- nothing was drawn by the refused calls; good ones still count
        assert.are.equal("", out:text())
        bar:step()
        bar:step(2)
        bar:step(0)
        assert.are.equal(3, bar.n)
        bar:update(0)
        assert.are.equal(0, bar.n)
        for _, l in ipairs(lines_of(out:text())) do assert.is_nil(l:find("-", 1, true), l) end
    end)

    it("has a monotonic clock", function()
        local a = progress.now()
        local b = progress.now()
        assert.is_true(b >= a and a > 0)
    end)
end)
