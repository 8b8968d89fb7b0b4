// server-everything, ignoring SIGTERM: an upstream slow to stop, for the proxy's
// shutdown tests (only SIGKILL ends it once its stdin has closed and a timer runs).
process.on("SIGTERM", () => {});
await import("./node_modules/@modelcontextprotocol/server-everything/dist/index.js");
