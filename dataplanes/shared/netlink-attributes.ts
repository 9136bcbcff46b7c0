// Netlink attributes (struct nlattr: u16 length, u16 type, payload padded to 4 bytes), host byte
// order as the kernel reads them (little-endian on every machine kproxy targets).

const HEADER = 4;
/** NLA_F_NESTED | NLA_F_NET_BYTEORDER: flags in the type field, not part of the type. */
const TYPE_MASK = 0x3fff;

function align(length: number): number {
  return (length + 3) & ~3;
}

export function attribute(type: number, payload: Buffer): Buffer {
  const out = Buffer.alloc(align(HEADER + payload.length));
  out.writeUInt16LE(HEADER + payload.length, 0);
  out.writeUInt16LE(type, 2);
  payload.copy(out, HEADER);
  return out;
}

export function nested(type: number, attributes: readonly Buffer[]): Buffer {
  return attribute(type, Buffer.concat(attributes));
}

export function u16(type: number, value: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(value);
  return attribute(type, b);
}

/** A 16-bit value in network byte order (ports). */
export function be16(type: number, value: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(value);
  return attribute(type, b);
}

export function u32(type: number, value: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(value >>> 0);
  return attribute(type, b);
}

/** A NUL-terminated string. */
export function string(type: number, value: string): Buffer {
  return attribute(type, Buffer.from(`${value}\0`, 'utf8'));
}

/** The attributes of a message body or nested attribute, by type (the last one wins). */
export function parseAttributes(data: Buffer): Map<number, Buffer> {
  const out = new Map<number, Buffer>();
  let offset = 0;
  while (offset + HEADER <= data.length) {
    const length = data.readUInt16LE(offset);
    if (length < HEADER || offset + length > data.length) {
      throw new Error(`malformed netlink attribute at offset ${offset} (length ${length})`);
    }
    out.set(data.readUInt16LE(offset + 2) & TYPE_MASK, data.subarray(offset + HEADER, offset + length));
    offset += align(length);
  }
  return out;
}
