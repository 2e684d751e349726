package kvcache

// Memory is the whole cache mapping, for placing its pages (pkg/numa).
func (c *Cache) Memory() []byte { return c.mem }
