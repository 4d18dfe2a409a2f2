// Package sesevent models SES event publishing records: the JSON a configuration set sends to
// EventBridge (as the event's detail), SNS or Firehose. Only the fields the product reads are
// typed; the sub-object of each event (bounce, delivery, click...) is also kept as received,
// because it is stored verbatim as the data of the email's event.
//
// The local outbox mailer produces the same values, so the events function sees one shape
// whatever the mailer.
package sesevent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Event types as SES writes them in eventType.
const (
	TypeSend             = "Send"
	TypeDelivery         = "Delivery"
	TypeBounce           = "Bounce"
	TypeComplaint        = "Complaint"
	TypeReject           = "Reject"
	TypeOpen             = "Open"
	TypeClick            = "Click"
	TypeRenderingFailure = "Rendering Failure"
	TypeDeliveryDelay    = "DeliveryDelay"
	TypeSubscription     = "Subscription"
)

// Bounce types and the sub-types the product treats specially.
const (
	BounceTypePermanent    = "Permanent"
	BounceTypeTransient    = "Transient"
	BounceTypeUndetermined = "Undetermined"

	BounceSubTypeGeneral                  = "General"
	BounceSubTypeSuppressed               = "Suppressed"
	BounceSubTypeOnAccountSuppressionList = "OnAccountSuppressionList"
)

// Source is the EventBridge source of SES events.
const Source = "aws.ses"

// EmailIDHeader is the header every message carries with our email id (see mail.EmailIDHeader;
// repeated here so that this package does not depend on the mailer).
const EmailIDHeader = "X-Usesend-Email-ID"

// subKeys maps an event type to the JSON key of its sub-object.
var subKeys = map[string]string{
	TypeSend:             "send",
	TypeDelivery:         "delivery",
	TypeBounce:           "bounce",
	TypeComplaint:        "complaint",
	TypeReject:           "reject",
	TypeOpen:             "open",
	TypeClick:            "click",
	TypeRenderingFailure: "failure",
	TypeDeliveryDelay:    "deliveryDelay",
	TypeSubscription:     "subscription",
}

// detailTypes maps an event type to the EventBridge detail-type SES gives it.
var detailTypes = map[string]string{
	TypeSend:             "Email Sent",
	TypeDelivery:         "Email Delivered",
	TypeBounce:           "Email Bounced",
	TypeComplaint:        "Email Complaint Received",
	TypeReject:           "Email Rejected",
	TypeOpen:             "Email Opened",
	TypeClick:            "Email Clicked",
	TypeRenderingFailure: "Email Rendering Failed",
	TypeDeliveryDelay:    "Email Delivery Delayed",
	TypeSubscription:     "Email Subscribed",
}

// DetailType returns the EventBridge detail-type of an event type ("" when unknown).
func DetailType(eventType string) string { return detailTypes[eventType] }

// Envelope is the EventBridge event that carries an SES event as its detail.
type Envelope = events.CloudWatchEvent

// Event is one SES event publishing record. Exactly one of the pointer fields is set, the one
// named by EventType.
type Event struct {
	EventType     string         `json:"eventType"`
	Mail          Mail           `json:"mail"`
	Send          *Send          `json:"send,omitempty"`
	Delivery      *Delivery      `json:"delivery,omitempty"`
	Bounce        *Bounce        `json:"bounce,omitempty"`
	Complaint     *Complaint     `json:"complaint,omitempty"`
	Reject        *Reject        `json:"reject,omitempty"`
	Open          *Open          `json:"open,omitempty"`
	Click         *Click         `json:"click,omitempty"`
	Failure       *Failure       `json:"failure,omitempty"`
	DeliveryDelay *DeliveryDelay `json:"deliveryDelay,omitempty"`

	// detail is the sub-object exactly as decoded; empty for events built in Go.
	detail json.RawMessage
}

// Mail describes the message the event is about.
type Mail struct {
	Timestamp        time.Time           `json:"timestamp"`
	Source           string              `json:"source"`
	SourceARN        string              `json:"sourceArn,omitempty"`
	SendingAccountID string              `json:"sendingAccountId,omitempty"`
	MessageID        string              `json:"messageId"`
	Destination      []string            `json:"destination"`
	HeadersTruncated bool                `json:"headersTruncated"`
	Headers          []Header            `json:"headers,omitempty"`
	CommonHeaders    *CommonHeaders      `json:"commonHeaders,omitempty"`
	Tags             map[string][]string `json:"tags,omitempty"`
}

// Header is one message header as SES echoes it.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// CommonHeaders are the headers SES extracts from the message.
type CommonHeaders struct {
	From      []string `json:"from,omitempty"`
	To        []string `json:"to,omitempty"`
	Cc        []string `json:"cc,omitempty"`
	ReplyTo   []string `json:"replyTo,omitempty"`
	MessageID string   `json:"messageId,omitempty"`
	Date      string   `json:"date,omitempty"`
	Subject   string   `json:"subject,omitempty"`
}

// Send is empty in SES's records: the event itself is the information.
type Send struct{}

// Delivery reports that the receiving server accepted the message.
type Delivery struct {
	Timestamp            time.Time `json:"timestamp"`
	ProcessingTimeMillis int64     `json:"processingTimeMillis"`
	Recipients           []string  `json:"recipients"`
	SMTPResponse         string    `json:"smtpResponse,omitempty"`
	ReportingMTA         string    `json:"reportingMTA,omitempty"`
	RemoteMTAIP          string    `json:"remoteMtaIp,omitempty"`
}

// Bounce reports a rejection by the receiving server (Permanent is a hard bounce).
type Bounce struct {
	BounceType        string             `json:"bounceType"`
	BounceSubType     string             `json:"bounceSubType"`
	BouncedRecipients []BouncedRecipient `json:"bouncedRecipients"`
	Timestamp         time.Time          `json:"timestamp"`
	FeedbackID        string             `json:"feedbackId,omitempty"`
	ReportingMTA      string             `json:"reportingMTA,omitempty"`
	RemoteMTAIP       string             `json:"remoteMtaIp,omitempty"`
}

// BouncedRecipient is one address that bounced.
type BouncedRecipient struct {
	EmailAddress   string `json:"emailAddress"`
	Action         string `json:"action,omitempty"`
	Status         string `json:"status,omitempty"`
	DiagnosticCode string `json:"diagnosticCode,omitempty"`
}

// Complaint reports that a recipient marked the message as spam.
type Complaint struct {
	ComplainedRecipients  []Recipient `json:"complainedRecipients"`
	Timestamp             time.Time   `json:"timestamp"`
	FeedbackID            string      `json:"feedbackId,omitempty"`
	UserAgent             string      `json:"userAgent,omitempty"`
	ComplaintFeedbackType string      `json:"complaintFeedbackType,omitempty"`
	ComplaintSubType      *string     `json:"complaintSubType,omitempty"`
	ArrivalDate           string      `json:"arrivalDate,omitempty"`
}

// Recipient is an address in a complaint.
type Recipient struct {
	EmailAddress string `json:"emailAddress"`
}

// Reject reports that SES refused to send the message (for example a virus).
type Reject struct {
	Reason string `json:"reason"`
}

// Open reports that a recipient opened the message (tracking pixel).
type Open struct {
	IPAddress string    `json:"ipAddress,omitempty"`
	Timestamp time.Time `json:"timestamp"`
	UserAgent string    `json:"userAgent,omitempty"`
}

// Click reports that a recipient followed a tracked link.
type Click struct {
	IPAddress string              `json:"ipAddress,omitempty"`
	Timestamp time.Time           `json:"timestamp"`
	UserAgent string              `json:"userAgent,omitempty"`
	Link      string              `json:"link"`
	LinkTags  map[string][]string `json:"linkTags,omitempty"`
}

// Failure is a rendering failure of a template send.
type Failure struct {
	ErrorMessage string `json:"errorMessage"`
	TemplateName string `json:"templateName,omitempty"`
}

// DeliveryDelay reports that delivery is being retried.
type DeliveryDelay struct {
	Timestamp         time.Time          `json:"timestamp"`
	DelayType         string             `json:"delayType"`
	ExpirationTime    *time.Time         `json:"expirationTime,omitempty"`
	DelayedRecipients []DelayedRecipient `json:"delayedRecipients,omitempty"`
	ReportingMTA      string             `json:"reportingMTA,omitempty"`
}

// DelayedRecipient is one address whose delivery is delayed.
type DelayedRecipient struct {
	EmailAddress   string `json:"emailAddress"`
	Status         string `json:"status,omitempty"`
	DiagnosticCode string `json:"diagnosticCode,omitempty"`
}

// ErrUnknownType is returned by Decode for an eventType this package does not know.
var ErrUnknownType = errors.New("sesevent: unknown event type")

// Decode parses one SES event record (the detail of an EventBridge event). The record must name
// a known event type and carry its sub-object, except Send whose sub-object may be absent.
func Decode(data []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(data, &e); err != nil {
		return Event{}, fmt.Errorf("sesevent: decode: %w", err)
	}
	key, ok := subKeys[e.EventType]
	if !ok {
		return Event{}, fmt.Errorf("%w: %q", ErrUnknownType, e.EventType)
	}
	if e.EventType != TypeSend && e.EventType != TypeSubscription && len(e.detail) == 0 {
		return Event{}, fmt.Errorf("sesevent: %s event without %q", e.EventType, key)
	}
	return e, nil
}

// FromEnvelope decodes the SES event carried by an EventBridge event.
func FromEnvelope(env Envelope) (Event, error) {
	if env.Source != "" && env.Source != Source {
		return Event{}, fmt.Errorf("sesevent: source %q is not %s", env.Source, Source)
	}
	return Decode(env.Detail)
}

// UnmarshalJSON decodes the typed fields and keeps the event's sub-object as received.
func (e *Event) UnmarshalJSON(data []byte) error {
	type plain Event
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return err
	}
	*e = Event(p)
	e.detail = nil
	if key, ok := subKeys[e.EventType]; ok {
		if raw, ok := fields[key]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			e.detail = append(json.RawMessage(nil), raw...)
		}
	}
	return nil
}

// Detail returns the event's sub-object (bounce, delivery, click...): as received when the event
// was decoded, else encoded from the typed field. It is "{}" when there is none.
func (e Event) Detail() json.RawMessage {
	if len(e.detail) > 0 {
		return e.detail
	}
	var v any
	switch e.EventType {
	case TypeSend:
		v = e.Send
	case TypeDelivery:
		v = e.Delivery
	case TypeBounce:
		v = e.Bounce
	case TypeComplaint:
		v = e.Complaint
	case TypeReject:
		v = e.Reject
	case TypeOpen:
		v = e.Open
	case TypeClick:
		v = e.Click
	case TypeRenderingFailure:
		v = e.Failure
	case TypeDeliveryDelay:
		v = e.DeliveryDelay
	}
	if v == nil {
		return json.RawMessage("{}")
	}
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return json.RawMessage("{}")
	}
	return b
}

// EmailID returns our email id from the X-Usesend-Email-ID header SES echoes in mail.headers, or
// from the message tag every send carries (EmailIDTag) when SES truncated the headers ("" when
// neither is there: another sender's message).
func (e Event) EmailID() string {
	for _, h := range e.Mail.Headers {
		if strings.EqualFold(h.Name, EmailIDHeader) {
			return strings.TrimSpace(h.Value)
		}
	}
	if v := e.Mail.Tags[EmailIDTag]; len(v) > 0 {
		return v[0] // the message tag every send carries, for events whose headers were cut
	}
	return ""
}

// The message tags every Mailroom send carries (SES copies them into mail.tags of each event).
const (
	EmailIDTag = "mailroom-email-id"
	TeamIDTag  = "mailroom-team-id"
)

// Recipients returns the addresses the event is about: the bounced, complaining, delivered or
// delayed ones, else every destination of the message.
func (e Event) Recipients() []string {
	var out []string
	switch {
	case e.Bounce != nil && len(e.Bounce.BouncedRecipients) > 0:
		for _, r := range e.Bounce.BouncedRecipients {
			out = append(out, r.EmailAddress)
		}
	case e.Complaint != nil && len(e.Complaint.ComplainedRecipients) > 0:
		for _, r := range e.Complaint.ComplainedRecipients {
			out = append(out, r.EmailAddress)
		}
	case e.Delivery != nil && len(e.Delivery.Recipients) > 0:
		out = append(out, e.Delivery.Recipients...)
	case e.DeliveryDelay != nil && len(e.DeliveryDelay.DelayedRecipients) > 0:
		for _, r := range e.DeliveryDelay.DelayedRecipients {
			out = append(out, r.EmailAddress)
		}
	default:
		out = append(out, e.Mail.Destination...)
	}
	return out
}

// Timestamp is when the event happened: the sub-object's timestamp, or for events without one
// (Send, Reject, Rendering Failure) the time SES accepted the message.
func (e Event) Timestamp() time.Time {
	var t time.Time
	switch {
	case e.EventType == TypeDelivery && e.Delivery != nil:
		t = e.Delivery.Timestamp
	case e.EventType == TypeBounce && e.Bounce != nil:
		t = e.Bounce.Timestamp
	case e.EventType == TypeComplaint && e.Complaint != nil:
		t = e.Complaint.Timestamp
	case e.EventType == TypeOpen && e.Open != nil:
		t = e.Open.Timestamp
	case e.EventType == TypeClick && e.Click != nil:
		t = e.Click.Timestamp
	case e.EventType == TypeDeliveryDelay && e.DeliveryDelay != nil:
		t = e.DeliveryDelay.Timestamp
	}
	if t.IsZero() {
		return e.Mail.Timestamp
	}
	return t
}
