package tasks

import (
	"encoding/json"
	"net"
	"regexp"
	"testing"
)

// integerIDPattern is what integerID decides, as a regular expression.
var integerIDPattern = regexp.MustCompile(`^(0|-?[1-9][0-9]{0,14})$`)

// integerID accepts exactly the ids the pattern accepts.
func FuzzIntegerID(f *testing.F) {
	for _, s := range []string{"0", "-0", "00", "1", "-1", "10", "012", "123456789012345", "1234567890123456",
		"-123456789012345", "-1234567890123456", "", "-", "1.0", "1e3", " 1", "1 ", "+1", "9x", `"1"`, "999999999999999"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, id []byte) {
		if got, want := integerID(id), integerIDPattern.Match(id); got != want {
			t.Errorf("integerID(%q) = %v, want %v", id, got, want)
		}
	})
}

// object gives what json.Unmarshal into a map[string]json.RawMessage
// gives, for objects, and refuses everything else.
func FuzzObject(f *testing.F) {
	for _, s := range []string{`{}`, ` {}`, `{"a":1}`, `{ "a" : 1 , "b" : [1, {"c": "}"}] }`, `{"a":1,"a":2}`,
		`{"\u0061":"x","a":"y"}`, `{"a\"b":null}`, "{\"a\xff\":1}", `{"a":"\\"}`, `{"a":{}}`, `{"a":1}x`, `[1]`, `"s"`,
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t","_meta":{"k":[true,false,null,-1.5e3]}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := object(raw)
		var want map[string]json.RawMessage
		wantOK := len(raw) > 0 && raw[0] == '{' && json.Unmarshal(raw, &want) == nil
		if ok != wantOK {
			t.Fatalf("object(%q) ok = %v, json.Unmarshal %v", raw, ok, wantOK)
		}
		if len(got) != len(want) {
			t.Fatalf("object(%q) = %q, json.Unmarshal %q", raw, got, want)
		}
		for k, v := range want {
			if string(got[k]) != string(v) {
				t.Fatalf("object(%q)[%q] = %q, json.Unmarshal %q", raw, k, got[k], v)
			}
			var s string
			if json.Unmarshal(v, &s) == nil && v[0] == '"' {
				m := map[string]json.RawMessage{"k": got[k]}
				if d, _, ok := str(m, "k"); !ok || d != s {
					t.Fatalf("str of %q = %q, %v; json.Unmarshal %q", v, d, ok, s)
				}
			}
		}
	})
}

// localLoopback decides as isLoopback of the address's text.
func TestLocalLoopback(t *testing.T) {
	for _, a := range []string{"127.0.0.1:80", "127.9.9.9:1", "[::1]:443", "[::ffff:127.0.0.1]:80", "10.0.0.1:80",
		"[fe80::1%eth0]:80", "[::]:80", "0.0.0.0:80", "[2001:db8::1]:8080"} {
		ta, err := net.ResolveTCPAddr("tcp", a)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := localLoopback(ta), isLoopback(ta.String()); got != want {
			t.Errorf("localLoopback(%s) = %v, isLoopback(%q) = %v", a, got, ta.String(), want)
		}
	}
}
