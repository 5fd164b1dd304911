package main

// Directory entries. Each change of a name (create, mkdir, link, symlink, mknod, unlink, rmdir,
// rename) is recorded against the directories whose entries it changes, by inode, and becomes
// durable by an fsync of such a directory, independently of every other directory: an fsync of
// a new file does not make its name durable, and neither does an fsync of a new directory make
// the directory's own name durable in its parent (that takes an fsync of the parent). Only a change
// that names two directories ties them: a rename between directories, made durable by an fsync of
// either, takes the earlier changes of both along (the file system writes the rename as one
// transaction), and rmdir counts as a change of the removed directory too, so it is never durable
// while an unlink inside it is not.
//
// In the ext4 model (-entries ext4) every successful fsync commits every entry change made so far,
// as ext4's journal commits its running transaction.
//
// Undo works on directory descriptors, not paths: a directory renamed since, or not yet named on
// the disk, is still the same directory. A name removed or replaced is kept in the trash until the
// change is durable, so a cut can put it back.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// dirRef is a directory the pending entry changes name, held open (O_PATH) while they do.
type dirRef struct {
	fd   int
	ino  uint64
	refs int
}

// at is a path to name in the directory, wherever the directory is by then.
func (d *dirRef) at(name string) string {
	return fmt.Sprintf("/proc/self/fd/%d/%s", d.fd, name)
}

// entryChange is one change of the names in a directory (or two) that is not durable yet.
type entryChange struct {
	seq       uint64
	at        time.Time
	label     string
	dirs      []*dirRef
	undo      func() error
	aside     string // what the change displaced, kept in the trash until it is durable
	state     state
	durableAt time.Time // as contentChange.durableAt
}

func (e *entryChange) isDurable(now time.Time) bool {
	return e.state == durable || (!e.durableAt.IsZero() && !now.Before(e.durableAt))
}

func (e *entryChange) names(ino uint64) bool {
	for _, d := range e.dirs {
		if d.ino == ino {
			return true
		}
	}
	return false
}

// dir opens (or shares) a reference to the directory at path. Called with mu held.
func (j *journal) dir(path string) (*dirRef, error) {
	fd, err := syscall.Open(path, syscall.O_DIRECTORY|syscall.O_CLOEXEC|0x200000 /* O_PATH */, 0)
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	if d := j.dirs[st.Ino]; d != nil {
		syscall.Close(fd)
		d.refs++
		return d, nil
	}
	d := &dirRef{fd: fd, ino: st.Ino, refs: 1}
	j.dirs[st.Ino] = d
	return d, nil
}

func (j *journal) release(dirs ...*dirRef) {
	for _, d := range dirs {
		d.refs--
		if d.refs == 0 {
			syscall.Close(d.fd)
			delete(j.dirs, d.ino)
		}
	}
}

// inode is the backing inode number of the directory at path.
func inode(path string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// label names a change in the cut's report by its path under the mount.
func (j *journal) label(dir, name string) string {
	rel, err := filepath.Rel(j.root, filepath.Join(dir, name))
	if err != nil {
		return filepath.Join(dir, name)
	}
	return rel
}

func (j *journal) record(label string, dirs []*dirRef, aside string, undo func() error) {
	j.entries = append(j.entries, &entryChange{seq: j.next(), at: j.now(), label: label, dirs: dirs, undo: undo, aside: aside})
}

// The entry changes, one helper each, all kept by changeEntries: it opens the directories the change
// names, lets the helper apply the change, and records it with its undo, or releases them when the
// change failed. Called with mu held; dir is the directory the change is in, at its current path.

// made is what a change answers: the undo, and what it displaced into the trash, if anything.
type made struct {
	undo  func() error
	aside string
}

// changeEntries makes one change of the entries of the directories at paths (the same directory
// named twice is held once) and records it.
func (j *journal) changeEntries(label string, paths []string, apply func(dirs []*dirRef) (made, error)) error {
	var dirs []*dirRef
	for _, path := range paths {
		d, err := j.dir(path)
		if err != nil {
			j.release(dirs...)
			return err
		}
		if slices.Contains(dirs, d) {
			j.release(d)
			continue
		}
		dirs = append(dirs, d)
	}
	m, err := apply(dirs)
	if err != nil {
		j.release(dirs...)
		return err
	}
	j.record(label, dirs, m.aside, m.undo)
	return nil
}

// moveAside removes name from d by moving it into the trash, so a cut can put it back.
func (j *journal) moveAside(d *dirRef, name string) (made, error) {
	aside := j.asideName()
	if err := os.Rename(d.at(name), aside); err != nil {
		return made{}, err
	}
	return made{aside: aside, undo: func() error { return os.Rename(aside, d.at(name)) }}, nil
}

// added records a name the caller just made in dir: a file, link, node or directory.
func (j *journal) added(kind, dir, name string) error {
	return j.changeEntries(kind+" "+j.label(dir, name), []string{dir}, func(dirs []*dirRef) (made, error) {
		d := dirs[0]
		return made{undo: func() error {
			if kind == "mkdir" {
				return os.RemoveAll(d.at(name))
			}
			return os.Remove(d.at(name))
		}}, nil
	})
}

// unlink removes a name by moving it into the trash.
func (j *journal) unlink(dir, name string) error {
	return j.changeEntries("unlink "+j.label(dir, name), []string{dir}, func(dirs []*dirRef) (made, error) {
		return j.moveAside(dirs[0], name)
	})
}

// rmdir removes an empty directory by moving it into the trash: the same directory comes back on
// a cut, so the changes recorded inside it still undo. It is a change of that directory too.
func (j *journal) rmdir(dir, name string) error {
	return j.changeEntries("rmdir "+j.label(dir, name), []string{dir, filepath.Join(dir, name)}, func(dirs []*dirRef) (made, error) {
		if err := emptyDir(dirs[0].at(name)); err != nil {
			return made{}, err
		}
		return j.moveAside(dirs[0], name)
	})
}

func emptyDir(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if names, _ := f.Readdirnames(1); len(names) > 0 {
		return syscall.ENOTEMPTY
	}
	return nil
}

// rename renames from/name to to/newName. A name it replaces is kept aside (as a second hard link
// first, so the replacement stays atomic for anyone looking), so a cut can put both back.
func (j *journal) rename(from, name, to, newName string, noReplace bool) error {
	label := "rename " + j.label(from, name) + " to " + j.label(to, newName)
	return j.changeEntries(label, []string{from, to}, func(dirs []*dirRef) (made, error) {
		source, target := dirs[0].at(name), dirs[len(dirs)-1].at(newName)
		aside := ""
		if info, err := os.Lstat(target); err == nil {
			if noReplace {
				return made{}, syscall.EEXIST
			}
			aside = j.asideName()
			keep := os.Link
			if info.IsDir() {
				keep = os.Rename
			}
			if err := keep(target, aside); err != nil {
				return made{}, err
			}
		}
		if err := os.Rename(source, target); err != nil {
			if aside != "" {
				if _, statErr := os.Lstat(target); statErr != nil {
					os.Rename(aside, target)
				} else {
					os.RemoveAll(aside)
				}
			}
			return made{}, err
		}
		return made{aside: aside, undo: func() error {
			if err := os.Rename(target, source); err != nil {
				return err
			}
			if aside != "" {
				return os.Rename(aside, target)
			}
			return nil
		}}, nil
	})
}

// fsyncDir is an fsync of the directory at path. Called with mu held.
func (j *journal) fsyncDir(path string) error {
	ino, err := inode(path)
	if err != nil {
		return err
	}
	now := j.now()
	if j.fsyncCommitsEntries {
		if j.pendingEntries(now) && j.faults.fsyncFails(&j.faults.failDirs) {
			j.faults.fsyncEIOs++
			return syscall.EIO
		}
		j.commitAllEntries(now)
		return nil
	}
	has := false
	for _, e := range j.entries {
		has = has || (!e.isDurable(now) && e.durableAt.IsZero() && e.names(ino))
	}
	if has && j.faults.fsyncFails(&j.faults.failDirs) {
		// The journal could not be written: the changes stay in memory, pending.
		j.faults.fsyncEIOs++
		return syscall.EIO
	}
	j.commitDir(ino, len(j.entries)-1, now)
	j.forgetEntries(now)
	return nil
}

func (j *journal) pendingEntries(now time.Time) bool {
	for _, e := range j.entries {
		if !e.isDurable(now) && e.durableAt.IsZero() {
			return true
		}
	}
	return false
}

// commitDir makes durable the pending changes of directory ino up to index last, and with each
// one that names another directory too, that directory's changes before it.
func (j *journal) commitDir(ino uint64, last int, now time.Time) {
	type limit struct {
		ino  uint64
		last int
	}
	done := map[uint64]int{}
	work := []limit{{ino, last}}
	for len(work) > 0 {
		w := work[len(work)-1]
		work = work[:len(work)-1]
		if upTo, ok := done[w.ino]; ok && upTo >= w.last {
			continue
		}
		done[w.ino] = w.last
		for k := 0; k <= w.last; k++ {
			e := j.entries[k]
			if !e.names(w.ino) || e.isDurable(now) || !e.durableAt.IsZero() {
				continue
			}
			j.settle(&e.state, &e.durableAt, now)
			for _, d := range e.dirs {
				if d.ino != w.ino {
					work = append(work, limit{d.ino, k - 1})
				}
			}
		}
	}
}

// commitAllEntries makes every entry change durable (behind a lying flush, a while from now).
func (j *journal) commitAllEntries(now time.Time) {
	for _, e := range j.entries {
		if e.durableAt.IsZero() {
			j.settle(&e.state, &e.durableAt, now)
		}
	}
	j.forgetEntries(now)
}

// commitEntriesOlder makes durable the entry changes made before limit (they are in order, so
// they are a prefix of every directory's changes), and answers how many.
func (j *journal) commitEntriesOlder(limit, now time.Time) int {
	n := 0
	for _, e := range j.entries {
		if e.at.After(limit) {
			break
		}
		if !e.isDurable(now) {
			e.state = durable
			n++
		}
	}
	j.forgetEntries(now)
	return n
}

// forgetEntries drops the durable entry changes: a cut never undoes them, and nothing recorded
// needs what they displaced.
func (j *journal) forgetEntries(now time.Time) {
	kept := j.entries[:0]
	for _, e := range j.entries {
		if e.isDurable(now) {
			j.dropEntry(e)
		} else {
			kept = append(kept, e)
		}
	}
	clear(j.entries[len(kept):])
	j.entries = kept
}

func (j *journal) dropEntry(e *entryChange) {
	if e.aside != "" {
		os.RemoveAll(e.aside)
	}
	j.release(e.dirs...)
}
