package flows_test

import (
	"testing"

	"github.com/assent-run/assent/api"
	"github.com/assent-run/assent/flow"
	"github.com/assent-run/assent/internal/assenttest"
	"github.com/assent-run/assent/wire"
)

// The answers of the Flows part, read as the types the part writes them
// from.

func decisionOf(t *testing.T, out any) flow.Decision {
	t.Helper()
	return assenttest.As[api.Prescription](t, out).Decision
}

// prescriptionID is the id of a prescribe answer's prescription, or "".
func prescriptionID(t *testing.T, out any) string {
	t.Helper()
	if p := decisionOf(t, out).Prescription; p != nil {
		return p.ID
	}
	return ""
}

// approvalOf is the approval a prescribe answer filed, or the zero one.
func approvalOf(t *testing.T, out any) flow.Approval {
	t.Helper()
	if a := assenttest.As[api.Prescription](t, out).Approval; a != nil {
		return *a
	}
	return flow.Approval{}
}

func instanceOf(t *testing.T, view any) flow.Instance {
	t.Helper()
	return assenttest.As[api.InstanceView](t, view).Instance
}

// errorOf is the error of an answer, or the zero error.
func errorOf(t *testing.T, out any) wire.Error {
	t.Helper()
	if e := assenttest.As[wire.Body](t, out).Error; e != nil {
		return *e
	}
	return wire.Error{}
}
