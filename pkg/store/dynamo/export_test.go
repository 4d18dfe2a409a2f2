package dynamo

// WithAttempts is st limited to n attempts per optimistic update (the contract suite's
// contention case), sharing st's client and table.
func WithAttempts(st *Store, n int) *Store {
	c := *st
	c.attempts = n
	return &c
}

// Table is the store's table name.
func (st *Store) Table() string { return st.table }

// WorkShard is the shard of an email id (work index, list partitions, day counters).
func WorkShard(id string) int { return workShard(id) }
