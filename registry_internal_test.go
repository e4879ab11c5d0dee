package xpu

import (
	"os"
	"path"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/xpu-go/xpu/internal/jobenv"
)

// The table of this module's backends, which says which import links a
// backend a program lacks, names every backend of the tree with its
// package, and nothing else: each directory of backends/ that registers a
// driver (a file calling Register with the package's Name constant) under
// its Name, and each alias registered beside it.
func TestInTreeMatchesTheTree(t *testing.T) {
	entries, err := os.ReadDir("backends")
	require.NoError(t, err)
	constName := regexp.MustCompile(`(?m)^\s*(?:const\s+)?(\w+)\s*=\s*"([^"]+)"`)
	found := map[string]string{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := path.Join("backends", e.Name())
		files, err := os.ReadDir(dir)
		require.NoError(t, err)
		var src string
		for _, f := range files {
			if b, err := os.ReadFile(path.Join(dir, f.Name())); err == nil && path.Ext(f.Name()) == ".go" {
				src += string(b) + "\n"
			}
		}
		consts := map[string]string{}
		for _, m := range constName.FindAllStringSubmatch(src, -1) {
			consts[m[1]] = m[2]
		}
		for _, m := range regexp.MustCompile(`xpu\.Register\((\w+),`).FindAllStringSubmatch(src, -1) {
			found[consts[m[1]]] = module + "/" + dir
		}
		for _, m := range regexp.MustCompile(`xpu\.RegisterAlias\((\w+),`).FindAllStringSubmatch(src, -1) {
			found[consts[m[1]]] = module + "/" + dir
		}
	}
	require.NotEmpty(t, found, "no driver found below backends/")
	assert.NotContains(t, found, "", "a Register whose name is no constant of its package")
	assert.Equal(t, found, inTree)
}

// EnvBackend, written out for go doc's readers, is the name the launchers
// (package internal/jobenv) set and read.
func TestEnvBackendIsTheLaunchersName(t *testing.T) {
	assert.Equal(t, jobenv.Backend, EnvBackend)
}

// Derived, written out for go doc's readers, names the capabilities that
// CapabilitiesOf derives, in its order.
func TestDerivedInTheOrderOfDerivations(t *testing.T) {
	var names []string
	for _, d := range derivations {
		names = append(names, d.name)
	}
	assert.Equal(t, names, Derived)
}
