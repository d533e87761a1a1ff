import type { ReadStream } from 'node:tty';

/** Thrown when the person at the terminal gives up (Ctrl-C, or Ctrl-D on an empty line). */
export class PromptCancelled extends Error {
  constructor() {
    super('cancelled');
    this.name = 'PromptCancelled';
  }
}

/**
 * Reads one line from a terminal without echoing it: the terminal goes to raw mode (no echo), and the
 * keys are handled here: Enter ends the line, Backspace deletes, Ctrl-U clears, Ctrl-C and Ctrl-D
 * cancel. The prompt goes to `out` (stderr, so stdout stays the command's output).
 */
export function readHidden(prompt: string, input: ReadStream, out: NodeJS.WritableStream): Promise<string> {
  return new Promise((resolve, reject) => {
    let line = '';
    const finish = (err?: Error) => {
      input.off('data', onData);
      input.setRawMode(false);
      input.pause();
      out.write('\n');
      if (err) reject(err);
      else resolve(line);
    };
    const onData = (chunk: string) => {
      for (const ch of chunk) {
        if (ch === '\r' || ch === '\n') return finish();
        if (ch === '\u0003' || (ch === '\u0004' && line === '')) return finish(new PromptCancelled());
        if (ch === '\u007f' || ch === '\b') line = Array.from(line).slice(0, -1).join('');
        else if (ch === '\u0015') line = '';
        else if (ch >= ' ') line += ch;
      }
    };
    // No echo before the prompt shows: keys typed as soon as it appears must not be echoed.
    input.setEncoding('utf8');
    input.setRawMode(true);
    out.write(prompt);
    input.on('data', onData);
    input.resume();
  });
}
