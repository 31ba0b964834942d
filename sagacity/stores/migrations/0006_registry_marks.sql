-- sagacity journal, schema version 6: the approver registry's high-water mark
-- (sagacity.registry_marks).
--
-- Additive: one table and one function; no journal row or trigger is touched.
--
-- sagacity_registry_marks holds one row per approver registry (version, SHA-256) that
-- any journal entry records it was judged with, and the first entry that did. A worker
-- compares its registry file with the newest version here when it starts and with every
-- registry answer, and refuses an older one (a revocation undone by putting an old file
-- back). A handful of rows however large the journal grows: one index read, no scan.
--
-- sagacity_append_v3 is sagacity_append_v2 (migration 0004) plus the mark: the client
-- passes the registry the entry records (NULLs for none), and the function inserts it in
-- the same transaction as the entry, so no such entry commits without its mark. The
-- answers are v2's (0 inserted, 1 key taken, 2 head moved). sagacity_append_v2 stays for
-- clients of schema version 5. Journals written before this migration have no marks for
-- their older entries.

CREATE TABLE sagacity_registry_marks (
    version bigint NOT NULL CHECK (version >= 1),
    sha256  text COLLATE "C" NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    saga_id text COLLATE "C" NOT NULL,
    seq     bigint NOT NULL CHECK (seq >= 1),
    CONSTRAINT sagacity_registry_marks_pkey PRIMARY KEY (version, sha256)
);

CREATE TRIGGER sagacity_registry_marks_no_update BEFORE UPDATE ON sagacity_registry_marks
    FOR EACH STATEMENT EXECUTE FUNCTION sagacity_journal_refuse();
CREATE TRIGGER sagacity_registry_marks_no_delete BEFORE DELETE ON sagacity_registry_marks
    FOR EACH STATEMENT EXECUTE FUNCTION sagacity_journal_refuse();
CREATE TRIGGER sagacity_registry_marks_no_truncate BEFORE TRUNCATE ON sagacity_registry_marks
    FOR EACH STATEMENT EXECUTE FUNCTION sagacity_journal_refuse();
ALTER TABLE sagacity_registry_marks ENABLE ALWAYS TRIGGER sagacity_registry_marks_no_update;
ALTER TABLE sagacity_registry_marks ENABLE ALWAYS TRIGGER sagacity_registry_marks_no_delete;
ALTER TABLE sagacity_registry_marks ENABLE ALWAYS TRIGGER sagacity_registry_marks_no_truncate;

CREATE FUNCTION sagacity_append_v3(
    p_lock_key bigint, p_saga_id text, p_seq bigint, p_step integer, p_attempt integer,
    p_tool text, p_phase text, p_input_json text, p_result_json text, p_error_json text,
    p_actor_json text, p_recorded_at text, p_prev_hash text, p_hash text, p_material bytea,
    p_mark_version bigint, p_mark_sha256 text)
RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    v_head_seq bigint;
    v_head_hash text;
BEGIN
    PERFORM pg_catalog.pg_advisory_xact_lock(p_lock_key);
    IF EXISTS (SELECT 1 FROM @schema@.sagacity_journal j
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
