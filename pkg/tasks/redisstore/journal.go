package redisstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/internal/jsonscan"
)

// decodeEntry decodes one journal entry exactly as slowEntry (json.Unmarshal,
// with the journal's times) does: FuzzDecodeEntry compares them. Every
// claim decodes the task's whole journal, so a task of n steps decodes
// O(n²) entries over its life: the entries the store writes itself
// (compact JSON: known members once each, strings without escapes,
// integers) are split by slicing, checking the syntax on the way, and
// anything else goes to slowEntry.
func decodeEntry(raw string) (driver.Entry, error) {
	var e driver.Entry
	if !fastEntry(raw, &e) {
		return slowEntry(raw)
	}
	return e, nil
}

// The journal's times. An entry's times (u, t) are kept as Unix
// milliseconds (format of 2026-12-03: 13 digits instead of 32 bytes of RFC
// 3339 text with nanoseconds, so that a sleeping task's hash stays in a
// smaller allocation); entries written before hold the text, which every
// reader still takes.

// storedEntry is driver.Entry as the journal holds it: its times as
// numbers (the outer members u and t hide the embedded ones).
type storedEntry struct {
	entryFields
	Until json.RawMessage `json:"u,omitempty"`
	At    json.RawMessage `json:"t,omitempty"`
}

// entryFields is driver.Entry without its methods.
type entryFields driver.Entry

// msJSON is t as the journal holds it: Unix milliseconds, nil for zero.
func msJSON(t time.Time) json.RawMessage {
	if t.IsZero() {
		return nil
	}
	return strconv.AppendInt(nil, t.UnixMilli(), 10)
}

// entryTime decodes a journal time: Unix milliseconds, or RFC 3339 text
// (entries written before the milliseconds), or null (zero).
func entryTime(v string) (time.Time, error) {
	var t time.Time
	switch {
	case v == "" || v == "null":
		return t, nil
	case v[0] == '"':
		err := t.UnmarshalJSON([]byte(v))
		return t, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || !jsonInteger(v) {
		return t, fmt.Errorf("journal time %s is neither Unix milliseconds nor RFC 3339 text", v)
	}
	return time.UnixMilli(n).UTC(), nil
}

// slowEntry decodes any entry json.Unmarshal takes, with its times as
// either form.
func slowEntry(raw string) (driver.Entry, error) {
	var w storedEntry
	if err := json.Unmarshal([]byte(raw), &w); err != nil {
		return driver.Entry{}, err
	}
	e := driver.Entry(w.entryFields)
	var err, err2 error
	e.Until, err = entryTime(string(w.Until))
	e.At, err2 = entryTime(string(w.At))
	if err = errors.Join(err, err2); err != nil {
		return driver.Entry{}, err
	}
	return e, nil
}

// fastEntry decodes raw into e; it reports false (e then partly set) for
// anything outside the store's own shape, and for invalid JSON.
func fastEntry(raw string, e *driver.Entry) bool {
	if len(raw) < 2 || raw[0] != '{' {
		return false
	}
	var seen uint16
	i := 1
	if raw[i] == '}' {
		return i+1 == len(raw)
	}
	for {
		// A member name: no escapes, and exactly one of Entry's.
		key, next, ok := plainString(raw, i)
		if !ok || next >= len(raw) || raw[next] != ':' {
			return false
		}
		i = next + 1
		bit, ok := entryMembers[key]
		if !ok || seen&bit != 0 {
			return false // unknown (json matches names case-insensitively), or repeated
		}
		seen |= bit
		end := jsonscan.ValueEnd(raw, i)
		if end <= i || raw[i] == 'n' { // null: json's rules for it differ by type
			return false
		}
		v := raw[i:end]
		switch key {
		case "n", "k", "e":
			s, next, ok := plainString(raw, i)
			if !ok || next != end {
				return false
			}
			switch key {
			case "n":
				e.Name = s
			case "k":
				e.Kind = driver.EntryKind(s)
			default:
				e.Err = s
			}
		case "v":
			if !json.Valid([]byte(v)) {
				return false
			}
			e.Value = json.RawMessage(v)
		case "u", "t":
			t := &e.At
			if key == "u" {
				t = &e.Until
			}
			tv, err := entryTime(v)
			if err != nil {
				return false
			}
			*t = tv
		case "a", "d":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || !jsonInteger(v) {
				return false
			}
			if key == "a" {
				if int64(int(n)) != n {
					return false
				}
				e.Attempt = int(n)
			} else {
				e.Took = time.Duration(n)
			}
		case "any":
			switch v {
			case "true":
				e.Any = true
			case "false":
				e.Any = false
			default:
				return false
			}
		default: // "ks"
			return false
		}
		i = end
		if i >= len(raw) {
			return false
		}
		switch raw[i] {
		case ',':
			i++
		case '}':
			return i+1 == len(raw)
		default:
			return false // whitespace
		}
	}
}

// entryMembers are the JSON member names of driver.Entry, each with a bit.
var entryMembers = map[string]uint16{
	"n": 1 << 0, "k": 1 << 1, "v": 1 << 2, "e": 1 << 3, "u": 1 << 4,
	"ks": 1 << 5, "any": 1 << 6, "t": 1 << 7, "a": 1 << 8, "d": 1 << 9,
}

// plainString reads the JSON string at raw[i] when it holds no escape and
// is valid UTF-8 (json.Unmarshal would replace invalid bytes): its
// contents and the index after its closing quote.
func plainString(raw string, i int) (string, int, bool) {
	if i >= len(raw) || raw[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(raw); j++ {
		switch c := raw[j]; {
		case c == '"':
			s := raw[i+1 : j]
			return s, j + 1, utf8.ValidString(s)
		case c == '\\' || c < 0x20:
			return "", 0, false
		}
	}
	return "", 0, false
}

// jsonInteger reports whether v is a JSON integer (strconv.ParseInt also
// takes a sign + and leading zeros).
func jsonInteger(v string) bool {
	if v[0] == '-' {
		v = v[1:]
	}
	return v != "" && v[0] >= '1' && v[0] <= '9' || v == "0"
}

// The journal in the task hash. A list costs Redis a quicklist and a key of
// its own (about 400 bytes for a journal of two entries), so a task's
// journal is kept in its hash (format of 2026-12-03, see "Scale" in
// BENCHMARKS.md): its entries, each ended by '\n' (compact JSON holds
// none), make one stream cut into chunks of at most maxInline bytes, the
// fields J0, J1, ..., with jn their count; the hash stays a listpack. A
// stream that would pass maxJournalChunks chunks moves for good to the list
// <prefix>{id}:j (the hash keeps at most 128 fields as a listpack), where
// tasks written before this format keep theirs: a task has chunks (jn
// set), or a list (flag j "1" or missing), or no journal (j "0").

// maxJournalChunks bounds the journal's chunks in the task hash (3 KiB).
const maxJournalChunks = 48

// journalFields appends to fields the chunks of the stream of the entries
// raw (each compact JSON) and their count jn.
func journalFields(fields []string, raw []string) []string {
	var b strings.Builder
	for _, e := range raw {
		b.WriteString(e)
		b.WriteByte('\n')
	}
	s, n := b.String(), 0
	for ; s != ""; n++ {
		c := min(len(s), maxInline)
		fields = append(fields, "J"+strconv.Itoa(n), s[:c])
		s = s[c:]
	}
	return append(fields, "jn", strconv.Itoa(n))
}

// encodeEntry is the compact JSON of e, as the journal holds it.
func encodeEntry(e *driver.Entry) (string, error) {
	b, err := json.Marshal(storedEntry{entryFields: entryFields(*e), Until: msJSON(e.Until), At: msJSON(e.At)})
	if err != nil {
		return "", err
	}
	if bytes.IndexByte(b, '\n') >= 0 { // never: json.Marshal compacts
		return "", errors.New("journal entry holds a newline")
	}
	return string(b), nil
}

// journalStream returns the entries of the journal's chunks: the stream
// the chunks of h (jn set) make, split at its newlines, or nil.
func journalStream(h map[string]string) ([]string, bool) {
	jn, ok := h["jn"]
	if !ok {
		return nil, false
	}
	n, _ := strconv.Atoi(jn)
	var b strings.Builder
	for i := range n {
		b.WriteString(h["J"+strconv.Itoa(i)])
	}
	return splitStream(b.String()), true
}

// splitStream splits a journal stream into its entries.
func splitStream(s string) []string {
	out := make([]string, 0, strings.Count(s, "\n"))
	for s != "" {
		e, rest, _ := strings.Cut(s, "\n")
		out = append(out, e)
		s = rest
	}
	return out
}

// Input requests by reference. The input step that parks a task journals
// its requests (an entry of kind input whose value maps each key to its
// request) in the commit that parks it, and the requests hash :p held them
// a second time, each too long for a listpack: about 500 bytes per task
// waiting for input. A parked request that this commit's appended entries
// hold byte for byte is kept in :p as "" (journal.go, format of
// 2026-12-03); readers take it from the journal's last input entry that
// holds its key. Requests of a park from anywhere else (a re-park for the
// keys left, a store's caller that journals nothing) are kept whole.

// parkValue is what :p keeps of the request v of the input key k parked by
// a commit that appends the entries appended (as the journal holds them):
// "" when one of them (of kind input) holds v byte for byte, else v.
func parkValue(appended []string, k string, v json.RawMessage) string {
	for i := len(appended) - 1; i >= 0; i-- {
		e, err := decodeEntry(appended[i])
		if err != nil || e.Kind != driver.KindInput || !slices.Contains(e.Keys, k) {
			continue
		}
		var reqs map[string]json.RawMessage
		if json.Unmarshal(e.Value, &reqs) == nil && bytes.Equal(reqs[k], v) {
			return ""
		}
	}
	return string(v)
}

// pkKeys returns the input keys of the task hash's field pk (see
// luaJournal's pkKeys).
func pkKeys(v string) []string {
	var keys []string
	for v != "" {
		k, rest, _ := strings.Cut(v, "\n")
		keys = append(keys, k)
		v = rest
	}
	return keys
}

// fillRequests sets the requests of pending kept by reference (value "")
// from the journal entries raw, the last input entry that holds each key;
// it fails only on an entry it cannot decode.
func fillRequests(pending map[string]string, raw []string) error {
	missing := 0
	for _, v := range pending {
		if v == "" {
			missing++
		}
	}
	for i := len(raw) - 1; i >= 0 && missing > 0; i-- {
		e, err := decodeEntry(raw[i])
		if err != nil {
			return fmt.Errorf("journal entry %d: %w", i, err)
		}
		if e.Kind != driver.KindInput {
			continue
		}
		var reqs map[string]json.RawMessage
		if err := json.Unmarshal(e.Value, &reqs); err != nil {
			return fmt.Errorf("journal entry %d: %w", i, err)
		}
		for k, v := range pending {
			if r, ok := reqs[k]; ok && v == "" {
				pending[k] = string(r)
				missing--
			}
		}
	}
	return nil // a "" found nowhere was parked as "" itself
}

// luaJournal defines, for the scripts:
//
//   - journalOf(f): the journal stream of the task whose fields the table
//     f holds (jn set);
//   - journalAppend(set, t, j, flag, jn, s, exp): appends the entries s
//     (each ended by '\n') to the journal of the task hash t whose fields
//     j and jn are flag and jn: to its chunks, whose fields it appends to
//     the table set for the caller's HSET, when it has some or no journal
//     yet; else, and when the chunks would pass maxJournalChunks (then
//     moving them), to the list j, which expires at exp;
//   - pkKeys(v): the input keys the task hash's field pk (value v, or
//     nil) holds: a park whose requests are all kept by reference keeps
//     their keys there, each ended by '\n', instead of in :p (format of
//     2026-12-03), when they fit in maxInline bytes;
//   - parked(t, j, p, pk): the requests of the task hash t, from its
//     requests hash p and its field pk (value pk), and, when one of them is
//     kept by reference (""), the task's journal (the stream of its
//     chunks, or its list j), else false.
var luaJournal = `
local JMAX = ` + strconv.Itoa(maxJournalChunks) + `
local function journalOf(f)
  local parts = {}
  for i = 0, tonumber(f.jn) - 1 do parts[#parts+1] = f['J' .. i] or '' end
  return table.concat(parts)
end
local function journalAppend(set, t, j, flag, jn, s, exp)
  if not jn and flag ~= '0' then
    local items = {}
    for e in string.gmatch(s, '([^\n]*)\n') do items[#items+1] = e end
    if redis.call('RPUSH', j, unpack(items)) == #items then redis.call('PEXPIREAT', j, exp) end
    return
  end
  local n = tonumber(jn or '0')
  if n > 0 then
    -- The last chunk is filled up first.
    n = n - 1
    s = (redis.call('HGET', t, 'J' .. n) or '') .. s
  end
  if n + math.ceil(#s / MAXINLINE) > JMAX then
    local names = {}
    for k = 0, n - 1 do names[#names+1] = 'J' .. k end
    if n > 0 then s = table.concat(redis.call('HMGET', t, unpack(names))) .. s end
    names[#names+1] = 'J' .. n
    names[#names+1] = 'jn'
    redis.call('HDEL', t, unpack(names))
    -- In the list from here: a task written before jn's format may say
    -- j "0".
    set[#set+1] = 'j'; set[#set+1] = '1'
    journalAppend(set, t, j, '1', nil, s, exp)
    return
  end
  for p = 1, #s, MAXINLINE do
    set[#set+1] = 'J' .. n; set[#set+1] = string.sub(s, p, p + MAXINLINE - 1)
    n = n + 1
  end
  set[#set+1] = 'jn'; set[#set+1] = n
end
local function pkKeys(v)
  local out = {}
  if v then for k in string.gmatch(v, '([^\n]*)\n') do out[#out+1] = k end end
  return out
end
local function parked(t, j, p, pk)
  local req = redis.call('HGETALL', p)
  for _, k in ipairs(pkKeys(pk)) do req[#req+1] = k; req[#req+1] = '' end
  for i = 2, #req, 2 do
    if req[i] == '' then
      local jn = redis.call('HGET', t, 'jn')
      if not jn then return req, redis.call('LRANGE', j, 0, -1) end
      local names = {}
      for k = 0, tonumber(jn) - 1 do names[#names+1] = 'J' .. k end
      return req, table.concat(redis.call('HMGET', t, unpack(names)))
    end
  end
  return req, false
end
`
