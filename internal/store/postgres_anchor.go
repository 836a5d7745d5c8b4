package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// pgAuditHeadGuard is migration 12 on PostgreSQL: a trigger function that
// refuses to delete the audit_head row, to truncate the table, or to move
// the head back, on every row and statement of the table.
const pgAuditHeadGuard = `
CREATE FUNCTION audit_head_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'UPDATE' THEN
		IF NEW.id = OLD.id AND NEW.seq >= OLD.seq THEN
			RETURN NEW;
		END IF;
	END IF;
	RAISE EXCEPTION 'the audit head is never deleted or moved back' USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER audit_head_keep BEFORE DELETE OR UPDATE ON audit_head FOR EACH ROW EXECUTE FUNCTION audit_head_guard();
CREATE TRIGGER audit_head_no_truncate BEFORE TRUNCATE ON audit_head FOR EACH STATEMENT EXECUTE FUNCTION audit_head_guard();`

// PostgresAnchorGuard returns the statements a database administrator
// runs once, connected to sandhold's database after sandhold created its
// schema, so that the role sandhold connects as (appRole) cannot remove or
// rewind the audit chain's head. The database, the schema that holds
// audit_head, the table and its guard function pass to a role of their own
// that nobody logs in as (sandhold_anchor); appRole keeps what it needs:
// its own tables, CREATE and USAGE on the schema (later migrations), and on
// audit_head only SELECT and UPDATE (read the row, lock it, move it
// forward: the trigger refuses any other move). From then on a DELETE,
// TRUNCATE, DROP, disabled trigger, replaced function or a table of the
// same name put before it on the search path needs rights appRole does not
// have. appRole must not be a superuser, have CREATEROLE or BYPASSRLS, or be
// a member of sandhold_anchor (AuditHeadGuard checks all of it).
func PostgresAnchorGuard(appRole string) string {
	app := pgx.Identifier{appRole}.Sanitize()
	lit := "'" + strings.ReplaceAll(app, "'", "''") + "'"
	return `CREATE ROLE sandhold_anchor NOLOGIN;
DO $sandhold_guard$
DECLARE
	app text := ` + lit + `;
	sch text := (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = 'audit_head'::regclass);
BEGIN
	EXECUTE format('ALTER DATABASE %I OWNER TO sandhold_anchor', current_database());
	EXECUTE format('ALTER SCHEMA %I OWNER TO sandhold_anchor', sch);
	EXECUTE format('GRANT USAGE, CREATE ON SCHEMA %I TO %s', sch, app);
	EXECUTE format('ALTER TABLE %I.audit_head OWNER TO sandhold_anchor', sch);
	EXECUTE format('ALTER FUNCTION %I.audit_head_guard() OWNER TO sandhold_anchor', sch);
	EXECUTE format('REVOKE ALL ON %I.audit_head FROM PUBLIC, %s', sch, app);
	EXECUTE format('GRANT SELECT, UPDATE ON %I.audit_head TO %s', sch, app);
END $sandhold_guard$;
`
}

// HeadGuard says whether the role a store connects as could remove or
// rewind the store's anchor of the audit chain.
type HeadGuard struct {
	// Guarded: it cannot (PostgreSQL after PostgresAnchorGuard).
	Guarded bool
	// Why says what lets it, or what stops it.
	Why string
}

// AuditHeadGuard reports whether this connection's role is kept from
// deleting or rewinding audit_head: it owns neither the table nor the
// guard function (nor is a member of their owners), is no superuser and
// cannot create roles or bypass row security, holds no DELETE or TRUNCATE
// on the table, and both triggers are enabled.
func (s *Postgres) AuditHeadGuard(ctx context.Context) (HeadGuard, error) {
	var super, createRole, bypass, ownsTable, ownsFunc, ownsSchema, ownsDB, createDB, canDelete, canTruncate bool
	var triggers int
	err := s.pool.QueryRow(ctx, `
SELECT r.rolsuper, r.rolcreaterole, r.rolbypassrls,
	pg_has_role(current_user, c.relowner, 'USAGE'),
	COALESCE((SELECT pg_has_role(current_user, p.proowner, 'USAGE') FROM pg_proc p WHERE p.proname = 'audit_head_guard' AND p.pronamespace = c.relnamespace), true),
	(SELECT pg_has_role(current_user, n.nspowner, 'USAGE') FROM pg_namespace n WHERE n.oid = c.relnamespace),
	(SELECT pg_has_role(current_user, d.datdba, 'USAGE') FROM pg_database d WHERE d.datname = current_database()),
	has_database_privilege(current_database(), 'CREATE'),
	has_table_privilege(c.oid, 'DELETE'), has_table_privilege(c.oid, 'TRUNCATE'),
	(SELECT count(*) FROM pg_trigger t WHERE t.tgrelid = c.oid AND t.tgname IN ('audit_head_keep', 'audit_head_no_truncate') AND t.tgenabled = 'O')
FROM pg_roles r, pg_class c
WHERE r.rolname = current_user AND c.oid = 'audit_head'::regclass`).
		Scan(&super, &createRole, &bypass, &ownsTable, &ownsFunc, &ownsSchema, &ownsDB, &createDB, &canDelete, &canTruncate, &triggers)
	if err != nil {
		return HeadGuard{}, fmt.Errorf("check the audit head's guard: %w", err)
	}
	var why []string
	for _, c := range []struct {
		bad  bool
		what string
	}{
		{super, "the role is a superuser"},
		{createRole, "the role has CREATEROLE"},
		{bypass, "the role has BYPASSRLS"},
		{ownsTable, "the role owns audit_head (or is a member of its owner)"},
		{ownsFunc, "the role owns the guard function audit_head_guard (or is a member of its owner)"},
		{ownsSchema, "the role owns audit_head's schema (it may drop the table)"},
		{ownsDB, "the role owns the database"},
		{createDB, "the role may create schemas (one named after it would come first on the search path)"},
		{canDelete, "the role may DELETE from audit_head"},
		{canTruncate, "the role may TRUNCATE audit_head"},
		{triggers != 2, "a guard trigger of audit_head is missing or disabled"},
	} {
		if c.bad {
			why = append(why, c.what)
		}
	}
	if len(why) > 0 {
		return HeadGuard{Why: strings.Join(why, "; ") + " (run PostgresAnchorGuard's statements as an administrator; SECURITY.md)"}, nil
	}
	return HeadGuard{Guarded: true, Why: "audit_head belongs to another role; this role may only read it and move it forward"}, nil
}

// AuditHeadGuard: on SQLite whoever can write sandhold.db can drop the
// triggers and rewrite the row; the head file in the data dir is the
// other anchor.
func (s *SQLite) AuditHeadGuard(context.Context) (HeadGuard, error) {
	return HeadGuard{Why: "whoever can write sandhold.db can drop its triggers and rewrite the row"}, nil
}
