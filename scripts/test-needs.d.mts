/** Types of scripts/test-needs.mjs (the `// @needs` line of a test file), for the TypeScript tests. */
/** Every need a header may name, with what the files use it for. */
export declare const NEEDS: {
  redis: string;
  'redis-server': string;
  nginx: string;
  tmux: string;
  'python-clients': string;
  'typescript-sdk': string;
};
/** The needs a test file's text declares, sorted; throws on an unknown need or a second line. */
export declare function declaredNeeds(text: string, file?: string): (keyof typeof NEEDS)[];
/** Each need declared by some of `files` (relative to `root`), with those files. */
export declare function needsOfFiles(root: string, files: string[]): Map<keyof typeof NEEDS, string[]>;
/** "a, b, c and 4 more". */
export declare function fewFiles(files: string[], max?: number): string;
