// V8 heap settings the gateway runs with everywhere (systemd unit, container, local run, tests,
// benchmarks): a capped old generation keeps a Pi's memory bounded (without it V8 lets garbage
// pile up to hundreds of MB before collecting). The young generation's 8 MB semi-spaces hold the
// garbage of the batches in flight, so it dies young instead of being promoted: batch ingest
// runs about half again as fast as with 2 MB, for about 10 MB more resident memory.
export const GATEWAY_NODE_OPTIONS = '--max-semi-space-size=8 --max-old-space-size=96';

// glibc's malloc settings the gateway runs with everywhere, as GLIBC_TUNABLES: blocks of 128 KiB
// and more are mapped on their own and handed back when freed. By default glibc raises that
// threshold to the largest block freed so far (up to 32 MiB), after which such blocks come from
// the arenas and their freed memory stays there: at idle, 6 to 21 MB of the gateway's private
// memory was free memory malloc held (docs/history/benchmarks.md, "Idle memory: what each megabyte is").
export const GATEWAY_GLIBC_TUNABLES = 'glibc.malloc.mmap_threshold=131072';
