package main

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcptasks/mcptasks/internal/pgschema"
	"github.com/mcptasks/mcptasks/internal/testkit/testpg"
	"github.com/mcptasks/mcptasks/pkg/platform/local"
	"github.com/mcptasks/mcptasks/pkg/tasks/pgstore"
)

// migrate creates the schema named by MCPTASKS_PG_SCHEMA on the database
// of DATABASE_URL_UNPOOLED (over DATABASE_URL), then finds it current; it
// upgrades a schema of every older version; it refuses a missing URL, a
// bad schema name and arguments.
func TestMigrate(t *testing.T) {
	url := testpg.Start(t)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	p := testpg.Pool(t, url)
	var vars map[string]string
	for from := range pgstore.SchemaVersion {
		schema := testpg.Schema(t, url)
		if from > 0 {
			if _, _, err := pgschema.MigrateTo(t.Context(), p, schema, from); err != nil {
				t.Fatal(err)
			}
		}
		vars = map[string]string{"DATABASE_URL": "postgres://nowhere.invalid/db", "DATABASE_URL_UNPOOLED": url, "MCPTASKS_PG_SCHEMA": schema}
		for _, want := range []string{
			fmt.Sprintf("schema %s migrated from version %d to %d", schema, from, pgstore.SchemaVersion),
			fmt.Sprintf("schema %s is at version %d already", schema, pgstore.SchemaVersion),
		} {
			var out bytes.Buffer
			if err := runMigrate(t.Context(), nil, &out, env(vars)); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(out.String()); got != want {
				t.Errorf("output %q, want %q", got, want)
			}
		}
	}
	if err := runMigrate(t.Context(), nil, &bytes.Buffer{}, env(nil)); err == nil || !strings.Contains(err.Error(), "DATABASE_URL") {
		t.Errorf("without a URL: %v", err)
	}
	if err := runMigrate(t.Context(), nil, &bytes.Buffer{}, env(map[string]string{"DATABASE_URL": url, "MCPTASKS_PG_SCHEMA": "Bad-Name"})); err == nil || !strings.Contains(err.Error(), "MCPTASKS_PG_SCHEMA") {
		t.Errorf("a bad schema name: %v", err)
	}
	if err := runMigrate(t.Context(), []string{"now"}, &bytes.Buffer{}, env(vars)); !errors.Is(err, local.ErrUsage) {
		t.Errorf("an argument: %v, want a usage error", err)
	}
}
