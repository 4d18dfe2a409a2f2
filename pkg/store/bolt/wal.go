package bolt

// The write-ahead log of CreateEmails.
//
// A send is answered once its emails are on disk, and bbolt puts them there with a commit:
// dirty pages written, a sync, the meta page, a second sync, one writer at a time, shared with
// every delivery's status change. The API's requests waited on that queue (about 7 ms each
// under load). CreateEmails now appends its emails to a log instead and returns after the
// log's sync, which concurrent senders share (group commit, no waiting for company: whoever
// arrives during a sync goes with the next one). A single applier then writes the logged
// emails into bbolt, many records to a transaction, in log order, with exactly the writes
// CreateEmails made before, and records in the same transaction the sequence number of the
// last record it applied; a segment of the log is deleted once bbolt has committed all of it.
// Segments are written in place into a file already full of zeros and synced (the next one is
// made ready in the background): a sync then carries the new bytes only, not the file's size,
// which on ext4 is a journal commit shared with every other file's changes. At Open, the
// records past the last one applied are applied before anything else reads the store (an
// email already present is skipped too, as for a retried request).
//
// Reads and writes of the records CreateEmails writes (emails, their events, indexes, counts,
// the feed, campaign counters) wait until every record appended before them is applied
// (settle), or for one email, its own record (settleEmail), so the store reads its own writes
// as before; the records the log never touches (teams, keys, domains, templates,
// suppressions, contacts, webhooks, idempotency) are read without waiting (viewNow,
// updateNow), which is what keeps the send path off bbolt's queue.
//
// During a burst of sends (Store.YieldTo) the applier holds the synced records back, for up to
// a second, and then writes them in larger transactions (hold): a caller that waits to read
// ends the hold, delivery and the background loops (store.Unhurried) wait with it.
//
// Failures. A segment that cannot be made ready fails the sends of that moment and is tried
// again at the next. A write or sync of the log that fails zeroes what it wrote (so no start
// applies what its callers were told failed) and stops the log: after a failed sync the file's
// state is unknown, so every later send fails until the process restarts.

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/mailroom/mailroom/pkg/store"
)

// walRecord is one CreateEmails call.
type walRecord struct {
	Seq    uint64        `json:"-"` // in the record's header
	Emails []store.Email `json:"emails"`
	Events []store.Event `json:"events,omitempty"`
}

const (
	walExt         = ".wal"
	walSegmentSize = 4 << 20   // the zeroed size of a segment; one is closed when the next record would not fit
	walFirstSize   = 256 << 10 // the first segment's: a store that takes few emails writes few zeros
	walMaxRecord   = 1 << 30   // a length beyond this is a torn or corrupt header
	walApplyEmails = 500       // emails per apply transaction, at most (one record may exceed it)
	walHeader      = 16        // little-endian: payload length, CRC-32C of the payload then the sequence, sequence
)

var (
	walTable   = crc32.MakeTable(crc32.Castagnoli)
	errClosed  = errors.New("bolt: the store is closed")
	walApplied = []byte("\x00wal-applied") // bucketSeq: the sequence number of the last record applied
)

// walBatch is the records one sync makes durable.
type walBatch struct {
	buf    []byte
	recs   []walRecord
	emails int    // in recs
	size   int    // of buf, once it is dropped
	last   uint64 // sequence number of its last record
	done   chan struct{}
	err    error // of the write or the sync, set before done closes
	failed bool  // not durable: the applier skips it (its callers were told)
}

type walFile struct {
	f    *os.File
	path string
	size int64
}

type walSegment struct {
	path string
	last uint64 // sequence number of the last record written to it
}

type wal struct {
	dir     string
	db      *bbolt.DB
	commits *committer

	appended atomic.Uint64 // sequence number of the last record appended
	applied  atomic.Uint64 // every record up to this one is in bbolt (or failed)

	mu        sync.Mutex
	cur       *walBatch // filling
	toApply   []*walBatch
	toApplyN  int               // emails in toApply
	toApplyB  int               // their records' bytes in the log
	appliedCh chan struct{}     // closed (and replaced) each time applied moves
	pending   map[string]uint64 // email id → sequence number of its record, until applied
	closed    bool
	segs      []walSegment // oldest first; the last is the one being written
	broken    error        // set when the log cannot be written any more
	applyErr  error        // the applier gave up at close: what it had not applied stays in the log

	// The syncer's.
	f        *os.File // the segment being written
	fileSize int64
	segSize  int64
	wanted   bool // the next segment was asked for

	// The preparer's.
	want     chan struct{} // asks for the next segment
	next     chan walFile  // the next segment, zeroed and synced
	prepErr  chan error    // or why it could not be made
	prepStop chan struct{}
	prepDone chan struct{}

	syncKick, applyKick chan struct{}
	stop                chan struct{}
	syncDone, applyDone chan struct{}
	closeOnce           sync.Once
	closeErr            error

	// busy tells a burst of foreground writes (Store.YieldTo): the applier then holds the
	// synced records (hold). waiters counts the callers waiting for records to be applied who
	// are not Unhurried: while there is one, nothing is held; urgent wakes a hold for them.
	busy    atomic.Pointer[func() bool]
	waiters atomic.Int64
	urgent  chan struct{}
	holdFor atomic.Int64 // applyHold in nanoseconds (tests lengthen it)
}

// applyHold is how long, at most, the applier holds synced records while the foreground is
// busy, and holdEmails and holdBytes (of their records in the log) how many it holds at most;
// walApplyBusy and applyBytes bound what it then writes in one transaction (every other
// writer waits for it: an Idempotency-Key's record, a delivery's status); holdLook is how
// often it looks again whether the burst is over.
const (
	applyHold    = time.Second
	holdEmails   = 20000
	holdBytes    = 64 << 20
	walApplyBusy = 2000
	applyBytes   = 16 << 20
	holdLook     = 10 * time.Millisecond
)

// openWAL applies what dir holds past the last record bbolt has, deletes it, and starts a new
// log. It returns how many emails it wrote.
func openWAL(dir string, db *bbolt.DB, commits *committer) (*wal, int, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, 0, fmt.Errorf("bolt: log %s: %w", dir, err)
	}
	w := &wal{dir: dir, db: db, commits: commits, cur: &walBatch{done: make(chan struct{})},
		appliedCh: make(chan struct{}), pending: make(map[string]uint64),
		syncKick: make(chan struct{}, 1), applyKick: make(chan struct{}, 1), urgent: make(chan struct{}, 1),
		stop:     make(chan struct{}),
		syncDone: make(chan struct{}), applyDone: make(chan struct{}),
		want: make(chan struct{}, 1), next: make(chan walFile), prepErr: make(chan error),
		prepStop: make(chan struct{}), prepDone: make(chan struct{})}
	w.holdFor.Store(int64(applyHold))
	n, last, err := w.replay()
	if err != nil {
		return nil, 0, err
	}
	w.appended.Store(last)
	w.applied.Store(last)
	go w.prepare()
	if err := w.rotate(); err != nil {
		close(w.prepStop)
		<-w.prepDone
		return nil, 0, err
	}
	go w.syncLoop()
	go w.applyLoop()
	return w, n, nil
}

// apply writes recs into bbolt in one transaction (shared with other writers: commit.go)
// with the sequence number of the last, and returns how many emails it wrote.
func (w *wal) apply(recs []walRecord) (int, error) {
	created := 0
	err := w.commits.update(func(tx *bbolt.Tx) (err error) {
		created = 0 // this may run more than once
		for _, r := range recs {
			n, err := createEmailsTx(tx, r.Emails, r.Events)
			if err != nil {
				return err
			}
			created += n
		}
		if last := recs[len(recs)-1].Seq; last > appliedSeq(tx) {
			return tx.Bucket(bucketSeq).Put(walApplied, u64(int64(last)))
		}
		return nil
	})
	return created, err
}

func appliedSeq(tx *bbolt.Tx) uint64 {
	if v := tx.Bucket(bucketSeq).Get(walApplied); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// segmentFiles lists dir's segments in log order (their names are zero-padded numbers).
func segmentFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("bolt: log %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), walExt) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	slices.Sort(out)
	return out, nil
}

// replay applies the whole records of the log's segments past the last one bbolt has, in
// order, then deletes the segments; it returns how many emails it wrote and the last sequence
// number used. A segment ends at its first record that is cut short or fails its checksum (a
// crash during its write, so nobody was told it was written), or at the zeros after its last.
func (w *wal) replay() (created int, last uint64, err error) {
	if err := w.db.View(func(tx *bbolt.Tx) error { last = appliedSeq(tx); return nil }); err != nil {
		return 0, 0, fmt.Errorf("bolt: replay the log: %w", err)
	}
	files, err := segmentFiles(w.dir)
	if err != nil || len(files) == 0 {
		return 0, last, err
	}
	done := last
	var (
		chunk  []walRecord
		emails int
	)
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		n, err := w.apply(chunk)
		if err != nil {
			return fmt.Errorf("bolt: replay the log: %w", err)
		}
		created += n
		chunk, emails = nil, 0
		return nil
	}
	for _, path := range files {
		raw, err := os.ReadFile(path)
		if err != nil {
			return 0, 0, fmt.Errorf("bolt: replay the log: %w", err)
		}
		for _, r := range parseRecords(raw) {
			last = max(last, r.Seq)
			if r.Seq <= done {
				continue // applied before the stop
			}
			chunk = append(chunk, r)
			emails += len(r.Emails)
			if emails >= walApplyEmails {
				if err := flush(); err != nil {
					return 0, 0, err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return 0, 0, err
	}
	for _, path := range files {
		if err := os.Remove(path); err != nil {
			return 0, 0, fmt.Errorf("bolt: replay the log: %w", err)
		}
	}
	return created, last, syncDir(w.dir)
}

// prepare makes segments ready: the first at once, each next one when asked (once the one
// being written is half full): numbered in order, full of zeros, synced, with their directory
// entry synced. A segment that cannot be made is reported to the one waiting for it and tried
// again at the next request.
func (w *wal) prepare() {
	defer close(w.prepDone)
	for n, first := 1, true; ; first = false {
		if !first {
			select {
			case <-w.want:
			case <-w.prepStop:
				return
			}
		}
		size := int64(walSegmentSize)
		if n == 1 {
			size = walFirstSize
		}
		path := filepath.Join(w.dir, fmt.Sprintf("%020d%s", n, walExt))
		f, err := zeroed(path, w.dir, size)
		if err != nil {
			select {
			case w.prepErr <- err:
			case <-w.prepStop:
				return
			}
			continue
		}
		select {
		case w.next <- walFile{f: f, path: path, size: size}:
			n++
		case <-w.prepStop:
			_ = f.Close()
			_ = os.Remove(path)
			return
		}
	}
}

func zeroed(path, dir string, size int64) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("bolt: log: %w", err)
	}
	zeros := make([]byte, min(size, 1<<20))
	for off := int64(0); off < size && err == nil; off += int64(len(zeros)) {
		_, err = f.Write(zeros)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("bolt: log: %w", err)
	}
	return f, nil
}

// rotate closes the segment being written (its records stay until applied) and starts the
// next one.
func (w *wal) rotate() error {
	earlier := w.wanted // asked when the segment was half full: its answer may be old
	w.askNext()
	var nf walFile
	for nf.f == nil {
		select {
		case nf = <-w.next:
		case err := <-w.prepErr:
			w.wanted = false
			if earlier { // that attempt failed a while ago: try again now
				earlier = false
				w.askNext()
				continue
			}
			return err // asked again at the next rotate
		case <-w.prepDone:
			return errClosed
		}
	}
	if w.f != nil {
		_ = w.f.Close()
	}
	w.f, w.fileSize, w.segSize, w.wanted = nf.f, 0, nf.size, false
	w.mu.Lock()
	w.segs = append(w.segs, walSegment{path: nf.path, last: w.appended.Load()})
	w.mu.Unlock()
	return nil
}

// askNext asks the preparer for the next segment, once per segment.
func (w *wal) askNext() {
	if !w.wanted && w.f != nil {
		w.wanted = true
		kick(w.want)
	}
}

// encodeRecord is r with room for its header, which numbered sets once r has its sequence
// number (the encoding, the costly part, is done before the log's lock).
func encodeRecord(r walRecord) ([]byte, error) {
	payload, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("bolt: encode emails: %w", err)
	}
	if len(payload) > walMaxRecord {
		return nil, fmt.Errorf("bolt: %d emails are too large for one write", len(r.Emails))
	}
	out := make([]byte, walHeader, walHeader+len(payload))
	binary.LittleEndian.PutUint32(out, uint32(len(payload)))
	binary.LittleEndian.PutUint32(out[4:], crc32.Checksum(payload, walTable))
	return append(out, payload...), nil
}

// numbered writes seq into an encoded record's header and adds it to its checksum.
func numbered(raw []byte, seq uint64) {
	binary.LittleEndian.PutUint64(raw[8:], seq)
	sum := crc32.Update(binary.LittleEndian.Uint32(raw[4:]), walTable, raw[8:16])
	binary.LittleEndian.PutUint32(raw[4:], sum)
}

// parseRecords decodes a segment's records up to the first one cut short or failing its
// checksum.
func parseRecords(raw []byte) []walRecord {
	var out []walRecord
	for len(raw) >= walHeader {
		n := binary.LittleEndian.Uint32(raw)
		if n == 0 || n > walMaxRecord || uint64(len(raw)-walHeader) < uint64(n) {
			break // the zeros after the last record, or a record cut short
		}
		end := walHeader + int(n)
		if crc32.Update(crc32.Checksum(raw[walHeader:end], walTable), walTable, raw[8:16]) != binary.LittleEndian.Uint32(raw[4:]) {
			break
		}
		var r walRecord
		if err := json.Unmarshal(raw[walHeader:end], &r); err != nil {
			break
		}
		r.Seq = binary.LittleEndian.Uint64(raw[8:])
		out = append(out, r)
		raw = raw[end:]
	}
	return out
}

// append writes r to the log and returns once it is on disk (or could not be put there).
func (w *wal) append(r walRecord) error {
	b, err := w.enqueue(r)
	if err != nil {
		return err
	}
	kick(w.syncKick)
	<-b.done
	return b.err
}

// enqueue numbers r and adds it to the batch the next sync writes.
func (w *wal) enqueue(r walRecord) (*walBatch, error) {
	raw, err := encodeRecord(r)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, errClosed
	}
	if w.broken != nil {
		return nil, w.broken
	}
	// Numbered under the lock, so that the log holds the records in their order.
	r.Seq = w.appended.Load() + 1
	numbered(raw, r.Seq)
	w.appended.Store(r.Seq)
	b := w.cur
	b.buf = append(b.buf, raw...)
	b.recs = append(b.recs, r)
	b.emails += len(r.Emails)
	b.last = r.Seq
	for _, e := range r.Emails {
		w.pending[e.ID] = r.Seq
	}
	return b, nil
}

func kick(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// syncLoop writes and syncs what was appended meanwhile, one batch at a time, and hands each
// batch to the applier.
func (w *wal) syncLoop() {
	defer close(w.syncDone)
	for {
		select {
		case <-w.syncKick:
		case <-w.stop:
		}
		w.mu.Lock()
		b := w.cur
		stopping, n := w.closed, len(b.recs)
		if n > 0 {
			w.cur = &walBatch{done: make(chan struct{})}
		}
		w.mu.Unlock()
		if n > 0 {
			w.write(b)
		}
		if stopping && n == 0 {
			if w.f != nil {
				_ = w.f.Close()
			}
			return
		}
	}
}

func (w *wal) write(b *walBatch) {
	w.mu.Lock()
	broken := w.broken
	w.mu.Unlock()
	if broken != nil {
		w.finish(b, broken)
		return
	}
	if w.fileSize > 0 && w.fileSize+int64(len(b.buf)) > w.segSize {
		if err := w.rotate(); err != nil {
			w.finish(b, fmt.Errorf("bolt: log: %w", err)) // nothing written: the log goes on
			return
		}
	}
	off := w.fileSize
	written, err := w.f.WriteAt(b.buf, off) // past the zeros, the file grows: still whole
	if err == nil {
		err = datasync(w.f)
	}
	if err != nil {
		err = fmt.Errorf("bolt: write the log: %w", err)
		// What reached the disk must not be applied at the next start: its callers are told
		// it failed.
		if zerr := w.zero(off, written); zerr != nil {
			slog.Error("bolt: a failed write to the log could not be undone", "err", zerr)
		}
		w.mu.Lock()
		w.broken = fmt.Errorf("bolt: the log cannot be written since: %w", err)
		w.mu.Unlock()
		w.finish(b, err)
		return
	}
	w.fileSize += int64(len(b.buf))
	w.mu.Lock()
	w.segs[len(w.segs)-1].last = b.last
	w.mu.Unlock()
	if w.fileSize > w.segSize/2 {
		w.askNext()
	}
	w.finish(b, nil)
}

// zero overwrites n bytes at off with zeros and syncs them.
func (w *wal) zero(off int64, n int) error {
	_, err := w.f.WriteAt(make([]byte, n), off)
	return errors.Join(err, datasync(w.f))
}

// finish hands b to the applier (a failed batch too: applied moves past it in order) and
// wakes its callers.
func (w *wal) finish(b *walBatch, err error) {
	b.size, b.buf = len(b.buf), nil
	if err != nil {
		b.err, b.failed = err, true
	}
	w.mu.Lock()
	w.toApply = append(w.toApply, b)
	w.toApplyN += b.emails
	w.toApplyB += b.size
	w.mu.Unlock()
	kick(w.applyKick)
	close(b.done)
}

// applyLoop writes the synced records into bbolt, in log order, then lets settle return and
// deletes the segments bbolt now holds entirely.
func (w *wal) applyLoop() {
	defer close(w.applyDone)
	for {
		select {
		case <-w.applyKick:
		case <-w.syncDone:
			// The syncer is gone: apply what is left, then stop.
			w.mu.Lock()
			left := len(w.toApply)
			w.mu.Unlock()
			if left == 0 {
				return
			}
		}
		limit, bytes := walApplyEmails, math.MaxInt
		if w.hold() {
			limit, bytes = walApplyBusy, applyBytes
		}
		for {
			w.mu.Lock()
			var (
				take          []*walBatch
				emails, taken int
			)
			for len(w.toApply) > 0 && (len(take) == 0 || emails < limit && taken < bytes) {
				b := w.toApply[0]
				w.toApply = w.toApply[1:]
				w.toApplyN -= b.emails
				w.toApplyB -= b.size
				take = append(take, b)
				emails += b.emails
				taken += b.size
			}
			w.mu.Unlock()
			if len(take) == 0 {
				break
			}
			var recs []walRecord
			for _, b := range take {
				if !b.failed {
					recs = append(recs, b.recs...)
				}
			}
			for delay := 10 * time.Millisecond; len(recs) > 0; delay = min(2*delay, 5*time.Second) {
				_, err := w.apply(recs)
				if err == nil {
					break
				}
				// The records are on disk in the log: they are applied when bbolt takes them,
				// at the latest at the next start.
				slog.Error("bolt: applying logged emails failed; retrying", "emails", emails, "err", err)
				select {
				case <-time.After(delay):
				case <-w.stop:
					w.mu.Lock()
					w.applyErr = err
					w.mu.Unlock()
					return
				}
			}
			w.done(take)
		}
	}
}

// hold puts the writing of synced records into bbolt off while the foreground is busy (a
// burst of sends: Store.YieldTo), as delivery yields to it: bbolt's writes of an email cost
// more than the send that logged it (its pages and two syncs), and they can wait, since the
// log holds the records and the store reads its own writes by waiting for them. The hold
// ends when the burst does, after holdFor, when holdEmails emails or holdBytes wait, while a
// caller who is not Unhurried waits for records to be applied, or when the log stops. It
// reports whether it held: the applier then writes larger transactions.
func (w *wal) hold() bool {
	busy := w.busy.Load()
	if busy == nil || !(*busy)() {
		return false
	}
	select {
	case <-w.urgent: // left by a caller served already: waiters tells of the ones still there
	default:
	}
	if w.waiters.Load() > 0 {
		return false
	}
	deadline := time.NewTimer(time.Duration(w.holdFor.Load()))
	defer deadline.Stop()
	look := time.NewTicker(holdLook)
	defer look.Stop()
	for {
		w.mu.Lock()
		full := w.toApplyN >= holdEmails || w.toApplyB >= holdBytes
		w.mu.Unlock()
		if full || !(*busy)() || w.waiters.Load() > 0 {
			return true
		}
		select {
		case <-deadline.C:
		case <-w.urgent:
		case <-w.stop:
		case <-look.C:
			continue
		}
		return true
	}
}

// done records that every record up to the last of bs is applied.
func (w *wal) done(bs []*walBatch) {
	last := bs[len(bs)-1].last
	w.mu.Lock()
	for _, b := range bs {
		for _, r := range b.recs {
			for _, e := range r.Emails {
				if w.pending[e.ID] <= last {
					delete(w.pending, e.ID)
				}
			}
		}
	}
	w.applied.Store(last)
	close(w.appliedCh)
	w.appliedCh = make(chan struct{})
	var gone []string
	for len(w.segs) > 1 && w.segs[0].last <= last {
		gone = append(gone, w.segs[0].path)
		w.segs = w.segs[1:]
	}
	w.mu.Unlock()
	for _, path := range gone {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			slog.Error("bolt: removing an applied log segment failed", "err", err)
		}
	}
}

// settle returns once every record appended before it was called is in bbolt.
func (w *wal) settle(ctx context.Context) error {
	return w.settleTo(ctx, w.appended.Load())
}

// settleEmail returns once the email id, if logged before the call, is in bbolt: a read or
// change of one email waits for its own record only, not for everything appended since (a
// campaign's fan-out logs thousands of emails a second).
func (w *wal) settleEmail(ctx context.Context, id string) error {
	w.mu.Lock()
	seq, ok := w.pending[id]
	w.mu.Unlock()
	if !ok {
		return nil
	}
	return w.settleTo(ctx, seq)
}

func (w *wal) settleTo(ctx context.Context, target uint64) error {
	if w.applied.Load() < target && !store.IsUnhurried(ctx) {
		// A caller waits: nothing is held until it is done (hold), and a hold under way ends.
		// Its record may not be synced yet; the hold that starts when it is sees the count.
		w.waiters.Add(1)
		defer w.waiters.Add(-1)
		kick(w.urgent)
	}
	for {
		w.mu.Lock()
		ch := w.appliedCh
		w.mu.Unlock()
		if w.applied.Load() >= target {
			return nil
		}
		select {
		case <-ch:
		case <-w.applyDone:
			if w.applied.Load() >= target {
				return nil
			}
			return errClosed // the applier gave up at close: the next start applies it
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// close stops taking records, waits until everything appended is synced and applied, and
// deletes the log, which bbolt now holds entirely. A second call waits for the first and
// returns what it returned.
func (w *wal) close() error {
	w.closeOnce.Do(func() { w.closeErr = w.shut() })
	return w.closeErr
}

func (w *wal) shut() error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	<-w.syncDone // the last batch may still need a segment: the preparer stops after
	<-w.applyDone
	close(w.prepStop)
	<-w.prepDone
	w.mu.Lock()
	applyErr := w.applyErr
	w.mu.Unlock()
	if applyErr != nil {
		return fmt.Errorf("bolt: emails left in the log for the next start: %w", applyErr)
	}
	files, err := segmentFiles(w.dir)
	if err != nil {
		return err
	}
	for _, path := range files {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("bolt: log: %w", err)
		}
	}
	return syncDir(w.dir)
}
