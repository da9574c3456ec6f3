/* eai get | logs | cancel | ls | files, and downloading collected files. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "eai.h"

/* Arguments of the small commands: common options, a few of their own
 * (name=value pairs in spec, NULL-terminated), positional arguments. */
struct args {
    struct eai_opts o;
    const char *pos[4];
    int npos;
    const char *val[8]; /* values of spec options, by index */
    int flag[8];        /* flags of spec options (no value) */
};

struct spec {
    const char *name;
    int has_value;
};

static int parse_args(const struct eai_opts *go, int argc, char **argv, const struct spec *spec, int max_pos,
                      struct args *a, const char *usage)
{
    memset(a, 0, sizeof *a);
    a->o = *go;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
            printf("usage: %s\n", usage);
            return 1;
        }
        if (strcmp(s, "--json") == 0) {
            a->o.json = 1;
            continue;
        }
        if (strcmp(s, "--lang") == 0 || strcmp(s, "--url") == 0) {
            if (i + 1 >= argc)
                goto bad;
            if (s[2] == 'l')
                a->o.lang = argv[++i];
            else
                a->o.url = argv[++i];
            continue;
        }
        if (s[0] == '-' && s[1]) {
            int k;
            for (k = 0; spec && spec[k].name; k++)
                if (strcmp(s, spec[k].name) == 0)
                    break;
            if (!spec || !spec[k].name) {
                fprintf(stderr, "eai: unknown option %s\n", s);
                goto bad;
            }
            if (spec[k].has_value) {
                if (i + 1 >= argc)
                    goto bad;
                a->val[k] = argv[++i];
            } else {
                a->flag[k] = 1;
            }
            continue;
        }
        if (a->npos >= max_pos)
            goto bad;
        a->pos[a->npos++] = s;
    }
    return 0;
bad:
    fprintf(stderr, "usage: %s\n", usage);
    return -1;
}

/* Reject ids that would change the URL's shape (the server validates the rest). */
static int id_ok(const char *id)
{
    if (!id || !*id || strlen(id) > 100 || strpbrk(id, "/?#%")) {
        fprintf(stderr, "eai: '%s' is not an execution id (sbx_<uuid>)\n", id ? id : "");
        return 0;
    }
    return 1;
}

static json_t *fetch_exec(struct eai_http *h, const char *id, int *rc)
{
    char path[256];
    long status;
    json_t *resp = NULL;
    snprintf(path, sizeof path, "/v1/sandbox/executions/%s", id);
    *rc = 1;
    if (eai_http_call(h, "GET", path, NULL, NULL, &status, &resp, 0) < 0)
        return NULL;
    if (status != 200 || !json_is_object(resp)) {
        eai_print_api_error(id, status, resp);
        json_decref(resp);
        return NULL;
    }
    *rc = 0;
    return resp;
}

/* ------------------------------------------------------------ get, logs */

int eai_cmd_get(const struct eai_opts *go, int argc, char **argv)
{
    struct args a;
    const char *use = "eai get ID   (the execution as JSON)";
    int p = parse_args(go, argc, argv, NULL, 1, &a, use);
    if (p > 0)
        return 0;
    if (p < 0 || a.npos != 1) {
        if (p == 0)
            fprintf(stderr, "usage: %s\n", use);
        return EAI_EXIT_USAGE;
    }
    if (!id_ok(a.pos[0]))
        return EAI_EXIT_USAGE;
    struct eai_http h;
    int rc = 1;
    if (eai_http_init(&h, &a.o) == 0) {
        json_t *rec = fetch_exec(&h, a.pos[0], &rc);
        if (rec)
            eai_print_json(rec);
        json_decref(rec);
    }
    eai_http_free(&h);
    return rc;
}

int eai_cmd_logs(const struct eai_opts *go, int argc, char **argv)
{
    static const struct spec spec[] = {{"-f", 0}, {"--follow", 0}, {NULL, 0}};
    struct args a;
    const char *use = "eai logs ID [-f|--follow] [--json]   (stdout to stdout, stderr to stderr;\n"
                      "       --follow: as it runs, until the end)";
    int p = parse_args(go, argc, argv, spec, 1, &a, use);
    if (p > 0)
        return 0;
    if (p < 0 || a.npos != 1) {
        if (p == 0)
            fprintf(stderr, "usage: %s\n", use);
        return EAI_EXIT_USAGE;
    }
    if (!id_ok(a.pos[0]))
        return EAI_EXIT_USAGE;
    struct eai_http h;
    int rc = 1;
    if (eai_http_init(&h, &a.o) == 0) {
        int follow = a.flag[0] || a.flag[1];
        uint64_t printed[2] = {0, 0};
        json_t *rec;
        if (follow) {
            if (!a.o.json)
                eai_follow_events(&h, a.pos[0], printed);
            rec = eai_wait_terminal(&h, a.pos[0]);
            rc = rec ? 0 : 1;
        } else {
            rec = fetch_exec(&h, a.pos[0], &rc);
        }
        if (rec && follow && !a.o.json) {
            eai_print_rest(rec, printed);
        } else if (rec && a.o.json) {
            json_t *o = json_object();
            const char *keys[] = {"id", "status", "stdout", "stderr", "stdout_encoding", "stderr_encoding",
                                  "stdout_truncated", "stderr_truncated"};
            for (size_t i = 0; o && i < sizeof keys / sizeof keys[0]; i++)
                if (json_object_get(rec, keys[i]))
                    json_object_set(o, keys[i], json_object_get(rec, keys[i]));
            eai_print_json(o);
            json_decref(o);
        } else if (rec) {
            eai_print_stream(rec, "stdout", stdout);
            eai_print_stream(rec, "stderr", stderr);
            if (!eai_is_terminal(eai_jstr(rec, "status")))
                fprintf(stderr, "eai: %s is still %s\n", a.pos[0], eai_jstr(rec, "status"));
        }
        json_decref(rec);
    }
    eai_http_free(&h);
    return rc;
}

/* ------------------------------------------------------------ cancel */

int eai_cmd_cancel(const struct eai_opts *go, int argc, char **argv)
{
    struct args a;
    const char *use = "eai cancel ID [--json]";
    int p = parse_args(go, argc, argv, NULL, 1, &a, use);
    if (p > 0)
        return 0;
    if (p < 0 || a.npos != 1) {
        if (p == 0)
            fprintf(stderr, "usage: %s\n", use);
        return EAI_EXIT_USAGE;
    }
    if (!id_ok(a.pos[0]))
        return EAI_EXIT_USAGE;
    struct eai_http h;
    int rc = 1;
    if (eai_http_init(&h, &a.o) == 0) {
        char path[256];
        long status;
        json_t *resp = NULL;
        snprintf(path, sizeof path, "/v1/sandbox/executions/%s/cancel", a.pos[0]);
        if (eai_http_call(&h, "POST", path, NULL, NULL, &status, &resp, 0) == 0) {
            if (status == 202 || status == 200) {
                const char *st = eai_jstr(resp, "status") ? eai_jstr(resp, "status") : "?";
                if (a.o.json)
                    eai_print_json(resp);
                else
                    printf("%s\t%s%s\n", a.pos[0], st,
                           strcmp(st, "cancelled") == 0 ? "" : "\t(cancel requested; it ends as cancelled)");
                rc = 0;
            } else {
                eai_print_api_error("cancel", status, resp);
            }
        }
        json_decref(resp);
    }
    eai_http_free(&h);
    return rc;
}

/* ------------------------------------------------------------ ls */

static void ls_row(const json_t *e)
{
    const json_t *code = json_object_get(e, "exit_code");
    char exit_s[24] = "-";
    if (json_is_integer(code))
        snprintf(exit_s, sizeof exit_s, "%lld", (long long)json_integer_value(code));
    const char *f[] = {eai_jstr(e, "id"), eai_jstr(e, "status"), exit_s, eai_jstr(e, "profile"),
                       eai_jstr(e, "image"), eai_jstr(e, "created_at")};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        printf("%s%s", i ? "\t" : "", f[i] ? f[i] : "-");
    putchar('\n');
}

int eai_cmd_ls(const struct eai_opts *go, int argc, char **argv)
{
    static const struct spec spec[] = {{"--status", 1}, {"--run-id", 1}, {"--limit", 1},
                                       {"--after", 1},  {"--all", 0},    {NULL, 0}};
    const char *use = "eai ls [--status S] [--run-id R] [--limit 1..100] [--after CURSOR] [--all] [--json]";
    struct args a;
    int p = parse_args(go, argc, argv, spec, 0, &a, use);
    if (p > 0)
        return 0;
    if (p < 0)
        return EAI_EXIT_USAGE;
    if (a.val[2]) {
        char *end = NULL;
        long n = strtol(a.val[2], &end, 10);
        if (!*a.val[2] || *end || n < 1 || n > 100) {
            fprintf(stderr, "eai: --limit wants 1..100, got '%s'\n", a.val[2]);
            return EAI_EXIT_USAGE;
        }
    }
    struct eai_http h;
    if (eai_http_init(&h, &a.o) < 0) {
        eai_http_free(&h);
        return 1;
    }
    int all = a.flag[4], rc = 0;
    size_t total = 0;
    json_t *items = json_array(), *next = json_null();
    char cursor[256] = "";
    if (a.val[3])
        snprintf(cursor, sizeof cursor, "%s", a.val[3]);
    if (!a.o.json)
        printf("ID\tSTATUS\tEXIT\tPROFILE\tIMAGE\tCREATED_AT\n");
    for (;;) {
        char path[1024] = "/v1/sandbox/executions";
        if ((a.val[0] && eai_url_query_append(path, sizeof path, "status", a.val[0]) < 0) ||
            (a.val[1] && eai_url_query_append(path, sizeof path, "run_id", a.val[1]) < 0) ||
            (a.val[2] && eai_url_query_append(path, sizeof path, "limit", a.val[2]) < 0) ||
            (cursor[0] && eai_url_query_append(path, sizeof path, "after", cursor) < 0)) {
            fprintf(stderr, "eai: ls: arguments too long\n");
            rc = EAI_EXIT_USAGE;
            break;
        }
        long status;
        json_t *resp = NULL;
        if (eai_http_call(&h, "GET", path, NULL, NULL, &status, &resp, 0) < 0) {
            rc = 1;
            break;
        }
        if (status != 200 || !json_is_array(json_object_get(resp, "items"))) {
            eai_print_api_error("ls", status, resp);
            json_decref(resp);
            rc = 1;
            break;
        }
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(resp, "items"), i, e) {
            if (a.o.json)
                json_array_append(items, e);
            else
                ls_row(e);
            total++;
        }
        json_decref(next);
        next = json_incref(json_object_get(resp, "next"));
        if (!next)
            next = json_null();
        json_decref(resp);
        if (!all || !json_is_string(next) || total >= EAI_LS_MAX_ALL)
            break;
        snprintf(cursor, sizeof cursor, "%s", json_string_value(next));
    }
    if (rc == 0) {
        if (a.o.json) {
            json_t *page = json_pack("{s:O, s:O}", "items", items, "next", next);
            eai_print_json(page);
            json_decref(page);
        } else if (json_is_string(next)) {
            fflush(stdout);
            fprintf(stderr, "eai: more: eai ls --after %s%s\n", json_string_value(next),
                    all ? " (stopped at the --all bound)" : "");
        }
    }
    json_decref(items);
    json_decref(next);
    eai_http_free(&h);
    return rc;
}

/* ------------------------------------------------------------ files */

/* GET one collected file into f, checking size and sha256 when given.
 * 0 or -1 (reported). */
static int fetch_file(struct eai_http *h, const char *id, const json_t *meta, const char *fpath, FILE *f)
{
    char path[4096];
    snprintf(path, sizeof path, "/v1/sandbox/executions/%s/files", id);
    if (eai_url_path_append(path, sizeof path, fpath) < 0) {
        fprintf(stderr, "eai: %s: path too long\n", fpath);
        return -1;
    }
    long status;
    json_t *err = NULL;
    uint64_t bytes = 0;
    if (eai_http_download(h, path, f, &status, &err, &bytes) < 0)
        return -1;
    if (status != 200) {
        eai_print_api_error(fpath, status, err);
        json_decref(err);
        return -1;
    }
    json_decref(err);
    const json_t *size = json_object_get(meta, "size");
    if (json_is_integer(size) && (uint64_t)json_integer_value(size) != bytes) {
        fprintf(stderr, "eai: %s: got %llu bytes, the execution lists %lld\n", fpath, (unsigned long long)bytes,
                (long long)json_integer_value(size));
        return -1;
    }
    const char *want = eai_jstr(meta, "sha256");
    char got[65];
    if (want) {
        if (eai_sha256_file(f, got) < 0) {
            fprintf(stderr, "eai: %s: cannot read back: %s\n", fpath, strerror(errno));
            return -1;
        }
        if (strcmp(got, want) != 0) {
            fprintf(stderr, "eai: %s: sha256 %s differs from the listed %s\n", fpath, got, want);
            return -1;
        }
    }
    return 0;
}

int eai_download_files(struct eai_http *h, const json_t *rec, const char *dir, int quiet)
{
    const char *id = eai_jstr(rec, "id");
    const json_t *files = json_object_get(rec, "files");
    int failures = 0;
    size_t i;
    const json_t *meta;
    if (json_is_true(json_object_get(rec, "files_truncated")))
        fprintf(stderr, "eai: %s: the collect caps left some files out (files_truncated)\n", id);
    if (!quiet && json_array_size(files) == 0)
        fprintf(stderr, "eai: %s: no collected files\n", id);
    json_array_foreach(files, i, meta) {
        const char *fpath = eai_jstr(meta, "path");
        const char *rel = eai_rel_to_tmp(fpath);
        if (!rel) {
            fprintf(stderr, "eai: %s: refusing to save a file whose path is not under /tmp\n", fpath ? fpath : "?");
            failures++;
            continue;
        }
        struct eai_out ctx;
        FILE *f = eai_out_open(dir, rel, &ctx);
        if (!f) {
            fprintf(stderr, "eai: %s/%s: %s\n", dir, rel, strerror(errno));
            failures++;
            continue;
        }
        if (fetch_file(h, id, meta, fpath, f) < 0) {
            eai_out_abort(f, &ctx);
            failures++;
            continue;
        }
        if (eai_out_commit(f, &ctx) < 0) {
            fprintf(stderr, "eai: %s/%s: %s\n", dir, rel, strerror(errno));
            failures++;
            continue;
        }
        if (!quiet)
            fprintf(stderr, "eai: saved %s/%s (%lld bytes)\n", dir, rel,
                    (long long)json_integer_value(json_object_get(meta, "size")));
    }
    return failures;
}

int eai_cmd_files(const struct eai_opts *go, int argc, char **argv)
{
    static const struct spec spec[] = {{"-o", 1}, {"--output", 1}, {"--download", 1}, {NULL, 0}};
    const char *use = "eai files ID                      list the collected files\n"
                      "       eai files ID PATH [-o FILE]       one file's bytes to stdout or FILE\n"
                      "       eai files ID --download DIR       every file into DIR (paths relative to /tmp)";
    struct args a;
    int p = parse_args(go, argc, argv, spec, 2, &a, use);
    if (p > 0)
        return 0;
    if (p < 0 || a.npos < 1 || (a.npos == 2 && a.val[2]) || (a.npos == 1 && (a.val[0] || a.val[1]))) {
        if (p == 0)
            fprintf(stderr, "usage: %s\n", use);
        return EAI_EXIT_USAGE;
    }
    const char *id = a.pos[0], *out = a.val[0] ? a.val[0] : a.val[1];
    if (!id_ok(id))
        return EAI_EXIT_USAGE;
    struct eai_http h;
    int rc = 1;
    if (eai_http_init(&h, &a.o) < 0) {
        eai_http_free(&h);
        return 1;
    }
    json_t *rec = fetch_exec(&h, id, &rc);
    if (!rec) {
        eai_http_free(&h);
        return rc;
    }
    const json_t *files = json_object_get(rec, "files");
    if (a.npos == 1 && a.val[2]) {
        rc = eai_download_files(&h, rec, a.val[2], a.o.json) ? 1 : 0;
    } else if (a.npos == 1) {
        if (a.o.json) {
            json_t *o = json_pack("{s:s, s:O, s:b}", "id", id, "files", files ? files : json_null(),
                                  "files_truncated", json_is_true(json_object_get(rec, "files_truncated")));
            eai_print_json(o);
            json_decref(o);
        } else {
            size_t i;
            const json_t *m;
            printf("PATH\tSIZE\tSHA256\n");
            json_array_foreach(files, i, m)
                printf("%s\t%lld\t%s\n", eai_jstr(m, "path") ? eai_jstr(m, "path") : "?",
                       (long long)json_integer_value(json_object_get(m, "size")),
                       eai_jstr(m, "sha256") ? eai_jstr(m, "sha256") : "-");
            if (json_is_true(json_object_get(rec, "files_truncated")))
                fprintf(stderr, "eai: %s: the collect caps left some files out (files_truncated)\n", id);
        }
        rc = 0;
    } else {
        /* One file: into a temporary file first so its size and sha256 are
         * checked before a byte reaches stdout or FILE. */
        char want[4096];
        snprintf(want, sizeof want, "%s%s", a.pos[1][0] == '/' ? "" : "/", a.pos[1]);
        const json_t *meta = NULL, *m;
        size_t i;
        json_array_foreach(files, i, m)
            if (eai_jstr(m, "path") && strcmp(eai_jstr(m, "path"), want) == 0)
                meta = m;
        FILE *tmp = tmpfile();
        rc = 1;
        if (!tmp) {
            fprintf(stderr, "eai: temporary file: %s\n", strerror(errno));
        } else if (fetch_file(&h, id, meta, want, tmp) == 0 && fseek(tmp, 0, SEEK_SET) == 0) {
            FILE *dst = out ? fopen(out, "wbe") : stdout;
            if (!dst) {
                fprintf(stderr, "eai: %s: %s\n", out, strerror(errno));
            } else {
                char buf[65536];
                size_t n;
                rc = 0;
                while ((n = fread(buf, 1, sizeof buf, tmp)) > 0)
                    if (fwrite(buf, 1, n, dst) != n) {
                        rc = 1;
                        break;
                    }
                if (ferror(tmp) || fflush(dst) != 0 || (out && fclose(dst) != 0))
                    rc = 1;
                if (rc)
                    fprintf(stderr, "eai: writing %s: %s\n", out ? out : "stdout", strerror(errno));
            }
        }
        if (tmp)
            fclose(tmp);
    }
    json_decref(rec);
    eai_http_free(&h);
    return rc;
}
