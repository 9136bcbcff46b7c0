// The nftables tests build their states from the shared ProxyState fixtures.
export * from '../../../harness/proxy-states.ts';
