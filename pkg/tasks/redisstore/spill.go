package redisstore

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"
)

// Keeping the task hash compact. Redis stores a small hash as one
// listpack (a few hundred bytes for a task's record) as long as each of
// its values is at most hash-max-listpack-value bytes (64 by default, and
// not settable on most managed services), and converts it for good to a
// hash table, about a kilobyte more per task, at the first longer value.
// Values of a task that can be longer never enter the hash whole (format
// of 2026-12, see "Scale" in BENCHMARKS.md); tasks written before keep
// them in the hash, and every reader takes both:
//
//   - owner, tool, args: a value longer than maxInline bytes is cut into
//     chunks of at most maxInline bytes, the hash fields "<name>#0",
//     "<name>#1", ...; one longer than maxChunks chunks is kept instead in
//     the spill key <prefix>{id}:a, a string written once by the creation
//     ("name:len:value" for each, see appendSpill), the hash's field sp
//     "1". An owner starting with "#" is cut into chunks however short.
//     An owner in chunks is also marked in the field owner as "#" and
//     its length (format of 2026-12-03; before, "#" and its SHA-1 in hex,
//     40 bytes more), a spilled one as "#" and its SHA-1: the scripts
//     compare a caller's principal with it through owns(), which reads the
//     chunks only for a principal of that length.
//   - msg: a status message longer than maxInline is kept in the string
//     <prefix>{id}:m, the hash's field ml "1"; a shorter one replaces it.
//   - error: a failed task's error object is kept in the result string
//     <prefix>{id}:x, as a completed task's result is.
//
// Every key expires with the task. The claims join the chunks and read
// the keys in the same script; getScript hands the keys' values to Go as
// the pseudo-fields _a and _m of the record, and decodeTask joins the
// chunks.

// maxInline is the longest value the task hash holds: Redis's default
// hash-max-listpack-value.
const maxInline = 64

// maxChunks bounds the chunks of one value in the task hash (1 KiB): a
// longer value goes to the spill key.
const maxChunks = 16

// spillable are the fields of a creation that may be chunked or spilled.
var spillable = []string{"owner", "tool", "args"}

// inlineFields returns the task hash fields that hold name's value v
// (itself, or its chunks and for the owner its mark), and appends v to
// the spill string sp instead when it is longer than maxChunks chunks.
func inlineFields(fields []string, sp []byte, name, v string) ([]string, []byte) {
	marked := name == "owner" && (len(v) > maxInline || strings.HasPrefix(v, "#"))
	if marked {
		fields = append(fields, name, ownerField(v))
	}
	switch {
	case len(v) <= maxInline && !marked:
		return append(fields, name, v), sp
	case len(v) > maxChunks*maxInline:
		return fields, appendSpill(sp, name, v)
	}
	for i := 0; len(v) > 0; i++ {
		n := min(len(v), maxInline)
		fields = append(fields, name+"#"+strconv.Itoa(i), v[:n])
		v = v[n:]
	}
	return fields, sp
}

// joinChunks sets in the record h each spillable field cut into chunks.
func joinChunks(h map[string]string) {
	for _, name := range spillable {
		first, ok := h[name+"#0"]
		if !ok {
			continue
		}
		var b strings.Builder
		b.WriteString(first)
		for i := 1; ; i++ {
			c, ok := h[name+"#"+strconv.Itoa(i)]
			if !ok {
				break
			}
			b.WriteString(c)
		}
		h[name] = b.String()
	}
}

// ownerField is the mark the field owner holds of an owner longer than
// maxInline or starting with "#" (so that an owner held whole never looks
// like a mark): "#" and its length (in chunks), or "#" and its SHA-1 in hex
// (spilled: longer than maxChunks chunks).
func ownerField(owner string) string {
	if len(owner) <= maxChunks*maxInline {
		return "#" + strconv.Itoa(len(owner))
	}
	sum := sha1.Sum([]byte(owner))
	return "#" + hex.EncodeToString(sum[:])
}

// appendSpill appends the field name and its value v to the spill string b.
func appendSpill(b []byte, name, v string) []byte {
	b = append(b, name...)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(len(v)), 10)
	b = append(b, ':')
	return append(b, v...)
}

// unspill sets in h the fields the spill string a holds (see appendSpill);
// it stops at anything malformed.
func unspill(a string, h map[string]string) {
	for a != "" {
		name, rest, ok := strings.Cut(a, ":")
		if !ok {
			return
		}
		l, rest, ok := strings.Cut(rest, ":")
		n, err := strconv.Atoi(l)
		if !ok || err != nil || n < 0 || n > len(rest) {
			return
		}
		h[name], a = rest[:n], rest[n:]
	}
}

// luaSpill defines, for the scripts:
//
//   - MAXINLINE: maxInline;
//   - owns(t, o, p): whether the owner field o of the task hash t is
//     principal p's (false for an empty p or a missing o): o itself, or
//     its mark (see ownerField), by p's length and chunks or by its
//     digest;
//   - unspill(f, a, m): sets in the table f (a task's fields) the values
//     kept out of its hash whole: joins their chunks, reads its spill key a
//     and message key m;
//   - withSpills(all, f, a, m): appends to the HGETALL reply all (whose
//     fields f holds) the spill string and the long status message as
//     the pseudo-fields _a and _m, for decodeTask.
var luaSpill = `
local MAXINLINE = ` + strconv.Itoa(maxInline) + `
local function owns(t, o, p)
  if not o or p == '' then return false end
  if string.byte(o, 1) ~= 35 then return o == p end
  if o == p then
    -- A mark's own text owns nothing: only an owner starting with '#' of
    -- a task written before such owners were cut into chunks (none, and
    -- nothing spilled) is held whole.
    local m = redis.call('HMGET', t, 'owner#0', 'sp')
    return not m[1] and m[2] ~= '1'
  end
  if #o == 41 then return o == '#' .. redis.sha1hex(p) end
  if o ~= '#' .. #p then return false end
  local names = {}
  for i = 0, math.ceil(#p / MAXINLINE) - 1 do names[#names+1] = 'owner#' .. i end
  local parts = redis.call('HMGET', t, unpack(names))
  for i = 1, #parts do
    if not parts[i] or parts[i] ~= string.sub(p, (i-1)*MAXINLINE + 1, i*MAXINLINE) then return false end
  end
  return true
end
local function unspill(f, a, m)
  for _, name in ipairs({'owner', 'tool', 'args'}) do
    if f[name .. '#0'] then
      local parts, i = {}, 0
      while f[name .. '#' .. i] do
        parts[#parts+1] = f[name .. '#' .. i]
        i = i + 1
      end
      f[name] = table.concat(parts)
    end
  end
  if f.sp == '1' then
    local s, i = redis.call('GET', a) or '', 1
    while i <= #s do
      local name, n, j = string.match(s, '^(%a+):(%d+):()', i)
      if not name then break end
      f[name] = string.sub(s, j, j + tonumber(n) - 1)
      i = j + tonumber(n)
    end
  end
  if f.ml == '1' then f.msg = redis.call('GET', m) or '' end
end
local function withSpills(all, f, a, m)
  if f.sp == '1' then all[#all+1] = '_a'; all[#all+1] = redis.call('GET', a) or '' end
  if f.ml == '1' then all[#all+1] = '_m'; all[#all+1] = redis.call('GET', m) or '' end
  return all
end
`
