-- sagacity journal, schema version 5: claim a saga step in one round trip.
--
-- Additive: one new function; no table, row or trigger is touched.
--
-- sagacity_begin_step_v2 is the optimistic claim of a tool step, as sagacity_append_v2
-- (migration 0004) is the optimistic append. The client seals the INTENT against the
-- head it believes current (it wrote that head itself) and this function inserts it
-- only if, under the saga's advisory lock, the step is untouched: no row of the step at
-- all (any phase, any attempt), no fence (tombstone) for it, and the head is exactly
-- (seq - 1, prev_hash). Anything else inserts nothing and answers why; the client then
-- takes the locked path, which reads the step, the head and the fence and decides in
-- Python (a recorded outcome returned, an earlier attempt's INTENT reported, a fence
-- honoured, the same attempt's retry kept). So only the plain claim is decided here.
--
-- Why this is safe: VOLATILE under READ COMMITTED, so each statement below takes a
-- fresh snapshot after the lock is granted and sees every claim, append and fence
-- committed before. A fence is written without the saga's lock, so one committed after
-- this check races exactly as it does with the locked path's read: the compensation,
-- which reads the step after fencing it, finds this INTENT without an EXECUTED and fails
-- closed for a human, and the tool's own fence check sees the tombstone. The
-- (saga_id, seq) primary key and the (saga_id, step, phase, attempt) key remain the
-- safety nets.
--
-- Returns 0 when inserted, 1 when the step already has entries, 2 when the head has
-- moved, 3 when the step is fenced, 4 when the entry is not an INTENT.

CREATE FUNCTION sagacity_begin_step_v2(
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
    IF p_phase IS DISTINCT FROM 'INTENT' THEN
        RETURN 4;
    END IF;
    PERFORM pg_catalog.pg_advisory_xact_lock(p_lock_key);
    IF EXISTS (SELECT 1 FROM @schema@.sagacity_journal j
                WHERE j.saga_id = p_saga_id AND j.step = p_step) THEN
        RETURN 1;
    END IF;
    IF EXISTS (SELECT 1 FROM @schema@.sagacity_fences f
                WHERE f.saga_id = p_saga_id AND f.step = p_step) THEN
        RETURN 3;
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
