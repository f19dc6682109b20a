package tasks

import (
	"encoding/json"
	"sync"
)

// metaCache remembers what parseMeta decided for the exact bytes of a
// request's params._meta. A client sends the same _meta on every request
// (its protocol version, capabilities and identity), and deciding it means
// decoding the capabilities several times over, as the go-sdk would: for
// tasks/get polling that was most of the lean path's CPU. The decision is a
// function of the bytes alone, so a hit is exact. The cache is bounded: at
// most metaEntries entries of at most metaMaxBytes each; when full it
// starts over.
type metaCache struct {
	mu sync.RWMutex
	m  map[string]metaVerdict
}

// metaVerdict is parseMeta's answer.
type metaVerdict struct{ extension, ok bool }

const (
	metaEntries  = 256
	metaMaxBytes = 2048
)

// parse is parseMeta(params), remembered by the raw bytes of params._meta;
// a nil cache only computes it.
func (c *metaCache) parse(params map[string]json.RawMessage) (extension, ok bool) {
	raw := params["_meta"]
	if c == nil || len(raw) > metaMaxBytes {
		return parseMeta(params)
	}
	c.mu.RLock()
	v, hit := c.m[string(raw)]
	c.mu.RUnlock()
	if hit {
		return v.extension, v.ok
	}
	v.extension, v.ok = parseMeta(params)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= metaEntries {
		c.m = make(map[string]metaVerdict, metaEntries)
	}
	c.m[string(raw)] = v
	c.mu.Unlock()
	return v.extension, v.ok
}
