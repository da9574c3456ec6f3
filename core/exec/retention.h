/* Retention by age of execution documents and their files (issue 16.6;
 * docs/configuration.md, "Quotas and retention"): retention.executions_days,
 * pruned on a worker every retention.interval_s.  Never the audit chain,
 * the usage ledger or the outbox.  Loop thread. */
#ifndef EAI_EXEC_RETENTION_H
#define EAI_EXEC_RETENTION_H

struct eai_app;

/* Nothing when retention is off or the storage cannot prune (logged). */
void eai_retention_start(struct eai_app *app);
void eai_retention_stop(struct eai_app *app);

#endif
