/** Types of the part of scripts/local-redis.mjs the TypeScript test support uses. */
/** The nginx binary ($NGINX_BIN when set, else the usual sbin paths, then PATH), or undefined. */
export declare function findNginx(): string | undefined;
