/* eai exec: submit, wait with long-polls, print the output, bring the
 * collected files back, exit with the program's status. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eai.h"

static void on_sigint(int sig)
{
    (void)sig;
    eai_interrupted = 1;
}

static int add_file(json_t *files, const char *spec)
{
    const char *colon = strstr(spec, ":/");
    if (!colon || colon == spec) {
        fprintf(stderr, "eai: --file wants LOCAL:/tmp/PATH, got '%s'\n", spec);
        return -1;
    }
    char *local = strndup(spec, (size_t)(colon - spec));
    size_t len = 0;
    unsigned char *data = local ? eai_read_local(local, &len) : NULL;
    if (!data) {
        fprintf(stderr, "eai: cannot read '%s': %s\n", local ? local : spec, strerror(errno));
        free(local);
        return -1;
    }
    free(local);
    json_t *f;
    if (eai_utf8_valid(data, len)) {
        f = json_pack("{s:s, s:s%}", "path", colon + 1, "content", (const char *)data, len);
    } else {
        char *b = eai_b64_encode(data, len);
        f = b ? json_pack("{s:s, s:s}", "path", colon + 1, "content_b64", b) : NULL;
        free(b);
    }
    free(data);
    if (!f || json_array_append_new(files, f) < 0)
        return -1;
    return 0;
}

int eai_exit_for(const json_t *rec)
{
    const char *s = eai_jstr(rec, "status");
    const char *id = eai_jstr(rec, "id") ? eai_jstr(rec, "id") : "?";
    if (!s)
        return EAI_EXIT_PLATFORM;
    if (strcmp(s, "succeeded") == 0)
        return 0;
    if (strcmp(s, "failed") == 0) {
        const json_t *code = json_object_get(rec, "exit_code");
        const json_t *sig = json_object_get(rec, "signal");
        if (json_is_integer(code) && json_integer_value(code) > 0)
            return (int)(json_integer_value(code) & 0xff) ? (int)(json_integer_value(code) & 0xff) : 1;
        if (json_is_integer(sig))
            return 128 + (int)json_integer_value(sig);
        return 1;
    }
    if (strcmp(s, "timeout") == 0) {
        fprintf(stderr, "eai: %s: timeout: the program ran past its time limit and was killed\n", id);
        return EAI_EXIT_TIMEOUT;
    }
    if (strcmp(s, "oom_killed") == 0) {
        fprintf(stderr, "eai: %s: oom_killed: the program hit its memory limit and was killed\n", id);
        return EAI_EXIT_OOM;
    }
    if (strcmp(s, "cancelled") == 0) {
        fprintf(stderr, "eai: %s: cancelled\n", id);
        return EAI_EXIT_PLATFORM;
    }
    const json_t *e = json_object_get(rec, "error");
    fprintf(stderr, "eai: %s: error: %s: %s\n", id, eai_jstr(e, "code") ? eai_jstr(e, "code") : "unknown",
            eai_jstr(e, "message") ? eai_jstr(e, "message") : "the platform could not run the program");
    return EAI_EXIT_PLATFORM;
}

static int positive(const char *opt, const char *v, long long *out)
{
    char *end = NULL;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (!*v || *end || n <= 0 || errno) {
        fprintf(stderr, "eai: %s wants a positive integer, got '%s'\n", opt, v);
        return -1;
    }
    *out = n;
    return 0;
}

json_t *eai_wait_terminal(struct eai_http *h, const char *id)
{
    char path[256];
    long status;
    json_t *resp = NULL;
    int cancel_sent = 0, failures = 0;
    for (;;) {
        if (failures >= 30) {
            fprintf(stderr, "eai: %s: giving up waiting (the server does not answer); see `eai get %s`\n", id, id);
            return NULL;
        }
        if (eai_interrupted && !cancel_sent) {
            snprintf(path, sizeof path, "/v1/sandbox/executions/%s/cancel", id);
            json_t *cr = NULL;
            fprintf(stderr, "eai: %s: interrupted, cancelling\n", id);
            eai_http_call(h, "POST", path, NULL, NULL, &status, &cr, 0);
            json_decref(cr);
            cancel_sent = 1;
        }
        snprintf(path, sizeof path, "/v1/sandbox/executions/%s?wait_s=%d", id, cancel_sent ? 5 : EAI_WAIT_S);
        resp = NULL;
        if (eai_http_call(h, "GET", path, NULL, NULL, &status, &resp, !cancel_sent) < 0) {
            if (eai_interrupted && !cancel_sent)
                continue;
            failures++;
            sleep(1); /* transport error: the server may be restarting */
            continue;
        }
        if (status != 200) {
            eai_print_api_error(id, status, resp);
            json_decref(resp);
            if (status >= 500 && status != 501) {
                failures++;
                sleep(1);
                continue;
            }
            return NULL;
        }
        failures = 0;
        if (eai_is_terminal(eai_jstr(resp, "status")))
            return resp;
        json_decref(resp);
    }
}

json_t *eai_wait_and_print(struct eai_http *h, const char *id, int json, int follow)
{
    /* Live output while it runs, then the terminal record by long-poll,
     * and whatever the stream missed (all of it without follow). */
    uint64_t printed[2] = {0, 0};
    if (follow && !json)
        eai_follow_events(h, id, printed);
    json_t *rec = eai_wait_terminal(h, id);
    if (!rec)
        return NULL;
    if (json)
        eai_print_json(rec);
    else
        eai_print_rest(rec, printed);
    return rec;
}

int eai_cmd_exec(const struct eai_opts *go, int argc, char **argv)
{
    struct eai_opts o = *go;
    json_t *body = json_object(), *limits = json_object(), *env = json_object();
    json_t *files = json_array(), *collect = json_array(), *command = json_array();
    const char *idem = NULL, *download = NULL;
    int i, rc = EAI_EXIT_USAGE;
    if (!body || !limits || !env || !files || !collect || !command)
        goto out;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            eai_usage(stdout);
            rc = 0;
            goto out;
        }
        if (a[0] != '-' || a[1] != '-')
            break; /* the command starts here */
        if (strcmp(a, "--json") == 0) {
            o.json = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "eai: %s needs a value (see eai exec --help)\n", a);
            goto out;
        }
        const char *v = argv[++i];
        long long n;
        if (strcmp(a, "--profile") == 0)
            json_object_set_new(body, "profile", json_string(v));
        else if (strcmp(a, "--image") == 0)
            json_object_set_new(body, "image", json_string(v));
        else if (strcmp(a, "--tool") == 0)
            json_object_set_new(body, "tool", json_string(v));
        else if (strcmp(a, "--project-id") == 0)
            json_object_set_new(body, "project_id", json_string(v));
        else if (strcmp(a, "--agent-id") == 0)
            json_object_set_new(body, "agent_id", json_string(v));
        else if (strcmp(a, "--run-id") == 0)
            json_object_set_new(body, "run_id", json_string(v));
        else if (strcmp(a, "--idempotency-key") == 0)
            idem = v;
        else if (strcmp(a, "--lang") == 0)
            o.lang = v;
        else if (strcmp(a, "--url") == 0)
            o.url = v;
        else if (strcmp(a, "--download") == 0)
            download = v;
        else if (strcmp(a, "--timeout") == 0 || strcmp(a, "--pids") == 0) {
            if (positive(a, v, &n) < 0)
                goto out;
            json_object_set_new(limits, strcmp(a, "--timeout") == 0 ? "timeout_s" : "pids", json_integer(n));
        } else if (strcmp(a, "--memory") == 0)
            json_object_set_new(limits, "memory", json_string(v));
        else if (strcmp(a, "--cpu") == 0)
            json_object_set_new(limits, "cpu", json_string(v));
        else if (strcmp(a, "--disk") == 0)
            json_object_set_new(limits, "disk", json_string(v));
        else if (strcmp(a, "--collect") == 0)
            json_array_append_new(collect, json_string(v));
        else if (strcmp(a, "--egress") == 0) {
            json_t *net = json_object_get(body, "network");
            if (!net) {
                net = json_pack("{s:[]}", "egress");
                json_object_set_new(body, "network", net);
            }
            json_array_append_new(json_object_get(net, "egress"), json_string(v));
        } else if (strcmp(a, "--env") == 0) {
            const char *eq = strchr(v, '=');
            if (!eq || eq == v) {
                fprintf(stderr, "eai: --env wants K=V, got '%s'\n", v);
                goto out;
            }
            char *k = strndup(v, (size_t)(eq - v));
            if (!k)
                goto out;
            json_object_set_new(env, k, json_string(eq + 1));
            free(k);
        } else if (strcmp(a, "--file") == 0) {
            if (add_file(files, v) < 0)
                goto out;
        } else if (strcmp(a, "--volume") == 0) {
            if (eai_volume_opt(body, v) < 0)
                goto out;
        } else if (strcmp(a, "--stdin-file") == 0) {
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
        } else {
            fprintf(stderr, "eai: unknown option %s (see eai exec --help)\n", a);
            goto out;
        }
    }
    for (; i < argc; i++)
        json_array_append_new(command, json_string(argv[i]));
    if (json_array_size(command) == 0 && !json_object_get(body, "tool")) {
        fprintf(stderr, "eai: no command given (eai exec [options] -- CMD ARGS..., or --tool NAME)\n");
        goto out;
    }
    if (json_array_size(command))
        json_object_set(body, "command", command);
    if (json_object_size(limits))
        json_object_set(body, "limits", limits);
    if (json_object_size(env))
        json_object_set(body, "env", env);
    if (json_array_size(files))
        json_object_set(body, "files", files);
    if (json_array_size(collect))
        json_object_set(body, "collect", collect);

    struct eai_http h;
    rc = EAI_EXIT_PLATFORM;
    if (eai_http_init(&h, &o) < 0) {
        eai_http_free(&h);
        goto out;
    }
    char *text = json_dumps(body, JSON_COMPACT);
    char idem_h[320];
    if (idem)
        snprintf(idem_h, sizeof idem_h, "Idempotency-Key: %s", idem);
    long status;
    json_t *resp = NULL;
    if (!text ||
        eai_http_call(&h, "POST", "/v1/sandbox/executions", text, idem ? idem_h : NULL, &status, &resp, 0) < 0) {
        free(text);
        eai_http_free(&h);
        goto out;
    }
    free(text);
    if ((status != 202 && status != 200) || !eai_jstr(resp, "id")) {
        eai_print_api_error("refused", status, resp);
        if (o.json && resp)
            eai_print_json(resp);
        json_decref(resp);
        eai_http_free(&h);
        goto out;
    }
    char id[128];
    snprintf(id, sizeof id, "%s", eai_jstr(resp, "id"));
    /* The id first, on stderr: whatever happens next, the user can find it. */
    fprintf(stderr, "eai: execution %s (%s)\n", id, eai_jstr(resp, "status") ? eai_jstr(resp, "status") : "?");
    json_decref(resp);
    signal(SIGINT, on_sigint);
    signal(SIGTERM, on_sigint);
    /* live output (not with --json: the record says it all) */
    json_t *rec = eai_wait_and_print(&h, id, o.json, 1);
    if (rec) {
        if (json_is_true(json_object_get(rec, "stdout_truncated")))
            fprintf(stderr, "eai: %s: stdout was truncated at the output limit\n", id);
        if (json_is_true(json_object_get(rec, "stderr_truncated")))
            fprintf(stderr, "eai: %s: stderr was truncated at the output limit\n", id);
        rc = eai_exit_for(rec);
        if (download && eai_download_files(&h, rec, download, o.json) > 0) {
            fprintf(stderr, "eai: %s: some files could not be downloaded into %s\n", id, download);
            if (rc == 0)
                rc = EAI_EXIT_PLATFORM;
        }
        json_decref(rec);
    }
    eai_http_free(&h);
out:
    json_decref(body);
    json_decref(limits);
    json_decref(env);
    json_decref(files);
    json_decref(collect);
    json_decref(command);
    return rc;
}
