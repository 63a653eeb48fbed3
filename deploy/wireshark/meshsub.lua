-- meshsub.lua: a Wireshark/tshark dissector for meshsub frames (docs/wire.md).
--
-- Install: copy to ~/.local/lib/wireshark/plugins/ (Wireshark 4.0 on Debian), or run
-- `tshark -X lua_script:deploy/wireshark/meshsub.lua ...`. Registered on UDP port 4790
-- (meshsubd's default [link] port) and offered in "Decode As..." for other ports.
--
-- Layout: version:u8 flags:u8 key_id:u8 msgpack-array tag:16. The array is a whole frame
-- (13 elements) or a fragment (8). Bodies are msgpack: they are shown as a tree, and every
-- scalar leaf also as a `meshsub.body.leaf` field "path=value" (filterable, testable).
-- The tag (HMAC-SHA256-128 over every byte before it) is shown, not verified: Wireshark's
-- Lua has no HMAC, and the fleet key does not belong in a capture tool.
-- Anything malformed (truncated, bad version, unknown flags, wrong array size, bad or
-- trailing msgpack) becomes expert info of group "Malformed", never a Lua error.

local meshsub = Proto("meshsub", "meshsub mesh pub/sub frame")

local VERSION = 1
local FLAG_FRAGMENT = 0x01
local PREFIX = 3
local TAG = 16
local MAX_DEPTH = 32
local DEFAULT_PORT = 4790

local protocol_names = {
    [0] = "link", [1] = "flooding", [2] = "epidemic", [3] = "hesper", [4] = "bsub",
    [5] = "pull", [6] = "df", [7] = "puma", [8] = "paging", [9] = "giant", [10] = "brvst",
    [11] = "tg", [12] = "st", [13] = "dibs", [14] = "dr",
}
local core_types = { [1] = "ACK", [2] = "BEACON" }

local f = {
    version = ProtoField.uint8("meshsub.version", "Version"),
    flags = ProtoField.uint8("meshsub.flags", "Frame flags", base.HEX),
    fragment_flag = ProtoField.bool("meshsub.flags.fragment", "Fragment", 8, nil, FLAG_FRAGMENT),
    key_id = ProtoField.uint8("meshsub.key_id", "Key id"),
    protocol = ProtoField.uint8("meshsub.protocol", "Protocol", base.DEC, protocol_names),
    transmitter = ProtoField.uint64("meshsub.transmitter", "Transmitter node"),
    tx_epoch = ProtoField.uint64("meshsub.tx_epoch", "Transmitter boot epoch"),
    tx_seq = ProtoField.uint64("meshsub.tx_seq", "Transmitter frame sequence"),
    type = ProtoField.uint64("meshsub.type", "Message type"),
    msg_flags = ProtoField.uint64("meshsub.msg_flags", "Message flags", base.HEX),
    origin = ProtoField.uint64("meshsub.origin", "Origin node"),
    origin_epoch = ProtoField.uint64("meshsub.origin_epoch", "Origin boot epoch"),
    seq = ProtoField.uint64("meshsub.seq", "Message sequence"),
    hop = ProtoField.uint64("meshsub.hop", "Hop count"),
    ttl = ProtoField.uint64("meshsub.ttl", "TTL"),
    reliable_id = ProtoField.uint64("meshsub.reliable_id", "Reliable id"),
    frag_id = ProtoField.uint64("meshsub.fragment.id", "Fragment id"),
    frag_index = ProtoField.uint64("meshsub.fragment.index", "Fragment index"),
    frag_count = ProtoField.uint64("meshsub.fragment.count", "Fragment count"),
    chunk = ProtoField.bytes("meshsub.fragment.chunk", "Chunk"),
    body = ProtoField.bytes("meshsub.body", "Body (msgpack)"),
    leaf = ProtoField.string("meshsub.body.leaf", "Body value"),
    tag = ProtoField.bytes("meshsub.tag", "Tag (HMAC-SHA256-128, not verified)"),
}
meshsub.fields = {}
for _, field in pairs(f) do table.insert(meshsub.fields, field) end

local e_malformed = ProtoExpert.new("meshsub.malformed", "Malformed meshsub frame",
    expert.group.MALFORMED, expert.severity.ERROR)
meshsub.experts = { e_malformed }

-- ------------------------------------------------------------------ msgpack reader
-- read(tvb, pos, limit) -> value, kind, next_pos; or nil, error. Never raises on bad
-- input: every length is checked against `limit` before a byte is touched.

local read

local function need(pos, n, limit)
    if pos + n > limit then error({ msg = "truncated msgpack" }) end
end

local function uint_at(tvb, pos, n)
    if n == 1 then return UInt64.new(tvb(pos, 1):uint()) end
    return tvb(pos, n):uint64()
end

local function int_at(tvb, pos, n)
    return tvb(pos, n):int64()
end

local function length_at(tvb, pos, n, limit)
    need(pos, n, limit)
    return tvb(pos, n):uint()
end

read = function(tvb, pos, limit, depth)
    if depth > MAX_DEPTH then error({ msg = "msgpack nested too deep" }) end
    need(pos, 1, limit)
    local b = tvb(pos, 1):uint()
    local p = pos + 1
    if b <= 0x7f then return UInt64.new(b), "uint", p end
    if b >= 0xe0 then return Int64.new(b - 256), "int", p end
    if b >= 0x80 and b <= 0x8f then return b - 0x80, "map", p end
    if b >= 0x90 and b <= 0x9f then return b - 0x90, "array", p end
    if b >= 0xa0 and b <= 0xbf then
        local n = b - 0xa0; need(p, n, limit); return { p, n }, "str", p + n
    end
    if b == 0xc0 then return nil, "nil", p end
    if b == 0xc2 then return false, "bool", p end
    if b == 0xc3 then return true, "bool", p end
    if b == 0xc4 or b == 0xc5 or b == 0xc6 or b == 0xd9 or b == 0xda or b == 0xdb then
        local w = ({ [0xc4] = 1, [0xc5] = 2, [0xc6] = 4, [0xd9] = 1, [0xda] = 2, [0xdb] = 4 })[b]
        local n = length_at(tvb, p, w, limit); p = p + w; need(p, n, limit)
        return { p, n }, (b >= 0xd9) and "str" or "bin", p + n
    end
    if b == 0xca then need(p, 4, limit); return tvb(p, 4):float(), "float", p + 4 end
    if b == 0xcb then need(p, 8, limit); return tvb(p, 8):float(), "float", p + 8 end
    if b >= 0xcc and b <= 0xcf then
        local w = ({ [0xcc] = 1, [0xcd] = 2, [0xce] = 4, [0xcf] = 8 })[b]
        need(p, w, limit); return uint_at(tvb, p, w), "uint", p + w
    end
    if b >= 0xd0 and b <= 0xd3 then
        local w = ({ [0xd0] = 1, [0xd1] = 2, [0xd2] = 4, [0xd3] = 8 })[b]
        need(p, w, limit); return int_at(tvb, p, w), "int", p + w
    end
    if b == 0xdc or b == 0xdd then
        local w = (b == 0xdc) and 2 or 4
        return length_at(tvb, p, w, limit), "array", p + w
    end
    if b == 0xde or b == 0xdf then
        local w = (b == 0xde) and 2 or 4
        return length_at(tvb, p, w, limit), "map", p + w
    end
    if b >= 0xd4 and b <= 0xd8 then
        local n = ({ [0xd4] = 1, [0xd5] = 2, [0xd6] = 4, [0xd7] = 8, [0xd8] = 16 })[b]
        need(p, n + 1, limit); return { p + 1, n }, "ext", p + 1 + n
    end
    if b == 0xc7 or b == 0xc8 or b == 0xc9 then
        local w = ({ [0xc7] = 1, [0xc8] = 2, [0xc9] = 4 })[b]
        local n = length_at(tvb, p, w, limit); p = p + w; need(p, n + 1, limit)
        return { p + 1, n }, "ext", p + 1 + n
    end
    error({ msg = string.format("invalid msgpack byte 0x%02x", b) })
end

local function scalar_text(tvb, value, kind)
    if kind == "nil" then return "nil" end
    if kind == "bool" then return value and "true" or "false" end
    if kind == "uint" or kind == "int" then return tostring(value) end
    if kind == "float" then return string.format("%.17g", value) end
    if kind == "str" then return tvb(value[1], value[2]):string(ENC_UTF_8) end
    if kind == "bin" or kind == "ext" then
        if value[2] == 0 then return "" end
        return string.lower(tvb(value[1], value[2]):bytes():tohex())
    end
    return "?"
end

-- Show the msgpack value at pos under tree; returns the next position. Keys of maps
-- are shown by their text; the leaf path joins keys and array indexes with ".".
local function show(tvb, pos, limit, tree, path, label, depth)
    local value, kind, nxt = read(tvb, pos, limit, depth)
    if kind == "array" or kind == "map" then
        local sub = tree:add(tvb(pos, nxt - pos), string.format("%s: %s of %d", label, kind, value))
        local p = nxt
        for i = 0, value - 1 do
            local key
            if kind == "map" then
                local kv, kk, kn = read(tvb, p, limit, depth + 1)
                if kk == "array" or kk == "map" then error({ msg = "msgpack map key is not a scalar" }) end
                key = scalar_text(tvb, kv, kk); p = kn
            else
                key = tostring(i)
            end
            local child = (path == "") and key or (path .. "." .. key)
            p = show(tvb, p, limit, sub, child, key, depth + 1)
        end
        sub:set_len(p - pos)
        return p
    end
    local text = scalar_text(tvb, value, kind)
    local item = tree:add(f.leaf, tvb(pos, nxt - pos), path .. "=" .. text)
    item:set_text(string.format("%s: %s (%s)", label, text, kind))
    return nxt
end

-- A header field: an unsigned msgpack integer.
local function header_uint(tvb, pos, limit, tree, field, name)
    local value, kind, nxt = read(tvb, pos, limit, 0)
    if kind == "nil" and field == f.reliable_id then
        tree:add(tvb(pos, 1), "Reliable id: none")
        return nil, nxt
    end
    if kind ~= "uint" then error({ msg = name .. " is not an unsigned integer" }) end
    if field == f.protocol then
        if value > UInt64.new(255) then error({ msg = "protocol id above 255" }) end
        tree:add(field, tvb(pos, nxt - pos), value:tonumber())
    else
        tree:add(field, tvb(pos, nxt - pos), value)
    end
    return value, nxt
end

local MESSAGE_FIELDS = {
    { f.type, "message type" }, { f.msg_flags, "message flags" }, { f.origin, "origin" },
    { f.origin_epoch, "origin epoch" }, { f.seq, "sequence" }, { f.hop, "hop count" },
    { f.ttl, "TTL" }, { f.reliable_id, "reliable id" },
}

local function message_section(tvb, pos, limit, tree, info)
    local mtype
    for i, def in ipairs(MESSAGE_FIELDS) do
        local v
        v, pos = header_uint(tvb, pos, limit, tree, def[1], def[2])
        if i == 1 then mtype = v end
    end
    local body_start = pos
    local btree = tree:add(f.body, tvb(pos, 0))
    pos = show(tvb, pos, limit, btree, "", "Body", 0)
    btree:set_len(pos - body_start)
    local t = mtype:tonumber()
    info.type = core_types[t] and core_types[t] or ("type " .. tostring(t))
    return pos
end

local function dissect(tvb, pinfo, root)
    local len = tvb:len()
    pinfo.cols.protocol = "meshsub"
    local tree = root:add(meshsub, tvb())
    if len < PREFIX + 1 + TAG then
        tree:add_proto_expert_info(e_malformed, string.format("truncated: %d bytes, at least %d needed", len, PREFIX + 1 + TAG))
        pinfo.cols.info = "meshsub [Malformed: truncated]"
        return len
    end
    local version = tvb(0, 1):uint()
    local flags = tvb(1, 1):uint()
    tree:add(f.version, tvb(0, 1))
    local ftree = tree:add(f.flags, tvb(1, 1))
    ftree:add(f.fragment_flag, tvb(1, 1))
    tree:add(f.key_id, tvb(2, 1))
    local limit = len - TAG
    local ok, err = pcall(function()
        if version ~= VERSION then error({ msg = "bad version " .. version }) end
        if bit32.band(flags, bit32.bnot(FLAG_FRAGMENT)) ~= 0 then
            error({ msg = string.format("unknown frame flags 0x%02x", flags) })
        end
        local fragment = bit32.band(flags, FLAG_FRAGMENT) ~= 0
        local count, kind, pos = read(tvb, PREFIX, limit, 0)
        local want = fragment and 8 or 13
        if kind ~= "array" or count ~= want then
            error({ msg = string.format("frame array: %s of %s, want array of %d", kind, tostring(count), want) })
        end
        local proto_id
        proto_id, pos = header_uint(tvb, pos, limit, tree, f.protocol, "protocol id")
        local tx
        tx, pos = header_uint(tvb, pos, limit, tree, f.transmitter, "transmitter")
        _, pos = header_uint(tvb, pos, limit, tree, f.tx_epoch, "transmitter epoch")
        local txseq
        txseq, pos = header_uint(tvb, pos, limit, tree, f.tx_seq, "transmitter sequence")
        local pname = protocol_names[proto_id:tonumber()] or ("protocol " .. tostring(proto_id))
        local info = {}
        if fragment then
            local fid, idx, cnt
            fid, pos = header_uint(tvb, pos, limit, tree, f.frag_id, "fragment id")
            idx, pos = header_uint(tvb, pos, limit, tree, f.frag_index, "fragment index")
            cnt, pos = header_uint(tvb, pos, limit, tree, f.frag_count, "fragment count")
            local chunk, ck, nxt = read(tvb, pos, limit, 0)
            if ck ~= "bin" or chunk[2] == 0 then error({ msg = "fragment chunk is not a non-empty bin" }) end
            tree:add(f.chunk, tvb(chunk[1], chunk[2]))
            pos = nxt
            info.text = string.format("%s fragment %s/%s of #%s", pname, tostring(idx), tostring(cnt), tostring(fid))
        else
            pos = message_section(tvb, pos, limit, tree, info)
            info.text = string.format("%s %s", pname, info.type)
        end
        if pos ~= limit then error({ msg = string.format("%d stray bytes before the tag", limit - pos) }) end
        pinfo.cols.info = string.format("%s from %s seq %s", info.text, tostring(tx), tostring(txseq))
    end)
    tree:add(f.tag, tvb(limit, TAG))
    if not ok then
        local msg = (type(err) == "table" and err.msg) or tostring(err)
        tree:add_proto_expert_info(e_malformed, msg)
        pinfo.cols.info = "meshsub [Malformed: " .. msg .. "]"
    end
    return len
end

function meshsub.dissector(tvb, pinfo, root)
    return dissect(tvb, pinfo, root)
end

local udp_port = DissectorTable.get("udp.port")
udp_port:add(DEFAULT_PORT, meshsub)
udp_port:add_for_decode_as(meshsub)
