package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// processors returns the processors the calling thread may run on, in
// byTopology's order, from the topology of /sys. Where it cannot be read, a
// processor sorts as a core of its own (its number).
func processors() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("the processors this process may run on: %w", err)
	}
	var cs []cpuPlace
	for id := 0; id < len(set)*64; id++ {
		if set.IsSet(id) {
			dir := filepath.Join("/sys/devices/system/cpu", "cpu"+strconv.Itoa(id), "topology")
			pkg, ok1 := readInt(filepath.Join(dir, "physical_package_id"))
			core, ok2 := readInt(filepath.Join(dir, "core_id"))
			if !ok1 || !ok2 {
				pkg, core = 0, id
			}
			cs = append(cs, cpuPlace{pkg, core, id})
		}
	}
	return byTopology(cs), nil
}

// readInt reads a file that holds one integer.
func readInt(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return n, err == nil
}

// bindThread binds the calling thread, locked to its goroutine, to cpus,
// and returns the function that gives it back the set it had.
func bindThread(cpus []int) (restore func() error, err error) {
	var was, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		return nil, err
	}
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return nil, err
	}
	return func() error { return unix.SchedSetaffinity(0, &was) }, nil
}
