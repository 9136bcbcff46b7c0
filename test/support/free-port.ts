// A TCP port on 127.0.0.1 that was free a moment ago, for a server a test must start on a known
// port (a later start on port 0 could not be told its number in advance).
import { createServer } from 'node:net';

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}
