// powercut-fs mounts a pass-through of a backing directory whose writes since each file's last
// fsync, and directory entry changes since the directory's last fsync, can be dropped on command:
// a simulated power cut.
//
//	powercut-fs -backing DIR -trash DIR -mount DIR -control SOCKET [-entries per-directory|ext4]
//	            [-writeback-after 30s [-writeback-every 5s]]
//
// Without -writeback-after nothing becomes durable but by fsync (the strict model). With it, a
// flusher wakes every -writeback-every and makes durable what has been pending that long, as
// Linux does with vm.dirty_expire_centisecs=3000 and vm.dirty_writeback_centisecs=500 (the
// realistic model: a cut loses at most the last half minute or so).
//
// The trash directory must be on the backing directory's file system (it keeps unlinked files
// until their directory is fsynced). The control socket takes one command a line and answers one
// JSON line:
//
//	cut        drop the unsynced writes and entry changes; every later change fails with EIO
//	cut tear   the same, but the newest unsynced write is left half written
//	status     how many changes are pending
//	writeback  make every pending change durable (what the kernel does with old dirty data)
//	writeback-older MS  make durable what has been pending for at least MS milliseconds
//	unmount    answer, unmount and exit
//
// It prints "ready" once the mount and the socket are up.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
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
	flag.Parse()
	if *backing == "" || *trash == "" || *mountPoint == "" || *control == "" || (*entries != "per-directory" && *entries != "ext4") || *writebackAfter < 0 || *writebackEvery <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*backing, *trash, *mountPoint, *control, *entries == "ext4", *writebackAfter, *writebackEvery); err != nil {
		fmt.Fprintln(os.Stderr, "powercut-fs:", err)
		os.Exit(1)
	}
}

func run(backing, trash, mountPoint, control string, fsyncCommitsEntries bool, writebackAfter, writebackEvery time.Duration) error {
	if err := os.RemoveAll(trash); err != nil {
		return err
	}
	if err := os.MkdirAll(trash, 0o700); err != nil {
		return err
	}
	j := newJournal(trash, fsyncCommitsEntries)
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
				if ms, ok := strings.CutPrefix(command, "writeback-older "); ok {
					age, err := strconv.ParseUint(ms, 10, 32)
					if err != nil {
						encoder.Encode(map[string]string{"error": "writeback-older takes milliseconds, not " + ms})
						continue
					}
					encoder.Encode(j.writeBackOlder(time.Duration(age) * time.Millisecond))
					continue
				}
				switch command {
				case "cut", "cut tear":
					encoder.Encode(j.powerCut(command == "cut tear"))
				case "status":
					encoder.Encode(j.status())
				case "writeback":
					encoder.Encode(j.writeBack())
				case "unmount":
					// Answered first: the process exits once the unmount is through.
					encoder.Encode(map[string]bool{"unmounting": true})
					unmount(server)
				default:
					encoder.Encode(map[string]string{"error": "unknown command " + command})
				}
			}
		}()
	}
}
