package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/assent-run/assent/control"
	"github.com/assent-run/assent/store"
)

// controlMigrations holds the schema of the control registry's durable
// state, column for column that of store/sqlite: the highest revision
// handed out, hosted forms and their controls, open proposals and undo
// histories. A control is keyed by form id, control id and subject type and
// id (” without a subject). Values and declarations are JSON kept as text,
// so they read back byte for byte.
var controlMigrations = []migration{{1, `
CREATE TABLE control_registry (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	revision BIGINT NOT NULL
);
INSERT INTO control_registry (id, revision) VALUES (1, 0);
CREATE TABLE control_forms (
	form_id TEXT COLLATE "C" PRIMARY KEY,
	seq BIGSERIAL NOT NULL,
	owner TEXT NOT NULL,
	private BOOLEAN NOT NULL
);
CREATE TABLE control_hosted (
	form_id TEXT COLLATE "C" NOT NULL,
	control_id TEXT COLLATE "C" NOT NULL,
	subject_type TEXT COLLATE "C" NOT NULL,
	subject_id TEXT COLLATE "C" NOT NULL,
	position INTEGER NOT NULL,
	spec TEXT NOT NULL,
	value TEXT NOT NULL,
	PRIMARY KEY (form_id, control_id, subject_type, subject_id)
);
CREATE TABLE control_proposals (
	form_id TEXT COLLATE "C" NOT NULL,
	control_id TEXT COLLATE "C" NOT NULL,
	subject_type TEXT COLLATE "C" NOT NULL,
	subject_id TEXT COLLATE "C" NOT NULL,
	revision BIGINT NOT NULL,
	source TEXT NOT NULL,
	principal_id TEXT NOT NULL,
	session_id TEXT NOT NULL,
	staged_at TIMESTAMPTZ NOT NULL,
	value TEXT NOT NULL,
	base TEXT NOT NULL,
	PRIMARY KEY (form_id, control_id, subject_type, subject_id)
);
CREATE TABLE control_undo (
	form_id TEXT COLLATE "C" NOT NULL,
	control_id TEXT COLLATE "C" NOT NULL,
	subject_type TEXT COLLATE "C" NOT NULL,
	subject_id TEXT COLLATE "C" NOT NULL,
	seq BIGINT NOT NULL,
	action TEXT NOT NULL,
	previous TEXT NOT NULL,
	applied TEXT NOT NULL,
	source TEXT NOT NULL,
	principal_id TEXT NOT NULL,
	session_id TEXT NOT NULL,
	at TIMESTAMPTZ NOT NULL,
	PRIMARY KEY (form_id, control_id, subject_type, subject_id, seq)
);
`}, {2, `
-- The proposer's reason for an open proposal, shown to the person.
ALTER TABLE control_proposals ADD COLUMN why TEXT NOT NULL DEFAULT '';
`}}

// lockSpace is the first key of the two-key advisory locks this package
// takes on one item (a control, a form, an owner's screens); that key space
// is apart from the one-key locks of lockMigrate and lockAudit.
const lockSpace int32 = 0x6173_7374 // "asst"

// lockItem takes a transaction-scoped advisory lock on the item named by
// kind and parts, serializing writers of that item on every node.
func lockItem(ctx context.Context, tx pgx.Tx, kind string, parts ...string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, lockSpace, itemName(kind, parts...))
	return err
}

// itemName is the name lockItem hashes for an item.
func itemName(kind string, parts ...string) string {
	name := kind
	for _, p := range parts {
		name += "\x1f" + p
	}
	return name
}

// controlStore implements store.Controls on the database.
type controlStore struct{ s *DB }

var _ store.Controls = controlStore{}

// ControlRegistry returns the store of the control registry.
func (s *DB) ControlRegistry() store.Controls { return controlStore{s} }

const keyWhere = `form_id = $1 AND control_id = $2 AND subject_type = $3 AND subject_id = $4`

func keyArgs(k control.Key, more ...any) []any {
	st, sid := store.SubjectColumns(k)
	return append([]any{k.FormID, k.ControlID, st, sid}, more...)
}

func lockControl(ctx context.Context, tx pgx.Tx, k control.Key) error {
	st, sid := store.SubjectColumns(k)
	return lockItem(ctx, tx, "control", k.FormID, k.ControlID, st, sid)
}

// rawJSON returns the text of a JSON value, "null" for an absent one.
func rawJSON(b []byte) string {
	if len(b) == 0 {
		return "null"
	}
	return string(b)
}

// SaveControl implements control.Persister. Writers of one control are
// serialized by an advisory lock, so concurrent pushes keep the bound.
func (c controlStore) SaveControl(ctx context.Context, u control.Update) error {
	if err := store.CheckControlUpdate(u); err != nil {
		return err
	}
	return c.s.pipeWrite(ctx, "save control", func(tx *pipe) error {
		if err := saveControl(ctx, tx, u); err != nil {
			return fmt.Errorf("save control: %w", err)
		}
		return nil
	})
}

// SaveControlAudited implements store.Controls. The audit record
// is written last, so the transaction holds the audit lock (see
// AppendAudit) only from that insert to its commit.
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
	err := c.s.pipeWrite(ctx, "save control", func(tx *pipe) error {
		var err error
		if seq, err = saveControlWith(ctx, tx, u, &rec, dl); err != nil {
			return fmt.Errorf("save control: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return seq, nil
}

// saveControl applies u inside tx under the control's advisory lock, once
// its expectation holds: no other writer of the control runs between the
// check and the write.
func saveControl(ctx context.Context, tx batchSender, u control.Update) error {
	_, err := saveControlWith(ctx, tx, u, nil, nil)
	return err
}

// saveControlWith is saveControl that also keeps the deadline dl and
// appends rec to the audit log when they are not nil, and returns rec's
// sequence number. It makes two round
// trips whatever u holds: the lock and the expectation's read go as one
// pipelined batch (the read runs after the lock is held, in a snapshot of
// its own), and every write, the audit record last, as another.
//
// In a pipe the writes go with the transaction's COMMIT.
func saveControlWith(ctx context.Context, tx batchSender, u control.Update, rec *store.AuditRecord, dl *store.DecisionDeadline) (int64, error) {
	k := u.Key
	st, sid := store.SubjectColumns(k)
	reads := &pgx.Batch{}
	reads.Queue(`SELECT pg_advisory_xact_lock($1, hashtext($2))`, lockSpace, itemName("control", k.FormID, k.ControlID, st, sid))
	expects := u.Expect.Proposal || u.Expect.Value != nil || u.Expect.Undo
	if expects {
		queueExpect(reads, u)
	}
	br := tx.SendBatch(ctx, reads)
	_, err := br.Exec()
	var seen store.ExpectSeen
	if err == nil && expects {
		seen, err = scanExpect(br.QueryRow())
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	if expects {
		if err := store.CheckExpect(u, seen); err != nil {
			return 0, err
		}
	}

	writes := &pgx.Batch{}
	switch {
	case u.Stage != nil:
		p := u.Stage
		writes.Queue(`INSERT INTO control_proposals (form_id, control_id, subject_type, subject_id,
			revision, source, principal_id, session_id, staged_at, value, base, why) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
			ON CONFLICT (form_id, control_id, subject_type, subject_id) DO UPDATE SET revision = excluded.revision,
			source = excluded.source, principal_id = excluded.principal_id, session_id = excluded.session_id,
			staged_at = excluded.staged_at, value = excluded.value, base = excluded.base, why = excluded.why`,
			keyArgs(k, p.Revision, string(p.Provenance.Source), p.Provenance.PrincipalID, p.Provenance.SessionID,
				p.StagedAt, rawJSON(p.Value), rawJSON(p.Base), p.Why)...)
		writes.Queue(`UPDATE control_registry SET revision = GREATEST(revision, $1) WHERE id = 1`, p.Revision)
	case u.Unstage:
		writes.Queue(`DELETE FROM control_proposals WHERE `+keyWhere, keyArgs(k)...)
	}
	switch {
	case u.Pop:
		writes.Queue(`DELETE FROM control_undo WHERE `+keyWhere+` AND seq = (SELECT max(seq) FROM control_undo WHERE `+keyWhere+`)`,
			keyArgs(k)...)
	case u.Push != nil:
		// The new entry's seq is one more than the newest; then the
		// entries more than Depth behind it go.
		e := u.Push
		writes.Queue(`INSERT INTO control_undo (form_id, control_id, subject_type, subject_id,
			seq, action, previous, applied, source, principal_id, session_id, at)
			SELECT $1, $2, $3, $4, coalesce(max(seq), 0) + 1, $5, $6, $7, $8, $9, $10, $11 FROM control_undo WHERE `+keyWhere,
			keyArgs(k, string(e.Action), rawJSON(e.Previous), rawJSON(e.Applied), string(e.Provenance.Source),
				e.Provenance.PrincipalID, e.Provenance.SessionID, e.At)...)
		writes.Queue(`DELETE FROM control_undo WHERE `+keyWhere+` AND seq <= (SELECT max(seq) FROM control_undo WHERE `+keyWhere+`) - $5`,
			keyArgs(k, int64(u.Depth))...)
	}
	if u.Value != nil {
		writes.Queue(`UPDATE control_hosted SET value = $5 WHERE `+keyWhere, keyArgs(k, string(u.Value))...)
	}
	if dl != nil {
		writes.Queue(setDeadlineSQL, deadlineArgs(*dl)...)
	}
	if rec != nil {
		queueAudit(writes, *rec)
	}
	if writes.Len() == 0 {
		return 0, nil
	}
	if p, ok := tx.(*pipe); ok {
		br = p.SendFinal(ctx, writes)
	} else {
		br = tx.SendBatch(ctx, writes)
	}
	defer br.Close()
	n := writes.Len()
	if rec != nil {
		n--
	}
	for range n {
		if _, err := br.Exec(); err != nil {
			return 0, err
		}
	}
	var seq int64
	if rec != nil {
		if err := br.QueryRow().Scan(&seq); err != nil {
			return 0, fmt.Errorf("append audit: %w", err)
		}
	}
	return seq, br.Close()
}

// queueExpect queues the one statement that reads what u.Expect checks;
// scanExpect reads its row.
func queueExpect(b *pgx.Batch, u control.Update) {
	b.Queue(`SELECT (SELECT revision FROM control_proposals WHERE `+keyWhere+`),
		(SELECT value FROM control_hosted WHERE `+keyWhere+`),
		(SELECT at = $5 FROM control_undo WHERE `+keyWhere+` ORDER BY seq DESC LIMIT 1)`,
		keyArgs(u.Key, u.Expect.UndoAt)...)
}

func scanExpect(row pgx.Row) (store.ExpectSeen, error) {
	var (
		seen    store.ExpectSeen
		rev     *int64
		value   *string
		atMatch *bool
	)
	if err := row.Scan(&rev, &value, &atMatch); err != nil {
		return seen, err
	}
	if rev != nil {
		seen.Proposal = *rev
	}
	if value != nil {
		seen.Hosted, seen.Value = true, []byte(*value)
	}
	if atMatch != nil {
		seen.Undo, seen.UndoAtMatches = true, *atMatch
	}
	return seen, nil
}

// ForgetControl implements control.Persister.
func (c controlStore) ForgetControl(ctx context.Context, k control.Key) error {
	return c.s.write(ctx, "forget control", func(tx pgx.Tx) error {
		if err := lockControl(ctx, tx, k); err != nil {
			return fmt.Errorf("forget control: %w", err)
		}
		if err := forget(ctx, tx, k); err != nil {
			return fmt.Errorf("forget control: %w", err)
		}
		return nil
	})
}

func forget(ctx context.Context, tx pgx.Tx, k control.Key) error {
	if _, err := tx.Exec(ctx, `DELETE FROM control_proposals WHERE `+keyWhere, keyArgs(k)...); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `DELETE FROM control_undo WHERE `+keyWhere, keyArgs(k)...)
	return err
}

// hostedKeys returns the keys of the controls of hosted form formID.
func hostedKeys(ctx context.Context, tx pgx.Tx, formID string) ([]control.Key, error) {
	rows, err := tx.Query(ctx, `SELECT control_id, subject_type, subject_id FROM control_hosted WHERE form_id = $1`, formID)
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

// SaveForm implements control.Persister. Writers of one form are
// serialized by an advisory lock.
func (c controlStore) SaveForm(ctx context.Context, f control.SavedForm) error {
	if err := store.CheckSavedForm(f); err != nil {
		return err
	}
	return c.s.write(ctx, "save form", func(tx pgx.Tx) error {
		if err := saveForm(ctx, tx, f); err != nil {
			return fmt.Errorf("save form %s: %w", f.FormID, err)
		}
		return nil
	})
}

func saveForm(ctx context.Context, tx pgx.Tx, f control.SavedForm) error {
	if err := lockItem(ctx, tx, "form", f.FormID); err != nil {
		return err
	}
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
	if _, err := tx.Exec(ctx, `INSERT INTO control_forms (form_id, owner, private) VALUES ($1, $2, $3)
		ON CONFLICT (form_id) DO UPDATE SET owner = excluded.owner, private = excluded.private`,
		f.FormID, f.Owner, f.Private); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM control_hosted WHERE form_id = $1`, f.FormID); err != nil {
		return err
	}
	for i, h := range f.Controls {
		if _, err := tx.Exec(ctx, `INSERT INTO control_hosted (form_id, control_id, subject_type, subject_id, position, spec, value)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`, keyArgs(h.Key, i, rawJSON(h.Spec), rawJSON(h.Value))...); err != nil {
			return err
		}
	}
	return nil
}

// DeleteForm implements control.Persister.
func (c controlStore) DeleteForm(ctx context.Context, formID string) error {
	return c.s.write(ctx, "delete form", func(tx pgx.Tx) error {
		if err := deleteForm(ctx, tx, formID); err != nil {
			return fmt.Errorf("delete form %s: %w", formID, err)
		}
		return nil
	})
}

func deleteForm(ctx context.Context, tx pgx.Tx, formID string) error {
	if err := lockItem(ctx, tx, "form", formID); err != nil {
		return err
	}
	keys, err := hostedKeys(ctx, tx, formID)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := forget(ctx, tx, k); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, `DELETE FROM control_hosted WHERE form_id = $1`, formID); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `DELETE FROM control_forms WHERE form_id = $1`, formID)
	return err
}

// LoadControls implements control.Persister. It reads in one REPEATABLE
// READ transaction, so it sees one consistent state.
func (c controlStore) LoadControls(ctx context.Context) (control.Saved, error) {
	var saved control.Saved
	err := c.s.inTx(ctx, "load controls", pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		saved = control.Saved{}
		if err := tx.QueryRow(ctx, `SELECT revision FROM control_registry WHERE id = 1`).Scan(&saved.Revision); err != nil {
			return fmt.Errorf("load controls: %w", err)
		}
		var err error
		if saved.Forms, err = loadForms(ctx, tx, ""); err != nil {
			return fmt.Errorf("load controls: %w", err)
		}
		if saved.Controls, err = loadControlStates(ctx, tx, ""); err != nil {
			return fmt.Errorf("load controls: %w", err)
		}
		return nil
	})
	return saved, err
}

// LoadControl implements control.ControlLoader. It reads in one REPEATABLE
// READ transaction, so it sees one consistent state.
func (c controlStore) LoadControl(ctx context.Context, k control.Key) (control.LoadedControl, error) {
	var lc control.LoadedControl
	err := c.s.inTx(ctx, "load control", pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		lc = control.LoadedControl{Control: control.SavedControl{Key: k}}
		var value *string
		if err := tx.QueryRow(ctx, `SELECT revision, (SELECT value FROM control_hosted WHERE `+keyWhere+`) FROM control_registry WHERE id = 1`,
			keyArgs(k)...).Scan(&lc.Revision, &value); err != nil {
			return fmt.Errorf("load control: %w", err)
		}
		if value != nil {
			lc.Hosted, lc.Value = true, []byte(*value)
		}
		states, err := loadControlStates(ctx, tx, `WHERE `+keyWhere, keyArgs(k)...)
		if err != nil {
			return fmt.Errorf("load control: %w", err)
		}
		if len(states) > 0 {
			lc.Control = states[0]
		}
		return nil
	})
	return lc, err
}

// LoadForm implements control.FormLoader. It reads in one REPEATABLE READ
// transaction, so it sees one consistent state.
func (c controlStore) LoadForm(ctx context.Context, formID string) (control.Saved, error) {
	var saved control.Saved
	err := c.s.inTx(ctx, "load form", pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		saved = control.Saved{}
		if err := tx.QueryRow(ctx, `SELECT revision FROM control_registry WHERE id = 1`).Scan(&saved.Revision); err != nil {
			return fmt.Errorf("load form: %w", err)
		}
		var err error
		if saved.Forms, err = loadForms(ctx, tx, `WHERE f.form_id = $1`, formID); err != nil {
			return fmt.Errorf("load form: %w", err)
		}
		if saved.Controls, err = loadControlStates(ctx, tx, `WHERE form_id = $1`, formID); err != nil {
			return fmt.Errorf("load form: %w", err)
		}
		return nil
	})
	return saved, err
}

// loadForms reads the hosted forms that where (a WHERE clause on f, or
// empty for all) selects.
func loadForms(ctx context.Context, tx pgx.Tx, where string, args ...any) ([]control.SavedForm, error) {
	rows, err := tx.Query(ctx, `SELECT f.form_id, f.owner, f.private, h.control_id, h.subject_type, h.subject_id, h.spec, h.value
		FROM control_forms f LEFT JOIN control_hosted h ON h.form_id = f.form_id `+where+` ORDER BY f.seq, h.position`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var b store.SavedFormsBuilder
	for rows.Next() {
		var (
			formID, owner           string
			private                 bool
			cid, st, sid, spec, val *string
		)
		if err := rows.Scan(&formID, &owner, &private, &cid, &st, &sid, &spec, &val); err != nil {
			return nil, err
		}
		var h *control.SavedHosted
		if cid != nil {
			h = &control.SavedHosted{Key: store.ControlKey(formID, *cid, *st, *sid), Spec: []byte(*spec), Value: []byte(*val)}
		}
		b.Row(formID, owner, private, h)
	}
	return b.Forms(), rows.Err()
}

// loadControlStates reads the open proposals and undo histories of the
// controls that where (a WHERE clause, or empty for all) selects.
func loadControlStates(ctx context.Context, tx pgx.Tx, where string, args ...any) ([]control.SavedControl, error) {
	var b store.SavedControlsBuilder
	rows, err := tx.Query(ctx, `SELECT form_id, control_id, subject_type, subject_id, revision, source, principal_id, session_id,
		staged_at, value, base, why FROM control_proposals `+where, args...)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var (
			fid, cid, st, sid   string
			p                   control.SavedProposal
			source, value, base string
			stagedAt            time.Time
		)
		if err := rows.Scan(&fid, &cid, &st, &sid, &p.Revision, &source, &p.Provenance.PrincipalID, &p.Provenance.SessionID,
			&stagedAt, &value, &base, &p.Why); err != nil {
			rows.Close()
			return nil, err
		}
		p.Provenance.Source, p.StagedAt, p.Value, p.Base = control.Source(source), utc(stagedAt), []byte(value), []byte(base)
		b.Proposal(store.ControlKey(fid, cid, st, sid), p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = tx.Query(ctx, `SELECT form_id, control_id, subject_type, subject_id, action, previous, applied,
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
			when                       time.Time
		)
		if err := rows.Scan(&fid, &cid, &st, &sid, &action, &prev, &appl, &source, &e.Provenance.PrincipalID,
			&e.Provenance.SessionID, &when); err != nil {
			return nil, err
		}
		e.Action, e.Provenance.Source, e.At, e.Previous, e.Applied = control.Action(action), control.Source(source), utc(when), []byte(prev), []byte(appl)
		b.Change(store.ControlKey(fid, cid, st, sid), e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return b.Controls(), nil
}
