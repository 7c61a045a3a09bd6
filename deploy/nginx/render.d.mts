/** Types of deploy/nginx/render.mjs (renders deploy/nginx/mcp.conf.template for a local nginx). */
export declare const TEMPLATE_PATH: string;
/** The `${NAME}` placeholders of the template. */
export declare const PLACEHOLDERS: readonly string[];

export interface RenderOptions {
  /** `listen` value: a port or address:port. */
  listen: string | number;
  /** Gateway addresses `host:port`, round robin in this order. */
  gateways: string[];
  /** Turn on the template's Mcp-Method example: `tasks/get` goes to these `host:port`. */
  pollGateways?: string[];
  /** The gateways' MAX_BODY_BYTES (default: `$MAX_BODY_BYTES`, else 4 MiB). */
  maxBodyBytes?: string | number;
}

/** MAX_BODY_BYTES when it is not set (packages/config's default). */
export declare const DEFAULT_MAX_BODY_BYTES: number;
/** The parameters of each gateway's `server` line. */
export declare const SERVER_PARAMETERS: string;
/** MAX_BODY_BYTES for the template from an environment value (default when empty). Throws when not an integer >= 1024. */
export declare function maxBodyBytesOf(value: string | number | undefined): number;

export declare function renderMcpConf(o: RenderOptions & { accessLog: string }): string;

/** Writes `<dir>/mcp.conf` and the main `<dir>/nginx.conf` that includes it. */
export declare function writeLocalNginxConf(o: RenderOptions & { dir: string; accessLog?: string }): {
  conf: string;
  mcpConf: string;
  confPath: string;
};
