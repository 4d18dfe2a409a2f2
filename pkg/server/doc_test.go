package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/config"
)

// TestOpenAPIDocServed: the local server serves the OpenAPI document without an API key.
func TestOpenAPIDocServed(t *testing.T) {
	ctx := context.Background()
	cfg := config.Config{Backend: config.BackendEmbedded, DataDir: t.TempDir(), Workers: 1, AuthCacheTTL: time.Minute, LogLevel: slog.LevelError + 4}
	s, err := Start(ctx, cfg, "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Shutdown(ctx) }()
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
