package slots

import (
	"fmt"
	"testing"
)

// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
func TestSlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":            0x31C3 % Count, // the CRC-16/XMODEM check value
		"foo":                  12182,
		"{user1000}.following": Slot("user1000"),
		"foo{}{bar}":           Slot("foo{}{bar}"), // empty tag: the whole key
		"foo{{bar}}zap":        Slot("{bar"),
		"foo{bar}{zap}":        Slot("bar"),
		"":                     0,
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
	if Slot("foo{}{bar}") == Slot("bar") {
		t.Error("an empty hash tag must hash the whole key")
	}
}

func TestTags(t *testing.T) {
	for _, n := range []int{1, 2, 3, 6, 12, 64, Count} {
		tags := Tags(n)
		if len(tags) != n {
			t.Fatalf("Tags(%d) has %d tags", n, len(tags))
		}
		for k, tag := range tags {
			// Shard k holds the slots s with s*n/Count = k.
			if s := Slot("{" + tag + "}x"); s*n/Count != k {
				t.Fatalf("Tags(%d)[%d] = %q hashes to slot %d, of shard %d", n, k, tag, s, s*n/Count)
			}
			if ShardOf(tag, n) != k {
				t.Fatalf("ShardOf(%q, %d) = %d, want %d", tag, n, ShardOf(tag, n), k)
			}
		}
	}
}

// With n = 12 the shards fall on the slot ranges redis-cli --cluster create
// gives 3 masters: a task and its shard are on one master.
func TestShardsFollowMasters(t *testing.T) {
	// redis-cli's layout for 3 masters.
	master := func(slot int) int {
		switch {
		case slot <= 5460:
			return 0
		case slot <= 10922:
			return 1
		}
		return 2
	}
	tags := Tags(12)
	apart := 0
	for i := range 100000 {
		id := fmt.Sprintf("task-%d", i)
		if master(Slot(id)) != master(Slot("{"+tags[ShardOf(id, 12)]+"}")) {
			apart++
		}
	}
	// Only the tasks of the boundary slots 5461 and 10922 can be apart.
	if apart > 100000*3/Count {
		t.Fatalf("%d of 100000 tasks have their shard on another master", apart)
	}
}

func ExampleTags() {
	tags := Tags(3)
	fmt.Println(len(tags), ShardOf(tags[2], 3))
	// Output: 3 2
}
