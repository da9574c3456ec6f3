/*
 * The contract suite's check of contracts/v1/execution-record.schema.json:
 * a copy of the backend's ops table whose execution ops validate every
 * record they return (exec_create's existing row, exec_get, exec_list,
 * exec_claim, exec_claim_excluding, exec_cancel, exec_stale), so every test
 * of the suite checks the records it reads on either backend.
 */
#ifndef EAI_TEST_RECORD_SCHEMA_CHECK_H
#define EAI_TEST_RECORD_SCHEMA_CHECK_H

#include <eai/storage.h>

/* The checked table over real (which must outlive it), or NULL when the
 * schema does not load (reported on stderr). */
const struct eai_storage_ops *record_schema_wrap(const struct eai_storage_ops *real);

/* Records validated so far, and how many failed. */
long record_schema_checked(void);
long record_schema_failed(void);

/* Release the schema. */
void record_schema_done(void);

#endif
