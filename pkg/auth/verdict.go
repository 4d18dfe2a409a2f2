package auth

import (
	"context"
	"errors"
	"strconv"

	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/store"
)

// On AWS an API Gateway Lambda authorizer authenticates each request (cached by the
// Authorization header), and the function behind the route receives its verdict in the
// request's authorizer context instead of looking the key up again. The authorizer admits
// every request that carries the header and passes the verdict, rejection included, so that a
// rejected key is answered by the function in the API's error envelope (403 FORBIDDEN "Invalid
// API token"), not by API Gateway's bare {"message":"Forbidden"}.

// Context keys of a verdict.
const (
	ctxTeamID     = "teamId"
	ctxKeyID      = "keyId"
	ctxPermission = "permission"
	ctxDomainID   = "domainId"
	ctxRateLimit  = "rateLimit"       // the team's, or -1 for the server's default
	ctxDailyLimit = "dailyEmailLimit" // 0: none
	ctxStatus     = "status"          // a rejection: 401 or 403
	ctxMessage    = "message"         // its message
)

// VerdictContext is the authorizer context for the outcome of Authenticate. An error that is
// not a rejection (the table is unavailable) has no verdict: the authorizer fails, and API
// Gateway answers 500 without caching anything.
func VerdictContext(p Principal, err error) (map[string]any, error) {
	if err != nil {
		fe, ok := fault.As(err)
		if !ok || (fe.Kind != fault.Unauthorized && fe.Kind != fault.Forbidden) {
			return nil, err
		}
		status := "403"
		if fe.Kind == fault.Unauthorized {
			status = "401"
		}
		return map[string]any{ctxStatus: status, ctxMessage: fe.Message}, nil
	}
	return map[string]any{
		ctxTeamID:     strconv.FormatInt(p.TeamID, 10),
		ctxKeyID:      p.KeyID,
		ctxPermission: string(p.Permission),
		ctxDomainID:   strconv.FormatInt(p.DomainID, 10),
		ctxRateLimit:  strconv.FormatInt(p.RateLimit, 10),
		ctxDailyLimit: strconv.FormatInt(p.DailyEmailLimit, 10),
	}, nil
}

type verdictKey struct{}

type verdict struct {
	p   Principal
	err error
}

// errBadVerdict is a verdict this code did not write: the request is refused.
var errBadVerdict = errors.New("malformed authorizer context")

// WithVerdict returns ctx carrying the verdict of an authorizer context (the lambda map of an
// API Gateway HTTP API request); Authenticate then returns it instead of looking the key up.
// Only the Lambda adapter calls it, with what API Gateway passed: a client cannot set it.
func WithVerdict(ctx context.Context, c map[string]any) context.Context {
	str := func(k string) string { s, _ := c[k].(string); return s }
	v := verdict{}
	switch status := str(ctxStatus); status {
	case "401":
		v.err = fault.New(fault.Unauthorized, "%s", str(ctxMessage))
	case "403":
		v.err = fault.New(fault.Forbidden, "%s", str(ctxMessage))
	case "":
		team, err1 := strconv.ParseInt(str(ctxTeamID), 10, 64)
		domain, err2 := strconv.ParseInt(str(ctxDomainID), 10, 64)
		perm := store.Permission(str(ctxPermission))
		if err1 != nil || err2 != nil || team <= 0 || str(ctxKeyID) == "" ||
			(perm != store.PermissionFull && perm != store.PermissionSending) {
			v.err = errBadVerdict
			break
		}
		v.p = Principal{TeamID: team, KeyID: str(ctxKeyID), Permission: perm, DomainID: domain,
			RateLimit: DefaultRateLimit}
		// A verdict cached from before the limits were in it has none: the server's defaults.
		if n, err := strconv.ParseInt(str(ctxRateLimit), 10, 64); err == nil && n >= DefaultRateLimit {
			v.p.RateLimit = n
		}
		if n, err := strconv.ParseInt(str(ctxDailyLimit), 10, 64); err == nil && n >= 0 {
			v.p.DailyEmailLimit = n
		}
	default:
		v.err = errBadVerdict
	}
	return context.WithValue(ctx, verdictKey{}, v)
}

func verdictFrom(ctx context.Context) (verdict, bool) {
	v, ok := ctx.Value(verdictKey{}).(verdict)
	return v, ok
}
