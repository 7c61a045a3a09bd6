/** Types of scripts/python-clients.mjs (the venv of the Python MCP clients), for the TypeScript tests. */
export declare const ROOT: string;
/** tools/python/.venv */
export declare const VENV: string;
/** The venv's Python. */
export declare const PYTHON: string;
/** The versions the Python clients test is written for. */
export declare const PINNED: { mcp: string; fastmcp: string };
/** Why the venv cannot run the clients, or undefined when it can. */
export declare function pythonClientsProblem(): string | undefined;
