package redisstore

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
	"github.com/mcptasks/mcptasks/pkg/tasks/internal/jsonscan"
)

// decodeEntry decodes one journal entry exactly as json.Unmarshal does
// (FuzzDecodeEntry compares them). Every claim decodes the task's whole
// journal, so a task of n steps decodes O(n²) entries over its life: the
// entries the store writes itself (compact JSON of driver.Entry: known
// members once each, strings without escapes, integers) are split by
// slicing, checking the syntax on the way, and anything else goes to
// json.Unmarshal.
func decodeEntry(raw string) (driver.Entry, error) {
	var e driver.Entry
	if !fastEntry(raw, &e) {
		e = driver.Entry{}
		err := json.Unmarshal([]byte(raw), &e)
		return e, err
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
			if v[0] != '"' {
				return false
			}
			t := &e.At
			if key == "u" {
				t = &e.Until
			}
			if t.UnmarshalJSON([]byte(v)) != nil {
				return false
			}
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
