package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"email-0b5f7c1e-9a2d-4c1b-8f3e-2d6a7b8c9d0e", true},
		{"campaign_12.batch-3", true},
		{"a", true},
		{strings.Repeat("x", 64), true},
		{"", false},
		{strings.Repeat("x", 65), false},
		{"email 1", false},
		{"email/1", false},
		{"email:1", false},
		{"émail", false},
		{"email\n", false},
	} {
		if got := ValidName(tc.name); got != tc.ok {
			t.Errorf("ValidName(%q) = %v, want %v", tc.name, got, tc.ok)
		}
		if err := CheckName(tc.name); (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidName)) {
			t.Errorf("CheckName(%q) = %v", tc.name, err)
		}
	}
}

func TestNormalize(t *testing.T) {
	at := time.Date(2030, 5, 6, 9, 30, 15, 999_999_999, time.FixedZone("X", -7*3600))
	got, err := Normalize(Schedule{Name: "email-1", At: at, Payload: []byte("{}")})
	if err != nil {
		t.Fatalf("Normalize: %v", err)
	}
	want := time.Date(2030, 5, 6, 16, 30, 16, 0, time.UTC) // a fraction rounds up: never early
	whole := time.Date(2030, 5, 6, 16, 30, 15, 0, time.UTC)
	if got, err := Normalize(Schedule{Name: "email-2", At: whole}); err != nil || !got.At.Equal(whole) {
		t.Errorf("a whole second: %v, %v; want it unchanged", got.At, err)
	}
	if !got.At.Equal(want) || got.At.Location() != time.UTC {
		t.Errorf("At = %v, want %v", got.At, want)
	}
	if _, err := Normalize(Schedule{Name: "email-1"}); !errors.Is(err, ErrInvalidTime) {
		t.Errorf("zero At: %v, want ErrInvalidTime", err)
	}
	if _, err := Normalize(Schedule{Name: "bad name", At: at}); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad name: %v, want ErrInvalidName", err)
	}
}

func FuzzValidName(f *testing.F) {
	f.Add("email-1")
	f.Add("")
	f.Add("a/b")
	f.Fuzz(func(t *testing.T, name string) {
		if !ValidName(name) {
			return
		}
		if len(name) > MaxNameLen || strings.Trim(name, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_.") != "" {
			t.Fatalf("ValidName accepted %q", name)
		}
	})
}
