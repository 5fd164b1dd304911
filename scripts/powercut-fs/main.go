// powercut-fs mounts a pass-through of a backing directory whose changes that are not durable yet
// (writes since each file's last fsync, directory entry changes since the directory's last fsync)
// can be dropped on command: a simulated power cut. journal.go says what makes a change durable,
// cut.go what a cut may keep, entries.go how directory entries become durable.
//
//	powercut-fs -backing DIR -trash DIR -mount DIR -control SOCKET [-entries per-directory|ext4]
//	            [-writeback-after 30s [-writeback-every 5s]]
//	            [-fsync-eio P] [-enospc P] [-lying-flush 500ms] [-seed N]
//
// Without -writeback-after nothing becomes durable but by fsync (the strict model). With it, a
// flusher wakes every -writeback-every and makes durable what has been pending that long, as
// Linux does with vm.dirty_expire_centisecs=3000 and vm.dirty_writeback_centisecs=500 (the
// realistic model: a cut loses at most the last half minute or so). sync(2) and syncfs(2) make
// nothing durable: FUSE does not tell the file system of them.
//
// Faults, each drawn from the seeded generator: -fsync-eio P fails an fsync that has something to
// write with EIO, with chance P, and drops its writes as written ("fsyncgate": a later fsync
// succeeds without them); -enospc P fails a write or allocation that grows a file with ENOSPC,
// with chance P; -lying-flush D acknowledges every fsync at once but makes it durable only D later
// (a card that reports a flush before its cache is on flash).
//
// The trash directory must be on the backing directory's file system (it keeps unlinked files
// until their directory is fsynced). The control socket takes one command a line and answers one
// JSON line:
//
//	cut [drop|tear|subset] [SEED]  undo what is not durable, keeping what the model allows
//	                               (cut.go; drop by default); every later change fails with EIO
//	status     how many changes are pending
//	writeback  make every pending change durable (what the kernel does with old dirty data)
//	writeback-older MS  make durable what has been pending for at least MS milliseconds
//	fail-fsync dir|file [N]  the next N (1) directory fsyncs with entries to commit, or file
//	                         fsyncs with writes to make durable, fail with EIO
//	unmount    answer, unmount and exit
//
// It prints "ready" once the mount and the socket are up.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func main() {
	backing := flag.String("backing", "", "directory the mount passes through to")
	trash := flag.String("trash", "", "directory on the same file system for unlinked files")
	mountPoint := flag.String("mount", "", "where to mount")
	control := flag.String("control", "", "unix socket path for commands")
	entries := flag.String("entries", "per-directory", "what makes a directory entry change durable: per-directory (an fsync of its directory, as POSIX promises) or ext4 (any fsync, as ext4's journal does)")
	writebackAfter := flag.Duration("writeback-after", 0, "make changes pending this long durable, as the kernel's writeback does (0: only fsync makes anything durable)")
	writebackEvery := flag.Duration("writeback-every", 5*time.Second, "how often the writeback looks for old changes")
	fsyncEIO := flag.Float64("fsync-eio", 0, "chance that an fsync with something to write fails with EIO, its writes then dropped as written")
	enospc := flag.Float64("enospc", 0, "chance that a write or allocation that grows a file fails with ENOSPC")
	lie := flag.Duration("lying-flush", 0, "acknowledge every fsync at once and make it durable only this much later")
	seed := flag.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the faults' draws")
	flag.Parse()
	chance := func(p float64) bool { return p >= 0 && p <= 1 }
	if *backing == "" || *trash == "" || *mountPoint == "" || *control == "" || (*entries != "per-directory" && *entries != "ext4") ||
		*writebackAfter < 0 || *writebackEvery <= 0 || !chance(*fsyncEIO) || !chance(*enospc) || *lie < 0 {
		flag.Usage()
		os.Exit(2)
	}
	f := faults{random: rand.New(rand.NewPCG(*seed, *seed)), fsyncEIO: *fsyncEIO, enospc: *enospc, lie: *lie}
	if err := run(*backing, *trash, *mountPoint, *control, *entries == "ext4", f, *writebackAfter, *writebackEvery); err != nil {
		fmt.Fprintln(os.Stderr, "powercut-fs:", err)
		os.Exit(1)
	}
}

func run(backing, trash, mountPoint, control string, fsyncCommitsEntries bool, f faults, writebackAfter, writebackEvery time.Duration) error {
	if err := os.RemoveAll(trash); err != nil {
		return err
	}
	if err := os.MkdirAll(trash, 0o700); err != nil {
		return err
	}
	j := newJournal(backing, trash, fsyncCommitsEntries, f)
	root, err := newRoot(backing, j)
	if err != nil {
		return err
	}
	// No kernel caching of names or attributes: after a cut nothing stale may be served.
	zero := time.Duration(0)
	server, err := fs.Mount(mountPoint, root, &fs.Options{
		EntryTimeout: &zero,
		AttrTimeout:  &zero,
		MountOptions: fuse.MountOptions{FsName: "powercut", Name: "powercut", DirectMount: true},
	})
	if err != nil {
		return fmt.Errorf("mount %s: %w", mountPoint, err)
	}
	os.Remove(control)
	listener, err := net.Listen("unix", control)
	if err != nil {
		server.Unmount()
		return err
	}
	defer os.Remove(control)

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		unmount(server)
	}()
	go serveControl(listener, j, server)
	if writebackAfter > 0 {
		go flushOld(j, writebackAfter, writebackEvery)
	}
	fmt.Println("ready")
	server.Wait()
	return nil
}

// flushOld is the kernel's periodic writeback of old dirty data; it stops with the cut.
func flushOld(j *journal, after, every time.Duration) {
	for range time.Tick(every) {
		if j.writeBackOlder(after).Cut {
			return
		}
	}
}

// unmount retries for a while (the kernel refuses while a process still has a file open), then
// gives up and exits, leaving the mount to a lazy unmount.
func unmount(server *fuse.Server) {
	var err error
	for attempt := 0; attempt < 100; attempt++ {
		if err = server.Unmount(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintln(os.Stderr, "powercut-fs: unmount:", err)
	os.Exit(1)
}

func serveControl(listener net.Listener, j *journal, server *fuse.Server) {
	for {
		conn, err := listener.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			lines := bufio.NewScanner(conn)
			encoder := json.NewEncoder(conn)
			for lines.Scan() {
				command := strings.TrimSpace(lines.Text())
				if command == "unmount" {
					// Answered first: the process exits once the unmount is through.
					encoder.Encode(map[string]bool{"unmounting": true})
					unmount(server)
					continue
				}
				answer, err := answerControl(j, command)
				if err != nil {
					answer = map[string]string{"error": err.Error()}
				}
				encoder.Encode(answer)
			}
		}()
	}
}

// answerControl carries out one control command other than unmount and returns its answer.
func answerControl(j *journal, command string) (any, error) {
	words := strings.Fields(command)
	if len(words) == 0 {
		return nil, fmt.Errorf("unknown command %s", command)
	}
	switch {
	case command == "status":
		return j.status(), nil
	case command == "writeback":
		return j.writeBack(), nil
	case words[0] == "writeback-older":
		ms := strings.Join(words[1:], " ")
		age, err := strconv.ParseUint(ms, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("writeback-older takes milliseconds, not %s", ms)
		}
		return j.writeBackOlder(time.Duration(age) * time.Millisecond), nil
	case words[0] == "fail-fsync":
		dirs, n, err := failFsyncCommand(words[1:])
		if err != nil {
			return nil, err
		}
		return j.failNextFsyncs(dirs, n), nil
	case words[0] == "cut":
		model, seed, err := cutCommand(words[1:])
		if err != nil {
			return nil, err
		}
		return j.powerCut(model, seed), nil
	}
	return nil, fmt.Errorf("unknown command %s", command)
}

// cutCommand reads "cut [drop|tear|subset] [SEED]"'s arguments; without a seed it draws one.
func cutCommand(args []string) (string, uint64, error) {
	model, seed := "drop", rand.Uint64()
	if len(args) > 0 {
		model = args[0]
	}
	if model != "drop" && model != "tear" && model != "subset" {
		return "", 0, fmt.Errorf("cut takes drop, tear or subset, not %s", model)
	}
	if len(args) > 1 {
		n, err := strconv.ParseUint(args[1], 10, 64)
		if err != nil {
			return "", 0, fmt.Errorf("cut takes a decimal seed, not %s", args[1])
		}
		seed = n
	}
	if len(args) > 2 {
		return "", 0, fmt.Errorf("cut takes a model and a seed, not %s", strings.Join(args, " "))
	}
	return model, seed, nil
}

// failFsyncCommand reads "fail-fsync dir|file [N]"'s arguments.
func failFsyncCommand(args []string) (bool, int, error) {
	if len(args) == 0 || len(args) > 2 || (args[0] != "dir" && args[0] != "file") {
		return false, 0, fmt.Errorf("fail-fsync takes dir or file and a count, not %s", strings.Join(args, " "))
	}
	n := uint64(1)
	if len(args) == 2 {
		parsed, err := strconv.ParseUint(args[1], 10, 16)
		if err != nil {
			return false, 0, fmt.Errorf("fail-fsync takes a decimal count, not %s", args[1])
		}
		n = parsed
	}
	return args[0] == "dir", int(n), nil
}
