//go:build linux

package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestScanAndShm checks how a repetition finds the processes of a job and
// the /dev/shm entries they use: a process with the job's marker in its
// environment that holds a file of /dev/shm open is listed, and so is the
// file; one without the marker is not.
func TestScanAndShm(t *testing.T) {
	if _, err := os.Stat("/dev/shm"); err != nil {
		t.Skipf("no /dev/shm here: %v", err)
	}
	marker := fmt.Sprintf("test.%d", os.Getpid())
	file := fmt.Sprintf("/dev/shm/xpu-chaos-test-%d", os.Getpid())
	t.Cleanup(func() { _ = os.Remove(file) })
	start := func(env ...string) *exec.Cmd {
		cmd := exec.Command("sh", "-c", `exec 3>"$1"; read x`, "sh", file)
		cmd.Env = append(os.Environ(), env...)
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = in.Close()
			_ = cmd.Wait()
		})
		return cmd
	}
	other := start()
	w := watchShm(marker)
	job := start(envJob+"="+marker, envRole+"="+roleRank)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(strings.Join(shmUsed(job.Process.Pid), " "), file) {
		if time.Now().After(deadline) {
			t.Fatalf("the process never held %s open", file)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(3 * shmPoll)
	used := w.stop()
	if len(used) != 1 || used[0] != file {
		t.Errorf("the watch saw %q, want [%s]", used, file)
	}
	ps := scan(marker)
	if len(ps) != 1 || ps[0].pid != job.Process.Pid || ps[0].role != "sh" {
		t.Errorf("scan found %v, want pid %d (sh) alone (not %d)", ps, job.Process.Pid, other.Process.Pid)
	}
}
