package screen

// FieldsReadBy returns the fields (Input, DateInput, Select, Switch and app
// fields) whose $key the McpMutation's params read, in document order. A
// press of the governed Button checks exactly these fields before anything
// else ([8.6]).
func (d *Document) FieldsReadBy(m *Mutation) []*Node {
	if m == nil || len(m.Params) == 0 {
		return nil
	}
	read := make(map[string]bool, len(m.Params))
	for _, v := range m.Params {
		if k, ok := v.(StateRef); ok {
			read[string(k)] = true
		}
	}
	d.nodesReady()
	var out []*Node
	for _, s := range d.idx.order {
		if s.node != nil && s.edits != "" && read[s.edits] {
			out = append(out, s.node)
		}
	}
	return out
}

// Edits returns the $key a field component edits, or "" when the node is
// not a field.
func (d *Document) Edits(id string) string {
	if s := d.idx.get(id); s != nil {
		return s.edits
	}
	return ""
}
