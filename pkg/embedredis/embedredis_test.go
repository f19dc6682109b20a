package embedredis_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcptasks/mcptasks/pkg/embedredis"
	"github.com/redis/rueidis"
)

// Keys set with relative and absolute expiries expire on the wall clock;
// absolute expiries never fire early.
func TestKeysExpireOnTheWallClock(t *testing.T) {
	s, err := embedredis.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.Addr()}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	at := time.Now().Add(300 * time.Millisecond)
	for _, cmd := range []rueidis.Completed{
		c.B().Set().Key("rel").Value("v").Px(300 * time.Millisecond).Build(),
		c.B().Set().Key("abs").Value("v").Build(),
		c.B().Pexpireat().Key("abs").MillisecondsTimestamp(at.UnixMilli()).Build(),
		c.B().Set().Key("keep").Value("v").Px(time.Hour).Build(),
	} {
		if err := c.Do(ctx, cmd).Error(); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(k string) bool {
		n, err := c.Do(ctx, c.B().Exists().Key(k).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	if !exists("rel") || !exists("abs") {
		t.Fatal("keys gone before their expiry")
	}
	deadline := time.Now().Add(5 * time.Second)
	for exists("abs") {
		if time.Now().After(deadline) {
			t.Fatal("the PEXPIREAT key did not expire within 5s of its time")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if gone := time.Now(); gone.Before(at) {
		t.Fatalf("the PEXPIREAT key expired %v before its time", at.Sub(gone))
	}
	for exists("rel") {
		if time.Now().After(deadline) {
			t.Fatal("the PX key did not expire within 5s of a 300ms TTL")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !exists("keep") {
		t.Fatal("a key with an hour to live expired")
	}
}
