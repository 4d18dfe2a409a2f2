package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mailroom/mailroom/pkg/app"
	"github.com/mailroom/mailroom/pkg/config"
)

// TestStartWithEventsLeftToPublish: a data folder whose outbox journal holds a sent message
// whose events were not all published (the server was killed) starts cleanly. The outbox
// publishes them as soon as it opens, while the app is still being built, so nothing its
// publishing reads may be written after that (a data race under -race, at every restart after
// a crash).
func TestStartWithEventsLeftToPublish(t *testing.T) {
	dir := t.TempDir()
	outbox := filepath.Join(dir, "outbox")
	if err := os.MkdirAll(outbox, 0o750); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	var lines []byte
	for i := range 100 { // enough that the publishing goes on while the app is built
		id := fmt.Sprintf("emleft%03d", i)
		if err := os.WriteFile(filepath.Join(outbox, id+".eml"), []byte("Subject: left\r\n\r\nhi\r\n"), 0o640); err != nil {
			t.Fatal(err)
		}
		line, _ := json.Marshal(map[string]any{"op": "sent", "emailId": id, "teamId": 1, "messageId": "<" + id + "@local>",
			"sentAt": now, "at": now.Add(-time.Minute), "from": "a@example.com", "to": []string{"b@example.org"}, "recipients": []string{"b@example.org"}})
		lines = append(append(lines, line...), '\n')
	}
	if err := os.WriteFile(filepath.Join(outbox, ".journal"), lines, 0o640); err != nil {
		t.Fatal(err)
	}
	a, err := app.New(context.Background(), config.Config{DataDir: dir, Workers: 1, LogLevel: slog.LevelError + 4}, app.Options{Local: true})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the publishing goes on meanwhile
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
