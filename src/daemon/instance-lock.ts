// One kproxy per node, where "node" means network namespace: two daemons programming the same
// namespace's rules would undo each other's syncs.
//
// The lock is a listening unix socket in the ABSTRACT namespace, named after the inode of
// /proc/self/ns/net. Why this and not a pid file or flock:
// - abstract unix sockets are scoped to the network namespace by the kernel, so the lock is
//   per-namespace by construction: a kproxy per lab "node" (ip netns exec) works, two in one
//   namespace cannot; a lock file in /run would be shared across namespaces that share a mount
//   namespace, wrongly blocking the lab;
// - the kernel releases it when the process dies, however it dies: no stale pid file to judge;
// - it needs no writable path, which suits the unit's ProtectSystem=strict.
// The inode in the name is redundant with the kernel's scoping but makes `ss -xlp` readable. The
// holder answers each connection with its PID so the refusal can say who holds it.
import { readlink } from 'node:fs/promises';
import { createConnection, createServer, type Server } from 'node:net';

export interface InstanceLock {
  /** The abstract socket name, without the leading NUL. */
  readonly name: string;
  release(): Promise<void>;
}

export type LockResult =
  | { readonly ok: true; readonly lock: InstanceLock }
  | { readonly ok: false; readonly message: string };

/** "net:[4026531833]" → "4026531833". */
async function netnsInode(nsPath: string): Promise<string> {
  const link = await readlink(nsPath);
  return /\[(\d+)\]/.exec(link)?.[1] ?? link;
}

export async function acquireInstanceLock(
  options: { readonly nsPath?: string; readonly prefix?: string } = {},
): Promise<LockResult> {
  const inode = await netnsInode(options.nsPath ?? '/proc/self/ns/net');
  const name = `${options.prefix ?? 'kproxy'}-netns-${inode}`;
  const server: Server = createServer((socket) => socket.end(`${process.pid}\n`));
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(`\0${name}`, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
    const holder = await holderPid(name);
    return {
      ok: false,
      message: `another kproxy${holder ? ` (pid ${holder})` : ''} is already running in this network namespace (net:[${inode}]); only one may program a node's rules`,
    };
  }
  // The lock must not keep an otherwise finished process alive.
  server.unref();
  return {
    ok: true,
    lock: { name, release: () => new Promise<void>((resolve) => server.close(() => resolve())) },
  };
}

async function holderPid(name: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    let data = '';
    const socket = createConnection(`\0${name}`);
    socket.setEncoding('utf8');
    socket.setTimeout(1_000, () => socket.destroy());
    socket.on('data', (chunk: string) => {
      data += chunk;
    });
    socket.on('close', () => resolve(/^\d+/.exec(data)?.[0]));
    socket.on('error', () => resolve(undefined));
  });
}
