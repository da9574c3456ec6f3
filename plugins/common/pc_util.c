/*
 * Small helpers both local sandbox backends need at create() and while
 * laying out a bundle: PATH lookup, the config subtree, a stable hash for
 * per-instance names, the first line of a child's output, the OCI args and
 * env of a job.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "eai_pc.h"

int eai_pc_find_in_path(const char *name, char *out, size_t len)
{
    struct stat st;
    if (strchr(name, '/')) {
        snprintf(out, len, "%s", name);
        return stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0 ? 0 : -1;
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    while (*path) {
        const char *c = strchr(path, ':');
        size_t n = c ? (size_t)(c - path) : strlen(path);
        if (n > 0 && n + strlen(name) + 2 < len) {
            snprintf(out, len, "%.*s/%s", (int)n, path, name);
            if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
                return 0;
        }
        path += n;
        if (*path == ':')
            path++;
    }
    snprintf(out, len, "%s", name);
    return -1;
}

unsigned long long eai_pc_fnv1a(const char *s)
{
    unsigned long long h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

void eai_pc_one_line(char *dst, size_t len, const char *src)
{
    size_t n = 0;
    while (src && src[n] && src[n] != '\n' && n + 1 < len) {
        dst[n] = src[n];
        n++;
    }
    dst[n] = '\0';
}

const char *eai_pc_cfg_str(const json_t *cfg, const char *key)
{
    json_t *v = cfg ? json_object_get(cfg, key) : NULL;
    return json_is_string(v) && *json_string_value(v) ? json_string_value(v) : NULL;
}

int eai_pc_write_json(const char *path, json_t *doc, const char *what, char *msg, size_t msglen)
{
    if (!doc) {
        return eai_pc_fail(msg, msglen, "cannot build %s", what);
    }
    int rc = json_dump_file(doc, path, JSON_COMPACT);
    json_decref(doc);
    if (rc != 0) {
        return eai_pc_fail(msg, msglen, "write %s failed", path);
    }
    return 0;
}

int eai_pc_bundle_prepare(struct eai_pc_bundle *b, const struct eai_iso_job *job, eai_pc_spec_fn spec, char *msg,
                          size_t msglen)
{
    char p[PATH_MAX + 32];
    if (eai_pc_bundle_tmpfs(b->dir, job->disk_bytes, &b->mounted, msg, msglen) < 0 ||
        eai_pc_write_inputs(b->dir, b->uid, job, msg, msglen) < 0)
        return -1;
    snprintf(p, sizeof(p), "%s/config.json", b->dir);
    return eai_pc_write_json(p, spec(b, job), "config.json", msg, msglen);
}

int64_t eai_pc_cpu_quota(int64_t cpu_millis)
{
    if (cpu_millis <= 0)
        return 0;
    int64_t quota = cpu_millis * (EAI_PC_CPU_PERIOD_US / 1000);
    return quota < 1000 ? 1000 : quota;
}

json_t *eai_pc_oci_cpu(int64_t cpu_millis)
{
    return json_pack("{s:I, s:I}", "quota", (json_int_t)eai_pc_cpu_quota(cpu_millis), "period",
                     (json_int_t)EAI_PC_CPU_PERIOD_US);
}

static int env_has(const char *const *env, const char *key)
{
    size_t k = strlen(key);
    for (size_t i = 0; env && env[i]; i++)
        if (!strncmp(env[i], key, k) && env[i][k] == '=')
            return 1;
    return 0;
}

int eai_pc_oci_args_env(const struct eai_iso_job *job, json_t **args_out, json_t **env_out)
{
    json_t *args = json_array(), *env = json_array();
    if (!args || !env)
        goto fail;
    for (size_t i = 0; job->argv[i]; i++)
        if (json_array_append_new(args, json_string(job->argv[i])) < 0)
            goto fail;
    for (size_t i = 0; job->env && job->env[i]; i++) {
        const char *eq = strchr(job->env[i], '=');
        if (eq && eq != job->env[i] && json_array_append_new(env, json_string(job->env[i])) < 0)
            goto fail;
    }
    if (!env_has(job->env, "PATH"))
        json_array_append_new(env, json_string("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
    if (!env_has(job->env, "HOME"))
        json_array_append_new(env, json_string("HOME=/tmp"));
    if (!env_has(job->env, "LANG"))
        json_array_append_new(env, json_string("LANG=C.UTF-8"));
    if (job->traceparent && *job->traceparent && !env_has(job->env, "TRACEPARENT")) {
        char tp[256];
        snprintf(tp, sizeof(tp), "TRACEPARENT=%s", job->traceparent);
        json_array_append_new(env, json_string(tp));
    }
    if (json_array_size(args) == 0)
        goto fail;
    *args_out = args;
    *env_out = env;
    return 0;
fail:
    json_decref(args);
    json_decref(env);
    return -1;
}
