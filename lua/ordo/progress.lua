-- ordo.progress: a progress bar for training loops.
--
--   local bar = ordo.progress.bar{total = #loader, label = "epoch 1"}
--   for i, xb, yb in loader:iter() do
--       ...
--       bar:update(i, {loss = 0.31, acc = "88.1%"})   -- fields print after the bar
--   end
--   bar:finish({val_acc = "87.0%"})                   -- the final line (fields optional)
--
-- On a terminal the bar redraws one line with \r, at most ~10 times a
-- second (a redraw costs a write; a training step can be far shorter).
-- When the output is not a terminal (a log file, a pipe, CI) it prints
-- whole lines instead, at most one per 10% of total (every 10 s when total
-- is unknown), and finish() prints the last one, so logs stay readable.
--
-- opts: total (optional), label, tty (true/false: force the mode; default:
-- isatty of the stream), out (a stream with :write, default io.stdout),
-- width (bar cells, default 24), interval (seconds between redraws on a
-- terminal, default 0.1), clock (a function returning seconds; tests).
local cdef = require "ordo.cdef"
local util = require "ordo.util"
local extra_arg = util.extra_arg -- a further positional argument: an error naming it

local ffi = cdef.ffi
local fail, typename = util.fail, util.typename
local is_int = util.is_int
local fmt, rep, concat = string.format, string.rep, table.concat
local floor, min = math.floor, math.min

local M = {}

-- A monotonic clock in seconds.  Called through our own pointer type: the
-- declaration in cdef.lua takes void * so other modules' timespecs fit too.
local ts = ffi.new("ordo_timespec")
local clock_gettime = ffi.cast("int (*)(int, ordo_timespec *)", ffi.C.clock_gettime)
local CLOCK_MONOTONIC = 1
function M.now(extra)
    if extra ~= nil then extra_arg("progress.now", "()", extra) end
    clock_gettime(CLOCK_MONOTONIC, ts)
    return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

-- isatty(fd) for the standard streams; other streams count as files.
local function stream_is_tty(out)
    local fd = out == io.stdout and 1 or out == io.stderr and 2 or nil
    return fd ~= nil and ffi.C.isatty(fd) == 1
end

-- 75 -> "01:15", 3725 -> "1:02:05"
local function hms(s)
    if s ~= s or s == math.huge then return "--:--" end
    s = floor(s + 0.5)
    local h, m = floor(s / 3600), floor(s % 3600 / 60)
    if h > 0 then return fmt("%d:%02d:%02d", h, m, s % 60) end
    return fmt("%02d:%02d", m, s % 60)
end

-- A field's value on the bar's one line.  A tensor of one element (a
-- loss) shows its value -- read only when a line is drawn, so an update
-- that draws nothing waits for nothing --, another tensor its summary
-- ("[ordo.FloatTensor of size 2 on cpu(0)]"): print's several lines would
-- break the bar.
local function fmt_value(v)
    local tensor = package.loaded["ordo.tensor"]
    if tensor and tensor.is_tensor(v) then
        if v:numel() == 1 then
            local x = v:item()
            if type(x) == "number" then v = x end
        else
            return tensor.summary(v) -- (values not read)
        end
    end
    if type(v) == "number" then
        if v == floor(v) and math.abs(v) < 1e15 then return fmt("%d", v) end
        return fmt("%.4g", v)
    end
    return (tostring(v):gsub("\n", " "))
end

-- "acc=88.1% loss=0.31": a string as is; a table's named keys sorted (a
-- Lua table keeps no order), after its list part in order, whose entries
-- are {key, value} pairs or plain values: {{"loss", 0.31}, {"acc", "88%"}}
local function fields_str(fields)
    if fields == nil then return "" end
    if type(fields) == "string" then return fields end
    local parts = {}
    local nlist = #fields
    for i = 1, nlist do
        local f = fields[i]
        if type(f) == "table" then
            parts[#parts + 1] = tostring(f[1]) .. "=" .. fmt_value(f[2])
        else
            parts[#parts + 1] = fmt_value(f)
        end
    end
    local keys = {}
    for k in pairs(fields) do
        if not (type(k) == "number" and k >= 1 and k <= nlist and k == floor(k)) then keys[#keys + 1] = k end
    end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    for _, k in ipairs(keys) do parts[#parts + 1] = tostring(k) .. "=" .. fmt_value(fields[k]) end
    return concat(parts, " ")
end

local Bar = {__name = "ordo.progress.Bar"}
Bar.__index = Bar
M.Bar = Bar

local BAR_OPTS = {total = true, label = true, tty = true, out = true, width = true, interval = true, clock = true}

-- bar{total =, label =, ...}: see the head of this file.
function M.bar(opts, extra)
    if extra ~= nil then extra_arg("progress.bar", "(opts)", extra) end
    opts = opts or {}
    if type(opts) ~= "table" or getmetatable(opts) ~= nil then
        fail("progress.bar: expected an options table {total =, label =, ...}, got " .. typename(opts))
    end
    for k in pairs(opts) do
        if not BAR_OPTS[k] then
            fail(fmt("progress.bar: unknown option '%s' (expected total, label, tty, out, width, interval or clock)",
                     tostring(k)))
        end
    end
    local total = opts.total
    if total ~= nil and (not is_int(total) or total < 0) then
        fail("progress.bar: total must be an integer >= 0, got " .. tostring(total))
    end
    local out = opts.out or io.stdout
    if (type(out) ~= "table" and type(out) ~= "userdata") or not out.write then
        fail("progress.bar: out must be a stream with a write method, got " .. typename(out))
    end
    if opts.tty ~= nil and type(opts.tty) ~= "boolean" then
        fail("progress.bar: tty must be true or false, got " .. typename(opts.tty))
    end
    local width = opts.width or 24
    if not is_int(width) or width < 1 then
        fail("progress.bar: width must be a positive integer, got " .. tostring(width))
    end
    local interval = opts.interval or 0.1
    if type(interval) ~= "number" or not (interval >= 0) then -- (not nan either)
        fail("progress.bar: interval must be a number of seconds >= 0, got " .. tostring(interval))
    end
    local clock = opts.clock or M.now
    if type(clock) ~= "function" then fail("progress.bar: clock must be a function, got " .. typename(clock)) end
    local tty = opts.tty
    if tty == nil then tty = stream_is_tty(out) end
    local t0 = clock()
    return setmetatable({
        total = total, label = opts.label and tostring(opts.label) or nil, out = out, tty = tty, width = width,
        interval = interval, clock = clock, t0 = t0,
        n = 0, fields = nil,
        last_draw = -math.huge, -- tty: when the line was last drawn
        last_len = 0,           -- tty: its length, to blank a longer old line
        tenth = 0,              -- plain: tenths of total printed so far
        last_line = t0,         -- plain, unknown total: when a line was last printed
        lines = 0, finished = false,
    }, Bar)
end

-- "123 it/s", "12.3 it/s", "1.23 it/s"; below one a second "2.50 s/it"
local function rate_str(rate)
    if rate >= 99.5 then return fmt("%.0f it/s", rate) end
    if rate >= 9.95 then return fmt("%.1f it/s", rate) end
    if rate >= 0.995 or rate <= 0 then return fmt("%.2f it/s", rate) end
    return fmt("%.2f s/it", 1 / rate)
end

-- "label [#####.....]  45/100  45%  12.3 it/s  00:04<00:05  loss=0.31"
local function render(self, now, final)
    local parts = {}
    if self.label then parts[#parts + 1] = self.label end
    local n, total = self.n, self.total
    local elapsed = now - self.t0
    local rate = elapsed > 0 and n / elapsed or 0
    if total and total > 0 then
        local frac = min(n / total, 1)
        if self.tty then
            local full = floor(frac * self.width + 1e-9)
            parts[#parts + 1] = "[" .. rep("#", full) .. rep(".", self.width - full) .. "]"
        end
        local w = #tostring(total)
        parts[#parts + 1] = fmt("%" .. w .. "d/%d", n, total)
        parts[#parts + 1] = fmt("%3d%%", floor(frac * 100 + 1e-9))
    else
        parts[#parts + 1] = tostring(n)
    end
    parts[#parts + 1] = rate_str(rate)
    if final or not (total and total > 0) then
        parts[#parts + 1] = hms(elapsed)
    else
        -- past a total set too low nothing is left to wait for (not a negative ETA)
        local eta = rate > 0 and math.max(total - n, 0) / rate or math.huge
        parts[#parts + 1] = hms(elapsed) .. "<" .. hms(eta)
    end
    local f = fields_str(self.fields)
    if f ~= "" then parts[#parts + 1] = f end
    return concat(parts, "  ")
end

local function write(self, s)
    self.out:write(s)
    if self.out.flush then self.out:flush() end
end

local function draw_tty(self, now, final)
    local line = render(self, now, final)
    -- blank what is left of a longer earlier line
    local pad = self.last_len > #line and rep(" ", self.last_len - #line) or ""
    write(self, "\r" .. line .. pad .. (final and "\n" or ""))
    self.last_len = #line
    self.last_draw = now
    self.lines = self.lines + 1
end

local function print_line(self, now, final)
    write(self, render(self, now, final) .. "\n")
    self.last_line = now
    self.lines = self.lines + 1
end

local function check_bar(fname, self)
    if getmetatable(self) ~= Bar then
        fail(fmt("%s: expected a progress bar as self, got %s (call it as bar:%s(...))", fname, typename(self), fname))
    end
end

-- A count is a finite integer >= 0: the line prints it with %d, which
-- turns inf into -9223372036854775808 and a fraction into its floor, and
-- a negative count is no progress (a -50% bar).
local function check_count(fname, what, v)
    if not is_int(v) or v < 0 then
        fail(fmt("%s: expected %s (an integer >= 0), got %s", fname, what,
                 type(v) == "number" and tostring(v) or typename(v)))
    end
end

local function check_fields(fname, fields)
    if fields ~= nil and type(fields) ~= "table" and type(fields) ~= "string" then
        fail(fname .. ": fields must be a table or a string, got " .. typename(fields))
    end
end

-- bar:update(i [, fields]): i items done (absolute, not an increment);
-- fields: a table printed as key=value after the bar, or a string.
function Bar:update(i, fields, extra)
    if extra ~= nil then extra_arg("update", "(i, fields)", extra) end
    check_bar("update", self)
    check_count("update", "a count of items done", i)
    check_fields("update", fields)
    if self.finished then return self end
    self.n = i
    if fields ~= nil then self.fields = fields end
    local now = self.clock()
    local total = self.total
    if self.tty then
        -- the line that reaches total is drawn at once; a count past a
        -- total set too low (more batches than said) keeps to the interval
        local reached = total and i >= total and not self.reached
        if reached then self.reached = true end
        if reached or now - self.last_draw >= self.interval then draw_tty(self, now, false) end
    elseif total and total > 0 then
        -- a line at each new tenth; the last tenth is finish()'s line
        local tenth = floor(min(i, total) * 10 / total)
        if tenth > self.tenth and tenth < 10 then
            self.tenth = tenth
            print_line(self, now, false)
        end
    elseif now - self.last_line >= 10 then
        print_line(self, now, false)
    end
    return self
end

-- bar:step([k [, fields]]): k more items done (default 1).
function Bar:step(k, fields, extra)
    if extra ~= nil then extra_arg("step", "(k, fields)", extra) end
    check_bar("step", self)
    if k == nil then k = 1 end
    check_count("step", "a number of items to add", k)
    check_fields("step", fields)
    return self:update(self.n + k, fields)
end

-- bar:finish([fields]): the final line (elapsed time, overall rate); later
-- calls do nothing.
function Bar:finish(fields, extra)
    if extra ~= nil then extra_arg("finish", "(fields)", extra) end
    check_bar("finish", self)
    if self.finished then return self end
    check_fields("finish", fields)
    if fields ~= nil then self.fields = fields end
    local now = self.clock()
    if self.tty then draw_tty(self, now, true) else print_line(self, now, true) end
    self.finished = true
    return self
end

function Bar:elapsed(extra)
    if extra ~= nil then extra_arg("elapsed", "()", extra) end
    check_bar("elapsed", self)
    return self.clock() - self.t0
end

return M
