// Package rules is the standing rules part of the server: a person's
// "allow this agent to set this control to these values until this time".
// It serves /v1/rules and the /rules page, makes rules from inbox cards,
// and tells the controls part which staged values a live rule lets
// through — only while the rule's creator may still apply them.
package rules
