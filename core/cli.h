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

#endif
