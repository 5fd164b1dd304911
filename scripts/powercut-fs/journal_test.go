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

// disk is a journal over a temporary backing directory, driven the way the file system's nodes
// drive it, without FUSE.
type disk struct {
	t     *testing.T
	j     *journal
	clock *clock
	dir   string
}

func newDisk(t *testing.T, ext4 bool, f faults) *disk {
	t.Helper()
	root := t.TempDir()
	dir, trash := filepath.Join(root, "backing"), filepath.Join(root, "trash")
	for _, d := range []string{dir, trash} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	j := newJournal(dir, trash, ext4, f)
	j.now = c.now
	return &disk{t: t, j: j, clock: c, dir: dir}
}

func (d *disk) path(name string) string { return filepath.Join(d.dir, name) }

// open opens a file of the backing directory as a caller of the file system would.
func (d *disk) open(name string, flags int) int {
	d.t.Helper()
	fd, err := syscall.Open(d.path(name), flags|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { syscall.Close(fd) })
	return fd
}

// write writes through the journal; the error is the write's.
func (d *disk) write(name, data string, offset int64) error {
	d.t.Helper()
	fd := d.open(name, syscall.O_RDWR)
	d.j.mu.Lock()
	defer d.j.mu.Unlock()
	_, err := d.j.write(fd, []byte(data), offset)
	return err
}

func (d *disk) mustWrite(name, data string, offset int64) {
	d.t.Helper()
	if err := d.write(name, data, offset); err != nil {
		d.t.Fatal(err)
	}
}

func (d *disk) fsync(name string) error {
	d.t.Helper()
	fd := d.open(name, syscall.O_RDONLY)
	d.j.mu.Lock()
	defer d.j.mu.Unlock()
	return d.j.fsyncFile(fd)
}

func (d *disk) mustFsync(name string) {
	d.t.Helper()
	if err := d.fsync(name); err != nil {
		d.t.Fatal(err)
	}
}

func (d *disk) truncate(name string, size int64) {
	d.t.Helper()
	fd := d.open(name, syscall.O_WRONLY)
	d.j.mu.Lock()
	defer d.j.mu.Unlock()
	if err := d.j.recordResize(fd, size); err != nil {
		d.t.Fatal(err)
	}
	if err := syscall.Ftruncate(fd, size); err != nil {
		d.t.Fatal(err)
	}
}

// create makes an empty file in dir (relative to the backing directory) and records its name.
func (d *disk) create(dir, name string) {
	d.t.Helper()
	if err := os.WriteFile(filepath.Join(d.path(dir), name), nil, 0o600); err != nil {
		d.t.Fatal(err)
	}
	d.entry(func() error { return d.j.added("create", d.path(dir), name) })
}

func (d *disk) mkdir(dir, name string) {
	d.t.Helper()
	if err := os.Mkdir(filepath.Join(d.path(dir), name), 0o700); err != nil {
		d.t.Fatal(err)
	}
	d.entry(func() error { return d.j.added("mkdir", d.path(dir), name) })
}

func (d *disk) entry(change func() error) {
	d.t.Helper()
	d.j.mu.Lock()
	defer d.j.mu.Unlock()
	if err := change(); err != nil {
		d.t.Fatal(err)
	}
}

func (d *disk) fsyncDir(dir string) error {
	d.j.mu.Lock()
	defer d.j.mu.Unlock()
	return d.j.fsyncDir(d.path(dir))
}

func (d *disk) mustFsyncDir(dir string) {
	d.t.Helper()
	if err := d.fsyncDir(dir); err != nil {
		d.t.Fatal(err)
	}
}

// durable makes a file with content whose data and name are durable.
func (d *disk) durable(name, content string) {
	d.t.Helper()
	d.create(filepath.Dir(name), filepath.Base(name))
	d.mustWrite(name, content, 0)
	d.mustFsync(name)
	d.mustFsyncDir(filepath.Dir(name))
}

// durableDirs makes directories in the backing directory whose names are durable.
func (d *disk) durableDirs(names ...string) {
	d.t.Helper()
	for _, name := range names {
		d.mkdir(".", name)
	}
	d.mustFsyncDir(".")
}

func (d *disk) cut(model string, seed uint64) cutReport {
	d.t.Helper()
	report := d.j.powerCut(model, seed)
	if len(report.Errors) > 0 {
		d.t.Fatalf("the cut failed: %v", report.Errors)
	}
	return report
}

// content is what the file holds, "<missing>" when there is none, "<directory>" for a directory.
func (d *disk) content(name string) string {
	d.t.Helper()
	if info, err := os.Stat(d.path(name)); err == nil && info.IsDir() {
		return "<directory>"
	}
	data, err := os.ReadFile(d.path(name))
	if err != nil {
		if os.IsNotExist(err) {
			return "<missing>"
		}
		d.t.Fatal(err)
	}
	return string(data)
}

// wantContents checks the content of each file named.
func (d *disk) wantContents(want map[string]string) {
	d.t.Helper()
	for name, content := range want {
		if got := d.content(name); got != content {
			d.t.Errorf("%s: %q after the cut, want %q", name, got, content)
		}
	}
}

// everySeed runs a fresh disk through history and a cut for seeds 0..n-1, and calls outcome
// with each seed's result.
func everySeed(t *testing.T, n uint64, ext4 bool, model string, history func(d *disk), outcome func(seed uint64, d *disk)) {
	t.Helper()
	for seed := range n {
		d := newDisk(t, ext4, faults{})
		history(d)
		d.cut(model, seed)
		outcome(seed, d)
	}
}

// dropCase is a history of changes and what each file holds after a cut that keeps nothing
// pending ("drop"): "<missing>" for no such file, "<directory>" for a directory.
type dropCase struct {
	name    string
	ext4    bool
	faults  faults
	history func(d *disk)
	want    map[string]string
}

// dropCases are the model's behaviours, one a case.
var dropCases = []dropCase{
	{
		name: "writeback keeps changes older than its age and the cut loses younger ones",
		history: func(d *disk) {
			d.durable("old", "0000")
			d.durable("young", "0000")
			d.mustWrite("old", "1111", 0)
			d.clock.advance(25 * time.Second)
			d.mustWrite("young", "2222", 0)
			d.clock.advance(10 * time.Second)
			if done := d.j.writeBackOlder(30 * time.Second); done.Files != 1 || done.Changes != 1 {
				d.t.Fatalf("writeback of changes 30 s old took %+v, want 1 file with 1 change", done)
			}
		},
		want: map[string]string{"old": "1111", "young": "0000"},
	},
	{
		// The kernel writes an expired inode whole.
		name: "writeback takes a file whole by its first pending change",
		history: func(d *disk) {
			d.durable("wal", "")
			d.mustWrite("wal", "a", 0)
			d.clock.advance(29 * time.Second)
			d.mustWrite("wal", "b", 1)
			d.clock.advance(2 * time.Second)
			d.j.writeBackOlder(30 * time.Second)
		},
		want: map[string]string{"wal": "ab"},
	},
	{
		name: "an fsync starts the age anew",
		history: func(d *disk) {
			d.durable("data", "0")
			d.mustWrite("data", "1", 0)
			d.mustFsync("data")
			d.clock.advance(40 * time.Second)
			d.mustWrite("data", "2", 0)
			d.clock.advance(5 * time.Second)
			if done := d.j.writeBackOlder(30 * time.Second); done.Files != 0 {
				d.t.Fatalf("writeback took %+v, want nothing: the pending change is 5 s old", done)
			}
		},
		want: map[string]string{"data": "1"},
	},
	{
		name: "overwrites and shrinks through a write-only descriptor are undone",
		history: func(d *disk) {
			d.durable("data", "0123456789")
			fd := d.open("data", syscall.O_WRONLY)
			d.j.mu.Lock()
			_, err := d.j.write(fd, []byte("ab"), 2)
			d.j.mu.Unlock()
			if err != nil {
				d.t.Fatalf("an overwrite through a write-only descriptor failed: %v", err)
			}
			d.truncate("data", 4)
			if got := d.content("data"); got != "01ab" {
				d.t.Fatalf("%q before the cut, want the overwrite and the shrink", got)
			}
		},
		want: map[string]string{"data": "0123456789"},
	},
	{
		name: "a directory's fsync commits that directory alone, not earlier changes elsewhere",
		history: func(d *disk) {
			d.durableDirs("a", "b")
			d.create("b", "earlier")
			d.create("a", "later")
			d.mustFsyncDir("a")
		},
		want: map[string]string{"a/later": "", "b/earlier": "<missing>"},
	},
	{
		name:    "a new directory is lost without an fsync of its parent, whatever was synced inside",
		history: func(d *disk) { syncedInNewDirectory(d) },
		want:    map[string]string{"data/queue.db": "<missing>"},
	},
	{
		name: "a new directory whose parent was fsynced keeps what was synced inside",
		history: func(d *disk) {
			syncedInNewDirectory(d)
			d.mustFsyncDir(".")
		},
		want: map[string]string{"data/queue.db": "committed"},
	},
	{
		name: "the ext4 model commits every entry with any fsync, a file's too",
		ext4: true,
		history: func(d *disk) {
			d.mkdir(".", "data")
			d.create("data", "queue.db")
			d.mustWrite("data/queue.db", "committed", 0)
			d.mustFsync("data/queue.db")
		},
		want: map[string]string{"data/queue.db": "committed"},
	},
	{
		name: "a rename between directories is durable with either and takes their earlier changes",
		history: func(d *disk) {
			d.durableDirs("from", "to")
			d.durable("from/file", "content")
			d.create("from", "earlier")
			d.entry(func() error { return d.j.rename(d.path("from"), "file", d.path("to"), "file", false) })
			d.create("from", "later")
			d.mustFsyncDir("to")
		},
		want: map[string]string{"to/file": "content", "from/file": "<missing>", "from/earlier": "", "from/later": "<missing>"},
	},
	{
		// The rmdir takes the unlink inside along; the change inside the renamed directory undoes.
		name: "an fsynced rmdir takes the unlink inside along and a renamed directory keeps its undo",
		history: func(d *disk) {
			unlinkedInRemovedDirectory(d)
			d.mkdir(".", "moved")
			d.mustFsyncDir(".")
			d.create("moved", "new")
			d.entry(func() error { return d.j.rename(d.path("."), "moved", d.path("."), "renamed", false) })
			d.mustFsyncDir(".")
		},
		want: map[string]string{"gone/file": "<missing>", "renamed": "<directory>", "renamed/new": "<missing>"},
	},
	{
		name:    "an unlinked file comes back with its removed directory",
		history: unlinkedInRemovedDirectory,
		want:    map[string]string{"gone/file": "kept"},
	},
	{
		name: "a failed directory fsync leaves its entries pending",
		history: func(d *disk) {
			d.create(".", "new")
			d.j.faults.fsyncEIO = 1
			if err := d.fsyncDir("."); err != syscall.EIO {
				d.t.Fatalf("the directory fsync answered %v, want EIO", err)
			}
		},
		want: map[string]string{"new": "<missing>"},
	},
	{
		name:    "a lying flush is not durable at once",
		faults:  faults{lie: 500 * time.Millisecond},
		history: func(d *disk) { lyingFlush(d, 0) },
		want:    map[string]string{"data": "<missing>"},
	},
	{
		name:    "a lying flush is not durable just before its delay has passed",
		faults:  faults{lie: 500 * time.Millisecond},
		history: func(d *disk) { lyingFlush(d, 499*time.Millisecond) },
		want:    map[string]string{"data": "<missing>"},
	},
	{
		name:    "a lying flush is durable once its delay has passed",
		faults:  faults{lie: 500 * time.Millisecond},
		history: func(d *disk) { lyingFlush(d, 500*time.Millisecond) },
		want:    map[string]string{"data": "acknowledged"},
	},
}

// syncedInNewDirectory makes a directory and a file in it, with the file's data and name fsynced.
func syncedInNewDirectory(d *disk) {
	d.mkdir(".", "data")
	d.create("data", "queue.db")
	d.mustWrite("data/queue.db", "committed", 0)
	d.mustFsync("data/queue.db")
	d.mustFsyncDir("data")
}

// unlinkedInRemovedDirectory unlinks a durable file and removes its directory, neither fsynced.
func unlinkedInRemovedDirectory(d *disk) {
	d.durableDirs("gone")
	d.durable("gone/file", "kept")
	d.entry(func() error { return d.j.unlink(d.path("gone"), "file") })
	d.entry(func() error { return d.j.rmdir(d.path("."), "gone") })
}

// lyingFlush makes a file durable behind a lying flush and lets wait pass.
func lyingFlush(d *disk, wait time.Duration) {
	d.create(".", "data")
	d.mustWrite("data", "acknowledged", 0)
	d.mustFsync("data")
	d.mustFsyncDir(".")
	d.clock.advance(wait)
}

func TestWhatACutThatKeepsNothingPendingLeaves(t *testing.T) {
	for _, c := range dropCases {
		t.Run(c.name, func(t *testing.T) {
			d := newDisk(t, c.ext4, c.faults)
			c.history(d)
			d.cut("drop", 0)
			d.wantContents(c.want)
		})
	}
}

func TestWriteBackOlderCommitsOldEntryChangesInOrder(t *testing.T) {
	d := newDisk(t, false, faults{})
	d.create(".", "first")
	d.clock.advance(10 * time.Second)
	d.create(".", "second")
	d.clock.advance(15 * time.Second)
	d.create(".", "third")
	d.clock.advance(10 * time.Second)

	done := d.j.writeBackOlder(20 * time.Second)
	if done.Entries != 2 {
		t.Fatalf("writeback of entries 20 s old took %+v, want 2 entries", done)
	}
	if report := d.cut("drop", 0); report.Entries != 1 {
		t.Errorf("the cut undid %d entries, want 1", report.Entries)
	}
	d.wantContents(map[string]string{"first": "", "second": "", "third": "<missing>"})
}

func TestWriteBackOlderDoesNothingAfterTheCut(t *testing.T) {
	d := newDisk(t, false, faults{})
	d.cut("drop", 0)
	if done := d.j.writeBackOlder(0); !done.Cut {
		t.Errorf("writeback after the cut answered %+v, want it to say the disk is cut", done)
	}
}

// pendingPages makes three files with durable old bytes and pending new ones, several sectors each.
func pendingPages(d *disk) {
	for _, name := range []string{"a", "b", "c"} {
		d.durable(name, string(repeat('o', 2048)))
	}
	d.mustWrite("a", string(repeat('A', 2048)), 0)
	d.mustWrite("b", string(repeat('B', 2048)), 0)
	d.mustWrite("c", string(repeat('C', 2048)), 0)
}

func repeat(b byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// sectors describes a file by sector: which byte each 512-byte sector holds, or "mixed".
func sectors(content string) []string {
	var out []string
	for s := 0; s < len(content); s += sectorSize {
		part := content[s:min(len(content), s+sectorSize)]
		kind := string(part[0])
		for i := range part {
			if part[i] != part[0] {
				kind = "mixed"
			}
		}
		out = append(out, kind)
	}
	return out
}

func TestTearLandsPartOfAnyPendingWriteInWholeSectors(t *testing.T) {
	torn := map[string]bool{}
	everySeed(t, 60, false, "tear", pendingPages, func(seed uint64, d *disk) {
		for _, name := range []string{"a", "b", "c"} {
			got := sectors(d.content(name))
			landed := 0
			for _, s := range got {
				switch s {
				case "o":
				case string(rune(name[0] - 'a' + 'A')):
					landed++
				default:
					t.Fatalf("seed %d: %s has a sector %q: a sector lands whole or not at all", seed, name, s)
				}
			}
			if landed == len(got) {
				t.Fatalf("seed %d: all of %s's write landed, want a proper part", seed, name)
			}
			if landed > 0 {
				torn[name] = true
			}
		}
	})
	if len(torn) != 3 {
		t.Errorf("over 60 seeds the torn writes were in %v, want each of the three pending writes torn by some seed, the oldest too", torn)
	}
}

func TestSubsetLandsLaterWritesWithoutEarlierOnesReproducibly(t *testing.T) {
	later := false
	outcomes := map[uint64]string{}
	history := func(d *disk) {
		d.durable("wal", string(repeat('0', 1024)))
		d.mustWrite("wal", string(repeat('1', 512)), 0)
		d.mustWrite("wal", string(repeat('2', 512)), 512)
	}
	everySeed(t, 40, false, "subset", history, func(seed uint64, d *disk) {
		got := sectors(d.content("wal"))
		outcomes[seed] = got[0] + got[1]
		later = later || (got[0] == "0" && got[1] == "2")
	})
	if !later {
		t.Errorf("over 40 seeds the second write never landed without the first: %v", outcomes)
	}
	everySeed(t, 40, false, "subset", history, func(seed uint64, d *disk) {
		got := sectors(d.content("wal"))
		if got[0]+got[1] != outcomes[seed] {
			t.Errorf("seed %d kept %v once and %v the second time", seed, outcomes[seed], got[0]+got[1])
		}
	})
}

func TestSubsetKeepsASectorAsOfOneMomentNeverALaterWriteWithoutAnEarlierOneInIt(t *testing.T) {
	seen := map[string]bool{}
	everySeed(t, 60, false, "subset", func(d *disk) {
		d.durable("page", "........")
		d.mustWrite("page", "AAAA", 0)
		d.mustWrite("page", "BB", 4)
		d.mustWrite("page", "C", 0)
	}, func(seed uint64, d *disk) {
		got := d.content("page")
		seen[got] = true
		switch got {
		case "........", "AAAA....", "AAAABB..", "CAAABB..":
		default:
			t.Errorf("seed %d: %q is no moment of the sector's history", seed, got)
		}
	})
	if len(seen) < 3 {
		t.Errorf("over 60 seeds the sector held only %v", seen)
	}
}

func TestSubsetGrowsAFileWithTheDataThatLandsAndKeepsChangesOfSizeInOrder(t *testing.T) {
	everySeed(t, 60, false, "subset", func(d *disk) {
		d.durable("log", "")
		d.mustWrite("log", string(repeat('x', 512)), 0)
		d.mustWrite("log", string(repeat('y', 512)), 512)
		d.truncate("log", 100)
		d.truncate("log", 50)
	}, func(seed uint64, d *disk) {
		got := d.content("log")
		switch len(got) {
		case 0, 512, 1024, 100, 50:
		default:
			t.Errorf("seed %d: a file of %d bytes", seed, len(got))
		}
		if len(got) == 1024 && got[:512] != string(repeat('x', 512)) && got[:512] != string(make([]byte, 512)) {
			t.Errorf("seed %d: the first sector of a file grown by its second holds %q", seed, got[:8])
		}
	})
}

func TestSubsetLandsAPrefixOfEachDirectorysEntriesIndependently(t *testing.T) {
	otherFirst := false
	everySeed(t, 80, false, "subset", func(d *disk) {
		d.durableDirs("a", "b")
		d.create("a", "1")
		d.create("a", "2")
		d.create("b", "3")
	}, func(seed uint64, d *disk) {
		one, two, three := d.content("a/1") != "<missing>", d.content("a/2") != "<missing>", d.content("b/3") != "<missing>"
		if two && !one {
			t.Errorf("seed %d: a/2 landed without a/1, made before it in the same directory", seed)
		}
		otherFirst = otherFirst || (three && !one)
	})
	if !otherFirst {
		t.Error("over 80 seeds b/3 never landed without a/1: directories are not independent")
	}
}

func TestSubsetLandsOnePrefixOfAllEntriesInTheExt4Model(t *testing.T) {
	everySeed(t, 60, true, "subset", func(d *disk) {
		d.durableDirs("a", "b")
		d.create("a", "1")
		d.create("b", "2")
	}, func(seed uint64, d *disk) {
		if d.content("b/2") != "<missing>" && d.content("a/1") == "<missing>" {
			t.Errorf("seed %d: b/2 landed without a/1, made before it: ext4's journal commits in order", seed)
		}
	})
}

// failedFsync writes NEW at 0 over a durable file of 1024 dots, fails its fsync, fsyncs again
// with success, then writes "!" at offset and fsyncs that.
func failedFsync(t *testing.T, offset int64) *disk {
	d := newDisk(t, false, faults{})
	d.durable("data", string(repeat('.', 1024)))
	d.mustWrite("data", "NEW", 0)
	d.j.faults.fsyncEIO = 1
	if err := d.fsync("data"); err != syscall.EIO {
		t.Fatalf("the fsync answered %v, want EIO", err)
	}
	d.j.faults.fsyncEIO = 0
	if err := d.fsync("data"); err != nil {
		t.Fatalf("the fsync after the failure answered %v, want success (the kernel counts the pages as written)", err)
	}
	d.mustWrite("data", "!", offset)
	d.mustFsync("data")
	if got := d.content("data"); got[:3] != "NEW" || got[offset] != '!' {
		t.Fatalf("%q... before the cut, want the new bytes readable", got[:8])
	}
	d.cut("drop", 0)
	return d
}

func TestAFailedFsyncDropsItsWritesAndALaterFsyncSucceedsWithoutThem(t *testing.T) {
	got := failedFsync(t, 600).content("data")
	if got[:3] != "..." || got[600] != '!' {
		t.Errorf("%q... and %q at 600 after the cut, want the write whose fsync failed lost and the later fsynced one kept", got[:3], got[600])
	}
}

func TestAWriteAfterAFailedFsyncInTheSameSectorTakesTheDroppedBytesAlong(t *testing.T) {
	// The page still held NEW when it was written again with "!", and went to the disk whole.
	if got := failedFsync(t, 6).content("data"); got[:7] != "NEW...!" {
		t.Errorf("%q... after the cut, want the dropped bytes written with the later ones in their sector", got[:7])
	}
}

func TestEnospcFailsWritesThatGrowAFileOnly(t *testing.T) {
	d := newDisk(t, false, faults{})
	d.durable("data", "0123")
	d.j.faults.enospc = 1
	if err := d.write("data", "ab", 3); err != syscall.ENOSPC {
		t.Errorf("a write past the end answered %v, want ENOSPC", err)
	}
	if err := d.write("data", "ab", 1); err != nil {
		t.Errorf("an overwrite within the file answered %v, want success", err)
	}
	if got := d.content("data"); got != "0ab3" {
		t.Errorf("%q, want the overwrite alone", got)
	}
}

func TestAWriteRefusedOnACleanFileLeavesNoRecordForTheCut(t *testing.T) {
	d := newDisk(t, false, faults{})
	d.durable("data", "")
	d.durable("other", "0")
	d.mustWrite("other", "1", 0)
	d.j.faults.enospc = 1
	if err := d.write("data", "more", 0); err != syscall.ENOSPC {
		t.Fatalf("the write answered %v, want ENOSPC", err)
	}
	if report := d.cut("subset", 1); report.Writes != 1 {
		t.Errorf("the cut found %+v, want the one write to the other file pending", report)
	}
}

func TestAFailedFsyncIsReportedOnceToEveryOtherDescriptorOpenWhenItFailed(t *testing.T) {
	d := newDisk(t, false, faults{})
	d.durable("log", string(repeat('.', 1024)))
	fd := d.open("log", syscall.O_RDONLY)
	d.j.mu.Lock()
	opened, _ := d.j.failedFsyncs(fd)
	before, other := opened, opened
	d.j.mu.Unlock()
	d.mustWrite("log", "NEW", 0)
	d.j.faults.failFiles = 1
	d.j.mu.Lock()
	defer d.j.mu.Unlock()
	if err := d.j.fsyncDescriptor(fd, &other); err != syscall.EIO {
		t.Fatalf("the failing fsync answered %v, want EIO", err)
	}
	if err := d.j.fsyncDescriptor(fd, &other); err != nil {
		t.Fatalf("the same descriptor's next fsync answered %v, want success: it reported the failure", err)
	}
	if err := d.j.fsyncDescriptor(fd, &before); err != syscall.EIO {
		t.Fatalf("another descriptor open before the failure answered %v, want EIO although nothing is left to write", err)
	}
	if err := d.j.fsyncDescriptor(fd, &before); err != nil {
		t.Fatalf("its next fsync answered %v, want success: the failure is reported once", err)
	}
	after, _ := d.j.failedFsyncs(fd)
	if err := d.j.fsyncDescriptor(fd, &after); err != nil {
		t.Fatalf("a descriptor opened after the failure answered %v, want success", err)
	}
}
