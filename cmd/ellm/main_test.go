package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/ellm-dev/ellm/pkg/sharedtest"
)

var update = flag.Bool("update", false, "rewrite the expected files of failing cmp commands inside the scripts")

// TestMain lets the scripts run `ellm` as a real process (the test binary
// re-executed), so exit codes, standard streams, signals and the environment
// are exactly what a user gets.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"ellm": main})
}

// TestScripts runs every testdata/script/*.txtar: one user story each,
// against the binary, from an empty working directory.
func TestScripts(t *testing.T) {
	// Absolute: scripts run in their own work directories.
	shared, err := filepath.Abs(filepath.Dir(sharedtest.Path(t, "models")))
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv(sharedtest.EnvVar, shared)
			// A private home: the built-in model is generated into the user
			// cache dir and a user config file would change every flag.
			home := filepath.Join(env.WorkDir, "home")
			env.Setenv("HOME", home)
			env.Setenv("XDG_CACHE_HOME", filepath.Join(home, ".cache"))
			env.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
			return os.MkdirAll(home, 0o755)
		},
		Condition: condition,
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"freeport": cmdFreeport,
			"waithttp": cmdWaitHTTP,
			"httpget":  cmdHTTP(http.MethodGet),
			"httppost": cmdHTTP(http.MethodPost),
			"jsonpath": cmdJSONPath,
			"ssejoin":  cmdSSEJoin,
			"truncate": cmdTruncate,
			"replace":  cmdReplace,
		},
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       *update,
	})
}

// condition answers [cpuinfo:FLAG]: whether /proc/cpuinfo lists FLAG, so
// scripts check check-cpu against the kernel's view of this CPU rather than
// a hard-coded one.
func condition(cond string) (bool, error) {
	name, ok := strings.CutPrefix(cond, "cpuinfo:")
	if !ok {
		return false, fmt.Errorf("unknown condition %q", cond)
	}
	flags, err := cpuinfoFlags()
	if err != nil {
		return false, err
	}
	return flags[name], nil
}

// cpuinfoFlags reads the flags of /proc/cpuinfo once per test binary.
var cpuinfoFlags = sync.OnceValues(func() (map[string]bool, error) {
	if runtime.GOOS != "linux" {
		return nil, errors.New("[cpuinfo:...] needs /proc/cpuinfo (linux)")
	}
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.TrimSpace(key) != "flags" {
			continue
		}
		flags := map[string]bool{}
		for _, fl := range strings.Fields(val) {
			flags[fl] = true
		}
		return flags, nil // every processor lists the same flags
	}
	return nil, errors.Join(errors.New("no flags line in /proc/cpuinfo"), sc.Err())
})

// cmdFreeport VAR sets $VAR to a TCP port free on 127.0.0.1 right now.
func cmdFreeport(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: freeport VAR")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	port := l.Addr().(*net.TCPAddr).Port
	ts.Check(l.Close())
	ts.Setenv(args[0], strconv.Itoa(port))
}

// cmdWaitHTTP URL [TIMEOUT] polls GET URL until it answers 200 OK, for a
// server started in the background.
func cmdWaitHTTP(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: waithttp URL [TIMEOUT]")
	}
	u := loopbackURL(ts, args[0])
	timeout := 60 * time.Second
	if len(args) == 2 {
		d, err := time.ParseDuration(args[1])
		ts.Check(err)
		timeout = d
	}
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		resp, err := client.Get(u)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts.Fatalf("%s not ready after %v: %s", u, timeout, last)
}

// cmdHTTP is `httpget [-H 'Name: value']... URL` and `httppost [-H ...]...
// URL FILE`: the response body goes to stdout, the status and headers to
// stderr ("status: 200", "content-type: ..."). It fails on a status other
// than 2xx; with ! it expects one.
func cmdHTTP(method string) func(ts *testscript.TestScript, neg bool, args []string) {
	return func(ts *testscript.TestScript, neg bool, args []string) {
		httpDo(ts, neg, method, args)
	}
}

func httpDo(ts *testscript.TestScript, neg bool, method string, args []string) {
	header := http.Header{}
	for len(args) >= 2 && args[0] == "-H" {
		k, v, ok := strings.Cut(args[1], ":")
		if !ok {
			ts.Fatalf("-H %q: want 'Name: value'", args[1])
		}
		header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		args = args[2:]
	}
	var req *http.Request
	var err error
	switch {
	case method == http.MethodGet && len(args) == 1:
		req, err = http.NewRequest(method, loopbackURL(ts, args[0]), nil)
	case method == http.MethodPost && len(args) == 2:
		req, err = http.NewRequest(method, loopbackURL(ts, args[0]), strings.NewReader(ts.ReadFile(args[1])))
		header.Set("Content-Type", "application/json")
	default:
		ts.Fatalf("usage: httpget [-H 'Name: value']... URL | httppost [-H 'Name: value']... URL FILE")
	}
	ts.Check(err)
	req.Header = header
	resp, err := (&http.Client{Timeout: 120 * time.Second}).Do(req)
	ts.Check(err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	ts.Check(err)
	ts.Stdout().Write(body)
	fmt.Fprintf(ts.Stderr(), "status: %d\n", resp.StatusCode)
	for _, k := range []string{"Content-Type", "Cache-Control"} {
		if v := resp.Header.Get(k); v != "" {
			fmt.Fprintf(ts.Stderr(), "%s: %s\n", strings.ToLower(k), v)
		}
	}
	ok := resp.StatusCode/100 == 2
	if ok && neg {
		ts.Fatalf("unexpected success: %s", resp.Status)
	}
	if !ok && !neg {
		ts.Fatalf("%s %s: %s", req.Method, req.URL, resp.Status)
	}
}

// loopbackURL refuses anything but a loopback host: the scripts only ever
// talk to a server they started themselves.
func loopbackURL(ts *testscript.TestScript, raw string) string {
	u, err := url.Parse(raw)
	ts.Check(err)
	ip := net.ParseIP(u.Hostname())
	if u.Scheme != "http" || ip == nil || !ip.IsLoopback() {
		ts.Fatalf("%s: only http://127.0.0.1 or http://[::1] URLs are allowed", raw)
	}
	return u.String()
}

// cmdJSONPath [-raw] FILE PATH prints the JSON value at PATH in FILE, one
// line per value; -raw prints strings as they are rather than quoted (for a
// string that holds JSON in turn). PATH is dot-separated object keys and
// array indexes; "*" takes every element of an array, "#" its length (quote it
// in a script, where # starts a comment: 'a.#'). A missing key is an error;
// with ! it is expected.
func cmdJSONPath(ts *testscript.TestScript, neg bool, args []string) {
	raw := len(args) > 0 && args[0] == "-raw"
	if raw {
		args = args[1:]
	}
	if len(args) != 2 {
		ts.Fatalf("usage: jsonpath [-raw] FILE PATH")
	}
	var doc any
	dec := json.NewDecoder(strings.NewReader(ts.ReadFile(args[0])))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		ts.Fatalf("%s: %v", args[0], err)
	}
	if dec.More() {
		ts.Fatalf("%s: more than one JSON value", args[0])
	}
	vals, err := jsonSelect([]any{doc}, strings.Split(args[1], "."))
	if neg {
		if err == nil {
			ts.Fatalf("%s has %s", args[0], args[1])
		}
		return
	}
	if err != nil {
		ts.Fatalf("%s: %s: %v", args[0], args[1], err)
	}
	for _, v := range vals {
		if str, ok := v.(string); ok && raw {
			fmt.Fprintln(ts.Stdout(), str)
			continue
		}
		b, err := json.Marshal(v)
		ts.Check(err)
		fmt.Fprintf(ts.Stdout(), "%s\n", b)
	}
}

// cmdSSEJoin FILE PATH joins the strings at PATH (as in jsonpath) of every
// "data: {...}" event of a server-sent event stream, skipping events without
// it, and prints them as one line: a streamed answer's text, to compare with
// the same request unstreamed.
func cmdSSEJoin(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: ssejoin FILE PATH")
	}
	var text strings.Builder
	for _, line := range strings.Split(ts.ReadFile(args[0]), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev any
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			ts.Fatalf("%s: event %q: %v", args[0], data, err)
		}
		vals, err := jsonSelect([]any{ev}, strings.Split(args[1], "."))
		if err != nil {
			continue
		}
		for _, v := range vals {
			str, ok := v.(string)
			if !ok {
				ts.Fatalf("%s: %s is %T, not a string", args[0], args[1], v)
			}
			text.WriteString(str)
		}
	}
	fmt.Fprintln(ts.Stdout(), text.String())
}

func jsonSelect(vals []any, path []string) ([]any, error) {
	if len(path) == 0 {
		return vals, nil
	}
	seg := path[0]
	var next []any
	for _, v := range vals {
		switch t := v.(type) {
		case map[string]any:
			e, ok := t[seg]
			if !ok {
				return nil, fmt.Errorf("no key %q", seg)
			}
			next = append(next, e)
		case []any:
			switch seg {
			case "*":
				next = append(next, t...)
			case "#":
				next = append(next, len(t))
			default:
				i, err := strconv.Atoi(seg)
				if err != nil || i < 0 || i >= len(t) {
					return nil, fmt.Errorf("no index %q in an array of %d", seg, len(t))
				}
				next = append(next, t[i])
			}
		default:
			return nil, fmt.Errorf("%q of a %T", seg, v)
		}
	}
	return jsonSelect(next, path[1:])
}

// cmdTruncate FILE SIZE cuts FILE to SIZE bytes, to corrupt a copy.
func cmdTruncate(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: truncate FILE SIZE")
	}
	size, err := strconv.ParseInt(args[1], 10, 64)
	ts.Check(err)
	ts.Check(os.Truncate(ts.MkAbs(args[0]), size))
}

// cmdReplace FILE OLD NEW replaces every OLD in FILE by NEW, to corrupt or
// alter a copy of the shared data; OLD must occur.
func cmdReplace(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: replace FILE OLD NEW")
	}
	name := ts.MkAbs(args[0])
	b, err := os.ReadFile(name)
	ts.Check(err)
	n := bytes.Count(b, []byte(args[1]))
	if n == 0 {
		ts.Fatalf("%s: no %q", args[0], args[1])
	}
	ts.Check(os.WriteFile(name, bytes.ReplaceAll(b, []byte(args[1]), []byte(args[2])), 0o644))
	fmt.Fprintf(ts.Stdout(), "%d replaced\n", n)
}

// The custom commands are only as good as their selection logic.
func TestJSONSelect(t *testing.T) {
	var doc any
	if err := json.Unmarshal([]byte(`{"a":{"b":[{"c":1},{"c":2}]},"n":null}`), &doc); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path    string
		want    string
		wantErr bool
	}{
		{path: "a.b.#", want: "[2]"},
		{path: "a.b.*.c", want: "[1,2]"},
		{path: "a.b.1.c", want: "[2]"},
		{path: "n", want: "[null]"},
		{path: "a.b.2", wantErr: true},
		{path: "a.x", wantErr: true},
		{path: "n.c", wantErr: true},
		{path: "a.b.c", wantErr: true},
	} {
		got, err := jsonSelect([]any{doc}, strings.Split(tt.path, "."))
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: err %v, want error %v", tt.path, err, tt.wantErr)
			continue
		}
		if tt.wantErr {
			continue
		}
		b, _ := json.Marshal(got)
		if !bytes.Equal(b, []byte(tt.want)) {
			t.Errorf("%s: got %s, want %s", tt.path, b, tt.want)
		}
	}
}
