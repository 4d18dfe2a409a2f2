// Package campaign runs bulk sends to contact books. A campaign is started (now or at its
// scheduled time) and then advances in batch steps: each step takes the next batchSize
// subscribed, non-suppressed contacts after a persisted cursor, writes one personalised email
// per contact with create-if-absent (the email id derives from campaign and contact, so a
// retried step never writes two), hands them to delivery, and moves the cursor. Steps are
// numbered; a step runs only if it is the campaign's next one, so late or repeated schedules do
// nothing. Pause takes effect between steps; resume continues from the cursor.
package campaign

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mailroom/mailroom/pkg/email"
	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/metric"
	"github.com/mailroom/mailroom/pkg/schedule"
	"github.com/mailroom/mailroom/pkg/store"
	"github.com/mailroom/mailroom/pkg/template"
)

// Store is what campaigns need from persistence.
type Store interface {
	store.Campaigns
	store.Contacts
	store.Suppressions
	store.Emails
	store.Domains
	store.Teams
}

// Domains finds the team's domain of a From address (domain.Directory).
type Domains interface {
	Lookup(ctx context.Context, teamID int64, name string) (store.Domain, error)
}

// Scheduler puts the campaign's next step on the clock, or invokes it now.
type Scheduler interface {
	Put(ctx context.Context, s schedule.Schedule) error
	Delete(ctx context.Context, name string) error
	Invoke(ctx context.Context, payload []byte) error
}

// Limits and defaults.
const (
	DefaultBatchSize = 500
	MaxBatchSize     = 100000
	MaxWindowMinutes = 24 * 60
	ListPageSize     = 30
	pageSize         = 1000 // contacts read per store call within a step
	writeChunk       = 500  // emails per CreateEmails call
)

// Service is the campaign use cases.
type Service struct {
	Store      Store
	Domains    Domains
	Scheduler  Scheduler
	Dispatcher email.Dispatcher
	Signer     Signer
	Contacts   Subscriptions
	Now        func() time.Time
	Log        *slog.Logger
	// Metrics counts the emails a step writes (nil: none).
	Metrics metric.Counter
	// AudienceChunk is how many contacts a step counts of a campaign's audience (0:
	// AudienceChunk, the constant).
	AudienceChunk int
	// Dates reads a scheduledAt in natural language (naturaldate.Parse); nil: RFC 3339 only.
	Dates func(s string, now time.Time) (time.Time, error)
}

// ParseTime reads a scheduledAt: RFC 3339, or natural language when the service has Dates.
func (s *Service) ParseTime(v string, now time.Time) (time.Time, error) {
	var t time.Time
	var err error
	if s.Dates != nil {
		t, err = s.Dates(v, now)
	} else {
		t, err = time.Parse(time.RFC3339, strings.ToUpper(strings.TrimSpace(v))) // RFC 3339's t and z too
	}
	if err == nil {
		if t.Before(now.Add(-MaxPast)) {
			// A time well past is a mistake (a date in the wrong year, "yesterday" meant as a
			// test), not a request to send to the whole book at once.
			return time.Time{}, fault.Field("scheduledAt", "is more than %d minutes in the past; to send now, leave it out or set sendNow: true", int(MaxPast.Minutes()))
		}
		// Schedules fire to the second: a fraction rounds up, so a campaign never starts
		// before the time asked for.
		if whole := t.UTC().Truncate(time.Second); whole.Before(t) {
			return whole.Add(time.Second), nil
		}
		return t.UTC(), nil
	}
	shown := strconv.Quote(v)
	if len(v) > 64 {
		shown = "the value"
	}
	if s.Dates == nil {
		return time.Time{}, fault.Field("scheduledAt", "could not understand %s: use RFC 3339 (2026-01-02T09:00:00Z)", shown)
	}
	return time.Time{}, fault.Field("scheduledAt", "could not understand %s: use RFC 3339 (2026-01-02T09:00:00Z) or e.g. \"tomorrow 9am\", \"next monday 10:00\", \"in 2 hours\"", shown)
}

// MaxPast is how far in the past a campaign's scheduledAt may be (clocks drift): such a time
// starts the campaign now, an earlier one is refused.
const MaxPast = 10 * time.Minute

// Payload is what a campaign's schedule (or direct invocation) delivers to the batch target.
type Payload struct {
	CampaignID string `json:"campaignId"`
	TeamID     int64  `json:"teamId"`
	Step       int    `json:"step"`            // the BatchesDone value this step expects
	Rearm      int    `json:"rearm,omitempty"` // how often this start was put back after firing early
	// Release: not a step, the backstop of a deletion: once the campaign is gone, the emails
	// it held go back to the worker; while it exists (its deletion failed), nothing happens.
	Release bool `json:"release,omitempty"`
}

// SchedulePrefix starts every campaign schedule's name (the IAM grant is on it).
const SchedulePrefix = "campaign-"

// ScheduleName is the name of the schedule of step n of a campaign: campaign-<id>-<n>, and -r<k>
// for the k-th re-arm of a start that fired early (schedule.Rearmed). Every step has a name of
// its own, so no create conflicts with the schedule that just fired; moving a campaign's start
// updates the schedule of step 0 in place.
func ScheduleName(id string, step, rearm int) string {
	return schedule.Rearmed(SchedulePrefix+id+"-"+strconv.Itoa(step), rearm)
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// EmailID is the id of the campaign's email to one contact: the same on every retry.
func EmailID(campaignID, contactID string) string { return derivedEmailID(campaignID, contactID) }

// derivedEmailID is an email id made from parts (joined by NULs and hashed): the same parts,
// the same id, as a retry needs.
func derivedEmailID(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return "em" + idEncoding.EncodeToString(sum[:15])
}

var errNotFound = fault.NotFoundf("Campaign not found")

func notFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound
	}
	return err
}

// Get reads one campaign of the team.
func (s *Service) Get(ctx context.Context, teamID int64, id string) (store.Campaign, error) {
	c, err := s.Store.GetCampaign(ctx, teamID, id)
	return c, notFound(err)
}

// List pages the team's campaigns (30 a page; those of domainID only, unless 0) and returns
// the number of pages.
func (s *Service) List(ctx context.Context, teamID, domainID int64, page int, status, search string) ([]store.Campaign, int, error) {
	if status != "" && !validStatus(status) {
		return nil, 0, fault.Field("status", "must be one of DRAFT, SCHEDULED, RUNNING, PAUSED, SENT")
	}
	list, total, err := s.Store.ListCampaigns(ctx, teamID, store.CampaignFilter{
		Status: status, Search: search, DomainID: domainID, Offset: (page - 1) * ListPageSize, Limit: ListPageSize})
	if err != nil {
		return nil, 0, err
	}
	return list, (total + ListPageSize - 1) / ListPageSize, nil
}

func validStatus(s string) bool {
	switch s {
	case store.CampaignDraft, store.CampaignScheduled, store.CampaignRunning, store.CampaignPaused, store.CampaignSent:
		return true
	}
	return false
}

// Delete removes a campaign; a running one stops at its next step, which finds it gone.
func (s *Service) Delete(ctx context.Context, teamID int64, id string) (store.Campaign, error) {
	c, err := s.Get(ctx, teamID, id)
	if err != nil {
		return store.Campaign{}, err
	}
	// A step that finds the campaign gone hands the emails it held (paused) back to the
	// worker, which cancels them; no later step would. So for a campaign that has started
	// (one that never did has written no email, so holds none) a release is put a minute
	// ahead first, under a name of its own: a deletion that cannot be sure of it fails before
	// it deletes anything, and the client retries; a release that finds the campaign still
	// there (its deletion failed) does nothing.
	started := c.Status != store.CampaignDraft && c.Status != store.CampaignScheduled
	if started {
		payload, _ := json.Marshal(Payload{CampaignID: c.ID, TeamID: c.TeamID, Release: true})
		if err := s.Scheduler.Put(ctx, schedule.Schedule{Name: ReleaseScheduleName(c.ID),
			At: s.Now().UTC().Add(releaseBackstop), Payload: payload}); err != nil {
			return store.Campaign{}, fmt.Errorf("schedule the release of campaign %s: %w", c.ID, err)
		}
	}
	if err := s.Store.DeleteCampaign(ctx, teamID, id); err != nil {
		return store.Campaign{}, notFound(err)
	}
	// Its pending step's (or start's) schedule goes too (harmless if it stays: it finds the
	// campaign gone, but on AWS it would wait there until its time).
	if err := s.Scheduler.Delete(ctx, ScheduleName(id, c.BatchesDone, 0)); err != nil {
		s.Log.Warn("delete campaign schedule", "campaignId", id, "err", err)
	}
	if started {
		// A step now, so that the held emails go at once; the release stands in for it if
		// this invocation fails, and finds nothing left to release otherwise.
		if err := s.kick(ctx, c, c.BatchesDone); err != nil {
			s.Log.Warn("release the deleted campaign's held emails (its schedule will)", "campaignId", id, "err", err)
		}
	}
	return c, nil
}

// releaseBackstop is when the release a deletion schedules runs, in case its direct
// invocation of a step fails.
const releaseBackstop = time.Minute

// ReleaseScheduleName is the name of a deleted campaign's release: campaign-<id>-release.
func ReleaseScheduleName(id string) string { return SchedulePrefix + id + "-release" }

// When says when to start: now, at a time, or not yet (a draft).
type When struct {
	Now bool
	At  *time.Time
}

// CheckBatchSize refuses a campaign's batch size outside 1..MaxBatchSize.
func CheckBatchSize(n int) error {
	if n < 1 || n > MaxBatchSize {
		return fault.Field("batchSize", "must be from 1 to %d", MaxBatchSize)
	}
	return nil
}

// Schedule starts a DRAFT campaign, or moves a SCHEDULED one, now or at a time (the schedule
// endpoint, and create with sendNow or scheduledAt); a campaign paused before its start is
// resumed first. A campaign without a single subscribed
// contact is refused and nothing changes.
func (s *Service) Schedule(ctx context.Context, teamID int64, id string, w When, batchSize int) error {
	if batchSize != 0 { // 0 keeps the campaign's own
		if err := CheckBatchSize(batchSize); err != nil {
			return err
		}
	}
	c, err := s.Get(ctx, teamID, id)
	if err != nil {
		return err
	}
	if !schedulable(c, s.Now().UTC()) {
		return fault.Field("", "Campaign is %s and cannot be scheduled%s", c.Status, resumeHint(c))
	}
	if c.Status == store.CampaignPaused {
		// What paused it (its book deleted, its domain gone) would pause it again: say so now.
		if err := s.ready(ctx, c); err != nil {
			return err
		}
	}
	if err := s.checkAudience(ctx, c); err != nil {
		return err
	}
	now := s.Now().UTC()
	at, startNow := now, true
	if !w.Now && w.At != nil && w.At.After(now) {
		startNow = false
		at = w.At.UTC().Truncate(time.Second)
		if at.After(now.Add(schedule.MaxAhead)) {
			return fault.Field("scheduledAt", "at most %d days ahead", int(schedule.MaxAhead.Hours()/24))
		}
	}
	var before store.Campaign
	c, err = s.Store.UpdateCampaign(ctx, teamID, id, func(c *store.Campaign) error {
		if !schedulable(*c, now) {
			return fault.Field("", "Campaign is %s and cannot be scheduled%s", c.Status, resumeHint(*c))
		}
		before = *c
		if batchSize > 0 {
			c.BatchSize = batchSize
		}
		c.Status, c.ScheduledAt, c.UpdatedAt, c.PausedReason = store.CampaignScheduled, &at, now, ""
		return nil
	})
	if err != nil {
		return notFound(err)
	}
	if !startNow {
		err = s.put(ctx, c, at, 0, 0)
	} else {
		// A start moved to now: the schedule of a later start, if any, would find the
		// campaign running and do nothing; deleting it is tidiness.
		if err := s.Scheduler.Delete(ctx, ScheduleName(c.ID, 0, 0)); err != nil {
			s.Log.Warn("delete campaign schedule", "campaignId", id, "err", err)
		}
		err = s.kick(ctx, c, 0)
	}
	if err != nil && s.undoSchedule(ctx, before, c) {
		return nil // the error came after the start was made: the campaign runs
	}
	return err
}

// schedulable reports whether a campaign may be scheduled: a draft, one scheduled already (a
// new time), or one paused before its start whose time is still ahead (scheduling resumes it
// for the new time). One paused once its time had come may have a first step under way, which
// sets its cursor after writing its batch: only a resume may go on from there.
func schedulable(c store.Campaign, now time.Time) bool {
	switch c.Status {
	case store.CampaignDraft, store.CampaignScheduled:
		return true
	case store.CampaignPaused:
		return notStarted(c, now)
	}
	return false
}

// resumeHint tells the caller of a campaign paused once under way to resume it instead.
func resumeHint(c store.Campaign) string {
	if c.Status == store.CampaignPaused {
		return " (it was paused once its time had come: resume it)"
	}
	return ""
}

// undoSchedule puts a campaign whose start could not be scheduled or made back as it was
// (a draft, or scheduled for its earlier time, with that schedule again), so that the caller,
// told of the failure, finds nothing changed. wrote is the campaign as this request wrote it:
// one written since (a retry that succeeded, a pause) is left alone. started reports a
// campaign that runs (or ran) already: an invocation that failed after it was made. A
// campaign the undo cannot reach stays SCHEDULED and the reconciler starts it once overdue.
func (s *Service) undoSchedule(ctx context.Context, before, wrote store.Campaign) (started bool) {
	ctx = context.WithoutCancel(ctx)
	c, err := s.Store.UpdateCampaign(ctx, before.TeamID, before.ID, func(c *store.Campaign) error {
		switch {
		case c.Status == store.CampaignRunning || c.Status == store.CampaignSent:
			return errStarted
		case c.Status != store.CampaignScheduled || !c.UpdatedAt.Equal(wrote.UpdatedAt):
			return errChanged
		}
		c.Status, c.ScheduledAt, c.BatchSize, c.UpdatedAt = before.Status, before.ScheduledAt, before.BatchSize, s.Now().UTC()
		c.PausedReason = before.PausedReason
		return nil
	})
	switch {
	case errors.Is(err, errStarted):
		return true
	case errors.Is(err, errChanged):
		return false
	case err != nil:
		s.Log.Warn("campaign start failed and could not be undone; the reconciler starts it", "campaignId", before.ID, "err", err)
		return false
	}
	if c.Status == store.CampaignScheduled && c.ScheduledAt != nil {
		if err := s.put(ctx, c, *c.ScheduledAt, 0, 0); err != nil {
			s.Log.Warn("campaign's earlier schedule not put back; the reconciler starts it once overdue", "campaignId", c.ID, "err", err)
		}
	}
	return false
}

var errStarted = errors.New("campaign started meanwhile")

var errChanged = errors.New("campaign changed meanwhile")

// checkAudience refuses a campaign whose book has no subscribed contact.
func (s *Service) checkAudience(ctx context.Context, c store.Campaign) error {
	found := false
	err := s.walkBook(ctx, c, "", func(page []store.Contact) bool {
		found = slices.ContainsFunc(page, func(ct store.Contact) bool { return ct.Subscribed })
		return !found
	})
	switch {
	case err != nil:
		return notFoundBook(err)
	case !found:
		return fault.Field("contactBookId", "the contact book has no subscribed contacts")
	}
	return nil
}

// walkBook hands the campaign's book's contacts after cursor ("": from the first) to fn a page
// at a time, in email order, while fn returns true.
func (s *Service) walkBook(ctx context.Context, c store.Campaign, cursor string, fn func([]store.Contact) bool) error {
	for {
		page, err := s.Store.ContactsAfter(ctx, c.TeamID, c.ContactBookID, cursor, pageSize)
		if err != nil {
			return err
		}
		if !fn(page) || len(page) < pageSize {
			return nil
		}
		cursor = page[len(page)-1].Email
	}
}

func notFoundBook(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fault.Field("contactBookId", "contact book not found")
	}
	return err
}

// put schedules step n of the campaign at t (rearm: the how-many-th time after early fires).
func (s *Service) put(ctx context.Context, c store.Campaign, t time.Time, step, rearm int) error {
	payload, _ := json.Marshal(Payload{CampaignID: c.ID, TeamID: c.TeamID, Step: step, Rearm: rearm})
	if err := s.Scheduler.Put(ctx, schedule.Schedule{Name: ScheduleName(c.ID, step, rearm), At: t, Payload: payload}); err != nil {
		return fmt.Errorf("schedule campaign %s: %w", c.ID, err)
	}
	return nil
}

// kick runs step n of the campaign now, through a direct asynchronous invocation of the batch
// target.
func (s *Service) kick(ctx context.Context, c store.Campaign, step int) error {
	payload, _ := json.Marshal(Payload{CampaignID: c.ID, TeamID: c.TeamID, Step: step})
	if err := s.Scheduler.Invoke(ctx, payload); err != nil {
		return fmt.Errorf("start campaign %s step %d: %w", c.ID, step, err)
	}
	return nil
}

// Pause stops a running (or scheduled) campaign between steps.
func (s *Service) Pause(ctx context.Context, teamID int64, id string) error {
	_, err := s.Store.UpdateCampaign(ctx, teamID, id, func(c *store.Campaign) error {
		if c.Status == store.CampaignPaused {
			return errAsWanted // a retried pause: it is paused, as the caller wants
		}
		if c.Status != store.CampaignRunning && c.Status != store.CampaignScheduled {
			return fault.Field("", "Only a running or scheduled campaign can be paused (it is %s)", c.Status)
		}
		c.Status, c.UpdatedAt = store.CampaignPaused, s.Now().UTC()
		return nil
	})
	if errors.Is(err, errAsWanted) {
		return nil
	}
	return notFound(err)
}

// errAsWanted ends a pause or resume that finds the campaign already as the caller wants it
// (a retried call): it succeeds without a write, as upstream answers it.
var errAsWanted = errors.New("campaign: already as wanted")

// Resume continues a paused campaign from its cursor, now; a campaign paused before its
// scheduled start goes back to SCHEDULED for that time (resuming must not send it early).
func (s *Service) Resume(ctx context.Context, teamID int64, id string) error {
	now := s.Now().UTC()
	if c, err := s.Get(ctx, teamID, id); err != nil {
		return err
	} else if c.Status == store.CampaignPaused {
		// What paused a campaign that could not send (its book deleted, its domain gone or
		// unverified) would pause it again at once: the caller is told now instead.
		if err := s.ready(ctx, c); err != nil {
			return err
		}
	}
	c, err := s.Store.UpdateCampaign(ctx, teamID, id, func(c *store.Campaign) error {
		if c.Status == store.CampaignRunning || c.Status == store.CampaignScheduled {
			return errAsWanted // a retried resume: it is going on already
		}
		if c.Status != store.CampaignPaused {
			return fault.Field("", "Only a paused campaign can be resumed (it is %s)", c.Status)
		}
		c.Status, c.UpdatedAt, c.PausedReason = store.CampaignRunning, now, ""
		if notStarted(*c, now) {
			c.Status = store.CampaignScheduled
		}
		return nil
	})
	if errors.Is(err, errAsWanted) {
		return nil
	}
	if err != nil {
		return notFound(err)
	}
	if c.Status == store.CampaignScheduled {
		return s.put(ctx, c, *c.ScheduledAt, 0, 0)
	}
	return s.kick(ctx, c, c.BatchesDone)
}

// notStarted reports whether a campaign has not sent its first batch and is due later.
func notStarted(c store.Campaign, now time.Time) bool {
	return c.BatchesDone == 0 && c.ScheduledAt != nil && c.ScheduledAt.After(now)
}

// Fire is the batch target: it runs the step named by the payload and, while the batch window
// is 0, the steps after it, until the campaign is done, paused, or ctx is close to its
// deadline (then the next step is scheduled at once). A step that is not the campaign's next
// one does nothing.
func (s *Service) Fire(ctx context.Context, raw []byte) error {
	var p Payload
	if err := json.Unmarshal(raw, &p); err != nil || p.CampaignID == "" {
		s.Log.Error("campaign batch: malformed payload dropped")
		return nil
	}
	if p.Release {
		if _, err := s.Store.GetCampaign(ctx, p.TeamID, p.CampaignID); !errors.Is(err, store.ErrNotFound) {
			return err // there still (nil), or unknown: tried again
		}
		return s.releaseHeld(ctx, p.TeamID, p.CampaignID)
	}
	step := p.Step
	for {
		next, more, err := s.Step(ctx, p.TeamID, p.CampaignID, step)
		if errors.Is(err, errEarly) {
			return s.rearm(ctx, p)
		}
		if err != nil || !more {
			return err
		}
		c, err := s.Store.GetCampaign(ctx, p.TeamID, p.CampaignID)
		if err != nil {
			return notFound(err)
		}
		if c.BatchWindowMinutes > 0 {
			return s.put(ctx, c, s.Now().Add(time.Duration(c.BatchWindowMinutes)*time.Minute), next, 0)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 2*time.Minute {
			return s.kick(ctx, c, next)
		}
		step = next
	}
}

// rearm puts back the start of a campaign whose schedule fired before its time, under a new
// name, at most schedule.MaxRearms times (then the reconciler's recovery starts it once it is overdue).
func (s *Service) rearm(ctx context.Context, p Payload) error {
	c, err := s.Store.GetCampaign(ctx, p.TeamID, p.CampaignID)
	if err != nil {
		return notFound(err)
	}
	if p.Rearm >= schedule.MaxRearms {
		s.Log.Error("campaign start keeps firing early; the reconciler will start it", "campaignId", c.ID)
		return nil
	}
	s.Log.Warn("campaign start fired early: re-armed", "campaignId", c.ID, "rearm", p.Rearm+1)
	return s.put(ctx, c, *c.ScheduledAt, 0, p.Rearm+1)
}

// errEarly is Step's answer to a start that fired before the campaign's (moved) time.
var errEarly = errors.New("campaign start fired early")

// Step runs batch step n: it starts a SCHEDULED campaign, writes the next batch and moves the
// cursor. It returns the next step's number and whether there is more to send; errEarly for
// a start before the campaign's time.
func (s *Service) Step(ctx context.Context, teamID int64, id string, n int) (int, bool, error) {
	start := time.Now()
	c, err := s.Store.GetCampaign(ctx, teamID, id)
	if err == nil && c.Status == store.CampaignScheduled && n == 0 && notStarted(c, s.Now().UTC().Add(time.Second)) {
		return 0, false, errEarly
	}
	if err == nil && c.Status == store.CampaignScheduled && n == 0 {
		c, err = s.Store.UpdateCampaign(ctx, teamID, id, func(c *store.Campaign) error {
			if c.Status == store.CampaignScheduled {
				c.Status, c.UpdatedAt = store.CampaignRunning, s.Now().UTC()
			}
			return nil
		})
	}
	if errors.Is(err, store.ErrNotFound) {
		// Deleted: the emails it held go back to the worker, which cancels them.
		return 0, false, s.releaseHeld(ctx, teamID, id)
	}
	if err != nil {
		return 0, false, err
	}
	if c.Status == store.CampaignRunning || c.Status == store.CampaignSent {
		// Running again after a pause: the emails held meanwhile go out first. Sent: a step
		// run again, perhaps after the last step's release below failed (a retried Fire
		// names the step it started from, not the last).
		if err := s.releaseHeld(ctx, teamID, id); err != nil {
			return 0, false, err
		}
	}
	if c.Status != store.CampaignRunning || c.BatchesDone != n {
		return 0, false, nil // paused, done, or this step already ran
	}
	if err := s.Signer.Ready(ctx); err != nil {
		return 0, false, err
	}
	if !c.AudienceCounted {
		// Sending starts: the campaign's total is its audience, counted before its first batch
		// (a book past AudienceChunk contacts is counted over the first steps).
		c, err = s.countAudience(ctx, c)
		if errors.Is(err, store.ErrNotFound) {
			return 0, false, s.releaseHeld(ctx, teamID, id) // deleted meanwhile
		}
		if err != nil {
			return 0, false, err
		}
		if c.Status != store.CampaignRunning || c.BatchesDone != n {
			return 0, false, nil // paused, or this step ran elsewhere, while it counted
		}
	}
	written, last, done, err := s.writeBatch(ctx, c)
	if errors.Is(err, errCannotSend) {
		// Retrying cannot help until someone fixes it: pause, so resume continues from here.
		s.Log.Warn("campaign paused: it cannot send", "campaignId", id, "teamId", teamID, "reason", err.Error())
		_, perr := s.Store.UpdateCampaign(ctx, teamID, id, func(c *store.Campaign) error {
			if c.Status == store.CampaignRunning {
				c.Status, c.UpdatedAt = store.CampaignPaused, s.Now().UTC()
				c.PausedReason = strings.TrimPrefix(err.Error(), errCannotSend.Error()+": ")
			}
			return nil
		})
		return 0, false, perr
	}
	if err != nil {
		return 0, false, fmt.Errorf("campaign %s step %d: %w", id, n, err)
	}
	c, err = s.Store.UpdateCampaign(ctx, teamID, id, func(c *store.Campaign) error {
		if c.BatchesDone != n {
			return errStepRan
		}
		if last != "" {
			c.Cursor = last
		}
		c.BatchesDone = n + 1
		if done && c.Status == store.CampaignRunning {
			c.Status = store.CampaignSent
		}
		c.UpdatedAt = s.Now().UTC()
		return nil
	})
	if errors.Is(err, errStepRan) || errors.Is(err, store.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	elapsed := time.Since(start)
	s.Log.Info("campaign batch", "campaignId", id, "teamId", teamID, "batch", n+1, "emailsWritten", written,
		"written", c.Counters[store.CountTotal], "total", c.Total(), "status", c.Status,
		"perSecond", int(float64(written)/max(elapsed.Seconds(), 0.001)))
	if c.Status == store.CampaignSent {
		// The last step: once more, for a hold written just before a resume whose release
		// the index had not caught up with; no later step would look, so a failure fails the
		// step, whose retry releases them (above).
		if err := s.releaseHeld(ctx, teamID, id); err != nil {
			return 0, false, fmt.Errorf("campaign %s: release held emails after the last step: %w", id, err)
		}
	}
	return n + 1, c.Status == store.CampaignRunning, nil
}

var errStepRan = errors.New("step already ran")

// AudienceChunk is how many contacts one step counts, at most, of a campaign's audience.
const AudienceChunk = 100000

// countAudience counts the next chunk (Service.AudienceChunk, else AudienceChunk) of the
// campaign's audience from its AudienceCursor — the subscribed contacts of its book whose
// address is not suppressed, those its steps write an email for — and records it on the
// campaign, unless another step counted that chunk meanwhile. It returns the campaign as
// stored now (store.ErrNotFound: deleted). A book gone leaves it uncounted: the batch then
// finds the book gone and pauses the campaign.
func (s *Service) countAudience(ctx context.Context, c store.Campaign) (store.Campaign, error) {
	chunk := s.AudienceChunk
	if chunk <= 0 {
		chunk = AudienceChunk
	}
	from, counted, last, looked := c.AudienceCursor, int64(0), c.AudienceCursor, 0
	var suppErr error
	err := s.walkBook(ctx, c, from, func(page []store.Contact) bool {
		if len(page) > chunk-looked {
			page = page[:chunk-looked]
		}
		mailed, err := s.mailable(ctx, c.TeamID, page)
		if err != nil {
			suppErr = err
			return false
		}
		counted += int64(len(mailed))
		looked += len(page)
		if len(page) > 0 {
			last = page[len(page)-1].Email
		}
		return looked < chunk
	})
	if errors.Is(err, store.ErrNotFound) {
		return s.Store.GetCampaign(ctx, c.TeamID, c.ID)
	}
	if err == nil {
		err = suppErr
	}
	if err != nil {
		return c, fmt.Errorf("count the audience of campaign %s: %w", c.ID, err)
	}
	end := looked < chunk // the walk ended before the chunk did: the whole book is counted
	if !end {
		// A chunk that ends where the book does: one contact further says so, so that the
		// total is the audience from this step on, not from the next.
		more, err := s.Store.ContactsAfter(ctx, c.TeamID, c.ContactBookID, last, 1)
		if errors.Is(err, store.ErrNotFound) {
			return s.Store.GetCampaign(ctx, c.TeamID, c.ID)
		}
		if err != nil {
			return c, fmt.Errorf("count the audience of campaign %s: %w", c.ID, err)
		}
		end = len(more) == 0
	}
	updated, err := s.Store.UpdateCampaign(ctx, c.TeamID, c.ID, func(c *store.Campaign) error {
		if c.AudienceCounted || c.AudienceCursor != from {
			return nil // counted by another step meanwhile
		}
		if from == "" {
			c.Audience = counted // the first chunk: not on top of a count of earlier code
		} else {
			c.Audience += counted
		}
		c.AudienceCursor, c.AudienceCounted = last, end
		if end {
			c.AudienceCursor = "" // of no more use: the campaign item each step rewrites stays small
		}
		c.UpdatedAt = s.Now().UTC() // the campaign moves: the housekeeping does not restart it
		return nil
	})
	if err != nil {
		return c, err
	}
	if updated.AudienceCounted && !c.AudienceCounted {
		s.Log.Info("campaign audience counted", "campaignId", c.ID, "teamId", c.TeamID, "audience", updated.Audience)
	}
	return updated, nil
}

// releaseHeld hands the emails a worker held while the campaign was paused back to delivery:
// a conditional touch each (a new stream record on AWS; locally the delivery pool), in pages.
func (s *Service) releaseHeld(ctx context.Context, teamID int64, id string) error {
	_, err := s.release(ctx, teamID, id)
	return err
}

// SettleDeletedBooks hands back to delivery the emails held by paused campaigns whose contact
// book was deleted (housekeeping), and returns how many: such a campaign cannot resume, so no
// step would release them, and the worker settles each (SUPPRESSED: the book was deleted).
// It runs while the deleted books are listed, before their contacts are all removed.
func (s *Service) SettleDeletedBooks(ctx context.Context) (int, error) {
	books, err := s.Store.DeletedContactBooks(ctx, 100)
	if err != nil {
		return 0, err
	}
	deleted := map[int64]map[string]bool{} // by team
	for _, b := range books {
		if deleted[b.TeamID] == nil {
			deleted[b.TeamID] = map[string]bool{}
		}
		deleted[b.TeamID][b.BookID] = true
	}
	n := 0
	for teamID, ids := range deleted {
		more := true
		err := s.eachCampaign(ctx, teamID, store.CampaignPaused, func(c store.Campaign) (bool, error) {
			if !ids[c.ContactBookID] {
				return true, nil
			}
			if d, ok := ctx.Deadline(); ok && time.Until(d) < settleRoom {
				more = false // the rest at the next run: the jobs after this one need time too
				return false, nil
			}
			released, err := s.release(ctx, teamID, c.ID)
			n += released
			return true, err
		})
		if err != nil || !more {
			return n, err
		}
	}
	return n, nil
}

// eachCampaign hands fn every campaign of the team in status, reading them a page of 100 at a
// time, until fn says no more (false) or fails.
func (s *Service) eachCampaign(ctx context.Context, teamID int64, status string, fn func(store.Campaign) (bool, error)) error {
	for offset := 0; ; offset += 100 {
		list, total, err := s.Store.ListCampaigns(ctx, teamID, store.CampaignFilter{Status: status, Offset: offset, Limit: 100})
		if err != nil {
			return err
		}
		for _, c := range list {
			if more, err := fn(c); err != nil || !more {
				return err
			}
		}
		if offset+100 >= total {
			return nil
		}
	}
}

// settleRoom is how much of the housekeeping's deadline SettleDeletedBooks leaves to the jobs
// after it.
const settleRoom = 30 * time.Second

// release is releaseHeld, with how many emails it released.
func (s *Service) release(ctx context.Context, teamID int64, id string) (int, error) {
	released := 0
	for {
		ids, err := s.Store.HeldEmails(ctx, teamID, id, 500)
		if err != nil || len(ids) == 0 {
			if released > 0 {
				s.Log.Info("campaign emails released after the pause", "campaignId", id, "count", released)
			}
			return released, err
		}
		var touched []string
		for _, eid := range ids {
			_, err := s.Store.UpdateEmail(ctx, eid, email.ReleaseHeld(s.Now().UTC()))
			switch {
			case errors.Is(err, email.ErrNotHeld), errors.Is(err, store.ErrNotFound):
			case err != nil:
				return released, fmt.Errorf("release held email %s: %w", eid, err)
			default:
				touched = append(touched, eid)
			}
		}
		released += len(touched)
		if len(touched) == 0 {
			// Nothing left to release: what the index still lists is gone (expired) or
			// released already (the index lags the table); listing it again would spin.
			return released, nil
		}
		if s.Dispatcher != nil {
			s.Dispatcher.Dispatch(ctx, touched...)
		}
		if released%5000 < len(touched) {
			s.Log.Info("releasing held campaign emails", "campaignId", id, "released", released)
		}
	}
}

// errCannotSend marks a step that cannot succeed until someone acts (book or domain gone).
var errCannotSend = errors.New("campaign cannot send")

// ready checks what a step needs and only someone can fix: the campaign's contact book and a
// verified sending domain. Its error is a 400 saying which.
func (s *Service) ready(ctx context.Context, c store.Campaign) error {
	dom, err := s.Store.GetDomain(ctx, c.TeamID, c.DomainID)
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && dom.Status != store.DomainSuccess):
		return fault.Field("", "The campaign cannot be resumed: its sending domain is gone or not verified")
	case err != nil:
		return err
	}
	if _, err := s.Store.GetContactBook(ctx, c.TeamID, c.ContactBookID); errors.Is(err, store.ErrNotFound) {
		return fault.Field("", "The campaign cannot be resumed: its contact book was deleted")
	} else if err != nil {
		return err
	}
	return nil
}

// writeBatch writes up to BatchSize emails for the contacts after the cursor and reports how
// many it wrote, the last contact it looked at, and whether the book is exhausted.
func (s *Service) writeBatch(ctx context.Context, c store.Campaign) (int, string, bool, error) {
	dom, err := s.Store.GetDomain(ctx, c.TeamID, c.DomainID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && dom.Status != store.DomainSuccess) {
		return 0, "", false, fmt.Errorf("%w: the sending domain is gone or not verified", errCannotSend)
	}
	if err != nil {
		return 0, "", false, err
	}
	// The book's variables: a placeholder naming one renders empty (or its fallback) for a
	// contact without it, where an unknown name stays as written.
	book, err := s.Store.GetContactBook(ctx, c.TeamID, c.ContactBookID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, c.Cursor, false, fmt.Errorf("%w: the contact book was deleted", errCannotSend)
	}
	if err != nil {
		return 0, "", false, err
	}
	// A batch is batchSize emails: the unsubscribed and suppressed contacts read on the way do
	// not count, so a book where they come in a row does not send nothing for a window. A page
	// asks for no more contacts than emails are still wanted, so a batch never overshoots; a
	// step reads at most maxLook contacts, and the next step goes on from its cursor.
	cursor, written, looked := c.Cursor, 0, 0
	for written < c.BatchSize && looked < maxLook(c.BatchSize) {
		want := min(pageSize, c.BatchSize-written)
		page, err := s.Store.ContactsAfter(ctx, c.TeamID, c.ContactBookID, cursor, want)
		if errors.Is(err, store.ErrNotFound) {
			return written, c.Cursor, false, fmt.Errorf("%w: the contact book was deleted", errCannotSend)
		}
		if err != nil {
			return written, c.Cursor, false, err
		}
		n, err := s.writeContacts(ctx, c, page, book.Variables)
		written += n
		if err != nil {
			// The cursor does not move: the retried step rewrites this page, and the emails
			// already written are left as they are (create-if-absent).
			return written, c.Cursor, false, err
		}
		if len(page) > 0 {
			cursor = page[len(page)-1].Email
		}
		looked += len(page)
		if len(page) < want {
			return written, cursor, true, nil
		}
	}
	// A full batch: look one contact ahead, so a book that ends exactly here is done now and
	// not one batch window later.
	next, err := s.Store.ContactsAfter(ctx, c.TeamID, c.ContactBookID, cursor, 1)
	return written, cursor, err == nil && len(next) == 0, nil
}

// writeEmails writes new emails with their first events, counts them, and hands them to
// in-process delivery (d: the local server; nil on AWS, where the table's stream does).
func writeEmails(ctx context.Context, st Store, m metric.Counter, d email.Dispatcher, emails []store.Email, events []store.Event) error {
	if len(emails) == 0 {
		return nil
	}
	if err := st.CreateEmails(ctx, emails, events); err != nil {
		return err
	}
	metric.Add(ctx, m, metric.EmailsAccepted, len(emails))
	if d != nil {
		ids := make([]string, len(emails))
		for i, e := range emails {
			ids[i] = e.ID
		}
		d.Dispatch(ctx, ids...)
	}
	return nil
}

// maxLook is how many contacts one step of batchSize emails reads at most: ten times the batch,
// and at least 100,000 (a step that skips a long run of unsubscribed contacts stays well within
// a function's time).
func maxLook(batchSize int) int { return max(10*batchSize, 100_000) }

// writeContacts writes the emails of the subscribed, non-suppressed contacts of one page.
func (s *Service) writeContacts(ctx context.Context, c store.Campaign, page []store.Contact, variables []string) (int, error) {
	mailed, err := s.mailable(ctx, c.TeamID, page)
	if err != nil {
		return 0, err
	}
	now := s.Now().UTC()
	var emails []store.Email
	var events []store.Event
	flush := func() error {
		if err := writeEmails(ctx, s.Store, s.Metrics, s.Dispatcher, emails, events); err != nil {
			return err
		}
		emails, events = emails[:0], events[:0]
		return nil
	}
	written := 0
	for _, ct := range mailed {
		e := s.email(c, ct, variables, now)
		emails = append(emails, e)
		events = append(events, store.Event{ID: "0-QUEUED", EmailID: e.ID, Status: store.StatusQueued, CreatedAt: now})
		written++
		if len(emails) == writeChunk {
			if err := flush(); err != nil {
				return written - writeChunk, err
			}
		}
	}
	return written, flush()
}

// mailable is the contacts of page a campaign mails: subscribed, and not on the team's
// suppression list. Its audience (countAudience) and its emails (writeContacts) are the same.
func (s *Service) mailable(ctx context.Context, teamID int64, page []store.Contact) ([]store.Contact, error) {
	var subscribed []store.Contact
	var addrs []string
	for _, ct := range page {
		if ct.Subscribed {
			subscribed, addrs = append(subscribed, ct), append(addrs, ct.Email)
		}
	}
	supp, err := s.Store.GetSuppressions(ctx, teamID, addrs)
	if err != nil {
		return nil, fmt.Errorf("read the suppressions: %w", err)
	}
	return slices.DeleteFunc(subscribed, func(ct store.Contact) bool {
		_, suppressed := supp[ct.Email]
		return suppressed
	}), nil
}

// email builds the personalised email of one contact.
func (s *Service) email(c store.Campaign, ct store.Contact, variables []string, now time.Time) store.Email {
	id := EmailID(c.ID, ct.ID)
	link := s.Signer.URL(Link{TeamID: c.TeamID, BookID: ct.BookID, ContactID: ct.ID, EmailID: id, CampaignID: c.ID, Email: ct.Email,
		MadeAt: now.UnixMilli()})
	values := vars(ct, link, variables)
	body := c.HTML
	if body == "" {
		body = c.Content
	}
	html := withPreview(Render(body, values, true), Render(c.PreviewText, values, false))
	e := store.Email{
		// To is the contact's bare address, as upstream writes it: what an email's to, its
		// list and its webhook calls show is the address a consumer matches to the contact.
		ID: id, TeamID: c.TeamID, DomainID: c.DomainID, From: c.From, To: []string{ct.Email},
		CC: c.CC, BCC: c.BCC, ReplyTo: c.ReplyTo, Subject: template.OneLine(Render(c.Subject, values, false)),
		Content: store.Content{HTML: &html, Headers: []store.Header{
			{Name: "List-Unsubscribe", Value: "<" + link + ">"},
			{Name: "List-Unsubscribe-Post", Value: "List-Unsubscribe=One-Click"},
			{Name: "Precedence", Value: "bulk"},
		}},
		CreatedAt: now, CampaignID: c.ID, ContactID: ct.ID, Counted: []string{store.CountTotal},
	}
	_ = email.Create(&e, store.StatusQueued, now) // a new email may always be QUEUED
	return e
}

// RecoverRunning reschedules the next step of every RUNNING campaign that has not moved for
// stale (a process that died mid-campaign, a lost schedule) and the start of every SCHEDULED
// campaign overdue by stale (a start that was acknowledged and then failed). Steps are
// numbered, so a step that was merely slow and runs anyway makes the rescheduled one a no-op.
func (s *Service) RecoverRunning(ctx context.Context, stale time.Duration) (int, error) {
	teams, err := s.Store.ListTeams(ctx)
	if err != nil {
		return 0, err
	}
	now := s.Now().UTC()
	n := 0
	for _, t := range teams {
		for _, status := range []string{store.CampaignRunning, store.CampaignScheduled} {
			err := s.eachCampaign(ctx, t.ID, status, func(c store.Campaign) (bool, error) {
				if !stalled(c, now, stale) {
					return true, nil
				}
				if err := s.kick(ctx, c, c.BatchesDone); err != nil {
					return false, err
				}
				n++
				return true, nil
			})
			if err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func stalled(c store.Campaign, now time.Time, stale time.Duration) bool {
	if c.Status == store.CampaignScheduled {
		return c.ScheduledAt != nil && now.Sub(*c.ScheduledAt) >= stale && (stale > 0 || c.ScheduledAt.Before(now))
	}
	window := time.Duration(c.BatchWindowMinutes) * time.Minute
	return now.Sub(c.UpdatedAt) >= stale+window
}
