package control

import (
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// A value checker holds what a control's metadata says about the values it
// accepts: the shape its kind implies (a string for text, a number for a
// slider, a list for a multi-select), its options and its constraints. The
// registry checks a proposed value against it before storing a proposal or
// writing an explicit value, so a person is never asked to apply a value the
// control itself would not take.
type valueChecker struct {
	md      *Metadata
	pattern *regexp.Regexp
}

// newValueChecker compiles what md declares. An invalid pattern is a
// registration error.
func newValueChecker(md *Metadata) (*valueChecker, error) {
	c := &valueChecker{md: md}
	if md.Constraints != nil && md.Constraints.Pattern != "" {
		re, err := regexp.Compile("^(?:" + md.Constraints.Pattern + ")$")
		if err != nil {
			return nil, &Error{Reason: ReasonInvalidRequest, Message: fmt.Sprintf("metadata.constraints.pattern %q does not compile: %v", md.Constraints.Pattern, err)}
		}
		c.pattern = re
	}
	return c, nil
}

// CheckValue reports whether v is a value a control described by md can
// hold. The error, an [*Error] with reason invalid_value, names the rule v
// breaks. Use it to check a value before offering it; the registry applies
// the same check to stage and to an apply that carries a value.
func (m *Metadata) CheckValue(v any) error {
	c, err := newValueChecker(m)
	if err != nil {
		return err
	}
	return c.check(v)
}

// emailShape is deliberately loose: one @, something on both sides, a dot
// in the domain, no spaces. It refuses what is plainly not an address and
// leaves the rest to the application's own validation.
var emailShape = regexp.MustCompile(`^[^\s@]+@[^\s@]+\.[^\s@]+$`)

func (c *valueChecker) check(v any) error {
	md := c.md
	if v == nil {
		if md.Constraints != nil && md.Constraints.Required {
			return c.invalid("a value is required")
		}
		return nil
	}
	switch md.Kind {
	case KindFile, KindCustom:
		return nil
	case KindText, KindPassword, KindTextarea, KindCombobox:
		s, ok := v.(string)
		if !ok {
			return c.invalid("it must be text, not %s", typeName(v))
		}
		return c.checkString(s)
	case KindEmail:
		s, ok := v.(string)
		if !ok {
			return c.invalid("it must be an email address as text, not %s", typeName(v))
		}
		if s != "" && !emailShape.MatchString(s) {
			return c.invalid("%q is not an email address", s)
		}
		return c.checkString(s)
	case KindDate, KindTime, KindDatetime:
		s, ok := v.(string)
		if !ok {
			return c.invalid("it must be text in %s form, not %s", timeForm(md.Kind), typeName(v))
		}
		if s != "" && !validTime(md.Kind, s) {
			return c.invalid("%q is not a %s in %s form", s, md.Kind, timeForm(md.Kind))
		}
		return c.checkString(s)
	case KindNumber, KindSlider:
		n, ok := number(v)
		if !ok {
			return c.invalid("it must be a number, not %s", typeName(v))
		}
		return c.checkNumber(n)
	case KindCheckbox, KindSwitch, KindToggleButton:
		if _, ok := v.(bool); !ok {
			return c.invalid("it must be true or false, not %s", typeName(v))
		}
		return nil
	case KindSelect, KindRadioGroup, KindSegmentedControl, KindListbox:
		if !scalar(v) {
			return c.invalid("it must be one option's value, not %s", typeName(v))
		}
		return c.checkOption(v)
	case KindMultiSelect, KindTagsInput:
		items, ok := v.([]any)
		if !ok {
			if ss, isStrings := v.([]string); isStrings {
				items = make([]any, len(ss))
				for i, s := range ss {
					items[i] = s
				}
			} else {
				return c.invalid("it must be a list, not %s", typeName(v))
			}
		}
		if err := c.checkCount(len(items)); err != nil {
			return err
		}
		for _, it := range items {
			if !scalar(it) {
				return c.invalid("each item must be text or a number, not %s", typeName(it))
			}
			if md.Kind == KindMultiSelect {
				if err := c.checkOption(it); err != nil {
					return err
				}
			}
		}
		return nil
	case KindRangeSlider:
		items, ok := v.([]any)
		if !ok || len(items) != 2 {
			return c.invalid("it must be a list of two numbers [low, high]")
		}
		lo, ok1 := number(items[0])
		hi, ok2 := number(items[1])
		if !ok1 || !ok2 {
			return c.invalid("it must be a list of two numbers [low, high]")
		}
		if lo > hi {
			return c.invalid("the low end %v is above the high end %v", lo, hi)
		}
		if err := c.checkNumber(lo); err != nil {
			return err
		}
		return c.checkNumber(hi)
	}
	return nil
}

func (c *valueChecker) invalid(format string, args ...any) error {
	label := c.md.Label
	if label == "" {
		label = string(c.md.Kind) + " control"
	}
	return &Error{Reason: ReasonInvalidValue, Message: fmt.Sprintf("this value does not fit %s: %s", label, fmt.Sprintf(format, args...))}
}

func (c *valueChecker) checkString(s string) error {
	k := c.md.Constraints
	if k == nil {
		return nil
	}
	if k.Required && s == "" {
		return c.invalid("a value is required")
	}
	n := utf8.RuneCountInString(s)
	if k.MinLength != nil && n < *k.MinLength && s != "" {
		return c.invalid("it is %d characters long; the least is %d", n, *k.MinLength)
	}
	if k.MaxLength != nil && n > *k.MaxLength {
		return c.invalid("it is %d characters long; the most is %d", n, *k.MaxLength)
	}
	if c.pattern != nil && s != "" && !c.pattern.MatchString(s) {
		return c.invalid("it does not match the pattern %s", k.Pattern)
	}
	if s != "" {
		if minS, ok := k.Min.(string); ok && s < minS {
			return c.invalid("%q is before the earliest allowed, %s", s, minS)
		}
		if maxS, ok := k.Max.(string); ok && s > maxS {
			return c.invalid("%q is after the latest allowed, %s", s, maxS)
		}
	}
	return nil
}

func (c *valueChecker) checkNumber(n float64) error {
	k := c.md.Constraints
	if k == nil {
		return nil
	}
	if lo, ok := number(k.Min); ok && n < lo {
		return c.invalid("%v is below the minimum %v", n, lo)
	}
	if hi, ok := number(k.Max); ok && n > hi {
		return c.invalid("%v is above the maximum %v", n, hi)
	}
	if step, ok := number(k.Step); ok && step > 0 {
		base, _ := number(k.Min)
		q := (n - base) / step
		if d := q - float64(int64(q+0.5)); d > 1e-9 || d < -1e-9 {
			return c.invalid("%v is not a multiple of the step %v", n, step)
		}
	}
	return nil
}

func (c *valueChecker) checkCount(n int) error {
	k := c.md.Constraints
	if k == nil {
		return nil
	}
	if k.Required && n == 0 {
		return c.invalid("at least one item is required")
	}
	if k.MinLength != nil && n < *k.MinLength {
		return c.invalid("it has %d items; the least is %d", n, *k.MinLength)
	}
	if k.MaxLength != nil && n > *k.MaxLength {
		return c.invalid("it has %d items; the most is %d", n, *k.MaxLength)
	}
	return nil
}

// checkOption holds v to the declared options, when there are any. A
// disabled option cannot be chosen.
func (c *valueChecker) checkOption(v any) error {
	opts := c.md.Options
	if len(opts) == 0 {
		return nil
	}
	for _, o := range opts {
		if Equal(o.Value, v) {
			if o.Disabled {
				return c.invalid("the option %v is disabled", v)
			}
			return nil
		}
	}
	names := make([]string, 0, len(opts))
	for _, o := range opts {
		if !o.Disabled {
			names = append(names, fmt.Sprint(o.Value))
		}
	}
	return c.invalid("%v is not one of the options (%s)", quoteIfString(v), strings.Join(names, ", "))
}

func quoteIfString(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}

func scalar(v any) bool {
	if _, ok := v.(string); ok {
		return true
	}
	_, ok := number(v)
	return ok
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "text"
	case bool:
		return "true/false"
	case []any, []string:
		return "a list"
	case map[string]any:
		return "an object"
	}
	if _, ok := number(v); ok {
		return "a number"
	}
	return fmt.Sprintf("a %T", v)
}

func timeForm(k Kind) string {
	switch k {
	case KindDate:
		return "YYYY-MM-DD"
	case KindTime:
		return "HH:MM or HH:MM:SS"
	}
	return "YYYY-MM-DDTHH:MM (RFC 3339)"
}

func validTime(k Kind, s string) bool {
	var layouts []string
	switch k {
	case KindDate:
		layouts = []string{time.DateOnly}
	case KindTime:
		layouts = []string{"15:04", time.TimeOnly}
	default:
		layouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339, time.RFC3339Nano}
	}
	for _, l := range layouts {
		if _, err := time.Parse(l, s); err == nil {
			return true
		}
	}
	return false
}
