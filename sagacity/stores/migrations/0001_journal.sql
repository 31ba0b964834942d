-- sagacity journal, schema version 1.
-- Runs inside one transaction with search_path set to the store's schema, so names are
-- unqualified here. Payloads are TEXT (never jsonb: it reorders keys and rewrites
-- numbers) and recorded_at is the fixed-width text that was hashed (never timestamptz,
-- whose rendering follows the session time zone). COLLATE "C" makes ORDER BY saga_id
-- code-point order, the order Python's sorted() gives.

CREATE TABLE sagacity_journal (
    saga_id     text COLLATE "C" NOT NULL,
    seq         bigint NOT NULL CHECK (seq >= 1),
    step        integer NOT NULL,
    attempt     integer NOT NULL,
    tool        text NOT NULL,
    phase       text NOT NULL,
    input_json  text NOT NULL,
    result_json text NOT NULL,
    error_json  text NOT NULL,
    actor_json  text NOT NULL,
    recorded_at text NOT NULL,
    prev_hash   text NOT NULL,
    hash        text NOT NULL,
    -- Safety net: appends are serialized by an advisory lock, but a writer that ever
    -- got the head wrong must fail here rather than fork the chain.
    CONSTRAINT sagacity_journal_pkey PRIMARY KEY (saga_id, seq),
    -- Idempotency: one row per logical entry (Temporal runs activities at least once).
    CONSTRAINT sagacity_journal_logical_key UNIQUE (saga_id, step, phase, attempt)
);

-- Evidence is append-only. Statement-level triggers also refuse statements that match
-- no row, and TRUNCATE can only be caught at statement level.
CREATE FUNCTION sagacity_journal_refuse() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'sagacity journal is append-only: % on % refused', TG_OP, TG_TABLE_NAME
        USING HINT = 'Journal entries are evidence; append a new entry instead of changing one.';
END
$$;

CREATE TRIGGER sagacity_journal_no_update BEFORE UPDATE ON sagacity_journal
    FOR EACH STATEMENT EXECUTE FUNCTION sagacity_journal_refuse();
CREATE TRIGGER sagacity_journal_no_delete BEFORE DELETE ON sagacity_journal
    FOR EACH STATEMENT EXECUTE FUNCTION sagacity_journal_refuse();
CREATE TRIGGER sagacity_journal_no_truncate BEFORE TRUNCATE ON sagacity_journal
    FOR EACH STATEMENT EXECUTE FUNCTION sagacity_journal_refuse();

-- ENABLE ALWAYS: a plain enabled trigger does not fire under
-- session_replication_role = replica, which any superuser can set per session.
ALTER TABLE sagacity_journal ENABLE ALWAYS TRIGGER sagacity_journal_no_update;
ALTER TABLE sagacity_journal ENABLE ALWAYS TRIGGER sagacity_journal_no_delete;
ALTER TABLE sagacity_journal ENABLE ALWAYS TRIGGER sagacity_journal_no_truncate;

-- Fences are working state (tombstones for late attempts), not evidence: inserted with
-- ON CONFLICT DO NOTHING and free of the append-only guard.
CREATE TABLE sagacity_fences (
    saga_id   text COLLATE "C" NOT NULL,
    step      integer NOT NULL,
    fenced_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT sagacity_fences_pkey PRIMARY KEY (saga_id, step)
);
