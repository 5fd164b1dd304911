package main

// The cut: what the disk holds when the power goes. Every cut undoes all that is not durable,
// then lets the disk keep what its model allows:
//
//	drop    nothing: the disk wrote nothing since the last fsyncs (the strictest disk).
//	tear    as drop, but one write not yet durable, drawn from all of them (not only the newest),
//	        lands in part: a random non-empty proper subset of its sectors.
//	subset  an arbitrary subset of what is not durable, drawn from the seed, in the spirit of ALICE
//	        and CrashMonkey: later writes can land without earlier ones.
//
// What a disk and a kernel can produce between two fsyncs, and so all that subset (and tear) may
// keep:
//   - The unit the disk writes whole or not at all is a 512-byte sector of a file (at a multiple
//     of 512: file systems allocate whole blocks, so a file's sectors are the disk's).
//   - A sector holds its content as of some moment since the file's last fsync: the kernel writes a
//     page back as it is at that time, perhaps several times, and the cut can stop any of those
//     writes. So the writes that land in a sector are a prefix, in time, of the writes to it.
//   - Sectors are otherwise independent: within one write, across writes and across files, since
//     neither writeback nor the disk's queue keeps order between two flushes.
//   - A file grows with the data that lands in it; bytes between read as zeros (an ext4 file whose
//     later pages were written back before earlier ones).
//   - Changes of size (truncate, allocate) are metadata, which file systems journal in order: a
//     prefix of a file's changes of size lands.
//   - Entry changes: a prefix of each directory's pending changes lands, directories independently
//     (entries.go ties a change that names two); in the ext4 model one prefix of all of them.
//   - Writes whose fsync failed may have landed before the failure, and are drawn like pending ones.
//
// The draws are reproducible: the same history and seed keep the same subset.

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

const sectorSize = 512

// cutReport says what a cut undid and what of it the disk kept.
type cutReport struct {
	Model       string   `json:"model"`
	Seed        uint64   `json:"seed,string"`
	Keep        float64  `json:"keep,omitempty"`   // subset: the chance each further change lands
	Writes      int      `json:"writes"`           // writes not durable at the cut
	Resizes     int      `json:"resizes"`          // changes of size not durable at the cut
	Kept        int      `json:"kept"`             // of those, how many landed, whole or in part
	Entries     int      `json:"entries"`          // entry changes undone
	KeptEntries int      `json:"keptEntries"`      // entry changes not durable that landed
	Undone      []string `json:"undone,omitempty"` // the first entry changes undone, newest first
	Torn        string   `json:"torn,omitempty"`   // tear: the write that landed in part
	FsyncEIOs   int      `json:"fsyncEios"`        // fsyncs failed with EIO since the mount
	ENOSPCs     int      `json:"enospcs"`          // writes failed with ENOSPC since the mount
	Errors      []string `json:"errors,omitempty"`
}

// sectorPlan is one sector of a file: the writes to it, in order, and how many of them land.
type sectorPlan struct {
	writes []int
	land   int
}

// filePlan is what of one file's changes the disk keeps.
type filePlan struct {
	pf      *pendingFile
	sectors map[int64]*sectorPlan
	resizes int // how many of its changes of size land
}

// sectorsOf calls fn with each sector a write touches and the part of the write in it.
func sectorsOf(c *contentChange, fn func(sector, from, to int64)) {
	end := c.offset + int64(len(c.data))
	for s := c.offset / sectorSize; s*sectorSize < end; s++ {
		fn(s, max(c.offset, s*sectorSize), min(end, (s+1)*sectorSize))
	}
}

// plan lays out a file's changes by sector, with what is durable landing.
func plan(pf *pendingFile, now time.Time) *filePlan {
	p := &filePlan{pf: pf, sectors: map[int64]*sectorPlan{}}
	resizes := 0
	for i := range pf.changes {
		c := &pf.changes[i]
		if !c.isWrite() {
			resizes++
			if c.isDurable(now) {
				p.resizes = resizes
			}
			continue
		}
		sectorsOf(c, func(s, _, _ int64) {
			sp := p.sectors[s]
			if sp == nil {
				sp = &sectorPlan{}
				p.sectors[s] = sp
			}
			sp.writes = append(sp.writes, i)
			if c.isDurable(now) {
				sp.land = len(sp.writes)
			}
		})
	}
	return p
}

// keepSome lets each further change land with chance keep, in order, until one does not.
func keepSome(p *filePlan, keep float64, random *rand.Rand) {
	for _, s := range slices.Sorted(maps.Keys(p.sectors)) {
		sp := p.sectors[s]
		for sp.land < len(sp.writes) && random.Float64() < keep {
			sp.land++
		}
	}
	resizes := 0
	for i := range p.pf.changes {
		if !p.pf.changes[i].isWrite() {
			resizes++
		}
	}
	for p.resizes < resizes && random.Float64() < keep {
		p.resizes++
	}
}

// tear lets one write that is not durable and spans more than one sector land in part.
func (j *journal) tear(plans []*filePlan, now time.Time, random *rand.Rand) string {
	type candidate struct {
		p *filePlan
		i int
	}
	var candidates []candidate
	for _, p := range plans {
		for i := range p.pf.changes {
			c := &p.pf.changes[i]
			if c.isWrite() && !c.isDurable(now) && (c.offset+int64(len(c.data))-1)/sectorSize > c.offset/sectorSize {
				candidates = append(candidates, candidate{p, i})
			}
		}
	}
	if len(candidates) == 0 {
		return ""
	}
	pick := candidates[random.IntN(len(candidates))]
	c := &pick.p.pf.changes[pick.i]
	var sectors []int64
	sectorsOf(c, func(s, _, _ int64) { sectors = append(sectors, s) })
	var landed []int64
	for len(landed) == 0 || len(landed) == len(sectors) {
		landed = landed[:0]
		for _, s := range sectors {
			if random.IntN(2) == 0 {
				landed = append(landed, s)
			}
		}
	}
	for _, s := range landed {
		sp := pick.p.sectors[s]
		sp.land = max(sp.land, slices.Index(sp.writes, pick.i)+1)
	}
	return fmt.Sprintf("%s: %d of %d sectors of a write of %d bytes at offset %d", j.fileName(pick.p.pf), len(landed), len(sectors), len(c.data), c.offset)
}

// fileName is where the file is now under the mount, for the report.
func (j *journal) fileName(pf *pendingFile) string {
	name, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", pf.fd))
	if err != nil {
		return fmt.Sprintf("descriptor %d", pf.fd)
	}
	if strings.HasPrefix(name, j.trash+"/") {
		return "(unlinked)"
	}
	if rel, err := filepath.Rel(j.root, name); err == nil {
		return rel
	}
	return name
}

// restore undoes every change of the file, then makes again what lands.
func (j *journal) restore(p *filePlan, now time.Time, report *cutReport) {
	pf := p.pf
	fail := func(what string, err error) {
		if err != nil {
			report.Errors = append(report.Errors, fmt.Sprintf("%s: %s: %v", j.fileName(pf), what, err))
		}
	}
	for i := len(pf.changes) - 1; i >= 0; i-- {
		c := &pf.changes[i]
		fail("truncate", syscall.Ftruncate(pf.fd, c.oldSize))
		if len(c.old) > 0 {
			_, err := syscall.Pwrite(pf.fd, c.old, c.offset)
			fail("restore", err)
		}
	}
	rank := map[int64]int{}
	resizes := 0
	for i := range pf.changes {
		c := &pf.changes[i]
		if !c.isWrite() {
			if resizes < p.resizes {
				fail("resize", syscall.Ftruncate(pf.fd, c.newSize))
				if !c.isDurable(now) {
					report.Kept++
				}
			}
			resizes++
			if !c.isDurable(now) {
				report.Resizes++
			}
			continue
		}
		landed := false
		sectorsOf(c, func(s, from, to int64) {
			if rank[s] < p.sectors[s].land {
				_, err := syscall.Pwrite(pf.fd, c.data[from-c.offset:to-c.offset], from)
				fail("write", err)
				landed = true
			}
			rank[s]++
		})
		if !c.isDurable(now) {
			report.Writes++
			if landed {
				report.Kept++
			}
		}
	}
	syscall.Fsync(pf.fd)
}

// powerCut drops the volatile layer as the model says; every later change fails with EIO.
func (j *journal) powerCut(model string, seed uint64) cutReport {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.cut = true
	report := cutReport{Model: model, Seed: seed, FsyncEIOs: j.faults.fsyncEIOs, ENOSPCs: j.faults.enospcs}
	random := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	now := j.now()
	keep := 0.0
	if model == "subset" {
		keep = random.Float64()
		report.Keep = keep
	}

	files := slices.Collect(maps.Values(j.files))
	slices.SortFunc(files, func(a, b *pendingFile) int { return cmp.Compare(a.changes[0].seq, b.changes[0].seq) })
	plans := make([]*filePlan, len(files))
	for i, pf := range files {
		plans[i] = plan(pf, now)
		keepSome(plans[i], keep, random)
	}
	if model == "tear" {
		report.Torn = j.tear(plans, now, random)
	}
	for _, p := range plans {
		j.restore(p, now, &report)
		syscall.Close(p.pf.fd)
	}
	clear(j.files)

	j.cutEntries(now, keep, random, &report)
	os.RemoveAll(j.trash)
	return report
}

// cutEntries undoes the entry changes that do not land, newest first.
func (j *journal) cutEntries(now time.Time, keep float64, random *rand.Rand, report *cutReport) {
	lands := make([]bool, len(j.entries))
	for i, e := range j.entries {
		lands[i] = e.isDurable(now)
	}
	if keep > 0 {
		if j.fsyncCommitsEntries {
			for i := range lands {
				if !lands[i] {
					if random.Float64() >= keep {
						break
					}
					lands[i] = true
				}
			}
		} else {
			j.keepEntryPrefixes(lands, keep, random)
		}
	}
	for i := len(j.entries) - 1; i >= 0; i-- {
		e := j.entries[i]
		if lands[i] {
			if !e.isDurable(now) {
				report.KeptEntries++
			}
			continue
		}
		report.Entries++
		if len(report.Undone) < 20 {
			report.Undone = append(report.Undone, e.label)
		}
		if err := e.undo(); err != nil {
			report.Errors = append(report.Errors, fmt.Sprintf("%s: %v", e.label, err))
		}
	}
	for _, e := range j.entries {
		j.release(e.dirs...)
	}
	j.entries = nil
}

// keepEntryPrefixes lets a prefix of each directory's changes land: drawn per directory, then
// shortened until a change that names two directories lands only where it does in both.
func (j *journal) keepEntryPrefixes(lands []bool, keep float64, random *rand.Rand) {
	var order []uint64
	lists := map[uint64][]int{}
	position := map[uint64]map[int]int{} // directory, change: where the change is in its list
	for i, e := range j.entries {
		for _, d := range e.dirs {
			if _, seen := lists[d.ino]; !seen {
				order = append(order, d.ino)
				position[d.ino] = map[int]int{}
			}
			position[d.ino][i] = len(lists[d.ino])
			lists[d.ino] = append(lists[d.ino], i)
		}
	}
	prefix := map[uint64]int{}
	for _, ino := range order {
		list, n := lists[ino], 0
		for n < len(list) && lands[list[n]] {
			n++
		}
		for n < len(list) && random.Float64() < keep {
			n++
		}
		prefix[ino] = n
	}
	durable := slices.Clone(lands)
	for {
		for i, e := range j.entries {
			lands[i] = durable[i] || !slices.ContainsFunc(e.dirs, func(d *dirRef) bool {
				return position[d.ino][i] >= prefix[d.ino]
			})
		}
		changed := false
		for _, ino := range order {
			if first := slices.IndexFunc(lists[ino], func(i int) bool { return !lands[i] }); first >= 0 && first < prefix[ino] {
				prefix[ino] = first
				changed = true
			}
		}
		if !changed {
			return
		}
	}
}
