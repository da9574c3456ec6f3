/* `eai session ...`: sessions (docs/sessions.md) from the command line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eai.h"

static int usage(void)
{
    fprintf(stderr, "eai: usage: eai session create|exec|ls|get|rm|pause|resume|put|cat|files ... (see eai --help)\n");
    return EAI_EXIT_USAGE;
}

/* --json, --lang and --url after the command too. */
static int global_opt(struct eai_opts *o, int argc, char **argv, int *i)
{
    if (strcmp(argv[*i], "--json") == 0) {
        o->json = 1;
        return 1;
    }
    if ((strcmp(argv[*i], "--lang") == 0 || strcmp(argv[*i], "--url") == 0) && *i + 1 < argc) {
        if (argv[*i][2] == 'l')
            o->lang = argv[++*i];
        else
            o->url = argv[++*i];
        return 1;
    }
    return 0;
}

/* One JSON call; prints the answer (JSON, or what print_fn makes of it).
 * 0 on a 2xx, 1 otherwise (the server's message on stderr). */
static int call(const struct eai_opts *o, const char *method, const char *path, const json_t *body, json_t **out)
{
    struct eai_http h;
    *out = NULL;
    if (eai_http_init(&h, o) < 0) {
        eai_http_free(&h);
        return 1;
    }
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    long status = 0;
    json_t *resp = NULL;
    int rc = eai_http_call(&h, method, path, text, NULL, &status, &resp, 0);
    free(text);
    eai_http_free(&h);
    if (rc < 0)
        return 1;
    if (status < 200 || status > 299) {
        eai_print_api_error(method, status, resp);
        json_decref(resp);
        return 1;
    }
    *out = resp;
    return 0;
}

static int path_of(char *out, size_t n, const char *id, const char *suffix)
{
    snprintf(out, n, "/v1/sandbox/sessions/");
    if (eai_url_path_append(out, n, id) < 0)
        return -1;
    if (suffix && strlen(out) + strlen(suffix) < n)
        strcat(out, suffix);
    return 0;
}

static void print_session(const struct eai_opts *o, const json_t *s)
{
    if (o->json) {
        eai_print_json(s);
        return;
    }
    printf("%s\t%s\t%s\t%s\n", eai_jstr(s, "id") ? eai_jstr(s, "id") : "?",
           eai_jstr(s, "status") ? eai_jstr(s, "status") : "?", eai_jstr(s, "image") ? eai_jstr(s, "image") : "",
           eai_jstr(s, "end_reason") ? eai_jstr(s, "end_reason") : "");
}

static int kv_env(json_t *env, const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv) {
        fprintf(stderr, "eai: --env wants K=V, got '%s'\n", kv);
        return -1;
    }
    char k[256];
    snprintf(k, sizeof k, "%.*s", (int)(eq - kv), kv);
    return json_object_set_new(env, k, json_string(eq + 1));
}

static int cmd_create(struct eai_opts *o, int argc, char **argv)
{
    json_t *body = json_object(), *limits = json_object(), *env = json_object();
    int rc = EAI_EXIT_USAGE;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (global_opt(o, argc, argv, &i))
            continue;
        if (strcmp(a, "--auto-resume") == 0) {
            json_object_set_new(body, "auto_resume", json_true());
            continue;
        }
        if (!v) {
            fprintf(stderr, "eai: %s needs a value\n", a);
            goto out;
        }
        i++;
        if (strcmp(a, "--profile") == 0 || strcmp(a, "--image") == 0)
            json_object_set_new(body, a + 2, json_string(v));
        else if (strcmp(a, "--memory") == 0 || strcmp(a, "--cpu") == 0 || strcmp(a, "--disk") == 0)
            json_object_set_new(limits, a + 2, json_string(v));
        else if (strcmp(a, "--pids") == 0)
            json_object_set_new(limits, "pids", json_integer(atoll(v)));
        else if (strcmp(a, "--idle") == 0)
            json_object_set_new(body, "idle_timeout_s", json_integer(atoll(v)));
        else if (strcmp(a, "--ttl") == 0)
            json_object_set_new(body, "ttl_s", json_integer(atoll(v)));
        else if (strcmp(a, "--max-concurrent") == 0)
            json_object_set_new(body, "max_concurrent_executions", json_integer(atoll(v)));
        else if (strcmp(a, "--env") == 0) {
            if (kv_env(env, v) < 0)
                goto out;
        } else {
            fprintf(stderr, "eai: session create: unknown option %s\n", a);
            goto out;
        }
    }
    if (json_object_size(limits))
        json_object_set(body, "limits", limits);
    if (json_object_size(env))
        json_object_set(body, "env", env);
    json_t *s = NULL;
    rc = call(o, "POST", "/v1/sandbox/sessions", body, &s);
    if (rc == 0) {
        if (o->json)
            eai_print_json(s);
        else
            printf("%s\n", eai_jstr(s, "id") ? eai_jstr(s, "id") : "?");
    }
    json_decref(s);
out:
    json_decref(body);
    json_decref(limits);
    json_decref(env);
    return rc;
}

static int cmd_exec(struct eai_opts *o, int argc, char **argv)
{
    if (argc < 1)
        return usage();
    const char *id = argv[0];
    json_t *body = json_object(), *env = json_object(), *cmd = json_array();
    int rc = EAI_EXIT_USAGE, i;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (global_opt(o, argc, argv, &i))
            continue;
        if (i + 1 >= argc) {
            fprintf(stderr, "eai: %s needs a value\n", argv[i]);
            goto out;
        }
        if (strcmp(argv[i], "--timeout") == 0)
            json_object_set_new(body, "timeout_s", json_integer(atoll(argv[++i])));
        else if (strcmp(argv[i], "--env") == 0) {
            if (kv_env(env, argv[++i]) < 0)
                goto out;
        } else {
            fprintf(stderr, "eai: session exec: unknown option %s\n", argv[i]);
            goto out;
        }
    }
    for (; i < argc; i++)
        json_array_append_new(cmd, json_string(argv[i]));
    if (!json_array_size(cmd)) {
        fprintf(stderr, "eai: session exec ID [options] -- CMD [ARGS...]\n");
        goto out;
    }
    json_object_set(body, "command", cmd);
    if (json_object_size(env))
        json_object_set(body, "env", env);
    char path[512];
    json_t *resp = NULL;
    rc = EAI_EXIT_PLATFORM;
    if (path_of(path, sizeof path, id, "/executions") < 0 || call(o, "POST", path, body, &resp) != 0)
        goto out;
    char eid[128];
    snprintf(eid, sizeof eid, "%s", eai_jstr(resp, "id") ? eai_jstr(resp, "id") : "");
    json_decref(resp);
    fprintf(stderr, "eai: execution %s in session %s (queued)\n", eid, id);
    struct eai_http h;
    if (eai_http_init(&h, o) == 0) {
        json_t *rec = eai_wait_terminal(&h, eid);
        if (rec) {
            uint64_t printed[2] = {0, 0};
            if (o->json)
                eai_print_json(rec);
            else
                eai_print_rest(rec, printed);
            rc = eai_exit_for(rec);
            json_decref(rec);
        }
    }
    eai_http_free(&h);
out:
    json_decref(body);
    json_decref(env);
    json_decref(cmd);
    return rc;
}

static int cmd_put(struct eai_opts *o, const char *id, const char *local, const char *remote)
{
    size_t len = 0;
    unsigned char *data = eai_read_local(local, &len);
    if (!data)
        return 1; /* reported */
    char path[8192];
    int rc = 1;
    struct eai_http h;
    if (path_of(path, sizeof path, id, "/files") == 0 && eai_url_path_append(path, sizeof path, remote) == 0 &&
        eai_http_init(&h, o) == 0) {
        long status = 0;
        json_t *resp = NULL;
        if (eai_http_call_len(&h, "PUT", path, (const char *)data, len, NULL,
                              &status, &resp, 0) == 0) {
            if (status == 200) {
                rc = 0;
                if (o->json)
                    eai_print_json(resp);
            } else {
                eai_print_api_error("put", status, resp);
            }
        }
        json_decref(resp);
        eai_http_free(&h);
    }
    free(data);
    return rc;
}

static int cmd_cat(struct eai_opts *o, const char *id, const char *remote)
{
    char path[8192];
    struct eai_http h;
    int rc = 1;
    if (path_of(path, sizeof path, id, "/files") < 0 || eai_url_path_append(path, sizeof path, remote) < 0)
        return 1;
    if (eai_http_init(&h, o) == 0) {
        long status = 0;
        json_t *err = NULL;
        uint64_t bytes = 0;
        if (eai_http_download(&h, path, stdout, &status, &err, &bytes) == 0) {
            if (status == 200)
                rc = 0;
            else
                eai_print_api_error("cat", status, err);
        }
        json_decref(err);
    }
    eai_http_free(&h);
    fflush(stdout);
    return rc;
}

int eai_cmd_session(const struct eai_opts *go, int argc, char **argv)
{
    struct eai_opts o = *go;
    if (argc < 2)
        return usage();
    const char *sub = argv[1];
    argc -= 2;
    argv += 2;
    if (strcmp(sub, "create") == 0)
        return cmd_create(&o, argc, argv);
    if (strcmp(sub, "exec") == 0)
        return cmd_exec(&o, argc, argv);
    /* the rest: positional arguments and the global options */
    char *pos[3] = {NULL, NULL, NULL};
    int npos = 0;
    for (int i = 0; i < argc; i++) {
        if (global_opt(&o, argc, argv, &i))
            continue;
        if (npos >= 3)
            return usage();
        pos[npos++] = argv[i];
    }
    json_t *resp = NULL;
    char path[8192];
    int rc;
    if (strcmp(sub, "ls") == 0) {
        if ((rc = call(&o, "GET", "/v1/sandbox/sessions", NULL, &resp)) == 0) {
            if (o.json) {
                eai_print_json(resp);
            } else {
                size_t i;
                json_t *s;
                json_array_foreach(json_object_get(resp, "items"), i, s)
                    print_session(&o, s);
            }
        }
        json_decref(resp);
        return rc;
    }
    if (npos < 1)
        return usage();
    if (strcmp(sub, "put") == 0)
        return npos == 3 ? cmd_put(&o, pos[0], pos[1], pos[2]) : usage();
    if (strcmp(sub, "cat") == 0)
        return npos == 2 ? cmd_cat(&o, pos[0], pos[1]) : usage();
    const char *method = "GET", *suffix = NULL;
    if (strcmp(sub, "get") == 0) {
    } else if (strcmp(sub, "rm") == 0) {
        method = "DELETE";
    } else if (strcmp(sub, "pause") == 0 || strcmp(sub, "resume") == 0) {
        method = "POST";
        suffix = sub[0] == 'p' ? "/pause" : "/resume";
    } else if (strcmp(sub, "files") == 0) {
        suffix = "/files";
    } else {
        return usage();
    }
    if (path_of(path, sizeof path, pos[0], suffix) < 0)
        return 1;
    if (strcmp(sub, "files") == 0 && npos == 2 && eai_url_query_append(path, sizeof path, "path", pos[1]) < 0)
        return 1;
    if ((rc = call(&o, method, path, NULL, &resp)) == 0) {
        if (strcmp(sub, "files") == 0 && !o.json) {
            size_t i;
            json_t *f;
            json_array_foreach(json_object_get(resp, "items"), i, f)
                printf("%s\t%s\t%lld\n", eai_jstr(f, "type") ? eai_jstr(f, "type") : "?",
                       eai_jstr(f, "path") ? eai_jstr(f, "path") : "?",
                       (long long)json_integer_value(json_object_get(f, "size")));
        } else {
            print_session(&o, resp);
        }
    }
    json_decref(resp);
    return rc;
}
