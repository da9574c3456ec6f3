/* eai volume create|ls|get|delete|put|cat|files|rm (docs/volumes.md), and
 * the --volume NAME:/mnt/PATH[:ro] option of exec and session create. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "eai.h"

int eai_volume_opt(json_t *body, const char *spec)
{
    /* NAME:/mnt/PATH or NAME:/mnt/PATH:ro */
    const char *c = spec ? strchr(spec, ':') : NULL;
    if (!c || c == spec || c[1] != '/') {
        fprintf(stderr, "eai: --volume wants NAME:/mnt/PATH[:ro], got '%s'\n", spec ? spec : "");
        return -1;
    }
    char *name = strndup(spec, (size_t)(c - spec)), *path = strdup(c + 1);
    if (!name || !path) {
        free(name);
        free(path);
        return -1;
    }
    int ro = 0;
    size_t n = strlen(path);
    if (n > 3 && strcmp(path + n - 3, ":ro") == 0) {
        path[n - 3] = '\0';
        ro = 1;
    } else if (n > 3 && strcmp(path + n - 3, ":rw") == 0) {
        path[n - 3] = '\0';
    }
    json_t *vols = json_object_get(body, "volumes");
    if (!vols) {
        vols = json_array();
        json_object_set_new(body, "volumes", vols);
    }
    json_array_append_new(vols, json_pack("{s:s, s:s, s:b}", "name", name, "path", path, "read_only", ro));
    free(name);
    free(path);
    return 0;
}

static int vpath(char *out, size_t n, const char *ref, const char *rest, const char *file)
{
    if (!ref || !*ref || strpbrk(ref, "/?#%")) {
        fprintf(stderr, "eai: '%s' is not a volume name or id\n", ref ? ref : "");
        return -1;
    }
    if ((size_t)snprintf(out, n, "/v1/volumes/%s%s", ref, rest ? rest : "") >= n)
        return -1;
    if (file) {
        while (*file == '/')
            file++;
        if (eai_url_path_append(out, n, "/") < 0 || eai_url_path_append(out, n, file) < 0)
            return -1;
    }
    return 0;
}

static json_t *vcall(struct eai_http *h, const char *method, const char *path, const char *body, size_t len,
                     long want, const char *what)
{
    long status;
    json_t *resp = NULL;
    if (eai_http_call_len(h, method, path, body, len, NULL, &status, &resp, 0) < 0)
        return NULL;
    if (status != want) {
        eai_print_api_error(what, status, resp);
        json_decref(resp);
        return NULL;
    }
    return resp ? resp : json_object();
}

static void print_row(const json_t *v)
{
    const json_t *att = json_object_get(v, "attached");
    const json_t *sz = json_object_get(v, "size_bytes");
    const char *w = eai_jstr(att, "writer");
    printf("%-40s %-20s %12lld %-9s writer %s, %lld readers\n", eai_jstr(v, "id") ? eai_jstr(v, "id") : "?",
           eai_jstr(v, "name") ? eai_jstr(v, "name") : "?", json_is_integer(sz) ? (long long)json_integer_value(sz) : 0LL,
           eai_jstr(v, "status") ? eai_jstr(v, "status") : "?", w ? w : "-",
           (long long)json_integer_value(json_object_get(att, "readers")));
}

int eai_cmd_volume(const struct eai_opts *go, int argc, char **argv)
{
    static const char *const verbs = "create|ls|get|delete|put|cat|files|rm";
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        eai_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? EAI_EXIT_USAGE : 0;
    }
    struct eai_opts o = *go;
    const char *pos[4], *out = NULL;
    int npos = 0;
    for (int i = 2; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "--json") == 0) {
            o.json = 1;
        } else if ((strcmp(s, "--lang") == 0 || strcmp(s, "--url") == 0 || strcmp(s, "-o") == 0) && i + 1 < argc) {
            if (s[1] == 'o')
                out = argv[++i];
            else if (s[2] == 'l')
                o.lang = argv[++i];
            else
                o.url = argv[++i];
        } else if (s[0] == '-' && s[1]) {
            fprintf(stderr, "eai: volume: unknown option or missing value: %s\n", s);
            return EAI_EXIT_USAGE;
        } else if (npos < 4) {
            pos[npos++] = s;
        } else {
            return EAI_EXIT_USAGE;
        }
    }
    const char *verb = argv[1];
    static const struct {
        const char *verb;
        int min, max;
    } shape[] = {{"create", 2, 2}, {"ls", 0, 0}, {"get", 1, 1}, {"delete", 1, 1}, {"put", 3, 3},
                 {"cat", 2, 2},    {"files", 1, 2}, {"rm", 2, 2}};
    size_t k;
    for (k = 0; k < sizeof shape / sizeof shape[0]; k++)
        if (strcmp(verb, shape[k].verb) == 0)
            break;
    if (k == sizeof shape / sizeof shape[0]) {
        fprintf(stderr, "eai: unknown volume verb '%s' (%s)\n", verb, verbs);
        return EAI_EXIT_USAGE;
    }
    if (npos < shape[k].min || npos > shape[k].max || (out && strcmp(verb, "cat") != 0)) {
        fprintf(stderr, "eai: volume %s: wrong arguments (see eai --help)\n", verb);
        return EAI_EXIT_USAGE;
    }
    struct eai_http h;
    if (eai_http_init(&h, &o) < 0)
        return 1;
    int rc = 1;
    char path[8192];
    json_t *r = NULL;
    if (strcmp(verb, "create") == 0) {
        json_t *body = json_pack("{s:s, s:s}", "name", pos[0], "size", pos[1]);
        char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        r = text ? vcall(&h, "POST", "/v1/volumes", text, strlen(text), 201, "volume create") : NULL;
        free(text);
        json_decref(body);
        if (r && !o.json)
            printf("%s\n", eai_jstr(r, "id") ? eai_jstr(r, "id") : "?");
    } else if (strcmp(verb, "ls") == 0) {
        r = vcall(&h, "GET", "/v1/volumes", NULL, 0, 200, "volume ls");
        size_t i;
        json_t *it;
        if (r && !o.json)
            json_array_foreach(json_object_get(r, "items"), i, it) print_row(it);
    } else if (strcmp(verb, "get") == 0 || strcmp(verb, "delete") == 0) {
        if (vpath(path, sizeof path, pos[0], NULL, NULL) == 0)
            r = vcall(&h, verb[0] == 'g' ? "GET" : "DELETE", path, NULL, 0, 200, pos[0]);
        if (r && !o.json && verb[0] == 'g')
            eai_print_json(r);
        else if (r && !o.json)
            printf("%s deleted (%.6f GB-hours)\n", pos[0],
                   json_number_value(json_object_get(json_object_get(r, "usage"), "gb_hours")));
    } else if (strcmp(verb, "put") == 0) {
        size_t len = 0;
        unsigned char *d = eai_read_local(strcmp(pos[1], "-") == 0 ? "/dev/stdin" : pos[1], &len);
        if (!d)
            fprintf(stderr, "eai: cannot read '%s': %s\n", pos[1], strerror(errno));
        else if (vpath(path, sizeof path, pos[0], "/files", pos[2]) == 0)
            r = vcall(&h, "PUT", path, len ? (const char *)d : "", len, 200, pos[2]);
        free(d);
    } else if (strcmp(verb, "rm") == 0) {
        if (vpath(path, sizeof path, pos[0], "/files", pos[1]) == 0)
            r = vcall(&h, "DELETE", path, NULL, 0, 200, pos[1]);
    } else if (strcmp(verb, "files") == 0) {
        if (vpath(path, sizeof path, pos[0], "/files", NULL) == 0 &&
            (npos < 2 || eai_url_query_append(path, sizeof path, "path", pos[1]) == 0))
            r = vcall(&h, "GET", path, NULL, 0, 200, pos[0]);
        size_t i;
        json_t *it;
        if (r && !o.json)
            json_array_foreach(json_object_get(r, "items"), i, it)
            {
                const json_t *n = json_object_get(it, "size");
                printf("%-7s %12lld  %s\n", eai_jstr(it, "type") ? eai_jstr(it, "type") : "?",
                       json_is_integer(n) ? (long long)json_integer_value(n) : 0LL,
                       eai_jstr(it, "path") ? eai_jstr(it, "path") : "?");
            }
    } else { /* cat */
        FILE *f = NULL;
        if (vpath(path, sizeof path, pos[0], "/files", pos[1]) == 0) {
            f = out ? fopen(out, "wbe") : stdout;
            if (!f)
                fprintf(stderr, "eai: cannot write '%s': %s\n", out, strerror(errno));
        }
        if (f) {
            long status = 0;
            json_t *err = NULL;
            uint64_t bytes = 0;
            if (eai_http_download(&h, path, f, &status, &err, &bytes) == 0) {
                if (status == 200)
                    rc = 0;
                else
                    eai_print_api_error(pos[1], status, err);
            }
            json_decref(err);
            if (out && fclose(f) != 0)
                rc = 1;
            else if (!out)
                fflush(stdout);
        }
    }
    if (r) {
        if (o.json)
            eai_print_json(r);
        rc = 0;
        json_decref(r);
    }
    eai_http_free(&h);
    return rc;
}
