// Package e2e holds end-to-end tests that drive assent as its users do: an
// agent through the official MCP client and a person through a real browser
// (headless Chromium, driven with chromedp).
//
// The browser tests skip with a message when Chromium is not installed; CI
// installs it (see .ci/run). Set ASSENT_CHROMIUM to use another binary and
// ASSENT_SCREENSHOTS to a directory to keep the screenshots.
package e2e
