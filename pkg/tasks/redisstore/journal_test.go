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
		b, err := json.Marshal(e)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, string(b))
	}
	return append(seeds,
		`{"n":"a","k":"do","v":null}`, `{"n":null}`, `{"N":"a"}`, `{"n":"a","n":"b"}`, `{ "n":"a"}`,
		`{"n":"a" }`, `{"n":"\u0061"}`, `{"n":"a\xff"}`, `{"a":1.5}`, `{"a":"1"}`, `{"t":"yesterday"}`,
		`{"t":1}`, `{"any":1}`, `{"any":null}`, `{"v":[1,2]}`, `{"v":"}"}`, `{"x":1,"n":"a"}`, `[]`, `1`, `{`,
		`{"n":"a"}x`, `{"d":-7}`, `{"a":99999999999999999999}`, `{"ks":["a"]}`, ``)
}

// decodeEntry decodes what json.Unmarshal decodes, and fails where it
// fails.
func TestDecodeEntry(t *testing.T) {
	for _, raw := range journalSeeds(t) {
		checkDecodeEntry(t, raw)
	}
}

func FuzzDecodeEntry(f *testing.F) {
	for _, raw := range journalSeeds(f) {
		f.Add(raw)
	}
	f.Fuzz(checkDecodeEntry)
}

func checkDecodeEntry(t *testing.T, raw string) {
	var want driver.Entry
	wantErr := json.Unmarshal([]byte(raw), &want)
	got, err := decodeEntry(raw)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q: error %v, json.Unmarshal's %v", raw, err, wantErr)
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
