package jsonscan

import "testing"

func TestValueEnd(t *testing.T) {
	for _, c := range []struct {
		in   string
		i    int
		want int
	}{
		{`"a\"b",1`, 0, 6},
		{`{"k":"}",[1,{}]} x`, 0, 16},
		{`[1,[2,"]"]],`, 0, 11},
		{`123,`, 0, 3},
		{`true}`, 0, 4},
		{`-1.5e3 `, 0, 6},
		{`{"a":1`, 0, 6},    // not closed: the end of the input
		{`"open`, 0, 5},     // not closed
		{`{"n":`, 5, 5},     // past the end
		{`{"n":"x"}`, 4, 8}, // a member's value inside an object
	} {
		if got := ValueEnd(c.in, c.i); got != c.want {
			t.Errorf("ValueEnd(%q, %d) = %d, want %d", c.in, c.i, got, c.want)
		}
		if got := ValueEnd([]byte(c.in), c.i); got != c.want {
			t.Errorf("ValueEnd([]byte(%q), %d) = %d, want %d", c.in, c.i, got, c.want)
		}
	}
}
