package cmdutil

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
)

func TestWriteReport(t *testing.T) {
	type report struct{ OK bool }
	text := func(w io.Writer, r report) error { _, err := fmt.Fprintf(w, "ok: %v\n", r.OK); return err }
	for _, tc := range []struct {
		json, ok bool
		want     string
	}{
		{false, true, "ok: true\n"},
		{true, true, "{\n  \"OK\": true\n}\n"},
		{false, false, "ok: false\n"},
		{true, false, "{\n  \"OK\": false\n}\n"},
	} {
		var b bytes.Buffer
		err := WriteReport(&b, report{tc.ok}, tc.json, text, tc.ok)
		var exit *ExitError
		if b.String() != tc.want || tc.ok != (err == nil) || !tc.ok && (!errors.As(err, &exit) || exit.Code != 1) {
			t.Errorf("json %v ok %v: wrote %q, err %v", tc.json, tc.ok, b.String(), err)
		}
	}
}
