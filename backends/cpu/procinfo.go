package cpu

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// memInfo returns MemAvailable and MemTotal from /proc/meminfo in bytes,
// or -1 for what it cannot read (on systems without /proc, both).
func memInfo() (free, total int64, err error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return -1, -1, nil
	}
	return parseMemInfo(data)
}

// parseMemInfo reads the "MemAvailable:" and "MemTotal:" lines (in kB).
func parseMemInfo(data []byte) (free, total int64, err error) {
	free, total = -1, -1
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch name {
		case "MemAvailable":
			dst = &free
		case "MemTotal":
			dst = &total
		default:
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, perr := strconv.ParseInt(f[0], 10, 64)
		if perr != nil || v < 0 {
			continue
		}
		mult := int64(1)
		if len(f) > 1 && strings.EqualFold(f[1], "kB") {
			mult = 1024
		}
		*dst = v * mult
	}
	return free, total, sc.Err()
}

// cpuModel returns the processor's model name from /proc/cpuinfo, or a
// description built from GOARCH where that is unavailable.
func cpuModel() string {
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if m := parseCPUModel(data); m != "" {
			return m
		}
	}
	return runtime.GOARCH + " host"
}

// parseCPUModel returns the first "model name" (x86, most others) or
// "Model"/"cpu model" (some ARM and MIPS kernels) of a /proc/cpuinfo text.
func parseCPUModel(data []byte) string {
	var fallback string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		if val == "" {
			continue
		}
		switch name {
		case "model name":
			return val
		case "Model", "cpu model", "Hardware":
			if fallback == "" {
				fallback = val
			}
		}
	}
	return fallback
}
