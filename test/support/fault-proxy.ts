// The tests' fault-injecting proxy is the fault runs' one (scripts/lib/fault-proxy.mjs).
export { FaultProxy, type ProxyMode } from '../../scripts/lib/fault-proxy.mjs';
