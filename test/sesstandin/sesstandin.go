// Package sesstandin is an SES v2 stand-in for tests and benchmarks: an HTTP server speaking
// the two calls Mailroom's sending path makes (SendEmail and GetAccount) that admits Rate
// messages per second, a token bucket refilled continuously with a burst of one second's
// worth, and answers the rest as SES v2 does when an account sends faster than its maximum
// send rate: HTTP 429, TooManyRequestsException, "Maximum sending rate exceeded.".
package sesstandin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Server is the stand-in.
type Server struct {
	*httptest.Server
	Rate float64 // messages per second, and the burst

	mu        sync.Mutex
	tokens    float64
	last      time.Time
	accepted  map[string]int // messages accepted per email (the mailroom-email-id tag)
	refused   int
	first     time.Time
	latest    time.Time
	acceptedN int
}

// Start starts a stand-in admitting rate messages per second.
func Start(rate float64) *Server {
	s := &Server{Rate: rate, tokens: rate, accepted: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v2/email/outbound-emails", s.send)
	mux.HandleFunc("GET /v2/email/account", s.account)
	s.Server = httptest.NewServer(mux)
	return s
}

func (s *Server) send(w http.ResponseWriter, r *http.Request) {
	var in struct {
		EmailTags []struct{ Name, Value string }
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		fail(w, http.StatusBadRequest, "BadRequestException", "Invalid request body")
		return
	}
	id := ""
	for _, t := range in.EmailTags {
		if t.Name == "mailroom-email-id" {
			id = t.Value
		}
	}
	now := time.Now()
	s.mu.Lock()
	if !s.last.IsZero() {
		s.tokens = min(s.Rate, s.tokens+now.Sub(s.last).Seconds()*s.Rate)
	}
	s.last = now
	if s.tokens < 1 {
		s.refused++
		s.mu.Unlock()
		fail(w, http.StatusTooManyRequests, "TooManyRequestsException", "Maximum sending rate exceeded.")
		return
	}
	s.tokens--
	s.accepted[id]++
	s.acceptedN++
	if s.first.IsZero() {
		s.first = now
	}
	s.latest = now
	n := s.acceptedN
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"MessageId":"0100-standin-%d"}`, n)
}

func (s *Server) account(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	sent := s.acceptedN
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"SendQuota":{"Max24HourSend":1000000,"MaxSendRate":%g,"SentLast24Hours":%d},"SendingEnabled":true,"ProductionAccessEnabled":true,"EnforcementStatus":"HEALTHY"}`, s.Rate, sent)
}

func fail(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", code)
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"message":%q}`, strings.ReplaceAll(msg, `"`, `'`))
}

// Stats are what the stand-in saw.
type Stats struct {
	Accepted    map[string]int // per email
	Total       int
	Refused     int           // answered 429
	First, Last time.Time     // the first and last accepted message
	Span        time.Duration // Last - First
}

// Stats returns a copy of what the stand-in saw so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	acc := make(map[string]int, len(s.accepted))
	for k, v := range s.accepted {
		acc[k] = v
	}
	return Stats{Accepted: acc, Total: s.acceptedN, Refused: s.refused, First: s.first, Last: s.latest, Span: s.latest.Sub(s.first)}
}
