package main

// The file system's nodes: go-fuse's loopback, with every change that a power cut could lose
// recorded in the journal as it is made.

import (
	"context"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

type node struct {
	fs.LoopbackNode
	j *journal
}

func newRoot(backing string, j *journal) (fs.InodeEmbedder, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, err
	}
	root := &fs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev)}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, j: j}
	}
	rootNode := &node{LoopbackNode: fs.LoopbackNode{RootData: root}, j: j}
	root.RootNode = rootNode
	return rootNode, nil
}

// dir is the node's backing path: the directory its entry changes are in.
func (n *node) dir() string {
	return filepath.Join(n.RootData.Path, n.Path(nil))
}

// lock takes the journal for one change; after a cut every change fails, as on a dead disk.
func (n *node) lock() syscall.Errno {
	n.j.mu.Lock()
	if n.j.cut {
		n.j.mu.Unlock()
		return syscall.EIO
	}
	return 0
}

// change runs fn with the journal taken.
func (n *node) change(fn func() error) syscall.Errno {
	if errno := n.lock(); errno != 0 {
		return errno
	}
	defer n.j.mu.Unlock()
	return fs.ToErrno(fn())
}

// changeFile runs fn on the backing descriptor of the open file f with the journal taken.
func (n *node) changeFile(f fs.FileHandle, fn func(fd int) error) syscall.Errno {
	return n.change(func() error {
		fd, err := fdOf(f)
		if err != nil {
			return err
		}
		return fn(fd)
	})
}

// resize records the node's file cut or grown to size, then lets the loopback apply the change
// under the same lock (f may be nil: the file is opened by its path).
func (n *node) resize(f fs.FileHandle, size int64, apply func() syscall.Errno) syscall.Errno {
	return n.change(func() error {
		if err := n.withPathFd(f, func(fd int) error { return n.j.recordResize(fd, size) }); err != nil {
			return err
		}
		if errno := apply(); errno != 0 {
			return errno
		}
		return nil
	})
}

// file is a loopback file the kernel may not bypass: with FUSE passthrough, writes would go to
// the backing file without the journal seeing them.
type file struct {
	*fs.LoopbackFile
	// seenFailures: the file's failed fsyncs this descriptor has reported, or that were before it
	// was opened (journal.fsyncDescriptor).
	seenFailures uint64
}

func (f *file) PassthroughFd() (int, bool) {
	return 0, false
}

// wrap makes an opened loopback file one of ours; the journal must be held.
func (n *node) wrap(fh fs.FileHandle) fs.FileHandle {
	lf, ok := fh.(*fs.LoopbackFile)
	if !ok {
		return fh
	}
	f := &file{LoopbackFile: lf}
	if fd, err := fdOf(f); err == nil {
		f.seenFailures, _ = n.j.failedFsyncs(fd)
	}
	return f
}

// fdOf is the backing descriptor of an open file.
func fdOf(f fs.FileHandle) (int, error) {
	lf, ok := f.(*file)
	if !ok {
		return 0, syscall.EBADF
	}
	fd, _ := lf.LoopbackFile.PassthroughFd()
	return fd, nil
}

// withPathFd runs fn on a descriptor of the node's backing file when no handle came with the call.
func (n *node) withPathFd(f fs.FileHandle, fn func(fd int) error) error {
	if fd, err := fdOf(f); err == nil {
		return fn(fd)
	}
	fd, err := syscall.Open(n.dir(), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	return fn(fd)
}

var _ = (fs.NodeWriter)((*node)(nil))

func (n *node) Write(ctx context.Context, f fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	var written int
	errno := n.changeFile(f, func(fd int) (err error) {
		written, err = n.j.write(fd, data, off)
		return err
	})
	return uint32(written), errno
}

var _ = (fs.NodeWritever)((*node)(nil))

func (n *node) Writev(ctx context.Context, f fs.FileHandle, data [][]byte, off int64) (uint32, syscall.Errno) {
	var joined []byte
	for _, part := range data {
		joined = append(joined, part...)
	}
	return n.Write(ctx, f, joined, off)
}

var _ = (fs.NodeFsyncer)((*node)(nil))

func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	return n.changeFile(f, func(fd int) error {
		if of, ok := f.(*file); ok {
			return n.j.fsyncDescriptor(fd, &of.seenFailures)
		}
		return n.j.fsyncFile(fd)
	})
}

var _ = (fs.NodeSetattrer)((*node)(nil))

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	size, resizes := in.GetSize()
	if !resizes {
		return n.LoopbackNode.Setattr(ctx, f, in, out)
	}
	return n.resize(f, int64(size), func() syscall.Errno { return n.LoopbackNode.Setattr(ctx, f, in, out) })
}

var _ = (fs.NodeAllocater)((*node)(nil))

func (n *node) Allocate(ctx context.Context, f fs.FileHandle, off uint64, size uint64, mode uint32) syscall.Errno {
	return n.changeFile(f, func(fd int) error { return n.j.allocate(fd, mode, int64(off), int64(size)) })
}

var _ = (fs.NodeCopyFileRanger)((*node)(nil))

// CopyFileRange is refused so the kernel copies through Write, which the journal sees.
func (n *node) CopyFileRange(ctx context.Context, fhIn fs.FileHandle, offIn uint64, out *fs.Inode, fhOut fs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	return 0, syscall.ENOSYS
}

var _ = (fs.NodeTmpfiler)((*node)(nil))

// Tmpfile (O_TMPFILE) is refused: a file without a name could be linked in later by a descriptor
// the journal never sees. Callers fall back to a named temporary file.
func (n *node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}

var _ = (fs.NodeOpener)((*node)(nil))

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_TRUNC == 0 {
		fh, fuseFlags, errno := n.LoopbackNode.Open(ctx, flags)
		n.j.mu.Lock()
		defer n.j.mu.Unlock()
		return n.wrap(fh), fuseFlags, errno
	}
	var fh fs.FileHandle
	var fuseFlags uint32
	errno := n.resize(nil, 0, func() (errno syscall.Errno) {
		fh, fuseFlags, errno = n.LoopbackNode.Open(ctx, flags)
		fh = n.wrap(fh)
		return errno
	})
	return fh, fuseFlags, errno
}

var _ = (fs.NodeCreater)((*node)(nil))

func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if errno := n.lock(); errno != 0 {
		return nil, nil, 0, errno
	}
	defer n.j.mu.Unlock()
	p := filepath.Join(n.dir(), name)
	_, statErr := os.Lstat(p)
	existed := statErr == nil
	if existed && flags&syscall.O_TRUNC != 0 && flags&syscall.O_EXCL == 0 {
		fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err == nil {
			err = n.j.recordResize(fd, 0)
			syscall.Close(fd)
		}
		if err != nil {
			return nil, nil, 0, fs.ToErrno(err)
		}
	}
	inode, fh, fuseFlags, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno == 0 && !existed {
		if err := n.j.added("create", n.dir(), name); err != nil {
			return nil, nil, 0, fs.ToErrno(err)
		}
	}
	return inode, n.wrap(fh), fuseFlags, errno
}

// add makes a new name with the loopback's make and records it.
func (n *node) add(kind, name string, make func() (*fs.Inode, syscall.Errno)) (*fs.Inode, syscall.Errno) {
	if errno := n.lock(); errno != 0 {
		return nil, errno
	}
	defer n.j.mu.Unlock()
	inode, errno := make()
	if errno == 0 {
		errno = fs.ToErrno(n.j.added(kind, n.dir(), name))
	}
	return inode, errno
}

var _ = (fs.NodeMkdirer)((*node)(nil))

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.add("mkdir", name, func() (*fs.Inode, syscall.Errno) { return n.LoopbackNode.Mkdir(ctx, name, mode, out) })
}

var _ = (fs.NodeMknoder)((*node)(nil))

func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.add("mknod", name, func() (*fs.Inode, syscall.Errno) { return n.LoopbackNode.Mknod(ctx, name, mode, dev, out) })
}

var _ = (fs.NodeSymlinker)((*node)(nil))

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.add("symlink", name, func() (*fs.Inode, syscall.Errno) { return n.LoopbackNode.Symlink(ctx, target, name, out) })
}

var _ = (fs.NodeLinker)((*node)(nil))

func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.add("link", name, func() (*fs.Inode, syscall.Errno) { return n.LoopbackNode.Link(ctx, target, name, out) })
}

var _ = (fs.NodeUnlinker)((*node)(nil))

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.change(func() error { return n.j.unlink(n.dir(), name) })
}

var _ = (fs.NodeRmdirer)((*node)(nil))

func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.change(func() error { return n.j.rmdir(n.dir(), name) })
}

var _ = (fs.NodeRenamer)((*node)(nil))

const renameNoReplace = 1

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	to, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if flags&^renameNoReplace != 0 {
		return syscall.EINVAL
	}
	return n.change(func() error { return n.j.rename(n.dir(), name, to.dir(), newName, flags&renameNoReplace != 0) })
}

var _ = (fs.NodeOpendirHandler)((*node)(nil))

func (n *node) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	inner, fuseFlags, errno := n.LoopbackNode.OpendirHandle(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return &dirHandle{inner: inner, n: n}, fuseFlags, 0
}

// dirHandle is an open directory whose fsync makes its entry changes durable.
type dirHandle struct {
	inner fs.FileHandle
	n     *node
}

func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	return d.inner.(fs.FileReaddirenter).Readdirent(ctx)
}

func (d *dirHandle) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	return d.inner.(fs.FileSeekdirer).Seekdir(ctx, off)
}

func (d *dirHandle) Releasedir(ctx context.Context, flags uint32) {
	d.inner.(fs.FileReleasedirer).Releasedir(ctx, flags)
}

func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	return d.n.change(func() error {
		if errno := d.inner.(fs.FileFsyncdirer).Fsyncdir(ctx, flags); errno != 0 {
			return errno
		}
		return d.n.j.fsyncDir(d.n.dir())
	})
}
