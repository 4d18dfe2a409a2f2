package server

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/api"
	"github.com/mailroom/mailroom/pkg/config"
)

// quietServer starts an embedded server on a free port, stopped when the test ends.
func quietServer(t *testing.T) *Server {
	t.Helper()
	ctx := context.Background()
	cfg := config.Config{Backend: config.BackendEmbedded, DataDir: t.TempDir(), Workers: 1, AuthCacheTTL: time.Minute, LogLevel: slog.LevelError + 4}
	s, err := Start(ctx, cfg, "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(ctx) })
	return s
}

// TestOpenAPIDocServed: the local server serves the OpenAPI document without an API key.
func TestOpenAPIDocServed(t *testing.T) {
	s := quietServer(t)
	resp, err := http.Get(s.URL + "/api/v1/doc")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		OpenAPI string
		Info    struct{ Version string }
		Paths   map[string]any
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("GET /api/v1/doc = %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if doc.OpenAPI != "3.0.3" || doc.Info.Version != Version() || doc.Paths["/api/v1/emails"] == nil {
		t.Errorf("document: openapi %q, version %q, %d paths", doc.OpenAPI, doc.Info.Version, len(doc.Paths))
	}
}

// TestServedBesidesAnswerAsDocumented: every path the document lists besides the API's routes
// is served by the local server, with the status and type it documents, without a key.
func TestServedBesidesAnswerAsDocumented(t *testing.T) {
	s := quietServer(t)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, b := range api.ServedBesides {
		path, status, typ := cmp.Or(b.Try, b.Path), cmp.Or(b.Anonymous, b.Status), b.Type
		if b.Anonymous != 0 && b.Anonymous != b.Status {
			typ = "" // the sign-in form, or a stream's plain refusal
		}
		req, _ := http.NewRequest(b.Method, s.URL+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		documented := typ == "" || slices.ContainsFunc(strings.Split(typ, ","), func(t string) bool {
			return strings.HasPrefix(resp.Header.Get("Content-Type"), t)
		})
		if resp.StatusCode != status || !documented {
			t.Errorf("%s %s: %d %q, documented %d %q", b.Method, path, resp.StatusCode, resp.Header.Get("Content-Type"), status, typ)
		}
	}
}
