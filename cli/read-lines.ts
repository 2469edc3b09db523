// The lines of a text read whole (stdin for translate, --src for ddgviz): a final newline does not start another line.

/** Stdin's lines (a final newline does not start another sentence). */
export function readLines(text: string): string[] {
  const lines = text.split(/\r?\n/);
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  return lines;
}
