/** Types of scripts/typescript-sdk.mjs (the pinned TypeScript SDK 1.32 in tools/typescript-sdk). */
export declare const TYPESCRIPT_SDK_VERSION: string;
/** Why the pinned SDK cannot be used, or undefined when it can. */
export declare function typescriptSdkProblem(): string | undefined;
