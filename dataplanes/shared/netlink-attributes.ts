// Netlink attributes (struct nlattr: u16 length, u16 type, payload padded to 4 bytes), host byte
// order as the kernel reads them (little-endian on every machine kproxy targets).

const HEADER = 4;
/** NLA_F_NESTED | NLA_F_NET_BYTEORDER: flags in the type field, not part of the type. */
const TYPE_MASK = 0x3fff;
/** nla_len is 16 bits. */
const MAX_ATTRIBUTE = 0xffff;

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

/**
 * Attributes written in place into one growing buffer: no Buffer per attribute (the functions above
 * allocate one or two each), for senders of many messages (the IPVS dataplane's commands).
 */
export class AttributeWriter {
  #buffer: Buffer;
  #length = 0;

  /** `size`: the bytes to start with (it grows, copying, past them). */
  constructor(size = 4096) {
    this.#buffer = Buffer.alloc(size);
  }

  /** Bytes written so far. */
  get length(): number {
    return this.#length;
  }

  /** Room for `size` more bytes, zeroed; where they start. */
  skip(size: number): number {
    const at = this.#length;
    const end = at + align(size);
    if (end > this.#buffer.length) {
      const grown = Buffer.alloc(Math.max(end, this.#buffer.length * 2));
      this.#buffer.copy(grown, 0, 0, at);
      this.#buffer = grown;
    }
    this.#length = end;
    return at;
  }

  // Plain byte stores, not Buffer's write methods: a cold start writes millions of fields, and
  // those check their arguments on every call (a third of encoding in a CPU profile).
  setU8(at: number, value: number): void {
    this.#buffer[at] = value;
  }

  setU16(at: number, value: number): void {
    const b = this.#buffer;
    b[at] = value;
    b[at + 1] = value >>> 8;
  }

  setU32(at: number, value: number): void {
    const b = this.#buffer;
    b[at] = value;
    b[at + 1] = value >>> 8;
    b[at + 2] = value >>> 16;
    b[at + 3] = value >>> 24;
  }

  /** A 32-bit value in network byte order (nf_tables verdict codes). */
  setU32BE(at: number, value: number): void {
    const b = this.#buffer;
    b[at] = value >>> 24;
    b[at + 1] = value >>> 16;
    b[at + 2] = value >>> 8;
    b[at + 3] = value;
  }

  setBytes(at: number, bytes: Uint8Array): void {
    this.#buffer.set(bytes, at);
  }

  /** An attribute of `size` payload bytes, zeroed; where its payload starts. */
  attribute(type: number, size: number): number {
    if (HEADER + size > MAX_ATTRIBUTE) throw new RangeError(`a netlink attribute of ${size} bytes`);
    const at = this.skip(HEADER + size);
    this.setU16(at, HEADER + size);
    this.setU16(at + 2, type);
    return at + HEADER;
  }

  // Each writer below takes its offset first: attribute() may grow the buffer (a new one).
  u16(type: number, value: number): void {
    this.setU16(this.attribute(type, 2), value);
  }

  /** A 16-bit value in network byte order (ports). */
  be16(type: number, value: number): void {
    const at = this.attribute(type, 2);
    this.#buffer.writeUInt16BE(value, at);
  }

  u32(type: number, value: number): void {
    this.setU32(this.attribute(type, 4), value);
  }

  bytes(type: number, payload: Uint8Array): void {
    const at = this.attribute(type, payload.length);
    this.#buffer.set(payload, at);
  }

  /** A NUL-terminated ASCII string. */
  string(type: number, value: string): void {
    const at = this.attribute(type, value.length + 1);
    this.#buffer.write(value, at, 'latin1');
  }

  /** Opens a nested attribute: the attributes written until end(at) are its payload. */
  begin(type: number): number {
    const at = this.skip(HEADER);
    this.setU16(at + 2, type);
    return at;
  }

  end(at: number): void {
    const length = this.#length - at;
    if (length > MAX_ATTRIBUTE) throw new RangeError(`a nested netlink attribute of ${length} bytes`);
    this.setU16(at, length);
  }

  /** A copy of what was written. */
  bytesWritten(): Buffer {
    return Buffer.from(this.#buffer.subarray(0, this.#length));
  }

  /** What was written, not copied: for a writer done with (a later write may change it). */
  view(): Buffer {
    return this.#buffer.subarray(0, this.#length);
  }
}
