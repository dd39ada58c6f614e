// {{name}}: a Tally function that returns its input unchanged.

/** @param {Uint8Array} input */
export function handle(input) {
  return input;
}
