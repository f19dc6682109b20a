package endpoint

import (
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
