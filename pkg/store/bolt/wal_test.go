package bolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/mailroom/mailroom/pkg/store"
)

func walEmail(id string, at time.Time, body string) store.Email {
	return store.Email{ID: id, TeamID: 1, DomainID: 2, From: "a@example.com", To: []string{"b@example.net"},
		Subject: "log", Content: store.Content{Text: &body}, Status: store.StatusQueued,
		CampaignID: "camp-1", Counted: []string{store.CountTotal},
		CreatedAt: at, UpdatedAt: at}
}

func walCreated(e store.Email) []store.Event {
	return []store.Event{{ID: "created", EmailID: e.ID, Status: "QUEUED", CreatedAt: e.CreatedAt}}
}

// openLogged opens a store in a new folder, closed at the end of the test.
func openLogged(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mailroom.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

// logRecord is a record of the log as append writes it.
func logRecord(t *testing.T, seq uint64, emails ...store.Email) []byte {
	t.Helper()
	var events []store.Event
	for _, e := range emails {
		events = append(events, walCreated(e)...)
	}
	raw, err := encodeRecord(walRecord{Emails: emails, Events: events})
	if err != nil {
		t.Fatal(err)
	}
	numbered(raw, seq)
	return raw
}

func withCampaign(t *testing.T, s *Store) {
	t.Helper()
	if err := s.CreateCampaign(t.Context(), store.Campaign{ID: "camp-1", TeamID: 1, Name: "log", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// counted is the total counter of the emails' campaign, once every logged email is applied.
func counted(t *testing.T, s *Store) int64 {
	t.Helper()
	var total int64
	err := s.view(t.Context(), func(tx *bbolt.Tx) error {
		total = readCounters(tx, 1, "camp-1")[store.CountTotal]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

func segments(t *testing.T, dir string) []string {
	t.Helper()
	files, err := segmentFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestReplayAppliesWhatTheLogHolds writes the log a process leaves when it is killed between
// the log's sync and bbolt's commit: an email bbolt already has (its record applied before the
// kill), two it does not, and a last record cut short by the kill. Open applies the whole
// records once each, drops the torn one (nobody was told it was written) and deletes the log.
func TestReplayAppliesWhatTheLogHolds(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "mailroom.db")
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	a, b, c, d := walEmail("em-a", at, "a"), walEmail("em-b", at, "b"), walEmail("em-c", at, "c"), walEmail("em-d", at, "d")

	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	withCampaign(t, s)
	if err := s.CreateEmails(ctx, []store.Email{a}, walCreated(a)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if left := segments(t, path+walExt); len(left) != 0 {
		t.Fatalf("Close left the log: %v", left)
	}

	// Record 1 (a) is the one bbolt has; record 2 repeats a (a retried request) with b and c;
	// record 3 (d) was cut short by the kill.
	log := append(logRecord(t, 1, a), logRecord(t, 2, a, b, c)...)
	torn := logRecord(t, 3, d)
	log = append(log, torn[:len(torn)-5]...)
	log = append(log, make([]byte, 4096)...) // the rest of the segment's zeros
	if err := os.WriteFile(filepath.Join(path+walExt, "00000000000000000001"+walExt), log, 0o600); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Replayed != 2 {
		t.Errorf("Replayed = %d, want 2 (b and c: a was in bbolt already, d's record is torn)", s.Replayed)
	}
	for _, id := range []string{"em-a", "em-b", "em-c"} {
		e, events, err := s.GetEmailDetail(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if e.Status != store.StatusQueued || len(events) != 1 {
			t.Errorf("%s: %s with %d events, want QUEUED with its one event", id, e.Status, len(events))
		}
	}
	if _, err := s.GetEmail(ctx, "em-d"); err != store.ErrNotFound {
		t.Errorf("the torn record's email: %v, want ErrNotFound", err)
	}
	if total := counted(t, s); total != 3 {
		t.Errorf("campaign total = %d, want 3 (a counted once)", total)
	}
	// The new log: the one segment being written (and the next, made ready), nothing replayed.
	for _, f := range segments(t, path+walExt) {
		if strings.HasSuffix(f, "00000000000000000001"+walExt) {
			raw, _ := os.ReadFile(f)
			if recs := parseRecords(raw); len(recs) != 0 {
				t.Errorf("the replayed segment is still there with %d records", len(recs))
			}
		}
	}
}

// TestLogSegmentsGoOnceApplied writes more than a segment holds: the log moves on to new
// segments and deletes each one bbolt holds entirely, so it stays a few segments long.
func TestLogSegmentsGoOnceApplied(t *testing.T) {
	ctx := t.Context()
	s, path := openLogged(t)
	body := strings.Repeat("x", 64<<10)
	at := time.Now().UTC()
	n := 3 * walSegmentSize / len(body)
	for i := range n {
		e := walEmail(fmt.Sprintf("em-%05d", i), at, body)
		if err := s.CreateEmails(ctx, []store.Email{e}, walCreated(e)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.wal.settle(ctx); err != nil {
		t.Fatal(err)
	}
	s.wal.mu.Lock()
	segs := len(s.wal.segs)
	s.wal.mu.Unlock()
	// The one being written, and at most the one before it when its last record was the one
	// applied just now (it goes with the next apply).
	if segs > 2 {
		t.Errorf("%d segments kept after every record was applied, want at most 2", segs)
	}
	if files := segments(t, path+walExt); len(files) > 3 {
		t.Errorf("%d segment files (kept and the next, made ready), want at most 3: %v", len(files), files)
	}
	_, total, err := s.ListEmails(ctx, store.EmailFilter{TeamID: 1, Limit: 1})
	if err != nil || total != n {
		t.Errorf("ListEmails total = %d, %v; want %d", total, err, n)
	}
}

// TestLoggedEmailsAreReadAtOnce checks read-your-writes across the log: once CreateEmails
// returns, every read sees the email (one email's reads wait for its own record, lists and
// counts for all earlier ones), from many senders at once, each email created exactly once
// although every id is sent by two of them.
// TestLoggedEmailsAreReadAtOnce, also while a burst holds the log's records back (the hold
// lasts an hour here: a read that waited for it would run out of its minute).
func TestLoggedEmailsAreReadAtOnce(t *testing.T) {
	t.Run("idle", func(t *testing.T) { loggedEmailsAreReadAtOnce(t, false) })
	t.Run("burst", func(t *testing.T) { loggedEmailsAreReadAtOnce(t, true) })
}

func loggedEmailsAreReadAtOnce(t *testing.T, burst bool) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, _ := openLogged(t)
	if burst {
		s.wal.holdFor.Store(int64(time.Hour))
		s.YieldTo(func() bool { return true })
	}
	withCampaign(t, s)
	at := time.Now().UTC()
	const senders, each = 16, 40
	var wg sync.WaitGroup
	errs := make(chan error, senders*each)
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// Senders g and g^1 send the same ids (a retried request).
				e := walEmail(fmt.Sprintf("em-%02d-%03d", g/2, i), at, "hello")
				if err := s.CreateEmails(ctx, []store.Email{e}, walCreated(e)); err != nil {
					errs <- err
					return
				}
				if got, err := s.GetEmail(ctx, e.ID); err != nil || got.ID != e.ID {
					errs <- fmt.Errorf("GetEmail(%s) right after CreateEmails: %v", e.ID, err)
					return
				}
				if _, err := s.UpdateEmail(ctx, e.ID, func(m *store.Email) ([]store.Event, error) { return nil, nil }); err != nil {
					errs <- fmt.Errorf("UpdateEmail(%s) right after CreateEmails: %v", e.ID, err)
					return
				}
				if _, total, err := s.ListEmails(ctx, store.EmailFilter{TeamID: 1, Limit: 1}); err != nil || total < i+1 {
					errs <- fmt.Errorf("ListEmails after %d of its own: total %d, %v", i+1, total, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	_, total, err := s.ListEmails(ctx, store.EmailFilter{TeamID: 1, Limit: 1})
	if err != nil || total != senders/2*each {
		t.Errorf("total = %d, %v; want %d (each id once)", total, err, senders/2*each)
	}
	if total := counted(t, s); total != senders/2*each {
		t.Errorf("campaign total = %d, want %d (each email once)", total, senders/2*each)
	}
}

// TestABurstHoldsTheLogBack: while the foreground is busy, the logged emails wait in the log;
// an Unhurried read (delivery) waits with them, a caller's read ends the hold, and so does the
// end of the burst.
func TestABurstHoldsTheLogBack(t *testing.T) {
	s, _ := openLogged(t)
	s.wal.holdFor.Store(int64(time.Hour))
	var busy atomic.Bool
	busy.Store(true)
	s.YieldTo(busy.Load)
	withCampaign(t, s)
	at := time.Now().UTC()
	create := func(id string) {
		t.Helper()
		e := walEmail(id, at, "hello")
		if err := s.CreateEmails(t.Context(), []store.Email{e}, walCreated(e)); err != nil {
			t.Fatal(err)
		}
	}
	unhurried := func(id string, within time.Duration) error {
		ctx, cancel := context.WithTimeout(store.Unhurried(t.Context()), within)
		defer cancel()
		_, err := s.GetEmail(ctx, id)
		return err
	}

	create("held-1")
	if err := unhurried("held-1", 200*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an unhurried read during the burst: %v; want it to wait for the hold", err)
	}
	caller, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if got, err := s.GetEmail(caller, "held-1"); err != nil || got.ID != "held-1" {
		t.Fatalf("a caller's read during the burst: %+v, %v", got, err)
	}

	// A caller reading what another send is still logging: its record is synced after the
	// caller began to wait, and the hold that starts then must not keep it waiting.
	create("held-2")
	e := walEmail("held-3", at, "hello")
	if _, err := s.wal.enqueue(walRecord{Emails: []store.Email{e}, Events: walCreated(e)}); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		kick(s.wal.syncKick)
	}()
	if _, total, err := s.ListEmails(caller, store.EmailFilter{TeamID: 1}); err != nil || total != 3 {
		t.Fatalf("a caller's list while a record is being logged: %d emails, %v; want 3", total, err)
	}

	// The hold ends by itself: after holdFor, and when the burst is over.
	s.wal.holdFor.Store(int64(100 * time.Millisecond)) // read as a hold starts
	create("held-4")
	if err := unhurried("held-4", time.Minute); err != nil {
		t.Fatalf("an unhurried read after the hold's time: %v", err)
	}
	s.wal.holdFor.Store(int64(time.Hour))
	create("held-5")
	busy.Store(false) // within holdLook
	if err := unhurried("held-5", time.Minute); err != nil {
		t.Fatalf("an unhurried read after the burst: %v", err)
	}
}

// TestReplaySkipsWhatWasApplied: an email the log still holds (its segment is the one being
// written) but bbolt has applied and then deleted (retention) must not come back when the
// process is killed: the log's records up to the last one applied are skipped at the start.
func TestReplaySkipsWhatWasApplied(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "mailroom.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	withCampaign(t, s)
	old := walEmail("em-old", time.Now().UTC().Add(-100*24*time.Hour), "old")
	if err := s.CreateEmails(ctx, []store.Email{old}, walCreated(old)); err != nil {
		t.Fatal(err)
	}
	s.SetRetention(90 * 24 * time.Hour)
	if n, err := s.ExpireEmails(ctx, 10); err != nil || n != 1 {
		t.Fatalf("ExpireEmails = %d, %v; want 1", n, err)
	}
	// The kill: the files as they are now (bbolt idle, every commit on disk), opened elsewhere.
	killed := filepath.Join(t.TempDir(), "mailroom.db")
	copyFile(t, path, killed)
	if err := os.Mkdir(killed+walExt, 0o700); err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, f := range segments(t, path+walExt) {
		raw, _ := os.ReadFile(f)
		held += len(parseRecords(raw))
		copyFile(t, f, filepath.Join(killed+walExt, filepath.Base(f)))
	}
	if held == 0 {
		t.Fatal("the log holds no record: the test would not test the replay")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	k, err := Open(killed)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if k.Replayed != 0 {
		t.Errorf("Replayed = %d, want 0", k.Replayed)
	}
	if _, err := k.GetEmail(ctx, "em-old"); err != store.ErrNotFound {
		t.Errorf("the expired email: %v, want ErrNotFound (it came back from the log)", err)
	}
	if total := counted(t, k); total != 1 {
		t.Errorf("campaign total = %d, want 1 (counted again)", total)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	raw, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCloseWritesTheLastBatchIntoANewSegment: at a graceful stop, the last batch the syncer
// writes may not fit in its segment; Close must still get it a new one, write it and apply it.
func TestCloseWritesTheLastBatchIntoANewSegment(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "mailroom.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	w := s.wal
	w.fileSize = w.segSize - 10 // the syncer is idle: its next write needs a new segment
	e := walEmail("em-last", time.Now().UTC(), "last")
	b, err := w.enqueue(walRecord{Emails: []store.Email{e}, Events: walCreated(e)})
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close hangs")
	}
	<-b.done
	if b.err != nil {
		t.Fatalf("the last batch: %v", b.err)
	}
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.GetEmail(ctx, "em-last"); err != nil {
		t.Errorf("the last batch's email after Close: %v", err)
	}
}

// TestAnIDBboltRefusesIsNotLogged: a record the applier could never write would hold every
// read that waits for the log, and every later start; CreateEmails refuses it first.
func TestAnIDBboltRefusesIsNotLogged(t *testing.T) {
	ctx := t.Context()
	s, _ := openLogged(t)
	e := walEmail(strings.Repeat("x", 40<<10), time.Now().UTC(), "too long")
	if err := s.CreateEmails(ctx, []store.Email{e}, nil); err == nil {
		t.Fatal("CreateEmails took a 40 KB id")
	}
	ok := walEmail("em-ok", time.Now().UTC(), "fine")
	if err := s.CreateEmails(ctx, []store.Email{ok}, walCreated(ok)); err != nil {
		t.Fatal(err)
	}
	if _, total, err := s.ListEmails(ctx, store.EmailFilter{TeamID: 1, Limit: 1}); err != nil || total != 1 {
		t.Errorf("ListEmails after the refused id: total %d, %v; want 1", total, err)
	}
}

// TestAnOldPreparationFailureIsTriedAgain: the next segment is asked for when the current one
// is half full; if making it failed then, the rotation that needs it tries again instead of
// failing the send with the old error.
func TestAnOldPreparationFailureIsTriedAgain(t *testing.T) {
	ctx := t.Context()
	s, path := openLogged(t)
	w := s.wal
	// The next segment's name is taken by a directory: preparing it fails.
	blocker := filepath.Join(path+walExt, "00000000000000000002"+walExt)
	if err := os.MkdirAll(filepath.Join(blocker, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	w.fileSize = w.segSize/2 + 1 // the syncer is idle: its next write asks for the next segment
	first := walEmail("em-1", time.Now().UTC(), "one")
	if err := s.CreateEmails(ctx, []store.Email{first}, walCreated(first)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(blocker); err != nil {
		t.Fatal(err)
	}
	if err := s.wal.settle(ctx); err != nil { // the syncer is idle again
		t.Fatal(err)
	}
	w.fileSize = w.segSize - 10 // the next write needs the next segment
	second := walEmail("em-2", time.Now().UTC(), "two")
	if err := s.CreateEmails(ctx, []store.Email{second}, walCreated(second)); err != nil {
		t.Fatalf("the send that needs the next segment, once it can be made: %v", err)
	}
	if _, err := s.GetEmail(ctx, "em-2"); err != nil {
		t.Error(err)
	}
}
