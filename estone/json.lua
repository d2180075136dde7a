-- json.lua -- the small JSON encoder and decoder the estone scripts share.
-- encode(v): tables with keys 1..n become arrays ({} becomes []), other tables
-- objects with sorted keys; integers stay integers; NaN and infinities become null.
local M = {}

local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f",
                  ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }
local function str(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return escapes[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

local function is_array(t)
  local n = #t
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 or k > n then return false end
  end
  return true
end

local function enc(v, ind, out)
  local t = type(v)
  if t == "table" then
    local pad, pad1 = ("  "):rep(ind), ("  "):rep(ind + 1)
    if is_array(v) then
      if #v == 0 then out[#out + 1] = "[]"; return end
      local simple = true
      for i = 1, #v do if type(v[i]) == "table" then simple = false end end
      out[#out + 1] = "["
      for i = 1, #v do
        if i > 1 then out[#out + 1] = simple and ", " or "," end
        if not simple then out[#out + 1] = "\n" .. pad1 end
        enc(v[i], ind + 1, out)
      end
      out[#out + 1] = simple and "]" or ("\n" .. pad .. "]")
    else
      local keys = {}
      for k in pairs(v) do keys[#keys + 1] = tostring(k) end
      table.sort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        local val = v[k]
        if val == nil then val = v[tonumber(k)] end
        out[#out + 1] = (i > 1 and "," or "") .. "\n" .. pad1 .. str(k) .. ": "
        enc(val, ind + 1, out)
      end
      out[#out + 1] = "\n" .. pad .. "}"
    end
  elseif t == "string" then out[#out + 1] = str(v)
  elseif t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then out[#out + 1] = "null"
    elseif math.type(v) == "integer" then out[#out + 1] = string.format("%d", v)
    else out[#out + 1] = string.format("%.6g", v) end
  elseif t == "boolean" then out[#out + 1] = tostring(v)
  elseif v == nil then out[#out + 1] = "null"
  else out[#out + 1] = str(tostring(v)) end
end

function M.encode(v)
  local out = {}
  enc(v, 0, out)
  return table.concat(out)
end

function M.decode(s)
  local pos = 1
  local function ws() pos = s:find("[^ \t\r\n]", pos) or #s + 1 end
  local value
  local function fail(what) error(string.format("json: %s at byte %d", what, pos)) end
  local function string_()
    local out = {}
    pos = pos + 1
    while true do
      local c = s:sub(pos, pos)
      if c == "" then fail("unterminated string") end
      if c == '"' then pos = pos + 1; break end
      if c == "\\" then
        local e = s:sub(pos + 1, pos + 1)
        local map = { b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }
        if e == "u" then
          out[#out + 1] = utf8.char(tonumber(s:sub(pos + 2, pos + 5), 16))
          pos = pos + 6
        else
          out[#out + 1] = map[e] or e
          pos = pos + 2
        end
      else
        out[#out + 1] = c
        pos = pos + 1
      end
    end
    return table.concat(out)
  end
  function value()
    ws()
    local c = s:sub(pos, pos)
    if c == "{" then
      local t = {}
      pos = pos + 1; ws()
      if s:sub(pos, pos) == "}" then pos = pos + 1; return t end
      while true do
        ws()
        if s:sub(pos, pos) ~= '"' then fail("key expected") end
        local k = string_()
        ws()
        if s:sub(pos, pos) ~= ":" then fail("':' expected") end
        pos = pos + 1
        t[k] = value()
        ws()
        local d = s:sub(pos, pos); pos = pos + 1
        if d == "}" then return t end
        if d ~= "," then fail("',' or '}' expected") end
      end
    elseif c == "[" then
      local t = {}
      pos = pos + 1; ws()
      if s:sub(pos, pos) == "]" then pos = pos + 1; return t end
      while true do
        t[#t + 1] = value()
        ws()
        local d = s:sub(pos, pos); pos = pos + 1
        if d == "]" then return t end
        if d ~= "," then fail("',' or ']' expected") end
      end
    elseif c == '"' then return string_()
    elseif s:sub(pos, pos + 3) == "true" then pos = pos + 4; return true
    elseif s:sub(pos, pos + 4) == "false" then pos = pos + 5; return false
    elseif s:sub(pos, pos + 3) == "null" then pos = pos + 4; return nil
    else
      local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
      if not num or num == "" then fail("value expected") end
      pos = pos + #num
      return math.tointeger(tonumber(num)) or tonumber(num)
    end
  end
  local v = value()
  return v
end

function M.read(path)
  local f = assert(io.open(path))
  local s = f:read("a")
  f:close()
  return M.decode(s)
end

function M.write(path, v)
  local f = assert(io.open(path, "w"))
  f:write(M.encode(v), "\n")
  f:close()
end

return M
