"""The Lua script that sends a batch of group messages in one round trip, and its SHA (split out of
adkweb.channel_layers.publish, which builds its KEYS and ARGV and re-exports both: see its docstring for
what the script keeps of channels_redis's keys, expiry, capacity and stored form, and for the order)."""

from __future__ import annotations

import hashlib

# KEYS: the groups' keys. ARGV: the cut-offs of group membership and of messages, the messages'
# expiry (EXPIRE), the capacity, the layer's prefix, the first pair's score (microseconds), the pairs (msgpack: group's
# index in KEYS, then message's index among the stored forms, per pair), the pairs' random prefixes
# (`size` bytes each, one after the other), `size`, then each message's stored form without its prefix
# and channel list, once however many pairs send it.
# Returns: the number of channels over capacity, then each group's number of members.
SCRIPT = """
local members = {}
local counts = {}
for i = 1, #KEYS do
    redis.call('ZREMRANGEBYSCORE', KEYS[i], 0, ARGV[1])
    members[i] = redis.call('ZRANGE', KEYS[i], 0, -1)
    counts[i] = #members[i]
end
local capacity = tonumber(ARGV[4])
local first = tonumber(ARGV[6])
local items = cmsgpack.unpack(ARGV[7])
local prefixes = ARGV[8]
local size = tonumber(ARGV[9])
local by_group = {}
local cleaned = {}
local touched = {}
local expiring = {}
local over = 0
for j = 0, #items / 2 - 1 do
    local g = items[2 * j + 1]
    local keys = by_group[g]
    if keys == nil then
        local channels = {}
        keys = {}
        for _, member in ipairs(members[g]) do
            local bang = string.find(member, '!', 1, true)
            local key = ARGV[5] .. (bang and string.sub(member, 1, bang) or member)
            if channels[key] == nil then
                channels[key] = {}
                table.insert(keys, key)
            end
            table.insert(channels[key], member)
        end
        for i, key in ipairs(keys) do
            keys[i] = {key, cmsgpack.pack(channels[key])}
        end
        by_group[g] = keys
    end
    if #keys > 0 then
        local stored = string.sub(prefixes, j * size + 1, j * size + size) .. ARGV[9 + items[2 * j + 2]]
        local score = (first + j) / 1000000
        for _, key_list in ipairs(keys) do
            local key = key_list[1]
            if not cleaned[key] then
                redis.call('ZREMRANGEBYSCORE', key, 0, ARGV[2])
                cleaned[key] = true
            end
            if redis.call('ZCOUNT', key, '-inf', '+inf') < capacity then
                redis.call('ZADD', key, score, stored .. key_list[2])
                if not touched[key] then
                    touched[key] = true
                    table.insert(expiring, key)
                end
            else
                over = over + 1
            end
        end
    end
end
for _, key in ipairs(expiring) do
    redis.call('EXPIRE', key, ARGV[3])
end
local result = {over}
for i = 1, #KEYS do
    result[i + 1] = counts[i]
end
return result
"""

SHA = hashlib.sha1(SCRIPT.encode()).hexdigest()
