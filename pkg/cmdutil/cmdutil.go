// Package cmdutil holds what every ellm subcommand shares: its IO streams,
// the configuration precedence (flag > ELLM_* env > config file > default),
// and the errors that map to exit codes.
package cmdutil

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// IOStreams are a command's standard streams, replaced by buffers in tests.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// Factory carries the dependencies subcommands receive instead of reaching
// for globals, so that each command's run function can be tested without a process.
type Factory struct {
	IO     IOStreams
	Getenv func(string) string
	// Version is the build's version string.
	Version string
}

// System is the Factory of a real process.
func System(version string) *Factory {
	return &Factory{IO: IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, Getenv: os.Getenv, Version: version}
}

// ErrNotBuilt is returned by subcommands whose issue has not landed yet.
var ErrNotBuilt = errors.New("not built yet")

// ExitError carries an exit status without printing anything more: the
// command has already said why (for example check-cpu's verdict, align's FAIL rows).
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// EnvPrefix prefixes every environment variable ellm reads for a flag:
// --sequence-length is ELLM_SEQUENCE_LENGTH.
const EnvPrefix = "ELLM"

// EnvName is the environment variable that sets flag name.
func EnvName(flag string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// LoadConfig reads the config file: path if given, else ./ellm.yaml, else
// <user config dir>/ellm/ellm.yaml. A missing default file is not an error;
// a missing explicit one is.
func LoadConfig(path string) (*viper.Viper, error) {
	v := viper.New()
	if path != "" {
		v.SetConfigFile(path)
		if err := v.ReadInConfig(); err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
		return v, nil
	}
	candidates := []string{"ellm.yaml"}
	if dir, err := os.UserConfigDir(); err == nil {
		candidates = append(candidates, filepath.Join(dir, "ellm", "ellm.yaml"))
	}
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			v.SetConfigFile(c)
			if err := v.ReadInConfig(); err != nil {
				return nil, fmt.Errorf("config %s: %w", c, err)
			}
			return v, nil
		}
	}
	return v, nil
}

// ApplyConfig fills every flag of cmd that the user did not set on the
// command line from, in order, the ELLM_* environment and the config file
// (a key "<command>.<flag>" wins over a top-level "<flag>"). Options structs
// bound to the flags then hold the resolved values, so run functions never
// consult Viper themselves.
func ApplyConfig(cmd *cobra.Command, v *viper.Viper, getenv func(string) string) error {
	var firstErr error
	set := func(f *pflag.Flag, val, source string) {
		if err := f.Value.Set(val); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("--%s from %s: %w", f.Name, source, err)
		}
	}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed || f.Name == "help" || f.Name == "config" {
			return
		}
		if val := getenv(EnvName(f.Name)); val != "" {
			set(f, val, EnvName(f.Name))
			return
		}
		for _, key := range []string{cmd.Name() + "." + f.Name, f.Name} {
			if v.IsSet(key) {
				set(f, configString(v.Get(key)), "config file key "+key)
				return
			}
		}
	})
	return firstErr
}

func configString(x any) string {
	switch t := x.(type) {
	case []any:
		parts := make([]string, len(t))
		for i, e := range t {
			parts[i] = fmt.Sprint(e)
		}
		return strings.Join(parts, ",")
	case []string:
		return strings.Join(t, ",")
	}
	return fmt.Sprint(x)
}

// PrintJSON writes v as indented JSON: the --json output of every command.
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteReport writes a command's verdict report r to w, as indented JSON
// (asJSON) or as text, then makes the exit status 1 when ok is false, so
// that scripts can test the verdict (check-cpu: deployable; inspect-weights:
// the checkpoint matches its architecture).
func WriteReport[R any](w io.Writer, r R, asJSON bool, text func(io.Writer, R) error, ok bool) error {
	var err error
	if asJSON {
		err = PrintJSON(w, r)
	} else {
		err = text(w, r)
	}
	if err != nil {
		return err
	}
	if !ok {
		return &ExitError{Code: 1}
	}
	return nil
}
