package api

import (
	"encoding/json"
	"net/http"

	"github.com/mailroom/mailroom/pkg/fault"
	"github.com/mailroom/mailroom/pkg/hooks"
	"github.com/mailroom/mailroom/pkg/jsonout"
	"github.com/mailroom/mailroom/pkg/store"
)

// webhookView is a webhook as the API shows it; Secret only when it is made or rotated.
type webhookView struct {
	ID          string   `json:"id"`
	URL         string   `json:"url"`
	EventTypes  []string `json:"eventTypes"`
	DomainIDs   []int64  `json:"domainIds"`
	Description string   `json:"description"`
	Status      string   `json:"status"`
	Failures    int      `json:"consecutiveFailures"`
	Secret      string   `json:"secret,omitempty"`
	CreatedAt   string   `json:"createdAt"`
	UpdatedAt   string   `json:"updatedAt"`
}

func newWebhookView(w store.Webhook) webhookView {
	v := webhookView{ID: w.ID, URL: w.URL, EventTypes: w.EventTypes, DomainIDs: w.DomainIDs, Description: w.Description,
		Status: w.Status, Failures: w.Failures, CreatedAt: ts(w.CreatedAt), UpdatedAt: ts(w.UpdatedAt)}
	if v.EventTypes == nil {
		v.EventTypes = []string{}
	}
	if v.DomainIDs == nil {
		v.DomainIDs = []int64{}
	}
	return v
}

// callView is an entry of a webhook's delivery log.
type callView struct {
	ID             string          `json:"id"`
	WebhookID      string          `json:"webhookId"`
	Type           string          `json:"type"`
	Status         string          `json:"status"`
	Attempts       int             `json:"attempts"`
	LastStatusCode int             `json:"lastStatusCode"`
	LastResponse   string          `json:"lastResponse"`
	LastError      string          `json:"lastError"`
	NextAttemptAt  *string         `json:"nextAttemptAt"`
	Data           json.RawMessage `json:"data"`
	EventAt        string          `json:"eventAt"`
	CreatedAt      string          `json:"createdAt"`
	UpdatedAt      string          `json:"updatedAt"`
}

func newCallView(c store.WebhookCall) callView {
	return callView{ID: c.ID, WebhookID: c.WebhookID, Type: c.Type, Status: c.Status, Attempts: c.Attempts,
		LastStatusCode: c.LastStatus, LastResponse: c.LastExcerpt, LastError: c.LastError, NextAttemptAt: tsPtr(c.NextAttemptAt),
		Data: json.RawMessage(c.Data), EventAt: ts(c.EventAt), CreatedAt: ts(c.CreatedAt), UpdatedAt: ts(c.UpdatedAt)}
}

func webhookFields(w http.ResponseWriter, r *http.Request, patch bool) (hooks.Fields, error) {
	body, err := readBody(w, r, maxSmallBody)
	if err != nil {
		return hooks.Fields{}, err
	}
	var in struct {
		URL         *string   `json:"url"`
		EventTypes  *[]string `json:"eventTypes"`
		DomainIDs   *[]int64  `json:"domainIds"`
		Description *string   `json:"description"`
		Status      *string   `json:"status"`
	}
	if err := decodeKnown(body, &in); err != nil {
		return hooks.Fields{}, err
	}
	if !patch && in.Status != nil {
		return hooks.Fields{}, fault.Field("status", "is set with PATCH")
	}
	return hooks.Fields{URL: in.URL, EventTypes: in.EventTypes, DomainIDs: in.DomainIDs, Description: in.Description, Status: in.Status}, nil
}

func (s *Services) createWebhook(w http.ResponseWriter, r *http.Request) error {
	f, err := webhookFields(w, r, false)
	if err != nil {
		return err
	}
	h, secret, err := s.Webhooks.Create(r.Context(), principal(r).TeamID, f)
	return writeWithSecret(w, h, secret, err)
}

// writeWithSecret answers a webhook with its secret (when it was made or rotated).
func writeWithSecret(w http.ResponseWriter, h store.Webhook, secret string, err error) error {
	if err != nil {
		return err
	}
	v := newWebhookView(h)
	v.Secret = secret
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Services) listWebhooks(w http.ResponseWriter, r *http.Request) error {
	list, err := s.Webhooks.List(r.Context(), principal(r).TeamID)
	if err != nil {
		return err
	}
	out := views(list, newWebhookView)
	writeJSON(w, http.StatusOK, map[string]any{"data": out, "count": len(out)})
	return nil
}

// webhookID reads the path id; ids longer than any we issue are simply not found.
func webhookID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if len(id) > 64 {
		return "", fault.NotFoundf("Webhook not found")
	}
	return id, nil
}

func (s *Services) getWebhook(w http.ResponseWriter, r *http.Request) error {
	id, err := webhookID(r)
	if err != nil {
		return err
	}
	h, err := s.Webhooks.Get(r.Context(), principal(r).TeamID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newWebhookView(h))
	return nil
}

func (s *Services) updateWebhook(w http.ResponseWriter, r *http.Request) error {
	id, err := webhookID(r)
	if err != nil {
		return err
	}
	f, err := webhookFields(w, r, true)
	if err != nil {
		return err
	}
	h, err := s.Webhooks.Update(r.Context(), principal(r).TeamID, id, f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newWebhookView(h))
	return nil
}

func (s *Services) deleteWebhook(w http.ResponseWriter, r *http.Request) error {
	id, err := webhookID(r)
	if err != nil {
		return err
	}
	if err := s.Webhooks.Delete(r.Context(), principal(r).TeamID, id); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true})
	return nil
}

func (s *Services) rotateWebhookSecret(w http.ResponseWriter, r *http.Request) error {
	id, err := webhookID(r)
	if err != nil {
		return err
	}
	h, secret, err := s.Webhooks.RotateSecret(r.Context(), principal(r).TeamID, id)
	return writeWithSecret(w, h, secret, err)
}

func (s *Services) testWebhook(w http.ResponseWriter, r *http.Request) error {
	id, err := webhookID(r)
	if err != nil {
		return err
	}
	c, err := s.Webhooks.Test(r.Context(), principal(r).TeamID, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newCallView(c))
	return nil
}

func (s *Services) listWebhookCalls(w http.ResponseWriter, r *http.Request) error {
	id, err := webhookID(r)
	if err != nil {
		return err
	}
	limit, err := intQuery(r, "limit", 20, 1, 100)
	if err != nil {
		return err
	}
	before := r.URL.Query().Get("before")
	if before != "" && !hooks.IsCallID(before) {
		return fault.Field("before", "is not a call id (whc_…, the id of a call this list gave)")
	}
	calls, err := s.Webhooks.Calls(r.Context(), principal(r).TeamID, id, limit, before)
	if err != nil {
		return err
	}
	list := views(calls, newCallView)
	out, err := json.Marshal(map[string]any{"data": list, "count": len(list)})
	if err != nil {
		return err
	}
	// At most Lambda's 6 MB as its invocation carries the answer, here as on AWS (as for
	// contacts): calls of large events are asked for fewer at a time.
	if n, _ := jsonout.InvocationLen(string(out)); n > jsonout.MaxInvocationBody {
		return fault.Field("limit", "these %d calls come to %.1f MB as an answer carries them, more than it may (%.1f MB, Lambda's limit on AWS): ask for fewer at a time",
			len(list), float64(n)/(1<<20), float64(jsonout.MaxInvocationBody)/(1<<20))
	}
	writeRaw(w, http.StatusOK, out)
	return nil
}

func (s *Services) replayWebhookCall(w http.ResponseWriter, r *http.Request) error {
	id, err := webhookID(r)
	if err != nil {
		return err
	}
	callID := r.PathValue("callId")
	if len(callID) > 64 {
		return fault.NotFoundf("Webhook call not found")
	}
	c, err := s.Webhooks.Replay(r.Context(), principal(r).TeamID, id, callID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newCallView(c))
	return nil
}
