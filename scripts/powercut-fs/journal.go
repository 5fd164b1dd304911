package main

// The volatile layer. Every operation goes through to the backing directory at once, so reads see
// it without a merge; what makes it volatile is a record of each change, kept in memory until the
// change is durable. A cut undoes every change that is not durable and then lets the disk keep
// what the cut's model says it may have written before the power went (cut.go): the state a disk
// that lost its cache would show.
//
// What makes a change durable:
//   - a file's writes and changes of size: a successful fsync or fdatasync of that file;
//   - a directory's entry changes: an fsync of that directory (entries.go), or, in the ext4 model,
//     any successful fsync;
//   - with -writeback-after, age, as the kernel's flusher writes back old dirty data;
//   - nothing else. sync(2) and syncfs(2) make nothing durable here, which is stricter than a
//     kernel: FUSE sends no request for them on a mount like this one (the kernel sends
//     FUSE_SYNCFS to virtiofs only), so the file system never learns of them.
//
// A failed fsync (-fsync-eio) leaves its writes as the kernel does after a writeback error: still
// readable, no longer dirty, and so never written by a later fsync that reports success
// ("fsyncgate"); the disk holds them only if it happened to write them before the failure. As
// Linux has since 4.13 (errseq), the failure is also reported once to every other descriptor of
// the file that was open when it happened, at that descriptor's next fsync. A lying
// flush (-lying-flush) reports success at once and makes durable only a while later.

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// state is how far a change got towards the disk.
type state uint8

const (
	// pending: in the cache only; a cut loses it unless the cut's model lets the disk keep it.
	pending state = iota
	// failed: its fsync failed. The kernel marked it written, so no later fsync writes it.
	failed
	// durable: on the disk. Kept in the record only while an earlier change of its file is not.
	durable
)

// contentChange is one change to a file's bytes or size that is not known to be durable.
type contentChange struct {
	seq     uint64
	at      time.Time
	offset  int64
	old     []byte // the bytes it overwrote, to put back
	oldSize int64
	data    []byte // a write's bytes; nil for a change of size
	newSize int64  // a change of size: the size it set
	state   state
	// durableAt is when a lying flush that acknowledged it really makes it durable (zero: never
	// acknowledged by one).
	durableAt time.Time
}

func (c *contentChange) isWrite() bool { return c.data != nil }

// isDurable says whether the change is on the disk at now.
func (c *contentChange) isDurable(now time.Time) bool {
	return c.state == durable || (c.state == pending && !c.durableAt.IsZero() && !now.Before(c.durableAt))
}

// pendingFile holds a file's changes since the disk last held all of it, and a descriptor of the
// journal's own, so they can be read and undone whatever the file is called by then and however
// its caller opened it.
type pendingFile struct {
	fd      int
	changes []contentChange
}

// faults are the failures the disk is set to produce, drawn from one seeded generator.
type faults struct {
	random   *rand.Rand
	fsyncEIO float64       // chance that an fsync with something to write fails with EIO
	enospc   float64       // chance that a write or allocation that grows a file fails with ENOSPC
	lie      time.Duration // a lying flush: fsync succeeds at once, durable only this much later
	// failDirs, failFiles: how many of the next directory fsyncs with entries to commit, and file
	// fsyncs with writes to make durable, fail with EIO (the control command fail-fsync), whatever
	// the draws say.
	failDirs, failFiles int
	// How often each fault was produced since the mount.
	fsyncEIOs, enospcs int
}

func (f *faults) draw(chance float64) bool {
	return chance > 0 && f.random.Float64() < chance
}

// fsyncFails draws whether an fsync with something to make durable fails with EIO; failNext is
// the count of the next such fsyncs set to fail.
func (f *faults) fsyncFails(failNext *int) bool {
	if *failNext > 0 {
		*failNext--
		return true
	}
	return f.draw(f.fsyncEIO)
}

type journal struct {
	mu      sync.Mutex
	seq     uint64
	files   map[uint64]*pendingFile // by backing inode number
	entries []*entryChange          // not durable yet, in the order they were made
	dirs    map[uint64]*dirRef      // directories the pending entry changes name, by inode number
	cut     bool
	root    string // the backing directory, for the labels of entry changes
	trash   string
	trashN  uint64
	// fsyncCommitsEntries models ext4's journal: any fsync commits the running transaction, which
	// holds every entry change made so far, in any directory.
	fsyncCommitsEntries bool
	faults              faults
	now                 func() time.Time
	// writebackErrors counts, by backing inode number, the fsyncs of the file that failed: a
	// descriptor reports the ones made since it was opened (or last reported) at its next fsync.
	writebackErrors map[uint64]uint64
}

func newJournal(root, trash string, fsyncCommitsEntries bool, f faults) *journal {
	if f.random == nil {
		f.random = rand.New(rand.NewPCG(0, 0))
	}
	return &journal{
		files:               map[uint64]*pendingFile{},
		writebackErrors:     map[uint64]uint64{},
		dirs:                map[uint64]*dirRef{},
		root:                root,
		trash:               trash,
		fsyncCommitsEntries: fsyncCommitsEntries,
		faults:              f,
		now:                 time.Now,
	}
}

func (j *journal) next() uint64 {
	j.seq++
	return j.seq
}

// fileFor returns the record of the file open at fd, starting one when there is none, and its size.
func (j *journal) fileFor(fd int) (*pendingFile, int64, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, 0, err
	}
	pf := j.files[st.Ino]
	if pf == nil {
		// A new open file description, read-write: the caller's may be write-only (the old bytes
		// must be read) or read-only (a fallocate through it).
		own, err := syscall.Open(fmt.Sprintf("/proc/self/fd/%d", fd), syscall.O_RDWR|syscall.O_CLOEXEC, 0)
		if err != nil {
			return nil, 0, err
		}
		pf = &pendingFile{fd: own}
		j.files[st.Ino] = pf
	}
	return pf, st.Size, nil
}

// oldBytes reads what [offset, end) holds now, within size.
func oldBytes(pf *pendingFile, offset, end, size int64) ([]byte, error) {
	end = min(end, size)
	if offset >= end {
		return nil, nil
	}
	old := make([]byte, end-offset)
	if _, err := syscall.Pread(pf.fd, old, offset); err != nil {
		return nil, err
	}
	return old, nil
}

// write records and makes a write of data at offset through fd. Called with mu held.
func (j *journal) write(fd int, data []byte, offset int64) (int, error) {
	pf, size, err := j.fileFor(fd)
	if err != nil {
		return 0, err
	}
	if offset+int64(len(data)) > size && j.faults.draw(j.faults.enospc) {
		j.faults.enospcs++
		j.forgetIfClean(fd, pf)
		return 0, syscall.ENOSPC
	}
	old, err := oldBytes(pf, offset, offset+int64(len(data)), size)
	if err != nil {
		j.forgetIfClean(fd, pf)
		return 0, err
	}
	written, err := syscall.Pwrite(fd, data, offset)
	if written > 0 {
		kept := data[:written]
		if int64(len(old)) > int64(written) {
			old = old[:written]
		}
		pf.changes = append(pf.changes, contentChange{seq: j.next(), at: j.now(), offset: offset, old: old, oldSize: size, data: append([]byte{}, kept...), newSize: max(size, offset+int64(written))})
	}
	j.forgetIfClean(fd, pf)
	return written, err
}

// recordResize keeps what a change of size to newSize will cut off. Called with mu held.
func (j *journal) recordResize(fd int, newSize int64) error {
	pf, size, err := j.fileFor(fd)
	if err != nil {
		return err
	}
	old, err := oldBytes(pf, newSize, size, size)
	if err != nil {
		j.forgetIfClean(fd, pf)
		return err
	}
	pf.changes = append(pf.changes, contentChange{seq: j.next(), at: j.now(), offset: newSize, old: old, oldSize: size, newSize: newSize})
	return nil
}

// allocate records and makes an fallocate through fd. Only plain allocation, with or without
// FALLOC_FL_KEEP_SIZE, is offered: punching or zeroing a range would need its old bytes kept.
func (j *journal) allocate(fd int, mode uint32, offset, length int64) error {
	const keepSize = 0x01
	if mode&^keepSize != 0 {
		return syscall.EOPNOTSUPP
	}
	pf, size, err := j.fileFor(fd)
	if err != nil {
		return err
	}
	grows := mode&keepSize == 0 && offset+length > size
	if offset+length > size && j.faults.draw(j.faults.enospc) {
		j.faults.enospcs++
		j.forgetIfClean(fd, pf)
		return syscall.ENOSPC
	}
	if grows {
		if err := j.recordResize(fd, offset+length); err != nil {
			j.forgetIfClean(fd, pf)
			return err
		}
	}
	err = syscall.Fallocate(fd, mode, offset, length)
	if err != nil && grows {
		pf.changes = pf.changes[:len(pf.changes)-1]
	}
	j.forgetIfClean(fd, pf)
	return err
}

// fsyncFile is an fsync of the file open at fd: its pending changes become durable, or, with the
// faults set, fail with EIO or are acknowledged by a lying flush. Called with mu held.
func (j *journal) fsyncFile(fd int) error {
	if err := syscall.Fsync(fd); err != nil {
		return err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return err
	}
	now := j.now()
	if pf := j.files[st.Ino]; pf != nil && hasPending(pf, now) {
		if j.faults.fsyncFails(&j.faults.failFiles) {
			j.faults.fsyncEIOs++
			j.writebackErrors[st.Ino]++
			// The kernel's writeback failed: the pages stay readable but count as written.
			for i := range pf.changes {
				if c := &pf.changes[i]; c.state == pending && c.isWrite() && !c.isDurable(now) {
					c.state = failed
				}
			}
			j.forget(st.Ino, now)
			return syscall.EIO
		}
		for i := range pf.changes {
			if c := &pf.changes[i]; c.state == pending {
				j.settle(&c.state, &c.durableAt, now)
			}
		}
		j.forget(st.Ino, now)
	}
	if j.fsyncCommitsEntries {
		j.commitAllEntries(now)
	}
	return nil
}

// fsyncDescriptor is an fsync through an open file description that has reported `seen` of its
// file's failed fsyncs: besides its own failure, it reports once (EIO) any other descriptor's since
// then, as Linux does. Called with mu held.
func (j *journal) fsyncDescriptor(fd int, seen *uint64) error {
	err := j.fsyncFile(fd)
	failed, statErr := j.failedFsyncs(fd)
	if statErr != nil || *seen == failed {
		return err
	}
	*seen = failed
	if err == nil {
		return syscall.EIO
	}
	return err
}

// failedFsyncs is how many fsyncs of the file open at fd have failed: a descriptor opened now
// reports none of them. Called with mu held.
func (j *journal) failedFsyncs(fd int) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return 0, err
	}
	return j.writebackErrors[st.Ino], nil
}

// settle makes a change durable, or, behind a lying flush, durable a while from now.
func (j *journal) settle(s *state, durableAt *time.Time, now time.Time) {
	if j.faults.lie == 0 {
		*s = durable
	} else if durableAt.IsZero() {
		*durableAt = now.Add(j.faults.lie)
	}
}

// hasPending says whether the file has a change in the cache that an fsync would write.
func hasPending(pf *pendingFile, now time.Time) bool {
	for i := range pf.changes {
		if c := &pf.changes[i]; c.state == pending && !c.isDurable(now) && c.durableAt.IsZero() {
			return true
		}
	}
	return false
}

// forget drops the durable changes at the start of a file's record (nothing before them needs
// undoing), and the record once it is empty.
func (j *journal) forget(ino uint64, now time.Time) {
	pf := j.files[ino]
	n := 0
	for n < len(pf.changes) && pf.changes[n].isDurable(now) {
		n++
	}
	pf.changes = pf.changes[n:]
	if len(pf.changes) == 0 {
		syscall.Close(pf.fd)
		delete(j.files, ino)
	}
}

// forgetIfClean drops a record that a failed change left empty: every record has a change.
func (j *journal) forgetIfClean(fd int, pf *pendingFile) {
	if len(pf.changes) > 0 {
		return
	}
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) == nil && j.files[st.Ino] == pf {
		syscall.Close(pf.fd)
		delete(j.files, st.Ino)
	}
}

// asideName is a fresh name in the trash directory for a file an unlink or rename displaced.
func (j *journal) asideName() string {
	j.trashN++
	return filepath.Join(j.trash, fmt.Sprintf("%d", j.trashN))
}

// pendingStatus counts what is not durable yet (or, for a writeback, what it made durable).
type pendingStatus struct {
	Files   int  `json:"files"`
	Changes int  `json:"changes"`
	Entries int  `json:"entries"`
	Cut     bool `json:"cut"`
}

func (j *journal) status() pendingStatus {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.now()
	s := pendingStatus{Cut: j.cut}
	for _, pf := range j.files {
		changes := 0
		for i := range pf.changes {
			if !pf.changes[i].isDurable(now) {
				changes++
			}
		}
		if changes > 0 {
			s.Files++
			s.Changes += changes
		}
	}
	for _, e := range j.entries {
		if !e.isDurable(now) {
			s.Entries++
		}
	}
	return s
}

// writeBack makes every pending change durable, as the kernel's periodic writeback and a file
// system's journal commit do with data older than half a minute or so. Writes whose fsync failed
// stay as they are: the kernel no longer counts them as dirty.
// failNextFsyncs makes the next n directory fsyncs that have entries to commit (dirs) or file
// fsyncs that have writes to make durable fail with EIO: a failure a test places where it wants it.
func (j *journal) failNextFsyncs(dirs bool, n int) map[string]int {
	j.mu.Lock()
	defer j.mu.Unlock()
	if dirs {
		j.faults.failDirs = n
		return map[string]int{"failDirFsyncs": n}
	}
	j.faults.failFiles = n
	return map[string]int{"failFileFsyncs": n}
}

func (j *journal) writeBack() pendingStatus {
	return j.writeBackOlder(0)
}

// writeBackOlder makes durable what has been pending for at least age, as the kernel's flusher
// does with dirty data older than vm.dirty_expire_centisecs: a file whose first pending change is
// that old is written whole (the kernel's inode dirtied_when), and entry changes that old are
// committed, oldest first. It answers with what it made durable.
func (j *journal) writeBackOlder(age time.Duration) pendingStatus {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := pendingStatus{Cut: j.cut}
	if j.cut {
		return s
	}
	now := j.now()
	limit := now.Add(-age)
	for ino, pf := range j.files {
		first := -1
		for i := range pf.changes {
			if c := &pf.changes[i]; c.state == pending && !c.isDurable(now) {
				first = i
				break
			}
		}
		if first < 0 || pf.changes[first].at.After(limit) {
			continue
		}
		s.Files++
		for i := range pf.changes {
			if c := &pf.changes[i]; c.state == pending && !c.isDurable(now) {
				c.state = durable
				s.Changes++
			}
		}
		j.forget(ino, now)
	}
	s.Entries = j.commitEntriesOlder(limit, now)
	return s
}
