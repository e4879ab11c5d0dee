package procs_test

import "golang.org/x/sys/unix"

// memfdCreate makes the anonymous memory file of one allocation of the
// device double.
func memfdCreate(name string) (int, error) { return unix.MemfdCreate(name, unix.MFD_CLOEXEC) }

// devSpaceMissing says why the device double cannot run here: "" on Linux.
const devSpaceMissing = ""
