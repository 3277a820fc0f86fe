package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/store"
)

// controlMigrations holds the schema of the control registry's durable
// state: the highest revision handed out, hosted forms and their controls,
// open proposals and undo histories. A control is keyed by form id,
// control id and subject type and id (” without a subject). Values and
// declarations are JSON text kept as given.
var controlMigrations = []migration{{1, `
CREATE TABLE control_registry (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	revision INTEGER NOT NULL
);
INSERT INTO control_registry (id, revision) VALUES (1, 0);
CREATE TABLE control_forms (
	form_id TEXT PRIMARY KEY,
	seq INTEGER NOT NULL,
	owner TEXT NOT NULL,
	private INTEGER NOT NULL
);
CREATE TABLE control_hosted (
	form_id TEXT NOT NULL,
	control_id TEXT NOT NULL,
	subject_type TEXT NOT NULL,
	subject_id TEXT NOT NULL,
	position INTEGER NOT NULL,
	spec TEXT NOT NULL,
	value TEXT NOT NULL,
	PRIMARY KEY (form_id, control_id, subject_type, subject_id)
);
CREATE TABLE control_proposals (
	form_id TEXT NOT NULL,
	control_id TEXT NOT NULL,
	subject_type TEXT NOT NULL,
	subject_id TEXT NOT NULL,
	revision INTEGER NOT NULL,
	source TEXT NOT NULL,
	principal_id TEXT NOT NULL,
	session_id TEXT NOT NULL,
	staged_at INTEGER NOT NULL,
	value TEXT NOT NULL,
	base TEXT NOT NULL,
	PRIMARY KEY (form_id, control_id, subject_type, subject_id)
);
CREATE TABLE control_undo (
	form_id TEXT NOT NULL,
	control_id TEXT NOT NULL,
	subject_type TEXT NOT NULL,
	subject_id TEXT NOT NULL,
	seq INTEGER NOT NULL,
	action TEXT NOT NULL,
	previous TEXT NOT NULL,
	applied TEXT NOT NULL,
	source TEXT NOT NULL,
	principal_id TEXT NOT NULL,
	session_id TEXT NOT NULL,
	at INTEGER NOT NULL,
	PRIMARY KEY (form_id, control_id, subject_type, subject_id, seq)
);
`}, {2, `
-- An open proposal's revision counts toward the highest one handed out
-- (see savedRevision), so staging writes no registry row; a proposal
-- leaving the table, or replaced by a lower revision, leaves its
-- revision here.
CREATE TRIGGER control_proposals_closed AFTER DELETE ON control_proposals BEGIN
	UPDATE control_registry SET revision = max(revision, OLD.revision) WHERE id = 1;
END;
CREATE TRIGGER control_proposals_lowered AFTER UPDATE OF revision ON control_proposals
WHEN NEW.revision < OLD.revision BEGIN
	UPDATE control_registry SET revision = max(revision, OLD.revision) WHERE id = 1;
END;
`}, {3, `
-- The proposer's reason for an open proposal, shown to the person.
ALTER TABLE control_proposals ADD COLUMN why TEXT NOT NULL DEFAULT '';
`}}

// savedRevision is the highest proposal revision handed out: the
// registry's row, or an open proposal's revision when that is higher.
const savedRevision = `SELECT max(revision, coalesce((SELECT max(revision) FROM control_proposals), 0)) FROM control_registry WHERE id = 1`

// controlStore implements store.Controls on the database.
type controlStore struct {
	db    *sql.DB
	stmts *stmtCache
}

var _ store.Controls = controlStore{}

// ControlRegistry returns the store of the control registry.
func (s *DB) ControlRegistry() store.Controls { return controlStore{s.db, s.stmts} }

const keyWhere = `form_id = ? AND control_id = ? AND subject_type = ? AND subject_id = ?`

func keyArgs(k control.Key, more ...any) []any {
	st, sid := store.SubjectColumns(k)
	return append([]any{k.FormID, k.ControlID, st, sid}, more...)
}

// rawJSON returns the text of a JSON value, "null" for an absent one.
func rawJSON(b []byte) string {
	if len(b) == 0 {
		return "null"
	}
	return string(b)
}

// SaveControl implements control.Persister.
func (c controlStore) SaveControl(ctx context.Context, u control.Update) error {
	if err := store.CheckControlUpdate(u); err != nil {
		return err
	}
	return c.tx(ctx, "save control", func(ctx context.Context, tx *sql.Tx) error { return c.saveControl(ctx, tx, u) })
}

// SaveControlAudited implements store.Controls.
func (c controlStore) SaveControlAudited(ctx context.Context, u control.Update, rec store.AuditRecord, dl *store.DecisionDeadline) (int64, error) {
	if err := store.CheckControlUpdate(u); err != nil {
		return 0, err
	}
	if dl != nil {
		if err := dl.Check(); err != nil {
			return 0, err
		}
	}
	var seq int64
	err := c.tx(ctx, "save control", func(ctx context.Context, tx *sql.Tx) error {
		if err := c.saveControl(ctx, tx, u); err != nil {
			return err
		}
		if dl != nil {
			if _, err := c.stmts.execTx(ctx, tx, setDeadlineSQL, deadlineArgs(*dl)...); err != nil {
				return fmt.Errorf("set deadline: %w", err)
			}
		}
		var err error
		seq, err = appendAudit(ctx, c.stmts, tx, rec)
		return err
	})
	if err != nil {
		return 0, err
	}
	return seq, nil
}

// saveControl applies u inside tx, once its expectation holds. The
// transaction holds the database's write lock from its start, so no other
// writer changes the control between the check and the write.
func (c controlStore) saveControl(ctx context.Context, tx *sql.Tx, u control.Update) error {
	k := u.Key
	staged, err := c.stageGuarded(ctx, tx, u)
	if err != nil {
		return err
	}
	if !staged {
		if err := c.checkExpect(ctx, tx, u); err != nil {
			return err
		}
	}
	switch {
	case staged:
	case u.Stage != nil:
		p := u.Stage
		if _, err := c.stmts.execTx(ctx, tx, `INSERT INTO control_proposals (form_id, control_id, subject_type, subject_id,
			revision, source, principal_id, session_id, staged_at, value, base, why) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (form_id, control_id, subject_type, subject_id) DO UPDATE SET revision = excluded.revision,
			source = excluded.source, principal_id = excluded.principal_id, session_id = excluded.session_id,
			staged_at = excluded.staged_at, value = excluded.value, base = excluded.base, why = excluded.why`,
			keyArgs(k, p.Revision, string(p.Provenance.Source), p.Provenance.PrincipalID, p.Provenance.SessionID,
				ms(p.StagedAt), rawJSON(p.Value), rawJSON(p.Base), p.Why)...); err != nil {
			return err
		}
	case u.Unstage:
		if _, err := c.stmts.execTx(ctx, tx, `DELETE FROM control_proposals WHERE `+keyWhere, keyArgs(k)...); err != nil {
			return err
		}
	}
	switch {
	case u.Pop:
		if _, err := c.stmts.execTx(ctx, tx, `DELETE FROM control_undo WHERE `+keyWhere+` AND seq = (SELECT max(seq) FROM control_undo WHERE `+keyWhere+`)`,
			append(keyArgs(k), keyArgs(k)...)...); err != nil {
			return err
		}
	case u.Push != nil:
		var seq int64
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) + 1 FROM control_undo WHERE `+keyWhere, keyArgs(k)...).Scan(&seq); err != nil {
			return err
		}
		e := u.Push
		if _, err := c.stmts.execTx(ctx, tx, `INSERT INTO control_undo (form_id, control_id, subject_type, subject_id,
			seq, action, previous, applied, source, principal_id, session_id, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			keyArgs(k, seq, string(e.Action), rawJSON(e.Previous), rawJSON(e.Applied), string(e.Provenance.Source),
				e.Provenance.PrincipalID, e.Provenance.SessionID, ms(e.At))...); err != nil {
			return err
		}
		if _, err := c.stmts.execTx(ctx, tx, `DELETE FROM control_undo WHERE `+keyWhere+` AND seq <= ?`, keyArgs(k, seq-int64(u.Depth))...); err != nil {
			return err
		}
	}
	if u.Value != nil {
		if _, err := c.stmts.execTx(ctx, tx, `UPDATE control_hosted SET value = ? WHERE `+keyWhere, append([]any{string(u.Value)}, keyArgs(k)...)...); err != nil {
			return err
		}
	}
	return nil
}

// Staging an agent's value is the hot path: its expectation (the proposal
// it replaces, the hosted value it was staged against) is checked by the
// statement that stages, which writes only when the saved state is as
// expected byte for byte. When it writes nothing, the full check decides:
// the state changed, or it differs only in how equal JSON is spelled.
const (
	stageColumns = `form_id, control_id, subject_type, subject_id, revision, source, principal_id, session_id, staged_at, value, base, why`
	// stageFirst stages when no proposal is open.
	stageFirst = `INSERT INTO control_proposals (` + stageColumns + `)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
		WHERE NOT EXISTS (SELECT 1 FROM control_proposals WHERE ` + keyWhere + `)
		AND coalesce((SELECT value FROM control_hosted WHERE ` + keyWhere + `) = ?, 1)`
	// stageOver replaces open proposal revision ? with a higher one.
	stageOver = `UPDATE control_proposals SET revision = ?, source = ?, principal_id = ?, session_id = ?,
		staged_at = ?, value = ?, base = ?, why = ? WHERE ` + keyWhere + ` AND revision = ? AND revision < ?
		AND coalesce((SELECT value FROM control_hosted WHERE ` + keyWhere + `) = ?, 1)`
)

// stageGuarded stages u when it stages with an expectation of the proposal
// and the value only, and that expectation holds byte for byte. It reports
// whether it staged; false leaves the full check and write to the caller.
func (c controlStore) stageGuarded(ctx context.Context, tx *sql.Tx, u control.Update) (bool, error) {
	e, k, p := u.Expect, u.Key, u.Stage
	if p == nil || !e.Proposal || e.Undo {
		return false, nil
	}
	// Without an expected value the guard compares with NULL, which
	// coalesce turns into a pass.
	var value any
	if e.Value != nil {
		value = string(e.Value)
	}
	var (
		res sql.Result
		err error
	)
	if e.Revision == 0 {
		args := keyArgs(k, p.Revision, string(p.Provenance.Source), p.Provenance.PrincipalID, p.Provenance.SessionID,
			ms(p.StagedAt), rawJSON(p.Value), rawJSON(p.Base), p.Why)
		args = append(append(append(args, keyArgs(k)...), keyArgs(k)...), value)
		res, err = c.stmts.execTx(ctx, tx, stageFirst, args...)
	} else {
		args := []any{p.Revision, string(p.Provenance.Source), p.Provenance.PrincipalID, p.Provenance.SessionID,
			ms(p.StagedAt), rawJSON(p.Value), rawJSON(p.Base), p.Why}
		args = append(append(args, keyArgs(k)...), e.Revision, p.Revision)
		args = append(append(args, keyArgs(k)...), value)
		res, err = c.stmts.execTx(ctx, tx, stageOver, args...)
	}
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// expectQuery reads, in one statement, the open proposal's revision, the
// hosted value and the time of the newest undo entry of one control.
const expectQuery = `SELECT (SELECT revision FROM control_proposals WHERE ` + keyWhere + `),
	(SELECT value FROM control_hosted WHERE ` + keyWhere + `),
	(SELECT at FROM control_undo WHERE ` + keyWhere + ` ORDER BY seq DESC LIMIT 1)`

// checkExpect reads what u.Expect checks and decides with
// store.CheckExpect. An update that expects nothing reads nothing.
func (c controlStore) checkExpect(ctx context.Context, tx *sql.Tx, u control.Update) error {
	e, k := u.Expect, u.Key
	if !e.Proposal && e.Value == nil && !e.Undo {
		return nil
	}
	st, err := c.stmts.stmt(ctx, expectQuery)
	if err != nil {
		return err
	}
	var (
		rev, at sql.NullInt64
		value   sql.NullString
	)
	args := keyArgs(k)
	if err := tx.StmtContext(ctx, st).QueryRowContext(ctx, append(append(slices.Clip(args), args...), args...)...).Scan(&rev, &value, &at); err != nil {
		return err
	}
	seen := store.ExpectSeen{Proposal: rev.Int64, Hosted: value.Valid, Undo: at.Valid}
	if value.Valid {
		seen.Value = []byte(value.String)
	}
	if at.Valid {
		seen.UndoAtMatches = at.Int64 == ms(e.UndoAt)
	}
	return store.CheckExpect(u, seen)
}

// ForgetControl implements control.Persister.
func (c controlStore) ForgetControl(ctx context.Context, k control.Key) error {
	return c.tx(ctx, "forget control", func(ctx context.Context, tx *sql.Tx) error { return forget(ctx, tx, k) })
}

func forget(ctx context.Context, tx *sql.Tx, k control.Key) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM control_proposals WHERE `+keyWhere, keyArgs(k)...); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM control_undo WHERE `+keyWhere, keyArgs(k)...)
	return err
}

// hostedKeys returns the keys of the controls of hosted form formID.
func hostedKeys(ctx context.Context, tx *sql.Tx, formID string) ([]control.Key, error) {
	rows, err := tx.QueryContext(ctx, `SELECT control_id, subject_type, subject_id FROM control_hosted WHERE form_id = ?`, formID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []control.Key
	for rows.Next() {
		var cid, st, sid string
		if err := rows.Scan(&cid, &st, &sid); err != nil {
			return nil, err
		}
		keys = append(keys, store.ControlKey(formID, cid, st, sid))
	}
	return keys, rows.Err()
}

// SaveForm implements control.Persister.
func (c controlStore) SaveForm(ctx context.Context, f control.SavedForm) error {
	if err := store.CheckSavedForm(f); err != nil {
		return err
	}
	return c.tx(ctx, "save form", func(ctx context.Context, tx *sql.Tx) error {
		old, err := hostedKeys(ctx, tx, f.FormID)
		if err != nil {
			return err
		}
		keep := make(map[control.Key]bool, len(f.Controls))
		for _, h := range f.Controls {
			keep[h.Key] = true
		}
		for _, k := range old {
			if !keep[k] {
				if err := forget(ctx, tx, k); err != nil {
					return err
				}
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO control_forms (form_id, seq, owner, private)
			VALUES (?, (SELECT coalesce(max(seq), 0) + 1 FROM control_forms), ?, ?)
			ON CONFLICT (form_id) DO UPDATE SET owner = excluded.owner, private = excluded.private`,
			f.FormID, f.Owner, boolInt(f.Private)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM control_hosted WHERE form_id = ?`, f.FormID); err != nil {
			return err
		}
		for i, h := range f.Controls {
			if _, err := tx.ExecContext(ctx, `INSERT INTO control_hosted (form_id, control_id, subject_type, subject_id, position, spec, value)
				VALUES (?, ?, ?, ?, ?, ?, ?)`, keyArgs(h.Key, i, rawJSON(h.Spec), rawJSON(h.Value))...); err != nil {
				return err
			}
		}
		return nil
	})
}

// DeleteForm implements control.Persister.
func (c controlStore) DeleteForm(ctx context.Context, formID string) error {
	return c.tx(ctx, "delete form", func(ctx context.Context, tx *sql.Tx) error {
		keys, err := hostedKeys(ctx, tx, formID)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := forget(ctx, tx, k); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM control_hosted WHERE form_id = ?`, formID); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM control_forms WHERE form_id = ?`, formID)
		return err
	})
}

// LoadControls implements control.Persister. It reads in one transaction,
// so it sees one consistent state.
func (c controlStore) LoadControls(ctx context.Context) (control.Saved, error) {
	var saved control.Saved
	tx, err := c.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return saved, fmt.Errorf("load controls: %w", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, savedRevision).Scan(&saved.Revision); err != nil {
		return saved, fmt.Errorf("load controls: %w", err)
	}
	if saved.Forms, err = loadForms(ctx, tx, ""); err != nil {
		return saved, fmt.Errorf("load controls: %w", err)
	}
	if saved.Controls, err = loadControlStates(ctx, tx, ""); err != nil {
		return saved, fmt.Errorf("load controls: %w", err)
	}
	return saved, nil
}

// LoadControl implements control.ControlLoader. It reads in one
// transaction, so it sees one consistent state.
func (c controlStore) LoadControl(ctx context.Context, k control.Key) (control.LoadedControl, error) {
	lc := control.LoadedControl{Control: control.SavedControl{Key: k}}
	tx, err := c.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return lc, fmt.Errorf("load control: %w", err)
	}
	defer tx.Rollback()
	var value sql.NullString
	if err := tx.QueryRowContext(ctx, `SELECT (`+savedRevision+`), (SELECT value FROM control_hosted WHERE `+keyWhere+`)`,
		keyArgs(k)...).Scan(&lc.Revision, &value); err != nil {
		return lc, fmt.Errorf("load control: %w", err)
	}
	if value.Valid {
		lc.Hosted, lc.Value = true, []byte(value.String)
	}
	states, err := loadControlStates(ctx, tx, `WHERE `+keyWhere, keyArgs(k)...)
	if err != nil {
		return lc, fmt.Errorf("load control: %w", err)
	}
	if len(states) > 0 {
		lc.Control = states[0]
	}
	return lc, nil
}

// LoadForm implements control.FormLoader. It reads in one transaction, so
// it sees one consistent state.
func (c controlStore) LoadForm(ctx context.Context, formID string) (control.Saved, error) {
	var saved control.Saved
	tx, err := c.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return saved, fmt.Errorf("load form: %w", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, savedRevision).Scan(&saved.Revision); err != nil {
		return saved, fmt.Errorf("load form: %w", err)
	}
	if saved.Forms, err = loadForms(ctx, tx, `WHERE f.form_id = ?`, formID); err != nil {
		return saved, fmt.Errorf("load form: %w", err)
	}
	if saved.Controls, err = loadControlStates(ctx, tx, `WHERE form_id = ?`, formID); err != nil {
		return saved, fmt.Errorf("load form: %w", err)
	}
	return saved, nil
}

// loadForms reads the hosted forms that where (a WHERE clause on f, or
// empty for all) selects.
func loadForms(ctx context.Context, tx *sql.Tx, where string, args ...any) ([]control.SavedForm, error) {
	rows, err := tx.QueryContext(ctx, `SELECT f.form_id, f.owner, f.private, h.control_id, h.subject_type, h.subject_id, h.spec, h.value
		FROM control_forms f LEFT JOIN control_hosted h ON h.form_id = f.form_id `+where+` ORDER BY f.seq, h.position`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var b store.SavedFormsBuilder
	for rows.Next() {
		var (
			formID, owner           string
			private                 int
			cid, st, sid, spec, val sql.NullString
		)
		if err := rows.Scan(&formID, &owner, &private, &cid, &st, &sid, &spec, &val); err != nil {
			return nil, err
		}
		var h *control.SavedHosted
		if cid.Valid {
			h = &control.SavedHosted{Key: store.ControlKey(formID, cid.String, st.String, sid.String), Spec: []byte(spec.String), Value: []byte(val.String)}
		}
		b.Row(formID, owner, private != 0, h)
	}
	return b.Forms(), rows.Err()
}

// loadControlStates reads the open proposals and undo histories of the
// controls that where (a WHERE clause, or empty for all) selects.
func loadControlStates(ctx context.Context, tx *sql.Tx, where string, args ...any) ([]control.SavedControl, error) {
	var b store.SavedControlsBuilder
	rows, err := tx.QueryContext(ctx, `SELECT form_id, control_id, subject_type, subject_id, revision, source, principal_id, session_id,
		staged_at, value, base, why FROM control_proposals `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			fid, cid, st, sid string
			p                 control.SavedProposal
			source            string
			at                int64
			value, base       string
		)
		if err := rows.Scan(&fid, &cid, &st, &sid, &p.Revision, &source, &p.Provenance.PrincipalID, &p.Provenance.SessionID,
			&at, &value, &base, &p.Why); err != nil {
			return nil, err
		}
		p.Provenance.Source, p.StagedAt, p.Value, p.Base = control.Source(source), fromMS(at), []byte(value), []byte(base)
		b.Proposal(store.ControlKey(fid, cid, st, sid), p)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = tx.QueryContext(ctx, `SELECT form_id, control_id, subject_type, subject_id, action, previous, applied,
		source, principal_id, session_id, at FROM control_undo `+where+` ORDER BY form_id, control_id, subject_type, subject_id, seq`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			fid, cid, st, sid          string
			e                          control.SavedChange
			action, source, prev, appl string
			at                         int64
		)
		if err := rows.Scan(&fid, &cid, &st, &sid, &action, &prev, &appl, &source, &e.Provenance.PrincipalID,
			&e.Provenance.SessionID, &at); err != nil {
			return nil, err
		}
		e.Action, e.Provenance.Source, e.At, e.Previous, e.Applied = control.Action(action), control.Source(source), fromMS(at), []byte(prev), []byte(appl)
		b.Change(store.ControlKey(fid, cid, st, sid), e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return b.Controls(), nil
}

// tx runs fn in a write transaction and commits it. A context that has
// already ended refuses the write; once begun, the transaction runs to its
// end whatever becomes of ctx, and fn gets a context that does not end.
// The writes are short, the registry has often changed the control already
// (and would write it back on a failure), and the driver watches each
// statement run under a context that can end at a cost greater than the
// statement's own.
func (c controlStore) tx(ctx context.Context, what string, fn func(context.Context, *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	ctx = context.WithoutCancel(ctx)
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer tx.Rollback()
	if err := fn(ctx, tx); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
