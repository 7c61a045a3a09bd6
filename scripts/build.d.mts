/** Types of scripts/build.mjs (imported by the test harness and the benchmark). */
export declare const ROOT: string;
/** The compiled entry point of an app: `apps/<kind>/dist/main.js` (absolute path). */
export declare function appEntry(kind: 'gateway' | 'worker'): string;
/** Runs `tsc -b` at the repository root; throws with tsc's output when the build fails. */
export declare function build(): void;
