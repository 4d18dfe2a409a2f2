// Package batch carries, in a context, how many emails its caller delivers together (a stream
// batch), so that the pacer takes their send slots with one write. It is its own package so
// that the stream handler can say so without linking the deliver flow into every function.
package batch

import "context"

type key struct{}

// With tells the pacer that ctx's caller delivers a batch of n emails.
func With(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, key{}, n)
}

// Of is the batch size ctx carries, 0 if none.
func Of(ctx context.Context) int {
	n, _ := ctx.Value(key{}).(int)
	return n
}
