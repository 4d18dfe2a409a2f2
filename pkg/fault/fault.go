// Package fault holds the few error kinds the product reports to callers. Product packages
// return them; pkg/api maps each Kind to one HTTP status and error code, in one place. Any other
// error is internal and its text never reaches a client.
package fault

import (
	"errors"
	"fmt"
	"time"
)

// Kind says what went wrong, from the caller's point of view.
type Kind int

const (
	Invalid      Kind = iota + 1 // 400 BAD_REQUEST
	Unauthorized                 // 401 UNAUTHORIZED
	Forbidden                    // 403 FORBIDDEN
	NotFound                     // 404 NOT_FOUND
	Conflict                     // 409 NOT_UNIQUE
	TooLarge                     // 413 PAYLOAD_TOO_LARGE
	RateLimited                  // 429 RATE_LIMITED
)

// Error is an error a caller may see: Message is written for them.
type Error struct {
	Kind    Kind
	Message string
	// RetryAfter is how long to wait before trying again (a RateLimited error's Retry-After
	// header, in whole seconds); 0 says nothing.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Message }

// Field reports invalid input in one field: "attachments: at most 10 items".
func Field(field, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	return &Error{Kind: Invalid, Message: msg}
}

// New makes an error of any kind.
func New(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// NotFoundf is the common "X not found".
func NotFoundf(format string, args ...any) *Error { return New(NotFound, format, args...) }

// As returns the *Error in err's chain, if any.
func As(err error) (*Error, bool) {
	var fe *Error
	ok := errors.As(err, &fe)
	return fe, ok
}

// Prefix returns err with its field path prefixed ("[3].to: ..."), keeping its kind. Errors that
// are not *Error are returned as they are.
func Prefix(prefix string, err error) error {
	fe, ok := As(err)
	if !ok {
		return err
	}
	return &Error{Kind: fe.Kind, Message: prefix + fe.Message}
}
