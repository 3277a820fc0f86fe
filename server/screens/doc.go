// Package screens is the server's surface for screens: Omni IR streams an
// agent or application shows, their live feeds, the tools their governed
// buttons call (with the application's own confirmation), /api/mutate and
// /api/live, the show_screen tool, the screen pages and the MCP Apps view.
package screens
