package main

// The volatile layer. Every operation goes through to the backing directory at once, so reads see
// it without a merge; what makes it volatile is an undo record kept in memory until the file (or,
// for a directory entry, the directory) is fsynced. A cut replays the pending records backwards,
// which leaves the backing directory as it was at the last fsyncs: the state a disk whose cache was
// lost on a power cut would show.

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// contentUndo is one change to a file's bytes or size since its last fsync.
type contentUndo struct {
	seq     uint64
	offset  int64
	old     []byte // the bytes the change overwrote, to put back
	oldSize int64
	written []byte // for writes: the new bytes, kept for a torn write
}

// pendingFile holds a file's changes since its last fsync and a descriptor of its own, so the
// changes can be undone whatever the file is called by then.
type pendingFile struct {
	fd      int
	changes []contentUndo
	// dirtiedAt is when the first pending change was made: like the kernel's inode dirtied_when,
	// it decides when age-based writeback takes the whole file.
	dirtiedAt time.Time
}

// entryUndo is one directory entry change since the fsync of the directories it touched.
type entryUndo struct {
	seq   uint64
	at    time.Time
	dirs  []string // backing-relative directories whose entries changed
	undo  func() error
	drop  func() // on commit: frees what only the undo needed (a displaced file kept aside)
	label string
}

type journal struct {
	mu      sync.Mutex
	seq     uint64
	files   map[uint64]*pendingFile // by backing inode number
	entries []entryUndo             // pending, in order: a suffix of all entry changes
	cut     bool
	trash   string
	// fsyncCommitsEntries models ext4's journal: any fsync commits the running transaction, which
	// holds every entry change made so far, in any directory.
	fsyncCommitsEntries bool
	trashN              uint64
	now                 func() time.Time
}

func newJournal(trash string, fsyncCommitsEntries bool) *journal {
	return &journal{files: map[uint64]*pendingFile{}, trash: trash, fsyncCommitsEntries: fsyncCommitsEntries, now: time.Now}
}

func (j *journal) next() uint64 {
	j.seq++
	return j.seq
}

// fileFor returns the pending record of the file open at fd, starting one when there is none.
func (j *journal) fileFor(fd int) (*pendingFile, int64, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, 0, err
	}
	pf := j.files[st.Ino]
	if pf == nil {
		own, err := syscall.Dup(fd)
		if err != nil {
			return nil, 0, err
		}
		pf = &pendingFile{fd: own, dirtiedAt: j.now()}
		j.files[st.Ino] = pf
	}
	return pf, st.Size, nil
}

// recordWrite keeps what a write of data at offset will overwrite. Called with mu held.
func (j *journal) recordWrite(fd int, data []byte, offset int64) error {
	pf, size, err := j.fileFor(fd)
	if err != nil {
		return err
	}
	var old []byte
	if offset < size {
		end := min(offset+int64(len(data)), size)
		old = make([]byte, end-offset)
		if _, err := syscall.Pread(fd, old, offset); err != nil {
			return err
		}
	}
	pf.changes = append(pf.changes, contentUndo{seq: j.next(), offset: offset, old: old, oldSize: size, written: append([]byte(nil), data...)})
	return nil
}

// recordResize keeps what a change of size to newSize will cut off. Called with mu held.
func (j *journal) recordResize(fd int, newSize int64) error {
	pf, size, err := j.fileFor(fd)
	if err != nil {
		return err
	}
	var old []byte
	if newSize < size {
		old = make([]byte, size-newSize)
		if _, err := syscall.Pread(fd, old, newSize); err != nil {
			return err
		}
	}
	pf.changes = append(pf.changes, contentUndo{seq: j.next(), offset: newSize, old: old, oldSize: size})
	return nil
}

// fileSynced forgets the changes of the file open at fd: they are on disk now.
func (j *journal) fileSynced(fd int) {
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil {
		return
	}
	if pf := j.files[st.Ino]; pf != nil {
		syscall.Close(pf.fd)
		delete(j.files, st.Ino)
	}
	if j.fsyncCommitsEntries {
		j.commitEntries(len(j.entries))
	}
}

// commitEntries makes the first n pending entry changes durable.
func (j *journal) commitEntries(n int) {
	for _, e := range j.entries[:n] {
		if e.drop != nil {
			e.drop()
		}
	}
	j.entries = j.entries[n:]
}

// recordEntry adds a directory entry change. Called with mu held.
func (j *journal) recordEntry(label string, dirs []string, undo func() error, drop func()) {
	j.entries = append(j.entries, entryUndo{seq: j.next(), at: j.now(), dirs: dirs, undo: undo, drop: drop, label: label})
}

// dirSynced makes durable every entry change that touched dir, and every change made before the
// last of them: like a file system journal, a later change never reaches the disk without the
// earlier ones, so the pending changes stay a suffix and undo cleanly.
func (j *journal) dirSynced(dir string) {
	last := -1
	for i, e := range j.entries {
		for _, d := range e.dirs {
			if d == dir {
				last = i
			}
		}
	}
	j.commitEntries(last + 1)
}

// asideName is a fresh name in the trash directory for a file an unlink or rename displaced.
func (j *journal) asideName() string {
	j.trashN++
	return filepath.Join(j.trash, fmt.Sprintf("%d", j.trashN))
}

// cutReport says what a cut undid.
type cutReport struct {
	Writes  int      `json:"writes"`
	Resizes int      `json:"resizes"`
	Entries int      `json:"entries"`
	Undone  []string `json:"undone,omitempty"` // the first entry changes undone, newest first
	Torn    string   `json:"torn,omitempty"`
	Errors  []string `json:"errors,omitempty"`
}

// powerCut drops the volatile layer. With tear, the newest pending write is left half done: its
// first sectors reach the disk, the rest does not.
func (j *journal) powerCut(tear bool) cutReport {
	j.mu.Lock()
	defer j.mu.Unlock()
	report := cutReport{}
	j.cut = true

	var newest *contentUndo
	var newestFd int
	for _, pf := range j.files {
		for i := range pf.changes {
			c := &pf.changes[i]
			if c.written != nil && (newest == nil || c.seq > newest.seq) {
				newest, newestFd = c, pf.fd
			}
		}
	}
	for ino, pf := range j.files {
		for i := len(pf.changes) - 1; i >= 0; i-- {
			c := pf.changes[i]
			if c.written != nil {
				report.Writes++
			} else {
				report.Resizes++
			}
			if err := syscall.Ftruncate(pf.fd, c.oldSize); err != nil {
				report.Errors = append(report.Errors, fmt.Sprintf("inode %d: truncate: %v", ino, err))
			}
			if len(c.old) > 0 {
				if _, err := syscall.Pwrite(pf.fd, c.old, c.offset); err != nil {
					report.Errors = append(report.Errors, fmt.Sprintf("inode %d: restore: %v", ino, err))
				}
			}
		}
	}
	if tear && newest != nil {
		kept := tornLength(len(newest.written))
		if _, err := syscall.Pwrite(newestFd, newest.written[:kept], newest.offset); err != nil {
			report.Errors = append(report.Errors, fmt.Sprintf("torn write: %v", err))
		}
		report.Torn = fmt.Sprintf("%d of %d bytes at offset %d", kept, len(newest.written), newest.offset)
	}
	for ino, pf := range j.files {
		syscall.Fsync(pf.fd)
		syscall.Close(pf.fd)
		delete(j.files, ino)
	}
	for i := len(j.entries) - 1; i >= 0; i-- {
		report.Entries++
		if len(report.Undone) < 20 {
			report.Undone = append(report.Undone, j.entries[i].label)
		}
		if err := j.entries[i].undo(); err != nil {
			report.Errors = append(report.Errors, fmt.Sprintf("%s: %v", j.entries[i].label, err))
		}
	}
	j.entries = nil
	os.RemoveAll(j.trash)
	return report
}

// tornLength is how much of a write of n bytes a torn write keeps: the first half, in whole
// 512-byte sectors when the write spans more than one.
func tornLength(n int) int {
	if n <= 512 {
		return n / 2
	}
	return (n / 2) / 512 * 512
}

// pendingStatus counts what a cut would undo now.
type pendingStatus struct {
	Files   int  `json:"files"`
	Changes int  `json:"changes"`
	Entries int  `json:"entries"`
	Cut     bool `json:"cut"`
}

func (j *journal) status() pendingStatus {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := pendingStatus{Files: len(j.files), Entries: len(j.entries), Cut: j.cut}
	for _, pf := range j.files {
		s.Changes += len(pf.changes)
	}
	return s
}

// writeBack makes every pending change durable, as the kernel's periodic writeback and a file
// system's journal commit do with data older than half a minute or so.
func (j *journal) writeBack() pendingStatus {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := pendingStatus{Files: len(j.files), Entries: len(j.entries), Cut: j.cut}
	for ino, pf := range j.files {
		s.Changes += len(pf.changes)
		syscall.Fsync(pf.fd)
		syscall.Close(pf.fd)
		delete(j.files, ino)
	}
	j.commitEntries(len(j.entries))
	return s
}

// writeBackOlder makes durable what has been pending for at least age, as the kernel's flusher
// does with dirty data older than vm.dirty_expire_centisecs: a file whose first pending change is
// that old is written whole, and entry changes that old are committed, oldest first, so the
// pending ones stay a suffix. It answers with what it made durable.
func (j *journal) writeBackOlder(age time.Duration) pendingStatus {
	j.mu.Lock()
	defer j.mu.Unlock()
	s := pendingStatus{Cut: j.cut}
	if j.cut {
		return s
	}
	limit := j.now().Add(-age)
	for ino, pf := range j.files {
		if pf.dirtiedAt.After(limit) {
			continue
		}
		s.Files++
		s.Changes += len(pf.changes)
		syscall.Fsync(pf.fd)
		syscall.Close(pf.fd)
		delete(j.files, ino)
	}
	old := 0
	for old < len(j.entries) && !j.entries[old].at.After(limit) {
		old++
	}
	s.Entries = old
	j.commitEntries(old)
	return s
}
