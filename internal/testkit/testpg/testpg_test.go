package testpg_test

import (
	"testing"

	"github.com/mcptasks/mcptasks/internal/testkit/testpg"
)

// The server answers, and a second one of the same test is another.
func TestStart(t *testing.T) {
	u := testpg.Start(t)
	p := testpg.Pool(t, u)
	var v string
	if err := p.QueryRow(t.Context(), "SHOW server_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	t.Logf("server %s at %s", v, u)
}
