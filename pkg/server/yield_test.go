package server

import "github.com/mailroom/mailroom/pkg/store/bolt"

// The embedded store is what Start makes yield to the API's bursts (a.Store.(yielder)): if its
// method changed, the assertion there would silently stop holding.
var _ yielder = (*bolt.Store)(nil)
