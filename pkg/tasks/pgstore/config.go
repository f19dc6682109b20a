package pgstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultConnectTimeout bounds a connection's dial and setup when the URL
// sets no connect_timeout.
const DefaultConnectTimeout = 5 * time.Second

// PoolConfig parses a PostgreSQL URL (or keyword/value string) into the
// configuration of a pool fit for the store: statements run in pgx's exec
// mode (the extended protocol with the unnamed statement: one round trip,
// nothing prepared that outlives a statement), so the pool works through a
// transaction-mode pooler (PgBouncer, Neon's pooled URL, RDS Proxy), unless
// the URL chooses another with default_query_exec_mode (simple_protocol
// for a pooler that does not speak the extended protocol; cache_statement
// for a direct connection, which saves the server a parse per statement).
// A URL without connect_timeout gets DefaultConnectTimeout.
func PoolConfig(databaseURL string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parsing the database URL: %w", err)
	}
	if !strings.Contains(databaseURL, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	return cfg, nil
}

// ConnConfig parses a PostgreSQL URL into the configuration of one
// connection, as PoolConfig does for a pool: for Options.Listen, from the
// direct (unpooled) URL.
func ConnConfig(databaseURL string) (*pgx.ConnConfig, error) {
	cfg, err := PoolConfig(databaseURL)
	if err != nil {
		return nil, err
	}
	return cfg.ConnConfig, nil
}
