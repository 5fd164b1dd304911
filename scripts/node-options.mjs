// V8 heap settings the gateway runs with everywhere (systemd unit, container, local run, tests,
// benchmarks): a small young generation and a capped old generation keep a Pi's memory bounded;
// without them V8 lets garbage pile up to hundreds of MB before collecting.
export const GATEWAY_NODE_OPTIONS = '--max-semi-space-size=2 --max-old-space-size=96';
