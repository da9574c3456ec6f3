#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <eai/storage.h>

#include "daemon.h"
#include "obs/audit_verify.h"
#include "http/auth.h"
#include "http/auth_cache.h"
#include "cli.h"
#include "config/config.h"
#include "base/errors.h"
#include "plugin/host.h"
#include "images/images.h"
#include "base/util.h"

void eai_cli_usage(void)
{
    fprintf(stderr,
            "usage: eaid [--config FILE] COMMAND ...\n"
            "  serve                               run the service (defaults: 127.0.0.1:8080, ./var)\n"
            "  tenants create NAME                 create a tenant, print it as JSON\n"
            "  tenants list [--json]               list tenants (table, or JSON Lines)\n"
            "  keys create --tenant ID [--name L] [--expires T]\n"
            "                                      create an API key, print it once; T is an\n"
            "                                      RFC 3339 time or a duration (90d, 12h, 1h30m)\n"
            "  keys list --tenant ID [--json]      list a tenant's keys (never secrets or hashes)\n"
            "  keys revoke KEY_ID                  revoke an API key\n"
            "  migrate [--app-role ROLE] [--wait S] apply the storage schema (--wait: retry S s for the database)\n"
            "  images build|import|list|remove ... manage the local image store\n"
            "  audit verify [--tenant ID]          check the audit hash chains\n"
            "  config check                        check the configuration as start-up would (plugin keys\n"
            "                                      included), start nothing\n"
            "  errors [--markdown]                 print the error code table\n"
            "  version                             print the version\n");
}

void eai_cli_print_errors(int markdown)
{
    if (markdown) {
        fputs(eai_errors_markdown, stdout); /* docs/errors.md, generated from include/eai/errcodes.txt */
        return;
    }
    for (int i = 1; i < EAI_CODE_MAX; i++) {
        const struct eai_code_info *ci = eai_code_info((enum eai_code)i);
        printf("%s\t%d\t%s\t%s\t%s\n", ci->name, ci->http_status, ci->retryable ? "retryable" : "-", ci->en, ci->fr);
    }
}

struct cli_ctx {
    struct eai_config *cfg;
    struct eai_host *host;
    struct eai_plugin_inst store;
    const struct eai_storage_ops *ops;
    char pepper[65];
};

static void cli_close(struct cli_ctx *c)
{
    eai_app_storage_close(&c->store);
    eai_host_free(c->host);
    eai_config_free(c->cfg);
    explicit_bzero(c->pepper, sizeof(c->pepper));
}

/* Config, data dir, pepper and storage (sqlite: schema applied). */
static int cli_open(struct cli_ctx *c, const char *config_file, int migrate_sqlite)
{
    struct eai_error *err = NULL;
    memset(c, 0, sizeof(*c));
    c->cfg = eai_config_load(config_file, &err);
    if (!c->cfg)
        goto fail;
    if (eai_app_prepare_data_dir(c->cfg, c->pepper, &err) < 0)
        goto fail;
    c->host = eai_host_new(NULL, c->cfg->data_dir);
    if (!c->host) {
        eai_error_set(&err, EAI_E_INTERNAL, "out of memory");
        goto fail;
    }
    eai_host_set_image_dir(c->host, c->cfg->image_dir);
    if (eai_app_storage_open(c->cfg, c->host, &c->store, &err) < 0)
        goto fail;
    c->ops = c->store.desc->ops;
    if (migrate_sqlite && strcmp(c->cfg->storage_backend, "sqlite") == 0 &&
        c->ops->migrate(c->store.self, NULL, &err) < 0)
        goto fail;
    return 0;
fail:
    fprintf(stderr, "eaid: %s\n", err && err->message ? err->message : "cannot open storage");
    eai_error_free(err);
    cli_close(c);
    return -1;
}

static int cmd_tenants(const char *config_file, int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "list") == 0) {
        if (argc > 3 || (argc == 3 && strcmp(argv[2], "--json") != 0)) {
            fprintf(stderr, "usage: eaid tenants list [--json]\n");
            return 2;
        }
        struct cli_ctx c;
        if (cli_open(&c, config_file, 1) < 0)
            return 1;
        int rc = eai_cli_tenants_list(c.ops, c.store.self, argc == 3);
        cli_close(&c);
        return rc;
    }
    if (argc != 3 || strcmp(argv[1], "create") != 0 || !*argv[2]) {
        fprintf(stderr, "usage: eaid tenants create NAME | eaid tenants list [--json]\n");
        return 2;
    }
    if (strlen(argv[2]) > 200) {
        fprintf(stderr, "eaid: tenant name longer than 200 characters\n");
        return 2;
    }
    struct cli_ctx c;
    if (cli_open(&c, config_file, 1) < 0)
        return 1;
    json_t *t = NULL;
    struct eai_error *err = NULL;
    int rc = 1;
    if (c.ops->tenant_create(c.store.self, argv[2], &t, &err) < 0 || !t) {
        fprintf(stderr, "eaid: tenants create: %s\n", err && err->message ? err->message : "failed");
    } else {
        char *s = json_dumps(t, JSON_COMPACT);
        if (s) {
            printf("%s\n", s);
            rc = 0;
        }
        free(s);
    }
    json_decref(t);
    eai_error_free(err);
    cli_close(&c);
    return rc;
}

static int cmd_keys(const char *config_file, int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "list") == 0) {
        const char *tenant = NULL;
        int as_json = 0;
        for (int i = 2; i < argc; i++) {
            if (strcmp(argv[i], "--tenant") == 0 && i + 1 < argc)
                tenant = argv[++i];
            else if (strncmp(argv[i], "--tenant=", 9) == 0)
                tenant = argv[i] + 9;
            else if (strcmp(argv[i], "--json") == 0)
                as_json = 1;
            else
                tenant = NULL, i = argc;
        }
        if (!tenant || !*tenant) {
            fprintf(stderr, "usage: eaid keys list --tenant ID [--json]\n");
            return 2;
        }
        struct cli_ctx c;
        if (cli_open(&c, config_file, 1) < 0)
            return 1;
        int rc = eai_cli_keys_list(c.ops, c.store.self, tenant, as_json);
        cli_close(&c);
        return rc;
    }
    if (argc >= 2 && strcmp(argv[1], "create") == 0) {
        const char *tenant = NULL, *name = "", *expires = NULL;
        for (int i = 2; i < argc; i++) {
            if (strcmp(argv[i], "--tenant") == 0 && i + 1 < argc)
                tenant = argv[++i];
            else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
                name = argv[++i];
            else if (strcmp(argv[i], "--expires") == 0 && i + 1 < argc)
                expires = argv[++i];
            else if (strncmp(argv[i], "--tenant=", 9) == 0)
                tenant = argv[i] + 9;
            else if (strncmp(argv[i], "--name=", 7) == 0)
                name = argv[i] + 7;
            else if (strncmp(argv[i], "--expires=", 10) == 0)
                expires = argv[i] + 10;
            else
                tenant = NULL, i = argc;
        }
        if (!tenant || !*tenant) {
            fprintf(stderr, "usage: eaid keys create --tenant ID [--name LABEL] [--expires TIME|DURATION]\n");
            return 2;
        }
        int64_t expires_ms = 0;
        if (expires && eai_cli_parse_expires(expires, eai_now_ms(), &expires_ms) < 0) {
            fprintf(stderr, "eaid: keys create: --expires wants a future RFC 3339 time (2027-01-31T00:00:00Z)"
                            " or a duration such as 90d, 12h, 1h30m (units w d h m s), at most 100 years; got '%s'\n",
                    expires);
            return 2;
        }
        struct cli_ctx c;
        if (cli_open(&c, config_file, 1) < 0)
            return 1;
        if (expires && !eai_cli_has_admin_ops(c.ops)) {
            fprintf(stderr, "eaid: keys create: this storage backend cannot store an expiry (too old)\n");
            cli_close(&c);
            return 1;
        }
        int rc = 1;
        json_t *t = NULL;
        struct eai_error *err = NULL;
        char key_id[EAI_KEY_ID_LEN + 1], secret[EAI_KEY_SECRET_LEN + 1], full[EAI_KEY_LEN + 1], hash[65];
        if (c.ops->tenant_get(c.store.self, tenant, &t, &err) < 0) {
            fprintf(stderr, "eaid: keys create: %s\n", err && err->message ? err->message : "failed");
        } else if (!t) {
            fprintf(stderr, "eaid: keys create: unknown tenant %s\n", tenant);
        } else if (eai_auth_key_generate(key_id, secret, full) < 0) {
            fprintf(stderr, "eaid: keys create: no randomness\n");
        } else {
            eai_auth_secret_hash(c.pepper, secret, hash);
            int krc = expires ? c.ops->key_create_expiring(c.store.self, tenant, key_id, hash, name, expires_ms, &err)
                              : c.ops->key_create(c.store.self, tenant, key_id, hash, name, &err);
            char until[32] = "";
            if (expires)
                eai_time_rfc3339(expires_ms, until);
            if (krc < 0) {
                fprintf(stderr, "eaid: keys create: %s\n", err && err->message ? err->message : "failed");
            } else {
                fprintf(stderr, "eaid: key %s created for tenant %s%s%s; it is shown once:\n", key_id, tenant,
                        expires ? ", valid until " : "", until);
                printf("%s\n", full);
                fflush(stdout);
                rc = 0;
            }
        }
        explicit_bzero(secret, sizeof(secret));
        explicit_bzero(full, sizeof(full));
        json_decref(t);
        eai_error_free(err);
        cli_close(&c);
        return rc;
    }
    if (argc == 3 && strcmp(argv[1], "revoke") == 0) {
        struct cli_ctx c;
        if (cli_open(&c, config_file, 1) < 0)
            return 1;
        struct eai_error *err = NULL;
        int rc = 0;
        if (c.ops->key_revoke(c.store.self, argv[2], &err) < 0) {
            fprintf(stderr, "eaid: keys revoke: %s\n",
                    err && err->code == EAI_E_NOT_FOUND ? "unknown key id" : err && err->message ? err->message : "failed");
            rc = 1;
        } else {
            /* a running eaid of this data dir drops its cache of verified keys */
            if (eai_auth_cache_notify(c.cfg->data_dir) < 0)
                fprintf(stderr, "eaid: warning: cannot bump %s/%s (%s): a running eaid refuses the key "
                        "within auth.cache_ttl_ms\n", c.cfg->data_dir, EAI_AUTH_MARKER, strerror(errno));
            fprintf(stderr, "eaid: key %s revoked\n", argv[2]);
        }
        eai_error_free(err);
        cli_close(&c);
        return rc;
    }
    fprintf(stderr, "usage: eaid keys create --tenant ID [--name LABEL] [--expires TIME|DURATION]\n"
                    "       eaid keys list --tenant ID [--json] | eaid keys revoke KEY_ID\n");
    return 2;
}

/* `eaid migrate [--app-role ROLE] [--wait S]`: --wait retries for up to S
 * seconds (1..3600) while storage cannot be reached, for an init container
 * started with its database (the chart's bundled PostgreSQL, docs/helm.md);
 * any other error ends it at once. */
static int cmd_migrate(const char *config_file, int argc, char **argv)
{
    const char *role = NULL;
    long wait_s = 0;
    for (int i = 1; i < argc; i++) {
        const char *w = NULL;
        if (strcmp(argv[i], "--app-role") == 0 && i + 1 < argc) {
            role = argv[++i];
        } else if (strncmp(argv[i], "--app-role=", 11) == 0) {
            role = argv[i] + 11;
        } else if (strcmp(argv[i], "--wait") == 0 && i + 1 < argc) {
            w = argv[++i];
        } else if (strncmp(argv[i], "--wait=", 7) == 0) {
            w = argv[i] + 7;
        } else {
            fprintf(stderr, "usage: eaid migrate [--app-role ROLE] [--wait SECONDS]\n");
            return 2;
        }
        if (w) {
            char *end = NULL;
            wait_s = strtol(w, &end, 10);
            if (!*w || *end || wait_s < 1 || wait_s > 3600) {
                fprintf(stderr, "eaid: migrate: --wait takes 1..3600 seconds\n");
                return 2;
            }
        }
    }
    int64_t deadline = eai_now_ms() + wait_s * 1000;
    for (int attempt = 1;; attempt++) {
        struct cli_ctx c;
        struct eai_error *err = NULL;
        int rc = 0;
        if (cli_open(&c, config_file, 0) < 0) {
            rc = 1;
        } else {
            if (c.ops->migrate(c.store.self, role, &err) < 0) {
                fprintf(stderr, "eaid: migrate: %s\n", err && err->message ? err->message : "failed");
                rc = err && err->code == EAI_E_STORAGE_UNAVAILABLE ? 1 : 3;
            } else {
                fprintf(stderr, "eaid: %s schema up to date\n", c.cfg->storage_backend);
            }
            eai_error_free(err);
            cli_close(&c);
        }
        /* cli_open fails the same way for an unreachable database and a bad
         * config: a bad config fails every attempt until the deadline */
        if (rc == 0 || rc == 3 || eai_now_ms() + 2000 > deadline)
            return rc ? 1 : 0;
        fprintf(stderr, "eaid: migrate: storage not reachable yet (attempt %d); retrying in 2 s\n", attempt);
        sleep(2);
    }
}

static int cmd_audit(const char *config_file, int argc, char **argv)
{
    const char *tenant = NULL;
    if (argc < 2 || strcmp(argv[1], "verify") != 0) {
        fprintf(stderr, "usage: eaid audit verify [--tenant ID]\n");
        return 2;
    }
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--tenant") == 0 && i + 1 < argc) {
            tenant = argv[++i];
        } else if (strncmp(argv[i], "--tenant=", 9) == 0) {
            tenant = argv[i] + 9;
        } else {
            fprintf(stderr, "usage: eaid audit verify [--tenant ID]\n");
            return 2;
        }
    }
    struct cli_ctx c;
    if (cli_open(&c, config_file, 1) < 0)
        return 2;
    int rc = eai_audit_verify_cli(c.ops, c.store.self, tenant);
    cli_close(&c);
    return rc;
}

static int cmd_images(const char *config_file, int argc, char **argv)
{
    struct eai_error *err = NULL;
    struct eai_config *cfg = eai_config_load(config_file, &err);
    if (!cfg) {
        fprintf(stderr, "eaid: %s\n", err && err->message ? err->message : "bad configuration");
        eai_error_free(err);
        return 2;
    }
    /* Image trees must stay readable by the sandbox user (runsc's gofer
     * and the program inside read them): umask 022 here only, after the
     * data dir that may hold them was made 0700 under eaid's umask 077. */
    size_t dl = strlen(cfg->data_dir);
    if (strncmp(cfg->image_dir, cfg->data_dir, dl) == 0 && cfg->image_dir[dl] == '/' &&
        eai_mkdir_p(cfg->data_dir, 0700) < 0) {
        fprintf(stderr, "eaid: data dir %s: %s\n", cfg->data_dir, strerror(errno));
        eai_config_free(cfg);
        return 1;
    }
    umask(022);
    int rc = eai_images_cli(cfg->image_dir, argc - 1, argv + 1);
    eai_config_free(cfg);
    return rc;
}

/* `eaid config check`: exit 0 and one line per section, or 2 and the
 * one-line error start-up would stop with. */
static int cmd_config(const char *config_file, int argc, char **argv)
{
    if (argc != 2 || strcmp(argv[1], "check") != 0) {
        eai_cli_usage();
        return 2;
    }
    struct eai_error *err = NULL;
    struct eai_config *cfg = eai_config_load(config_file, &err);
    int rc = 2;
    if (cfg && eai_app_check_config(cfg, stdout, &err) == 0) {
        printf("config %s: ok\n", cfg->source ? cfg->source : "(defaults)");
        rc = 0;
    } else {
        fprintf(stderr, "eaid: %s\n", err && err->message ? err->message : "bad configuration");
    }
    eai_error_free(err);
    eai_config_free(cfg);
    return rc;
}

int eai_cli_run(const char *config_file, int argc, char **argv)
{
    const char *cmd = argv[0];
    if (strcmp(cmd, "tenants") == 0)
        return cmd_tenants(config_file, argc, argv);
    if (strcmp(cmd, "keys") == 0)
        return cmd_keys(config_file, argc, argv);
    if (strcmp(cmd, "migrate") == 0)
        return cmd_migrate(config_file, argc, argv);
    if (strcmp(cmd, "audit") == 0)
        return cmd_audit(config_file, argc, argv);
    if (strcmp(cmd, "images") == 0)
        return cmd_images(config_file, argc, argv);
    if (strcmp(cmd, "config") == 0)
        return cmd_config(config_file, argc, argv);
    if (strcmp(cmd, "errors") == 0) {
        eai_cli_print_errors(argc > 1 && strcmp(argv[1], "--markdown") == 0);
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("eaid %s (plugin ABI %d.%d)\n", EAI_VERSION, EAI_ABI_MAJOR, EAI_ABI_MINOR);
        return 0;
    }
    eai_cli_usage();
    return 2;
}
