package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mailroom/mailroom/pkg/app"
)

// SocketName is the admin socket in the data folder. The embedded database is held by one
// process: while the local server runs, mailroom-admin runs its commands inside the server
// through this socket. Only the folder's owner may connect (mode 0600), as only they may open
// the database itself.
const SocketName = "admin.sock"

// request and response are the socket's one exchange: a command's arguments, and what it
// printed or the error it ended with.
type request struct {
	Args []string `json:"args"`
}

type response struct {
	Output string `json:"output"`
	Error  string `json:"error,omitempty"`
}

// Socket serves the admin socket of a running local server.
type Socket struct {
	path string
	srv  *http.Server
	ln   net.Listener
}

// Listen opens dataDir's admin socket for a, replacing a file left by a process that died
// (the caller holds the database, so no other server is running).
func Listen(a *app.App, dataDir string) (*Socket, error) {
	path := filepath.Join(dataDir, SocketName)
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /run", func(w http.ResponseWriter, r *http.Request) {
		var req request
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		var out bytes.Buffer
		var resp response
		if err := Run(r.Context(), a, req.Args, &out); err != nil {
			resp.Error = err.Error()
		}
		resp.Output = out.String()
		a.Log.Info("admin command", "command", commandName(req.Args), "ok", resp.Error == "")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
	})
	s := &Socket{path: path, ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// commandName is a command's first two words (its flags may carry names, never logged).
func commandName(args []string) string {
	if len(args) < 2 {
		return ""
	}
	return args[0] + " " + args[1]
}

// Close stops serving and removes the socket file.
func (s *Socket) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	_ = os.Remove(s.path)
	return err
}

// ErrNoServer means no local server answers on the data folder's socket: the command opens
// the database itself.
var ErrNoServer = errors.New("no local server running")

// Remote runs a command inside the local server that holds dataDir, printing what it printed.
func Remote(ctx context.Context, dataDir string, args []string, out io.Writer) error {
	path := filepath.Join(dataDir, SocketName)
	if _, err := os.Stat(path); err != nil {
		return ErrNoServer
	}
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	body, _ := json.Marshal(request{Args: args})
	req, err := http.NewRequestWithContext(ctx, "POST", "http://mailroom/run", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
		return ErrNoServer // a file left by a server that died
	}
	if err != nil {
		return fmt.Errorf("the local server's admin socket: %w", err)
	}
	defer resp.Body.Close()
	var r response
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return fmt.Errorf("the local server's admin socket: %w", err)
	}
	_, _ = io.WriteString(out, r.Output)
	if r.Error != "" {
		return errors.New(r.Error)
	}
	return nil
}
