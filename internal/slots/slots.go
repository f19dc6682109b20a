// Package slots maps keys to Redis Cluster hash slots and spreads a global
// key (a queue, an index) over n shards that sit beside the tasks they
// serve.
//
// A task's keys share the hash tag {taskId}, so a task lives in slot
// Slot(taskId). Shard k of n covers the slots s with s*n/16384 = k
// and its keys carry the hash tag Tags(n)[k], which hashes into that same
// range. A task's shard is ShardOf(taskId, n). When the masters own
// contiguous slot ranges whose bounds fall on shard bounds (as
// `redis-cli --cluster create` lays out 2, 3, 4, 6 or 12 masters with n =
// 12), a task and its shard's keys live on the same master: the failover
// of one master touches only the tasks and shards it serves, and the order
// of a master's replication stream holds across a task's record and its
// shard's entries.
package slots

import (
	"strconv"
	"strings"
)

// Count is the number of hash slots of a Redis Cluster.
const Count = 16384

// Slot returns the hash slot of key, honouring a hash tag ({...}) as Redis
// Cluster does.
func Slot(key string) int {
	for i := 0; i < len(key); i++ {
		if key[i] == '{' {
			for j := i + 1; j < len(key); j++ {
				if key[j] == '}' {
					if j > i+1 {
						key = key[i+1 : j]
					}
					return int(crc16(key)) % Count
				}
			}
			break
		}
	}
	return int(crc16(key)) % Count
}

// ShardOf returns the shard (0..n-1) of the task whose keys carry the hash
// tag {id}. A branch of a task's parallel step, whose id is the task's id,
// a dot and more (driver.BranchID), falls on its task's shard.
func ShardOf(id string, n int) int {
	if n <= 1 {
		return 0
	}
	if i := strings.IndexByte(id, '.'); i >= 0 {
		id = id[:i]
	}
	return int(crc16(id)) % Count * n / Count
}

// Tags returns, for each of n shards (1 ≤ n ≤ Count), a short hash tag
// (without braces) whose slot lies in the shard's range: the first of the
// decimal strings "0", "1", ... that does. The result is the same on every
// call and in every process.
func Tags(n int) []string {
	n = min(max(n, 1), Count)
	tags := make([]string, n)
	left := n
	for i := 0; left > 0; i++ {
		t := strconv.Itoa(i)
		k := ShardOf(t, n)
		if tags[k] == "" {
			tags[k] = t
			left--
		}
	}
	return tags
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the
// checksum Redis Cluster hashes keys with.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
