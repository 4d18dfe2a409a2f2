package bolt

// WithAttempts is s limited to n attempts per optimistic update (the contract suite's
// contention case), sharing s's database.
func WithAttempts(s *Store, n int) *Store {
	c := *s
	c.attempts = n
	return &c
}
