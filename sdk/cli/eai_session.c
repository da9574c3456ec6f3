/* eai session create|ls|get|exec|put|cat|files|rm|close (docs/sessions.md). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "eai.h"

/* Common options and positional arguments of the session verbs; options of
 * the verb itself come as (name, value) pairs in opt/optv.  "--" ends the
 * options (what follows is kept for exec). */
struct sargs {
    struct eai_opts o;
    const char *pos[4];
    int npos;
    const char *opt[32];
    const char *optv[32];
    int nopt;
    int rest; /* index after "--" in argv, 0 when none */
};

static int sparse(const struct eai_opts *go, int argc, char **argv, const char *const *with_value,
                  struct sargs *a)
{
    memset(a, 0, sizeof *a);
    a->o = *go;
    for (int i = 2; i < argc; i++) { /* argv[0] "session", argv[1] the verb */
        const char *s = argv[i];
        if (strcmp(s, "--") == 0) {
            a->rest = i + 1;
            return 0;
        }
        if (strcmp(s, "--json") == 0) {
            a->o.json = 1;
            continue;
        }
        if (strcmp(s, "--lang") == 0 || strcmp(s, "--url") == 0) {
            if (i + 1 >= argc)
                return -1;
            if (s[2] == 'l')
                a->o.lang = argv[++i];
            else
                a->o.url = argv[++i];
            continue;
        }
        if (s[0] == '-' && s[1]) {
            int known = 0;
            for (int k = 0; with_value && with_value[k]; k++)
                if (strcmp(s, with_value[k]) == 0)
                    known = 1;
            if (!known || i + 1 >= argc || a->nopt >= 32) {
                fprintf(stderr, "eai: session: unknown option or missing value: %s\n", s);
                return -1;
            }
            a->opt[a->nopt] = s;
            a->optv[a->nopt++] = argv[++i];
            continue;
        }
        if (a->npos >= 4)
            return -1;
        a->pos[a->npos++] = s;
    }
    return 0;
}

static int sid_ok(const char *id)
{
    if (!id || !*id || strlen(id) > 100 || strpbrk(id, "/?#%")) {
        fprintf(stderr, "eai: '%s' is not a session id (ses_<uuid>)\n", id ? id : "");
        return 0;
    }
    return 1;
}

static int spath(char *out, size_t n, const char *sid, const char *rest, const char *file)
{
    if ((size_t)snprintf(out, n, "/v1/sandbox/sessions/%s%s", sid, rest ? rest : "") >= n)
        return -1;
    if (file) {
        const char *f = file;
        while (*f == '/')
            f++;
        if (eai_url_path_append(out, n, "/") < 0 || eai_url_path_append(out, n, f) < 0)
            return -1;
    }
    return 0;
}

/* One JSON call; the answer when its status is want (or 200..299 when want is
 * 0), else NULL with the envelope printed. */
static json_t *scall(struct eai_http *h, const char *method, const char *path, json_t *body, long want,
                     const char *what)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    long status;
    json_t *resp = NULL;
    int r = eai_http_call(h, method, path, text, NULL, &status, &resp, 0);
    free(text);
    if (r < 0)
        return NULL;
    if ((want && status != want) || (!want && (status < 200 || status > 299))) {
        eai_print_api_error(what, status, resp);
        json_decref(resp);
        return NULL;
    }
    return resp ? resp : json_object();
}

static int limit_opt(json_t *limits, const char *opt, const char *v)
{
    static const char *const keys[][2] = {
        {"--memory", "memory"}, {"--cpu", "cpu"}, {"--disk", "disk"}, {"--pids", "pids"}};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        if (strcmp(opt, keys[k][0]) != 0)
            continue;
        if (strcmp(keys[k][1], "pids") == 0) {
            char *end;
            long long n = strtoll(v, &end, 10);
            if (*end || n <= 0)
                return -1;
            json_object_set_new(limits, "pids", json_integer(n));
        } else {
            json_object_set_new(limits, keys[k][1], json_string(v));
        }
        return 1;
    }
    return 0;
}

static int int_opt(json_t *body, const char *key, const char *v)
{
    char *end;
    long long n = strtoll(v, &end, 10);
    if (!*v || *end || n <= 0) {
        fprintf(stderr, "eai: %s must be a positive integer\n", key);
        return -1;
    }
    json_object_set_new(body, key, json_integer(n));
    return 0;
}

static int env_opt(json_t *env, const char *v)
{
    const char *eq = strchr(v, '=');
    if (!eq || eq == v) {
        fprintf(stderr, "eai: --env takes K=V\n");
        return -1;
    }
    json_object_setn_new(env, v, (size_t)(eq - v), json_string(eq + 1));
    return 0;
}

/* "a:80,b:443" (or "" for none) -> a JSON array of its entries. */
static json_t *egress_list(const char *v)
{
    json_t *arr = json_array();
    char *copy = strdup(v ? v : "");
    char *save = NULL;
    for (char *e = copy ? strtok_r(copy, ",", &save) : NULL; arr && e; e = strtok_r(NULL, ",", &save))
        if (*e)
            json_array_append_new(arr, json_string(e));
    free(copy);
    return arr;
}

static int verb_create(struct eai_http *h, const struct sargs *a)
{
    json_t *body = json_object(), *limits = json_object(), *env = json_object();
    int rc = EAI_EXIT_USAGE;
    for (int k = 0; k < a->nopt; k++) {
        const char *o = a->opt[k], *v = a->optv[k];
        int l = limit_opt(limits, o, v);
        if (l < 0) {
            fprintf(stderr, "eai: %s: bad value '%s'\n", o, v);
            goto out;
        }
        if (l > 0)
            continue;
        if (strcmp(o, "--image") == 0 || strcmp(o, "--profile") == 0)
            json_object_set_new(body, o + 2, json_string(v));
        else if (strcmp(o, "--env") == 0) {
            if (env_opt(env, v) < 0)
                goto out;
        } else if (strcmp(o, "--egress") == 0) {
            json_object_set_new(body, "network", json_pack("{s:o}", "egress", egress_list(v)));
        } else if (strcmp(o, "--volume") == 0) {
            if (eai_volume_opt(body, v) < 0)
                goto out;
        } else if (strcmp(o, "--auto-pause") == 0) {
            if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0) {
                fprintf(stderr, "eai: --auto-pause: on or off\n");
                goto out;
            }
            json_object_set_new(body, "auto_pause", json_boolean(strcmp(v, "on") == 0));
        } else if ((strcmp(o, "--paused-ttl") == 0 && int_opt(body, "paused_ttl_s", v) < 0) ||
                   (strcmp(o, "--idle-timeout") == 0 && int_opt(body, "idle_timeout_s", v) < 0) ||
                   (strcmp(o, "--ttl") == 0 && int_opt(body, "ttl_s", v) < 0) ||
                   (strcmp(o, "--max-concurrent") == 0 && int_opt(body, "max_concurrent_executions", v) < 0))
            goto out;
    }
    if (!json_object_get(body, "image")) {
        fprintf(stderr, "eai: session create needs --image\n");
        goto out;
    }
    if (json_object_size(limits))
        json_object_set(body, "limits", limits);
    if (json_object_size(env))
        json_object_set(body, "env", env);
    rc = 1;
    /* No Idempotency-Key on this route: eai_http_call does not retry. */
    json_t *s = scall(h, "POST", "/v1/sandbox/sessions", body, 201, "session create");
    if (s) {
        if (a->o.json)
            eai_print_json(s);
        else
            printf("%s\n", eai_jstr(s, "id") ? eai_jstr(s, "id") : "?");
        rc = 0;
        json_decref(s);
    }
out:
    json_decref(body);
    json_decref(limits);
    json_decref(env);
    return rc;
}

static int verb_ls(struct eai_http *h, const struct sargs *a)
{
    char path[512] = "/v1/sandbox/sessions";
    for (int k = 0; k < a->nopt; k++)
        if (strcmp(a->opt[k], "--status") == 0 && eai_url_query_append(path, sizeof path, "status", a->optv[k]) < 0)
            return EAI_EXIT_USAGE;
    json_t *r = scall(h, "GET", path, NULL, 200, "session ls");
    if (!r)
        return 1;
    if (a->o.json) {
        eai_print_json(r);
    } else {
        size_t i;
        json_t *it;
        json_array_foreach(json_object_get(r, "items"), i, it)
        {
            const json_t *n = json_object_get(it, "executions");
            printf("%-40s %-8s %-14s %-20s %lld exec\n", eai_jstr(it, "id") ? eai_jstr(it, "id") : "?",
                   eai_jstr(it, "status") ? eai_jstr(it, "status") : "?",
                   eai_jstr(it, "profile") ? eai_jstr(it, "profile") : "-",
                   eai_jstr(it, "created_at") ? eai_jstr(it, "created_at") : "-",
                   json_is_integer(n) ? (long long)json_integer_value(n) : 0LL);
        }
    }
    json_decref(r);
    return 0;
}

static int verb_exec(struct eai_http *h, const struct sargs *a, int argc, char **argv)
{
    json_t *body = json_object(), *cmd = json_array(), *env = json_object();
    int rc = EAI_EXIT_USAGE;
    char path[512];
    for (int k = 0; k < a->nopt; k++) {
        const char *o = a->opt[k], *v = a->optv[k];
        if (strcmp(o, "--env") == 0) {
            if (env_opt(env, v) < 0)
                goto out;
        } else if (strcmp(o, "--timeout") == 0) {
            if (int_opt(body, "timeout_s", v) < 0)
                goto out;
        } else if (strcmp(o, "--stdin-file") == 0) {
            size_t len = 0;
            unsigned char *d = eai_read_local(strcmp(v, "-") == 0 ? "/dev/stdin" : v, &len);
            if (!d) {
                fprintf(stderr, "eai: cannot read '%s': %s\n", v, strerror(errno));
                goto out;
            }
            if (!eai_utf8_valid(d, len)) {
                fprintf(stderr, "eai: --stdin-file: the API takes text stdin (UTF-8 without NUL)\n");
                free(d);
                goto out;
            }
            json_object_set_new(body, "stdin", json_stringn((const char *)d, len));
            free(d);
        }
    }
    for (int i = a->rest; a->rest && i < argc; i++)
        json_array_append_new(cmd, json_string(argv[i]));
    if (!json_array_size(cmd)) {
        fprintf(stderr, "eai: no command (eai session exec SID [options] -- CMD ARGS...)\n");
        goto out;
    }
    json_object_set(body, "command", cmd);
    if (json_object_size(env))
        json_object_set(body, "env", env);
    rc = EAI_EXIT_PLATFORM;
    if (spath(path, sizeof path, a->pos[0], "/executions", NULL) < 0)
        goto out;
    json_t *r = scall(h, "POST", path, body, 202, "refused");
    if (!r || !eai_jstr(r, "id")) {
        json_decref(r);
        goto out;
    }
    char id[128];
    snprintf(id, sizeof id, "%s", eai_jstr(r, "id"));
    fprintf(stderr, "eai: execution %s in %s (%s)\n", id, a->pos[0],
            eai_jstr(r, "status") ? eai_jstr(r, "status") : "?");
    json_decref(r);
    /* the output once it has ended (docs/executions.md: session exec) */
    json_t *rec = eai_wait_and_print(h, id, a->o.json, 0);
    if (rec) {
        rc = eai_exit_for(rec);
        json_decref(rec);
    }
out:
    json_decref(body);
    json_decref(cmd);
    json_decref(env);
    return rc;
}

/* PUT the raw bytes of a local file (- for stdin). */
static int verb_put(struct eai_http *h, const struct sargs *a)
{
    size_t len = 0;
    const char *local = a->pos[1];
    unsigned char *d = eai_read_local(strcmp(local, "-") == 0 ? "/dev/stdin" : local, &len);
    if (!d) {
        fprintf(stderr, "eai: cannot read '%s': %s\n", local, strerror(errno));
        return 1;
    }
    char path[8192], url[8192 + 512];
    if (spath(path, sizeof path, a->pos[0], "/files", a->pos[2]) < 0 ||
        (size_t)snprintf(url, sizeof url, "%s%s", h->base, path) >= sizeof url) {
        free(d);
        fprintf(stderr, "eai: path too long\n");
        return EAI_EXIT_USAGE;
    }
    struct curl_slist *hdrs =
        eai_http_headers(h, "Accept: application/json", "Content-Type: application/octet-stream", 0);
    FILE *sink = fopen("/dev/null", "we");
    eai_http_setup(h, url, hdrs, 600L);
    curl_easy_setopt(h->curl, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, (const char *)d);
    curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    char *resp = NULL;
    size_t rlen = 0;
    FILE *mem = open_memstream(&resp, &rlen);
    curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, mem ? mem : sink);
    CURLcode cr = curl_easy_perform(h->curl);
    curl_slist_free_all(hdrs);
    free(d);
    if (mem)
        fclose(mem);
    if (sink)
        fclose(sink);
    int rc = 1;
    if (cr != CURLE_OK) {
        fprintf(stderr, "eai: PUT %s: %s\n", url, curl_easy_strerror(cr));
    } else {
        long status = 0;
        curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &status);
        json_t *j = resp ? json_loadb(resp, rlen, 0, NULL) : NULL;
        if (status == 200) {
            if (a->o.json && j)
                eai_print_json(j);
            rc = 0;
        } else {
            eai_print_api_error(a->pos[2], status, j);
        }
        json_decref(j);
    }
    free(resp);
    return rc;
}

static int verb_cat(struct eai_http *h, const struct sargs *a)
{
    const char *out = NULL;
    for (int k = 0; k < a->nopt; k++)
        if (strcmp(a->opt[k], "-o") == 0)
            out = a->optv[k];
    char path[8192];
    if (spath(path, sizeof path, a->pos[0], "/files", a->pos[1]) < 0)
        return EAI_EXIT_USAGE;
    FILE *f = out ? fopen(out, "wbe") : stdout;
    if (!f) {
        fprintf(stderr, "eai: cannot write '%s': %s\n", out, strerror(errno));
        return 1;
    }
    long status = 0;
    json_t *err = NULL;
    uint64_t bytes = 0;
    int rc = 1;
    if (eai_http_download(h, path, f, &status, &err, &bytes) == 0) {
        if (status == 200)
            rc = 0;
        else
            eai_print_api_error(a->pos[1], status, err);
    }
    json_decref(err);
    if (out && fclose(f) != 0)
        rc = 1;
    else if (!out)
        fflush(stdout);
    return rc;
}

static int verb_files(struct eai_http *h, const struct sargs *a)
{
    char path[8192];
    if (spath(path, sizeof path, a->pos[0], "/files", NULL) < 0 ||
        (a->npos > 1 && eai_url_query_append(path, sizeof path, "path", a->pos[1]) < 0))
        return EAI_EXIT_USAGE;
    json_t *r = scall(h, "GET", path, NULL, 200, a->pos[0]);
    if (!r)
        return 1;
    if (a->o.json) {
        eai_print_json(r);
    } else {
        size_t i;
        json_t *it;
        json_array_foreach(json_object_get(r, "items"), i, it)
        {
            const json_t *n = json_object_get(it, "size");
            printf("%-6s %12lld  %s\n", eai_jstr(it, "type") ? eai_jstr(it, "type") : "?",
                   json_is_integer(n) ? (long long)json_integer_value(n) : 0LL,
                   eai_jstr(it, "path") ? eai_jstr(it, "path") : "?");
        }
    }
    json_decref(r);
    return 0;
}

static int verb_simple(struct eai_http *h, const struct sargs *a, const char *method, const char *file)
{
    char path[8192];
    if (spath(path, sizeof path, a->pos[0], file ? "/files" : NULL, file) < 0)
        return EAI_EXIT_USAGE;
    json_t *r = scall(h, method, path, NULL, 200, file ? file : a->pos[0]);
    if (!r)
        return 1;
    if (a->o.json || strcmp(method, "GET") == 0)
        eai_print_json(r);
    else if (!file) { /* close: the ended session's usage */
        const json_t *u = json_object_get(r, "usage");
        const json_t *cpu = json_object_get(u, "cpu_seconds"), *dur = json_object_get(u, "duration_s");
        printf("%s %s (%s) cpu %.3f s, %.3f s\n", a->pos[0], eai_jstr(r, "status") ? eai_jstr(r, "status") : "?",
               eai_jstr(r, "end_reason") ? eai_jstr(r, "end_reason") : "-", json_is_number(cpu) ? json_number_value(cpu) : 0.0,
               json_is_number(dur) ? json_number_value(dur) : 0.0);
    }
    json_decref(r);
    return 0;
}

/* pause / resume: the session's state afterwards (ID, status, end reason). */
static int verb_state(struct eai_http *h, const struct sargs *a, const char *what)
{
    char path[8192];
    if (spath(path, sizeof path, a->pos[0], what, NULL) < 0)
        return EAI_EXIT_USAGE;
    json_t *r = scall(h, "POST", path, NULL, 200, a->pos[0]);
    if (!r)
        return 1;
    if (a->o.json)
        eai_print_json(r);
    else
        printf("%s\t%s\t%s\n", a->pos[0], eai_jstr(r, "status") ? eai_jstr(r, "status") : "?",
               eai_jstr(r, "end_reason") ? eai_jstr(r, "end_reason") : "-");
    json_decref(r);
    return 0;
}

/* egress SES [--set LIST]: its allow list (and network summary), or the
 * list replaced (PUT .../network). */
static int verb_egress(struct eai_http *h, const struct sargs *a)
{
    char path[8192];
    if (spath(path, sizeof path, a->pos[0], "/network", NULL) < 0)
        return EAI_EXIT_USAGE;
    const char *set = NULL;
    for (int k = 0; k < a->nopt; k++)
        if (strcmp(a->opt[k], "--set") == 0)
            set = a->optv[k];
    json_t *body = set ? json_pack("{s:o}", "egress", egress_list(set)) : NULL;
    json_t *r = scall(h, set ? "PUT" : "GET", path, body, 200, a->pos[0]);
    json_decref(body);
    if (!r)
        return 1;
    if (a->o.json) {
        eai_print_json(r);
    } else {
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(r, "egress"), i, e)
            printf("%s\n", json_string_value(e) ? json_string_value(e) : "?");
    }
    json_decref(r);
    return 0;
}

/* snapshot SID [--ttl S]: prints the snapshot's id (POST .../snapshots);
 * fork SNP [--count N]: the new sessions' ids, one a line; snapshots
 * [--session SID]: this tenant's; unsnap SNP: DELETE /v1/sandbox/snapshots
 * (docs/sessions.md "Snapshots and forks"). */
static int verb_snapshot(struct eai_http *h, const struct sargs *a)
{
    char path[8192];
    if (spath(path, sizeof path, a->pos[0], "/snapshots", NULL) < 0)
        return EAI_EXIT_USAGE;
    json_t *body = NULL;
    for (int k = 0; k < a->nopt; k++)
        if (strcmp(a->opt[k], "--ttl") == 0) {
            char *end = NULL;
            long long v = strtoll(a->optv[k], &end, 10);
            if (!end || *end || v < 1) {
                fprintf(stderr, "eai: --ttl: seconds, at least 1\n");
                return EAI_EXIT_USAGE;
            }
            body = json_pack("{s:I}", "ttl_s", (json_int_t)v);
        }
    json_t *r = scall(h, "POST", path, body, 201, a->pos[0]);
    json_decref(body);
    if (!r)
        return 1;
    if (a->o.json)
        eai_print_json(r);
    else
        printf("%s\n", eai_jstr(r, "id") ? eai_jstr(r, "id") : "?");
    json_decref(r);
    return 0;
}

static int verb_fork(struct eai_http *h, const struct sargs *a)
{
    json_t *body = json_pack("{s:s}", "from_snapshot", a->pos[0]);
    for (int k = 0; body && k < a->nopt; k++)
        if (strcmp(a->opt[k], "--count") == 0) {
            char *end = NULL;
            long long v = strtoll(a->optv[k], &end, 10);
            if (!end || *end || v < 1) {
                fprintf(stderr, "eai: --count: a number, at least 1\n");
                json_decref(body);
                return EAI_EXIT_USAGE;
            }
            json_object_set_new(body, "count", json_integer(v));
        }
    json_t *r = body ? scall(h, "POST", "/v1/sandbox/sessions", body, 201, a->pos[0]) : NULL;
    json_decref(body);
    if (!r)
        return 1;
    if (a->o.json) {
        eai_print_json(r);
    } else if (json_object_get(r, "items")) {
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(r, "items"), i, e)
            printf("%s\t%s\n", eai_jstr(e, "id") ? eai_jstr(e, "id") : "-",
                   eai_jstr(e, "status") ? eai_jstr(e, "status") : "?");
    } else {
        printf("%s\n", eai_jstr(r, "id") ? eai_jstr(r, "id") : "?");
    }
    json_decref(r);
    return 0;
}

static int verb_snapshots(struct eai_http *h, const struct sargs *a)
{
    char path[8192] = "/v1/sandbox/snapshots";
    for (int k = 0; k < a->nopt; k++)
        if (strcmp(a->opt[k], "--session") == 0 && (!sid_ok(a->optv[k]) ||
            (size_t)snprintf(path, sizeof path, "/v1/sandbox/snapshots?session_id=%s", a->optv[k]) >= sizeof path))
            return EAI_EXIT_USAGE;
    json_t *r = scall(h, "GET", path, NULL, 200, "snapshots");
    if (!r)
        return 1;
    if (a->o.json) {
        eai_print_json(r);
    } else {
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(r, "items"), i, e) {
            const json_t *sz = json_object_get(e, "size_bytes");
            printf("%s\t%s\t%s\t%lld\t%s\n", eai_jstr(e, "id") ? eai_jstr(e, "id") : "?",
                   eai_jstr(e, "status") ? eai_jstr(e, "status") : "?",
                   eai_jstr(e, "session_id") ? eai_jstr(e, "session_id") : "-",
                   json_is_integer(sz) ? (long long)json_integer_value(sz) : 0LL,
                   eai_jstr(e, "expires_at") ? eai_jstr(e, "expires_at") : "-");
        }
    }
    json_decref(r);
    return 0;
}

static int verb_unsnap(struct eai_http *h, const struct sargs *a)
{
    char path[8192];
    if ((size_t)snprintf(path, sizeof path, "/v1/sandbox/snapshots/%s", a->pos[0]) >= sizeof path)
        return EAI_EXIT_USAGE;
    json_t *r = scall(h, "DELETE", path, NULL, 200, a->pos[0]);
    if (!r)
        return 1;
    if (a->o.json)
        eai_print_json(r);
    else
        printf("%s\t%s\n", a->pos[0], eai_jstr(r, "status") ? eai_jstr(r, "status") : "?");
    json_decref(r);
    return 0;
}

int eai_cmd_session(const struct eai_opts *go, int argc, char **argv)
{
    static const char *const create_opts[] = {"--image", "--profile", "--memory", "--cpu", "--pids", "--disk",
                                              "--env", "--idle-timeout", "--ttl", "--max-concurrent", "--egress",
                                              "--auto-pause", "--paused-ttl", "--volume", NULL};
    static const char *const egress_opts[] = {"--set", NULL};
    static const char *const exec_opts[] = {"--timeout", "--env", "--stdin-file", NULL};
    static const char *const ls_opts[] = {"--status", NULL};
    static const char *const cat_opts[] = {"-o", NULL};
    static const char *const snap_opts[] = {"--ttl", NULL};
    static const char *const fork_opts[] = {"--count", NULL};
    static const char *const snaps_opts[] = {"--session", NULL};
    static const struct {
        const char *verb;
        const char *const *opts;
        int npos; /* positional arguments: exactly, or -(at most) */
    } verbs[] = {{"create", create_opts, 0}, {"ls", ls_opts, 0},   {"get", NULL, 1},   {"exec", exec_opts, 1},
                 {"put", NULL, 3},          {"cat", cat_opts, 2}, {"files", NULL, -2}, {"rm", NULL, 2},
                 {"close", NULL, 1},        {"pause", NULL, 1},   {"resume", NULL, 1},
                 {"egress", egress_opts, 1},
                 {"snapshot", snap_opts, 1}, {"fork", fork_opts, 1}, {"snapshots", snaps_opts, 0},
                 {"unsnap", NULL, 1}};
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        eai_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? EAI_EXIT_USAGE : 0;
    }
    size_t v;
    for (v = 0; v < sizeof verbs / sizeof verbs[0]; v++)
        if (strcmp(argv[1], verbs[v].verb) == 0)
            break;
    if (v == sizeof verbs / sizeof verbs[0]) {
        fprintf(stderr, "eai: unknown session verb '%s' (create|ls|get|exec|put|cat|files|rm|close|pause|resume|egress|snapshot|fork|snapshots|unsnap)\n", argv[1]);
        return EAI_EXIT_USAGE;
    }
    struct sargs a;
    if (sparse(go, argc, argv, verbs[v].opts, &a) < 0)
        return EAI_EXIT_USAGE;
    int n = verbs[v].npos;
    if ((n >= 0 && a.npos != n) || (n < 0 && (a.npos < 1 || a.npos > -n)) || (a.rest && strcmp(argv[1], "exec"))) {
        fprintf(stderr, "eai: session %s: wrong arguments (see eai --help)\n", argv[1]);
        return EAI_EXIT_USAGE;
    }
    if (a.npos && !sid_ok(a.pos[0]))
        return EAI_EXIT_USAGE;
    struct eai_http h;
    int rc = 1;
    if (eai_http_init(&h, &a.o) == 0) {
        const char *verb = argv[1];
        if (strcmp(verb, "create") == 0)
            rc = verb_create(&h, &a);
        else if (strcmp(verb, "ls") == 0)
            rc = verb_ls(&h, &a);
        else if (strcmp(verb, "get") == 0)
            rc = verb_simple(&h, &a, "GET", NULL);
        else if (strcmp(verb, "exec") == 0)
            rc = verb_exec(&h, &a, argc, argv);
        else if (strcmp(verb, "put") == 0)
            rc = verb_put(&h, &a);
        else if (strcmp(verb, "cat") == 0)
            rc = verb_cat(&h, &a);
        else if (strcmp(verb, "files") == 0)
            rc = verb_files(&h, &a);
        else if (strcmp(verb, "rm") == 0)
            rc = verb_simple(&h, &a, "DELETE", a.pos[1]);
        else if (strcmp(verb, "egress") == 0)
            rc = verb_egress(&h, &a);
        else if (strcmp(verb, "snapshot") == 0)
            rc = verb_snapshot(&h, &a);
        else if (strcmp(verb, "fork") == 0)
            rc = verb_fork(&h, &a);
        else if (strcmp(verb, "snapshots") == 0)
            rc = verb_snapshots(&h, &a);
        else if (strcmp(verb, "unsnap") == 0)
            rc = verb_unsnap(&h, &a);
        else if (strcmp(verb, "pause") == 0 || strcmp(verb, "resume") == 0)
            rc = verb_state(&h, &a, verb[0] == 'p' ? "/pause" : "/resume");
        else
            rc = verb_simple(&h, &a, "DELETE", NULL);
    }
    eai_http_free(&h);
    return rc;
}
