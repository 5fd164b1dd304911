package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// clock is a journal clock the test moves by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time           { return c.t }
func (c *clock) advance(by time.Duration) { c.t = c.t.Add(by) }

func newTestJournal(t *testing.T) (*journal, *clock, string) {
	t.Helper()
	dir := t.TempDir()
	trash := filepath.Join(dir, "trash")
	if err := os.Mkdir(trash, 0o700); err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	j := newJournal(trash, false)
	j.now = c.now
	return j, c, dir
}

// write changes a file through the journal, as the file system's Write does.
func write(t *testing.T, j *journal, path, data string, offset int64) {
	t.Helper()
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CREAT, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.recordWrite(fd, []byte(data), offset); err != nil {
		t.Fatal(err)
	}
	if _, err := syscall.Pwrite(fd, []byte(data), offset); err != nil {
		t.Fatal(err)
	}
}

func fsyncFile(t *testing.T, j *journal, path string) {
	t.Helper()
	fd, err := syscall.Open(path, syscall.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.fileSynced(fd)
}

// createEntry records the creation of path, as the file system's Create does.
func createEntry(t *testing.T, j *journal, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.recordEntry("create "+path, []string{"."}, func() error { return os.Remove(path) }, nil)
}

func content(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return "<missing>"
		}
		t.Fatal(err)
	}
	return string(data)
}

func TestWriteBackOlderKeepsOldChangesAndCutLosesYoungOnes(t *testing.T) {
	j, c, dir := newTestJournal(t)
	old, young := filepath.Join(dir, "old"), filepath.Join(dir, "young")
	for _, p := range []string{old, young} {
		if err := os.WriteFile(p, []byte("0000"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(t, j, old, "1111", 0)
	c.advance(25 * time.Second)
	write(t, j, young, "2222", 0)
	c.advance(10 * time.Second)

	done := j.writeBackOlder(30 * time.Second)
	if done.Files != 1 || done.Changes != 1 {
		t.Fatalf("writeback of changes 30 s old took %+v, want 1 file with 1 change", done)
	}
	j.powerCut(false)

	if got := content(t, old); got != "1111" {
		t.Errorf("the change 35 s old: %q after the cut, want it kept", got)
	}
	if got := content(t, young); got != "0000" {
		t.Errorf("the change 10 s old: %q after the cut, want it undone", got)
	}
}

func TestWriteBackOlderTakesAFileWholeByItsFirstPendingChange(t *testing.T) {
	j, c, dir := newTestJournal(t)
	path := filepath.Join(dir, "wal")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	write(t, j, path, "a", 0)
	c.advance(29 * time.Second)
	write(t, j, path, "b", 1)
	c.advance(2 * time.Second)

	j.writeBackOlder(30 * time.Second)
	j.powerCut(false)

	if got := content(t, path); got != "ab" {
		t.Errorf("a file first dirtied 31 s ago: %q after the cut, want all of it kept, as the kernel writes an expired inode whole", got)
	}
}

func TestFsyncStartsTheAgeAnew(t *testing.T) {
	j, c, dir := newTestJournal(t)
	path := filepath.Join(dir, "data")
	if err := os.WriteFile(path, []byte("0"), 0o600); err != nil {
		t.Fatal(err)
	}
	write(t, j, path, "1", 0)
	fsyncFile(t, j, path)
	c.advance(40 * time.Second)
	write(t, j, path, "2", 0)
	c.advance(5 * time.Second)

	if done := j.writeBackOlder(30 * time.Second); done.Files != 0 {
		t.Fatalf("writeback took %+v, want nothing: the pending change is 5 s old", done)
	}
	j.powerCut(false)

	if got := content(t, path); got != "1" {
		t.Errorf("%q after the cut, want the fsynced state", got)
	}
}

func TestWriteBackOlderCommitsOldEntryChangesInOrder(t *testing.T) {
	j, c, dir := newTestJournal(t)
	first, second, third := filepath.Join(dir, "first"), filepath.Join(dir, "second"), filepath.Join(dir, "third")
	createEntry(t, j, first)
	c.advance(10 * time.Second)
	createEntry(t, j, second)
	c.advance(15 * time.Second)
	createEntry(t, j, third)
	c.advance(10 * time.Second)

	done := j.writeBackOlder(20 * time.Second)
	if done.Entries != 2 {
		t.Fatalf("writeback of entries 20 s old took %+v, want 2 entries", done)
	}
	report := j.powerCut(false)

	if report.Entries != 1 {
		t.Errorf("the cut undid %d entries, want 1", report.Entries)
	}
	for path, want := range map[string]string{first: "", second: "", third: "<missing>"} {
		if got := content(t, path); got != want {
			t.Errorf("%s: %q after the cut, want %q", filepath.Base(path), got, want)
		}
	}
}

func TestWriteBackOlderDoesNothingAfterTheCut(t *testing.T) {
	j, _, _ := newTestJournal(t)
	j.powerCut(false)
	if done := j.writeBackOlder(0); !done.Cut {
		t.Errorf("writeback after the cut answered %+v, want it to say the disk is cut", done)
	}
}
