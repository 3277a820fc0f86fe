package screens

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/screen"
	"github.com/assent-run/assent/screen/field"
)

// fieldInfo is what the server knows of one field of a screen.
type fieldInfo struct {
	id, typ, key string
	app          bool
	props        map[string]any
}

// fieldsLocked lists the screen's fields in document order; sc.mu is held.
func (sc *liveScreen) fieldsLocked() []fieldInfo {
	var out []fieldInfo
	for _, n := range sc.doc.Nodes() {
		k := sc.doc.Edits(n.ID)
		if k == "" {
			continue
		}
		out = append(out, fieldInfo{id: n.ID, typ: n.Type, key: k, app: n.App, props: n.Props})
	}
	return out
}

// secretKeysLocked returns the $keys whose values are secret: those the
// application named for the screen, and those a mutation passes as one of
// its tool's secret params. The stream never decides it; sc.mu is held.
func (s *Part) secretKeysLocked(sc *liveScreen) map[string]bool {
	out := map[string]bool{}
	for k := range sc.secret {
		out[k] = true
	}
	for _, m := range sc.doc.Mutations() {
		t, ok := s.screenTools.Lookup(m.Tool)
		if !ok {
			continue
		}
		for _, name := range t.Secret {
			if ref, ok := m.Params[name].(screen.StateRef); ok {
				out[string(ref)] = true
			}
		}
	}
	return out
}

// problemLocked checks a field's current value; sc.mu is held.
func (sc *liveScreen) problemLocked(f fieldInfo) *field.Problem {
	v, _ := sc.doc.State(f.key)
	return f.problem(v)
}

// problem checks v as the field's value.
func (f fieldInfo) problem(v any) *field.Problem {
	if f.app {
		if f.props["required"] == true {
			return field.CheckAppField(f.props, v)
		}
		return nil
	}
	return field.Check(f.typ, f.props, v)
}

// syncScreenControls registers every field of the screen as a control of
// the form named by the screen's id (visible to its owner and to people),
// when the fields changed since the last registration.
func (s *Part) syncScreenControls(sc *liveScreen) {
	sc.syncMu.Lock()
	defer sc.syncMu.Unlock()
	sc.mu.Lock()
	if sc.closed {
		sc.mu.Unlock()
		return
	}
	fields := sc.fieldsLocked()
	secret := s.secretKeysLocked(sc)
	var sig strings.Builder
	for _, f := range fields {
		fmt.Fprintf(&sig, "%s|%s|%s|%v|%p;", f.id, f.typ, f.key, secret[f.key], f.props)
	}
	if sig.String() == sc.fields {
		sc.mu.Unlock()
		return
	}
	sc.fields = sig.String()
	regs := make([]control.Registration, 0, len(fields))
	for _, f := range fields {
		regs = append(regs, s.fieldRegistration(sc, f, secret[f.key]))
	}
	old := sc.removeControls
	sc.removeControls = nil
	sc.mu.Unlock()

	if len(regs) == 0 {
		if old != nil {
			old()
		}
		return
	}
	remove, err := s.controls.RegisterPrivateForm(sc.owner.ID, sc.id, regs)
	if err != nil {
		s.Log.Warn("screen fields could not be registered as controls", "screen", sc.id, "err", err)
		return
	}
	sc.mu.Lock()
	if sc.closed {
		sc.mu.Unlock()
		remove()
		return
	}
	sc.removeControls = remove
	sc.mu.Unlock()
}

// fieldRegistration describes one field as a control: metadata from its
// props, sensitivity from the application, value handles over the screen's
// state and validity from field.Check.
func (s *Part) fieldRegistration(sc *liveScreen, f fieldInfo, secret bool) control.Registration {
	md := control.Metadata{Kind: control.KindText, Sensitivity: control.Personal}
	if l, ok := f.props["label"].(string); ok {
		md.Label = l
	}
	cons := &control.Constraints{}
	if f.props["required"] == true {
		cons.Required = true
	}
	switch f.typ {
	case "Input":
		switch f.props["format"] {
		case "email":
			md.Kind = control.KindEmail
		}
		if n, ok := f.props["lines"].(float64); ok && n > 1 {
			md.Kind = control.KindTextarea
		}
		if n, ok := f.props["minLength"].(float64); ok {
			v := int(n)
			cons.MinLength = &v
		}
		if n, ok := f.props["maxLength"].(float64); ok {
			v := int(n)
			cons.MaxLength = &v
		}
	case "DateInput":
		md.Kind = control.KindDate
		if v, ok := f.props["min"].(string); ok {
			cons.Min = v
		}
		if v, ok := f.props["max"].(string); ok {
			cons.Max = v
		}
	case "Select":
		md.Kind = control.KindSelect
		if opts, ok := f.props["options"].([]screen.Value); ok {
			for _, o := range opts {
				if str, ok := o.(string); ok {
					md.Options = append(md.Options, control.Option{Value: str, Label: str})
				}
			}
		}
	case "Switch":
		md.Kind = control.KindSwitch
	default:
		md.Kind = control.KindCustom
	}
	if secret {
		md.Sensitivity = control.Secret
		if md.Kind == control.KindText {
			md.Kind = control.KindPassword
		}
	}
	if *cons != (control.Constraints{}) {
		md.Constraints = cons
	}
	get := func(ctx context.Context) (any, error) {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		v, _ := sc.doc.State(f.key)
		return v, nil
	}
	set := func(ctx context.Context, v any) error {
		if err := checkFieldValue(f.typ, v); err != nil {
			return err
		}
		var serr error
		err := s.changeFromControl(ctx, sc, func() error {
			if serr = sc.doc.SetState(f.key, v); serr != nil {
				return errNoChange
			}
			return nil
		})
		switch {
		case serr != nil:
			return serr
		case isToolCode(err, "not_found"):
			return fmt.Errorf("the screen is closed")
		case isToolCode(err, codeVersionConflict):
			return err
		case err != nil:
			// The value shows; the next save of the screen writes it.
			s.Log.Warn("a screen field's value was not saved", "screen", sc.id, "err", err)
		}
		s.publishScreen(sc, map[string]any{"screen": sc.id})
		return nil
	}
	clear := func(ctx context.Context) error {
		if f.typ == "Switch" {
			return set(ctx, false)
		}
		return set(ctx, "")
	}
	state := func(ctx context.Context) (control.State, error) {
		sc.mu.Lock()
		p := sc.problemLocked(f)
		sc.mu.Unlock()
		valid := p == nil
		return control.State{Valid: &valid, ValidationMessage: s.screenMessages.Text(p)}, nil
	}
	validate := func(ctx context.Context) (bool, error) {
		var p *field.Problem
		err := s.changeFromControl(ctx, sc, func() error {
			p = sc.problemLocked(f)
			sc.touched[f.id] = true
			return nil
		})
		if err != nil && !isToolCode(err, "not_found") {
			s.Log.Warn("a screen field's message was not saved", "screen", sc.id, "err", err)
		}
		s.publishScreen(sc, map[string]any{"screen": sc.id})
		return p == nil, nil
	}
	// An agent points at a field: the person's open page scrolls to it, or
	// marks it for a while. Neither moves the person's focus.
	reveal := func(ctx context.Context) error {
		s.publishScreen(sc, map[string]any{"screen": sc.id, "reveal": f.id})
		return nil
	}
	highlight := func(ctx context.Context, d time.Duration) error {
		if d <= 0 {
			d = 3 * time.Second
		}
		now := time.Now()
		sc.mu.Lock()
		if sc.marks == nil {
			sc.marks = map[string]time.Time{}
		}
		for id, until := range sc.marks {
			if !until.After(now) {
				delete(sc.marks, id)
			}
		}
		sc.marks[f.id] = now.Add(d)
		sc.mu.Unlock()
		s.publishScreen(sc, map[string]any{"screen": sc.id, "highlight": f.id, "ms": d.Milliseconds()})
		return nil
	}
	return control.Registration{
		Identity: control.Identity{FormID: sc.id, ControlID: f.id},
		Metadata: md,
		Handles: control.Handles{GetValue: get, SetValue: set, Clear: clear, GetState: state, Validate: validate,
			Reveal: reveal, Highlight: highlight},
	}
}

// checkFieldValue refuses a value a field of type typ can't hold.
func checkFieldValue(typ string, v any) error {
	switch typ {
	case "Input", "Select", "DateInput":
		if _, ok := v.(string); !ok {
			return fmt.Errorf("a %s holds text; send a string", typ)
		}
	case "Switch":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("a Switch holds true or false")
		}
	default:
		switch v.(type) {
		case nil, string, float64, bool:
		default:
			return fmt.Errorf("this field holds text, a number or true or false")
		}
	}
	return nil
}
