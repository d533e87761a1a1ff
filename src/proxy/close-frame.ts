/**
 * Watches one direction of a tunnel for a WebSocket close frame (opcode 0x8, RFC 6455 section 5.5.1)
 * by reading frame headers only and skipping payloads, so the tunnel can say which side closed it:
 * after a close handshake the server drops TCP first whoever asked, so the first FIN says nothing.
 * It stops being asked once it has seen one.
 */
export class CloseFrameWatch {
  private header: number[] = [];
  private skip = 0;

  /** Feeds the next bytes of this direction; true once a close frame starts in them. */
  sawClose(chunk: Buffer): boolean {
    let i = 0;
    while (i < chunk.length) {
      if (this.skip > 0) {
        const n = Math.min(this.skip, chunk.length - i);
        this.skip -= n;
        i += n;
        continue;
      }
      this.header.push(chunk[i++]!);
      const h = this.header;
      if (h.length < 2) continue;
      const len7 = h[1]! & 0x7f;
      const need = 2 + (len7 === 126 ? 2 : len7 === 127 ? 8 : 0) + (h[1]! & 0x80 ? 4 : 0);
      if (h.length < need) continue;
      if ((h[0]! & 0x0f) === 0x8) return true;
      this.skip = len7 < 126 ? len7 : len7 === 126 ? (h[2]! << 8) | h[3]! : Number(Buffer.from(h.slice(2, 10)).readBigUInt64BE());
      this.header = [];
    }
    return false;
  }
}
