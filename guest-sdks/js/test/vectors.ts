// Finds the test vectors shared by the SDKs (guest-sdks/test-vectors) from the working
// directory upward, since the tests run compiled from a scratch directory.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The parsed JSON of `guest-sdks/test-vectors/<name>`. */
export function readVectors(name: string): any {
  for (let dir = process.cwd(); ; dir = dirname(dir)) {
    for (const path of [join(dir, 'test-vectors', name), join(dir, 'guest-sdks', 'test-vectors', name)]) {
      if (existsSync(path)) {
        return JSON.parse(readFileSync(path, 'utf8'));
      }
    }
    if (dirname(dir) === dir) {
      throw new Error(`guest-sdks/test-vectors/${name} not found from ${process.cwd()}: run the tests inside the repository`);
    }
  }
}
