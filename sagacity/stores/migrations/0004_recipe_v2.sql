-- sagacity journal, schema version 4: recipe v2 (sagacity.recipe_v2), hash what is stored.
--
-- Additive: one nullable column and one new function; no row is touched, the append-only
-- triggers stay as they are (ALTER TABLE ... ADD COLUMN neither fires nor drops them).
--
-- `material` holds a v2 entry's hashed bytes exactly as hashed, and is NULL for a v1 row.
-- A v2 row keeps its payloads only there: its input_json, result_json and error_json
-- columns hold the empty string, which no v1 row holds (a v1 payload is JSON text). The
-- other columns stay, for lookups; `sagacity verify` checks them against the bytes.
--
-- sagacity_append_v2 is sagacity_append (migration 0002) with the material: the same
-- checks under the saga's advisory lock, the same answers (0 inserted, 1 key taken,
-- 2 head moved). sagacity_append stays for clients of schema version 3.

ALTER TABLE sagacity_journal ADD COLUMN material bytea;

CREATE FUNCTION sagacity_append_v2(
    p_lock_key bigint, p_saga_id text, p_seq bigint, p_step integer, p_attempt integer,
    p_tool text, p_phase text, p_input_json text, p_result_json text, p_error_json text,
    p_actor_json text, p_recorded_at text, p_prev_hash text, p_hash text, p_material bytea)
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
    RETURN 0;
END
$$;
