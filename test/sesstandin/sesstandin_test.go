package sesstandin

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/mailroom/mailroom/pkg/mail"
	mailses "github.com/mailroom/mailroom/pkg/mail/ses"
)

// TestUnpacedBurstIsThrottled: 40 sends at once against a 10/s stand-in, through the real SES
// adapter: about 10 are accepted, the rest come back as mail.ErrThrottled, and GetAccount
// reports the rate.
func TestUnpacedBurstIsThrottled(t *testing.T) {
	s := Start(10)
	defer s.Close()
	client := sesv2.New(sesv2.Options{Region: "us-east-1", BaseEndpoint: aws.String(s.URL),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}, mailses.NoRetries)
	m := mailses.NewWithAPI(client, "")
	ok, throttled := 0, 0
	for range 40 {
		_, err := m.Send(context.Background(), mail.Outgoing{EmailID: "em1", From: "a@example.com",
			Recipients: []string{"b@example.org"}, Raw: []byte("Subject: s\r\n\r\nhi")})
		switch {
		case err == nil:
			ok++
		case errors.Is(err, mail.ErrThrottled):
			throttled++
		default:
			t.Fatalf("send: %v", err)
		}
	}
	if ok < 10 || ok > 12 || throttled != 40-ok {
		t.Errorf("accepted %d, throttled %d; want about 10 and the rest", ok, throttled)
	}
	q, err := mailses.Account{Client: client}.Quota(context.Background())
	if err != nil || q.MaxSendRate != 10 || !q.SendingEnabled || q.SentLast24Hours != float64(ok) {
		t.Errorf("quota %+v, %v", q, err)
	}
}
