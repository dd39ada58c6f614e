// {{name}}: a Tally function that returns its input unchanged.

export function handle(input: Uint8Array): Uint8Array {
  return input;
}
