package sesevent

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func readEnvelope(t *testing.T, name string) (Envelope, map[string]json.RawMessage) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var env Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		t.Fatalf("envelope: %v", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(env.Detail, &fields); err != nil {
		t.Fatal(err)
	}
	return env, fields
}

func compact(t *testing.T, raw []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("compact %q: %v", raw, err)
	}
	return b.String()
}

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestSamples(t *testing.T) {
	mailTime := ts("2024-10-14T09:12:30.117Z")
	cases := []struct {
		file      string
		eventType string
		key       string
		when      time.Time
		check     func(t *testing.T, e Event)
	}{
		{"send.json", TypeSend, "send", mailTime, func(t *testing.T, e Event) {
			if e.Send == nil {
				t.Error("send not decoded")
			}
		}},
		{"delivery.json", TypeDelivery, "delivery", ts("2024-10-14T09:12:31.512Z"), func(t *testing.T, e Event) {
			if !reflect.DeepEqual(e.Delivery.Recipients, []string{"jane@example.com"}) {
				t.Errorf("recipients = %v", e.Delivery.Recipients)
			}
		}},
		{"bounce_permanent.json", TypeBounce, "bounce", ts("2024-10-14T09:12:31.904Z"), func(t *testing.T, e Event) {
			b := e.Bounce
			if b.BounceType != BounceTypePermanent || b.BounceSubType != BounceSubTypeGeneral ||
				b.BouncedRecipients[0].EmailAddress != "jane@example.com" {
				t.Errorf("bounce = %+v", b)
			}
		}},
		{"bounce_transient.json", TypeBounce, "bounce", ts("2024-10-14T09:12:33.001Z"), func(t *testing.T, e Event) {
			if e.Bounce.BounceType != BounceTypeTransient || e.Bounce.BounceSubType != "MailboxFull" {
				t.Errorf("bounce = %+v", e.Bounce)
			}
		}},
		{"complaint.json", TypeComplaint, "complaint", ts("2024-10-14T10:01:02Z"), func(t *testing.T, e Event) {
			c := e.Complaint
			if c.ComplaintFeedbackType != "abuse" || c.ComplainedRecipients[0].EmailAddress != "jane@example.com" {
				t.Errorf("complaint = %+v", c)
			}
		}},
		{"reject.json", TypeReject, "reject", mailTime, func(t *testing.T, e Event) {
			if e.Reject.Reason != "Bad content" {
				t.Errorf("reject = %+v", e.Reject)
			}
		}},
		{"open.json", TypeOpen, "open", ts("2024-10-14T11:20:05.117Z"), func(t *testing.T, e Event) {
			if e.Open.IPAddress != "192.0.2.1" {
				t.Errorf("open = %+v", e.Open)
			}
		}},
		{"click.json", TypeClick, "click", ts("2024-10-14T11:20:45.322Z"), func(t *testing.T, e Event) {
			if e.Click.Link != "https://acme.example/orders/1234?utm_source=email" ||
				e.Click.LinkTags["campaign"][0] != "autumn" {
				t.Errorf("click = %+v", e.Click)
			}
		}},
		{"rendering_failure.json", TypeRenderingFailure, "failure", mailTime, func(t *testing.T, e Event) {
			if e.Failure.TemplateName != "welcome" || e.Failure.ErrorMessage == "" {
				t.Errorf("failure = %+v", e.Failure)
			}
		}},
		{"delivery_delay.json", TypeDeliveryDelay, "deliveryDelay", ts("2024-10-14T09:27:31Z"), func(t *testing.T, e Event) {
			d := e.DeliveryDelay
			if d.DelayType != "TransientCommunicationFailure" || d.ExpirationTime == nil ||
				d.DelayedRecipients[0].EmailAddress != "jane@example.com" {
				t.Errorf("deliveryDelay = %+v", d)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			env, fields := readEnvelope(t, tc.file)
			if env.DetailType != DetailType(tc.eventType) {
				t.Errorf("detail-type = %q, want %q", env.DetailType, DetailType(tc.eventType))
			}
			e, err := FromEnvelope(env)
			if err != nil {
				t.Fatalf("FromEnvelope: %v", err)
			}
			if e.EventType != tc.eventType {
				t.Errorf("eventType = %q", e.EventType)
			}
			if got := e.EmailID(); got != "cm2k8x1yz0001abcd" {
				t.Errorf("EmailID = %q", got)
			}
			if !e.Timestamp().Equal(tc.when) {
				t.Errorf("Timestamp = %v, want %v", e.Timestamp(), tc.when)
			}
			if e.Mail.MessageID == "" || len(e.Mail.Destination) != 1 || e.Mail.CommonHeaders.Subject != "Your receipt" ||
				e.Mail.Tags["ses:configuration-set"][0] != "mailroom" {
				t.Errorf("mail = %+v", e.Mail)
			}
			// The sub-object is kept byte for byte.
			if got, want := string(e.Detail()), string(fields[tc.key]); got != want {
				t.Errorf("Detail = %s\nwant %s", got, want)
			}
			tc.check(t, e)

			// Round trip: encoding the typed event and decoding it again gives the same event,
			// and the re-encoded sub-object holds the same JSON values as the original.
			out, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Decode(out)
			if err != nil {
				t.Fatalf("decode re-encoded: %v", err)
			}
			back.detail, e.detail = nil, nil
			if !reflect.DeepEqual(back, e) {
				t.Errorf("round trip differs:\n%+v\n%+v", back, e)
			}
			var orig, again any
			_ = json.Unmarshal(fields[tc.key], &orig)
			_ = json.Unmarshal(back.Detail(), &again)
			if !sameJSON(orig, again) {
				t.Errorf("typed sub-object lost data:\n%s\n%s", fields[tc.key], back.Detail())
			}
		})
	}
}

// sameJSON compares two decoded JSON values, treating timestamps equal by instant and
// null as equal to an absent key.
func sameJSON(a, b any) bool {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range av {
			if v == nil {
				continue
			}
			if !sameJSON(v, bv[k]) {
				return false
			}
		}
		for k, v := range bv {
			if _, ok := av[k]; !ok && v != nil {
				return false
			}
		}
		return true
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !sameJSON(av[i], bv[i]) {
				return false
			}
		}
		return true
	case string:
		bs, ok := b.(string)
		if !ok {
			return false
		}
		if ta, err := time.Parse(time.RFC3339Nano, av); err == nil {
			tb, err := time.Parse(time.RFC3339Nano, bs)
			return err == nil && ta.Equal(tb)
		}
		return av == bs
	default:
		return reflect.DeepEqual(a, b)
	}
}

func TestDetailOfBuiltEvent(t *testing.T) {
	e := Event{EventType: TypeBounce, Bounce: &Bounce{BounceType: BounceTypePermanent,
		BounceSubType: BounceSubTypeGeneral, BouncedRecipients: []BouncedRecipient{{EmailAddress: "a@b.test"}},
		Timestamp: ts("2024-01-01T00:00:00Z")}}
	want := `{"bounceType":"Permanent","bounceSubType":"General","bouncedRecipients":[{"emailAddress":"a@b.test"}],"timestamp":"2024-01-01T00:00:00Z"}`
	if got := string(e.Detail()); got != want {
		t.Errorf("Detail = %s", got)
	}
	if got := string((Event{EventType: TypeSend}).Detail()); got != "{}" {
		t.Errorf("empty Detail = %s", got)
	}
}

func TestEmailIDCaseInsensitive(t *testing.T) {
	for _, name := range []string{"X-Usesend-Email-ID", "x-usesend-email-id", "X-USESEND-EMAIL-ID"} {
		e := Event{Mail: Mail{Headers: []Header{{Name: "Subject", Value: "x"}, {Name: name, Value: " abc "}}}}
		if got := e.EmailID(); got != "abc" {
			t.Errorf("%s: EmailID = %q", name, got)
		}
	}
	if got := (Event{}).EmailID(); got != "" {
		t.Errorf("EmailID without header = %q", got)
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := map[string]string{
		"not json":        `{`,
		"unknown type":    `{"eventType":"Teleport","mail":{}}`,
		"missing bounce":  `{"eventType":"Bounce","mail":{}}`,
		"null delivery":   `{"eventType":"Delivery","mail":{},"delivery":null}`,
		"bad timestamp":   `{"eventType":"Open","mail":{},"open":{"timestamp":"yesterday"}}`,
		"wrong type mail": `{"eventType":"Send","mail":[]}`,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode([]byte(in)); err == nil {
				t.Error("Decode accepted it")
			}
		})
	}
	if _, err := Decode([]byte(`{"eventType":"Teleport","mail":{}}`)); !errors.Is(err, ErrUnknownType) {
		t.Errorf("unknown type error = %v", err)
	}
	if _, err := FromEnvelope(Envelope{Source: "aws.s3", Detail: json.RawMessage(`{}`)}); err == nil {
		t.Error("FromEnvelope accepted another source")
	}
}

func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var env Envelope
		if err := json.Unmarshal(data, &env); err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(env.Detail))
	}
	f.Add([]byte(`{"eventType":"Send","mail":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Decode(data)
		if err != nil {
			return
		}
		_ = e.EmailID()
		_ = e.Timestamp()
		_ = e.Recipients()
		if !json.Valid(e.Detail()) {
			t.Fatalf("Detail is not JSON: %q", e.Detail())
		}
		if _, err := json.Marshal(e); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
	})
}
