-- ordo.trace: read the Chrome trace that ordo.profiler.dump writes, and
-- measure from it what ran in parallel.
--
--   local trace = require "ordo.trace"
--   ordo.profiler.start() ... ordo.engine.wait_for_all() ordo.profiler.stop()
--   local ops = trace.capture()            -- dump + load (or trace.load(path))
--   for _, op in ipairs(ops) do print(op.name, op.start, op.stop, op.worker) end
--   trace.select(ops, "matmul")           -- by name, set of names, or predicate
--   trace.overlap(ops_a, ops_b)           -- us during which both ran
--   trace.stats(ops)                      -- wall, busy, parallelism, peak
--   trace.decode(json_text)               -- the small JSON reader underneath
--
-- Times are microseconds from the profiler's start, as in the trace.  An op
-- is {name, start, stop, dur, pid, tid, worker (a row name such as
-- "cpu(0) worker 1"), status ("ok", "skipped", "failed"), queue_wait, gpu}.
-- A GPU op (copies included) is there twice: its launch on its worker's row
-- (gpu = false), and its work on the device, timed by events on its stream,
-- on a row such as "gpu(0) stream of gpu worker 1" (gpu = true, launch =
-- the launch's start).  Keep one side with trace.select(ops, function(op)
-- return not op.gpu end).
-- Ops that overlapped on one thread's row without nesting (async ops,
-- the "pushing threads" of several threads) are on more rows of it,
-- "..., lane 2" and on.  ops.dropped (trace.ops, load, capture) counts the
-- records the profiler dropped when a buffer was full (0: the trace is
-- whole).
-- Per-op intervals are only in the trace (the summary has totals per name),
-- hence this reader.
local util = require "ordo.util"
local fail = util.fail

local M = {}

-- ---------------------------------------------------------------- JSON

local byte, sub, find, char = string.byte, string.sub, string.find, string.char
local tonumber, concat = tonumber, table.concat

local ESC = {['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t"}

local function utf8(cp)
    if cp < 0x80 then return char(cp) end
    if cp < 0x800 then return char(0xC0 + math.floor(cp / 64), 0x80 + cp % 64) end
    if cp < 0x10000 then
        return char(0xE0 + math.floor(cp / 4096), 0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
    end
    return char(0xF0 + math.floor(cp / 262144), 0x80 + math.floor(cp / 4096) % 64,
                0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
end

-- decode(text) -> value; raises "trace.decode: <what> at byte N" on bad input.
-- JSON null decodes to nil (absent in tables), which is all a trace needs.
function M.decode(text)
    if type(text) ~= "string" then fail("trace.decode: expected a string, got " .. util.typename(text)) end
    local pos, depth = 1, 0
    local function err(what) fail(("trace.decode: %s at byte %d"):format(what, pos)) end
    local function skip()
        pos = find(text, "[^ \t\r\n]", pos) or #text + 1
    end
    local value
    local function str()
        pos = pos + 1 -- opening quote
        local parts = {}
        while true do
            local s, e = find(text, '["\\]', pos)
            if not s then err("unterminated string") end
            parts[#parts + 1] = sub(text, pos, s - 1)
            if byte(text, s) == 34 then -- "
                pos = e + 1
                return concat(parts)
            end
            local c = sub(text, s + 1, s + 1)
            if c == "u" then
                -- four hex digits exactly (tonumber alone takes " 12a", "-001", "0x41")
                local hex = sub(text, s + 2, s + 5)
                local cp = find(hex, "^%x%x%x%x$") and tonumber(hex, 16)
                if not cp then pos = s; err("bad \\u escape") end
                pos = s + 6
                -- a surrogate pair is one character
                if cp >= 0xD800 and cp < 0xDC00 and sub(text, pos, pos + 1) == "\\u" then
                    local lo_hex = sub(text, pos + 2, pos + 5)
                    local lo = find(lo_hex, "^%x%x%x%x$") and tonumber(lo_hex, 16)
                    if lo and lo >= 0xDC00 and lo < 0xE000 then
                        cp = 0x10000 + (cp - 0xD800) * 1024 + (lo - 0xDC00)
                        pos = pos + 6
                    end
                end
                -- a lone surrogate is no character: U+FFFD, not bytes that are not UTF-8
                if cp >= 0xD800 and cp < 0xE000 then cp = 0xFFFD end
                parts[#parts + 1] = utf8(cp)
            else
                local r = ESC[c]
                if not r then pos = s; err("bad escape") end
                parts[#parts + 1] = r
                pos = s + 2
            end
        end
    end
    -- (a nesting limit: the reader recurses, and a runaway file would end in
    -- Lua's own "stack overflow", naming nothing)
    local MAX_DEPTH = 1000
    local function enter()
        depth = depth + 1
        if depth > MAX_DEPTH then err(("nesting deeper than %d"):format(MAX_DEPTH)) end
    end
    function value()
        skip()
        local c = byte(text, pos)
        if c == 123 then -- {
            enter()
            local t = {}
            pos = pos + 1
            skip()
            if byte(text, pos) == 125 then pos = pos + 1; depth = depth - 1 return t end
            while true do
                skip()
                if byte(text, pos) ~= 34 then err("expected a string key") end
                local k = str()
                skip()
                if byte(text, pos) ~= 58 then err("expected ':'") end
                pos = pos + 1
                t[k] = value()
                skip()
                c = byte(text, pos)
                pos = pos + 1
                if c == 125 then depth = depth - 1 return t end
                if c ~= 44 then pos = pos - 1; err("expected ',' or '}'") end
            end
        elseif c == 91 then -- [
            enter()
            local t, n = {}, 0
            pos = pos + 1
            skip()
            if byte(text, pos) == 93 then pos = pos + 1; depth = depth - 1 return t end
            while true do
                n = n + 1
                t[n] = value()
                skip()
                c = byte(text, pos)
                pos = pos + 1
                if c == 93 then depth = depth - 1 return t end
                if c ~= 44 then pos = pos - 1; err("expected ',' or ']'") end
            end
        elseif c == 34 then
            return str()
        elseif c == 116 and sub(text, pos, pos + 3) == "true" then
            pos = pos + 4 return true
        elseif c == 102 and sub(text, pos, pos + 4) == "false" then
            pos = pos + 5 return false
        elseif c == 110 and sub(text, pos, pos + 3) == "null" then
            pos = pos + 4 return nil
        else
            local s, e = find(text, "^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
            if not s then err(c and "unexpected character" or "unexpected end") end
            local n = tonumber(sub(text, s, e))
            if not n then err("bad number") end
            pos = e + 1
            return n
        end
    end
    local v = value()
    skip()
    if pos <= #text then err("trailing characters") end
    return v
end

-- ---------------------------------------------------------------- traces

-- The ops ("X" events) of a decoded trace, sorted by start time; rows are
-- named from the trace's metadata ("M") events.
function M.ops(doc)
    local events = type(doc) == "table" and (doc.traceEvents or doc)
    if type(events) ~= "table" then fail("trace.ops: expected a decoded Chrome trace") end
    -- (pid and tid may be absent: Chrome's format does not insist on them)
    local function row_key(ev) return tostring(ev.pid) .. ":" .. tostring(ev.tid) end
    local procs, threads = {}, {}
    for i, ev in ipairs(events) do
        if type(ev) ~= "table" then
            fail(("trace.ops: event %d is not an object, got %s"):format(i, util.typename(ev)))
        end
        if ev.ph == "M" and type(ev.args) == "table" then
            if ev.name == "process_name" then procs[tostring(ev.pid)] = ev.args.name
            elseif ev.name == "thread_name" then threads[row_key(ev)] = ev.args.name end
        end
    end
    local ops = {}
    for i, ev in ipairs(events) do
        if ev.ph == "X" then
            for _, k in ipairs({"ts", "dur"}) do
                if type(ev[k]) ~= "number" then
                    fail(("trace.ops: event %d (%s) has no number '%s' (an \"X\" event needs ts and dur)")
                         :format(i, tostring(ev.name), k))
                end
            end
            local args = type(ev.args) == "table" and ev.args or {}
            local row = tostring(procs[tostring(ev.pid)] or ("pid " .. tostring(ev.pid))) .. " " ..
                        tostring(threads[row_key(ev)] or ("tid " .. tostring(ev.tid)))
            ops[#ops + 1] = {name = ev.name, start = ev.ts, dur = ev.dur, stop = ev.ts + ev.dur,
                             pid = ev.pid, tid = ev.tid, worker = row, status = args.status or "ok",
                             queue_wait = args.queue_wait_us, gpu = ev.cat == "gpu", launch = args.launch_us}
        end
    end
    table.sort(ops, function(a, b)
        if a.start ~= b.start then return a.start < b.start end
        return a.stop < b.stop
    end)
    local other = type(doc) == "table" and doc.otherData
    ops.dropped = type(other) == "table" and tonumber(other.dropped_events) or 0
    return ops
end

-- The ops of the trace file at path.
function M.load(path)
    if type(path) ~= "string" then fail("trace.load: expected a file path, got " .. util.typename(path)) end
    -- io.open takes the path up to its first NUL: it would read another file
    local nul = path:find("\0", 1, true)
    if nul then fail(("trace.load: the file path holds a NUL byte (at byte %d)"):format(nul)) end
    local f, why = io.open(path, "rb")
    if not f then
        why = tostring(why)
        if why:sub(1, #path + 2) == path .. ": " then why = why:sub(#path + 3) end -- (io repeats the path)
        fail(("trace.load: cannot read %s: %s"):format(path, why))
    end
    local text, rerr, code = f:read("*a")
    f:close()
    if text == nil then -- io.open opens a directory; its read fails (EISDIR)
        fail(("trace.load: cannot read %s: %s"):format(path, code == 21 and "it is a directory" or tostring(rerr)))
    end
    return M.ops(M.decode(text))
end

-- Dumps the profiler of engine (default: the default engine) to path (a
-- temporary file, removed again, when absent) and returns its ops.
function M.capture(path, engine)
    local profiler = require "ordo.profiler"
    local tmp = path == nil
    if tmp then path = os.tmpname() end
    local ok, err = pcall(profiler.dump, path, engine)
    if not ok then
        if tmp then os.remove(path) end
        error(err, 0)
    end
    local ops = M.load(path)
    if tmp then os.remove(path) end
    return ops
end

-- ops: a list of ops (as ops() gives them); one op, where `one` allows it.
local function ops_arg(fname, what, ops, one)
    if type(ops) ~= "table" then
        fail(("trace.%s: %s must be a list of ops%s, got %s"):format(fname, what, one and " or an op" or "",
                                                                     util.typename(ops)))
    end
    if one and ops.start ~= nil then ops = {ops} end
    for i, op in ipairs(ops) do
        if type(op) ~= "table" or type(op.start) ~= "number" or type(op.stop) ~= "number" then
            fail(("trace.%s: %s[%d] is not an op (a table with number start and stop), got %s")
                 :format(fname, what, i, util.typename(op)))
        end
    end
    return ops
end

-- The ops whose name is `which` (a string), is a key of `which` (a set
-- {name = true}), or for which which(op) is true.
function M.select(ops, which)
    if type(ops) ~= "table" then fail("trace.select: ops must be a list of ops, got " .. util.typename(ops)) end
    local pred
    if type(which) == "string" then pred = function(op) return op.name == which end
    elseif type(which) == "table" then pred = function(op) return which[op.name] ~= nil end
    elseif type(which) == "function" then pred = which
    else fail("trace.select: expected a name, a set of names or a function, got " .. util.typename(which)) end
    local r = {}
    for _, op in ipairs(ops) do
        if pred(op) then r[#r + 1] = op end
    end
    return r
end

-- Sorted, disjoint intervals covering the ops (the time at least one ran).
local function union(ops)
    local iv = {}
    for _, op in ipairs(ops) do iv[#iv + 1] = {op.start, op.stop} end
    table.sort(iv, function(a, b) return a[1] < b[1] end)
    local out = {}
    for _, x in ipairs(iv) do
        local last = out[#out]
        if last and x[1] <= last[2] then
            if x[2] > last[2] then last[2] = x[2] end
        else
            out[#out + 1] = {x[1], x[2]}
        end
    end
    return out
end

-- Microseconds during which some op of a and some op of b were running at
-- once (0: they never overlapped).  a and b are ops or lists of ops.
function M.overlap(a, b)
    a = ops_arg("overlap", "a", a, true)
    b = ops_arg("overlap", "b", b, true)
    local ua, ub = union(a), union(b)
    local i, j, total = 1, 1, 0
    while i <= #ua and j <= #ub do
        local lo = math.max(ua[i][1], ub[j][1])
        local hi = math.min(ua[i][2], ub[j][2])
        if hi > lo then total = total + (hi - lo) end
        if ua[i][2] < ub[j][2] then i = i + 1 else j = j + 1 end
    end
    return total
end

-- {count, first, last, wall = last - first, busy = sum of durations,
--  parallelism = busy / wall, peak = most ops running at one time,
--  rows = number of distinct worker rows}, times in microseconds.
function M.stats(ops)
    ops = ops_arg("stats", "ops", ops)
    for i, op in ipairs(ops) do
        if type(op.dur) ~= "number" then
            fail(("trace.stats: ops[%d] has no number dur"):format(i))
        end
    end
    local s = {count = #ops, busy = 0, peak = 0, rows = 0, wall = 0, parallelism = 0}
    if #ops == 0 then return s end
    local first, last = math.huge, -math.huge
    local points, rows = {}, {}
    for _, op in ipairs(ops) do
        first = math.min(first, op.start)
        last = math.max(last, op.stop)
        s.busy = s.busy + op.dur
        if op.dur > 0 then
            points[#points + 1] = {op.start, 1}
            points[#points + 1] = {op.stop, -1}
        end
        local row = tostring(op.worker) -- (a hand-made op may have none: one row of its own)
        if not rows[row] then
            rows[row] = true
            s.rows = s.rows + 1
        end
    end
    -- sweep: at equal times an end comes before a start (touching is not overlapping)
    table.sort(points, function(a, b)
        if a[1] ~= b[1] then return a[1] < b[1] end
        return a[2] < b[2]
    end)
    local running = 0
    for _, p in ipairs(points) do
        running = running + p[2]
        if running > s.peak then s.peak = running end
    end
    s.first, s.last = first, last
    s.wall = last - first
    s.parallelism = s.wall > 0 and s.busy / s.wall or 0
    return s
end

return M
