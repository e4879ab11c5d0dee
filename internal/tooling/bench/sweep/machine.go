package sweep

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// DescribeMachine returns what this machine is: its CPU model, cores,
// memory, operating system, kernel and Go version (the backends and
// references are the caller's to fill in). What it cannot read is left
// empty.
func DescribeMachine() Machine {
	m := Machine{
		Cores:     runtime.NumCPU(),
		OS:        runtime.GOOS + "/" + runtime.GOARCH,
		GoVersion: runtime.Version(),
	}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPU = field(data, "model name", ':')
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		// "MemTotal:       24589412 kB"
		if f := strings.Fields(field(data, "MemTotal", ':')); len(f) == 2 && f[1] == "kB" {
			if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				m.MemoryBytes = kb << 10
			}
		}
	}
	if data, err := os.ReadFile("/etc/os-release"); err == nil {
		if name := strings.Trim(field(data, "PRETTY_NAME", '='), `"`); name != "" {
			m.OS += " (" + name + ")"
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	if m.CPU == "" {
		m.CPU = runtime.GOARCH
	}
	return m
}

// field returns the value of the first line of data that reads "key<sep>
// value", trimmed.
func field(data []byte, key string, sep byte) string {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), string(sep))
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// OpenMPIVersion returns the version mpirun reports ("Open MPI 4.1.6"),
// or an error when there is no mpirun or it does not say.
func OpenMPIVersion(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "mpirun", "--version").Output()
	if err != nil {
		return "", err
	}
	// "mpirun (Open MPI) 4.1.6"
	first, _, _ := strings.Cut(string(out), "\n")
	if i := strings.Index(first, "(Open MPI)"); i >= 0 {
		return "Open MPI " + strings.TrimSpace(first[i+len("(Open MPI)"):]), nil
	}
	return strings.TrimSpace(first), nil
}
