// Package console tests the mail console in a real headless browser (Debian's chromium,
// installed by .ci/install-browser, driven with chromedp): sign in, send through the API, see
// the email appear without reloading, open it, see its rendered message and its events.
// Screenshots go to ARTIFACTS_DIR (default .artifacts/console at the repository's root).
package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/mailroom/mailroom/pkg/config"
	"github.com/mailroom/mailroom/pkg/server"
	"github.com/mailroom/mailroom/pkg/team"
)

const key = "us_consolet01_0123456789abcdef0123456789abcdef"

func browser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium under CI: .ci/install-browser (run by make test) installs it")
	}
	t.Skip("no chromium: run .ci/install-browser (make test does)")
	return ""
}

func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ARTIFACTS_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", ".artifacts")
	}
	dir = filepath.Join(dir, "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func send(t *testing.T, base, body string) string {
	t.Helper()
	var out struct{ EmailID string }
	if call(t, base, "/api/v1/emails", body, &out); out.EmailID == "" {
		t.Fatal("send: no emailId")
	}
	return out.EmailID
}

// call POSTs body to the API's path and decodes the answer into out.
func call(t *testing.T, base, path, body string, out any) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(b, out) != nil {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
	}
}

// TestConsoleInABrowser: sign in, send through the API, see the email appear live, open it,
// see the rendered message (scripts and remote content blocked) and its events up to
// DELIVERED, then fire an SES complaint from the page and see it in the timeline.
func TestConsoleInABrowser(t *testing.T) {
	exe := browser(t)
	ctx := context.Background()
	cfg := config.Config{Backend: config.BackendEmbedded, DataDir: t.TempDir(), Workers: 2, AuthCacheTTL: time.Minute,
		BootstrapAPIKey: key, LogLevel: slog.LevelError + 4}
	srv, err := server.Start(ctx, cfg, "127.0.0.1:0", io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(ctx)
	req, _ := http.NewRequest("POST", srv.URL+"/api/v1/domains", strings.NewReader(`{"name":"example.com"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("domain: %v %v", resp, err)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1200, 900))
	actx, cancel := chromedp.NewExecAllocator(ctx, opts...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(bctx); err != nil { // starts the browser, without a deadline
		t.Fatalf("browser %s: %v", exe, err)
	}
	bctx, cancel = context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	dir := artifacts(t)
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			b, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return chromedp.Void{}, err
			}
			path := filepath.Join(dir, name+".png")
			t.Logf("screenshot %s", path)
			return chromedp.Void{}, os.WriteFile(path, b, 0o644)
		}
	}

	if err := chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("key")),
		shot("1-sign-in"),
		chromedp.SendKeys(chromedp.ID("key"), key),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.CSS("table.emails")),
	); err != nil {
		t.Fatalf("sign in: %v", err)
	}

	// Sent after the page was drawn: it appears without a reload.
	html := `<h2 style="color:#0b5cad">Hello from the console test</h2><p>Rendered, with <b>bold</b>.</p>` +
		`<img src="https://tracker.example/pixel.gif" alt=""><script>document.title="pwned"</script>`
	b, _ := json.Marshal(html)
	id := send(t, srv.URL, fmt.Sprintf(`{"from":"Console <hi@example.com>","to":"reader@example.org","subject":"Seen live","html":%s,"text":"Hello"}`, b))
	row := fmt.Sprintf(`tr[data-id=%q]`, id)
	if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(row)), chromedp.Focus(chromedp.CSS(row+` a`))); err != nil {
		t.Fatalf("the email did not appear live: %v", err)
	}
	// A live redraw keeps the keyboard where it was: the row's link focused before another
	// email arrives is focused after.
	next := send(t, srv.URL, `{"from":"hi@example.com","to":"reader@example.org","subject":"Next","text":"x"}`)
	if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-id=%q]`, next)))); err != nil {
		t.Fatalf("the second email did not appear live: %v", err)
	}
	if held, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.activeElement.getAttribute("href") || document.activeElement.tagName`)); err != nil || held != "/console/emails/"+id {
		t.Errorf("after a live redraw the focus is on %q (%v), want the link it was on", held, err)
	}
	if err := chromedp.Do(bctx,
		shot("2-live"),
		chromedp.Click(chromedp.CSS(row+` a`)),
		chromedp.WaitVisible(chromedp.CSS(`iframe#html`)),
	); err != nil {
		t.Fatalf("the email did not appear live or did not open: %v", err)
	}
	// The email's page updates live too: its timeline reaches DELIVERED.
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.querySelector("#timeline").innerText.includes("DELIVERED")`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the timeline never showed DELIVERED: %v", err)
	}
	timeline, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#timeline`)))
	if err != nil {
		t.Fatal(err)
	}
	srcdoc, err := chromedp.Run(bctx, chromedp.AttributeValue(chromedp.CSS(`iframe#html`), "srcdoc"))
	if err != nil {
		t.Fatal(err)
	}
	sandbox, err := chromedp.Run(bctx, chromedp.AttributeValue(chromedp.CSS(`iframe#html`), "sandbox"))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.Sleep(300*time.Millisecond), shot("3-email")); err != nil {
		t.Fatal(err)
	}
	title, err := chromedp.Run(bctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"QUEUED", "SENT", "DELIVERED"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("timeline %q lacks %s", timeline, want)
		}
	}
	if !strings.Contains(srcdoc.Value, "Hello from the console test") || !sandbox.Exists || sandbox.Value != "" {
		t.Errorf("frame: sandbox %+v, srcdoc %.80q", sandbox, srcdoc.Value)
	}
	if title == "pwned" || !strings.Contains(title, "Mailroom") {
		t.Errorf("the message's script ran in the console: title %q", title)
	}
	// The frame has an opaque origin: the console cannot reach into it, nor it into the console.
	origin, err := chromedp.Run(bctx, chromedp.Evaluate[string](`(() => { try { return document.querySelector("iframe#html").contentDocument === null ? "opaque" : "readable" } catch (e) { return "opaque" } })()`))
	if err != nil {
		t.Fatal(err)
	}
	if origin != "opaque" {
		t.Errorf("the sandboxed frame is readable from the console (%s)", origin)
	}
	// A button fires an SES complaint through SES's handling: the timeline shows it.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.ID("sim-complaint"))); err != nil {
		t.Fatalf("the complaint button: %v", err)
	}
	// The form posts and the page comes back: poll across the navigation.
	var seen bool
	for deadline := time.Now().Add(10 * time.Second); !seen && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		seen, _ = chromedp.Run(bctx, chromedp.Evaluate[bool](`!!document.querySelector("#timeline") && document.querySelector("#timeline").innerText.includes("COMPLAINED")`))
	}
	if !seen {
		t.Fatal("the timeline never showed COMPLAINED")
	}
	if err := chromedp.Do(bctx, shot("4-complaint")); err != nil {
		t.Fatal(err)
	}
	// What the user chose or typed in the event forms survives a live redraw of them: an
	// Open fired from the page's own form (by script, no navigation) redraws the summary.
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(() => {
		document.querySelector("#sim-bounce-type").value = "transient-mailboxfull";
		document.querySelector("#sim-url").value = "https://mine.example/path";
		const form = document.querySelector("#sim-open").form;
		fetch(form.action, { method: "POST", body: new URLSearchParams(new FormData(form)), credentials: "same-origin" });
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.querySelector("#timeline").innerText.includes("OPENED")`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the timeline never showed OPENED: %v", err)
	}
	if err := chromedp.Do(bctx, chromedp.Sleep(300*time.Millisecond)); err != nil { // the summary's redraw, after the timeline's
		t.Fatal(err)
	}
	kept, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[document.querySelector("#sim-bounce-type").value, document.querySelector("#sim-url").value]`))
	if err != nil || len(kept) != 2 || kept[0] != "transient-mailboxfull" || kept[1] != "https://mine.example/path" {
		t.Errorf("after a live redraw the event forms hold %q (%v), want what was chosen and typed", kept, err)
	}
	// An email's status at the top of its page follows its history live: a scheduled email
	// cancelled through the API reads CANCELLED without a reload.
	at := time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
	later := send(t, srv.URL, `{"from":"hi@example.com","to":"later@example.org","subject":"Later","text":"x","scheduledAt":"`+at+`"}`)
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/console/emails/"+later), chromedp.WaitVisible(chromedp.ID("status"))); err != nil {
		t.Fatal(err)
	}
	// A tab out of sight lets its stream go (six tabs holding one each would leave a browser
	// no connection to the server over HTTP/1.1): the change made meanwhile is not drawn, and
	// is as soon as the tab is in sight again.
	visible := func(v bool) {
		t.Helper()
		if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](fmt.Sprintf(`(() => {
			Object.defineProperty(document, "hidden", { value: %t, configurable: true });
			document.dispatchEvent(new Event("visibilitychange"));
			return true;
		})()`, !v))); err != nil {
			t.Fatal(err)
		}
	}
	visible(false)
	creq, _ := http.NewRequest("POST", srv.URL+"/api/v1/emails/"+later+"/cancel", nil)
	creq.Header.Set("Authorization", "Bearer "+key)
	if resp, err := http.DefaultClient.Do(creq); err != nil || resp.StatusCode != 200 {
		t.Fatalf("cancel: %v %v", resp, err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.querySelector("#status").innerText === "CANCELLED"`,
		chromedp.WithPollingTimeout(2*time.Second))); err == nil {
		t.Errorf("a tab out of sight was still listening: its status turned CANCELLED")
	}
	visible(true)
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.querySelector("#status").innerText === "CANCELLED"`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Errorf("the email's status did not turn CANCELLED once the tab was in sight: %v", err)
	}
	// The analytics page draws its chart on the page.
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/console/analytics?days=7"), chromedp.WaitVisible(chromedp.CSS(`svg#series polyline`)),
		shot("5-analytics")); err != nil {
		t.Fatalf("analytics: %v", err)
	}
	// A domain's DNS records, each name and value with a button that copies it.
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/console/domains"), chromedp.WaitVisible(chromedp.CSS(`button.copy`))); err != nil {
		t.Fatalf("domains: %v", err)
	}
	same, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(() => {
		const b = document.querySelector("button.copy");
		return b.dataset.copy !== "" && b.dataset.copy === b.previousElementSibling.textContent;
	})()`))
	if err != nil || !same {
		t.Fatalf("the first copy button does not copy the record's name shown next to it (%v)", err)
	}
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`button.copy`))); err != nil {
		t.Fatal(err)
	}
	// The clipboard (where the browser grants it), or else the text selected for Ctrl-C.
	copied, err := chromedp.Run(bctx, chromedp.Poll[bool](`(() => {
		const b = document.querySelector("button.copy");
		return b.textContent === "Copied" || (b.textContent.startsWith("Selected") && window.getSelection().toString() === b.dataset.copy);
	})()`, chromedp.WithPollingTimeout(5*time.Second)))
	if err != nil || !copied {
		t.Errorf("the copy button did nothing: %v", err)
	}
	if err := chromedp.Do(bctx, shot("6-domains")); err != nil {
		t.Fatal(err)
	}
	// A subject and an address of one long word wrap instead of widening the page past the
	// screen, and a subject of spaces still shows a link to open its email.
	long := send(t, srv.URL, `{"from":"hi@example.com","to":"averyveryverylonglocalpartaddressthatgoesonandonandon1234567890@sub.domain.example-long-name.net","subject":"Invoice_`+strings.Repeat("ABCDEFGHIJ", 25)+`","text":"x"}`)
	blank := send(t, srv.URL, `{"from":"hi@example.com","to":"reader@example.org","subject":"   ","text":"x"}`)
	fits := func(page string) {
		t.Helper()
		if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+page), chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
			t.Fatalf("%s: %v", page, err)
		}
		widths, err := chromedp.Run(bctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, document.documentElement.clientWidth]`))
		if err != nil {
			t.Fatal(err)
		}
		if widths[0] > widths[1] {
			t.Errorf("%s is %d px wide on a %d px screen", page, widths[0], widths[1])
		}
	}
	// A contact's long name and property, a template's long subject: the same.
	var book struct{ ID string }
	call(t, srv.URL, "/api/v1/contactBooks", `{"name":"Long"}`, &book)
	call(t, srv.URL, "/api/v1/contactBooks/"+book.ID+"/contacts", `{"email":"ann@example.org","firstName":"`+strings.Repeat("Annabelle", 14)+
		`","properties":{"site":"https://example.org/`+strings.Repeat("path", 75)+`"}}`, &struct{}{})
	call(t, srv.URL, "/api/v1/templates", `{"name":"Long","subject":"Welcome_`+strings.Repeat("ABCDEFGHIJ", 25)+`","html":"<p>x</p>"}`, &struct{}{})
	fits("/console/emails")
	fits("/console/emails/" + long)
	fits("/console/books/" + book.ID)
	fits("/console/templates")
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/console/emails"), chromedp.WaitVisible(chromedp.CSS(row))); err != nil {
		t.Fatal(err)
	}
	if link, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`(() => {
		const a = document.querySelector('a[href="/console/emails/`+blank+`"]');
		return a ? [a.textContent, String(Math.round(a.getBoundingClientRect().width))] : ["", "0"];
	})()`)); err != nil || link[0] != "(no subject)" || link[1] == "0" {
		t.Errorf("the email with a blank subject is listed as %q, %s px wide (%v); want a visible (no subject)", link, link[1], err)
	}
	// On a phone's width, no page is wider than the screen (the menu wraps, tables fold).
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{"/console/emails", "/console/emails/" + id, "/console/emails/" + long, "/console/campaigns", "/console/books", "/console/books/" + book.ID,
		"/console/domains", "/console/templates", "/console/analytics", "/console/suppressions", "/console/webhooks", "/console/keys"} {
		fits(page)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/console/emails/"+id), chromedp.WaitVisible(chromedp.CSS("main")), chromedp.Sleep(300*time.Millisecond), shot("7-phone")); err != nil {
		t.Fatal(err)
	}
	// On a phone a table's row is a card: each value on its own line, the full width, after
	// its column's name (the headings are hidden).
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/console/emails"), chromedp.WaitVisible(chromedp.CSS(row)), shot("8-phone-emails")); err != nil {
		t.Fatal(err)
	}
	card, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`(() => {
		const td = document.querySelector(`+"`"+row+` td[data-label="Subject"]`+"`"+`);
		return [String(Math.round(td.getBoundingClientRect().width)), getComputedStyle(td, "::before").content];
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if w, _ := strconv.Atoi(card[0]); w < 300 || card[1] != `"Subject: "` {
		t.Errorf("on a phone the subject's cell is %s px wide, labelled %s; want most of the 390 px and \"Subject: \"", card[0], card[1])
	}
	// The charts' text is drawn larger on a phone, to stay readable at half the size.
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/console/analytics"), chromedp.WaitVisible(chromedp.CSS(`svg#series`)), shot("9-phone-analytics")); err != nil {
		t.Fatal(err)
	}
	px, err := chromedp.Run(bctx, chromedp.Evaluate[float64](`Math.min(...[...document.querySelectorAll("svg.chart text")].map((t) => t.getBoundingClientRect().height).filter((h) => h > 0))`))
	if err != nil || px < 12 {
		t.Errorf("on a phone the charts' smallest text is %.1f px high (%v); want 12 or more (an 11 px font)", px, err)
	}
	// Larger, the chart's labels still overlap none of the others, over a month or a week
	// (a week's days every other one), and leave the first and last day shown.
	for _, days := range []string{"30", "7"} {
		if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/console/analytics?days="+days), chromedp.WaitVisible(chromedp.CSS(`svg#series`))); err != nil {
			t.Fatal(err)
		}
		overlaps, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`(() => {
			const boxes = [...document.querySelectorAll("svg#series text")].map((t) => [t.textContent, t.getBoundingClientRect()]).filter(([, r]) => r.width > 0);
			const out = [];
			boxes.forEach(([a, p], i) => boxes.slice(i + 1).forEach(([b, q]) => {
				if (p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom) out.push(a + " / " + b);
			}));
			if (boxes.length < 3) out.push("only " + boxes.length + " labels shown");
			return out;
		})()`))
		if err != nil || len(overlaps) > 0 {
			t.Errorf("on a phone the %s-day chart's labels overlap: %v (%v)", days, overlaps, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "3-email.png")); err != nil {
		t.Error(err)
	}
	// The session's key revoked while a page is open: its live stream ends, and the page
	// says so instead of going on looking current.
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/console/emails"), chromedp.WaitVisible(chromedp.CSS(row))); err != nil {
		t.Fatal(err)
	}
	if err := (&team.Admin{Store: srv.App.Store, Now: time.Now}).RevokeKey(ctx, 1, strings.Split(key, "_")[1]); err != nil {
		t.Fatal(err)
	}
	srv.App.Services.Auth.Forget(strings.Split(key, "_")[1])
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`!!document.getElementById("live-ended")`, chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Errorf("the page did not say its live updates stopped after its key was revoked: %v", err)
	}
}
