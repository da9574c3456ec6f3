/* The admin CLI of eaid (API.md "Admin path"; docs/api.md). */
#ifndef EAI_CORE_CLI_H
#define EAI_CORE_CLI_H

/* argv[0] is the command ("tenants", "keys", "migrate", "images",
 * "audit", "errors", "version"); returns the process exit code
 * (0 ok, 1 failure, 2 usage). */
int eai_cli_run(const char *config_file, int argc, char **argv);
/* Print the error table: Markdown (docs/errors.md) or tab-separated. */
void eai_cli_print_errors(int markdown);
void eai_cli_usage(void);

/* cli_admin.c: listings and key expiry. */
#include <stdint.h>
struct eai_storage_ops;
/* --expires value: RFC 3339 time, or a duration of <n><unit>... (units w d h
 * m s: 90d, 1h30m) from now_ms.  0 with *out the instant (after now_ms, at
 * most 100 years later), -1 when malformed, not in the future or too far. */
int eai_cli_parse_expires(const char *s, int64_t now_ms, int64_t *out);
/* 1 when the backend has tenant_list, key_list and key_create_expiring. */
int eai_cli_has_admin_ops(const struct eai_storage_ops *ops);
/* Tab-separated table with a header, or JSON Lines; the exit code. */
int eai_cli_tenants_list(const struct eai_storage_ops *ops, void *store, int as_json);
int eai_cli_keys_list(const struct eai_storage_ops *ops, void *store, const char *tenant, int as_json);

#endif
