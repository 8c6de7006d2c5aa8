-- rewrite_launches.lua IN OUT - a CUDA source with its kernel launches
-- made host C++ for the emulation library (README.md beside this file):
--   K<targs><<<grid, block, smem, stream>>>(args)
-- becomes
--   ordo_emu::launch_cfg(grid, block, smem, stream).run([](auto &&...a_) { K<targs>(a_...); }, args)
-- Everything else is copied byte for byte; a #line keeps compiler messages
-- pointing at the original file, and no newline is added or removed.
local src_path, out_path = arg[1], arg[2]
local f = assert(io.open(src_path, "rb"))
local s = f:read("*a")
f:close()

local function fail(pos, why)
    local line = select(2, s:sub(1, pos):gsub("\n", "")) + 1
    error(string.format("%s:%d: %s", src_path, line, why), 0)
end

-- Start of the kernel name ending just before position e (inclusive end).
local function name_start(e)
    local i = e
    while i > 0 and s:sub(i, i):match("%s") do i = i - 1 end
    if s:sub(i, i) == ">" then -- template arguments: back to the matching <
        local depth = 0
        repeat
            local c = s:sub(i, i)
            if c == ">" then depth = depth + 1 elseif c == "<" then depth = depth - 1 end
            i = i - 1
        until depth == 0 or i == 0
    end
    while i > 0 and s:sub(i, i):match("[%w_:]") do i = i - 1 end
    return i + 1
end

-- Position of the ) closing the ( at position p.
local function close_paren(p)
    local depth = 0
    for i = p, #s do
        local c = s:sub(i, i)
        if c == "(" then depth = depth + 1 elseif c == ")" then
            depth = depth - 1
            if depth == 0 then return i end
        end
    end
    fail(p, "unbalanced parentheses after a launch")
end

local out, pos = {}, 1
while true do
    local a = s:find("<<<", pos, true)
    if not a then break end
    local k0 = name_start(a - 1)
    local kernel = s:sub(k0, a - 1):gsub("%s+$", "")
    if kernel == "" then fail(a, "a launch without a kernel name") end
    local b = s:find(">>>", a + 3, true) or fail(a, "a launch without >>>")
    local cfg = s:sub(a + 3, b - 1)
    local p = s:find("%S", b + 3)
    if s:sub(p, p) ~= "(" then fail(b, "a launch without arguments in parentheses") end
    local q = close_paren(p)
    local args = s:sub(p + 1, q - 1)
    out[#out + 1] = s:sub(pos, k0 - 1)
    out[#out + 1] = "ordo_emu::launch_cfg(" .. cfg .. ").run([](auto &&...a_) { " .. kernel .. "(a_...); }"
        .. (args:match("%S") and ", " .. args or args) .. ")"
    pos = q + 1
end
out[#out + 1] = s:sub(pos)

local o = assert(io.open(out_path, "wb"))
o:write('#line 1 "', src_path, '"\n', table.concat(out))
o:close()
