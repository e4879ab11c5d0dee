package rdmavm

import (
	"bytes"
	"os/exec"
	"testing"
)

// An archive reads back with cpio(1): every entry, its parents first, and
// a file's bytes; its length is a multiple of 512.
func TestArchive(t *testing.T) {
	var b bytes.Buffer
	a := newArchive(&b)
	a.text("/a/b/file", 0o644, "hello\n")
	a.text("/a/b/file", 0o644, "written once") // a second write of a path is dropped
	a.symlink("/lib", "usr/lib")
	a.charDev("/dev/console", 0o600, 5, 1)
	a.text("/a/odd", 0o755, "")
	if err := a.close(); err != nil {
		t.Fatal(err)
	}
	if b.Len()%512 != 0 {
		t.Errorf("archive of %d bytes, not a multiple of 512", b.Len())
	}
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Skip(err)
	}
	cmd := exec.Command("cpio", "-it", "--quiet")
	cmd.Stdin = bytes.NewReader(b.Bytes())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cpio -it: %v", err)
	}
	want := "a\na/b\na/b/file\nlib\ndev\ndev/console\na/odd\n"
	if string(out) != want {
		t.Errorf("cpio -it lists\n%s\nwant\n%s", out, want)
	}
	cmd = exec.Command("cpio", "-i", "--quiet", "--to-stdout", "a/b/file")
	cmd.Stdin = bytes.NewReader(b.Bytes())
	out, err = cmd.Output()
	if err != nil || string(out) != "hello\n" {
		t.Errorf("a/b/file reads %q, %v; want %q", out, err, "hello\n")
	}
}

func TestGuestPath(t *testing.T) {
	for in, want := range map[string]string{
		"/lib/x86_64-linux-gnu/libc.so.6": "/usr/lib/x86_64-linux-gnu/libc.so.6",
		"/lib64/ld-linux-x86-64.so.2":     "/usr/lib64/ld-linux-x86-64.so.2",
		"/bin/sh":                         "/usr/bin/sh",
		"/sbin//ip":                       "/usr/sbin/ip",
		"/library/x":                      "/library/x",
		"/usr/lib/x":                      "/usr/lib/x",
		"/opt/x":                          "/opt/x",
	} {
		if got := guestPath(in); got != want {
			t.Errorf("guestPath(%q) = %q, want %q", in, got, want)
		}
	}
	if s := lastLines("a\n\nb\r\nc\n\n", 2); s != "b | c" {
		t.Errorf("lastLines = %q", s)
	}
}
