package configs_test

import (
	"testing"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/ellm-dev/ellm/configs"
	"github.com/ellm-dev/ellm/pkg/cmd/root"
	"github.com/ellm-dev/ellm/pkg/cmdutil"
)

// Every key of the example config must be a flag: at the top level a flag of
// some command, in a command's section a flag of that command.
func TestExampleKeysAreFlags(t *testing.T) {
	var m map[string]any
	if err := yaml.Unmarshal([]byte(configs.Example), &m); err != nil {
		t.Fatal(err)
	}
	cmd := root.NewCmdRoot(cmdutil.System("test"))
	anyFlag := map[string]bool{}
	perCommand := map[string]map[string]bool{}
	for _, sub := range cmd.Commands() {
		flags := map[string]bool{}
		sub.Flags().VisitAll(func(f *pflag.Flag) { flags[f.Name], anyFlag[f.Name] = true, true })
		perCommand[sub.Name()] = flags
	}
	for key, val := range m {
		section, isSection := val.(map[string]any)
		if !isSection {
			if !anyFlag[key] {
				t.Errorf("top-level key %q is no command's flag", key)
			}
			continue
		}
		flags, ok := perCommand[key]
		if !ok {
			t.Errorf("section %q is not a command", key)
			continue
		}
		for k := range section {
			if !flags[k] {
				t.Errorf("key %s.%s is not a flag of %s", key, k, key)
			}
		}
	}
}
