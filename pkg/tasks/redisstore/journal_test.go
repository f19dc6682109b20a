package redisstore

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/tasks/driver"
)

// journalSeeds are entries as the store writes them, and shapes it does
// not write (which decodeEntry leaves to json.Unmarshal).
func journalSeeds(tb testing.TB) []string {
	at := time.Date(2026, 12, 2, 2, 40, 11, 123456789, time.UTC)
	var seeds []string
	for _, e := range []driver.Entry{
		{Name: "part-1", Kind: driver.KindDo, Value: json.RawMessage(`1`), At: at, Attempt: 1, Took: 12345},
		{Name: "fetch", Kind: driver.KindDo, Value: json.RawMessage(`{"a":[1,"x\"}",{"b":null}],"c":"é"}`), At: at, Attempt: 2},
		{Name: "fetch", Kind: driver.KindDo, Err: "boom: \"quoted\"", At: at, Attempt: 3, Took: time.Second},
		{Name: "nap", Kind: driver.KindSleep, Until: at.Add(time.Hour), At: at},
		{Name: "q", Kind: driver.KindInput, Keys: []string{"a", "b"}, Any: true, Until: at},
		{Name: "stop", Kind: driver.KindOffer, Value: json.RawMessage(`{"method":"elicitation/create"}`)},
		{Name: "stop", Kind: driver.KindCheck, Value: json.RawMessage(`"yes"`)},
		{Name: "part-2", Kind: driver.KindAttempt, Err: "x", Until: at, At: at, Attempt: 1, Took: 5},
		{},
	} {
		// As this store writes it (times in Unix ms), and as the format
		// before (RFC 3339 text).
		raw, err := encodeEntry(&e)
		if err != nil {
			tb.Fatal(err)
		}
		b, err := json.Marshal(e)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, raw, string(b))
	}
	return append(seeds,
		`{"n":"a","k":"do","v":null}`, `{"n":null}`, `{"N":"a"}`, `{"n":"a","n":"b"}`, `{ "n":"a"}`,
		`{"n":"a" }`, `{"n":"\u0061"}`, `{"n":"a\xff"}`, `{"a":1.5}`, `{"a":"1"}`, `{"t":"yesterday"}`,
		`{"t":1}`, `{"t":-1}`, `{"t":01}`, `{"u":1.5}`, `{"u":1e3}`, `{"t":"1"}`, `{"u":null}`, `{"any":1}`, `{"any":null}`, `{"v":[1,2]}`, `{"v":"}"}`, `{"x":1,"n":"a"}`, `[]`, `1`, `{`,
		`{"n":"a"}x`, `{"d":-7}`, `{"a":99999999999999999999}`, `{"ks":["a"]}`, ``)
}

// decodeEntry decodes what slowEntry decodes, and fails where it fails.
func TestDecodeEntry(t *testing.T) {
	for _, raw := range journalSeeds(t) {
		checkDecodeEntry(t, raw)
	}
}

// The journal holds times as Unix milliseconds, and reads the RFC 3339
// text of entries written before; an entry decodes to what was written, its
// times to the millisecond.
func TestJournalTimes(t *testing.T) {
	at := time.Date(2026, 12, 3, 6, 26, 18, 57097452, time.UTC)
	e := driver.Entry{Name: "compute", Kind: driver.KindSleep, Until: at.Add(2 * time.Hour), At: at, Attempt: 1, Took: 76476}
	raw, err := encodeEntry(&e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"n":"compute","k":"sleep","a":1,"d":76476,"u":1796286378057,"t":1796279178057}`
	if raw != want {
		t.Fatalf("encoded\n %s\nwant\n %s", raw, want)
	}
	old, _ := json.Marshal(e) // the format before: RFC 3339 text
	if len(raw) >= len(old)-30 {
		t.Errorf("encoded %d bytes, the text form %d", len(raw), len(old))
	}
	for _, r := range []string{raw, string(old)} {
		got, err := decodeEntry(r)
		if err != nil {
			t.Fatal(err)
		}
		wantE := e
		if r == raw {
			wantE.Until, wantE.At = e.Until.Truncate(time.Millisecond), e.At.Truncate(time.Millisecond)
		}
		if !reflect.DeepEqual(got, wantE) {
			t.Errorf("%s:\n got %#v\nwant %#v", r, got, wantE)
		}
	}
}

func FuzzDecodeEntry(f *testing.F) {
	for _, raw := range journalSeeds(f) {
		f.Add(raw)
	}
	f.Fuzz(checkDecodeEntry)
}

func checkDecodeEntry(t *testing.T, raw string) {
	want, wantErr := slowEntry(raw)
	got, err := decodeEntry(raw)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q: error %v, slowEntry's %v", raw, err, wantErr)
	}
	// slowEntry is json.Unmarshal but for the times.
	var plain driver.Entry
	if json.Unmarshal([]byte(raw), &plain) == nil && (wantErr != nil || !reflect.DeepEqual(plain, want)) {
		t.Fatalf("%q: slowEntry %#v, %v; json.Unmarshal %#v", raw, want, wantErr, plain)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got %#v\nwant %#v", raw, got, want)
	}
}

// BenchmarkDecodeEntry compares decodeEntry with json.Unmarshal on an
// entry of a Do step as the worker journals it.
func BenchmarkDecodeEntry(b *testing.B) {
	raw := journalSeeds(b)[0]
	b.Run("decodeEntry", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeEntry(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var e driver.Entry
			if err := json.Unmarshal([]byte(raw), &e); err != nil {
				b.Fatal(err)
			}
		}
	})
}
