// Loopback UDP traffic inside the bench's namespace (conntrack-cut.ts), one datagram per flow:
//   fill N: N flows from one socket to 127.1.0.0/16 ports (unanswered: the table's bulk);
//   cut N FIRST: N flows from 127.0.0.1 ports FIRST.. to the virtual address's port 53 (DNATed).
import { createSocket, type Socket } from 'node:dgram';

const [mode, countText, firstText] = process.argv.slice(2);
const count = Number(countText);
const send = (socket: Socket, address: string, port: number) =>
  new Promise<void>((resolve, reject) =>
    socket.send(Buffer.from('x'), port, address, (error) => (error ? reject(error) : resolve())),
  );

if (mode === 'fill') {
  const socket = createSocket('udp4');
  // Up to 1,000 sends at a time; a flow per destination (address, port).
  for (let i = 0; i < count; i += 1000) {
    const batch: Promise<void>[] = [];
    for (let j = i; j < Math.min(count, i + 1000); j++)
      batch.push(send(socket, `127.1.${(j >> 8) & 0xff}.${j & 0xff}`, 1024 + (j >> 16)));
    await Promise.all(batch);
  }
  socket.close();
} else {
  for (let i = 0; i < count; i++) {
    const socket = createSocket('udp4');
    await new Promise<void>((resolve) => socket.bind(Number(firstText) + i, '127.0.0.1', resolve));
    await send(socket, '10.20.30.42', 53);
    socket.close();
  }
}
