package rdmavm

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
)

// archive writes an uncompressed cpio archive in the "newc" format, the one
// the kernel unpacks into its initial root file system. The kernel creates
// no directory on its own, so archive writes every missing parent of an
// entry before it. Entries carry uid and gid 0 and mtime 0, so the same
// files give the same bytes.
//
// A write error sticks: later calls do nothing and close returns it.
type archive struct {
	w    *bufio.Writer
	n    int64           // bytes written
	ino  uint32          // the last inode number given
	seen map[string]bool // paths written, directories included
	err  error
}

// Mode bits of a newc header.
const (
	cpioType    = 0o170000
	cpioDir     = 0o040000
	cpioFile    = 0o100000
	cpioSymlink = 0o120000
	cpioChar    = 0o020000
)

func newArchive(w io.Writer) *archive {
	return &archive{w: bufio.NewWriterSize(w, 1<<20), seen: map[string]bool{}}
}

// dir writes directory name and its missing parents.
func (a *archive) dir(name string) {
	if name == "/" || a.seen[name] {
		return
	}
	a.dir(path.Dir(name))
	a.seen[name] = true
	a.header(name, cpioDir|0o755, 0)
}

// symlink writes a symbolic link at name that points to target.
func (a *archive) symlink(name, target string) {
	if a.seen[name] {
		return
	}
	a.dir(path.Dir(name))
	a.seen[name] = true
	a.header(name, cpioSymlink|0o777, int64(len(target)))
	a.write([]byte(target))
	a.pad()
}

// charDev writes the character device node name, with numbers major and
// minor.
func (a *archive) charDev(name string, perm fs.FileMode, major, minor uint32) {
	if a.seen[name] {
		return
	}
	a.dir(path.Dir(name))
	a.seen[name] = true
	a.headerDev(name, cpioChar|uint32(perm.Perm()), 0, major, minor)
}

// text writes a regular file at name holding s.
func (a *archive) text(name string, perm fs.FileMode, s string) {
	a.file(name, perm, strings.NewReader(s), int64(len(s)))
}

// hostFile writes the host file src (its symbolic links followed) at name,
// with its permission bits.
func (a *archive) hostFile(name, src string) {
	if a.err != nil || a.seen[name] {
		return
	}
	f, err := os.Open(src)
	if err != nil {
		a.err = err
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		a.err = err
		return
	}
	if !st.Mode().IsRegular() {
		a.err = fmt.Errorf("%s is not a regular file", src)
		return
	}
	a.file(name, st.Mode().Perm(), f, st.Size())
}

// file writes a regular file at name with size bytes read from r.
func (a *archive) file(name string, perm fs.FileMode, r io.Reader, size int64) {
	if a.err != nil || a.seen[name] {
		return
	}
	a.dir(path.Dir(name))
	a.seen[name] = true
	a.header(name, cpioFile|uint32(perm.Perm()), size)
	if a.err != nil {
		return
	}
	n, err := io.Copy(a.w, io.LimitReader(r, size))
	a.n += n
	if err == nil && n != size {
		err = fmt.Errorf("%s: read %d of %d bytes", name, n, size)
	}
	if err != nil {
		a.err = err
		return
	}
	a.pad()
}

// close writes the trailer, pads the archive to a multiple of 512 bytes
// (the kernel skips the zeros between concatenated archives) and flushes.
func (a *archive) close() error {
	a.header("TRAILER!!!", 0, 0)
	if a.err == nil && a.n%512 != 0 {
		a.write(make([]byte, 512-a.n%512))
	}
	if a.err == nil {
		a.err = a.w.Flush()
	}
	return a.err
}

func (a *archive) header(name string, mode uint32, size int64) {
	a.headerDev(name, mode, size, 0, 0)
}

// headerDev writes the header of an entry, with the device numbers of a
// device node, and its name.
func (a *archive) headerDev(name string, mode uint32, size int64, major, minor uint32) {
	if a.err != nil {
		return
	}
	if size > 0xffffffff {
		a.err = fmt.Errorf("%s: %d bytes is too large for a cpio archive", name, size)
		return
	}
	name = strings.TrimPrefix(name, "/")
	a.ino++
	nlink := 1
	if mode&cpioType == cpioDir {
		nlink = 2
	}
	// magic, ino, mode, uid, gid, nlink, mtime, filesize, devmajor,
	// devminor, rdevmajor, rdevminor, namesize (with its NUL), check.
	h := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		a.ino, mode, 0, 0, nlink, 0, size, 0, 0, major, minor, len(name)+1, 0)
	a.write([]byte(h))
	a.write([]byte(name))
	a.write([]byte{0})
	a.pad()
}

func (a *archive) write(b []byte) {
	if a.err != nil {
		return
	}
	n, err := a.w.Write(b)
	a.n += int64(n)
	a.err = err
}

// pad writes zeros up to the next multiple of 4 bytes.
func (a *archive) pad() {
	if r := a.n % 4; r != 0 {
		a.write(make([]byte, 4-r))
	}
}
