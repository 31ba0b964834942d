-- sagacity journal, schema version 1: the journal, its fences, the checkpoint log, the
-- approver registry's high-water mark, and the one function that appends an entry.
--
-- Runs inside one transaction with search_path set to the store's schema, so names are
-- unqualified here (function bodies use @schema@, see below). COLLATE "C" makes ORDER BY
-- saga_id code-point order, the order Python's sorted() gives.
--
-- `material` holds an entry's hashed bytes exactly as hashed (sagacity.journal._recipe); its
-- payloads are kept only there, and the input_json, result_json and error_json columns
-- hold the empty string. The other columns repeat what the bytes say, for lookups, and
-- are text as hashed: recorded_at is the fixed-width text (never timestamptz, whose
-- rendering follows the session time zone). `sagacity verify` checks them against the
-- bytes.

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
    material    bytea NOT NULL,
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

-- sagacity_guard(table) puts that guard on a table: a trigger <table>_no_<op> for each of
-- UPDATE, DELETE and TRUNCATE, enabled ALWAYS (a plain enabled trigger does not fire
-- under session_replication_role = replica, which any superuser can set per session).
-- One definition for every append-only table, so none can miss an operation; only this
-- migration uses it, and it drops it at the end, so the schema holds only the triggers.
CREATE FUNCTION sagacity_guard(p_table text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_op text;
BEGIN
    FOREACH v_op IN ARRAY ARRAY['update', 'delete', 'truncate'] LOOP
        EXECUTE format('CREATE TRIGGER %I BEFORE %s ON @schema@.%I FOR EACH STATEMENT'
                       ' EXECUTE FUNCTION @schema@.sagacity_journal_refuse()',
                       p_table || '_no_' || v_op, upper(v_op), p_table);
        EXECUTE format('ALTER TABLE @schema@.%I ENABLE ALWAYS TRIGGER %I',
                       p_table, p_table || '_no_' || v_op);
    END LOOP;
END
$$;

SELECT sagacity_guard('sagacity_journal');

-- Fences are working state (tombstones for late attempts), not evidence: inserted with
-- ON CONFLICT DO NOTHING and free of the append-only guard.
CREATE TABLE sagacity_fences (
    saga_id   text COLLATE "C" NOT NULL,
    step      integer NOT NULL,
    fenced_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT sagacity_fences_pkey PRIMARY KEY (saga_id, step)
);

-- The checkpoint log (sagacity.tlog._log): signed checkpoints of chain heads, kept
-- outside the journal table, as the leaves of an RFC 6962 Merkle log; the hashes of its
-- complete subtrees; and its signed tree heads. All three are append-only like the
-- journal (same refusing trigger, enabled ALWAYS). The columns beside each note are an
-- index: the signed note is the evidence, and `sagacity verify` checks the columns
-- against it.

CREATE TABLE sagacity_checkpoints (
    log_index bigint NOT NULL CHECK (log_index >= 0),
    saga_id   text COLLATE "C" NOT NULL,
    entries   bigint NOT NULL CHECK (entries >= 1),
    head_hash text NOT NULL,
    note      text NOT NULL,
    CONSTRAINT sagacity_checkpoints_pkey PRIMARY KEY (log_index),
    CONSTRAINT sagacity_checkpoints_saga_key UNIQUE (saga_id, entries)
);

CREATE TABLE sagacity_log_nodes (
    level integer NOT NULL CHECK (level >= 0),
    idx   bigint NOT NULL CHECK (idx >= 0),
    hash  bytea NOT NULL,
    CONSTRAINT sagacity_log_nodes_pkey PRIMARY KEY (level, idx)
);

CREATE TABLE sagacity_log_heads (
    size bigint NOT NULL CHECK (size >= 1),
    root bytea NOT NULL,
    note text NOT NULL,
    CONSTRAINT sagacity_log_heads_pkey PRIMARY KEY (size)
);

SELECT sagacity_guard('sagacity_checkpoints');
SELECT sagacity_guard('sagacity_log_nodes');
SELECT sagacity_guard('sagacity_log_heads');

-- The approver registry's high-water mark (sagacity.approval._registry_marks): one row per
-- approver registry (version, SHA-256) that any journal entry records it was judged
-- with, and the first entry that did. A worker compares its registry file with the
-- newest version here when it starts and with every registry answer, and refuses an
-- older one (a revocation undone by putting an old file back). A handful of rows however
-- large the journal grows: one index read, no scan. sagacity_append inserts a mark in
-- the same transaction as its entry, so no such entry commits without its mark.

CREATE TABLE sagacity_registry_marks (
    version bigint NOT NULL CHECK (version >= 1),
    sha256  text COLLATE "C" NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    saga_id text COLLATE "C" NOT NULL,
    seq     bigint NOT NULL CHECK (seq >= 1),
    CONSTRAINT sagacity_registry_marks_pkey PRIMARY KEY (version, sha256)
);

SELECT sagacity_guard('sagacity_registry_marks');

-- sagacity_append: compare-and-append (or claim a tool step) in one round trip.
--
-- The client decides the entry (sagacity.stores._base seals it, its hash computed in
-- Python from the head it believes current) and this function inserts it only if,
-- under the saga's advisory lock, that belief still holds: the head is exactly
-- (seq - 1, prev_hash), or there is no head and seq = 1; and
--   - for an append (p_claim false): no row has the entry's logical key;
--   - for a step's claim (p_claim true, an INTENT): the step has no row at all (any
--     phase, any attempt) and no fence (tombstone).
-- Otherwise it inserts nothing and says why, and the client takes the locked path,
-- which reads the facts and decides in Python (sagacity.stores._postgres,
-- sagacity.stores._postgres_claim). So an entry is never decided on a stale head, and a
-- chain never forks. With the entry it inserts the approver registry the entry records
-- (p_mark_version, p_mark_sha256; NULLs for none).
--
-- Why this is safe: the function is VOLATILE, so under READ COMMITTED each statement
-- in it takes a fresh snapshot; the checks run after the lock is granted and see every
-- append, claim and fence committed before (the lock is released only after the
-- holder's commit is visible). A fence is written without the saga's lock, so one
-- committed after the claim's check races exactly as it does with the locked path's
-- read: the compensation, which reads the step after fencing it, finds the INTENT
-- without an EXECUTED and fails closed for a human, and the tool's own fence check sees
-- the tombstone. The (saga_id, seq) primary key and the logical key remain the safety
-- nets.
--
-- Names in the body are qualified with @schema@ (the runner substitutes the store's
-- quoted schema) so a caller's search_path cannot redirect them; this is cheaper per
-- call than SET search_path FROM CURRENT, which measured about 6% of append throughput.
--
-- Returns 0 when inserted, 1 when the logical key is taken (append) or the step has
-- entries (claim), 2 when the head has moved, 3 when the step is fenced (claim), 4 when
-- a claim's entry is not an INTENT.

CREATE FUNCTION sagacity_append(
    p_lock_key bigint, p_saga_id text, p_seq bigint, p_step integer, p_attempt integer,
    p_tool text, p_phase text, p_input_json text, p_result_json text, p_error_json text,
    p_actor_json text, p_recorded_at text, p_prev_hash text, p_hash text, p_material bytea,
    p_mark_version bigint, p_mark_sha256 text, p_claim boolean)
RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_head_seq bigint;
    v_head_hash text;
BEGIN
    IF p_claim AND p_phase IS DISTINCT FROM 'INTENT' THEN
        RETURN 4;
    END IF;
    PERFORM pg_catalog.pg_advisory_xact_lock(p_lock_key);
    IF p_claim THEN
        IF EXISTS (SELECT 1 FROM @schema@.sagacity_journal j
                    WHERE j.saga_id = p_saga_id AND j.step = p_step) THEN
            RETURN 1;
        END IF;
        IF EXISTS (SELECT 1 FROM @schema@.sagacity_fences f
                    WHERE f.saga_id = p_saga_id AND f.step = p_step) THEN
            RETURN 3;
        END IF;
    ELSIF EXISTS (SELECT 1 FROM @schema@.sagacity_journal j
                   WHERE j.saga_id = p_saga_id AND j.step = p_step
                     AND j.phase = p_phase AND j.attempt = p_attempt) THEN
        RETURN 1;
    END IF;
    SELECT j.seq, j.hash INTO v_head_seq, v_head_hash
      FROM @schema@.sagacity_journal j
     WHERE j.saga_id = p_saga_id
     ORDER BY j.seq DESC
     LIMIT 1;
    IF (p_seq = 1 AND v_head_seq IS NOT NULL)
       OR (p_seq <> 1 AND (v_head_seq IS DISTINCT FROM p_seq - 1
                           OR v_head_hash IS DISTINCT FROM p_prev_hash)) THEN
        RETURN 2;
    END IF;
    INSERT INTO @schema@.sagacity_journal (saga_id, seq, step, attempt, tool, phase,
        input_json, result_json, error_json, actor_json, recorded_at, prev_hash, hash,
        material)
    VALUES (p_saga_id, p_seq, p_step, p_attempt, p_tool, p_phase, p_input_json,
            p_result_json, p_error_json, p_actor_json, p_recorded_at, p_prev_hash, p_hash,
            p_material);
    IF p_mark_version IS NOT NULL THEN
        INSERT INTO @schema@.sagacity_registry_marks (version, sha256, saga_id, seq)
        VALUES (p_mark_version, p_mark_sha256, p_saga_id, p_seq)
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN 0;
END
$$;

DROP FUNCTION sagacity_guard(text);
