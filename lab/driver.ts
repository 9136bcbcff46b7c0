// The one interface every lab implements, so the SAME scenario checks run against the netns lab
// (namespaces on one machine) and the Vagrant lab (VMs with a kubeadm control plane).
//
// A lab has nodes running kproxy, test pods running the echo server (harness/echo-server.ts:
// it answers every TCP connection and UDP datagram with its pod name and the peer address it saw,
// on TCP port ECHO_TCP_PORT and UDP port ECHO_UDP_PORT), and an external client outside the
// cluster. Scenarios write selector-less Services and their EndpointSlices themselves, so both labs
// serve exactly the endpoints a scenario chose, with or without an endpoint controller.

/** Where the echo server listens in every test pod. */
export const ECHO_TCP_PORT = 8080;
export const ECHO_UDP_PORT = 8053;

export type Protocol = 'tcp' | 'udp';

/** Where a client connection starts. */
export type Place =
  | { readonly kind: 'external' }
  | { readonly kind: 'pod'; readonly pod: string }
  | { readonly kind: 'node'; readonly node: string };

export interface LabNode {
  readonly name: string;
  /** The node's InternalIP (IPv4): where node ports and health check node ports answer. */
  readonly address: string;
}

export interface LabPod {
  readonly name: string;
  readonly node: string;
  readonly address: string;
}

/** One connection attempt: which backend answered and the client address it saw, or why not. */
export type Outcome = { readonly backend: string; readonly sourceIp: string } | { readonly error: string };

/** One TCP connection kept open, echoing every 100 ms. */
export interface HeldConnection {
  /** The backend that accepted it. */
  readonly backend: string;
  /** True while echoes keep coming back; false once the connection broke. */
  alive(): Promise<boolean>;
  close(): Promise<void>;
}

export interface HttpAnswer {
  /** 0 when nothing answered. */
  readonly status: number;
  readonly body: string;
}

/** A Kubernetes object in API JSON form (Service or EndpointSlice). */
export type KubeJson = Readonly<Record<string, unknown>> & {
  readonly kind: 'Service' | 'EndpointSlice';
  readonly metadata: {
    readonly namespace: string;
    readonly name: string;
    readonly labels?: Readonly<Record<string, string>>;
  };
};

export interface LabDriver {
  /** E.g. "netns/nftables"; shown in reports. */
  readonly name: string;
  nodes(): readonly LabNode[];
  pods(): readonly LabPod[];
  /** The external client's own address, to tell a kept source IP from a masqueraded one. */
  readonly externalAddress: string;
  /** Creates the object, or replaces it when it exists. */
  apply(object: KubeJson): Promise<void>;
  /** Deletes the object; absent is fine. */
  remove(object: KubeJson): Promise<void>;
  /** `count` sequential connections (UDP: datagrams, each from a new socket). */
  connect(
    from: Place,
    protocol: Protocol,
    host: string,
    port: number,
    options: { readonly count: number; readonly timeoutMs: number },
  ): Promise<Outcome[]>;
  /** Opens one long-lived TCP connection. */
  hold(from: Place, host: string, port: number): Promise<HeldConnection>;
  /** An HTTP GET (e.g. a health check node port) from a place; status 0 when unreachable. */
  httpGet(from: Place, url: string): Promise<HttpAnswer>;
  /**
   * The pod's backend goes away, closing its connections, and a replacement comes up: in the netns
   * lab the pod's echo server restarts; in the Vagrant lab the pod is deleted and its DaemonSet
   * makes a new one (a new name and address, listed by pods()).
   */
  restartBackend(pod: string): Promise<void>;
  /** Restarts kproxy on every node and returns once each has done its first (full) sync again. */
  restartProxies(): Promise<void>;
}
