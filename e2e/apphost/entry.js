// The host half of MCP Apps, as a test page loads it.
export { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";
