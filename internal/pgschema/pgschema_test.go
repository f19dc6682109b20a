package pgschema_test

import (
	"sync"
	"testing"

	"github.com/mcptasks/mcptasks/internal/pgschema"
	"github.com/mcptasks/mcptasks/internal/testkit/testpg"
)

// Processes that find a schema of an older version upgrade it at once:
// one of them migrates, under the lock, and the others find it current.
// Every version from none up is upgraded to Version.
func TestMigrateConcurrently(t *testing.T) {
	url := testpg.Start(t)
	p := testpg.Pool(t, url)
	ctx := t.Context()
	for from := range pgschema.Version {
		schema := testpg.Schema(t, url)
		if from > 0 {
			if f, to, err := pgschema.MigrateTo(ctx, p, schema, from); err != nil || f != 0 || to != from {
				t.Fatalf("MigrateTo(%d) = %d, %d, %v", from, f, to, err)
			}
		}
		type result struct{ from, to int }
		results := make(chan result, 4)
		var wg sync.WaitGroup
		for range cap(results) {
			wg.Go(func() {
				f, to, err := pgschema.Migrate(ctx, p, schema)
				if err != nil {
					t.Error(err)
				}
				results <- result{f, to}
			})
		}
		wg.Wait()
		close(results)
		migrated := 0
		for r := range results {
			switch r {
			case result{from, pgschema.Version}:
				migrated++
			case result{pgschema.Version, pgschema.Version}:
			default:
				t.Errorf("from version %d: Migrate reported %d to %d", from, r.from, r.to)
			}
		}
		if migrated != 1 {
			t.Errorf("from version %d: %d processes migrated, want 1", from, migrated)
		}
		if v, err := pgschema.Installed(ctx, p, schema); err != nil || v != pgschema.Version {
			t.Errorf("from version %d: installed %d (%v), want %d", from, v, err, pgschema.Version)
		}
	}
	if _, _, err := pgschema.MigrateTo(ctx, p, testpg.Schema(t, url), pgschema.Version+1); err == nil {
		t.Errorf("MigrateTo(%d), a version this code does not know, succeeded", pgschema.Version+1)
	}
}
