/* Per-tenant quotas (issue 16.6; docs/configuration.md, "Quotas and
 * retention"): executions per window (429 quota_exceeded), stored bytes and
 * manifests (507 storage_quota_exceeded).  Worker threads only (storage). */
#ifndef EAI_EXEC_QUOTA_H
#define EAI_EXEC_QUOTA_H

#include <stddef.h>

struct eai_app;
struct eai_error;

/* 1 when any quota is configured and the storage backend can measure it. */
int eai_quota_enabled(const struct eai_app *app);
/* Worker: 0 when the tenant may store one more execution of about
 * add_bytes bytes (then counted), else -1 with *err: EAI_E_QUOTA_EXCEEDED,
 * EAI_E_STORAGE_QUOTA_EXCEEDED (with details) or the storage's error. */
int eai_quota_admit_exec(struct eai_app *app, const char *tenant, size_t add_bytes, struct eai_error **err);
/* Worker: the same for a manifest that does not exist yet (is_new), or
 * one replaced (only the stored bytes count). */
int eai_quota_admit_manifest(struct eai_app *app, const char *tenant, int is_new, size_t add_bytes,
                             struct eai_error **err);
/* Start-up: log the quotas, or warn that the storage cannot enforce them. */
void eai_quota_log_start(const struct eai_app *app);
/* 1 when err is a quota refusal (answer it as it is, audited as denied). */
int eai_quota_refusal(const struct eai_error *err);

#endif
